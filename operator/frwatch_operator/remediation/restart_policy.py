"""The same bug twice stops the loop (issue 29, item 1): when two consecutive attempts of one job end at the
same earliest branch, what the repeat policy does to the next restart. Pure; no I/O.

**What makes two failures "the same bug"** (:func:`branch_key`), read from the verdict contract (DESIGN.md,
``frwatch_analyzers.verdict``), all of:

- ``status`` is ``problem`` and the category is a software one (``missing_rank``, ``desync``,
  ``size_mismatch``, ``dtype_mismatch``): a hardware-class verdict is fixed by another node, not by stopping,
  and ``inconclusive``/``no_dump``/``healthy`` say nothing to compare;
- the same ``category``;
- the same earliest branch's process group (its name and description) and ``op``; not its ``seq``: a bug that
  strikes at a data-dependent step is still the same bug;
- the same call sites at that branch: the innermost user frame (file, line, function) of every side of the
  branch (``evidence`` at the branch's group and seq), as a set; a verdict with no call site there is never
  "the same" (nothing proves the two attempts took the same code path);
- the same culprit rank role: ``culprit_kind`` (took another path, CPU-stuck, extra call, crashed ...) and the
  culprit ranks.

**Attempts** are the Incidents' ``spec.attempt`` (one Incident per attempt, named from the job's uid and the
attempt): a JobSet's ``restart-attempt`` label (its ``status.restarts``), a TrainJob's and a PyTorchJob's
``frwatch.io/attempt`` (frwatch moves it past each attempt whose Incident it opens). The attempt before ``N`` is
``N-1``; its Incident is looked up by name and must be of the same job uid (:mod:`.restart_step`).

**The policy** (:class:`~frwatch_operator.resources.RepeatPolicyName`): the job's annotation
``frwatch.io/repeat-policy`` (the tenant's own job: it may choose), else its CapturePolicy's ``repeat.policy``,
else ``report``. ``suspend`` and ``fail`` run in dry-run unless the operator turned ``remediation.repeatDryRun``
off (and no CapturePolicy forced it back on): a dry run says what would be done, in the same Event and condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from frwatch_analyzers.verdict import Category, Status, Verdict
from frwatch_operator import constants as c
from frwatch_operator.repeat_resources import RepeatPolicyName

#: Categories a repeat can stop: a bug in the program (a rank-dependent branch, a mismatched call).
SOFTWARE_CATEGORIES = frozenset(
    {Category.missing_rank, Category.desync, Category.size_mismatch, Category.dtype_mismatch}
)
#: Resource names that count as a GPU in a container's requests or limits.
GPU_SUFFIX = "/gpu"


class RepeatAction(StrEnum):
    NONE = "none"  #: not the same bug (or nothing to compare): the next restart goes ahead
    REPORTED = "reported"  #: the same bug; policy report: said so, nothing done
    DRY_RUN = "dry-run"  #: the same bug; suspend or fail in dry-run: said what would be done
    SUSPEND = "suspended"  #: the same bug; the job is to be suspended


def branch_key(verdict: Verdict) -> str:
    """The verdict's earliest branch as a comparable string; "" when the verdict cannot stop a restart."""
    if verdict.status is not Status.problem or verdict.hardware_class:
        return ""
    if verdict.category not in SOFTWARE_CATEGORIES or verdict.earliest_branch is None:
        return ""
    branch = verdict.earliest_branch
    sites: set[str] = set()
    for ev in verdict.evidence:
        if ev.seq != branch.seq:
            continue
        for view in ev.views:
            if view.call_site:
                top = view.call_site[0]
                sites.add(f"{top.filename}:{top.line}:{top.name}")
    if not sites:
        return ""
    group = f"{branch.process_group.name}/{branch.process_group.desc}"
    culprit = verdict.culprit_kind.value if verdict.culprit_kind is not None else "unknown"
    ranks = ",".join(str(r) for r in sorted(set(verdict.culprit_ranks)))
    return "|".join([verdict.category.value, group, branch.op, ";".join(sorted(sites)), culprit, ranks])[:2048]


def previous_attempt(attempt: str) -> str | None:
    """The attempt before ``attempt`` (None: the first, or not a number)."""
    if not attempt.isdigit() or int(attempt) == 0:
        return None
    return str(int(attempt) - 1)


def policy_of(annotations: Mapping[str, str], default: RepeatPolicyName) -> tuple[RepeatPolicyName, str]:
    """The job's own ``frwatch.io/repeat-policy`` when it is one of the three, else ``default``; and a note when
    the annotation was ignored ("" otherwise)."""
    raw = annotations.get(c.ANN_REPEAT_POLICY)
    if raw is None:
        return default, ""
    try:
        return RepeatPolicyName(raw.strip()), ""
    except ValueError:
        words = ", ".join(p.value for p in RepeatPolicyName)
        return default, f"{c.ANN_REPEAT_POLICY}={raw[:40]!r} is not one of {words}: ignored"


@dataclass(frozen=True)
class RepeatDecision:
    same: bool
    action: RepeatAction
    message: str  #: one line a person reads (the condition and the Event)


def decide(
    *, key: str, previous_key: str, previous_incident: str, policy: RepeatPolicyName, dry_run: bool,
    resume: str, attempt: str,
) -> RepeatDecision:  # fmt: skip
    """What to do with the job after attempt ``attempt`` whose branch key is ``key`` (the attempt before it:
    ``previous_key`` in Incident ``previous_incident``; "" when there is none or it was not comparable)."""
    if not key or not previous_key or key != previous_key:
        return RepeatDecision(False, RepeatAction.NONE, "")
    same = (
        f"attempt {attempt} ended at the same earliest branch as the attempt before it (Incident "
        f"{previous_incident}): the same bug twice, a further restart would hang there again"
    )
    if policy is RepeatPolicyName.REPORT:
        return RepeatDecision(True, RepeatAction.REPORTED, f"{same}; repeat policy report: the job is left to restart")
    verb = "suspend the job" + (" (policy fail: no field fails a running job)" if policy is RepeatPolicyName.FAIL else "")
    if dry_run:
        return RepeatDecision(True, RepeatAction.DRY_RUN, f"{same}; dry-run: would {verb} (the operator's "
                              "remediation.repeatDryRun is on); nothing changed")  # fmt: skip
    return RepeatDecision(True, RepeatAction.SUSPEND, f"{same}; frwatch suspended the job so no further attempt "
                          f"starts; fix the bug, then resume it: {resume}")  # fmt: skip


def suspend_patch(kind: str, stopped: str) -> dict[str, Any]:
    """The merge patch that suspends a job of ``kind`` and says why (``frwatch.io/restart-stopped``): Kubeflow's
    ``runPolicy.suspend`` for a PyTorchJob (training-operator v1.7+), ``spec.suspend`` for a TrainJob and a
    JobSet (as live watch's abort does: ``handlers.live_actions.suspend_patch``)."""
    spec: dict[str, Any] = {"runPolicy": {"suspend": True}} if kind == "PyTorchJob" else {"suspend": True}
    return {"metadata": {"annotations": {c.ANN_RESTART_STOPPED: stopped[:256]}}, "spec": spec}


def resume_command(kind: str, namespace: str, name: str) -> str:
    """The kubectl command that resumes a job this module suspended."""
    body = '{"spec":{"runPolicy":{"suspend":false}}}' if kind == "PyTorchJob" else '{"spec":{"suspend":false}}'
    return f"kubectl -n {namespace} patch {kind.lower()} {name} --type merge -p '{body}'"


def _gpus(pod_spec: Any) -> int:
    """GPUs one pod of this template asks for (its containers' requests, else limits, of any ``*/gpu``)."""
    if not isinstance(pod_spec, Mapping):
        return 0
    total = 0
    for container in pod_spec.get("containers") or []:
        res = container.get("resources") if isinstance(container, Mapping) else None
        res = res if isinstance(res, Mapping) else {}
        for part in ("limits", "requests"):
            amounts = res.get(part)
            if isinstance(amounts, Mapping):
                found = [_count(v) for k, v in amounts.items() if str(k).endswith(GPU_SUFFIX)]
                if found:
                    total += sum(found)
                    break
    return total


def _count(value: Any) -> int:
    try:
        return max(0, int(str(value)))
    except ValueError:
        return 0


def _int(value: Any, default: int) -> int:
    try:
        return max(0, int(value)) if value is not None else default
    except (TypeError, ValueError):
        return default


def job_gpus(kind: str, job: Mapping[str, Any]) -> int:
    """GPUs the job requests in all: pods x GPUs a pod, from its spec (0 when it asks for none)."""
    spec = job.get("spec") if isinstance(job.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    if kind == "PyTorchJob":
        replicas = spec.get("pytorchReplicaSpecs")
        return sum(
            _int(r.get("replicas"), 1) * _gpus((r.get("template") or {}).get("spec"))
            for r in (replicas.values() if isinstance(replicas, Mapping) else []) if isinstance(r, Mapping)
        )  # fmt: skip
    if kind == "TrainJob":
        trainer = spec.get("trainer") if isinstance(spec.get("trainer"), Mapping) else {}
        assert isinstance(trainer, Mapping)
        per_node = _gpus({"containers": [{"resources": trainer.get("resourcesPerNode") or {}}]})
        return _int(trainer.get("numNodes"), 1) * per_node
    total = 0
    for rjob in spec.get("replicatedJobs") or []:
        if not isinstance(rjob, Mapping):
            continue
        jspec = (rjob.get("template") or {}).get("spec") or {}
        pods = _int(jspec.get("parallelism"), 1)
        total += _int(rjob.get("replicas"), 1) * pods * _gpus((jspec.get("template") or {}).get("spec"))
    return total


def gpu_hours(gpus: int, attempt_seconds: float) -> float:
    """What a further attempt would have burnt: the job's GPUs for as long as an attempt ran until it failed."""
    return round(gpus * max(0.0, attempt_seconds) / 3600.0, 4)
