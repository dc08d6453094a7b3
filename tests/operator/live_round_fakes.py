"""The live round's fakes (``handlers.live.live_round`` without a cluster): the job kind, the job, the API, the
agents' answers (a desync: rank 1 broadcasts at seq 30 where the others all_reduce), the operator's Deps; for
``test_live_round`` and ``test_live_policy_round``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from live_answers import fr_answer

from frwatch_analyzers.live.summary import LivePod, summarize_live
from frwatch_operator import constants as c
from frwatch_operator.config import load_config
from frwatch_operator.detect.observations import Observations
from frwatch_operator.detect.pod_failure import PodFacts
from frwatch_operator.errors import RetryableError
from frwatch_operator.handlers import Deps
from frwatch_operator.handlers import live as live_handler
from frwatch_operator.webhook import JobIndex

KIND = SimpleNamespace(
    group="kubeflow.org", version="v1", kind="PyTorchJob", pod_job_label=c.KF_LABEL_JOB_NAME,
    succeeded_condition="Succeeded",
    pod_ranks=lambda pod, layout: SimpleNamespace(ranks=range(pod["rank"], pod["rank"] + 1)),
)  # fmt: skip


def job(policy: str | None = None) -> dict[str, Any]:
    """The PyTorchJob ``ns/j`` with capture and live watch on (and ``policy``, the live policy, if given)."""
    annotations = {c.ANN_CAPTURE: c.CAPTURE_ENABLED, c.ANN_LIVE: c.LIVE_ENABLED}
    if policy is not None:
        annotations[c.ANN_LIVE_POLICY] = policy
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "j", "namespace": "ns", "uid": "uid-1", "annotations": annotations}}  # fmt: skip


@dataclass
class FakeKube:
    """The API calls of the live round: 4 pods, one Incident, its status writes, Events, the job."""

    existing: dict[str, Any] | None = None
    #: the next this many status writes fail (503)
    fail_status_writes: int = 0
    #: a status write of this phase fails once
    fail_phase: str | None = None
    created: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    patches: list[dict[str, Any]] = field(default_factory=list)

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return [{"name": f"j-{r}", "rank": r} for r in range(4)]

    def create_incident(self, body: dict[str, Any]) -> bool:
        if self.existing is not None:
            return False
        self.created.append(body)
        self.existing = {**body, "metadata": {**body["metadata"], "uid": "inc-1"}, "status": {}}
        return True

    def get_incident(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.existing

    def patch_incident_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        if self.fail_status_writes:
            self.fail_status_writes -= 1
            raise RetryableError("the API answered 503")
        if self.fail_phase is not None and status.get("phase") == self.fail_phase:
            self.fail_phase = None
            raise RetryableError("the API answered 503")
        self.statuses.append(status)
        assert self.existing is not None
        self.existing = {**self.existing, "status": status}

    def post_event(self, ref: Any, notice: Any) -> bool:
        self.events.append(notice)
        return True

    def get_job(self, kind: Any, namespace: str, name: str) -> dict[str, Any]:
        return job(None)

    def patch_job(self, kind: Any, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.patches.append(patch)


def answer_a_desync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every round's agents answer a desync: rank 1 broadcasts at seq 30 where the others all_reduce."""

    def facts(pod: dict[str, Any], ranks: Any) -> PodFacts:
        return PodFacts(name=pod["name"], namespace="ns", attempt="0", phase="Running", pod_ip="127.0.0.1",
                        control_port=9, ranks=ranks)  # fmt: skip

    def pulled(agents: dict[str, Any], timeout: float) -> dict[str, LivePod | str]:
        odd = {30: "gloo:broadcast"}
        return {f"j-{r}": LivePod(pod=f"j-{r}", ranks=[summarize_live(fr_answer(30, odd if r == 1 else None), r, 0)])
                for r in range(4)}  # fmt: skip

    monkeypatch.setattr(live_handler, "pod_facts", facts)
    monkeypatch.setattr(live_handler, "pull_all", pulled)


def deps_of(kube: FakeKube, policy: str | None = None, **env: str) -> Deps:
    """The operator's Deps over ``kube``, the job indexed, the config from ``env`` (and a bucket)."""
    config = load_config({"FRWATCH_S3_BUCKET": "b", **env})
    deps = Deps(config, JobIndex(), Observations(), kube, None)  # type: ignore[arg-type]
    deps.index.upsert_job(json.loads(json.dumps(job(policy))))
    return deps


def rounds(deps: Deps, jobs: live_handler.LiveJobs, *times: float) -> None:
    """One live round of the job at each of ``times`` (seconds)."""
    for t in times:
        live_handler.live_round(deps, jobs, "ns", "j", KIND, t)  # type: ignore[arg-type]
        assert jobs.settle(timeout_s=60), "a live dump asked this round did not end"
