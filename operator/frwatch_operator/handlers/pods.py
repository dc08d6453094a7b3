"""Pods of opted-in jobs -> the operator's view of each job attempt, and failure -> one Incident per attempt.

Every event of a pod labelled ``training.kubeflow.org/job-name`` (no finalizers) updates the pod's facts.
A failure signal (``frwatch_operator.detection``) opens the Incident of the pod's own attempt: the name
is deterministic, a 409 on create is success, so several failing pods, duplicated events and pods
re-listed after an operator restart all land in the same Incident. Opening it moves the job's attempt
annotation past it, so pods created by the restart belong to the next attempt.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf

from frwatch_analyzers.layout import AttemptKey
from frwatch_operator.detection import pod_facts
from frwatch_operator.errors import RetryableError
from frwatch_operator.handlers import Deps, translate_errors
from frwatch_operator.incident_naming import incident_body, incident_name, storage_url
from frwatch_operator.jobkinds import PYTORCHJOB, JobKind, RankLayout
from frwatch_operator.optin import resolve
from frwatch_operator.resources import IncidentCounts, IncidentPhase, IncidentStatus
from frwatch_operator.webhook import JobEntry

logger = logging.getLogger(__name__)
#: How often one pod event is handled before giving up (kopf does not retry event handlers).
EVENT_TRIES = 3
UNKNOWN_LAYOUT = RankLayout(world_size=None, nproc_per_node=None, masters=0)


def rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _job_entry(deps: Deps, kind: JobKind, namespace: str, name: str) -> JobEntry | None:
    entry = deps.index.job(namespace, name)
    if entry is not None:
        return entry
    job = deps.kube.get_job(kind, namespace, name)  # the pod's event came before its job's
    if job is None:
        return None
    deps.seen.set_layout(namespace, name, kind.layout(job))
    return deps.index.upsert_job(job)


def on_pod(deps: Deps, pod: dict[str, Any], *, deleted: bool, kind: JobKind = PYTORCHJOB) -> str | None:
    """Record the pod; open its attempt's Incident on a failure. Returns the Incident's name, if any."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    job_name = kind.job_name_of(pod)
    if job_name is None:
        return None
    entry = _job_entry(deps, kind, namespace, job_name)
    if entry is None:
        return None
    decision = resolve(entry.as_body(), deps.index.policies(namespace), deps.config)
    if not decision.enabled or decision.settings is None:
        return None
    layout = deps.seen.layout(namespace, job_name) or UNKNOWN_LAYOUT
    facts = pod_facts(pod, ranks=kind.ranks_of(pod, layout), deleted=deleted)
    if facts.attempt is None:
        return None  # not injected by frwatch: no dumps to collect, no attempt to name
    deps.seen.record_pod(facts)
    if facts.failure is None or deleted:
        return None
    name = incident_name(job_name, entry.uid, facts.attempt)
    if deps.seen.opened(namespace, name):
        return name
    settings = decision.settings
    key = AttemptKey(settings.prefix, namespace, job_name, entry.uid, facts.attempt)
    trigger = facts.failure.describe()
    body = incident_body(
        job=entry.as_body(),
        api_version=f"{kind.group}/{kind.version}",
        kind=kind.kind,
        attempt=facts.attempt,
        trigger=trigger,
        storage=storage_url(settings.bucket, key),
    )
    created = deps.kube.create_incident(body)
    if created:
        now = datetime.now(UTC)
        status = IncidentStatus(
            phase=IncidentPhase.DETECTED,
            detected_at=rfc3339(now),
            collection_deadline=rfc3339(now + timedelta(seconds=settings.collection_deadline_seconds)),
            counts=IncidentCounts(expected_ranks=layout.world_size),
            message=f"detected: {trigger}",
        )
        deps.kube.patch_incident_status(namespace, name, status.wire())
        logger.warning("incident %s/%s opened: %s", namespace, name, trigger)
    deps.kube.bump_attempt(kind, namespace, job_name, facts.attempt)  # again at start(): idempotent
    deps.seen.mark_opened(namespace, name)
    return name


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    @kopf.on.event(
        "v1", "pods", id="frwatch-pods", labels={PYTORCHJOB.pod_job_label: kopf.PRESENT}, registry=registry
    )
    @translate_errors
    def pod_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        # kopf never retries event handlers: a failure must not be lost to one API hiccup
        for attempt in range(EVENT_TRIES):
            try:
                on_pod(deps, dict(body), deleted=type == "DELETED")
                return
            except RetryableError as exc:
                if attempt == EVENT_TRIES - 1:
                    raise
                logger.warning("pod event: %s (try %d of %d)", exc, attempt + 1, EVENT_TRIES)
                time.sleep(min(exc.delay, 2.0))
