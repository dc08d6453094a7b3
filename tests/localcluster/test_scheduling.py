"""Pods are bound to named nodes; a cordoned node receives no new pods."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kube import Kube, wait_for

from frwatch_dev.localcluster.cluster import LocalCluster


def job(name: str, ns: str, n: int) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
        "spec": {"completions": n, "parallelism": n, "backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}},
    }  # fmt: skip


@pytest.fixture
def cordoned(cluster: LocalCluster) -> Iterator[str]:
    cluster.kubectl("cordon", "node-b")
    try:
        yield "node-b"
    finally:
        cluster.kubectl("uncordon", "node-b")


def test_nodes_are_registered_ready(cluster: LocalCluster) -> None:
    out = cluster.kubectl("get", "nodes", "--no-headers").stdout.split("\n")
    assert [line.split()[:2] for line in out if line] == [["node-a", "Ready"], ["node-b", "Ready"]]


def test_a_cordoned_node_receives_no_new_pods(kube: Kube, ns: str, cordoned: str) -> None:
    kube.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job("spread", ns, 4))
    pods = wait_for(lambda: (p := kube.pods(ns)) and len(p) == 4 and all(x["spec"].get("nodeName") for x in p) and p,
                    20, "4 bound pods")  # fmt: skip
    assert {p["spec"]["nodeName"] for p in pods} == {"node-a"}


def test_no_schedulable_node_leaves_the_pod_pending_until_one_is(
    kube: Kube, cluster: LocalCluster, ns: str, cordoned: str
) -> None:
    cluster.kubectl("cordon", "node-a")
    try:
        kube.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job("wait", ns, 1))
        pod = wait_for(
            lambda: next((p for p in kube.pods(ns) if p["status"].get("conditions")), None),
            20,
            "a scheduling verdict",
        )
        cond = pod["status"]["conditions"][0]
        assert (cond["type"], cond["status"], cond["reason"]) == ("PodScheduled", "False", "Unschedulable")
        assert cond["message"] == "0/2 nodes are available: 2 node(s) were unschedulable."
        assert any(e["reason"] == "FailedScheduling" for e in kube.events(ns, pod["metadata"]["name"]))
    finally:
        cluster.kubectl("uncordon", "node-a")
    done = wait_for(
        lambda: next((p for p in kube.pods(ns) if p["status"].get("phase") == "Succeeded"), None),
        20,
        "the pod to run",
    )
    assert done["spec"]["nodeName"] == "node-a"
