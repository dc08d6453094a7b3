"""The training job's own ``Failed``/``Restarting`` condition as a failure signal, safe across attempts. Pure.

Pod failures are the first signal (:mod:`frwatch_operator.detect.pod_failure`); the job's condition catches what
the pods no longer show: pods deleted before the operator saw them fail (``cleanPodPolicy``, an
``activeDeadlineSeconds`` kill of a hung job), or an operator that was down when they failed.

The hard part is *which attempt* a condition belongs to. Opening attempt N's Incident moves the job's
``frwatch.io/attempt`` to N+1 at once, while the training operator reacts to the same pod failure a
little later (``Restarting``: pods deleted, created again; ``Failed``: the end). That condition is about
attempt N, yet it is written after the bump and its ``lastTransitionTime`` can even be later than the
bump. So the condition is compared with the **start of the current attempt**: the creation time of the
first pod frwatch saw injected for it, recorded on the job (``frwatch.io/attempt-started:
"<attempt>@<RFC 3339>"``, written once per attempt by the operator; it survives operator restarts and
pod deletion). A condition counts for the current attempt only when it turned True strictly after that
start (timestamps have one-second resolution: a condition in the same second as the first pod is
ambiguous and left to the pod-failure signal). No recorded start for the current attempt (its pods do
not exist yet, or were never seen) means the condition belongs to an earlier attempt: ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from frwatch_operator import constants as c
from frwatch_operator.incident.naming import valid_attempt
from frwatch_operator.times import parse_rfc3339, rfc3339

#: The job conditions that mean "this attempt's training failed" (Kubeflow's JobConditionType values).
FAILURE_CONDITIONS = ("Failed", "Restarting")
#: The job conditions that mean "the job is over" (Kubeflow's JobConditionType values).
END_CONDITIONS = ("Succeeded", "Failed")


def attempt_started_value(attempt: str, started: datetime) -> str:
    """The value of ``frwatch.io/attempt-started``: ``"<attempt>@<RFC 3339, seconds>"``."""
    return f"{attempt}@{rfc3339(started)}"


def parse_attempt_started(value: object) -> tuple[str, datetime] | None:
    """``(attempt, start)`` from the annotation's value, or None when absent or malformed."""
    if not isinstance(value, str) or "@" not in value:
        return None
    attempt, _, when = value.partition("@")
    started = parse_rfc3339(when)
    return (attempt, started) if attempt and started is not None else None


def _annotations(job: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = job.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    return ann if isinstance(ann, Mapping) else {}


def current_attempt(job: Mapping[str, Any]) -> str:
    """The job's current attempt (``frwatch.io/attempt``, default "0"); "" when the annotation is not a
    decimal number (someone else wrote it: no attempt is attributed until frwatch writes it again)."""
    value = _annotations(job).get(c.ANN_ATTEMPT) or "0"
    return value if valid_attempt(value) else ""


def attempt_start(job: Mapping[str, Any]) -> datetime | None:
    """When the current attempt's first pod was created, as recorded on the job; None if not recorded."""
    recorded = parse_attempt_started(_annotations(job).get(c.ANN_ATTEMPT_STARTED))
    if recorded is None or recorded[0] != current_attempt(job):
        return None
    return recorded[1]


def start_to_record(job: Mapping[str, Any], pod_attempt: str | None, pod_created: datetime | None) -> str | None:
    """The ``frwatch.io/attempt-started`` value to write after seeing a pod of ``pod_attempt`` created at
    ``pod_created``, or None when nothing changes (another attempt's pod, or an earlier pod already
    recorded)."""
    if pod_attempt is None or pod_created is None or pod_attempt != current_attempt(job):
        return None
    known = attempt_start(job)
    if known is not None and known <= pod_created:
        return None
    return attempt_started_value(pod_attempt, pod_created)


@dataclass(frozen=True)
class JobFailure:
    """The job's failure condition, attributed to its current attempt."""

    job: str
    attempt: str
    condition: str  #: Failed or Restarting
    reason: str
    message: str
    at: datetime  #: the condition's lastTransitionTime

    def describe(self) -> str:
        """One phrase a person reads, e.g. "job llama Failed (PyTorchJobFailed: ...)"."""
        why = f" ({self.reason}: {self.message})" if self.reason and self.message else (
            f" ({self.reason or self.message})" if self.reason or self.message else ""
        )
        return f"job {self.job} {self.condition}{why}"


def job_end(job: Mapping[str, Any], succeeded: str = "Succeeded") -> str | None:
    """``Succeeded`` or ``Failed`` when the job's condition of that type is True (the job is over), else None.
    ``succeeded``: the kind's own name of its success condition (Kubeflow's ``Succeeded``, TrainJob's
    ``Complete``, JobSet's ``Completed``), read as ``Succeeded``."""
    status = job.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for cond in conditions if isinstance(conditions, list) else []:
        if not isinstance(cond, Mapping) or cond.get("status") != "True":
            continue
        if cond.get("type") == succeeded:
            return "Succeeded"
        if cond.get("type") in END_CONDITIONS:
            return str(cond["type"])
    return None


def job_failure(job: Mapping[str, Any], conditions: tuple[str, ...] = FAILURE_CONDITIONS) -> JobFailure | None:
    """The failure the job's conditions show for its current attempt (see the module docstring), or None.
    ``conditions``: the condition types that mean failure for the job's kind (its adapter says)."""
    started = attempt_start(job)
    if started is None or not current_attempt(job):
        return None
    status = job.get("status")
    listed = status.get("conditions") if isinstance(status, Mapping) else None
    meta = job.get("metadata")
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    for kind in conditions:
        for cond in listed if isinstance(listed, list) else []:
            if not isinstance(cond, Mapping) or cond.get("type") != kind or cond.get("status") != "True":
                continue
            at = parse_rfc3339(cond.get("lastTransitionTime"))
            if at is not None and at > started:
                return JobFailure(
                    job=name, attempt=current_attempt(job), condition=kind, reason=str(cond.get("reason") or ""),
                    message=str(cond.get("message") or "")[:200], at=at,
                )  # fmt: skip
    return None
