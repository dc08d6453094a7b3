"""One live round of the operator (``handlers.live.live_round``) with a fake API and canned agent answers:
a desync opens the Early Incident and one HangSuspected Event; a status write that fails right after the
create is retried by the next round (never left for the Incident timer to adopt as Detected); an Incident
that already exists (the failure came first) is left alone, with no Event."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from live_answers import fr_answer

from frwatch_analyzers.live_summary import LivePod, summarize_live
from frwatch_operator import constants as c
from frwatch_operator.config import load_config
from frwatch_operator.detection import PodFacts
from frwatch_operator.errors import RetryableError
from frwatch_operator.handlers import Deps
from frwatch_operator.handlers import live as live_handler
from frwatch_operator.observations import Observations
from frwatch_operator.webhook import JobIndex

JOB = {
    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
    "metadata": {"name": "j", "namespace": "ns", "uid": "uid-1",
                 "annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED, c.ANN_LIVE: c.LIVE_ENABLED}},
}  # fmt: skip
KIND = SimpleNamespace(
    group="kubeflow.org", version="v1", kind="PyTorchJob", pod_job_label=c.KF_LABEL_JOB_NAME,
    pod_ranks=lambda pod, layout: SimpleNamespace(ranks=range(pod["rank"], pod["rank"] + 1)),
)  # fmt: skip


@dataclass
class FakeKube:
    existing: dict[str, Any] | None = None
    fail_status_writes: int = 0

    def __post_init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.events: list[Any] = []

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return [{"name": f"j-{r}", "rank": r} for r in range(4)]

    def create_incident(self, body: dict[str, Any]) -> bool:
        if self.existing is not None:
            return False
        self.created.append(body)
        self.existing = {**body, "status": {}}
        return True

    def get_incident(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.existing

    def patch_incident_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        if self.fail_status_writes:
            self.fail_status_writes -= 1
            raise RetryableError("the API answered 503")
        self.statuses.append(status)
        assert self.existing is not None
        self.existing = {**self.existing, "status": status}

    def post_event(self, ref: Any, notice: Any) -> bool:
        self.events.append(notice)
        return True


@pytest.fixture
def desync(monkeypatch: pytest.MonkeyPatch) -> None:
    def facts(pod: dict[str, Any], ranks: Any) -> PodFacts:
        return PodFacts(name=pod["name"], namespace="ns", attempt="0", phase="Running", pod_ip="127.0.0.1",
                        control_port=9, ranks=ranks)  # fmt: skip

    def pulled(agents: dict[str, Any], tokens: Any, timeout: float) -> dict[str, LivePod | str]:
        odd = {30: "gloo:broadcast"}
        return {
            f"j-{r}": LivePod(
                pod=f"j-{r}", ranks=[summarize_live(fr_answer(30, odd if r == 1 else None), r, 0)]
            )
            for r in range(4)
        }

    monkeypatch.setattr(live_handler, "pod_facts", facts)
    monkeypatch.setattr(live_handler, "pull_all", pulled)


def deps_of(kube: FakeKube) -> Deps:
    deps = Deps(load_config({"FRWATCH_S3_BUCKET": "b"}), JobIndex(), Observations(), kube, None)  # type: ignore[arg-type]
    deps.index.upsert_job(json.loads(json.dumps(JOB)))
    return deps


def test_a_desync_opens_an_early_incident_once(desync: None) -> None:
    kube, jobs = FakeKube(), live_handler.LiveJobs()
    deps = deps_of(kube)
    for t in (0.0, 15.0, 30.0):
        live_handler.live_round(deps, jobs, "ns", "j", KIND, t)  # type: ignore[arg-type]
    assert len(kube.created) == 1 and kube.created[0]["spec"]["trigger"].startswith("live watch: desync in")
    [status] = kube.statuses
    assert status["phase"] == "Early" and status["liveFinding"]["ranks"] == [1]
    [event] = kube.events
    assert event.reason == "HangSuspected" and event.type == "Warning"


def test_a_failed_status_write_is_retried_by_the_next_round(desync: None) -> None:
    kube, jobs = FakeKube(fail_status_writes=1), live_handler.LiveJobs()
    deps = deps_of(kube)
    with pytest.raises(RetryableError):
        live_handler.live_round(deps, jobs, "ns", "j", KIND, 0.0)  # type: ignore[arg-type]
    assert kube.statuses == [] and kube.events == []
    live_handler.live_round(deps, jobs, "ns", "j", KIND, 15.0)  # type: ignore[arg-type]
    assert [s["phase"] for s in kube.statuses] == ["Early"] and len(kube.events) == 1
    assert len(kube.created) == 1


def test_an_incident_the_failure_opened_first_is_left_alone(desync: None) -> None:
    opened = {"spec": {"trigger": "pod j-1: container pytorch exited 1"}, "status": {"phase": "Collecting"}}
    kube, jobs = FakeKube(existing=opened), live_handler.LiveJobs()
    live_handler.live_round(deps_of(kube), jobs, "ns", "j", KIND, 0.0)  # type: ignore[arg-type]
    assert kube.created == [] and kube.statuses == [] and kube.events == []
