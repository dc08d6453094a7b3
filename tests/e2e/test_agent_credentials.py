"""Issue 11: after a chart install, on-demand dumps work in a brand-new namespace, with no manual Secret.

The operator runs with the environment the chart renders (its Deployment's values: the agents' key ring
in the release namespace, RBAC without Secrets in training namespaces), beside what only the local
cluster changes (loopback ports, plain-HTTP webhook). A namespace made for the test, labelled Pod Security
"restricted", gets an opted-in 2-rank job (``frwatch_dev.workloads.on_demand``): rank 0 dumps and
crashes; rank 1 dumps only when something writes to its NCCL pipe. Its dump in the store means the
operator asked its agent, with the token the webhook derived from the key ring. Nobody creates a
Secret for the agent's token: the namespace holds none.

On a real cluster (``FRWATCH_E2E_KUBECONFIG``, frwatch installed with its chart) the test makes its own
namespace (and copies the S3 Secret ``frwatch-s3`` from ``FRWATCH_E2E_NAMESPACE`` when there is one: S3
credentials are not the agent's token) and deletes it at the end.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import Target, wait_for
from kubernetes import client

from frwatch_dev.localcluster.cluster import OPERATOR_NAMESPACE, S3_SECRET, LocalCluster, operator_available
from frwatch_dev.ports import free_port
from frwatch_dev.workloads import ON_DEMAND
from frwatch_operator import constants as c

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chart"))
from chart_helpers import NAMESPACE as RELEASE_NAMESPACE
from chart_helpers import render

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: Settings of the rendered Deployment that only make sense in a pod (its ports, its mounted certificate):
#: the local cluster sets its own.
POD_ONLY = ("FRWATCH_WEBHOOK_PORT", "FRWATCH_WEBHOOK_HOST", "FRWATCH_WEBHOOK_CERT_FILE",
            "FRWATCH_WEBHOOK_KEY_FILE", "FRWATCH_OPERATOR_HEALTH_PORT", "FRWATCH_OPERATOR_METRICS_PORT")  # fmt: skip
ON_DEMAND_CRASHING = [*ON_DEMAND, "--crash-rank", "0", "--max-runtime-s", "150"]
#: What a training container sets to run in a "restricted" namespace.
RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
              "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip


def chart_env() -> dict[str, str]:
    """The operator container's environment as the chart renders it with its default values."""
    (deployment,) = [d for d in render() if d["kind"] == "Deployment"]
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    return {e["name"]: e["value"] for e in env if "value" in e and e["name"] not in POD_ONLY}


@pytest.fixture
def installed() -> Iterator[Target]:
    real = os.environ.get("FRWATCH_E2E_KUBECONFIG")
    if real:
        yield Target(Path(real), os.environ.get("FRWATCH_E2E_NAMESPACE", "frwatch-e2e"),
                     image=os.environ.get("FRWATCH_E2E_IMAGE", "ghcr.io/frwatch/frwatch:0.1.0"), local=None)  # fmt: skip
        return
    if not operator_available():
        pytest.skip("`frwatch operator` is not in this checkout")
    env = chart_env()
    assert env["FRWATCH_AGENT_KEY_NAMESPACE"] == RELEASE_NAMESPACE == OPERATOR_NAMESPACE
    # the local pods share the host's loopback (an IP each, reused by every local cluster): a free port
    # for the agents' control endpoint, as for the operator's own ports
    env["FRWATCH_AGENT_CONTROL_PORT"] = str(free_port())
    with LocalCluster(namespaces=(), operator_env=env) as cluster:
        yield Target(Path(cluster.kubeconfig), "", image="ghcr.io/frwatch/frwatch:0.1.0", local=cluster)


def new_namespace(target: Target) -> str:
    """A namespace made now, labelled Pod Security restricted, with the S3 keys only (never a token)."""
    name = f"fresh-{uuid.uuid4().hex[:6]}"
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    target.core.create_namespace({"metadata": {"name": name, "labels": labels}})
    if target.local is not None:
        target.local.prepare_namespace(name)  # the S3 keys of the local store
    elif target.namespace:
        try:
            s3 = target.core.read_namespaced_secret(S3_SECRET, target.namespace)
        except client.ApiException:
            return name  # S3 credentials by workload identity: nothing to copy
        target.core.create_namespaced_secret(name, {"metadata": {"name": S3_SECRET}, "data": s3.data})
    return name


def test_an_on_demand_dump_in_a_new_namespace_needs_no_manual_secret(installed: Target) -> None:
    namespace = new_namespace(installed)
    target = Target(installed.kubeconfig, namespace, installed.image, installed.local)
    try:
        name = target.submit(ON_DEMAND_CRASHING, prefix="ondemand", workers=1, security_context=RESTRICTED)
        pods = wait_for(lambda: len(p := target.pods(name)) == 2 and p, 60, f"the 2 pods of {name}")
        for pod in pods:  # admitted in a restricted namespace, with the agent and its derived token
            agent = pod["spec"]["initContainers"][0]
            assert agent["name"] == c.AGENT_CONTAINER and agent["securityContext"]["runAsNonRoot"] is True
            assert any(e["name"] == "FRWATCH_AGENT_TOKEN" and e.get("value") for e in agent["env"])
        try:
            incident = wait_for(
                lambda: [i for i in target.incidents(name)
                         if ((i.get("status") or {}).get("counts") or {}).get("dumpedRanks") == 2],
                150, f"an Incident of {name} with both ranks dumped (rank 1 only on request)",
            )[0]  # fmt: skip
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{target.diagnostics()}") from None
        assert incident["status"]["counts"]["expectedRanks"] == 2
        secrets = {s.metadata.name for s in target.core.list_namespaced_secret(namespace).items}
        assert "frwatch-agent-token" not in secrets and secrets <= {S3_SECRET}, secrets
        if installed.local is not None:  # the operator made its key ring in its own namespace by itself
            key = chart_env()["FRWATCH_AGENT_KEY_SECRET"]
            assert target.core.read_namespaced_secret(key, OPERATOR_NAMESPACE).data
            worker = next(p for p in target.pods(name) if p["metadata"]["name"].endswith("worker-0"))
            statuses = {s["name"]: s for s in worker["status"].get("containerStatuses") or []}
            state = statuses["pytorch"]["state"]
            assert "running" in state or state.get("terminated", {}).get("exitCode") == 0, state
    finally:
        if installed.local is None:
            installed.core.delete_namespace(namespace)
