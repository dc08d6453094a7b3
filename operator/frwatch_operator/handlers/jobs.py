"""Training jobs of every enabled kind (PyTorchJob, TrainJob, JobSet: ``operator.job_kinds``) -> the job
index (read by the webhook and detection), their rank layout, and an Event when
the opt-in is malformed (the job is then left untouched) or capture turns on; the job's own Failed or
Restarting condition opens its current attempt's Incident when it is about that attempt
(``frwatch_operator.detect.job_failure`` says when). A JobSet run by a TrainJob is not indexed: the TrainJob is
the user's object. What the job's spec gets wrong (a TrainJob whose runtime is missing) is named in an
Event and kept for its Incidents' conditions. A kind whose CRD is absent is said at start
(``frwatch_operator.main``); kopf watches it once it is installed. A job that ends with no Incident to open
(a captured job succeeded, a job not captured failed) gets a Normal ``NoIncident`` Event saying so: frwatch
has looked and decided. No finalizers."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from frwatch_operator import notices
from frwatch_operator.capture.optin import CaptureDecision, OptIn
from frwatch_operator.detect.job_failure import job_end
from frwatch_operator.errors import FrwatchError
from frwatch_operator.handlers.deps import Deps, retrying, translate_errors
from frwatch_operator.handlers.pods import not_captured, open_incident
from frwatch_operator.kinds.job_kind import PYTORCHJOB, JobKind, api_version, enabled_kinds
from frwatch_operator.kinds.jobset_trainjob import TRAINJOB, runtime_ref
from frwatch_operator.kube.adapter import ObjectRef

logger = logging.getLogger(__name__)


def on_job(deps: Deps, event_type: str | None, body: dict[str, Any], kind: JobKind = PYTORCHJOB) -> None:
    meta = body.get("metadata") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    known = deps.index.job(ns, name)
    if known is not None and known.kind != kind.kind:  # the index and the pods' labels know a name only
        if deps.seen.first_time(f"{meta.get('uid')}/ignored-kind"):
            logger.warning("%s %s/%s ignored: frwatch follows the %s of that name", kind.kind, ns, name, known.kind)
        return
    if event_type == "DELETED":
        deps.index.delete_job(ns, name)
        deps.seen.forget_job(ns, name)
        return
    if kind.handled_elsewhere(body):
        return  # a TrainJob's JobSet: the TrainJob is followed
    body = {**body, "apiVersion": api_version(kind), "kind": kind.kind}
    deps.index.upsert_job(body)
    layout = kind.layout(body)
    deps.seen.set_layout(ns, name, layout)
    decision = deps.index.decide(ns, name, deps.config)
    if decision is None:
        return
    ref = ObjectRef.of(body)
    end = job_end(body, kind.succeeded_condition)
    if end is not None:
        say_no_incident(deps, ref, end, decision)
    if decision.outcome is OptIn.DISABLED:
        return
    if decision.enabled:
        for problem in kind.spec_problems(body) + _missing_runtime(deps, kind, body):
            deps.seen.note_problem(ns, name, f"spec/{problem[:48]}", problem)
            notice = notices.job_spec_problem(problem)
            if deps.seen.first_time(f"{ref.uid}/{notice.reason}/{notice.message}"):
                deps.kube.post_event(ref, notice)
    if layout.problem and decision.enabled:
        bounds = notices.spec_out_of_bounds(layout.problem)
        if deps.seen.first_time(f"{ref.uid}/{bounds.reason}/{bounds.message}"):
            deps.kube.post_event(ref, bounds)
    notice = (
        notices.capture_untouched(decision.reason)
        if decision.outcome is OptIn.UNTOUCHED
        else notices.capture_enabled(decision.reason)
    )
    if decision.outcome is OptIn.UNTOUCHED:
        logger.warning("job %s/%s left untouched: %s", ns, name, decision.reason)
    if deps.seen.first_time(f"{ref.uid}/{notice.reason}/{notice.message}"):
        deps.kube.post_event(ref, notice)
    failure = kind.failure(body)
    entry = deps.index.job(ns, name)
    uncaptured = deps.seen.uncaptured(ns, name)
    if uncaptured and entry is not None and decision.enabled:  # opted in while its pods run
        not_captured(deps, kind, entry, uncaptured[0])
    if failure is not None and entry is not None and decision.enabled and decision.settings is not None:
        open_incident(deps, kind, entry, decision.settings, failure.attempt, failure.describe())


def _missing_runtime(deps: Deps, kind: JobKind, body: dict[str, Any]) -> list[str]:
    """A TrainJob's runtime that does not exist (the trainer then makes no JobSet and no pods): asked once
    per TrainJob and runtime (best effort: an API error is logged, not raised)."""
    ref = runtime_ref(body) if kind is TRAINJOB else None
    meta = body.get("metadata") or {}
    if ref is None or not deps.seen.first_time(f"{meta.get('uid')}/runtime/{ref[1]}/{ref[2]}"):
        return []
    try:
        if deps.kube.runtime_exists(str(meta.get("namespace") or ""), ref[1], ref[2]):
            return []
    except FrwatchError as exc:
        logger.warning(
            "TrainJob %s: its runtime %s %s not checked: %s", meta.get("name"), ref[1], ref[2], exc
        )
        return []
    return [
        f"spec.runtimeRef names {ref[1]} {ref[2]!r}, which does not exist: the trainer makes no pods until it does"
    ]


def say_no_incident(deps: Deps, ref: ObjectRef, end: str, decision: CaptureDecision) -> None:
    """The job ended: when frwatch opens no Incident for it, say so once (a Normal ``NoIncident`` Event)."""
    if end == "Succeeded" and decision.enabled:
        why = "it is captured, and a job that succeeds leaves nothing to capture"
    elif end == "Failed" and not decision.enabled:
        why = f"it is not captured: {decision.reason}"
    else:
        return  # a captured job that failed: its attempt's Incident says the rest
    if deps.seen.first_time(f"{ref.uid}/{notices.Reason.NO_INCIDENT}"):
        logger.info("job %s/%s %s: no Incident (%s)", ref.namespace, ref.name, end.lower(), why)
        deps.kube.post_event(ref, notices.no_incident(end.lower(), why))


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    for kind in enabled_kinds(deps.config.operator.job_kinds):
        _register_kind(registry, deps, kind)


def _register_kind(registry: kopf.OperatorRegistry, deps: Deps, kind: JobKind) -> None:
    handler_id = "frwatch-jobs" if kind is PYTORCHJOB else f"frwatch-{kind.plural}"

    @kopf.on.event(kind.group, kind.version, kind.plural, id=handler_id, registry=registry)
    @translate_errors
    def job_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        retrying(
            lambda: on_job(deps, type, dict(body), kind),
            f"{kind.kind} event {body.get('metadata', {}).get('name')}",
        )
