"""Issue 26: the chart installed as rendered, keyless (``storeAccess.mode=identity``, IRSA-style), gets a verdict.

Every object the chart renders for this cluster's store (ServiceAccounts with their role annotations, RBAC, the
Deployment, Services, the MutatingWebhookConfiguration, the webhook's TLS Secret) is applied with kubectl to the
local cluster, unchanged. The emulator runs no Deployment, so the operator runs as a process with the
environment of the rendered Deployment's container, resolved as a kubelet does (``podspec.container_env``),
beside the few settings only a pod can have (its ports, its mounted certificate: the local cluster's own, as in
``test_agent_credentials.py``). The emulator sends pod admissions through the chart's webhook configuration.

No Secret holds a store key anywhere. Each party's keys come from its ServiceAccount's role through the pod
identity stand-in (``frwatch_dev.localcluster.identity``): the operator's (``storeAccess.
operatorServiceAccountAnnotations``), the analyzer Jobs' (``<release>-analyzer``,
``storeAccess.analyzerServiceAccountAnnotations``) and the agents' (the training namespace's ``default``
ServiceAccount, annotated as docs/install.md tells a user), each role a SeaweedFS identity of its own with the
path-scoped policy of docs/install.md. boto3 finds them through its environment-variable provider. What this
does not show: the exchange of a web identity token at STS (no STS here).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import WORKLOAD, Target

from frwatch_dev.localcluster import podspec
from frwatch_dev.localcluster.cluster import OPERATOR_NAMESPACE, LocalCluster, operator_available
from frwatch_dev.localcluster.identity import ROLE_ANNOTATION
from frwatch_dev.ports import free_port
from frwatch_operator import constants as c

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chart"))
from chart_helpers import NAMESPACE as RELEASE_NAMESPACE
from chart_helpers import RELEASE, render

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TEAM = "team-keyless"
ACCOUNT = "arn:aws:iam::111122223333:role"
OPERATOR_ROLE, ANALYZER_ROLE, AGENTS_ROLE = (f"{ACCOUNT}/frwatch-operator", f"{ACCOUNT}/frwatch-analyzer",
                                             f"{ACCOUNT}/frwatch-agents-{TEAM}")  # fmt: skip
KEYS = {role: (f"{role.rsplit('/', 1)[1]}-key", f"{role.rsplit('/', 1)[1]}-secret")
        for role in (OPERATOR_ROLE, ANALYZER_ROLE, AGENTS_ROLE)}  # fmt: skip
#: each role's SeaweedFS identity: the policies of docs/install.md, "Least privilege for the evidence"
ACTIONS = {
    OPERATOR_ROLE: ["Read:frwatch", "List:frwatch", "Write:frwatch"],
    ANALYZER_ROLE: ["Read:frwatch", "List:frwatch", "Write:frwatch/*/verdict.json", "Write:frwatch/*/report.txt",
                    "Write:frwatch/*/report.html", "Write:frwatch/*/summaries/*"],
    AGENTS_ROLE: [f"Write:frwatch/frwatch/{TEAM}/*/{d}/*" for d in ("ranks", "ranks-later", "pods", "nccl", "summaries")],
}  # fmt: skip
#: settings of the rendered Deployment that only make sense in a pod: the local cluster sets its own
POD_ONLY = ("FRWATCH_WEBHOOK_PORT", "FRWATCH_WEBHOOK_HOST", "FRWATCH_WEBHOOK_CERT_FILE",
            "FRWATCH_WEBHOOK_KEY_FILE", "FRWATCH_OPERATOR_HEALTH_PORT", "FRWATCH_OPERATOR_METRICS_PORT")  # fmt: skip


def values(store_endpoint: str, bucket: str) -> dict[str, Any]:
    return {
        "replicaCount": 1,  # the emulator has no policy/v1: no PodDisruptionBudget
        "s3": {"endpointUrl": store_endpoint, "bucket": bucket},
        "collection": {"deadlineSeconds": 30},
        "storeAccess": {
            "mode": "identity",
            "operatorServiceAccountAnnotations": {ROLE_ANNOTATION: OPERATOR_ROLE},
            "analyzerServiceAccountAnnotations": {ROLE_ANNOTATION: ANALYZER_ROLE},
        },
    }


def operator_env_from(deployment: dict[str, Any], cluster: LocalCluster) -> dict[str, str]:
    """The rendered operator container's environment, resolved as the kubelet resolves a pod's."""
    template = deployment["spec"]["template"]
    pod = {"metadata": {"name": f"{RELEASE}-0", "namespace": RELEASE_NAMESPACE, "uid": "local"},
           "spec": template["spec"]}  # fmt: skip

    def lookup(kind: str, name: str) -> dict[str, str] | None:
        raise AssertionError(f"the keyless Deployment references a {kind} {name!r}")

    container = template["spec"]["containers"][0]
    env = podspec.container_env(pod, container, pod_ip="127.0.0.1", host_ip="127.0.0.1", lookup=lookup)
    return {k: v for k, v in env.items() if k not in POD_ONLY}


@pytest.fixture
def installed() -> Iterator[tuple[Target, LocalCluster, list[dict[str, Any]]]]:
    if os.environ.get("FRWATCH_E2E_KUBECONFIG"):
        pytest.skip("applies the chart's objects to the local cluster; on a real cluster install the chart with "
                    "storeAccess.mode=identity and run the other e2e tests")  # fmt: skip
    if not operator_available():
        pytest.skip("`frwatch operator` is not in this checkout")
    identities = tuple({"name": role.rsplit("/", 1)[1], "actions": ACTIONS[role],
                        "credentials": [{"accessKey": key, "secretKey": secret}]}
                       for role, (key, secret) in KEYS.items())  # fmt: skip
    roles = {role: {"AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret} for role, (key, secret) in KEYS.items()}
    with LocalCluster(namespaces=(), start_operator=False, store_keys=False, store_identities=identities,
                      identity_roles=roles) as cluster:  # fmt: skip
        assert cluster.store is not None and cluster.identity is not None
        docs = render(values(cluster.store.endpoint, cluster.store.bucket))
        cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs), timeout=60)
        deployment = next(d for d in docs if d["kind"] == "Deployment")
        env = operator_env_from(deployment, cluster)
        # the operator's own identity: what its rendered ServiceAccount's role gives a pod of it
        sa = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        env |= cluster.identity.env_for(RELEASE_NAMESPACE, sa)
        env["FRWATCH_AGENT_CONTROL_PORT"] = str(free_port())  # pods share the host's loopback: a free port
        assert RELEASE_NAMESPACE == OPERATOR_NAMESPACE
        cluster.launch_operator(env, register_webhook=False)  # admissions go through the chart's configuration
        cluster.prepare_namespace(TEAM)  # the namespace only: no Secret
        sa_body = {"metadata": {"name": "default", "annotations": {ROLE_ANNOTATION: AGENTS_ROLE}}}
        target = Target(Path(cluster.kubeconfig), TEAM, image="ghcr.io/frwatch/frwatch:0.1.0", local=cluster)
        target.core.create_namespaced_service_account(TEAM, sa_body)
        yield target, cluster, docs


def secret_refs(obj: Any) -> list[str]:
    text = yaml.safe_dump(obj)
    return [word for word in ("secretKeyRef", "secretRef") if word in text]


def test_the_chart_as_rendered_keyless_gets_a_verdict(installed: tuple[Target, LocalCluster, list[dict[str, Any]]]) -> None:
    target, cluster, docs = installed
    assert cluster.identity is not None
    applied = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("ServiceAccount", f"{RELEASE}-analyzer") in applied and ("MutatingWebhookConfiguration", RELEASE) in applied
    name = target.submit([*WORKLOAD, "--scenario", "skip"])
    ann = target.wait_verdict(name, timeout=240)
    assert ann[c.ANN_CATEGORY] == "desync" and ann[c.ANN_SUSPECT_RANKS] == "1", ann
    incident = target.reported_incident(name)
    assert incident["status"]["counts"]["dumpedRanks"] == 4, incident["status"]

    # no Secret anywhere holds a store key
    for secret in target.core.list_secret_for_all_namespaces().items:
        assert not set(secret.data or {}) & {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, secret.metadata.name
    # the agents: no Secret reference; their keys came with the namespace's ServiceAccount role
    for pod in target.pods(name):
        agent = pod["spec"]["initContainers"][0]
        assert agent["name"] == c.AGENT_CONTAINER and secret_refs(agent) == []
        assert {"name": "AWS_ROLE_ARN", "value": AGENTS_ROLE} in agent["env"]
    # the analyzer Job's pod ran under the chart's analyzer ServiceAccount, with its role and no Secret
    analyzers = target.core.list_namespaced_pod(OPERATOR_NAMESPACE, label_selector=f"{c.LABEL_COMPONENT}=analyzer").items
    assert analyzers, "no analyzer pod"
    for pod in analyzers:
        spec = target.api.sanitize_for_serialization(pod)["spec"]
        assert spec["serviceAccountName"] == f"{RELEASE}-analyzer" and spec["automountServiceAccountToken"] is False
        assert secret_refs(spec) == []
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        assert env["AWS_ROLE_ARN"] == ANALYZER_ROLE and "AWS_ENDPOINT_URL" not in env
    granted = {(ns, role) for ns, _, role in cluster.identity.granted}
    assert granted == {(TEAM, AGENTS_ROLE), (OPERATOR_NAMESPACE, ANALYZER_ROLE)}, granted
