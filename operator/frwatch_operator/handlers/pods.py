"""Pods of opted-in jobs -> the operator's view of each job attempt, and failure -> one Incident per attempt.

Every event of a pod labelled ``training.kubeflow.org/job-name`` (PyTorchJob) or
``jobset.sigs.k8s.io/jobset-name`` (TrainJob, JobSet; the job is the TrainJob of that name if frwatch follows
one, else the JobSet) updates the pod's facts (no finalizers). A pod whose ranks cannot be derived gets
none, and is named in an Event on the job (and in its Incidents' conditions); so is a pod without the labels
its controller always sets.
A failure signal (``frwatch_operator.detect.pod_failure``) opens the Incident of the pod's own attempt: the name
is deterministic, a 409 on create is success, so several failing pods, duplicated events and pods
re-listed after an operator restart all land in the same Incident. Opening it moves the job's attempt
annotation past it, so pods created by the restart belong to the next attempt. The first pod seen of the
job's current attempt has its creation time recorded on the job (``frwatch.io/attempt-started``): the
job's own Failed/Restarting condition is attributed to an attempt by it (``handlers.jobs``). A failed
pod's logs are read right after its Incident is opened, before anything deletes the pod.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_operator import constants as c
from frwatch_operator import notices
from frwatch_operator.capture.gaps import gap_of, whole_attempt_uncaptured
from frwatch_operator.capture.optin import resolve
from frwatch_operator.collect import evidence as evidence_collection
from frwatch_operator.detect.job_failure import current_attempt, start_to_record
from frwatch_operator.detect.pod_failure import PodFacts, pod_facts
from frwatch_operator.errors import FrwatchError
from frwatch_operator.handlers.deps import Deps, retrying, translate_errors
from frwatch_operator.incident.naming import incident_body, incident_name, storage_url
from frwatch_operator.incident.record import Incident
from frwatch_operator.kinds.job_kind import (
    PYTORCHJOB,
    JobKind,
    RankLayout,
    enabled_kinds,
    kind_of,
    kinds_for_pod,
    pod_labels,
)
from frwatch_operator.kube.adapter import ObjectRef
from frwatch_operator.live import judge as live_judge
from frwatch_operator.resources import CaptureSettings, IncidentCounts, IncidentPhase, IncidentStatus
from frwatch_operator.times import parse_rfc3339, rfc3339
from frwatch_operator.webhook import JobEntry

logger = logging.getLogger(__name__)
UNKNOWN_LAYOUT = RankLayout(world_size=None, nproc_per_node=None, masters=0)


def _job_entry(deps: Deps, kind: JobKind, namespace: str, name: str) -> JobEntry | None:
    entry = deps.index.job(namespace, name)
    if entry is not None:
        return entry
    job = deps.kube.get_job(kind, namespace, name)  # the pod's event came before its job's
    if job is None or kind.handled_elsewhere(job):
        return None
    deps.seen.set_layout(namespace, name, kind.layout(job))
    return deps.index.upsert_job(job)


def kind_of_pod(deps: Deps, pod: dict[str, Any]) -> JobKind | None:
    """The enabled kind whose job the pod belongs to: the one frwatch follows under the pod's job label
    (the index), else the first that exists (a TrainJob before the JobSet it runs); None: none."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    name, candidates = kinds_for_pod(pod, enabled_kinds(deps.config.operator.job_kinds))
    entry = deps.index.job(namespace, name) if candidates else None
    if entry is not None:
        known = kind_of(entry.kind)
        return known if known in candidates else None
    for kind in candidates[:-1]:
        job = deps.kube.get_job(kind, namespace, name)
        if job is not None and not kind.handled_elsewhere(job):
            return kind
    return candidates[-1] if candidates else None


def on_pod(deps: Deps, pod: dict[str, Any], *, deleted: bool, kind: JobKind | None = None) -> str | None:
    """Record the pod; open its attempt's Incident on a failure. Returns the Incident's name, if any.
    ``kind``: the pod's job kind (None: found by :func:`kind_of_pod`)."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "")
    kind = kind if kind is not None else kind_of_pod(deps, pod)
    job_name = kind.job_name_of(pod) if kind is not None else None
    if kind is None or job_name is None:
        return None
    if kind.owned_elsewhere(pod):
        return None  # another kind's pod that shares the label: not frwatch's to look up or wait for
    entry = _job_entry(deps, kind, namespace, job_name)
    if entry is None or kind.owned_elsewhere(pod, entry.uid):
        return None
    layout = deps.seen.layout(namespace, job_name) or UNKNOWN_LAYOUT
    ranks = kind.pod_ranks(pod, layout)
    facts = pod_facts(pod, ranks=ranks.ranks, deleted=deleted)
    # remembered whatever the opt-in: a job opted in while it runs has such pods (handlers.jobs says so)
    deps.seen.note_uncaptured(namespace, job_name, facts.name, present=not facts.injected and not deleted)
    decision = resolve(entry.as_body(), deps.index.policies(namespace), deps.config)
    seen = f"pod {namespace}/{facts.name} (resourceVersion {(pod.get('metadata') or {}).get('resourceVersion')})"
    if not decision.enabled or decision.settings is None:
        if facts.failure is not None and not deleted:  # looked and decided: said in the log
            logger.info("failure seen on %s: %s; job %s is not captured: no Incident", seen, facts.failure.describe(), job_name)
        return None
    if not facts.injected and not deleted:
        not_captured(deps, kind, entry, facts.name)
    if facts.attempt is None:
        return None  # not injected by frwatch: no dumps to collect, no attempt to name
    deps.seen.record_pod(facts)
    if not deleted:
        said = [(notices.ranks_unknown(facts.name, ranks.problem), ranks.problem)] if ranks.problem else []
        bad_input(deps, kind, entry, facts.name, said + [(notices.pod_labels_missing(facts.name, p), p)
                                                         for p in kind.pod_problems(pod)])  # fmt: skip
    created = parse_rfc3339((pod.get("metadata") or {}).get("creationTimestamp"))
    if not deleted and start_to_record(entry.as_body(), facts.attempt, created) is not None:
        try:  # best effort: it must never stand between a failure and its Incident
            deps.kube.record_attempt_start(kind, namespace, job_name, facts.attempt, created)
        except FrwatchError as exc:
            logger.warning("job %s/%s: attempt %s's start not recorded: %s", namespace, job_name, facts.attempt, exc)
    if facts.failure is None or deleted:
        return None
    name = open_incident(deps, kind, entry, decision.settings, facts.attempt, facts.failure.describe())
    logger.info("failure seen on %s: %s; Incident %s", seen, facts.failure.describe(), name)  # looked and decided
    read_logs_now(deps, kind, entry, decision.settings, facts, name)
    return name


def read_logs_now(
    deps: Deps, kind: JobKind, entry: JobEntry, settings: CaptureSettings, facts: PodFacts, incident: str
) -> None:
    """The failed pod's logs, now: before its restart policy or the training operator deletes it. Best
    effort (the Incident's passes read again what is missing while the pod exists)."""
    assert facts.attempt is not None
    key = AttemptKey(settings.prefix, entry.namespace, entry.name, entry.uid, facts.attempt)
    ref = ObjectRef(f"{kind.group}/{kind.version}", kind.kind, entry.namespace, entry.name, entry.uid)
    where = evidence_collection.Where(key, settings.bucket, ref, incident)
    try:
        evidence_collection.read_logs(deps.kube, deps.s3, deps.config.evidence, where, [facts], ending=False)
    except FrwatchError as exc:  # read_logs keeps its own failures; never let one stand in the way
        logger.warning("pod %s/%s: logs not read yet: %s", entry.namespace, facts.name, exc)


def bad_input(
    deps: Deps, kind: JobKind, entry: JobEntry, pod: str, said: list[tuple[notices.Notice, str]]
) -> None:
    """Name a pod's bad input (``(notice, problem)`` pairs): kept for its Incidents' conditions, and one Event
    on the job per distinct problem (the first pod that shows it: a 1000-pod job with the same problem posts
    one). Best effort: saying it must never stand between a failure and its Incident."""
    ref = ObjectRef(f"{kind.group}/{kind.version}", kind.kind, entry.namespace, entry.name, entry.uid)
    for notice, problem in said:
        deps.seen.note_problem(entry.namespace, entry.name, f"pod {pod}/{notice.reason}", notice.message)
        if not deps.seen.first_time(f"{entry.uid}/{notice.reason}/{problem}"):
            continue
        logger.warning("%s %s/%s: %s", kind.kind, entry.namespace, entry.name, notice.message)
        try:
            deps.kube.post_event(ref, notice)
        except FrwatchError as exc:
            logger.warning("%s %s/%s: not posted: %s", kind.kind, entry.namespace, entry.name, exc)


def not_captured(deps: Deps, kind: JobKind, entry: JobEntry, pod: str) -> None:
    """A pod of an opted-in job runs without capture: say it on the job (``frwatch_operator.capture.gaps``).
    Best effort: saying it must never stand between a failure and its Incident."""
    ref = ObjectRef(f"{kind.group}/{kind.version}", kind.kind, entry.namespace, entry.name, entry.uid)
    if not deps.seen.first_time(f"{entry.uid}/not-captured/{pod}"):
        return
    try:
        written = deps.kube.annotate_if(kind, entry.namespace, entry.name, lambda job: whole_attempt_uncaptured(job, pod))
        if written:
            following = str(written[c.ANN_ATTEMPT])
            attempt = str(int(following) - 1)
            logger.warning("job %s/%s: attempt %s runs without capture (pod %s); pods from now on are attempt %s",
                           entry.namespace, entry.name, attempt, pod, following)  # fmt: skip
            deps.kube.post_event(ref, notices.attempt_not_captured(attempt, following, pod))
            return
        job = deps.kube.get_job(kind, entry.namespace, entry.name)
        if job is not None and gap_of(job) is None:  # part of a captured attempt: its ranks will be missing
            deps.kube.post_event(ref, notices.pod_not_captured(pod, current_attempt(job) or "?"))
    except FrwatchError as exc:
        logger.warning("job %s/%s: pod %s without capture not reported: %s", entry.namespace, entry.name, pod, exc)


def open_incident(
    deps: Deps, kind: JobKind, entry: JobEntry, settings: CaptureSettings, attempt: str, trigger: str
) -> str:
    """Open the Incident of ``attempt`` of the job (a 409 on create is success: exactly one per attempt),
    write its first status, and move the job's attempt past it. Returns the Incident's name."""
    namespace, job_name = entry.namespace, entry.name
    name = incident_name(job_name, entry.uid, attempt)
    with deps.seen.opening(namespace, name):  # another pod of this attempt failing at once waits, then finds it
        if not deps.seen.opened(namespace, name):
            _open(deps, kind, entry, settings, attempt, trigger, name)
    return name


def _open(
    deps: Deps, kind: JobKind, entry: JobEntry, settings: CaptureSettings, attempt: str, trigger: str, name: str
) -> None:
    namespace, job_name = entry.namespace, entry.name
    layout = deps.seen.layout(namespace, job_name) or UNKNOWN_LAYOUT
    key = AttemptKey(settings.prefix, namespace, job_name, entry.uid, attempt)
    body = incident_body(
        job=entry.as_body(),
        api_version=f"{kind.group}/{kind.version}",
        kind=kind.kind,
        attempt=attempt,
        trigger=trigger,
        storage=storage_url(settings.bucket, key),
    )
    created = deps.kube.create_incident(body)
    if created:
        now = datetime.now(UTC)
        status = IncidentStatus(
            phase=IncidentPhase.DETECTED,
            detected_at=rfc3339(now, "milliseconds"),
            collection_deadline=rfc3339(now + timedelta(seconds=settings.collection_deadline_seconds), "milliseconds"),
            counts=IncidentCounts(expected_ranks=layout.world_size),
            settings=settings,
            message=f"detected: {trigger}",
        )
        deps.kube.patch_incident_status(namespace, name, status.wire())
        deps.metrics.incident_opened(namespace)
        logger.warning("incident %s/%s opened: %s", namespace, name, trigger)
    else:
        join_early(deps, namespace, name, settings, layout.world_size, trigger)
    deps.kube.bump_attempt(kind, namespace, job_name, attempt)  # again at start(): idempotent
    deps.seen.mark_opened(namespace, name)


def join_early(
    deps: Deps, namespace: str, name: str, settings: CaptureSettings, expected: int | None, trigger: str
) -> None:
    """The failure of an attempt whose Incident live watch opened Early joins it: Early -> Detected (then
    collection as for any Incident), its live finding kept. Nothing for an Incident in any other phase."""
    found = deps.kube.get_incident(namespace, name)
    if found is None:
        return
    now = datetime.now(UTC)
    joined = live_judge.join_early(
        Incident.of(found).status, trigger=trigger, detected_at=rfc3339(now, "milliseconds"),
        deadline=rfc3339(now + timedelta(seconds=settings.collection_deadline_seconds), "milliseconds"),
        expected_ranks=expected, settings=settings,
    )  # fmt: skip
    if joined is None:
        status = Incident.of(found).status
        if status.live_finding is not None:  # live watch moved it on itself (dumpAndAnalyze): no second analysis
            logger.info("incident %s/%s (live watch's, phase %s) joined by the failure as it is: %s",
                        namespace, name, status.phase.value, trigger)  # fmt: skip
        return
    deps.kube.patch_incident_status(namespace, name, joined.wire())
    logger.warning("incident %s/%s (opened Early by live watch) joined by the failure: %s", namespace, name, trigger)


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    for label in pod_labels(enabled_kinds(deps.config.operator.job_kinds)):
        _register_label(registry, deps, label)


def _register_label(registry: kopf.OperatorRegistry, deps: Deps, label: str) -> None:
    handler_id = "frwatch-pods" if label == PYTORCHJOB.pod_job_label else "frwatch-jobset-pods"

    @kopf.on.event("v1", "pods", id=handler_id, labels={label: kopf.PRESENT}, registry=registry)
    @translate_errors
    def pod_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        retrying(lambda: on_pod(deps, dict(body), deleted=type == "DELETED"), "pod event")
