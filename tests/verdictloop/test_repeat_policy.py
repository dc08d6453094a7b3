"""The same bug twice stops the loop (issue 29 item 1): what makes two attempts' failures "the same", the
policy's decision, the GPUs a job asks for, and the step against the API emulator (the job suspended or not,
the Events, the Incident's condition and counters)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from vl_builders import create_incident, events_about, hardware_verdict

from frwatch_analyzers.verdict import (
    Branch,
    Category,
    CulpritKind,
    EntryView,
    Evidence,
    Frame,
    ProcessGroupRef,
    Status,
    Verdict,
)
from frwatch_operator import constants as c
from frwatch_operator.incident.naming import incident_name
from frwatch_operator.incident.record import Incident
from frwatch_operator.remediation.restart_policy import (
    RepeatAction,
    branch_key,
    decide,
    gpu_hours,
    job_gpus,
    policy_of,
    resume_command,
)
from frwatch_operator.remediation.restart_step import act_on_repeat, status_patch
from frwatch_operator.repeat_resources import RepeatPolicyName
from frwatch_operator.resources import CaptureSettings
from frwatch_operator.times import rfc3339

NOW = datetime.now(UTC).replace(microsecond=0)


def skip_verdict(*, line: int = 42, culprits: tuple[int, ...] = (1,), category: Category = Category.missing_rank,
                 seq: int = 5) -> Verdict:  # fmt: skip
    """Rank(s) ``culprits`` never enqueued all_reduce #seq of the default group, which the others called at
    train.py:``line``."""
    site = [Frame(name="train_step", filename="/app/train.py", line=line)]
    others = [r for r in range(4) if r not in culprits]
    return Verdict(
        status=Status.problem, category=category, headline="rank 1 skipped all_reduce", culprit_ranks=list(culprits),
        culprit_kind=CulpritKind.took_another_path,
        earliest_branch=Branch(process_group=ProcessGroupRef(name="0", desc="default_pg", ranks=[0, 1, 2, 3]),
                               seq=seq, op="gloo:all_reduce"),
        evidence=[Evidence(process_group="0", seq=seq, views=[
            EntryView(ranks=others, op="gloo:all_reduce", call_site=site),
            EntryView(ranks=list(culprits), op=None),
        ])],
    )  # fmt: skip


# --- pure -----------------------------------------------------------------------------------------------


def test_same_branch_same_key_whatever_the_step() -> None:
    assert branch_key(skip_verdict()) and branch_key(skip_verdict()) == branch_key(skip_verdict(seq=9))


@pytest.mark.parametrize(
    "other",
    [
        skip_verdict(line=43),  # another call site
        skip_verdict(culprits=(2,)),  # another rank took the other path
        skip_verdict(category=Category.desync),
    ],
    ids=["call-site", "culprit", "category"],
)
def test_a_different_branch_is_not_the_same_bug(other: Verdict) -> None:
    assert branch_key(other) and branch_key(other) != branch_key(skip_verdict())


def test_what_cannot_stop_a_restart_has_no_key() -> None:
    assert branch_key(hardware_verdict("node-1")) == ""  # hardware: another node is the fix
    no_site = skip_verdict().model_copy(update={"evidence": []})
    assert branch_key(no_site) == ""  # nothing proves the same code path
    healthy = Verdict(status=Status.healthy, category=Category.healthy, headline="ok")
    assert branch_key(healthy) == ""


def test_policy_decides_report_dry_run_or_suspend() -> None:
    key = branch_key(skip_verdict())
    args: dict[str, Any] = {"key": key, "previous_key": key, "previous_incident": "j-0", "resume": "kubectl ...",
                            "attempt": "1"}  # fmt: skip
    assert decide(**args, policy=RepeatPolicyName.REPORT, dry_run=False).action is RepeatAction.REPORTED
    dry = decide(**args, policy=RepeatPolicyName.SUSPEND, dry_run=True)
    assert dry.action is RepeatAction.DRY_RUN and "would suspend" in dry.message
    assert decide(**args, policy=RepeatPolicyName.FAIL, dry_run=False).action is RepeatAction.SUSPEND
    other = decide(**{**args, "previous_key": branch_key(skip_verdict(line=7))}, policy=RepeatPolicyName.SUSPEND,
                   dry_run=False)  # fmt: skip
    assert other.action is RepeatAction.NONE and not other.same


def test_the_jobs_annotation_wins_and_a_bad_one_is_ignored_with_a_note() -> None:
    assert policy_of({c.ANN_REPEAT_POLICY: "suspend"}, RepeatPolicyName.REPORT) == (RepeatPolicyName.SUSPEND, "")
    policy, note = policy_of({c.ANN_REPEAT_POLICY: "delete"}, RepeatPolicyName.REPORT)
    assert policy is RepeatPolicyName.REPORT and "ignored" in note


def test_gpus_per_kind_and_the_hours() -> None:
    pod = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "4"}}}]}
    pytorchjob = {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": pod}},
                                                   "Worker": {"replicas": 3, "template": {"spec": pod}}}}}  # fmt: skip
    jobset = {"spec": {"replicatedJobs": [{"replicas": 2, "template": {"spec": {"parallelism": 2,
                                                                                 "template": {"spec": pod}}}}]}}  # fmt: skip
    trainjob = {"spec": {"trainer": {"numNodes": 4, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}}}
    assert job_gpus("PyTorchJob", pytorchjob) == job_gpus("JobSet", jobset) == job_gpus("TrainJob", trainjob) == 32
    assert job_gpus("JobSet", {"spec": {}}) == 0
    assert gpu_hours(32, 1800) == 16.0
    assert resume_command("PyTorchJob", "ns", "llama").endswith('\'{"spec":{"runPolicy":{"suspend":false}}}\'')


# --- against the API emulator ---------------------------------------------------------------------------


def gpu_pytorchjob(custom: Any, namespace: str, name: str, annotations: dict[str, str]) -> dict[str, Any]:
    pod = {"containers": [{"name": "pytorch", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    body = {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name, "annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED, **annotations}},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": pod}},
                                         "Worker": {"replicas": 1, "template": {"spec": pod}}}},
    }  # fmt: skip
    return custom.create_namespaced_custom_object(c.KF_GROUP, c.KF_VERSION, namespace, c.KF_PLURAL, body)  # type: ignore[no-any-return]


def two_attempts(custom: Any, ns: str, job: dict[str, Any], first: Verdict, *, owner: dict[str, Any] | None = None
                 ) -> Incident:  # fmt: skip
    """Attempt 0's Incident (Reported with ``first``'s key, of ``owner``'s job, default ``job``), and attempt 1's
    view, detected 10 minutes later."""
    owner = owner or job
    meta = job["metadata"]
    create_incident(custom, ns, owner, storage_url="s3://b/p/0", attempt="0",
                    name=incident_name(meta["name"], meta["uid"], "0"),
                    status={"phase": "Reported", "detectedAt": rfc3339(NOW - timedelta(minutes=10)),
                            "repeat": {"branchKey": branch_key(first)}})  # fmt: skip
    second = create_incident(custom, ns, job, storage_url="s3://b/p/1", attempt="1",
                             name=incident_name(meta["name"], meta["uid"], "1"),
                             status={"phase": "Analyzing", "detectedAt": rfc3339(NOW)})  # fmt: skip
    return Incident.of(second)


def run(kube: Any, custom: Any, ns: str, job: dict[str, Any], view: Incident, verdict: Verdict, dry_run: bool) -> Any:
    training = custom.get_namespaced_custom_object(c.KF_GROUP, c.KF_VERSION, ns, c.KF_PLURAL, job["metadata"]["name"])
    settings = CaptureSettings.model_construct(repeat_policy=RepeatPolicyName.REPORT, repeat_dry_run=dry_run)
    ref = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "namespace": ns,
           "name": job["metadata"]["name"], "uid": job["metadata"]["uid"]}  # fmt: skip
    return act_on_repeat(view=view, verdict=verdict, training=training, job_ref=ref, bound=True, settings=settings,
                         kube=kube, now=NOW)  # fmt: skip


def suspended(custom: Any, ns: str, name: str) -> bool:
    job = custom.get_namespaced_custom_object(c.KF_GROUP, c.KF_VERSION, ns, c.KF_PLURAL, name)
    return bool((job["spec"].get("runPolicy") or {}).get("suspend"))


def test_same_bug_twice_suspends_the_job_and_says_how_to_resume(
    k8s_namespace: str, crds: None, custom: Any, kube: Any, core: Any
) -> None:
    ns = k8s_namespace
    job = gpu_pytorchjob(custom, ns, "llama", {c.ANN_REPEAT_POLICY: "suspend"})
    view = two_attempts(custom, ns, job, skip_verdict())
    acted = run(kube, custom, ns, job, view, skip_verdict(seq=7), dry_run=False)
    assert suspended(custom, ns, "llama")
    got = custom.get_namespaced_custom_object(c.KF_GROUP, c.KF_VERSION, ns, c.KF_PLURAL, "llama")
    assert got["metadata"]["annotations"][c.ANN_RESTART_STOPPED] == f"missing_rank: {view.name}"
    r = acted.repeat
    assert (r.same, r.action, r.gpus, r.attempt_seconds, r.gpu_hours_not_spent) == (True, "suspended", 4, 600.0, 0.6667)
    body = '{"spec":{"runPolicy":{"suspend":false}}}'
    assert r.resume == f"kubectl -n {ns} patch pytorchjob llama --type merge -p '{body}'"
    assert acted.condition.type == "SameBugAgain" and r.resume in acted.condition.message
    reasons = [e.reason for e in events_about(core, ns, "llama")]
    assert reasons == ["RestartStopped"]
    assert [e.reason for e in events_about(core, ns, view.name)] == ["RestartStopped"]
    patch = status_patch(acted, {"conditions": [{"type": "Analyzed", "status": "True"}]})
    assert [x["type"] for x in patch["conditions"]] == ["Analyzed", "SameBugAgain"]
    assert patch["repeat"]["gpuHoursNotSpent"] == 0.6667


def test_dry_run_and_a_different_branch_leave_the_job_alone(
    k8s_namespace: str, crds: None, custom: Any, kube: Any, core: Any
) -> None:
    ns = k8s_namespace
    job = gpu_pytorchjob(custom, ns, "dry", {c.ANN_REPEAT_POLICY: "suspend"})
    acted = run(kube, custom, ns, job, two_attempts(custom, ns, job, skip_verdict()), skip_verdict(), dry_run=True)
    assert acted.repeat.action == "dry-run" and not suspended(custom, ns, "dry")
    assert [e.reason for e in events_about(core, ns, "dry")] == ["SameBugAgain"]

    other = gpu_pytorchjob(custom, ns, "healthy-restart", {c.ANN_REPEAT_POLICY: "suspend"})
    view = two_attempts(custom, ns, other, skip_verdict(line=99))
    acted = run(kube, custom, ns, other, view, skip_verdict(), dry_run=False)
    assert (acted.repeat.same, acted.repeat.action, acted.condition) == (False, "none", None)
    assert not suspended(custom, ns, "healthy-restart") and events_about(core, ns, "healthy-restart") == []


def test_a_previous_incident_of_another_job_is_never_compared(
    k8s_namespace: str, crds: None, custom: Any, kube: Any
) -> None:
    """An Incident named as this job's attempt 0 but of another job (uid) says nothing about this job."""
    ns = k8s_namespace
    job = gpu_pytorchjob(custom, ns, "mine", {c.ANN_REPEAT_POLICY: "suspend"})
    stranger = gpu_pytorchjob(custom, ns, "stranger", {})
    view = two_attempts(custom, ns, job, skip_verdict(), owner=stranger)
    acted = run(kube, custom, ns, job, view, skip_verdict(), dry_run=False)
    assert acted.repeat.previous_incident == "" and not suspended(custom, ns, "mine")
