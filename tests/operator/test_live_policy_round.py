"""Live watch's policies in the operator's round (``handlers.live``, ``handlers.live_actions``) with a fake API
and canned agent answers: dumpAndAnalyze asks every agent for its ranks' live buffers and moves the Early
Incident to Detected (retried when the write fails); abort suspends the job once the Incident is Reported, and
not without a verdict; abort without the operator's switch is dumpAndAnalyze; an Early Incident of a job that
succeeded is Cleared."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from live_round_fakes import KIND, FakeKube, deps_of, job, rounds

from frwatch_operator import constants as c
from frwatch_operator.agent.client import AskResult
from frwatch_operator.handlers import live as live_handler
from frwatch_operator.handlers import live_actions
from frwatch_operator.metrics import Metrics


@pytest.fixture
def asked(desync: None, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A desync (rank 1 broadcasts where the others all_reduce) on every round; the live-dump requests."""
    requests: list[dict[str, Any]] = []

    def ask(agents: dict[str, Any]) -> dict[str, AskResult]:
        requests.append(dict(agents))
        return {pod: AskResult(asked=ranks) for pod, (_, _, ranks, _) in agents.items()}

    monkeypatch.setattr(live_actions, "ask_live_dumps", ask)
    return requests


def test_dump_and_analyze_asks_every_rank_and_moves_the_incident_on(asked: list[dict[str, Any]]) -> None:
    kube, jobs = FakeKube(), live_handler.LiveJobs()
    rounds(deps_of(kube, "dumpAndAnalyze"), jobs, 0.0, 15.0, 30.0)
    assert len(kube.created) == 1
    assert [s["phase"] for s in kube.statuses] == ["Early", "Detected"]
    detected = kube.statuses[-1]
    assert detected["liveFinding"]["ranks"] == [1] and detected["collectionDeadline"] and detected["settings"]
    assert live_actions.DUMP_TRIGGER in detected["message"]
    [request] = asked  # once: later rounds have nothing more to ask
    assert {pod: ranks for pod, (_, _, ranks, _) in request.items()} == {f"j-{r}": (r,) for r in range(4)}
    hang, dumped = kube.events
    assert hang.reason == "HangSuspected" and "dumpAndAnalyze" in hang.message
    assert dumped.reason == "LiveDumpRequested" and "rank(s) 0, 1, 2, 3 dumped" in dumped.message
    assert jobs.aborts == {}


def test_a_failed_move_is_retried_by_the_next_round(
    asked: list[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    kube, jobs = FakeKube(fail_phase="Detected"), live_handler.LiveJobs()
    deps = deps_of(kube, "dumpAndAnalyze")
    rounds(deps, jobs, 0.0)  # the write refused on the dump pool: logged, still owed
    assert [s["phase"] for s in kube.statuses] == ["Early"] and len(asked) == 1
    assert "the live dump of attempt 0 failed" in caplog.text and "asked again next round" in caplog.text
    rounds(deps, jobs, 15.0)
    assert [s["phase"] for s in kube.statuses] == ["Early", "Detected"] and len(asked) == 2


def test_a_slow_live_dump_does_not_hold_the_rounds(desync: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking the agents (up to a minute when one hangs) runs off the rounds' thread: the round that found the
    hang returns while the ask waits, the next rounds of the job do not ask again, and once the agents
    answer the Incident moves on."""
    release, started = threading.Event(), threading.Event()
    requests: list[dict[str, Any]] = []

    def ask(agents: dict[str, Any]) -> dict[str, AskResult]:
        requests.append(dict(agents))
        started.set()
        assert release.wait(60)
        return {pod: AskResult(asked=ranks) for pod, (_, _, ranks, _) in agents.items()}

    monkeypatch.setattr(live_actions, "ask_live_dumps", ask)
    kube, jobs = FakeKube(), live_handler.LiveJobs()
    deps = deps_of(kube, "dumpAndAnalyze")
    try:
        live_handler.live_round(deps, jobs, "ns", "j", KIND, 0.0)  # type: ignore[arg-type]
        assert started.wait(60)
        live_handler.live_round(deps, jobs, "ns", "j", KIND, 15.0)  # type: ignore[arg-type]
        assert not jobs.settle(timeout_s=0) and len(requests) == 1
        assert [s["phase"] for s in kube.statuses] == ["Early"]
    finally:
        release.set()
    assert jobs.settle(timeout_s=60)
    assert [s["phase"] for s in kube.statuses] == ["Early", "Detected"] and len(requests) == 1
    rounds(deps, jobs, 30.0)
    assert len(requests) == 1 and jobs.dumps == {}


def test_abort_suspends_the_job_once_the_incident_is_reported(asked: list[dict[str, Any]]) -> None:
    kube, jobs = FakeKube(), live_handler.LiveJobs()
    deps = deps_of(kube, "abort", FRWATCH_OPERATOR_LIVE_ABORT_ALLOWED="true")
    rounds(deps, jobs, 0.0)
    [pending] = jobs.aborts.values()
    assert not live_actions.abort_when_reported(deps, pending)  # Detected: no verdict yet
    assert kube.patches == []
    assert kube.existing is not None
    kube.existing["status"] = {"phase": "Reported", "verdict": {"headline": "rank 1 took another path"}}
    assert live_actions.abort_when_reported(deps, pending)
    assert kube.patches == [{"spec": {"runPolicy": {"suspend": True}},
                             "metadata": {"annotations": {c.ANN_LIVE_ABORTED: pending.incident}}}]  # fmt: skip
    aborted = kube.events[-1]
    assert aborted.reason == "LiveAborted" and "rank 1 took another path" in aborted.message


def test_abort_without_a_verdict_leaves_the_job_running(asked: list[dict[str, Any]]) -> None:
    kube, jobs = FakeKube(), live_handler.LiveJobs()
    deps = deps_of(kube, "abort", FRWATCH_OPERATOR_LIVE_ABORT_ALLOWED="true")
    rounds(deps, jobs, 0.0)
    [pending] = jobs.aborts.values()
    assert kube.existing is not None
    kube.existing["status"] = {"phase": "Failed", "message": "the analyzer Job vanished"}
    assert live_actions.abort_when_reported(deps, pending)
    assert kube.patches == [] and kube.events[-1].reason == "LiveAbortSkipped"


def test_abort_not_allowed_is_dump_and_analyze(asked: list[dict[str, Any]]) -> None:
    kube, jobs = FakeKube(), live_handler.LiveJobs()
    rounds(deps_of(kube, "abort"), jobs, 0.0)
    assert [s["phase"] for s in kube.statuses] == ["Early", "Detected"] and len(asked) == 1
    assert jobs.aborts == {}


def test_report_leaves_the_incident_early_until_the_job_succeeds(asked: list[dict[str, Any]]) -> None:
    kube, jobs = FakeKube(), live_handler.LiveJobs()
    deps = deps_of(kube, None)
    rounds(deps, jobs, 0.0, 15.0)
    assert [s["phase"] for s in kube.statuses] == ["Early"] and asked == []
    jobs.saw(
        KIND,
        {**job(None), "status": {"conditions": [{"type": "Succeeded", "status": "True"}]}},
        deleted=False,
    )  # type: ignore[arg-type]
    rounds(deps, jobs, 30.0, 45.0)
    assert [s["phase"] for s in kube.statuses] == ["Early", "Cleared"]
    assert "succeeded" in kube.statuses[-1]["message"] and kube.statuses[-1]["liveFinding"]["ranks"] == [1]
    assert kube.events[-1].reason == "HangCleared"


def test_an_early_incident_of_an_attempt_left_behind_is_cleared(asked: list[dict[str, Any]]) -> None:
    kube, jobs = FakeKube(), live_handler.LiveJobs()
    deps = deps_of(kube, None)
    rounds(deps, jobs, 0.0)
    moved = job(None)
    moved["metadata"]["annotations"][c.ANN_ATTEMPT] = "1"  # restarted with no pod failure seen
    deps.index.upsert_job(moved)
    rounds(deps, jobs, 15.0)
    assert [s["phase"] for s in kube.statuses] == ["Early", "Cleared"]
    assert "attempt 1" in kube.statuses[-1]["message"]


def test_early_incidents_are_counted_active_and_cleared_ones_finished() -> None:
    metrics = Metrics()

    def value(name: str, phase: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"phase": phase})

    metrics.incident_phase("inc-1", "Early")
    assert value("frwatch_incidents_active", "Early") == 1.0
    metrics.incident_phase("inc-1", "Cleared")
    assert value("frwatch_incidents_active", "Early") == 0.0
    assert value("frwatch_incidents_finished_total", "Cleared") == 1.0


# --- an operator that restarted (or a replica that took the job's shard) resumes from the Incident ----------


def test_a_restarted_operator_asks_the_live_dumps_its_early_incident_still_owes(
    asked: list[dict[str, Any]],
) -> None:
    kube = FakeKube(fail_phase="Detected")
    deps = deps_of(kube, "dumpAndAnalyze")
    rounds(deps, live_handler.LiveJobs(), 0.0)  # Early written, the move refused, then the process ends
    assert [s["phase"] for s in kube.statuses] == ["Early"] and len(asked) == 1
    restarted = live_handler.LiveJobs()
    rounds(deps, restarted, 15.0, 30.0)
    assert [s["phase"] for s in kube.statuses] == ["Early", "Detected"] and len(asked) == 2
    assert kube.statuses[-1]["liveFinding"]["dumpedAt"] and len(kube.created) == 1


def test_a_restarted_operator_still_aborts_once_the_verdict_comes(asked: list[dict[str, Any]]) -> None:
    kube = FakeKube()
    deps = deps_of(kube, "abort", FRWATCH_OPERATOR_LIVE_ABORT_ALLOWED="true")
    rounds(deps, live_handler.LiveJobs(), 0.0)  # Early, dumped, Detected; the abort waited in that process
    assert kube.existing is not None
    kube.existing["status"] = {**kube.existing["status"], "phase": "Reported",
                               "verdict": {"headline": "rank 1 took another path"}}  # fmt: skip
    restarted = live_handler.LiveJobs()
    rounds(deps, restarted, 15.0)
    [(_, pending)] = restarted.pending_aborts()
    assert live_actions.abort_when_reported(deps, pending)
    assert kube.patches == [{"spec": {"runPolicy": {"suspend": True}},
                             "metadata": {"annotations": {c.ANN_LIVE_ABORTED: pending.incident}}}]  # fmt: skip
    assert len(asked) == 1  # nothing asked again


def test_a_restarted_operator_clears_the_early_incident_of_a_job_that_succeeded(
    asked: list[dict[str, Any]],
) -> None:
    kube = FakeKube()
    deps = deps_of(kube, None)
    rounds(deps, live_handler.LiveJobs(), 0.0)
    restarted = live_handler.LiveJobs()
    restarted.saw(
        KIND,
        {**job(None), "status": {"conditions": [{"type": "Succeeded", "status": "True"}]}},
        deleted=False,
    )  # type: ignore[arg-type]
    rounds(deps, restarted, 15.0)
    assert [s["phase"] for s in kube.statuses] == ["Early", "Cleared"] and asked == []


def test_an_incident_live_watch_did_not_open_is_left_alone(asked: list[dict[str, Any]]) -> None:
    """An Incident the attempt's failure opened (its trigger not live watch's) owes live watch nothing."""
    kube = FakeKube()
    deps = deps_of(kube, "abort", FRWATCH_OPERATOR_LIVE_ABORT_ALLOWED="true")
    rounds(deps, live_handler.LiveJobs(), 0.0)
    assert kube.existing is not None
    kube.existing["spec"] = {**kube.existing["spec"], "trigger": "pod j-1 failed: exit code 1"}
    kube.existing["status"] = {**kube.existing["status"], "phase": "Reported"}
    restarted = live_handler.LiveJobs()
    rounds(deps, restarted, 15.0)
    assert restarted.pending_aborts() == [] and restarted.early == {} and restarted.dumps == {}
