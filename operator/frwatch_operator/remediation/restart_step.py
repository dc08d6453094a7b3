"""The repeat policy's one side effect (issue 29, item 1): after a verdict, compare this attempt with the one
before and, when it is the same bug and the policy says so, suspend the job. The decision is
:mod:`.restart_policy`'s; this module reads the previous attempt's Incident, writes the job once and posts the
Events after the write.

Trust: the verdict comes from the tenant's dumps; it only nominates. What this step may touch is fixed by
objects frwatch wrote: the Incident's own ``spec.jobRef`` (the job and its uid, immutable) and the previous
attempt's Incident, looked up by the name frwatch derives from that uid and attempt, and used only when its own
``spec.jobRef.uid`` is the same job's. A tenant can therefore make frwatch suspend its own job (which it could
do itself), never another job. No action without a verdict bound to the analyzer Job (``bound``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from frwatch_analyzers.verdict import Verdict
from frwatch_operator.errors import FatalError
from frwatch_operator.incident.naming import incident_name
from frwatch_operator.incident.record import Incident
from frwatch_operator.kube.ports import KubeActions, Obj
from frwatch_operator.notices import Notice, Reason
from frwatch_operator.remediation.restart_policy import (
    RepeatAction,
    branch_key,
    decide,
    gpu_hours,
    job_gpus,
    policy_of,
    previous_attempt,
    resume_command,
    suspend_patch,
)
from frwatch_operator.repeat_resources import IncidentRepeat, RepeatPolicyName
from frwatch_operator.resources import CaptureSettings, Condition, ConditionType
from frwatch_operator.times import parse_rfc3339, rfc3339
from frwatch_operator.verdict.events import event_object

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RepeatActed:
    repeat: IncidentRepeat = field(default_factory=IncidentRepeat)
    condition: Condition | None = None  #: SameBugAgain, when both attempts are the same bug


def act_on_repeat(
    *, view: Incident, verdict: Verdict, training: Obj | None, job_ref: dict[str, str] | None, bound: bool,
    settings: CaptureSettings | None, kube: KubeActions, now: datetime,
) -> RepeatActed:  # fmt: skip
    """Compare this attempt's verdict with the previous attempt's and apply the repeat policy (see the module)."""
    key = branch_key(verdict)
    ref = view.spec.job_ref
    base = IncidentRepeat(branch_key=key)
    prev = previous_attempt(view.spec.attempt)
    if not key or prev is None or training is None or job_ref is None:
        return RepeatActed(base)
    prev_name = incident_name(ref.name, ref.uid, prev)
    found = kube.get_incident(view.namespace, prev_name)
    if found is None:
        return RepeatActed(base)
    before = Incident.of(found)
    if before.spec.job_ref.uid != ref.uid or before.status.repeat is None:  # another job's, or nothing to compare
        return RepeatActed(base)
    annotations = dict((training.get("metadata") or {}).get("annotations") or {})
    default = settings.repeat_policy if settings is not None else RepeatPolicyName.REPORT
    policy, ignored = policy_of(annotations, default)
    dry_run = settings.repeat_dry_run if settings is not None else True
    resume = resume_command(ref.kind, view.namespace, ref.name)
    decision = decide(
        key=key, previous_key=before.status.repeat.branch_key, previous_incident=prev_name, policy=policy,
        dry_run=dry_run or not bound, resume=resume, attempt=view.spec.attempt,
    )  # fmt: skip
    if not decision.same:
        return RepeatActed(base.model_copy(update={"previous_incident": prev_name, "policy": policy.value,
                                                   "action": RepeatAction.NONE.value}))  # fmt: skip
    seconds = _attempt_seconds(before.status.detected_at, view.status.detected_at)
    gpus = job_gpus(ref.kind, training)
    message = decision.message + ("" if bound else " (the verdict is not bound to an analyzer Job: nothing done)")
    message += f"; {ignored}" if ignored else ""
    action = decision.action
    if action is RepeatAction.SUSPEND:
        stopped = f"{verdict.category.value}: {view.name}"
        try:
            kube.patch_training_job_spec(view.namespace, ref, suspend_patch(ref.kind, stopped))
        except FatalError as exc:  # forbidden or invalid: say so, the restart goes ahead
            logger.warning("Incident %s: the job was not suspended: %s", view.key, exc)
            action = RepeatAction.REPORTED
            message = f"{decision.message.split('; frwatch suspended')[0]}; the suspend was refused: {exc}"
    not_spent = gpu_hours(gpus, seconds) if action is RepeatAction.SUSPEND else 0.0
    if action is RepeatAction.SUSPEND:
        message += f" (not spent: {gpus} GPU(s) x {seconds:.0f} s an attempt = {not_spent:g} GPU-hours)"
    elif gpus:
        message += f" (each further attempt: {gpus} GPU(s) x {seconds:.0f} s = {gpu_hours(gpus, seconds):g} GPU-hours)"
    reason = Reason.RESTART_STOPPED if action is RepeatAction.SUSPEND else Reason.SAME_BUG_AGAIN
    notice = Notice("Warning", reason, message[:1024])
    for about in (job_ref, view.identity.reference()):
        kube.create_event(event_object(notice, about=about, incident_uid=view.uid, now=now))
    condition = Condition(
        type=ConditionType.SAME_BUG_AGAIN, status="True", reason=reason.value, message=message[:1024],
        last_transition_time=rfc3339(now),
    )  # fmt: skip
    repeat = IncidentRepeat(
        branch_key=key, previous_incident=prev_name, same=True, policy=policy.value, action=action.value,
        resume=resume if action is RepeatAction.SUSPEND else "", gpus=gpus, attempt_seconds=round(seconds, 1),
        gpu_hours_not_spent=not_spent,
    )  # fmt: skip
    return RepeatActed(repeat, condition)


def _attempt_seconds(previous_detected: str, detected: str) -> float:
    """How long an attempt of this job ran until it failed, from its own history: the time between the
    previous attempt's failure and this one's (the restart and the run up to the watchdog)."""
    a, b = parse_rfc3339(previous_detected), parse_rfc3339(detected)
    if a is None or b is None or b <= a:
        return 0.0
    return (b - a).total_seconds()


def status_patch(acted: RepeatActed, status: dict[str, Any]) -> dict[str, Any]:
    """``status`` with ``repeat`` and (when the same bug) the SameBugAgain condition added."""
    out = {**status, "repeat": acted.repeat.wire()}
    if acted.condition is not None:
        kept = [x for x in status.get("conditions", []) if x.get("type") != ConditionType.SAME_BUG_AGAIN]
        out["conditions"] = [*kept, acted.condition.wire()]
    return out
