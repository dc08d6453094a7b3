"""Live watch on the operator's side (issue 15): every ``operator.live_poll_seconds`` the leader pulls
``GET /live`` from the agent of each running pod of every captured job with live watch on
(:mod:`frwatch_operator.live.policy`: the job's ``frwatch.io/live``, its CapturePolicy's ``liveWatch``), its
current attempt, feeds one :class:`~frwatch_operator.live.judge.LiveJudge` per job attempt, and on a desync or a
stall opens the attempt's Incident in phase ``Early`` (its finding in ``status.liveFinding``) and posts one
Warning ``HangSuspected`` Event on the job. Policy ``report`` stops there: the attempt's later failure joins
that Incident (``handlers.pods.open_incident``: Early -> Detected). ``dumpAndAnalyze`` and ``abort`` go on in
:mod:`frwatch_operator.handlers.live_actions` (also the Early Incident of a job that succeeded: Cleared).

One background thread, not a kopf timer: a kopf timer on the job would put a finalizer on the user's job
(frwatch puts none). It starts each job's round on a thread of that job's own
(:class:`~frwatch_operator.handlers.agent_calls.PerJob`), one round in flight per job: a job whose agents are
slow or hostile (each call has a total deadline, ``operator.agent_timeout_seconds``) skips its own next turns
while its round runs, and delays no other job's. The live jobs are learnt from the jobs' own watch events (a
second handler of the job kinds); each round logs one line per job ("live round ...": the explicit signal
that the agents were pulled). A pod whose control port answers without proof of its agent token is not
called again (Event ``AgentNotAuthenticated`` on the job).
With ``operator.live_shards`` > 1 the rounds are split by job over the replicas
(:mod:`frwatch_operator.live.shards`): a replica runs those of the jobs in the shards it holds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import kopf

from frwatch_analyzers.live.summary import LivePod
from frwatch_analyzers.store.layout import AttemptKey
from frwatch_operator import constants as c
from frwatch_operator import notices
from frwatch_operator.detect.job_failure import current_attempt
from frwatch_operator.detect.pod_failure import PodFacts, pod_facts
from frwatch_operator.errors import FatalError, FrwatchError
from frwatch_operator.handlers.agent_calls import PerJob, refused, targets
from frwatch_operator.handlers.deps import Deps
from frwatch_operator.handlers.live_actions import (
    PendingAbort,
    abort_when_reported,
    clear_early,
    dump_and_analyze,
    succeeded,
)
from frwatch_operator.handlers.pods import UNKNOWN_LAYOUT
from frwatch_operator.incident.naming import incident_body, incident_name, storage_url
from frwatch_operator.incident.record import Incident
from frwatch_operator.kinds.job_kind import JobKind, enabled_kinds
from frwatch_operator.kube.adapter import ObjectRef
from frwatch_operator.live.judge import LiveJudge, early_status, live_finding
from frwatch_operator.live.policy import LiveChoice, live_choice
from frwatch_operator.live.pull import REFUSED, pull_all
from frwatch_operator.live.shards import AllOfLeader, LiveShards, live_shards_of
from frwatch_operator.resources import CaptureSettings, IncidentPhase, LivePolicyName
from frwatch_operator.times import rfc3339

logger = logging.getLogger(__name__)
#: How an Incident opened by live watch begins its trigger (spec.trigger).
TRIGGER = "live watch: "


@dataclass(frozen=True)
class PendingDump:
    """An Early Incident whose policy asks for the ranks' live buffers (retried each round until done)."""

    incident: str
    abort: bool



class LiveJobs:
    """The jobs of the followed kinds (from their watch events: whether live watch is on needs the index's
    CapturePolicies, decided each round), one judge per job attempt, and what the policies still owe.

    A policy's live dump (asking every agent of an attempt, up to ``LIVE_DUMP_TIMEOUT_S``) runs on a thread of
    that attempt's own, not on the round's: the job's own rounds skip it until the ask ends, and no other
    job's dump waits for it (:meth:`settle` waits for the asks in flight)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.dumping = PerJob("live-dump")  # (job uid, attempt) -> its ask in flight
        self.rounds = PerJob("live-round")  # (namespace, job) -> its round in flight
        self.jobs: dict[tuple[str, str], JobKind] = {}
        self.succeeded: set[tuple[str, str]] = set()
        self.judges: dict[tuple[str, str], LiveJudge] = {}  # (job uid, attempt) -> judge
        self.dumps: dict[tuple[str, str], PendingDump] = {}  # (job uid, attempt) -> the Incident to move on
        #: (namespace, job) -> (uid, attempt, Incident) of an Incident opened Early (Cleared if the job succeeds)
        self.early: dict[tuple[str, str], tuple[str, str, str]] = {}
        self.aborts: dict[tuple[str, str], PendingAbort] = {}  # (namespace, job) -> the verdict to wait for
        #: (namespace, job) -> the uid whose owed policy steps were read back from the API (recover())
        self.recovered: dict[tuple[str, str], str] = {}

    def saw(self, kind: JobKind, body: dict[str, Any], deleted: bool) -> None:
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        with self._lock:
            if deleted:
                self.jobs.pop(key, None)
                self.early.pop(key, None)
                self.aborts.pop(key, None)
                self.recovered.pop(key, None)
            else:
                self.jobs[key] = kind
            if not deleted and succeeded(kind, body):
                self.succeeded.add(key)
            else:
                self.succeeded.discard(key)

    def snapshot(self) -> list[tuple[str, str, JobKind]]:
        with self._lock:
            return [(ns, name, kind) for (ns, name), kind in sorted(self.jobs.items())]

    def pending_aborts(self) -> list[tuple[tuple[str, str], PendingAbort]]:
        with self._lock:  # saw() drops a deleted job's from the watch's thread
            return sorted(self.aborts.items(), key=lambda kv: kv[0])

    def ask_dumps(self, key: tuple[str, str], ask: Callable[[], None]) -> None:
        """Run ``ask`` (the live dump of attempt ``key``) on its own thread, unless one is in flight for it."""
        self.dumping.start(key, ask)

    def settle(self, timeout_s: float) -> bool:
        """Wait until the live dumps in flight now have ended; False if some still run after ``timeout_s``."""
        return self.dumping.settle(timeout_s)

    def close(self) -> None:
        """Nothing to stop: the threads in flight end by their calls' deadlines (daemon threads)."""


def live_round(deps: Deps, live: LiveJobs, namespace: str, name: str, kind: JobKind, now: float) -> None:
    """One round over one job: clear an Early Incident its job left behind; if live watch is on, pull its
    current attempt's agents, judge, report a new finding, and go on by the job's policy (a dump still owed
    from a failed round first)."""
    entry = deps.index.job(namespace, name)
    decision = deps.index.decide(namespace, name, deps.config)
    if entry is None or decision is None or not decision.enabled or decision.settings is None:
        return
    choice = live_choice(entry.as_body(), decision.settings, deps.config.operator.live_abort_allowed)
    if choice.problem and deps.seen.first_time(f"{entry.uid}/live-choice/{choice.problem[:120]}"):
        logger.warning("live watch of job %s/%s: %s", namespace, name, choice.problem)
    attempt = current_attempt(entry.as_body())
    if attempt and live.recovered.get((namespace, name)) != entry.uid:
        recover(deps, live, kind, namespace, name, entry.as_body(), attempt, choice)
        live.recovered[(namespace, name)] = entry.uid
    early = live.early.get((namespace, name))
    if early is not None and early[0] == entry.uid:
        uid, was, incident = early
        if (namespace, name) in live.succeeded:
            how = f"the job succeeded after live watch's finding (condition {kind.succeeded_condition})"
        elif attempt and attempt != was:
            how = f"the job went on to attempt {attempt} with no failure of attempt {was} seen"
        else:
            how = ""
        if how:
            clear_early(deps, kind, namespace, name, uid, was, incident, how)
            with live._lock:
                live.early.pop((namespace, name), None)
    if not choice.enabled or not attempt:
        return
    layout = deps.seen.layout(namespace, name) or UNKNOWN_LAYOUT
    pods = [pod_facts(p, ranks=kind.pod_ranks(p, layout).ranks)
            for p in deps.kube.list_pods(namespace, f"{kind.pod_job_label}={name}")]  # fmt: skip
    mine = [p for p in pods if p.attempt == attempt and p.failure is None and p.phase == "Running"]
    agents = targets(deps, namespace, name, mine)
    world = range(layout.world_size) if layout.world_size else sorted({r for p in mine for r in p.ranks})
    pending = live.dumps.get((entry.uid, attempt))
    if pending is not None:  # the Incident still owes the ranks' live buffers (being asked, or failed)
        _ask_dumps(deps, live, kind, namespace, name, entry.uid, attempt, pending, mine, decision.settings,
                   layout.world_size)  # fmt: skip
        return
    with live._lock:  # the rounds of other jobs run on their own threads
        judge = live.judges.get((entry.uid, attempt))
        if judge is None:
            live.judges = {k: v for k, v in live.judges.items() if k[0] != entry.uid}  # older attempts: done
            judge = live.judges[(entry.uid, attempt)] = LiveJudge(
                world, stall_after_s=deps.config.operator.live_stall_after_seconds
            )
    pulled = pull_all(agents, deps.config.operator.agent_timeout_seconds)
    ref = ObjectRef(f"{kind.group}/{kind.version}", kind.kind, namespace, name, entry.uid)
    by_name = {p.name: p for p in mine}
    for pod, answer in sorted(pulled.items()):
        if isinstance(answer, str) and answer.startswith(REFUSED):
            refused(deps, ref, by_name, pod, answer.removeprefix(REFUSED))
    result = judge.judge(pulled, now)
    read = {r.rank for a in pulled.values() if isinstance(a, LivePod) for r in a.ranks} - set(result.unreadable)
    logger.info(
        "live round of job %s/%s attempt %s: %d agent(s) pulled, %d unreachable, %d rank(s) read, "
        "%d rank(s) unreadable, finding(s): %s",
        namespace, name, attempt, len(pulled) - len(result.unreachable), len(result.unreachable), len(read),
        len(result.unreadable), "; ".join(f"{f.kind.value} {f.process_group} seq {f.seq}" for f in result.findings) or "none",
    )  # fmt: skip
    for pod, why in sorted(result.unreachable.items()):
        if deps.seen.first_time(f"{entry.uid}/live/{attempt}/{pod}/{why[:80]}"):
            logger.warning("live watch of job %s/%s: pod %s not read: %s", namespace, name, pod, why)
    if result.report is None:
        return
    finding = result.report
    key = AttemptKey(decision.settings.prefix, namespace, name, entry.uid, attempt)
    body = incident_body(
        job=entry.as_body(), api_version=f"{kind.group}/{kind.version}", kind=kind.kind, attempt=attempt,
        trigger=f"{TRIGGER}{finding.summary}", storage=storage_url(decision.settings.bucket, key),
    )  # fmt: skip
    incident = incident_name(name, entry.uid, attempt)
    try:
        if not deps.kube.create_incident(body) and not _ours_without_status(deps, namespace, incident):
            logger.info(
                "live watch of job %s/%s: %s; Incident %s exists already",
                namespace,
                name,
                finding.summary,
                incident,
            )
            return
        found = live_finding(finding, rfc3339(datetime.now(UTC), "milliseconds"))
        deps.kube.patch_incident_status(namespace, incident, early_status(found, layout.world_size).wire())
    except FrwatchError:
        judge.reported.discard(finding.key)  # not reported: the next round tries again
        raise
    deps.metrics.incident_opened(namespace)
    with live._lock:
        live.early[(namespace, name)] = (entry.uid, attempt, incident)
    logger.warning("incident %s/%s opened Early by live watch (policy %s): %s", namespace, incident,
                   choice.policy.value, finding.summary)  # fmt: skip
    then = THEN[choice.policy]
    deps.kube.post_event(ref, notices.hang_suspected(incident, attempt, finding.summary, found.top_frames, then))
    if choice.policy is LivePolicyName.REPORT:
        return
    pending = PendingDump(incident, choice.policy is LivePolicyName.ABORT)
    with live._lock:
        live.dumps[(entry.uid, attempt)] = pending
    _ask_dumps(deps, live, kind, namespace, name, entry.uid, attempt, pending, mine, decision.settings,
               layout.world_size)  # fmt: skip


#: What the HangSuspected Event says comes next, by policy.
THEN = {
    LivePolicyName.REPORT: notices.REPORT_NEXT,
    LivePolicyName.DUMP_AND_ANALYZE: "policy dumpAndAnalyze: every rank's live buffer is collected and analysed "
    "now, the verdict comes on the job while it runs",
    LivePolicyName.ABORT: "policy abort: every rank's live buffer is collected and analysed now, and the job is "
    "suspended after the verdict",
}


def recover(
    deps: Deps, live: LiveJobs, kind: JobKind, namespace: str, name: str, job: dict[str, Any], attempt: str,
    choice: LiveChoice,
) -> None:  # fmt: skip
    """What live watch's Incidents of this job still owe, read back from the API at the job's first round in
    this process (the operator restarted, or this replica took the job's shard): the Incident of the current
    attempt and of the one before (a live dump moves the attempt on). One opened Early and still Early is
    Cleared when its job succeeds or moves on, and its live dumps are asked when the policy asks for them;
    one whose live dumps were asked (``liveFinding.dumpedAt``) under policy ``abort`` suspends the job once
    Reported, unless the job already says it was (``frwatch.io/live-aborted``). Raises FrwatchError when the
    API fails (the next round reads again)."""
    uid = str((job.get("metadata") or {}).get("uid") or "")
    aborted = str(((job.get("metadata") or {}).get("annotations") or {}).get(c.ANN_LIVE_ABORTED) or "")
    attempts = [attempt] + ([str(int(attempt) - 1)] if attempt.isdigit() and int(attempt) > 0 else [])
    for att in attempts:
        incident = incident_name(name, uid, att)
        found = deps.kube.get_incident(namespace, incident)
        if found is None:
            continue
        try:
            inc = Incident.of(found)
        except FatalError as exc:  # not an Incident this operator can read: nothing to resume from it
            if deps.seen.first_time(f"{uid}/live-recover/{incident}"):
                logger.warning("live watch of job %s/%s: Incident %s not read back: %s", namespace, name,
                               incident, exc)  # fmt: skip
            continue
        finding = inc.status.live_finding
        if not inc.spec.trigger.startswith(TRIGGER) or finding is None:
            continue  # not live watch's
        phase = inc.status.phase
        resumed = ""
        with live._lock:
            if phase is IncidentPhase.EARLY:
                live.early.setdefault((namespace, name), (uid, att, incident))
                resumed = "Cleared if the job succeeds or moves on"
                if att == attempt and choice.enabled and choice.policy is not LivePolicyName.REPORT:
                    abort = choice.policy is LivePolicyName.ABORT
                    live.dumps.setdefault((uid, att), PendingDump(incident, abort))
                    resumed = f"its live dumps asked (policy {choice.policy.value})"
            elif (
                finding.dumped_at
                and choice.enabled
                and choice.policy is LivePolicyName.ABORT
                and phase not in (IncidentPhase.FAILED, IncidentPhase.CLEARED)
                and aborted != incident
            ):
                live.aborts.setdefault((namespace, name), PendingAbort(kind, namespace, name, uid, att, incident))
                resumed = "the job suspended once it is Reported (policy abort)"
        if resumed:
            logger.info("live watch of job %s/%s: Incident %s read back in phase %s: %s", namespace, name,
                        incident, phase.value, resumed)  # fmt: skip


def _ask_dumps(
    deps: Deps, live: LiveJobs, kind: JobKind, namespace: str, name: str, uid: str, attempt: str,
    pending: PendingDump, pods: list[PodFacts], settings: CaptureSettings, expected: int | None,
) -> None:  # fmt: skip
    """Ask the attempt's agents for their live dumps and move the Incident on, on the dump pool; a failed ask
    (the API refused a write) stays owed, and the next round asks again."""

    def ask() -> None:
        try:
            done = dump_and_analyze(deps, kind, namespace, name, uid, attempt, pending.incident, pods, settings,
                                    expected)  # fmt: skip
        except Exception as exc:
            logger.warning("live watch of job %s/%s: the live dump of attempt %s failed: %s (asked again next "
                           "round)", namespace, name, attempt, exc)  # fmt: skip
            return
        if done:
            _dumped(live, kind, namespace, name, uid, attempt, pending)

    live.ask_dumps((uid, attempt), ask)


def _dumped(live: LiveJobs, kind: JobKind, namespace: str, name: str, uid: str, attempt: str,
            pending: PendingDump) -> None:  # fmt: skip
    """The Incident moved on (or had already): nothing more owed but the abort, if asked."""
    with live._lock:
        live.dumps.pop((uid, attempt), None)
        live.early.pop((namespace, name), None)
        if pending.abort:
            live.aborts[(namespace, name)] = PendingAbort(kind, namespace, name, uid, attempt, pending.incident)


def _ours_without_status(deps: Deps, namespace: str, incident: str) -> bool:
    """Whether the existing Incident was created by live watch (its trigger) and has no status yet: our
    status write failed after the create (left so, the Incident timer would adopt it as Detected after 10 s)."""
    found = deps.kube.get_incident(namespace, incident)
    if found is None or (found.get("status") or {}).get("phase"):
        return False
    return str((found.get("spec") or {}).get("trigger") or "").startswith(TRIGGER)


def _loop(deps: Deps, live: LiveJobs, stop: threading.Event, shards: LiveShards | AllOfLeader) -> None:
    period = deps.config.operator.live_poll_seconds
    while not stop.wait(period):
        if not shards.any():
            continue
        for namespace, name, kind in live.snapshot():
            entry = deps.index.job(namespace, name)
            if entry is None or not shards.mine(entry.uid):  # another replica's shard (live_shards > 1)
                continue
            started = live.rounds.start((namespace, name), _round(deps, live, namespace, name, kind))
            if not started and deps.seen.first_time(f"{entry.uid}/live-round-busy"):
                logger.warning("live watch of job %s/%s: its previous round still runs (its agents are slow): "
                               "this turn is skipped, the other jobs' rounds go on", namespace, name)  # fmt: skip
        for key, pending in live.pending_aborts():
            if not shards.mine(pending.uid):
                continue
            try:
                if abort_when_reported(deps, pending):
                    live.aborts.pop(key, None)
            except Exception as exc:
                logger.warning("live watch's abort of job %s/%s failed: %s (tried again)", *key, exc)


def _round(deps: Deps, live: LiveJobs, namespace: str, name: str, kind: JobKind) -> Callable[[], None]:
    def run() -> None:
        try:
            live_round(deps, live, namespace, name, kind, time.time())
        except Exception as exc:  # one job's failure never stops the others (nor the loop)
            logger.warning("live round of job %s/%s failed: %s", namespace, name, exc)

    return run


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    live = LiveJobs()
    stop = threading.Event()
    shards = live_shards_of(deps.config.operator, deps.kube, deps.leader)
    for kind in enabled_kinds(deps.config.operator.job_kinds):
        _register_kind(registry, live, kind)

    @kopf.on.startup(id="frwatch-live-start", registry=registry)
    def start(**_: Any) -> None:
        shards.start()
        threading.Thread(target=_loop, args=(deps, live, stop, shards), name="frwatch-live", daemon=True).start()

    @kopf.on.cleanup(id="frwatch-live-stop", registry=registry)
    def cleanup(**_: Any) -> None:
        stop.set()
        live.close()
        shards.stop()  # releases the shards held: the other replicas take them without waiting for expiry


def _register_kind(registry: kopf.OperatorRegistry, live: LiveJobs, kind: JobKind) -> None:
    @kopf.on.event(kind.group, kind.version, kind.plural, id=f"frwatch-live-{kind.plural}", registry=registry)
    def live_job(type: str | None, body: kopf.Body, **_: Any) -> None:
        live.saw(kind, dict(body), deleted=type == "DELETED")
