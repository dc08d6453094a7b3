"""The Collecting phase of an Incident, from its persisted status (the phases are driven by
:mod:`frwatch_operator.handlers.incident_phases`).

``Detected`` (or no status yet) -> ``Collecting`` (:func:`start`): the deadline and the expected ranks are
fixed in status. ``Collecting`` (:func:`collect`, one pass each): list the attempt's root in the store;
done when every rank's dump is there, or at the deadline; meanwhile ask live agents for missing ranks (once
per pod, after ``ask_agents_after_seconds``, on a thread of the Incident's own: a pass never waits on an
agent, so a job's slow or hostile agents cannot hold kopf's workers; each call is bounded whole and
authenticated, ``agentclient``). Each pass records the attempt's pods as the Kubernetes API
showed them in ``status.observed`` (nodes, ranks, exits: what a cordon may rest on). Done: write
``pods/<pod>.json`` for pods without an agent record, write ``manifest.json`` (always frwatch's own: one
already in the store that frwatch did not write is replaced, and that is recorded), then status
``Analyzing`` and an Event on the job. What in the store disagreed with the cluster (a pod record naming
another node or a pod nobody saw, a foreign manifest, a dump of a rank past the world size) is a Warning
Event ``EvidenceInconsistent`` and the condition ``EvidenceConsistent``.

Everything is derived from the status and the store, so a restarted operator resumes where it was.
Each pass also stores the logs of the containers that ended, and the end of collection the others' and
the node records (``frwatch_operator.collect.evidence``): the manifest says which logs are there and
why the others are not, the condition ``LogsCollected`` the same in short.

About 400 lines: one phase, read top to bottom (start, one pass, the manifest, the end of collection);
the pure rules are in ``frwatch_operator.collect.progress``, ``observed_facts`` and ``container_logs``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_analyzers.store.manifest import Manifest
from frwatch_analyzers.store.pod_record import MAX_POD_RECORD_BYTES, StoredPodRecord, parse_pod_record
from frwatch_operator import notices
from frwatch_operator.agent.client import ask_to_dump
from frwatch_operator.capture.optin import defaults
from frwatch_operator.collect import evidence as evidence_collection
from frwatch_operator.collect.container_logs import summary as logs_summary
from frwatch_operator.collect.progress import (
    Progress,
    StoreListing,
    assess,
    build_manifest,
    check_records,
    collected_reason,
    out_of_range,
    ranks_to_ask,
    read_listing,
    settled_ranks,
)
from frwatch_operator.detect.pod_failure import PodFacts, pod_facts
from frwatch_operator.errors import NotFoundError
from frwatch_operator.handlers.agent_calls import PerJob, refused, targets
from frwatch_operator.handlers.deps import Deps
from frwatch_operator.handlers.pods import UNKNOWN_LAYOUT
from frwatch_operator.incident.observed_facts import facts_of, observe
from frwatch_operator.incident.record import Incident
from frwatch_operator.kube.adapter import ObjectRef
from frwatch_operator.resources import (
    CaptureSettings,
    Condition,
    ConditionReason,
    ConditionType,
    IncidentCounts,
    IncidentPhase,
    IncidentStatus,
)
from frwatch_operator.times import parse_rfc3339, rfc3339

logger = logging.getLogger(__name__)
OPEN = {"", IncidentPhase.DETECTED.value, IncidentPhase.COLLECTING.value}
#: The hand-off's message when collection ended ``EveryRankExited`` (reason ``NothingToAlign``): no dump at
#: all, every rank's pod failed. No analyzer Job (it would have nothing to align): the Analyzing passes
#: report the exits the cluster showed.
NOTHING_TO_ALIGN_MESSAGE = (
    "every rank's pod ended with a failed exit before any dump: no analyzer Job (nothing to align); the "
    "verdict is the exits the cluster showed"
)
#: At most this many keys are read under an attempt's root per pass (every rank twice, every pod, spare).
MAX_LISTED_KEYS = 2 * MAX_WORLD_SIZE + 8192


@dataclass
class _Memory:
    """Per-Incident memory of this process (a cache: losing it repeats a read or a request, no write)."""

    records: dict[str, StoredPodRecord] = field(default_factory=dict)
    record_ranks: frozenset[int] = frozenset()
    asked: dict[str, str] = field(default_factory=dict)  #: pod -> what asking its agent did


_memory: dict[str, _Memory] = {}
_memory_lock = threading.Lock()
#: Collection's asks, one Incident's at a time on its own thread (never on kopf's workers).
ASKS = PerJob("collection-ask")
#: The most agents of one Incident asked at once.
ASK_WORKERS = 8


def _mem(uid: str) -> _Memory:
    with _memory_lock:
        return _memory.setdefault(uid, _Memory())


def settings_of(deps: Deps, inc: Incident, status: IncidentStatus) -> CaptureSettings:
    """The settings the Incident runs with: fixed in its status when it opened (:func:`start` fixes them
    for an Incident whose creator did not); resolved from the job's policy only before that."""
    if status.settings is not None:
        return status.settings
    decision = deps.index.decide(inc.namespace, inc.spec.job_ref.name, deps.config)
    return decision.settings if decision is not None and decision.settings else defaults(deps.config)


def condition(kind: str, status: bool, reason: str, message: str, now: datetime) -> Condition:
    return Condition(
        type=kind, status="True" if status else "False", reason=reason, message=message,
        last_transition_time=rfc3339(now, "milliseconds"),
    )  # fmt: skip


def input_conditions(problems: Mapping[str, str], have: list[Condition], now: datetime) -> list[Condition]:
    """The bad input seen for the job (pods whose ranks cannot be derived, the spec, missing labels) as the
    Incident's RanksKnown / JobInputValid conditions (False, naming each); [] when nothing or already set."""
    ranks = sorted(v for k, v in problems.items() if k.endswith(f"/{notices.Reason.RANKS_UNKNOWN}"))
    other = sorted(v for k, v in problems.items() if not k.endswith(f"/{notices.Reason.RANKS_UNKNOWN}"))
    types = {x.type for x in have}
    out = []
    if ranks and ConditionType.RANKS_KNOWN not in types:
        out.append(condition(ConditionType.RANKS_KNOWN, False, ConditionReason.RANKS_UNKNOWN, " | ".join(ranks)[:1024], now))
    if other and ConditionType.JOB_INPUT_VALID not in types:
        out.append(condition(ConditionType.JOB_INPUT_VALID, False, ConditionReason.BAD_INPUT, " | ".join(other)[:1024], now))
    return out


def write_status(deps: Deps, inc: Incident, status: IncidentStatus) -> IncidentStatus:
    deps.kube.patch_incident_status(inc.namespace, inc.name, status.wire())
    return status


def start(deps: Deps, inc: Incident, now: datetime) -> IncidentStatus:
    """Detected -> Collecting: fix the detection time, the settings, the deadline and the expected ranks in
    status."""
    s = inc.status
    settings = settings_of(deps, inc, s)
    detected = parse_rfc3339(s.detected_at) or parse_rfc3339(inc.created) or now
    deadline = parse_rfc3339(s.collection_deadline) or detected + timedelta(
        seconds=settings.collection_deadline_seconds
    )
    expected = s.counts.expected_ranks
    layout = deps.seen.layout(inc.namespace, inc.spec.job_ref.name) or UNKNOWN_LAYOUT
    if expected is None:
        expected = layout.world_size
    conditions = list(s.conditions)
    if layout.problem and not any(x.type == ConditionType.WORLD_SIZE for x in conditions):
        conditions.append(condition(ConditionType.WORLD_SIZE, False, ConditionReason.SPEC_OUT_OF_BOUNDS, layout.problem, now))
        deps.kube.post_event(inc.job_ref, notices.spec_out_of_bounds(layout.problem))
    conditions += input_conditions(deps.seen.problems(inc.namespace, inc.spec.job_ref.name), conditions, now)
    # before the status write, so that a crash in between repeats them (both are idempotent)
    deps.kube.bump_attempt(inc.kind, inc.namespace, inc.spec.job_ref.name, inc.spec.attempt)
    seconds = round((deadline - detected).total_seconds())
    deps.kube.post_event(
        inc.job_ref, notices.incident_opened(inc.name, inc.spec.attempt, inc.spec.trigger, seconds)
    )
    status = s.model_copy(
        update={
            "phase": IncidentPhase.COLLECTING,
            "settings": settings,
            "detected_at": rfc3339(detected, "milliseconds"),
            "collection_deadline": rfc3339(deadline, "milliseconds"),
            "counts": IncidentCounts(expected_ranks=expected, dumped_ranks=s.counts.dumped_ranks,
                                     missing_ranks=s.counts.missing_ranks),
            "conditions": conditions,
            "message": f"collecting dumps until {rfc3339(deadline, 'milliseconds')}",
        }
    )  # fmt: skip
    return write_status(deps, inc, status)


def _pod_records(
    deps: Deps, inc: Incident, pod_keys: Mapping[str, str], dumped: frozenset[int]
) -> dict[str, StoredPodRecord]:
    """The agents' pod records, re-read only when new dumps arrived (a record grows with its dumps)."""
    mem = _mem(inc.uid)
    if dumped != mem.record_ranks or set(pod_keys) - set(mem.records):
        records: dict[str, StoredPodRecord] = {}
        for pod, key in list(pod_keys.items())[:MAX_LISTED_KEYS]:
            try:
                data = deps.s3.get_bounded(key, MAX_POD_RECORD_BYTES, bucket=inc.bucket)
            except NotFoundError:
                continue
            parsed = parse_pod_record(data) if data is not None else None
            if parsed is not None:
                records[pod] = parsed
        mem.records, mem.record_ranks = records, dumped
    return dict(mem.records)


def _pods(deps: Deps, inc: Incident, live: bool, status: IncidentStatus | None = None) -> list[PodFacts]:
    """The attempt's pods as seen by the watch (deleted ones included), refreshed from the API if ``live``;
    with ``status``, also the pods its ``observed`` record holds that this process no longer remembers."""
    seen = {p.name: p for p in deps.seen.pods(inc.namespace, inc.spec.job_ref.name, inc.spec.attempt)}
    if status is not None and status.observed is not None:
        for pod in status.observed.pods:
            seen.setdefault(pod.name, facts_of(pod, inc.namespace, inc.spec.job_ref.name, inc.spec.attempt))
    if live:
        layout = deps.seen.layout(inc.namespace, inc.spec.job_ref.name) or UNKNOWN_LAYOUT
        selector = f"{inc.kind.pod_job_label}={inc.spec.job_ref.name}"
        listed = [
            pod_facts(p, ranks=inc.kind.ranks_of(p, layout))
            for p in deps.kube.list_pods(inc.namespace, selector)
        ]
        names = set()
        for facts in listed:
            if facts.attempt == inc.spec.attempt and facts.job == inc.spec.job_ref.name:
                seen[facts.name] = facts
                names.add(facts.name)
        for name, facts in list(seen.items()):
            if name not in names and not facts.deleted:
                seen[name] = dataclasses.replace(facts, deleted=True, running_containers=frozenset())
    return sorted(seen.values(), key=lambda p: p.name)


def _ask_agents(
    deps: Deps, inc: Incident, missing: frozenset[int], records: Mapping[str, StoredPodRecord]
) -> None:
    """Ask the agents of the pods holding ``missing`` ranks to dump them (once per pod), on the Incident's
    own thread: this pass does not wait; a later pass sees the dumps in the store, the manifest what each
    ask did."""
    mem = _mem(inc.uid)
    if ASKS.busy(inc.uid):
        return
    pods = _pods(deps, inc, live=True)
    wanted = {p: r for p, r in ranks_to_ask(missing, pods, records).items() if p not in mem.asked}
    if not wanted:
        return
    by_name = {p.name: p for p in pods}
    agents = targets(deps, inc.namespace, inc.spec.job_ref.name, [by_name[p] for p in wanted])
    for pod in wanted:
        mem.asked[pod] = "its agent was asked to dump; no answer yet" if pod in agents else (
            "its agent is not called: it answered before without proof of its token")  # fmt: skip
    job = ObjectRef(inc.spec.job_ref.api_version, inc.spec.job_ref.kind, inc.namespace, inc.spec.job_ref.name,
                    inc.spec.job_ref.uid)  # fmt: skip

    def ask(pod: str) -> None:
        host, port, token = agents[pod]
        result = ask_to_dump(host, port, token, wanted[pod], deps.config.operator.agent_timeout_seconds)
        mem.asked[pod] = result.summary()
        if result.refused:
            refused(deps, job, by_name, pod, result.error)
        logger.info("incident %s/%s: asked agent of pod %s for ranks %s: %s",
                    inc.namespace, inc.name, pod, list(wanted[pod]), mem.asked[pod])  # fmt: skip

    def ask_all() -> None:
        with ThreadPoolExecutor(max_workers=max(1, min(ASK_WORKERS, len(agents))),
                                thread_name_prefix="frwatch-ask") as pool:  # fmt: skip
            list(pool.map(ask, sorted(agents)))

    if agents:
        ASKS.start(inc.uid, ask_all)


def _look(
    deps: Deps, inc: Incident, status: IncidentStatus, now: datetime, live: bool
) -> tuple[list[PodFacts], StoreListing, bool, dict[str, StoredPodRecord], Progress]:
    """The attempt's pods, then the store (in that order: an agent uploads before it exits, so a pod seen
    settled has all its dumps in the listing that follows), and where collection stands."""
    pods = _pods(deps, inc, live=live, status=status)
    keys, cut = _list_keys(deps, inc)
    listing = read_listing(inc.attempt_key, keys)
    dumped = frozenset(listing.rank_keys)
    records = _pod_records(deps, inc, listing.pod_keys, dumped)
    deadline = parse_rfc3339(status.collection_deadline) or now
    settled = settled_ranks(pods, check_records(pods, records)[0])
    return pods, listing, cut, records, assess(status.counts.expected_ranks, dumped, now, deadline, settled)


def collect(deps: Deps, inc: Incident, status: IncidentStatus, now: datetime) -> IncidentStatus:
    """One pass of Collecting; returns the status written (Analyzing when collection ended)."""
    pods, listing, cut, records, progress = _look(deps, inc, status, now, live=False)
    if progress.accounted:  # ending early rests on the API's view, not on this process's memory
        pods, listing, cut, records, progress = _look(deps, inc, status, now, live=True)
    dumped = progress.dumped
    expected = status.counts.expected_ranks
    if not progress.done:  # a manifest in the store ends nothing: frwatch writes its own
        # the logs of every container instance that ended, while its pod exists (once each)
        evidence_collection.read_logs(deps.kube, deps.s3, deps.config.evidence, _where(inc), pods, ending=False)
        detected = parse_rfc3339(status.detected_at) or now
        if (
            progress.missing
            and (now - detected).total_seconds() >= deps.config.operator.ask_agents_after_seconds
        ):
            _ask_agents(deps, inc, progress.missing, records)
        counts = IncidentCounts(
            expected_ranks=expected, dumped_ranks=len(dumped),
            missing_ranks=len(progress.missing) if expected is not None else None,
        )  # fmt: skip
        observed = observe(status.observed, pods, check_records(pods, records)[0])
        if counts != status.counts or observed != status.observed:
            return write_status(deps, inc, status.model_copy(update={"counts": counts, "observed": observed}))
        return status
    status, manifest, issues = _manifest(deps, inc, status, listing, records, progress.deadline_reached, now)
    if cut:
        issues.append(f"more than {MAX_LISTED_KEYS} objects under the attempt's root: the rest were not read")
    return _collected(deps, inc, status, manifest, issues, now)


def _list_keys(deps: Deps, inc: Incident) -> tuple[list[str], bool]:
    """The keys under the attempt's root, at most MAX_LISTED_KEYS of them; and whether there were more."""
    keys: list[str] = []
    for key in deps.s3.iter_keys(inc.attempt_key.root + "/", bucket=inc.bucket):
        if len(keys) == MAX_LISTED_KEYS:
            return keys, True
        keys.append(key)
    return keys, False


def _manifest(deps: Deps, inc: Incident, status: IncidentStatus, listing: StoreListing,
              records: Mapping[str, StoredPodRecord], deadline_reached: bool, now: datetime,
              ) -> tuple[IncidentStatus, Manifest, list[str]]:  # fmt: skip
    """Write frwatch's manifest (replacing one it did not write), with the status that records it first;
    returns that status, the manifest, and what in the store disagreed with the cluster."""
    pods = _pods(deps, inc, live=True, status=status)
    trusted, issues = check_records(pods, records)
    issues += out_of_range(listing, status.counts.expected_ranks)
    observed = observe(status.observed, pods, trusted)
    logs = evidence_collection.final_logs(deps.kube, deps.s3, deps.config.evidence, _where(inc), pods, listing.log_keys)
    manifest = build_manifest(
        inc.attempt_key, world_size=status.counts.expected_ranks, listing=listing, pods=pods, records=trusted,
        asked=_mem(inc.uid).asked, started=status.detected_at, ended=rfc3339(now, "milliseconds"), deadline_reached=deadline_reached,
        logs=logs,
    )  # fmt: skip
    evidence_collection.write_node_records(deps.kube, deps.s3, deps.config.evidence, _where(inc), manifest, now)
    for pod in manifest.pods:
        if pod.pod not in listing.pod_keys:
            record = StoredPodRecord.of_manifest_pod(pod, inc.attempt_key)
            deps.s3.put(inc.attempt_key.pod(pod.pod), record.operator_json(), bucket=inc.bucket,
                        content_type="application/json")  # fmt: skip
    there = deps.s3.etag(inc.attempt_key.manifest, bucket=inc.bucket)
    if there is not None and there != status.manifest_etag:
        issues.append("a manifest.json frwatch did not write was in the store: replaced with frwatch's own")
        logger.warning("incident %s/%s: s3://%s/%s (ETag %s) was not written by frwatch: replaced",
                       inc.namespace, inc.name, inc.bucket, inc.attempt_key.manifest, there[:40])  # fmt: skip
    data = manifest.model_dump_json(indent=1).encode()
    etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
    # the ETag first: a pass that dies after the put knows the manifest there as its own
    status = write_status(deps, inc, status.model_copy(update={"manifest_etag": etag, "observed": observed}))
    deps.s3.put(inc.attempt_key.manifest, data, bucket=inc.bucket, content_type="application/json")
    logger.warning("incident %s/%s: manifest written to s3://%s/%s (%d/%s ranks dumped)", inc.namespace, inc.name,
                   inc.bucket, inc.attempt_key.manifest, sum(r.dumped for r in manifest.ranks), manifest.world_size)  # fmt: skip
    return status, manifest, issues


def _collected(
    deps: Deps, inc: Incident, status: IncidentStatus, manifest: Manifest, issues: list[str], now: datetime
) -> IncidentStatus:
    dumped = sum(r.dumped for r in manifest.ranks)
    missing = len(manifest.ranks) - dumped
    reason = collected_reason(manifest)
    message = f"{dumped} of {len(manifest.ranks)} ranks dumped" + (
        f"; {missing} missing (see manifest.json)" if missing else ""
    )
    if reason == ConditionReason.EVERY_RANK_EXITED:
        message += "; every rank's pod ended with an exit before any dump: nothing to align"
    elif reason == ConditionReason.ALL_RANKS_ACCOUNTED:
        message += "; their pods ended without a dump of them"
    conditions = [x for x in status.conditions if x.type not in (ConditionType.COLLECTED, ConditionType.ANALYSIS_REQUESTED, ConditionType.EVIDENCE_CONSISTENT, ConditionType.LOGS_COLLECTED)]
    conditions.append(condition(ConditionType.COLLECTED, True, reason, message, now))
    all_logs, logs_reason, logs_message = logs_summary({p.pod: p.logs for p in manifest.pods})
    conditions.append(condition(ConditionType.LOGS_COLLECTED, all_logs, logs_reason, logs_message[:1024], now))
    evidence = notices.evidence_inconsistent(inc.name, issues) if issues else None
    if evidence is not None:
        conditions.append(condition(ConditionType.EVIDENCE_CONSISTENT, False, evidence.reason, evidence.message[:1024], now))
    else:
        conditions.append(condition(ConditionType.EVIDENCE_CONSISTENT, True, ConditionReason.MATCHES_CLUSTER, "the store's records agree with the cluster", now))
    new = status.model_copy(
        update={
            "phase": IncidentPhase.ANALYZING,
            "collected_at": manifest.collection_ended or rfc3339(now, "milliseconds"),
            "counts": IncidentCounts(expected_ranks=manifest.world_size, dumped_ranks=dumped, missing_ranks=missing),
            "conditions": conditions,
            "message": f"collected: {message}",
        }
    )  # fmt: skip
    write_status(deps, inc, new)
    detected = parse_rfc3339(status.detected_at) or parse_rfc3339(inc.created) or now
    deps.metrics.collection_finished((now - detected).total_seconds(), dumped, missing)
    url = str(inc.attempt_key.at(inc.bucket))
    deps.kube.post_event(inc.job_ref, notices.collected(inc.name, manifest, url))
    if evidence is not None:
        deps.kube.post_event(inc.job_ref, evidence)
        deps.kube.post_event(inc.ref, evidence)
    deps.seen.forget_attempt(inc.namespace, inc.spec.job_ref.name, inc.spec.attempt)
    evidence_collection.forget(inc.attempt_key)
    return new


def _where(inc: Incident) -> evidence_collection.Where:
    """Where the Incident's evidence beyond Flight Recorder goes, and whom to tell."""
    return evidence_collection.Where(inc.attempt_key, inc.bucket, inc.job_ref, inc.name)


def forget(uid: str) -> None:
    """Drop this process's memory of an Incident whose collection ended."""
    with _memory_lock:
        _memory.pop(uid, None)
