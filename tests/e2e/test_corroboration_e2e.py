"""Nothing a tenant writes cordons a node (issue 25), end to end on the local cluster.

- A verdict.json the tenant keeps rewriting in its job's prefix moves nothing: the operator acts only on the
  verdict whose digest the analyzer Job's termination message gives.
- Fabricated dumps on a node the tenant pinned its pod to nominate the node and never cordon it (even where a
  probe would fail there: a pinned node is not probed).
- A nominated node is cordoned only when frwatch's own probe Job fails on it; a passing probe leaves it alone.
- Jobs of two namespaces nominating one node corroborate each other (fleet memory), one namespace never does.

The probe is the local cluster's stand-in (``frwatch_dev.standin_probe``): it fails on a node given a
stand-in hardware fault (``LocalCluster.break_node``), which nothing in the API shows. The GPU hangs are
fabricated by the demo workload (no GPU here): these tests need the stand-ins and skip on a real cluster.
"""

from __future__ import annotations

import base64
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import botocore.config
import pytest
from e2e_helpers import GPU_HANG, WORKLOAD, Obj, Target, wait_for

from frwatch_analyzers.verdict import Category, Status, Verdict
from frwatch_dev.localcluster.cluster import LocalCluster, operator_available
from frwatch_dev.localcluster.kubelet import NodeSpec
from frwatch_dev.standin_probe import PROBE_ENV
from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NODES = ("node-a", "node-b", "node-c", "node-d")
NAMESPACE, OTHER_NAMESPACE = "e2e", "e2e-b"
CORDON = {"FRWATCH_COLLECTION_DEADLINE_SECONDS": "30", "FRWATCH_REMEDIATION_ENABLED": "true",
          "FRWATCH_REMEDIATION_DRY_RUN": "false"}  # fmt: skip


def _cluster(env: dict[str, str], nodes: tuple[str | NodeSpec, ...] = NODES, namespaces: tuple[str, ...] = (NAMESPACE,)
             ) -> Iterator[LocalCluster]:  # fmt: skip
    if os.environ.get("FRWATCH_E2E_KUBECONFIG"):
        pytest.skip("needs the stand-ins: fabricated GPU hangs and the stand-in probe's hardware faults")
    if not operator_available():
        pytest.skip("`frwatch operator` is not in this checkout")
    with LocalCluster(nodes=nodes, namespaces=namespaces, operator_env=env) as cluster:
        yield cluster


def _target(cluster: LocalCluster, namespace: str = NAMESPACE) -> Target:
    return Target(Path(cluster.kubeconfig), namespace, image="ghcr.io/frwatch/frwatch:0.1.0", local=cluster)


@pytest.fixture
def probing() -> Iterator[LocalCluster]:
    """An operator that really cordons, with the stand-in probe as its health check."""
    yield from _cluster({**CORDON, **PROBE_ENV})


@pytest.fixture
def two_tenants() -> Iterator[LocalCluster]:
    """An operator that really cordons and runs no probe; two tenant namespaces; only node-c in pool x."""
    nodes = tuple(NodeSpec(n, labels={"pool": "x"} if n == "node-c" else {}) for n in NODES)
    yield from _cluster(CORDON, nodes, (NAMESPACE, OTHER_NAMESPACE))


def submit(target: Target, command: list[str], *, master: Obj | None = None, workers: int = 3) -> str:
    """A PyTorchJob whose Master pod spec gets ``master`` too (placement the tenant chooses)."""
    name = f"trust-{uuid.uuid4().hex[:6]}"
    container = {"name": "pytorch", "image": target.image, "command": command}

    def replica(n: int, extra: Obj | None = None) -> Obj:
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [container], **(extra or {})}}}

    body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": target.namespace, "annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED}},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(1, master), "Worker": replica(workers)}}}  # fmt: skip
    target.custom.create_namespaced_custom_object("kubeflow.org", "v1", target.namespace, "pytorchjobs", body)
    return name


def ended_incident(target: Target, name: str, timeout: float = 150) -> Obj:
    """The job's Incident once Reported or Failed."""
    def ended() -> Obj | None:
        found = target.incidents(name)
        phase = (found[0].get("status") or {}).get("phase") if found else None
        return found[0] if phase in ("Reported", "Failed") else None

    try:
        return wait_for(ended, timeout, f"{name}'s Incident to end")  # type: ignore[no-any-return]
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{target.diagnostics()}") from None


def cordoned(target: Target, node: str) -> bool:
    return bool((target.node(node).get("spec") or {}).get("unschedulable"))


def node_events(target: Target, node: str, reason: str) -> list[str]:
    items = target.core.list_namespaced_event("default", field_selector=f"involvedObject.name={node}").items
    return [e.message for e in items if e.reason == reason]


def nomination(incident: Obj, node: str) -> Obj:
    found = [n for n in incident["status"].get("nominations") or [] if n["node"] == node]
    assert found, incident["status"]
    return found[0]  # type: ignore[no-any-return]


def test_a_forged_verdict_moves_nothing(probing: LocalCluster) -> None:
    """The tenant rewrites verdict.json every 50 ms with a schema-valid gpu_hang naming the node its culprit
    ran on (every node would fail a probe): the operator refuses the replaced verdict and cordons nothing."""
    target = _target(probing)
    for node in NODES:
        probing.break_node(node)
    secret = target.core.read_namespaced_secret("frwatch-s3", target.namespace).data
    keys = {k: base64.b64decode(v).decode() for k, v in secret.items()}
    assert probing.store is not None
    s3 = boto3.session.Session().client(
        "s3", endpoint_url=probing.store.endpoint, region_name="us-east-1",
        aws_access_key_id=keys[c.ENV_AWS_ACCESS_KEY_ID], aws_secret_access_key=keys[c.ENV_AWS_SECRET_ACCESS_KEY],
        config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )  # fmt: skip
    name = submit(target, [*WORKLOAD, "--scenario", "cpu_stuck"])  # the dumps say missing_rank (software)
    culprit_pod = f"{name}-worker-0"  # rank 1
    node = wait_for(lambda: next((p["spec"].get("nodeName") for p in target.pods(name)
                                  if p["metadata"]["name"] == culprit_pod), None), 60, "rank 1's node")  # fmt: skip
    uid = target.job(name)["metadata"]["uid"]
    key = f"frwatch/{target.namespace}/{name}/{uid}/0/verdict.json"
    forged = Verdict(
        status=Status.problem, category=Category.gpu_hang, hardware_class=True, culprit_ranks=[1],
        headline="rank 1 never started all_reduce #7 while its peers did: a GPU kernel hung", suspect_nodes=[node],
    ).model_dump_json().encode()  # fmt: skip
    stop = threading.Event()
    written: list[bool] = []

    def keep_forging() -> None:
        while not stop.wait(0.05):
            try:
                s3.put_object(Bucket="frwatch", Key=key, Body=forged)
                written.append(True)
            except s3.exceptions.ClientError:
                written.append(False)

    forger = threading.Thread(target=keep_forging, daemon=True)
    forger.start()
    try:
        incident = ended_incident(target, name)
    finally:
        stop.set()
        forger.join(5)
    status = incident["status"]
    assert any(written), "the tenant's keys could not write the prefix: nothing was forged"
    assert not any(cordoned(target, n) for n in NODES), status
    assert status.get("category") != "gpu_hang" and not status.get("suspectNodes"), status
    assert target.annotations(name).get(c.ANN_CATEGORY) != "gpu_hang"
    assert not node_events(target, node, "FrwatchNominated")
    if status["phase"] == "Failed":  # the forgery was what the store held: refused, and said so
        analyzed = next(x for x in status["conditions"] if x["type"] == "Analyzed")
        assert analyzed["reason"] == "VerdictNotBound", analyzed
        assert "replaced in the store after the analyzer wrote it" in analyzed["message"]


def test_fabricated_dumps_on_a_pinned_node_nominate_and_do_not_cordon(probing: LocalCluster) -> None:
    """The tenant pins its culprit rank's pod to node-b (spec.nodeName) and fabricates a GPU hang there: node-b
    is nominated (Incident, Event, annotation) and neither probed nor cordoned, though a probe would fail."""
    target = _target(probing)
    for node in NODES:
        probing.break_node(node)
    name = submit(target, [*GPU_HANG, "--culprit", "0"], master={"nodeName": "node-b"})
    ann = target.wait_verdict(name, timeout=150)
    assert ann[c.ANN_CATEGORY] == "gpu_hang" and ann.get(c.ANN_SUSPECT_NODES) == "node-b", ann
    incident = target.reported_incident(name)
    assert not cordoned(target, "node-b")  # the plan ran before the Incident was Reported
    nominated = nomination(incident, "node-b")
    assert nominated["pinned"] is True and not nominated.get("corroborated") and not nominated.get("probeJob")
    said = wait_for(lambda: node_events(target, "node-b", "FrwatchNominated"), 30, "the nomination Event")
    assert "pinned by the tenant" in said[0], said
    assert target.node("node-b")["metadata"]["annotations"][c.ANN_NOMINATED_BY].endswith(incident["metadata"]["name"])
    remediated = next(x for x in incident["status"]["conditions"] if x["type"] == "Remediated")
    assert remediated["status"] == "False" and "pinned" in remediated["message"], remediated
    assert not node_events(target, "node-b", "FrwatchProbed")


def test_a_failing_probe_cordons_a_passing_probe_does_not(probing: LocalCluster) -> None:
    target = _target(probing)
    healthy = submit(target, GPU_HANG)  # the nodes are healthy: the probe passes
    ann = target.wait_verdict(healthy, timeout=150)
    node = ann[c.ANN_SUSPECT_NODES]
    assert node == target.culprit_node(healthy)
    incident = target.reported_incident(healthy, timeout=120)
    assert not cordoned(target, node)
    passed = nomination(incident, node)
    assert passed["probe"] == "Passed" and not passed.get("corroborated"), passed
    assert any("Passed" in m for m in node_events(target, node, "FrwatchProbed"))

    for each in NODES:  # now every node's GPU is broken: only a probe on the node can tell
        probing.break_node(each)
    sick = submit(target, GPU_HANG)
    ann = target.wait_verdict(sick, timeout=150)
    node = ann[c.ANN_SUSPECT_NODES]
    incident = target.reported_incident(sick, timeout=120)
    failed = nomination(incident, node)
    assert failed["probe"] == "Failed" and "probe frwatch ran on the node failed" in failed["corroborated"], failed
    assert "diagnostic FAILED" in failed["probeDetail"], failed
    node_obj = wait_for(lambda: (n := target.node(node))["spec"].get("unschedulable") and n, 30, f"{node} cordoned")
    assert node_obj["metadata"]["annotations"][c.ANN_CORDON_INCIDENT] == f"{target.namespace}/{incident['metadata']['name']}"
    assert [n for n in NODES if n != node and cordoned(target, n)] == []


def test_two_namespaces_nominating_one_node_corroborate(two_tenants: LocalCluster) -> None:
    """No probe: node-c (the only node of pool x, chosen by a selector that names no node) is nominated by a
    job of namespace e2e (not cordoned), then by one of e2e-b: two namespaces agree, node-c is cordoned."""
    first, second = _target(two_tenants), _target(two_tenants, OTHER_NAMESPACE)
    pool = {"nodeSelector": {"pool": "x"}}
    one = submit(first, [*GPU_HANG, "--culprit", "0"], master=pool)
    assert first.wait_verdict(one, timeout=150).get(c.ANN_SUSPECT_NODES) == "node-c"
    reported = first.reported_incident(one)
    assert not cordoned(first, "node-c")  # one namespace's jobs never corroborate
    nominated = nomination(reported, "node-c")
    assert nominated["namespaces"] == 1 and not nominated.get("corroborated") and not nominated["pinned"], nominated

    two = submit(second, [*GPU_HANG, "--culprit", "0"], master=pool)
    assert second.wait_verdict(two, timeout=150).get(c.ANN_SUSPECT_NODES) == "node-c"
    agreed = nomination(second.reported_incident(two), "node-c")
    assert agreed["namespaces"] == 2 and "2 namespaces" in agreed["corroborated"], agreed
    wait_for(lambda: cordoned(second, "node-c"), 30, "node-c cordoned")
    assert [n for n in NODES if n != "node-c" and cordoned(second, n)] == []
