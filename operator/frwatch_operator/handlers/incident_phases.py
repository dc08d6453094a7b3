"""Each Incident's one state machine, driven from its persisted status by one kopf timer (a pass per
interval, on the leader): ``Detected`` -> ``Collecting`` -> ``Analyzing`` -> ``Reported`` or ``Failed``.

- ``Detected`` -> ``Collecting`` -> ``Analyzing``: :func:`frwatch_operator.handlers.incidents.start` fixes
  the deadline and the expected ranks, :func:`~frwatch_operator.handlers.incidents.collect` waits for every
  rank's dump and writes the manifest.
- The first ``Analyzing`` pass (:func:`hand_off`) asks for the analyzer Job
  (:func:`frwatch_operator.analysis.analyzing.start_analysis`), recorded in the condition ``AnalysisRequested``;
  when every rank exited before any dump there is nothing to align, and no Job.
- Every later ``Analyzing`` pass (:func:`analyze`) calls :func:`frwatch_operator.analysis.analyzing.advance_analysis`,
  which watches the Job and ends the Incident ``Reported`` (verdict on the job, cordon policy) or ``Failed``.

A restarted operator resumes where the status says; the timer stops (and kopf drops its finalizer) once the
Incident is ``Reported`` or ``Failed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf

from frwatch_operator import constants as c
from frwatch_operator.analysis.analyzing import AnalysisRequest, advance_analysis, start_analysis
from frwatch_operator.errors import NotFoundError
from frwatch_operator.handlers.deps import Deps, translate_errors
from frwatch_operator.handlers.incidents import (
    NOTHING_TO_ALIGN_MESSAGE,
    OPEN,
    collect,
    condition,
    forget,
    settings_of,
    start,
    write_status,
)
from frwatch_operator.handlers.verdict_loop import record
from frwatch_operator.incident.record import Incident
from frwatch_operator.kube.ports import KubeActions
from frwatch_operator.resources import (
    Condition,
    ConditionReason,
    ConditionType,
    IncidentPhase,
    IncidentStatus,
)
from frwatch_operator.times import parse_rfc3339


def handed_over(status: IncidentStatus) -> bool:
    """Whether the first Analyzing pass is done (the analyzer Job asked for, or nothing to align)."""
    return any(x.type == ConditionType.ANALYSIS_REQUESTED and x.status == "True" for x in status.conditions)


def drive(deps: Deps, actions: KubeActions, body: Mapping[str, Any], now: datetime | None = None) -> None:
    """One pass over one Incident, from whatever phase its status says: Detected -> Collecting ->
    Analyzing -> Reported or Failed."""
    now = now or datetime.now(UTC)
    inc = Incident.of(body).checked()
    status = inc.status
    if status.phase.value in OPEN and (
        status.phase is IncidentPhase.DETECTED or not status.collection_deadline
    ):
        status = start(deps, inc, now)
    if status.phase is IncidentPhase.COLLECTING:
        status = collect(deps, inc, status, now)
    if status.phase is IncidentPhase.ANALYZING and not handed_over(status):
        hand_off(deps, actions, inc, status, now)
        forget(inc.uid)
    elif status.phase is IncidentPhase.ANALYZING:
        analyze(deps, actions, body, inc)


def hand_off(
    deps: Deps, actions: KubeActions, inc: Incident, status: IncidentStatus, now: datetime
) -> IncidentStatus:
    """The first pass of Analyzing: ask for the analyzer Job (recorded in the condition ``AnalysisRequested``;
    when every rank exited before any dump there is nothing to align, and no Job)."""
    conditions = [x for x in status.conditions if x.type != ConditionType.ANALYSIS_REQUESTED]
    collected = next((x.reason for x in status.conditions if x.type == ConditionType.COLLECTED), "")
    if collected == ConditionReason.EVERY_RANK_EXITED:  # nothing to align: no analyzer Job
        handed = condition(ConditionType.ANALYSIS_REQUESTED, True, ConditionReason.NOTHING_TO_ALIGN, NOTHING_TO_ALIGN_MESSAGE, now)
        return write_status(deps, inc, status.model_copy(update={"conditions": [*conditions, handed]}))
    request = AnalysisRequest(
        namespace=inc.namespace, incident=inc.name, incident_uid=inc.uid, storage_url=inc.spec.storage_url,
        settings=settings_of(deps, inc, status), ranks=status.counts.expected_ranks,
    )  # fmt: skip
    step = start_analysis(request, deps.config, kube=actions)
    # start_analysis answers with a status merge patch; ours and its conditions go together
    patch = dict(step.status)
    theirs = [Condition.model_validate(x) for x in patch.pop("conditions", None) or []]
    kept = [x for x in conditions if x.type not in {t.type for t in theirs}]
    handed = condition(ConditionType.ANALYSIS_REQUESTED, True, ConditionReason.REQUESTED, "the verdict loop took the incident", now)
    new = status.model_copy(update={"conditions": [*kept, *theirs, handed]})
    deps.kube.patch_incident_status(inc.namespace, inc.name, {**new.wire(), **patch})
    return IncidentStatus.model_validate({**new.wire(), **patch})


def analyze(deps: Deps, actions: KubeActions, body: Mapping[str, Any], inc: Incident) -> None:
    """Every later pass of Analyzing: look at the analyzer Job and act on what it shows (Reported or Failed
    at the end); the metrics once the status is written."""
    settings = settings_of(deps, inc, inc.status)
    step = advance_analysis(body, config=deps.config, kube=actions, store=deps.s3, settings=settings)
    if step.status:
        try:
            deps.kube.patch_incident_status(inc.namespace, inc.name, step.status)
        except NotFoundError:
            return  # the Incident was deleted meanwhile (with its job): nothing left to record
    record(deps.metrics, step.observed)


#: An Incident without a status this old lost its creator before the first status write: adopt it.
ORPHAN_AFTER = timedelta(seconds=10)


def active(status: Mapping[str, Any], meta: Mapping[str, Any], **_: Any) -> bool:
    """Whether the Incident still needs this driver (kopf timer filter): until it is Reported or Failed. A
    brand-new Incident is left to its creator (the pod handler writes its first status right after the
    create) unless orphaned."""
    phase = str((status or {}).get("phase") or "")
    if not phase:
        created = parse_rfc3339(str((meta or {}).get("creationTimestamp") or ""))
        return created is None or datetime.now(UTC) - created > ORPHAN_AFTER
    return phase in OPEN or phase == IncidentPhase.ANALYZING.value


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    actions = deps.kube  # the one adapter, as the verdict loop's port

    @kopf.on.event(c.GROUP, c.VERSION, c.INCIDENT_PLURAL, id="frwatch-incident-phases", registry=registry)
    def incident_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        uid = str(body.get("metadata", {}).get("uid") or "")
        phase = None if type == "DELETED" else str((body.get("status") or {}).get("phase") or "")
        deps.metrics.incident_phase(uid, phase)

    @kopf.timer(
        c.GROUP, c.VERSION, c.INCIDENT_PLURAL, id="frwatch-incident", interval=deps.config.operator.incident_poll_seconds,
        when=active, registry=registry,
    )  # fmt: skip
    @translate_errors
    def incident_timer(body: kopf.Body, **_: Any) -> None:
        if deps.leader.leading():  # one replica drives; the others' timers pass
            drive(deps, actions, body)
