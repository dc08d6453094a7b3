"""The job's own Failed/Restarting condition opens its current attempt's Incident, and never a false one for
the next attempt (the training operator writes Restarting after frwatch moved the job to it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from harness import Cluster, eventually

from frwatch_operator import constants as c
from frwatch_operator.detect.job_failure import (
    attempt_started_value,
    job_failure,
    parse_attempt_started,
    start_to_record,
)

T0 = datetime(2026, 11, 22, 1, 0, 0, tzinfo=UTC)


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def job(attempt: str | None = "1", started: str | None = None, *conditions: dict[str, Any]) -> dict[str, Any]:
    annotations = {}
    if attempt is not None:
        annotations[c.ANN_ATTEMPT] = attempt
    if started is not None:
        annotations[c.ANN_ATTEMPT_STARTED] = started
    return {"metadata": {"name": "llama", "annotations": annotations}, "status": {"conditions": list(conditions)}}


def cond(kind: str, at: datetime, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": f"PyTorchJob{kind}", "message": "1 Worker replica(s) failed.",
            "lastTransitionTime": stamp(at)}  # fmt: skip


# --- the pure rule -------------------------------------------------------------------------------------------


def test_the_first_pod_of_the_current_attempt_records_its_start() -> None:
    assert start_to_record(job("1"), "1", T0) == "1@2026-11-22T01:00:00Z"
    assert start_to_record(job("1"), "0", T0) is None  # a late pod of the previous attempt
    assert start_to_record(job("1", "1@2026-11-22T01:00:00Z"), "1", T0 + timedelta(seconds=5)) is None
    assert start_to_record(job("1", "1@2026-11-22T01:00:05Z"), "1", T0) == "1@2026-11-22T01:00:00Z"  # earlier
    assert start_to_record(job("1", "0@2026-11-22T00:00:00Z"), "1", T0) == "1@2026-11-22T01:00:00Z"  # stale
    assert start_to_record(job(None), "0", T0) == "0@2026-11-22T01:00:00Z"  # no annotation: attempt 0
    assert parse_attempt_started(attempt_started_value("3", T0)) == ("3", T0)
    assert parse_attempt_started("garbage") is None


@pytest.mark.parametrize(
    ("the_job", "expected"),
    [
        # Failed after the current attempt's first pod: this attempt failed
        (job("1", "1@2026-11-22T01:00:00Z", cond("Failed", T0 + timedelta(seconds=30))), ("1", "Failed")),
        (job("1", "1@2026-11-22T01:00:00Z", cond("Restarting", T0 + timedelta(seconds=1))), ("1", "Restarting")),
        # written after frwatch moved the job to attempt 1, about attempt 0: attempt 1 has no pod yet
        (job("1", "0@2026-11-22T00:59:00Z", cond("Restarting", T0)), None),
        (job("1", None, cond("Failed", T0)), None),
        # the same second as the first pod: ambiguous, left to the pods' own failure
        (job("1", "1@2026-11-22T01:00:00Z", cond("Restarting", T0)), None),
        # before the attempt started (an old condition still True)
        (job("1", "1@2026-11-22T01:00:00Z", cond("Failed", T0 - timedelta(seconds=9))), None),
        (job("1", "1@2026-11-22T01:00:00Z", cond("Failed", T0 + timedelta(seconds=9), status="False")), None),
        (job("1", "1@2026-11-22T01:00:00Z", cond("Succeeded", T0 + timedelta(seconds=9))), None),
    ],
)
def test_a_failure_condition_counts_only_for_the_attempt_it_is_about(
    the_job: dict[str, Any], expected: tuple[str, str] | None
) -> None:
    failure = job_failure(the_job)
    assert (failure and (failure.attempt, failure.condition)) == expected
    if failure is not None:
        assert failure.describe() == f"job llama {failure.condition} (PyTorchJob{failure.condition}: 1 Worker replica(s) failed.)"


# --- the real operator ---------------------------------------------------------------------------------------------


def set_conditions(cluster: Cluster, name: str, *conditions: dict[str, Any]) -> None:
    """What the training operator writes (the test plays it): the job's status conditions."""
    cluster.custom.patch_namespaced_custom_object_status(
        "kubeflow.org", "v1", cluster.namespace, "pytorchjobs", name, {"status": {"conditions": list(conditions)}}
    )


def recorded_start(cluster: Cluster, name: str, attempt: str) -> datetime | None:
    parsed = parse_attempt_started(cluster.job(name)["metadata"]["annotations"].get(c.ANN_ATTEMPT_STARTED))
    return parsed[1] if parsed is not None and parsed[0] == attempt else None


def by_attempt(cluster: Cluster) -> dict[str, dict[str, Any]]:
    return {i["spec"]["attempt"]: i for i in cluster.incidents()}


def test_job_conditions_open_the_current_attempts_incident_and_no_false_one(cluster: Cluster, start_operator):
    op = start_operator()
    job_body = cluster.create_job("llama", world=2)
    pods = cluster.create_pods(op, job_body, 2)
    for p in pods:
        cluster.running(p)
    started0 = eventually(lambda: recorded_start(cluster, "llama", "0"), "attempt 0's start recorded")
    assert started0 == datetime.fromisoformat(cluster.pod(pods[0])["metadata"]["creationTimestamp"])

    # attempt 0 fails (a pod), frwatch opens its Incident and moves the job to attempt 1; THEN the
    # training operator says Restarting (about attempt 0): no Incident for attempt 1
    cluster.exited(pods[1], exit_code=1)
    eventually(lambda: cluster.job("llama")["metadata"]["annotations"].get(c.ANN_ATTEMPT) == "1", "bump")
    set_conditions(cluster, "llama", cond("Restarting", datetime.now(UTC)))
    eventually(lambda: "1" not in by_attempt(cluster) and "0" in by_attempt(cluster), "attempt 0's Incident")

    # the training operator recreates the pods: attempt 1's; its failure shows only in the job's condition
    for p in pods:
        cluster.delete_pod(p)
    restarted = [cluster.core.create_namespaced_pod(cluster.namespace, op.admit(cluster.pod_body(cluster.job("llama"), r),
                 cluster.namespace)).metadata.name for r in range(2)]  # fmt: skip

    def start_of_attempt_1() -> datetime | None:
        assert list(by_attempt(cluster)) == ["0"], "the Restarting about attempt 0 opened attempt 1's Incident"
        return recorded_start(cluster, "llama", "1")

    started1 = eventually(start_of_attempt_1, "attempt 1's start recorded")
    set_conditions(cluster, "llama", cond("Restarting", started1, status="False"),
                   cond("Failed", started1 + timedelta(seconds=2)))  # fmt: skip
    second = eventually(lambda: by_attempt(cluster).get("1"), "attempt 1's Incident")
    assert second["spec"]["trigger"] == "job llama Failed (PyTorchJobFailed: 1 Worker replica(s) failed.)"
    eventually(lambda: cluster.job("llama")["metadata"]["annotations"].get(c.ANN_ATTEMPT) == "2", "bump to 2")
    # the bump is made when the Incident is created; its IncidentOpened Event comes with the first timer pass
    eventually(lambda: len([e for e in cluster.events("llama") if e.reason == "IncidentOpened"]) == 2, "2 Events")
    assert len(by_attempt(cluster)) == 2
    assert all(cluster.pod(p)["metadata"]["annotations"][c.ANN_INJECTED] for p in restarted)
