"""The real `frwatch operator`, configured by the chart's rendered env for webhook.tls.mode=operator, against
the API emulator behind the audit proxy: at start it creates the certificate Secret and patches the
chart's MutatingWebhookConfiguration, then its kopf webhook answers a real HTTPS AdmissionReview, verified
against that caBundle with the Service's DNS name as SNI, with the injection patch. A restart reuses the
same certificate and changes nothing. Every call it made is allowed by the chart's rendered RBAC."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes import config as kube_config
from tls_helpers import CRDS, chart_env, https_admit, pod, render_chart

from frwatch_dev.localcluster.audit import start_audit_proxy
from frwatch_dev.localcluster.rbac import check, grants_for
from frwatch_dev.ports import free_port
from frwatch_dev.testing.admission import patched, review
from frwatch_dev.testing.crds import ensure_crds
from frwatch_dev.testing.operator_process import OperatorProcess
from frwatch_dev.testing.polling import any_error, wait_for
from frwatch_operator import constants as c
from frwatch_operator.capture.webhook_tls import CA_CRT, TLS_CRT, certificate_names

USER = "frwatch-operator"


@pytest.fixture
def release(k8s_api: Any, k8s_namespace: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The chart in tls.mode=operator, rendered for the test's namespace; its MutatingWebhookConfiguration
    created as helm would (sent only this namespace's pods: the emulator is shared)."""
    api = kube_config.new_client_from_config()
    ensure_crds(api, CRDS)
    # operator.namespaces: the operator leaves the other tests' objects in the shared emulator alone.
    values = {"fullnameOverride": f"fw-{k8s_namespace[-6:]}", "webhook": {"tls": {"mode": "operator"}},
              "operator": {"namespaces": [k8s_namespace]}}  # fmt: skip
    docs = render_chart(values, k8s_namespace)
    [mwc] = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    mwc["webhooks"][0]["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": k8s_namespace}}
    admission = client.AdmissionregistrationV1Api(api)
    admission.create_mutating_webhook_configuration(mwc)
    try:
        yield {"api": api, "docs": docs, "namespace": k8s_namespace, "mwc": mwc["metadata"]["name"]}
    finally:
        admission.delete_mutating_webhook_configuration(mwc["metadata"]["name"])
        api.close()


def test_the_operator_makes_its_certificate_patches_the_ca_bundle_and_serves_it_over_https(
    release: dict[str, Any], k8s_api: Any, tmp_path: Path
) -> None:
    ns, api = release["namespace"], release["api"]
    core, admission = client.CoreV1Api(api), client.AdmissionregistrationV1Api(api)
    proxy = start_audit_proxy(k8s_api.url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FRWATCH_", "AWS_"))}
    env |= chart_env(release["docs"])
    # Loopback instead of the pod network; a folder instead of the emptyDir; S3 is never used here.
    env |= {
        "KUBECONFIG": str(proxy.write_kubeconfig(tmp_path / "kubeconfig", user=USER)),
        "FRWATCH_WEBHOOK_ADDR": "127.0.0.1",
        "FRWATCH_WEBHOOK_PORT": str(free_port()), "FRWATCH_WEBHOOK_CERTS_DIR": str(tmp_path / "certs"),
        "FRWATCH_WEBHOOK_JOB_WAIT_SECONDS": "5", "FRWATCH_OPERATOR_LISTEN_ADDR": "127.0.0.1",
        "FRWATCH_OPERATOR_HEALTH_PORT": str(free_port()), "FRWATCH_OPERATOR_METRICS_PORT": str(free_port()),
        "FRWATCH_S3_ENDPOINT_URL": "http://127.0.0.1:9",
    }  # fmt: skip
    secret_name = env["FRWATCH_WEBHOOK_CERTS_SECRET"]
    hostname = f"{env['FRWATCH_WEBHOOK_SERVICE_NAME']}.{ns}.svc"
    op = OperatorProcess(env, tmp_path / "operator.log")
    try:
        op.start()
        secret = core.read_namespaced_secret(secret_name, ns)
        ca, leaf = (base64.b64decode(secret.data[k]) for k in (CA_CRT, TLS_CRT))
        assert certificate_names(leaf) == {hostname, hostname + ".cluster.local"}
        mwc = admission.read_mutating_webhook_configuration(release["mwc"])
        bundle = mwc.webhooks[0].client_config.ca_bundle
        assert base64.b64decode(bundle) == ca
        assert [o.uid for o in secret.metadata.owner_references] == [mwc.metadata.uid]

        client.CustomObjectsApi(api).create_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "llama", "annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED}}, "spec": {},
        })  # fmt: skip
        obj = pod(ns)

        def injected() -> dict[str, Any] | None:
            out = patched(obj, https_admit(op.webhook_port, bundle, hostname, review(obj, ns)))
            return out if c.ANN_INJECTED in (out["metadata"].get("annotations") or {}) else None

        assert wait_for(injected, 20, "the injection patch over HTTPS", 0.1, not_yet=any_error)
        assert op.stop() == 0, op.log()[-3000:]

        # A restart: the same Secret (not even rewritten), the same caBundle, the same certificate served.
        op.start()
        again = core.read_namespaced_secret(secret_name, ns)
        assert again.metadata.resource_version == secret.metadata.resource_version
        assert again.data == secret.data
        assert admission.read_mutating_webhook_configuration(release["mwc"]).metadata.resource_version == (
            mwc.metadata.resource_version
        )
        assert wait_for(injected, 20, "the injection patch over HTTPS after the restart", 0.1, not_yet=any_error)
        assert op.stop() == 0, op.log()[-3000:]
    finally:
        op.stop()
        proxy.stop()

    calls = proxy.entries_for(USER)
    service_account = release["mwc"]  # the chart's full name
    coverage = check(calls, grants_for(release["docs"], service_account, ns))
    assert not coverage.denied, coverage.explain()
    tls_calls = [(e.verb, e.resource, e.name) for e in calls
                 if e.resource in ("secrets", "mutatingwebhookconfigurations")]  # fmt: skip
    key_secret = env["FRWATCH_AGENT_KEY_SECRET"]  # the agents' key ring, made at the first start, then read
    mwc_name = release["mwc"]
    assert tls_calls == [
        ("get", "mutatingwebhookconfigurations", mwc_name), ("get", "secrets", secret_name),
        ("create", "secrets", ""), ("patch", "mutatingwebhookconfigurations", mwc_name),
        ("get", "secrets", key_secret), ("create", "secrets", ""),
        # the restart: three reads, nothing written
        ("get", "mutatingwebhookconfigurations", mwc_name), ("get", "secrets", secret_name),
        ("get", "secrets", key_secret),
    ]  # fmt: skip
    records = op.log_records()
    assert any("created" in str(r.get("event")) for r in records), op.log()[-2000:]
