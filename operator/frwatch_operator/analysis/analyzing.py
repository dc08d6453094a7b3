"""The Analyzing phase of an Incident: start the analyzer Job, then drive it to Reported or Failed.

Two entry points (synchronous; kopf runs sync handlers in threads):

- :func:`start_analysis` (the first Analyzing pass of the Incident's timer, ``handlers.incident_phases``):
  creates the analyzer Job when collection ended. Idempotent: the Job's name is derived from the
  Incident, a second call finds it.
- :func:`advance_analysis` on every later pass while the Incident is ``Analyzing``: reads the
  Job; running -> ``Step(done=False, retry_after=...)``; failed -> phase ``Failed`` with the reason and
  Events; done -> reads verdict.json, writes the ``frwatch.io/*`` annotations and Events on the training
  job, runs the cordon policy, returns the status for phase ``Reported``.

A pass the API refuses for good (:class:`FatalError`: 403 forbidden, 422 invalid, a required object
missing; creating the analyzer Job included) is bounded: it is recorded in ``status.apiRefusals``, the
next pass waits (``operator.refused_backoff_seconds``, doubling up to ``refused_backoff_max_seconds``),
and a pass refused ``operator.refused_give_up_seconds`` after the first ends the Incident ``Failed``
(reason ``ApiRefused``: the call, its status, what to grant or fix) with one Warning Event on the
Incident and the job. :class:`RetryableError` (5xx, timeouts, 409 conflicts) is raised as before: the
timer retries it soon.

``Step.status`` is a merge patch for the Incident's ``.status`` (camelCase; lists whole). Nothing is kept
between calls: progress lives in the Incident's status, so a restarted operator resumes. Every write is
idempotent (deterministic Job and Event names, merge patches, the breaker persisted before a cordon).

Over 400 lines: the Analyzing phase's two entry points, its two endings and the bounded refused passes
share the helpers at the bottom; creating the Jobs (the map step included) is in ``analysis_jobs``,
:class:`Step` and :class:`Observed` in ``analysis_steps``; the pure parts are elsewhere (``job_outcome``,
``job_report``, ``exit_verdict``, ``evidence_check``, ``remediation``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from frwatch_analyzers.report.html import render_html
from frwatch_analyzers.report.terminal import render
from frwatch_analyzers.store.layout import MANIFEST, REPORT, REPORT_HTML, VERDICT, RootUrl
from frwatch_analyzers.verdict import Verdict
from frwatch_analyzers.verdict_binding import digest_of
from frwatch_operator.analysis import probe_step, source_step
from frwatch_operator.analysis.analyzer_job import analyzer_job_ref
from frwatch_operator.analysis.job_outcome import JobState
from frwatch_operator.analysis.job_reading import read_job
from frwatch_operator.analysis.jobs import STEP_MAP, advance_map, start_jobs
from frwatch_operator.analysis.steps import POLL_SECONDS, Observed, Step
from frwatch_operator.config import Config
from frwatch_operator.errors import ApiRefusedError, FatalError, FrwatchError
from frwatch_operator.incident.record import Incident, IncidentIdentity, evidence_url
from frwatch_operator.kube.ports import KubeActions, Obj
from frwatch_operator.notices import Notice, Reason
from frwatch_operator.remediation import corroboration as corroborating
from frwatch_operator.remediation import restart_step
from frwatch_operator.remediation.cordon_policy import effective_rules
from frwatch_operator.resources import (
    ApiRefusals,
    CaptureSettings,
    Condition,
    ConditionReason,
    ConditionType,
    IncidentPhase,
)
from frwatch_operator.store.s3 import S3Store
from frwatch_operator.times import parse_rfc3339, rfc3339
from frwatch_operator.verdict.events import event_object, involved
from frwatch_operator.verdict.evidence_check import check_verdict
from frwatch_operator.verdict.exit_verdict import exit_verdict
from frwatch_operator.verdict.reading import VerdictUnavailable, read_verdict
from frwatch_operator.verdict.report import (
    analyzing_status,
    failed_status,
    job_annotations,
    one_line,
    reported_status,
    verdict_events,
    with_condition,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnalysisRequest:
    """What collection hands to analysis when it ends: the Incident and where its evidence is."""

    namespace: str
    incident: str  #: the Incident's name (same namespace)
    incident_uid: str
    storage_url: str  #: s3://bucket/<attempt root>: ranks/, pods/, manifest.json
    settings: CaptureSettings  #: the job's effective settings (analyzer image, resources, deadline)
    ranks: int | None = None  #: the world size, when known: more than analyzer.ranks_per_pod fans out


def _job_ended(state: JobState, reason: str) -> str:
    """The metrics' word for an analyzer Job's end."""
    if state is JobState.SUCCEEDED:
        return "succeeded"
    return "deadline" if reason in ("DeadlineExceeded", ConditionReason.ANALYZER_OVERDUE) else "failed"


def start_analysis(
    request: AnalysisRequest,
    config: Config,
    *,
    kube: KubeActions,
    now: datetime | None = None,
) -> Step:
    """Create the analyzer Job of the request's Incident (idempotent); returns the status for ``Analyzing``.

    ``kube``: the Kubernetes adapter. Raises :class:`RetryableError` when
    the API does not answer, or while a Job of that name left by an earlier Incident of the same name is
    being deleted; :class:`FatalError` when the request cannot be analysed (no s3:// evidence URL). A
    create the API refuses (:class:`ApiRefusedError`: forbidden, invalid) is not raised: the status it
    returns records the refusal (``apiRefusals``, condition Analyzed ``AnalyzerJobNotCreated``) and the
    verdict loop retries the create with backoff until it gives up.
    """
    now = now or datetime.now(UTC)
    incident = IncidentIdentity(request.namespace, request.incident, request.incident_uid)
    ns, name = analyzer_job_ref(incident, config.analyzer)
    try:
        return start_jobs(
            incident, request.storage_url, config, request.settings, kube, now, (), request.ranks
        )
    except ApiRefusedError as exc:  # bounded: the verdict loop retries the create with backoff, then gives up
        not_created = Condition(
            type=ConditionType.ANALYZED, status="Unknown", reason=ConditionReason.ANALYZER_JOB_NOT_CREATED,
            message=one_line(f"analyzer Job {name} not created: {exc}", 1024), last_transition_time=rfc3339(now),
        )  # fmt: skip
        refused, give_up = _refusal_status(None, exc, config, now)
        if give_up:  # refused_give_up_seconds 0: no second try
            message = f"the API refused creating the analyzer Job: {_refusal_text(exc)}"
            spec = Notice(
                "Warning", Reason.ANALYSIS_FAILED, f"no verdict ({ConditionReason.API_REFUSED}): {message}"[:1024]
            )
            try:
                kube.create_event(
                    event_object(spec, about=incident.reference(), incident_uid=incident.uid, now=now)
                )
            except FatalError as post:
                logger.warning("Incident %s: Warning Event not posted: %s", incident.key, post)
            return Step(failed_status(ConditionReason.API_REFUSED, message, now=now, conditions=()), done=True)
        status = {
            "phase": IncidentPhase.ANALYZING.value,
            "analyzerJob": name,
            "analyzerNamespace": ns,
            "conditions": [not_created.wire()],
            **refused,
        }
        return Step(status, done=False, retry_after=config.operator.refused_backoff_seconds)


def advance_analysis(
    incident: Mapping[str, Any],
    *,
    config: Config,
    kube: KubeActions,
    store: S3Store,
    settings: CaptureSettings | None = None,
    now: datetime | None = None,
) -> Step:
    """Look at the analyzer Job once and act on what it shows (see the module's docstring).

    ``settings``: the job's effective capture settings (analyzer deadline, remediation switch, dry-run and
    cap); None: the operator's. Raises :class:`RetryableError` when the API or S3 does not answer
    (nothing was half-done that a retry would not redo the same way); a :class:`FatalError` of a pass is
    recorded and bounded instead (see the module's docstring).
    """
    now = now or datetime.now(UTC)
    view = Incident.of(incident)
    if view.status.phase is not IncidentPhase.ANALYZING:
        return Step(done=view.status.phase in (IncidentPhase.REPORTED, IncidentPhase.FAILED))
    refusals = view.status.api_refusals
    if refusals is not None:
        wait = ((parse_rfc3339(refusals.next_pass_at) or now) - now).total_seconds()
        if wait > 0:  # backing off after a refused pass
            return Step(done=False, retry_after=wait)
    try:
        step = _advance(view, config, kube, store, settings, now)
    except FatalError as exc:  # RetryableError (5xx, timeouts, 409) goes up: the timer retries it soon
        return _refused(view, exc, config, kube, now)
    if refusals is not None:  # this pass went through: the refusals are over
        step = replace(step, status={**step.status, "apiRefusals": None})
    return step


def _advance(
    view: Incident,
    config: Config,
    kube: KubeActions,
    store: S3Store,
    settings: CaptureSettings | None,
    now: datetime,
) -> Step:
    """One pass of :func:`advance_analysis` (raises what the adapters raise)."""
    if view.status.analysis_step == corroborating.STEP_PROBE:  # the verdict is out: probes on nominated nodes
        return _advance_probes(view, config, kube, store, settings, now)
    if view.status.analysis_step in source_step.STEPS:  # the verdict is out: the code for the report
        url = evidence_url(view.spec.storage_url, f"Incident {view.key}")
        patch, over = source_step.advance(
            view, config=config, settings=settings, kube=kube, store=store, url=url, now=now
        )
        return Step(patch, done=over, retry_after=None if over else POLL_SECONDS)
    exits_only = _collected_reason(view) == ConditionReason.EVERY_RANK_EXITED and not view.status.analyzer_job
    if exits_only:
        verdict = exit_verdict(view.status.observed, view.status.counts.expected_ranks, view.namespace)
        if verdict is not None:  # nothing to align: the exits the cluster showed are the verdict
            return _report_exits(view, verdict, config, kube, store, settings, now)
    # status.observed cannot say it (the analyzer decides, as usual), or an earlier create was refused
    if exits_only or _analyzed_reason(view) == ConditionReason.ANALYZER_JOB_NOT_CREATED:
        return start_jobs(
            view.identity, view.spec.storage_url, config, settings, kube, now, view.status.conditions,
            view.status.counts.expected_ranks,
        )  # fmt: skip
    if view.status.analysis_step == STEP_MAP:
        return advance_map(view, config, kube, settings, now)
    url = evidence_url(view.spec.storage_url, f"Incident {view.key}")
    ns, name = analyzer_job_ref(view.identity, config.analyzer)
    if view.status.analyzer_job:  # where this Incident's Job was created (the setting may have changed since)
        ns, name = view.status.analyzer_namespace or view.namespace, view.status.analyzer_job
    first = (
        {} if view.status.analyzer_job
        else {**analyzing_status(name, now=now, conditions=view.status.conditions), "analyzerNamespace": ns}
    )  # fmt: skip
    read = read_job(kube, ns, name, analyzer=config.analyzer, settings=settings, now=now)
    note = ""
    ended = Observed()
    if read is None:
        # Deleted by a person, or cleaned up (TTL) before we looked: the verdict may still be in S3.
        note = f"analyzer Job {name} was gone when frwatch looked"
    else:
        outcome = read.outcome
        if outcome.state is JobState.RUNNING:
            patch = dict(first)
            if outcome.message != view.status.message:
                patch["message"] = outcome.message
            return Step(patch, done=False, retry_after=POLL_SECONDS)
        ended = Observed(analyzer_job=_job_ended(outcome.state, outcome.reason))
        if outcome.state is JobState.FAILED:
            step = _fail(view, _training_job(view, kube), kube, outcome.reason, outcome.message, now, first)
            return replace(step, observed=ended)
    training = _training_job(view, kube)
    # the verdict acted on is the one the analyzer Job wrote: the digest in its termination message
    digest = read.outcome.verdict_digest if read is not None else None
    try:
        verdict = read_verdict(store, url, digest)
    except VerdictUnavailable as exc:
        message = str(exc) if not note else f"{note}, and {exc}"
        reason = ConditionReason.ANALYZER_JOB_GONE if read is None else exc.reason
        return replace(_fail(view, training, kube, reason, message, now, first), observed=ended)
    if digest is None:
        unbound = "the verdict is not bound to an analyzer Job (no digest in its termination message): no node touched"
        note = f"{note}; {unbound}" if note else unbound
    step = _report(view, training, verdict, config, kube, store, settings, url, note, now, digest=digest or "")
    observed = replace(step.observed, analyzer_job=ended.analyzer_job)
    status, done = {**first, **step.status}, step.done
    if not done:  # probes run on nominated nodes first: the source step begins after them
        return Step(status, done=False, retry_after=POLL_SECONDS, observed=observed)
    if config.analyzer.source_from_image and training is not None:  # the verdict is out: now the code
        status, more = source_step.begin(
            view, training, verdict, status, config=config, settings=settings, kube=kube, store=store, url=url,
            now=now,
        )  # fmt: skip
        done = not more
    return Step(status, done=done, retry_after=None if done else POLL_SECONDS, observed=observed)


# --- the two endings ---------------------------------------------------------------------------------


def _report_exits(
    view: Incident,
    verdict: Verdict,
    config: Config,
    kube: KubeActions,
    store: S3Store,
    settings: CaptureSettings | None,
    now: datetime,
) -> Step:
    """Store the exits' verdict and its report where the analyzer would have (the report URL then works as
    for any verdict), and report it."""
    url = evidence_url(view.spec.storage_url, f"Incident {view.key}")
    verdict_bytes = verdict.model_dump_json(indent=1).encode()
    for name, data, kind in (
        (VERDICT, verdict_bytes, "application/json"),
        (REPORT, render(verdict).encode(), "text/plain; charset=utf-8"),
        (REPORT_HTML, render_html(verdict).encode(), "text/html; charset=utf-8"),
    ):
        root = RootUrl.parse(url)
        store.put(root.key(name), data, bucket=root.bucket, content_type=kind)
    note = "no analyzer Job: no rank dumped and every rank's pod failed"
    return _report(
        view, _training_job(view, kube), verdict, config, kube, store, settings, url, note, now,
        digest=digest_of(verdict_bytes),  # the operator's own verdict: bound to what it wrote
    )  # fmt: skip


def _report(
    view: Incident,
    training: Obj | None,
    verdict: Verdict,
    config: Config,
    kube: KubeActions,
    store: S3Store,
    settings: CaptureSettings | None,
    url: str,
    note: str,
    now: datetime,
    *,
    digest: str,
) -> Step:
    """Surface the verdict; nominate its suspects and run the cordon plan (or begin probes: then not done).
    ``digest``: the sha256 the verdict is bound to ("": none, then no node is touched)."""
    report = RootUrl.parse(url).report_url
    checked = check_verdict(verdict, view.status.observed)
    issues = list(checked.issues) + _manifest_changed(view, store, url)
    verdict = checked.verdict  # from here on: only the nodes the cluster confirms
    job_ref = _job_involved(view, training) if training is not None else None
    conditions = list(view.status.conditions)
    if issues:
        spec = Notice("Warning", Reason.EVIDENCE_INCONSISTENT, one_line(
            f"the verdict is inconsistent with what the cluster saw: {'; '.join(issues)}. frwatch kept only the "
            "nodes that ran this attempt's pods (status.observed) and cordons nothing else", 1024))  # fmt: skip
        for about in (job_ref, view.identity.reference()):
            if about is not None:
                kube.create_event(event_object(spec, about=about, incident_uid=view.uid, now=now))
        evidence = Condition(
            type=ConditionType.EVIDENCE_CONSISTENT, status="False", reason=ConditionReason.EVIDENCE_INCONSISTENT, message=spec.message,
            last_transition_time=rfc3339(now),
        )  # fmt: skip
        conditions = [Condition.model_validate(x) for x in with_condition(conditions, evidence)]
    seen, ns = view.status.observed, view.namespace
    said = verdict_events(verdict, incident=view.name, report=report, observed=seen, namespace=ns)
    if job_ref is not None:
        kube.annotate_training_job(
            view.namespace,
            view.spec.job_ref,
            job_annotations(verdict, incident=view.name, report=report, observed=seen, attempt=view.spec.attempt),
        )
        for spec in said:
            kube.create_event(event_object(spec, about=job_ref, incident_uid=view.uid, now=now))
    else:
        gone = f"the {view.spec.job_ref.kind} was deleted while it was analysed: nothing annotated, no node touched"
        note = f"{note}; {gone}" if note else gone
    diagnosed = said[0]
    kube.create_event(event_object(diagnosed, about=view.identity.reference(), incident_uid=view.uid, now=now))
    remediated = None
    detected = parse_rfc3339(view.status.detected_at)
    observed = Observed(
        category=verdict.category.value, hardware_class=verdict.hardware_class,
        seconds_since_detection=(now - detected).total_seconds() if detected is not None else 0.0,
    )  # fmt: skip
    acted = corroborating.Acted()
    if job_ref is not None:
        acted = corroborating.act_on_verdict(
            view=view, verdict=verdict, job_nodes=checked.job_nodes, training=training, bound=bool(digest),
            config=config, settings=settings, kube=kube, evidence=report, now=now, job_ref=job_ref,
        )  # fmt: skip
        remediated = acted.condition
        observed = _remediation_observed(observed, acted, verdict, config, settings)
    status = reported_status(
        verdict, report=report, now=now, conditions=conditions, note=note, remediation=remediated,
        observed=seen, namespace=ns,
    )  # fmt: skip
    status = {**status, "verdictDigest": digest, "nominations": [n.wire() for n in acted.nominations]}
    repeat = restart_step.act_on_repeat(
        view=view, verdict=verdict, training=training, job_ref=job_ref, bound=bool(digest), settings=settings,
        kube=kube, now=now,
    )  # fmt: skip
    status = restart_step.status_patch(repeat, status)
    observed = replace(observed, repeat_action=repeat.repeat.action, gpu_hours_not_spent=repeat.repeat.gpu_hours_not_spent)
    if acted.probing:  # the verdict is out; the cordon plan waits for the probes
        status = {**status, "phase": IncidentPhase.ANALYZING.value, **corroborating.probe_status(acted.nominations)}
        return Step(status, done=False, retry_after=POLL_SECONDS, observed=observed)
    return Step(status, done=True, observed=observed)


def _remediation_observed(
    observed: Observed, acted: corroborating.Acted, verdict: Verdict, config: Config, settings: CaptureSettings | None
) -> Observed:
    result = acted.result
    if result is None:
        return observed
    return replace(
        observed, cordoned=len(result.cordoned), would_cordon=len(result.dry_run_cordons),
        skipped=tuple(result.skipped(verdict, effective_rules(config.remediation, settings))),
        breaker_tripped=result.breaker_tripped,
    )  # fmt: skip


def _advance_probes(
    view: Incident, config: Config, kube: KubeActions, store: S3Store, settings: CaptureSettings | None, now: datetime
) -> Step:
    """Probes run on nominated nodes (:mod:`.probe_step`): look again later, or Reported (or the source step)."""
    def training_of() -> tuple[Obj | None, dict[str, str] | None]:
        training = _training_job(view, kube)
        return training, (_job_involved(view, training) if training is not None else None)

    patch, done, acted = probe_step.advance(
        view, config=config, kube=kube, store=store, settings=settings, now=now, training_of=training_of
    )
    observed = _remediation_observed(Observed(), acted[0], acted[1], config, settings) if acted else Observed()
    return Step(patch, done=done, retry_after=None if done else POLL_SECONDS, observed=observed)


def _manifest_changed(view: Incident, store: S3Store, url: str) -> list[str]:
    """Whether the manifest under the verdict is still the one frwatch wrote (its ETag in the status)."""
    if not view.status.manifest_etag:
        return []
    root = RootUrl.parse(url)
    etag = store.etag(root.key(MANIFEST), bucket=root.bucket)
    if etag == view.status.manifest_etag:
        return []
    return ["manifest.json was replaced or removed after frwatch wrote it (the analyzer may have read a forged one)"]


def _fail(
    view: Incident,
    training: Obj | None,
    kube: KubeActions,
    reason: str,
    message: str,
    now: datetime,
    first: Mapping[str, Any],
    *,
    best_effort: bool = False,
) -> Step:
    """Phase Failed with the reason; one Warning on the Incident and the job. ``best_effort``: an Event the
    API refuses is logged, not raised (the refusal being reported may be the Events' own)."""
    spec = Notice("Warning", Reason.ANALYSIS_FAILED, f"no verdict ({reason}): {message}"[:1024])
    targets = [view.identity.reference()]
    if training is not None:
        targets.append(_job_involved(view, training))
    for about in targets:
        try:
            kube.create_event(event_object(spec, about=about, incident_uid=view.uid, now=now))
        except FatalError as exc:
            if not best_effort:
                raise
            logger.warning("Incident %s: Warning Event not posted: %s", view.key, exc)
    status = failed_status(reason, message, now=now, conditions=view.status.conditions)
    return Step({**first, **status}, done=True)


# --- passes the API refused ---------------------------------------------------------------------------


def _refusal_text(exc: FatalError) -> str:
    """The call, its status, and what to grant or fix."""
    if isinstance(exc, ApiRefusedError):
        return f"{exc} (HTTP {exc.status}); to fix: {exc.fix}"
    return str(exc)


def _refusal_status(
    prior: ApiRefusals | None, exc: FatalError, config: Config, now: datetime
) -> tuple[dict[str, Any], bool]:
    """The status patch recording one more refused pass, and whether it is time to give up."""
    settings = config.operator
    count = prior.count + 1 if prior is not None else 1
    first = (parse_rfc3339(prior.first_at) if prior is not None else None) or now
    give_up = first + timedelta(seconds=settings.refused_give_up_seconds)
    wait = min(
        settings.refused_backoff_seconds * 2 ** min(count - 1, 30), settings.refused_backoff_max_seconds
    )
    text = _refusal_text(exc)
    refusals = ApiRefusals(
        count=count, first_at=rfc3339(first), next_pass_at=rfc3339(now + timedelta(seconds=wait)),
        give_up_at=rfc3339(give_up), last_error=one_line(text, 1024),
    )  # fmt: skip
    message = f"pass refused ({count} in a row): {text}; next pass after {refusals.next_pass_at}, "
    message += f"Failed if still refused after {refusals.give_up_at}"
    return {"apiRefusals": refusals.wire(), "message": one_line(message, 1024)}, now >= give_up


def _refused(view: Incident, exc: FatalError, config: Config, kube: KubeActions, now: datetime) -> Step:
    """A refused pass: back off, or (past the give-up time) end the Incident Failed with one Warning."""
    prior = view.status.api_refusals
    patch, give_up = _refusal_status(prior, exc, config, now)
    count = prior.count + 1 if prior is not None else 1
    if not give_up:
        logger.warning("Incident %s: %s", view.key, patch["message"])
        wait = parse_rfc3339(patch["apiRefusals"]["nextPassAt"]) or now
        return Step(patch, done=False, retry_after=(wait - now).total_seconds())
    since = prior.first_at if prior is not None else rfc3339(now)
    message = f"the API refused {count} pass{'es' if count > 1 else ''} since {since}: {_refusal_text(exc)}"
    try:
        training = _training_job(view, kube)
    except FrwatchError:
        training = None
    return _fail(view, training, kube, ConditionReason.API_REFUSED, message, now, {"apiRefusals": None}, best_effort=True)


# --- small helpers -----------------------------------------------------------------------------------


def _training_job(view: Incident, kube: KubeActions) -> Obj | None:
    """The incident's training job, or None when it is gone (or replaced by another of the same name)."""
    job = kube.get_training_job(view.namespace, view.spec.job_ref)
    if job is None or (job.get("metadata") or {}).get("uid") != view.spec.job_ref.uid:
        return None
    return job


def _analyzed_reason(view: Incident) -> str:
    return next((x.reason for x in view.status.conditions if x.type == ConditionType.ANALYZED), "")


def _collected_reason(view: Incident) -> str:
    return next((x.reason for x in view.status.conditions if x.type == ConditionType.COLLECTED), "")


def _job_involved(view: Incident, training: Obj) -> dict[str, str]:
    ref = view.spec.job_ref
    return involved(training, api_version=ref.api_version, kind=ref.kind)
