"""What live watch does after its finding, by the job's policy (issue 15): ``dumpAndAnalyze``, ``abort``, and
closing an Early Incident whose attempt did not fail. Called by :mod:`frwatch_operator.handlers.live` from its
rounds (the leader's live thread).

- **dumpAndAnalyze** (:func:`dump_and_analyze`): the Early Incident's attempt still runs. Every agent of it is
  asked ``POST /live-dump`` (each rank's live Flight Recorder buffer and its Python stack written as the rank's
  dump, then uploaded as any dump: ``frwatch_operator.agent.live_dump``), then the Incident moves
  ``Early -> Detected`` (``live_judge.join_early``, trigger ``live watch (dumpAndAnalyze): ...``). From there
  the Incident timer runs it as any other: Collecting (every rank's dump in the store), Analyzing (the analyzer
  Job), Reported (the verdict on the job: its annotations and Events), all while the pods still run.
  The attempt is moved past (``start`` bumps it, as for a failure): its later watchdog failure finds the
  Incident (a 409 on create) in a phase past Early and leaves it as is, no second Incident, no second
  analysis; the final dumps the ranks then write still reach the store under the attempt, as later dumps of
  those ranks (``ranks-later/``: the live ones stay ``ranks/``), for a person to analyse again if they want.
- **abort** (:func:`abort_when_reported`, only where the operator allows it: ``live_policy``): once that
  Incident is ``Reported``, the job is suspended (:func:`suspend_patch`) and annotated
  ``frwatch.io/live-aborted: <Incident>``, with a Warning ``LiveAborted`` Event. Suspend, not delete: the job's
  controller deletes the pods (the GPUs are freed) and creates none; the job, its status, its Incident and its
  verdict stay, and setting the field back resumes it. Deleting the pods would not stop it (the controller
  creates missing pods again), deleting the job would lose it. No verdict (the Incident ``Failed``): the job is
  left running and a ``LiveAbortSkipped`` Event says why. The wait survives a restart: the move wrote
  ``liveFinding.dumpedAt``, which :func:`frwatch_operator.handlers.live.recover` reads back.
- **Cleared** (:func:`clear_early`): an Early Incident whose job then succeeded, or went on to another attempt
  with no failure of this one seen, is closed ``Early -> Cleared`` with a message and a Normal ``HangCleared``
  Event (the finding kept: a rank slower than the threshold that caught up, or a false alarm worth reading),
  so no Incident stays Early for ever; after an operator restart too (``handlers.live.recover``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from frwatch_operator import constants as c
from frwatch_operator import notices
from frwatch_operator.detect.pod_failure import PodFacts
from frwatch_operator.errors import FrwatchError
from frwatch_operator.handlers.agent_calls import refused, targets
from frwatch_operator.handlers.deps import Deps
from frwatch_operator.incident.record import Incident
from frwatch_operator.kinds.job_kind import JobKind
from frwatch_operator.live import judge as live_judge
from frwatch_operator.live.pull import ask_live_dumps
from frwatch_operator.notices import ObjectRef
from frwatch_operator.resources import CaptureSettings, IncidentPhase
from frwatch_operator.times import rfc3339

logger = logging.getLogger(__name__)
#: How an Incident that live watch moved on by itself says so in its trigger.
DUMP_TRIGGER = "live watch (dumpAndAnalyze): every rank's live buffer asked while the job runs"


@dataclass(frozen=True)
class PendingAbort:
    """A job to suspend once its live Incident is Reported."""

    kind: JobKind
    namespace: str
    job: str
    uid: str
    attempt: str
    incident: str


def suspend_patch(kind: JobKind) -> dict[str, Any]:
    """The merge patch that suspends a job of ``kind``: Kubeflow's ``runPolicy.suspend`` for a PyTorchJob
    (training-operator v1.7+), ``spec.suspend`` for a TrainJob (Trainer v2) and a JobSet."""
    if kind.kind == "PyTorchJob":
        return {"spec": {"runPolicy": {"suspend": True}}}
    return {"spec": {"suspend": True}}


def _ref(kind: JobKind, namespace: str, name: str, uid: str) -> ObjectRef:
    return ObjectRef(f"{kind.group}/{kind.version}", kind.kind, namespace, name, uid)


def dump_and_analyze(
    deps: Deps, kind: JobKind, namespace: str, job: str, uid: str, attempt: str, incident: str,
    pods: Sequence[PodFacts], settings: CaptureSettings, expected: int | None,
) -> bool:  # fmt: skip
    """Ask every agent of the attempt for its ranks' live buffers, then Early -> Detected. True when done (or
    nothing left to do: the Incident is no longer Early); False: try again next round. Raises FrwatchError
    when the API fails (the caller retries next round)."""
    found = deps.kube.get_incident(namespace, incident)
    if found is None:
        return True
    status = Incident.of(found).status
    if status.phase is not IncidentPhase.EARLY:
        return True
    by_name = {p.name: p for p in pods}
    agents = {
        pod: (ip, port, tuple(by_name[pod].ranks), token)
        for pod, (ip, port, token) in targets(deps, namespace, job, pods).items()
    }
    asked = ask_live_dumps(agents)
    for pod, answer in sorted(asked.items()):
        if answer.refused:
            refused(deps, _ref(kind, namespace, job, uid), by_name, pod, answer.error)
    dumped = sorted(r for a in asked.values() for r in a.asked)
    said = "; ".join(f"pod {p}: {a.summary()}" for p, a in sorted(asked.items())) or "no agent to ask"
    logger.warning("incident %s/%s: live dump of attempt %s: %s", namespace, incident, attempt, said)
    now = datetime.now(UTC)
    joined = live_judge.join_early(
        status, trigger=DUMP_TRIGGER, detected_at=rfc3339(now, "milliseconds"),
        deadline=rfc3339(now + timedelta(seconds=settings.collection_deadline_seconds), "milliseconds"),
        expected_ranks=expected, settings=settings,
    )  # fmt: skip
    if joined is None:
        return True
    if joined.live_finding is not None:  # what a restarted operator reads to resume the policy (recover())
        found_at = joined.live_finding.model_copy(update={"dumped_at": rfc3339(now, "milliseconds")})
        joined = joined.model_copy(update={"live_finding": found_at})
    deps.kube.patch_incident_status(namespace, incident, joined.wire())
    words = f"rank(s) {', '.join(map(str, dumped))} dumped" if dumped else "no rank dumped"
    failed = sum(len(a.failed) + (1 if a.error else 0) for a in asked.values())
    deps.kube.post_event(_ref(kind, namespace, job, uid), notices.live_dump_requested(
        incident, attempt, words + (f", {failed} failure(s): see the operator's log" if failed else "")))  # fmt: skip
    return True


def abort_when_reported(deps: Deps, pending: PendingAbort) -> bool:
    """Suspend the job once its live Incident is Reported. True when settled (suspended, or not to be:
    the Incident ended without a verdict, or is gone); False: not yet."""
    p = pending
    found = deps.kube.get_incident(p.namespace, p.incident)
    if found is None:
        return True
    inc = Incident.of(found)
    phase = inc.status.phase
    ref = _ref(p.kind, p.namespace, p.job, p.uid)
    if phase in (IncidentPhase.FAILED, IncidentPhase.CLEARED):
        why = f"abort needs a verdict; Incident {p.incident} is {phase.value}: {inc.status.message[:300]}"
        logger.warning("live watch of job %s/%s: not aborted: %s", p.namespace, p.job, why)
        deps.kube.post_event(ref, notices.live_abort_skipped(p.incident, p.attempt, why))
        return True
    if phase is not IncidentPhase.REPORTED:
        return False
    job = deps.kube.get_job(p.kind, p.namespace, p.job)
    if job is None or str((job.get("metadata") or {}).get("uid") or "") != p.uid:
        return True  # deleted (or another job of that name): nothing to stop
    verdict = inc.status.verdict.headline if inc.status.verdict is not None else inc.status.message
    patch = suspend_patch(p.kind) | {"metadata": {"annotations": {c.ANN_LIVE_ABORTED: p.incident}}}
    try:
        deps.kube.patch_job(p.kind, p.namespace, p.job, patch)
    except FrwatchError as exc:
        why = f"the suspend was refused: {exc}"
        logger.warning("live watch of job %s/%s: not aborted: %s", p.namespace, p.job, why)
        deps.kube.post_event(ref, notices.live_abort_skipped(p.incident, p.attempt, why[:400]))
        return True
    how = "the job was suspended (its pods deleted by its controller)"
    logger.warning(
        "live watch of job %s/%s: %s after Incident %s: %s", p.namespace, p.job, how, p.incident, verdict
    )
    deps.kube.post_event(ref, notices.live_aborted(p.incident, p.attempt, how, verdict[:400]))
    return True


def succeeded(kind: JobKind, job: Mapping[str, Any]) -> bool:
    """Whether the job's status says it succeeded (its kind's condition True)."""
    conditions = (job.get("status") or {}).get("conditions") or []
    return isinstance(conditions, list) and any(
        isinstance(x, Mapping) and x.get("type") == kind.succeeded_condition and x.get("status") == "True"
        for x in conditions
    )


def clear_early(
    deps: Deps, kind: JobKind, namespace: str, job: str, uid: str, attempt: str, incident: str, how: str
) -> None:
    """The attempt ended without a failure seen (``how`` says how: the job succeeded, or went on to another
    attempt): its Incident, if still Early, goes Early -> Cleared (message, Event)."""
    found = deps.kube.get_incident(namespace, incident)
    if found is None:
        return
    status = Incident.of(found).status
    if status.phase is not IncidentPhase.EARLY:
        return
    cleared = status.model_copy(update={"phase": IncidentPhase.CLEARED, "message": f"cleared: {how}"[:1024]})
    deps.kube.patch_incident_status(namespace, incident, cleared.wire())
    logger.info("incident %s/%s: Early -> Cleared: %s", namespace, incident, how)
    deps.kube.post_event(_ref(kind, namespace, job, uid), notices.live_cleared(incident, attempt, how))
