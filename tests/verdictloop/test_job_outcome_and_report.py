"""Pure pieces: a Job's outcome from its conditions and pod, and what a verdict looks like on the job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from vl_builders import hardware_verdict

from frwatch_analyzers.verdict import Category, Status, Verdict
from frwatch_operator import constants as c
from frwatch_operator.analysis.job_outcome import JobState, job_outcome
from frwatch_operator.analysis.job_reading import OVERDUE_GRACE, read_job
from frwatch_operator.config import AnalyzerSettings
from frwatch_operator.resources import CaptureSettings, ComputeResources, Condition, IncidentStatus
from frwatch_operator.verdict.report import (
    comma_list,
    failed_status,
    job_annotations,
    reported_status,
    suspects_line,
    verdict_events,
    verdict_line,
    with_condition,
)

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def job(*conditions: tuple[str, str], created: datetime = NOW) -> dict[str, Any]:
    return {
        "metadata": {"name": "frwatch-analyze-llama-0", "creationTimestamp": created.isoformat()},
        "status": {
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": f"{r} happened"} for t, r in conditions
            ]
        },
    }


def pod(state: dict[str, Any], name: str = "p-1", created: str = "2026-11-22T03:00:00Z") -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": created},
            "status": {"phase": "Failed", "containerStatuses": [{"name": c.ANALYZER_CONTAINER, "state": state}]}}  # fmt: skip


TERMINATED_2 = {
    "terminated": {"exitCode": 2, "reason": "Error", "message": "frwatch analyze: no verdict: bucket gone"}
}
OOM = {"terminated": {"exitCode": 137, "reason": "OOMKilled", "message": ""}}

OUTCOMES = {
    "no conditions, no pod": (job(), [], JobState.RUNNING, "Running", "no analyzer pod yet"),
    "image pull": (job(), [pod({"waiting": {"reason": "ImagePullBackOff", "message": "nope"}})], JobState.RUNNING,
                   "Running", "ImagePullBackOff"),
    "complete": (job(("SuccessCriteriaMet", ""), ("Complete", "")), [pod({"terminated": {"exitCode": 0, "message": "problem/desync: x"}})],
                 JobState.SUCCEEDED, "Completed", "completed"),
    "deadline": (job(("FailureTarget", "DeadlineExceeded"), ("Failed", "DeadlineExceeded")), [pod(TERMINATED_2)],
                 JobState.FAILED, "DeadlineExceeded", "no verdict could be made): frwatch analyze: no verdict: bucket gone"),
    "backoff, newest pod OOM-killed": (job(("Failed", "BackoffLimitExceeded")),
                                       [pod(TERMINATED_2, "p-1"), pod(OOM, "p-2", "2026-11-22T03:01:00Z")],
                                       JobState.FAILED, "BackoffLimitExceeded", "p-2: exit 137 [OOMKilled]"),
    "overdue": (job(created=NOW - timedelta(hours=2)), [], JobState.FAILED, "AnalyzerOverdue", "is the Job controller running"),
}  # fmt: skip


@pytest.mark.parametrize(
    ("the_job", "pods", "state", "reason", "says"), OUTCOMES.values(), ids=OUTCOMES.keys()
)
def test_job_outcome(the_job: Any, pods: Any, state: JobState, reason: str, says: str) -> None:
    outcome = job_outcome(the_job, pods, now=NOW, overdue_after=timedelta(minutes=20))
    assert (outcome.state, outcome.reason) == (state, reason)
    assert says in outcome.message


class OneJob:
    """The two reads :func:`read_job` makes, of one Job (or none) and its pods."""

    def __init__(self, the_job: dict[str, Any] | None, pods: list[dict[str, Any]]) -> None:
        self.the_job, self.pods = the_job, pods
        self.asked: list[tuple[str, str, str]] = []

    def get_batch_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.asked.append(("job", namespace, name))
        return self.the_job

    def list_job_pods(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        self.asked.append(("pods", namespace, job_name))
        return self.pods


def test_read_job_gone_is_none_and_asks_for_no_pods() -> None:
    kube = OneJob(None, [])
    assert read_job(kube, "ns", "j", analyzer=AnalyzerSettings(), settings=None, now=NOW) is None
    assert kube.asked == [("job", "ns", "j")]


@pytest.mark.parametrize("policy_deadline", [None, 60])
def test_read_job_is_overdue_past_the_effective_deadline_plus_the_grace(policy_deadline: int | None) -> None:
    analyzer = AnalyzerSettings(deadline_seconds=900)
    capture = None if policy_deadline is None else CaptureSettings(
        buffer_size=2000, bucket="b", prefix="p", collection_deadline_seconds=60, analyzer_image="i",
        analyzer_resources=ComputeResources(), analyzer_deadline_seconds=policy_deadline,
        agent_resources=ComputeResources(), remediation_enabled=False, remediation_dry_run=True,
        max_nodes_per_incident=1,
    )  # fmt: skip
    limit = timedelta(seconds=policy_deadline or 900) + OVERDUE_GRACE
    pods = [pod({"waiting": {"reason": "ImagePullBackOff", "message": "nope"}})]
    for age, state in ((limit - timedelta(seconds=1), JobState.RUNNING), (limit + timedelta(seconds=1), JobState.FAILED)):
        kube = OneJob(job(created=NOW - age), pods)
        read = read_job(kube, "ns", "j", analyzer=analyzer, settings=capture, now=NOW)
        assert read is not None and read.pods == pods and read.job is kube.the_job
        assert read.outcome.state is state, (age, read.outcome)
        assert kube.asked == [("job", "ns", "j"), ("pods", "ns", "j")]


def test_annotations_are_one_line_and_bounded() -> None:
    long = hardware_verdict("n-1", ranks=list(range(20000)))
    long = long.model_copy(
        update={
            "headline": "line one\nline two " + "x" * 400,
            "suspect_nodes": [f"node-{i}" for i in range(5000)],
        }
    )
    ann = job_annotations(long, incident="llama-0", report="s3://b/k/report.txt")
    assert "\n" not in ann[c.ANN_VERDICT] and len(ann[c.ANN_VERDICT]) <= 256
    ranks = ann[c.ANN_SUSPECT_RANKS]
    assert (
        ranks is not None
        and ranks.startswith("0,1,2,3")
        and ranks.endswith("more")
        and len(ranks) <= 16 * 1024
    )
    assert sum(len(v or "") for v in ann.values()) < 64 * 1024


def test_stale_suspects_of_an_earlier_verdict_are_removed() -> None:
    healthy = Verdict(status=Status.healthy, category=Category.healthy, headline="all 4 ranks agree")
    ann = job_annotations(healthy, incident="llama-1", report="s3://b/r")
    assert ann[c.ANN_SUSPECT_RANKS] is None and ann[c.ANN_SUSPECT_NODES] is None  # merge patch null: removed
    assert [e.type for e in verdict_events(healthy, incident="llama-1", report="s3://b/r")] == ["Normal"]


def test_events_say_verdict_suspects_next_steps() -> None:
    events = verdict_events(
        hardware_verdict("gpu-7", ranks=[3, 11]), incident="llama-0", report="s3://b/r.txt"
    )
    by_reason = {e.reason.value: e for e in events}
    assert list(by_reason) == ["Diagnosed", "SuspectsNamed", "NextSteps"]
    assert (
        "s3://b/r.txt" in by_reason["Diagnosed"].message
        and "hardware-class" in by_reason["Diagnosed"].message
    )
    assert by_reason["SuspectsNamed"].message == "Suspects: ranks 3, 11 (stuck) on node gpu-7"
    assert by_reason["NextSteps"].message.startswith("Next steps (GPU hang): 1) run dcgmi diag")
    assert all(len(e.message) <= 1024 for e in events)


def test_status_patches_keep_other_conditions() -> None:
    collected = Condition(type="Collected", status="True", reason="AllRanksDumped", last_transition_time="t0")
    verdict = hardware_verdict("gpu-7")
    status = reported_status(verdict, report="s3://b/r", now=NOW, conditions=[collected], note="")
    merged = IncidentStatus.model_validate(status)  # a valid status, field names on the wire
    assert merged.phase.value == "Reported" and merged.suspect_nodes == ["gpu-7"] and merged.hardware_class
    assert [x.type for x in merged.conditions] == ["Collected", "Analyzed"]
    failed = failed_status("VerdictMissing", "gone", now=NOW, conditions=merged.conditions)
    assert [(x["type"], x["status"]) for x in failed["conditions"]] == [
        ("Collected", "True"),
        ("Analyzed", "False"),
    ]
    same = with_condition([collected], collected.model_copy(update={"last_transition_time": "t1"}))
    assert same[0]["lastTransitionTime"] == "t0"  # unchanged status: the transition time stays


def test_verdict_line_and_lists() -> None:
    # an older verdict (no short): its headline, one line, with the kind the category says
    assert verdict_line(hardware_verdict("n").model_copy(update={"headline": "  a\tb\n c "})) == "GPU hang: a b c"
    assert comma_list([1, 2, 3]) == "1,2,3" and comma_list([]) == ""


@pytest.mark.parametrize(
    ("ranks", "nodes", "line"),
    [
        ([1], ["node-b"], "rank 1 on node-b"),
        ([3, 1, 2, 0, 0], ["node-a", "node-b", "node-a"], "ranks 0-3 on node-a,node-b"),
        ([0, 1, 2, 7, 9, 10], [], "ranks 0-2,7,9-10"),
        ([], ["gpu-7"], "node gpu-7"),
        ([], [], ""),
        ([4], [f"a-very-long-node-name-{i}.example.internal" for i in range(3)], "rank 4 on 3 nodes"),
        (list(range(0, 4000, 2)), [f"n{i}" for i in range(90)], "2000 ranks on 90 nodes"),
    ],
)
def test_suspects_line_is_short_words(ranks: list[int], nodes: list[str], line: str) -> None:
    assert suspects_line(ranks, nodes) == line
    assert len(suspects_line(ranks, nodes)) <= 64


def test_reported_status_says_the_suspects_in_words() -> None:
    status = reported_status(
        hardware_verdict("gpu-7", ranks=[3, 11]), report="s3://b/r", now=NOW, conditions=[]
    )
    assert IncidentStatus.model_validate(status).suspects == "ranks 3,11 on gpu-7"
    assert status["suspectRanks"] == [3, 11] and status["suspectNodes"] == ["gpu-7"]  # the lists stay
