"""Creating the Analyzing phase's Jobs: the analyzer Job, or (many ranks) the Indexed map Job first.

:func:`start_jobs` creates the analyzer Job, or, with more ranks than ``analyzer.ranks_per_pod``, the map
Job (:mod:`.fanout`) and sets ``status.analysisStep`` to ``Map``; :func:`advance_map` watches the map Job
and, once it ended, creates the analyzer Job (``Reduce``). Every create is idempotent (the Job's name is
derived from the Incident) and announced once with an ``AnalyzerStarted`` Event on the Incident; a Job
of the same name left by an earlier Incident is deleted first (:class:`RetryableError`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from frwatch_operator import constants as c
from frwatch_operator.analysis.analyzer_job import analyzer_job, effective_run
from frwatch_operator.analysis.fanout import failed_shards, map_job, map_job_ref, shard_count
from frwatch_operator.analysis.job_outcome import JobState
from frwatch_operator.analysis.job_reading import read_job
from frwatch_operator.analysis.steps import POLL_SECONDS, Step
from frwatch_operator.config import Config
from frwatch_operator.errors import RetryableError
from frwatch_operator.incident.record import Incident, IncidentIdentity, evidence_url
from frwatch_operator.kube.ports import KubeActions, Obj
from frwatch_operator.notices import Notice, Reason
from frwatch_operator.resources import CaptureSettings, Condition
from frwatch_operator.verdict.events import event_object
from frwatch_operator.verdict.report import analyzing_status, one_line


def create_analyzer_job(
    incident: IncidentIdentity,
    storage_url: str,
    config: Config,
    settings: CaptureSettings | None,
    kube: KubeActions,
    now: datetime,
    conditions: tuple[Condition, ...] | list[Condition] = (),
) -> Step:
    """Create the Incident's analyzer Job (idempotent), post AnalyzerStarted; the status for Analyzing."""
    url = evidence_url(storage_url, f"Incident {incident.key}")
    run = effective_run(config.analyzer, settings)
    manifest = analyzer_job(incident, evidence_url=url, s3=config.s3, run=run, settings=config.analyzer)
    name, ns, _ = _create_announced(incident, manifest, kube, now, lambda where: f"analyzing the dumps at {url} in Job {where}")
    status = {**analyzing_status(name, now=now, conditions=conditions), "analyzerNamespace": ns}
    return Step(status, done=False, retry_after=POLL_SECONDS)


def _create_announced(
    incident: IncidentIdentity, manifest: Obj, kube: KubeActions, now: datetime, said: Callable[[str], str]
) -> tuple[str, str, str]:
    """The one path that creates an analysis Job (the analyzer's or the map's): create it (idempotent), post
    ``AnalyzerStarted`` on the Incident with ``said(where)``; (name, namespace, what was said)."""
    name, ns = _create_own_job(incident, manifest, kube)
    text = said(name if ns == incident.namespace else f"{ns}/{name}")
    spec = Notice("Normal", Reason.ANALYZER_STARTED, text)
    kube.create_event(event_object(spec, about=incident.reference(), incident_uid=incident.uid, now=now))
    return name, ns, text


def _create_own_job(incident: IncidentIdentity, manifest: Obj, kube: KubeActions) -> tuple[str, str]:
    """Create the Job (idempotent: a second create finds it); (name, namespace). One of an earlier Incident
    of the same name is deleted and :class:`RetryableError` raised (the next pass creates this one's)."""
    job = kube.create_job(manifest)
    name, ns = str(manifest["metadata"]["name"]), str(manifest["metadata"]["namespace"])
    meta = job.get("metadata") or {}
    owners = [ref.get("uid") for ref in meta.get("ownerReferences") or []]
    if incident.uid not in owners and (meta.get("annotations") or {}).get(c.ANN_INCIDENT_UID) != incident.uid:
        kube.delete_job(ns, name)
        raise RetryableError(
            f"Job {ns}/{name} belongs to an earlier Incident of the same name; deleting it, "
            "will create this Incident's Job after",
            delay=2.0,
        )
    return name, ns


# --- fan-out: the map step (analysis.fanout) before the analyzer Job --------------------------------

#: ``status.analysisStep`` while the Indexed map Job runs; then ``Reduce`` (the analyzer Job).
STEP_MAP, STEP_REDUCE = "Map", "Reduce"


def start_jobs(
    incident: IncidentIdentity,
    storage_url: str,
    config: Config,
    settings: CaptureSettings | None,
    kube: KubeActions,
    now: datetime,
    conditions: tuple[Condition, ...] | list[Condition],
    ranks: int | None,
) -> Step:
    """The analyzer Job, or (more ranks than ``analyzer.ranks_per_pod``) the Indexed map Job first."""
    shards = shard_count(ranks, config.analyzer.ranks_per_pod)
    if shards < 2:
        return create_analyzer_job(incident, storage_url, config, settings, kube, now, conditions)
    url = evidence_url(storage_url, f"Incident {incident.key}")
    run = effective_run(config.analyzer, settings)
    manifest = map_job(
        incident, evidence_url=url, s3=config.s3, run=run, shards=shards, settings=config.analyzer
    )
    name, ns, said = _create_announced(
        incident, manifest, kube, now,
        lambda where: f"summarising the dumps of {ranks} ranks in {shards} map pods (Indexed Job {where}), then analyzing",
    )  # fmt: skip
    status = {
        **analyzing_status(name, now=now, conditions=conditions),
        "analyzerJob": "",
        "analyzerMapJob": name,
        "analyzerNamespace": ns,
        "analysisStep": STEP_MAP,
        "message": f"analyzing: {said}",
    }
    return Step(status, done=False, retry_after=POLL_SECONDS)


def advance_map(
    view: Incident, config: Config, kube: KubeActions, settings: CaptureSettings | None, now: datetime
) -> Step:
    """The map Job running: look again later. Ended (done, failed, or gone): create the analyzer Job, which
    reduces the summaries the map pods wrote and decodes (or names) the dumps of ranks they did not."""
    ns, name = map_job_ref(view.identity, config.analyzer)
    ns, name = view.status.analyzer_namespace or ns, view.status.analyzer_map_job or name
    read = read_job(kube, ns, name, analyzer=config.analyzer, settings=settings, now=now)
    if read is None:
        ended = f"map Job {name} was gone when frwatch looked"
    else:
        outcome = read.outcome
        if outcome.state is JobState.RUNNING:
            message = f"map step: {outcome.message}"
            patch = {"message": message} if message != view.status.message else {}
            return Step(patch, done=False, retry_after=POLL_SECONDS)
        ended = f"map Job {name}: {outcome.message}"
        shards_failed = failed_shards(read.job)
        if shards_failed:
            ended = f"{ended}; {shards_failed}"
    step = create_analyzer_job(
        view.identity, view.spec.storage_url, config, settings, kube, now, view.status.conditions
    )
    message = one_line(f"{step.status.get('message', '')}; {ended}", 1024)
    return replace(step, status={**step.status, "analysisStep": STEP_REDUCE, "message": message})
