"""Where an analyzer Job stands: still running, done, or failed with a reason. Pure.

Reads the Job's conditions (``Complete``/``SuccessCriteriaMet``, ``Failed``/``FailureTarget`` with
reasons such as ``DeadlineExceeded`` and ``BackoffLimitExceeded``) and its pods' analyzer container:
the termination message (the analyzer's one-line summary, or the tail of its log when it crashed),
the exit code and the reason (``OOMKilled``, ``Error``), and why a pod is still waiting (image pull).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from frwatch_analyzers.verdict_binding import digest_in
from frwatch_operator import constants as c
from frwatch_operator.resources import ConditionReason
from frwatch_operator.times import parse_rfc3339

#: What the analyzer's exit codes mean (frwatch_analyzers.cli).
EXIT_MEANINGS = {
    2: "no verdict could be made",
    3: "the verdict was made but could not be written to S3",
}
_MESSAGE_MAX = 600


class JobState(StrEnum):
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True)
class JobOutcome:
    state: JobState
    #: CamelCase reason: the Job condition's (DeadlineExceeded, BackoffLimitExceeded ...), or frwatch's.
    reason: str = ""
    #: What a person reads: what happened, with the analyzer's own words when it left any.
    message: str = ""
    #: The analyzer's termination message (its one-line summary on success).
    summary: str = ""
    #: The sha256 of the verdict.json the analyzer wrote, from the termination message of a pod this Job
    #: owns (the Job's uid in the pod's controller reference): None when there is none to bind the verdict to.
    verdict_digest: str | None = None


def _true_condition(job: Mapping[str, Any], *types: str) -> Mapping[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in types and cond.get("status") == "True":
            return cond  # type: ignore[no-any-return]
    return None


def _analyzer_status(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == c.ANALYZER_CONTAINER:
            return status  # type: ignore[no-any-return]
    return {}


def _newest(pods: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    if not pods:
        return None
    return max(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp", "")))


def _owned_by(pod: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """Whether the Job is the pod's controller (its uid in the pod's controller reference): a pod that only
    carries the Job's name label (anyone who may create pods there can set one) is not the Job's."""
    uid = (job.get("metadata") or {}).get("uid")
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return bool(uid) and any(r.get("uid") == uid and r.get("controller") and r.get("kind") == "Job" for r in refs)


def _terminated(pod: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if pod is None:
        return {}
    status = _analyzer_status(pod)
    return (
        (status.get("state") or {}).get("terminated")
        or (status.get("lastState") or {}).get("terminated")
        or {}
    )


def pod_ending(pod: Mapping[str, Any] | None) -> str:
    """How the analyzer container of a pod ended, in words ("" when it has not ended)."""
    term = _terminated(pod)
    if not term:
        return ""
    code = term.get("exitCode")
    parts = [f"exit {code}" if code is not None else "ended"]
    if code in EXIT_MEANINGS:
        parts.append(f"({EXIT_MEANINGS[code]})")
    if term.get("reason") and term.get("reason") not in ("Error", "Completed"):
        parts.append(f"[{term['reason']}]")
    text = " ".join(parts)
    message = " ".join(str(term.get("message") or "").split())
    if message:
        text += f": {message[-_MESSAGE_MAX:]}"
    return text


def _waiting(pods: Sequence[Mapping[str, Any]]) -> str:
    pod = _newest(pods)
    if pod is None:
        return "no analyzer pod yet"
    waiting = (_analyzer_status(pod).get("state") or {}).get("waiting") or {}
    if waiting.get("reason"):
        return f"pod {pod['metadata'].get('name')} waiting: {waiting['reason']} {waiting.get('message', '')}".strip()
    return f"pod {pod['metadata'].get('name')} {(pod.get('status') or {}).get('phase', 'Pending')}"


def job_outcome(
    job: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    *,
    now: datetime | None = None,
    overdue_after: timedelta | None = None,
) -> JobOutcome:
    """The Job's outcome. ``overdue_after``: a Job still unfinished this long after its creation is
    reported FAILED (``AnalyzerOverdue``), so a Job the Job controller never finishes cannot stall the
    incident (give its activeDeadlineSeconds plus a margin)."""
    name = (job.get("metadata") or {}).get("name", "?")
    newest = _newest(pods)
    done = _true_condition(job, "Complete", "SuccessCriteriaMet")
    if done is not None:
        owned = _newest([p for p in pods if _owned_by(p, job)])
        owned_term = _terminated(owned)
        digest = digest_in(str(owned_term.get("message") or "")) if owned_term.get("exitCode") == 0 else None
        return JobOutcome(
            JobState.SUCCEEDED,
            "Completed",
            f"analyzer Job {name} completed",
            " ".join(str(_terminated(newest).get("message") or "").split()),
            digest,
        )
    failed = _true_condition(job, "Failed", "FailureTarget")
    if failed is not None:
        reason = str(failed.get("reason") or "Failed")
        words = {
            "DeadlineExceeded": "ran out of time (activeDeadlineSeconds)",
            "BackoffLimitExceeded": "failed on every try (backoffLimit)",
        }.get(reason, "failed")
        message = f"analyzer Job {name} {words}"
        if failed.get("message"):
            message += f": {failed['message']}"
        ending = pod_ending(newest)
        if ending:
            message += f"; last pod {newest['metadata'].get('name') if newest else '?'}: {ending}"
        return JobOutcome(JobState.FAILED, reason, message, str(_terminated(newest).get("message") or ""))
    if now is not None and overdue_after is not None:
        created = _created(job)
        if created is not None and now - created > overdue_after:
            return JobOutcome(
                JobState.FAILED,
                ConditionReason.ANALYZER_OVERDUE,
                f"analyzer Job {name} has not finished {int(overdue_after.total_seconds())} s after its "
                f"creation ({_waiting(pods)}); is the Job controller running?",
            )
    return JobOutcome(JobState.RUNNING, "Running", f"analyzer Job {name} running: {_waiting(pods)}")


def _created(job: Mapping[str, Any]) -> datetime | None:
    return parse_rfc3339((job.get("metadata") or {}).get("creationTimestamp"))
