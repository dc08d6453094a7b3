"""Evidence beyond Flight Recorder into the attempt's prefix: container logs and node records. The reads
go through ``kube.Kube`` (pods/log, nodes, Events), the writes through ``s3store.S3Store``; what to read
and how a log is kept within its cap is :mod:`frwatch_operator.collect.container_logs` and
:mod:`frwatch_operator.collect.node_evidence` (pure).

**Logs** (:func:`read_logs`) are read as early as possible and while the pod exists: from the pod handler
the moment a pod shows a failure (before the training operator or a restart policy deletes it), on every
Collecting pass for each container instance that ended (once each), and when collection ends for every
container still running (a hung rank's log up to then). A failed read is tried again on the next pass
while the pod exists; a pod deleted first is recorded as unavailable (the manifest and the Incident's
``LogsCollected`` condition), never a failed Incident. pods/log forbidden: one Warning Event on the job
naming the grant (``kube_errors.api_call`` words it), and no more log reads for that attempt.

**Node records** (:func:`write_node_records`), when collection ends, before the manifest: for the nodes
of the attempt (those of failed pods and of ranks without a dump first, at most ``evidence.max_nodes``),
each node's conditions and the recent Events naming it, whatever wrote them (node-problem-detector, DCGM,
NVSentinel, the kubelet): the operator needs none of them installed. What could not be read is said in
the record (``unavailable``), so that an absent signal is never taken for a healthy node.

The store keeps each log as the API gave it (secrets included): the analyzer masks them before anything
reaches an annotation, an Event or the report.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from frwatch_analyzers.store.layout import AttemptKey, segment_problem
from frwatch_analyzers.store.manifest import ContainerLog, Manifest
from frwatch_operator import notices
from frwatch_operator.collect.container_logs import LogTarget, capped, key_of, narrow, notes, targets
from frwatch_operator.collect.node_evidence import node_record, nodes_to_read
from frwatch_operator.config import EvidenceSettings
from frwatch_operator.detect.pod_failure import PodFacts
from frwatch_operator.errors import ApiRefusedError, FrwatchError, NotFoundError
from frwatch_operator.kube.adapter import Kube, ObjectRef
from frwatch_operator.store.s3 import S3Store
from frwatch_operator.times import rfc3339

logger = logging.getLogger(__name__)
#: Attempts whose log reads this process remembers (the oldest is forgotten first: a forgotten attempt
#: only reads its final logs once more).
REMEMBERED_ATTEMPTS = 512


@dataclass
class _Attempt:
    """What this process read of one attempt's logs (a cache: losing it repeats reads, never loses one)."""

    done: set[tuple[str, str, str, int]] = field(default_factory=set)
    stored: dict[tuple[str, str, str], ContainerLog] = field(default_factory=dict)
    why: dict[tuple[str, str], str] = field(default_factory=dict)  #: (pod, container) -> last failed read
    forbidden: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


_attempts: OrderedDict[str, _Attempt] = OrderedDict()
_attempts_lock = threading.Lock()


def _attempt(root: str) -> _Attempt:
    with _attempts_lock:
        state = _attempts.get(root)
        if state is None:
            state = _attempts[root] = _Attempt()
            while len(_attempts) > REMEMBERED_ATTEMPTS:
                _attempts.popitem(last=False)
        return state


def forget(key: AttemptKey) -> None:
    with _attempts_lock:
        _attempts.pop(key.root, None)


@dataclass(frozen=True)
class Where:
    """The attempt's prefix in the store, and whom to tell (the job, the Incident's name)."""

    key: AttemptKey
    bucket: str
    job_ref: ObjectRef
    incident: str


def read_logs(
    kube: Kube, s3: S3Store, settings: EvidenceSettings, where: Where, pods: Iterable[PodFacts], *, ending: bool
) -> int:
    """Read and store every log of ``pods`` due now (``ending``: collection ends, the running ones too),
    ``evidence.log_readers`` at a time. Returns how many were stored. Never raises a store or API error:
    what failed is tried again next pass."""
    state = _attempt(where.key.root)
    due: list[tuple[str, LogTarget]] = []
    for pod in pods:
        for target in targets(pod, ending=ending):
            with state.lock:
                if state.forbidden and target.variant != "termination":
                    continue
                if target.final and target.memo in state.done:
                    continue
            due.append((pod.namespace, target))
    if len(due) <= 1 or settings.log_readers <= 1:
        return sum(_read_one(kube, s3, settings, where, state, ns, target) for ns, target in due)
    with ThreadPoolExecutor(max_workers=settings.log_readers, thread_name_prefix="frwatch-logs") as pool:
        done = pool.map(lambda item: _read_one(kube, s3, settings, where, state, item[0], item[1]), due)
        return sum(done)


def _read_one(
    kube: Kube, s3: S3Store, settings: EvidenceSettings, where: Where, state: _Attempt, namespace: str,
    target: LogTarget,
) -> bool:  # fmt: skip
    key = key_of(where.key, target)
    try:
        if target.variant == "termination":
            data, cut = capped(target.message, settings.log_max_bytes), False
        else:
            tail = narrow(
                lambda lines, limit: kube.read_pod_log(
                    namespace, target.pod, target.container, previous=target.variant == "previous",
                    tail_lines=lines, limit_bytes=limit,
                ),
                settings.log_tail_lines, settings.log_max_bytes,
            )  # fmt: skip
            data, cut = tail.data, tail.cut
        s3.put(key, data, bucket=where.bucket, content_type="text/plain")
    except NotFoundError:  # the pod is gone: nothing more can be read of it
        _failed(state, target, "unavailable: the pod was deleted before its log was read", done=True)
        return False
    except ApiRefusedError as exc:
        if exc.status in (401, 403):
            _forbidden(kube, where, state, exc)
            return False
        # 400: no such instance (not started yet, or the kubelet dropped it): tried again while the pod exists
        _failed(state, target, f"unavailable: {str(exc)[:300]}", done=target.variant == "previous")
        return False
    except FrwatchError as exc:  # the API or the store did not answer: the next pass tries again
        logger.warning("incident %s: log %s not stored yet: %s", where.incident, key, exc)
        return False
    note = ContainerLog(container=target.container, variant=target.variant, key=key, bytes=len(data), cut=cut)
    with state.lock:
        state.stored[(target.pod, target.container, target.variant)] = note
        state.why.pop((target.pod, target.container), None)
        if target.final:
            state.done.add(target.memo)
    return True


def _failed(state: _Attempt, target: LogTarget, why: str, *, done: bool) -> None:
    with state.lock:
        if target.variant == "tail":
            state.why[(target.pod, target.container)] = why
        if done:
            state.done.add(target.memo)


def _forbidden(kube: Kube, where: Where, state: _Attempt, exc: ApiRefusedError) -> None:
    with state.lock:
        first = not state.forbidden
        state.forbidden = True
    if not first:
        return
    logger.warning("incident %s: %s", where.incident, exc)
    try:
        kube.post_event(
            where.job_ref, notices.evidence_forbidden(where.incident, "the pods' logs (pods/log)", exc.fix)
        )
    except FrwatchError as err:
        logger.warning("incident %s: the EvidenceForbidden Event was not posted: %s", where.incident, err)


def log_notes(where: Where, listed: Iterable[tuple[str, str, str, str]]) -> tuple[
    dict[tuple[str, str, str], ContainerLog], dict[tuple[str, str], str], bool
]:  # fmt: skip
    """The logs stored for the attempt, why the others are missing, and whether pods/log was forbidden:
    this process's memory, completed by the listing (``listed``: (pod, container, variant, key) of each
    log key in the store: a log another replica, or this one before a restart, stored)."""
    state = _attempt(where.key.root)
    with state.lock:
        stored, why, forbidden = dict(state.stored), dict(state.why), state.forbidden
    for pod, container, variant, key in listed:
        if variant in ("tail", "previous", "termination") and (pod, container, variant) not in stored:
            stored[(pod, container, variant)] = ContainerLog(container=container, variant=variant, key=key)
    return stored, why, forbidden


def final_logs(
    kube: Kube, s3: S3Store, settings: EvidenceSettings, where: Where, pods: list[PodFacts],
    listed: Iterable[tuple[str, str, str, str]],
) -> dict[str, list[ContainerLog]]:  # fmt: skip
    """When collection ends: read what is still due (the running containers too), then pod -> its logs'
    records for the manifest (stored, or why not: ``container_logs.notes``)."""
    read_logs(kube, s3, settings, where, pods, ending=True)
    stored, why, forbidden = log_notes(where, listed)
    return notes(pods, stored, why, forbidden)


def write_node_records(
    kube: Kube, s3: S3Store, settings: EvidenceSettings, where: Where, manifest: Manifest, now: datetime
) -> list[str]:
    """Write ``nodes/<node>.json`` for the attempt's nodes (suspects first, at most ``max_nodes``); returns
    the nodes written. Never raises: a node that cannot be read is a record that says so."""
    written: list[str] = []
    events_refused: ApiRefusedError | None = None
    for node in nodes_to_read(manifest, settings.max_nodes):
        if segment_problem(node):
            continue
        unavailable: list[str] = []
        body = None
        try:
            body = kube.get_node(node)
            if body is None:
                unavailable.append("node: not found (deleted since)")
        except FrwatchError as exc:
            unavailable.append(f"node: {_short(exc)}")
        events: list[dict[str, object]] = []
        if events_refused is None:
            try:
                events = kube.list_node_events(node, settings.node_events_max)
            except ApiRefusedError as exc:
                events_refused = exc
            except FrwatchError as exc:
                unavailable.append(f"events: {_short(exc)}")
        if events_refused is not None:
            unavailable.append("events: forbidden")
        record = node_record(
            node, body, events, rfc3339(now, "seconds"), unavailable, settings.node_events_max
        )
        try:
            s3.put(
                where.key.node(node), record.to_json(), bucket=where.bucket, content_type="application/json"
            )
        except FrwatchError as exc:
            logger.warning("incident %s: node record of %s not stored: %s", where.incident, node, exc)
            continue
        written.append(node)
    if events_refused is not None:
        try:
            kube.post_event(
                where.job_ref,
                notices.evidence_forbidden(
                    where.incident, "the Events that name its nodes", events_refused.fix
                ),
            )
        except FrwatchError as err:
            logger.warning("incident %s: the EvidenceForbidden Event was not posted: %s", where.incident, err)
    return written


def _short(exc: Exception) -> str:
    return str(exc)[:200]
