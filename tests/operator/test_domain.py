"""The pure core of detection and collection, without a cluster: job kinds, failure signals, naming, the
manifest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_operator import constants as c
from frwatch_operator.collect.progress import assess, build_manifest, ranks_to_ask, read_listing
from frwatch_operator.detect.pod_failure import FailureKind, attempt_of, detect, pod_facts
from frwatch_operator.incident.naming import incident_name, next_attempt
from frwatch_operator.kinds.job_kind import PYTORCHJOB


def pod(
    name: str = "j-worker-0", *, statuses: list[dict[str, Any]] | None = None, **status: Any
) -> dict[str, Any]:
    agent = {"name": c.AGENT_CONTAINER, "env": [{"name": c.ENV_JOB_ATTEMPT, "value": "2"}],
             "ports": [{"name": c.AGENT_CONTROL_PORT_NAME, "containerPort": 8089}]}  # fmt: skip
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {c.KF_LABEL_JOB_NAME: "j",
                     c.KF_LABEL_REPLICA_TYPE: "worker", c.KF_LABEL_REPLICA_INDEX: "0"}},
        "spec": {"nodeName": "n1", "initContainers": [agent], "containers": [{"name": "pytorch"}]},
        "status": {"containerStatuses": statuses or [], **status},
    }  # fmt: skip


def terminated(
    code: int, reason: str = "Error", *, last: bool = False, name: str = "pytorch"
) -> dict[str, Any]:
    term = {"terminated": {"exitCode": code, "reason": reason}}
    if last:
        return {"name": name, "restartCount": 1, "state": {"running": {}}, "lastState": term}
    return {"name": name, "restartCount": 0, "state": term}


def test_pytorchjob_layout_maps_pods_to_global_ranks():
    job = {
        "spec": {
            "nprocPerNode": "4",
            "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}},
        }
    }
    layout = PYTORCHJOB.layout(job)
    assert layout.world_size == 16
    assert PYTORCHJOB.ranks_of(pod(), layout) == range(4, 8)  # worker 0 is node rank 1
    assert PYTORCHJOB.layout({"spec": {"nprocPerNode": "auto", "pytorchReplicaSpecs": {}}}).world_size is None


def test_failure_signals_from_pod_status():
    assert detect(pod(statuses=[terminated(0, "Completed")])) is None
    assert detect(pod(statuses=[{"name": "pytorch", "state": {"running": {}}}])) is None
    exited = detect(pod(statuses=[terminated(1)]))
    assert exited is not None and exited.kind is FailureKind.EXITED and exited.exit_code == 1
    oom = detect(pod(statuses=[terminated(137, "OOMKilled")]))
    assert oom is not None and oom.kind is FailureKind.OOM_KILLED
    assert "signal 9" in oom.describe()
    restarted = detect(pod(statuses=[terminated(1, last=True)]))
    assert restarted is not None and restarted.kind is FailureKind.RESTARTED
    evicted = detect(pod(phase="Failed", reason="Evicted", message="low on memory"))
    assert (
        evicted is not None and evicted.kind is FailureKind.EVICTED and "low on memory" in evicted.describe()
    )
    # the agent sidecar ending is not the training's failure
    assert detect(pod(statuses=[terminated(2, name=c.AGENT_CONTAINER)])) is None


def test_a_pod_belongs_to_the_attempt_it_was_created_in():
    assert attempt_of(pod()) == "2"
    assert attempt_of({"metadata": {"labels": {c.LABEL_JOBSET_RESTART_ATTEMPT: "5"}}, "spec": {}}) == "5"
    assert attempt_of({"metadata": {}, "spec": {"containers": [{"name": "pytorch"}]}}) is None


def test_incident_names_are_deterministic_short_and_per_job_uid():
    a = incident_name("llama", "0f1e2d3c-aaaa", "0")
    assert a == incident_name("llama", "0f1e2d3c-aaaa", "0") == "llama-0f1e2d3c-0"
    assert a != incident_name("llama", "99999999-aaaa", "0") != incident_name("llama", "0f1e2d3c-aaaa", "1")
    long = incident_name("x" * 80, "0f1e2d3c", "12")
    assert len(long) <= 63 and long.endswith("-0f1e2d3c-12")
    assert incident_name("x" * 80 + "a", "0f1e2d3c", "12") != long


def test_the_attempt_moves_forward_once():
    assert next_attempt(None, "0") == "1"
    assert next_attempt("1", "0") is None  # already bumped: a repeat changes nothing
    assert next_attempt("0", "3") == "4"


def test_manifest_says_who_dumped_and_why_the_others_did_not():
    key = AttemptKey("frwatch", "ns", "j", "uid", "0")
    listing = read_listing(
        key, [key.rank(0), key.rank(1, "json"), key.pod("j-master-0"), key.root + "/ranks-later/1.5.json"]
    )
    assert set(listing.rank_keys) == {0, 1} and set(listing.pod_keys) == {"j-master-0"}
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert not assess(3, listing.rank_keys, now, now + timedelta(seconds=5)).done
    late = assess(3, listing.rank_keys, now + timedelta(seconds=6), now + timedelta(seconds=5))
    assert late.done and late.deadline_reached and late.missing == {2}
    layout = PYTORCHJOB.layout(
        {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 2}}}}
    )
    crashed = pod("j-worker-1", statuses=[terminated(137, "OOMKilled")])
    crashed["metadata"]["labels"][c.KF_LABEL_REPLICA_INDEX] = "1"
    pods = [pod_facts(crashed, ranks=PYTORCHJOB.ranks_of(crashed, layout))]
    m = build_manifest(key, world_size=3, listing=listing, pods=pods, records={}, asked={},
                       started="t0", ended="t1", deadline_reached=True)  # fmt: skip
    assert [(r.rank, r.dumped) for r in m.ranks] == [(0, True), (1, True), (2, False)]
    assert m.ranks[2].pod == "j-worker-1" and m.ranks[2].node == "n1"
    assert "OOMKilled (exit 137)" in m.ranks[2].why_missing
    live = pod_facts(pod("j-worker-1", podIP="10.0.0.7", initContainerStatuses=[
        {"name": c.AGENT_CONTAINER, "state": {"running": {}}}]), ranks=(2,))  # fmt: skip
    assert ranks_to_ask({2}, [live], {}) == {"j-worker-1": (2,)}
    assert ranks_to_ask({2}, pods, {}) == {}  # its agent is not running: nobody to ask
