"""Collection: every rank's dump safe in S3 (real dumps of real torch ranks), the manifest says who dumped and
why the others did not, and nothing is lost when S3 goes down or a pod goes away."""

from __future__ import annotations

from typing import Any

import pytest
from harness import Cluster, eventually, handed_over, upload_as_agent

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_analyzers.store.manifest import Manifest
from frwatch_operator import constants as c
from frwatch_operator.collect.container_logs import POD_DELETED
from frwatch_operator.store.s3 import S3Store

pytestmark = pytest.mark.slow  # the real dumps come from real torch ranks


def key_of(job: dict[str, Any], attempt: str = "0") -> AttemptKey:
    meta = job["metadata"]
    return AttemptKey("frwatch", meta["namespace"], meta["name"], meta["uid"], attempt)


def manifest_of(store: S3Store, key: AttemptKey) -> Manifest:
    return Manifest.model_validate_json(store.get(key.manifest))


def long_deadline_policy(cluster: Cluster, seconds: int = 60) -> None:
    """A CapturePolicy selecting every job of the namespace, with a long collection deadline."""
    cluster.custom.create_namespaced_custom_object(
        c.GROUP, c.VERSION, cluster.namespace, c.POLICY_PLURAL,
        {"apiVersion": f"{c.GROUP}/{c.VERSION}", "kind": c.POLICY_KIND, "metadata": {"name": "all-jobs"},
         "spec": {"jobSelector": {}, "collectionDeadlineSeconds": seconds}},
    )  # fmt: skip


def test_collection_ends_when_every_rank_dumped_and_the_manifest_is_right(
    cluster: Cluster, start_operator, store: S3Store, real_dumps: dict[int, bytes]
):
    long_deadline_policy(cluster)
    op = start_operator()
    job = cluster.create_job("llama", world=2)
    pods = cluster.create_pods(op, job, 2)
    for p in pods:
        cluster.running(p)
    cluster.exited(pods[1], exit_code=1)
    incident = cluster.incident()
    assert incident["status"]["counts"]["expectedRanks"] == 2
    for rank, pod in enumerate(pods):
        upload_as_agent(store, job, pod, f"node-{rank}", {rank: real_dumps[rank]})

    incident = cluster.incident(phase="Analyzing", timeout=15)
    status = incident["status"]
    assert status["counts"] == {"expectedRanks": 2, "dumpedRanks": 2, "missingRanks": 0}
    assert any(x["type"] == "Collected" and x["reason"] == "AllRanksDumped" for x in status["conditions"])
    # handed over to analysis in the write after: the analyzer Job was asked for
    handoff = handed_over(status)
    assert handoff is not None and handoff["status"] == "True"
    assert status["analyzerJob"]

    m = manifest_of(store, key_of(job))
    assert not m.deadline_reached and m.world_size == 2
    assert [(r.rank, r.pod, r.node, r.dumped, r.key) for r in m.ranks] == [
        (0, pods[0], "node-0", True, key_of(job).rank(0)),
        (1, pods[1], "node-1", True, key_of(job).rank(1)),
    ]
    failed = next(p for p in m.pods if p.pod == pods[1])
    assert failed.ended[0].exit_code == 1 and failed.node == "node-1" and failed.ranks == [1]
    events = eventually(
        lambda: [e for e in cluster.events("llama") if e.reason == "DumpsCollected"], "DumpsCollected"
    )
    assert "all 2 ranks" in events[0].message


def test_a_rank_that_never_dumps_ends_collection_at_the_deadline_and_the_manifest_says_why(
    cluster: Cluster, start_operator, store: S3Store, real_dumps: dict[int, bytes]
):
    op = start_operator()  # the operator's short deadline (conftest.DEADLINE_SECONDS)
    job = cluster.create_job("gpt", world=3)
    pods = cluster.create_pods(op, job, 3)
    for p in pods:
        cluster.running(p)
    for rank in (0, 1):  # the real job: ranks 0 and 1 dumped, rank 2 crashed without a dump
        upload_as_agent(store, job, pods[rank], f"node-{rank}", {rank: real_dumps[rank]})
    cluster.exited(pods[2], exit_code=1)
    cluster.exited(pods[0], exit_code=1)

    incident = cluster.incident(phase="Analyzing", timeout=20)
    assert incident["status"]["counts"] == {"expectedRanks": 3, "dumpedRanks": 2, "missingRanks": 1}
    scraped = op.metrics()
    assert (scraped["frwatch_dumps_collected_total"], scraped["frwatch_dumps_missing_total"]) == (2, 1)
    assert scraped["frwatch_capture_latency_seconds_sum"] >= 5  # the deadline (conftest.DEADLINE_SECONDS)
    m = manifest_of(store, key_of(job))
    assert m.deadline_reached
    assert [r.rank for r in m.ranks if r.dumped] == [0, 1]
    missing = m.ranks[2]
    assert missing.pod == pods[2] and missing.node == "node-2" and not missing.dumped
    assert f"pod {pods[2]}: container pytorch exited 1 (Error)" in missing.why_missing
    # the operator wrote the pod record the dead rank's agent never wrote
    record = store.get(key_of(job).pod(pods[2]))
    assert b'"writer": "operator"' in record and b'"exit_code": 1' in record
    events = eventually(
        lambda: [e for e in cluster.events("gpt") if e.reason == "DumpsMissing"], "DumpsMissing"
    )
    assert "2 of 3 ranks dumped" in events[0].message and "rank 2" in events[0].message


def test_a_pod_deleted_right_after_its_dump_still_counts(
    cluster: Cluster, start_operator, store: S3Store, real_dumps: dict[int, bytes]
):
    long_deadline_policy(cluster)
    op = start_operator()
    job = cluster.create_job("t5", world=2)
    pods = cluster.create_pods(op, job, 2)
    for p in pods:
        cluster.running(p)
    cluster.exited(pods[0], exit_code=1)
    cluster.incident()
    upload_as_agent(store, job, pods[0], "node-0", {0: real_dumps[0]})
    cluster.delete_pod(pods[0])  # the training-operator cleans up at once
    eventually(  # a collection pass recorded the deletion (it is what the manifest will say)
        lambda: any(p.get("deleted") for p in (cluster.incident()["status"].get("observed") or {}).get("pods", [])),
        "a collection pass that recorded the deleted pod",
    )
    upload_as_agent(store, job, pods[1], "node-1", {1: real_dumps[1]})

    incident = cluster.incident(phase="Analyzing", timeout=15)
    m = manifest_of(store, key_of(job))
    assert [r.dumped for r in m.ranks] == [True, True]
    gone = next(p for p in m.pods if p.pod == pods[0])
    assert gone.deleted and gone.node == "node-0" and gone.ended[0].exit_code == 1
    assert store.get(key_of(job).rank(0)) == real_dumps[0]
    # its log could not be read (this emulator has no kubelet output): recorded, never a failed Incident
    assert [(x.container, x.unavailable) for x in gone.logs] == [("pytorch", POD_DELETED)]
    logs = next(x for x in incident["status"]["conditions"] if x["type"] == "LogsCollected")
    assert logs["status"] == "False" and logs["reason"] == "LogsUnavailable", logs
    assert f"{pods[0]}/pytorch: {POD_DELETED}" in logs["message"]
