"""What the operator-mode TLS tests stand on: the chart's MutatingWebhookConfiguration in the emulator,
pods and AdmissionReviews, the webhook server on a thread, and an HTTPS client that verifies the server
the way the API server does (the caBundle as the only trust, the Service's DNS name as SNI and hostname)."""

from __future__ import annotations

import base64
import json
import ssl
import uuid
from pathlib import Path
from typing import Any

import urllib3
import yaml

from frwatch_operator import constants as c
from frwatch_operator.webhook import HANDLER_ID

SERVICE = "frwatch-webhook"


def configuration(name: str, namespace: str) -> dict[str, Any]:
    """The chart's MutatingWebhookConfiguration in tls.mode=operator (no caBundle), sent only pods of
    ``namespace`` (other tests share the emulator)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "inject.frwatch.io", "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"name": SERVICE, "namespace": namespace, "path": f"/{HANDLER_ID}",
                                         "port": 443}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"],
                       "scope": "Namespaced"}],
            "failurePolicy": "Ignore", "sideEffects": "None", "timeoutSeconds": 5,
            "objectSelector": {"matchExpressions": [{"key": c.KF_LABEL_JOB_NAME, "operator": "Exists"}]},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        }],
    }  # fmt: skip


def job(namespace: str, name: str = "llama") -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()),
                     "annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED}},
    }  # fmt: skip


def pod(namespace: str, job_name: str = "llama") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{job_name}-master-0", "namespace": namespace,
                     "labels": {c.KF_LABEL_JOB_NAME: job_name, c.KF_LABEL_REPLICA_TYPE: "master",
                                c.KF_LABEL_REPLICA_INDEX: "0", c.KF_LABEL_JOB_ROLE: "master"}},
        "spec": {"containers": [{"name": "pytorch", "image": "trainer:1"}], "restartPolicy": "Never"},
    }  # fmt: skip


def https_admit(port: int, ca_bundle_b64: str, hostname: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST an AdmissionReview over HTTPS to 127.0.0.1:``port`` as the API server would: trusting only the
    caBundle, with ``hostname`` as SNI and as the name the certificate must carry. Returns the response."""
    context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle_b64).decode("ascii"))
    pool = urllib3.HTTPSConnectionPool(
        "127.0.0.1", port, ssl_context=context, server_hostname=hostname, assert_hostname=hostname,
        retries=False, timeout=10.0,
    )  # fmt: skip
    try:
        resp = pool.request("POST", f"/{HANDLER_ID}", body=json.dumps(body).encode(),
                            headers={"Content-Type": "application/json"})  # fmt: skip
    finally:
        pool.close()
    assert resp.status == 200, resp.data
    answer: dict[str, Any] = json.loads(resp.data)["response"]
    return answer


# --- the real operator, configured by the chart --------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]
CRDS = [ROOT / "crds" / "incident.yaml", ROOT / "crds" / "capturepolicy.yaml",
        ROOT / "tests" / "emulator" / "pytorchjob-crd.yaml"]  # fmt: skip


def render_chart(values: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    """The chart's objects (helm-python-sdk, offline) as ``helm install -n namespace`` would create them."""
    import helm_python as helm

    with helm.Chart.load(ROOT / "charts" / "frwatch") as chart:
        chart.validate_schema(values)
        out = chart.render(values, name="frwatch", namespace=namespace, is_install=True)
    return [d for path, text in sorted(out.items()) if not path.endswith("NOTES.txt")
            for d in yaml.safe_load_all(text) if d]  # fmt: skip


def chart_env(docs: list[dict[str, Any]]) -> dict[str, str]:
    """The literal env of the chart's operator container."""
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}
