"""A job that ends with no Incident to open gets one Normal ``NoIncident`` Event saying why: frwatch's
explicit "looked and decided" (a captured job that succeeded; a failed job that is not captured). A captured
job that failed gets its Incident instead, and no such Event."""

from __future__ import annotations

from typing import Any

import pytest
from harness import Cluster, eventually

from frwatch_operator import constants as c
from frwatch_operator.detect.job_failure import job_end
from frwatch_operator.notices import Reason

NOW = "2026-11-25T12:00:00Z"


def condition(kind: str, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": f"PyTorchJob{kind}", "message": "", "lastTransitionTime": NOW}


@pytest.mark.parametrize(
    ("conditions", "end"),
    [
        ([], None),
        ([condition("Created"), condition("Running")], None),
        ([condition("Running", "False"), condition("Succeeded")], "Succeeded"),
        ([condition("Failed")], "Failed"),
        ([condition("Failed", "False")], None),
        ("not a list", None),
    ],
)
def test_a_job_is_over_when_its_succeeded_or_failed_condition_is_true(conditions: Any, end: str | None) -> None:
    assert job_end({"status": {"conditions": conditions}}) == end


def end_job(cluster: Cluster, name: str, kind: str) -> None:
    cluster.custom.patch_namespaced_custom_object_status(
        "kubeflow.org", "v1", cluster.namespace, "pytorchjobs", name, {"status": {"conditions": [condition(kind)]}}
    )


def no_incident_events(cluster: Cluster, name: str) -> list[Any]:
    return [e for e in cluster.events(name) if e.reason == Reason.NO_INCIDENT]


def test_a_job_that_ends_without_an_incident_says_so_once(cluster: Cluster, start_operator) -> None:
    start_operator()
    cluster.create_job("fine", world=2)  # captured
    cluster.create_job("plain", world=2, annotations={})  # not opted in
    cluster.create_job("off", world=2, annotations={c.ANN_CAPTURE: c.CAPTURE_DISABLED})  # opted out
    end_job(cluster, "fine", "Succeeded")
    end_job(cluster, "plain", "Failed")
    end_job(cluster, "off", "Failed")

    [fine] = eventually(lambda: no_incident_events(cluster, "fine"), "NoIncident on the job that succeeded")
    assert fine.type == "Normal"
    assert fine.message == (
        "this job succeeded: frwatch opens no Incident for it (it is captured, and a job that succeeds leaves "
        "nothing to capture)"
    )
    [plain] = eventually(lambda: no_incident_events(cluster, "plain"), "NoIncident on the job not opted in")
    assert plain.message == (
        "this job failed: frwatch opens no Incident for it (it is not captured: no annotation and no "
        "CapturePolicy selects the job)"
    )
    [off] = eventually(lambda: no_incident_events(cluster, "off"), "NoIncident on the job opted out")
    assert "this job failed" in off.message and f"{c.ANN_CAPTURE} is 'disabled' on the job" in off.message
    assert cluster.incidents() == []

