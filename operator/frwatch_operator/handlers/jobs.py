"""PyTorchJobs -> the job index (read by the webhook and detection), their rank layout, and an Event when
the opt-in is malformed (the job is then left untouched) or capture turns on; the job's own Failed or
Restarting condition opens its current attempt's Incident when it is about that attempt
(``frwatch_operator.job_failure`` says when). A job that ends with no Incident to open (a captured job
succeeded, a job not captured failed) gets a Normal ``NoIncident`` Event saying so: frwatch has looked and
decided. No finalizers."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from frwatch_operator import notices
from frwatch_operator.handlers import Deps, retrying, translate_errors
from frwatch_operator.handlers.pods import not_captured, open_incident
from frwatch_operator.job_failure import job_end, job_failure
from frwatch_operator.jobkinds import PYTORCHJOB
from frwatch_operator.kube import ObjectRef
from frwatch_operator.optin import CaptureDecision, OptIn

logger = logging.getLogger(__name__)


def on_job(deps: Deps, event_type: str | None, body: dict[str, Any]) -> None:
    meta = body.get("metadata") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    if event_type == "DELETED":
        deps.index.delete_job(ns, name)
        deps.seen.forget_job(ns, name)
        return
    deps.index.upsert_job(body)
    layout = PYTORCHJOB.layout(body)
    deps.seen.set_layout(ns, name, layout)
    decision = deps.index.decide(ns, name, deps.config)
    if decision is None:
        return
    ref = ObjectRef.of(
        {"apiVersion": f"{PYTORCHJOB.group}/{PYTORCHJOB.version}", "kind": PYTORCHJOB.kind, **body}
    )
    end = job_end(body)
    if end is not None:
        say_no_incident(deps, ref, end, decision)
    if decision.outcome is OptIn.DISABLED:
        return
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
    failure = job_failure(body)
    entry = deps.index.job(ns, name)
    uncaptured = deps.seen.uncaptured(ns, name)
    if uncaptured and entry is not None and decision.enabled:  # opted in while its pods run
        not_captured(deps, PYTORCHJOB, entry, uncaptured[0])
    if failure is not None and entry is not None and decision.enabled and decision.settings is not None:
        open_incident(deps, PYTORCHJOB, entry, decision.settings, failure.attempt, failure.describe())


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
    @kopf.on.event(
        PYTORCHJOB.group, PYTORCHJOB.version, PYTORCHJOB.plural, id="frwatch-jobs", registry=registry
    )
    @translate_errors
    def job_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        retrying(lambda: on_job(deps, type, dict(body)), f"job event {body.get('metadata', {}).get('name')}")
