"""One live round of the operator (``handlers.live.live_round``) with a fake API and canned agent answers:
a desync opens the Early Incident and one HangSuspected Event; a status write that fails right after the
create is retried by the next round (never left for the Incident timer to adopt as Detected); an Incident
that already exists (the failure came first) is left alone, with no Event."""

from __future__ import annotations

import pytest
from live_round_fakes import FakeKube, deps_of, rounds

from frwatch_operator.errors import RetryableError
from frwatch_operator.handlers import live as live_handler


def test_a_desync_opens_an_early_incident_once(desync: None) -> None:
    kube, jobs = FakeKube(), live_handler.LiveJobs()
    deps = deps_of(kube)
    rounds(deps, jobs, 0.0, 15.0, 30.0)
    assert len(kube.created) == 1 and kube.created[0]["spec"]["trigger"].startswith("live watch: desync in")
    [status] = kube.statuses
    assert status["phase"] == "Early" and status["liveFinding"]["ranks"] == [1]
    [event] = kube.events
    assert event.reason == "HangSuspected" and event.type == "Warning"


def test_a_failed_status_write_is_retried_by_the_next_round(desync: None) -> None:
    kube, jobs = FakeKube(fail_status_writes=1), live_handler.LiveJobs()
    deps = deps_of(kube)
    with pytest.raises(RetryableError):
        rounds(deps, jobs, 0.0)
    assert kube.statuses == [] and kube.events == []
    rounds(deps, jobs, 15.0)
    assert [s["phase"] for s in kube.statuses] == ["Early"] and len(kube.events) == 1
    assert len(kube.created) == 1


def test_an_incident_the_failure_opened_first_is_left_alone(desync: None) -> None:
    opened = {"spec": {"trigger": "pod j-1: container pytorch exited 1"}, "status": {"phase": "Collecting"}}
    kube, jobs = FakeKube(existing=opened), live_handler.LiveJobs()
    rounds(deps_of(kube), jobs, 0.0)
    assert kube.created == [] and kube.statuses == [] and kube.events == []
