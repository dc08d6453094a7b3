"""An ordinary crash is reported as one, at once: collection ends as soon as every rank is accounted for (a
crashed rank's pod settled without a dump), not at the deadline; when no rank dumped and every rank's pod
failed, no analyzer Job runs and the verdict is the exits the cluster showed."""

from __future__ import annotations

import json

from harness import Cluster, eventually, upload_as_agent
from test_collection import key_of, long_deadline_policy, manifest_of

from frwatch_dev.dumps import pickle_bytes, world
from frwatch_operator import constants as c
from frwatch_operator.store.s3 import S3Store

#: Far longer than any wait below: an Incident that ends collection at the deadline fails these tests.
DEADLINE = 300


def condition(incident: dict, kind: str) -> dict:
    return next(x for x in incident["status"]["conditions"] if x["type"] == kind)


def test_every_rank_exiting_before_any_dump_is_a_crash_reported_without_an_analyzer(
    cluster: Cluster, start_operator, store: S3Store
):
    long_deadline_policy(cluster, DEADLINE)
    op = start_operator()
    job = cluster.create_job("crashy", world=4)
    pods = cluster.create_pods(op, job, 4)
    for p in pods:
        cluster.running(p)
    for p in pods:
        cluster.ended(p, exit_code=1)

    incident = cluster.incident(phase="Reported", timeout=30)
    status = incident["status"]
    assert condition(incident, "Collected")["reason"] == "EveryRankExited"
    assert condition(incident, "AnalysisRequested")["reason"] == "NothingToAlign"
    assert not status.get("analyzerJob")  # no analyzer Job: nothing to align
    assert status["category"] == "no_dump" and status["hardwareClass"] is False
    assert status["verdict"]["short"] == "every rank exited 1 (Error) before any collective hung"
    assert status["verdict"]["kindText"] == "crashed (exit 1, Error)"
    steps = status["verdict"]["nextSteps"]
    assert f"kubectl logs -n {cluster.namespace}" in steps[0] and not any("TORCH_" in s for s in steps)

    m = manifest_of(store, key_of(job))
    assert not m.deadline_reached and not any(r.dumped for r in m.ranks)
    assert all("its agent drained and ended without a dump" in r.why_missing for r in m.ranks)
    verdict = json.loads(store.get(key_of(job).verdict))  # where the report URL points, as for any verdict
    assert verdict["culprit_kind"] == "crashed" and verdict["culprit_ranks"] == [0, 1, 2, 3]
    assert store.get(key_of(job).report).decode().startswith("frwatch verdict: PROBLEM / no_dump")

    ann = cluster.job("crashy")["metadata"]["annotations"]
    assert ann[c.ANN_VERDICT] == "every rank exited 1 (Error) before any collective hung"
    assert c.ANN_SUSPECT_NODES not in ann
    events = {e.reason: e.message for e in cluster.events("crashy")}
    assert "a crash, not a hang" in events["Diagnosed"]
    assert "TORCH_FR_BUFFER_SIZE" not in " ".join(events.values())


def test_a_crashed_rank_ends_collection_once_its_pod_settled_not_at_the_deadline(
    cluster: Cluster, start_operator, store: S3Store
):
    long_deadline_policy(cluster, DEADLINE)
    op = start_operator()
    job = cluster.create_job("onecrash", world=2)
    pods = cluster.create_pods(op, job, 2)
    for p in pods:
        cluster.running(p)
    dumps = world(2).all_reduce(steps=4).rank(1).not_started_at(2).dumps()
    upload_as_agent(store, job, pods[0], "node-0", {0: pickle_bytes(dumps[0])})
    cluster.exited(pods[1], exit_code=1)  # the training container exited; its agent still drains
    incident = cluster.incident(timeout=20)
    assert incident["status"]["phase"] in ("Detected", "Collecting")
    cluster.ended(pods[1], exit_code=1)  # ... and now the agent ended too: nothing more can come

    incident = cluster.incident(phase="Analyzing", timeout=30)
    assert condition(incident, "Collected")["reason"] == "AllRanksAccounted"
    m = manifest_of(store, key_of(job))
    assert not m.deadline_reached and [r.dumped for r in m.ranks] == [True, False]
    assert "exited 1" in m.ranks[1].why_missing and "agent drained" in m.ranks[1].why_missing
    collected = eventually(
        lambda: [e for e in cluster.events("onecrash") if e.reason == "DumpsMissing"], "DumpsMissing"
    )
    assert "rank 1" in collected[0].message


def test_a_rank_still_running_keeps_collection_open(cluster: Cluster, start_operator, store: S3Store):
    long_deadline_policy(cluster, DEADLINE)
    op = start_operator()
    job = cluster.create_job("stillup", world=2)
    pods = cluster.create_pods(op, job, 2)
    for p in pods:
        cluster.running(p)
    cluster.ended(pods[1], exit_code=1)
    incident = cluster.incident(timeout=20)
    # the driver passes at 0.5 s: wait for a pass that saw the settled pod (its record in status.observed)
    eventually(
        lambda: any(p.get("exits") for p in (cluster.incident()["status"].get("observed") or {}).get("pods", [])),
        "a collection pass that recorded the ended pod",
    )
    incident = cluster.incident()
    assert incident["status"]["phase"] == "Collecting"  # rank 0 runs and has not dumped: the deadline stays
    assert incident["status"]["counts"]["missingRanks"] == 2
