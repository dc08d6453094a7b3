"""Flight Recorder's verdict combined with the evidence beyond it: why ranks stopped, who failed first, and
whether a suspect node was sick.

- Each log gives its rank's signals (:mod:`~frwatch_analyzers.evidence.logscan`); each container end in the
  manifest gives one (exit 137 with OOMKilled, 137/SIGKILL, 139/SIGSEGV, 134/SIGABRT, 143/SIGTERM, other
  non-zero).
  A rank's cause is its last *primary* signal (an exception, a CUDA error, a gloo abort, a kill); a rank
  with only consequences (a lost peer, a watchdog timeout) keeps its first one.
- A cause needs a consequence: an exception the rank survived is none. Its own later lines name a later
  step (:func:`~frwatch_analyzers.evidence.logscan.went_on`: a retried metrics push, a skipped bad row), its Flight
  Recorder record goes on more than a second after the exception's time, its container exited 0 without a
  restart, or a healthy verdict's dump of it took part in every collective: the summary says it was
  handled, and it names no one.
- The first rank to fail in time is the prime suspect (``first``); without times, the only rank with a
  primary cause while the others only lost their peer is. When Flight Recorder could not say why (a rank
  left no dump, or no conclusion), the headline names the cause: ``rank 3 crashed first:
  torch.OutOfMemoryError at train.py:88 (step 412), 0.4 s before ranks 0-2,4-7 lost their peer``.
- Node signals (:mod:`~frwatch_analyzers.evidence.node_signals`: unhealthy conditions, Xid Events) raise
  ``hardware_class`` only on a suspect node: one where a Flight Recorder culprit ran, or a rank whose log
  shows a cause or a network error. The verdict then names the node and the signal. Log lines alone
  (an Xid or NCCL line a process printed) never do.

Every message and excerpt here comes masked (:mod:`~frwatch_analyzers.evidence.masking`) and printable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..base.limits import MAX_WORLD_SIZE
from ..base.safe_text import printable
from ..base.textfmt import ranks_text
from ..diagnose.nextsteps import CRASH_CHECK_EXIT, CRASH_READ_LOGS, CRASH_UNSEEN
from ..store.manifest import Manifest, PodRecord
from ..verdict import Category, Cause, CauseKind, CulpritKind, FileProblem, Status, Verdict
from .logscan import Signal, last_step, scan, went_on
from .masking import mask
from .node_signals import NETWORK_KINDS, hardware_signals, raise_hardware
from .read import Gathered, LogFile

#: Causes kept in a verdict (the first to fail come first).
MAX_CAUSES = 64
#: Why a log whose name names no rank gave nothing (it was read: see evidence_read).
UNRANKED_UNUSED = (
    "log not used: nothing in it reads as a cause (its name names no rank: rank3.log, train_rank_3.out, 3.log, "
    "or a pod of the manifest; a line of it prefixed [rank3]: is rank 3's)"
)
#: Seconds by which a rank's Flight Recorder record must outlast an exception of its log for the rank to have
#: gone on after it (a collective enqueued just before a crash can complete a few ms after it).
_SAME_MOMENT_S = 1.0
#: Handled exceptions said in the summary (the others are counted).
_HANDLED_SAID = 3
#: Lines of a log shown around a cause: before it, and after it.
EXCERPT_BEFORE, EXCERPT_AFTER = 6, 2
_EXCERPT_CHARS = 240
#: Primary kinds, the most telling first (a rank's cause when its evidence holds several).
_RANKING = [
    CauseKind.gloo_abort,
    CauseKind.cuda_oom,
    CauseKind.cuda_illegal_address,
    CauseKind.cuda_ecc,
    CauseKind.exception,
    CauseKind.segfault,
    CauseKind.aborted,
    CauseKind.oom_killed,
    CauseKind.killed,
    CauseKind.xid,
    CauseKind.gloo_connect,
    CauseKind.nccl_internal_error,
]
_NETWORK = NETWORK_KINDS
_GPU = {CauseKind.xid, CauseKind.cuda_ecc, CauseKind.cuda_illegal_address}
#: Categories where Flight Recorder could not say why: the logs' cause takes the headline.
#: Not ``healthy``: a job whose every rank agrees may still log a caught exception; the causes say so, the
#: verdict stays.
_UNEXPLAINED = {Category.missing_rank, Category.inconclusive, Category.no_dump}
_VERB = {
    CauseKind.gloo_abort: "aborted",
    CauseKind.oom_killed: "was OOM-killed",
    CauseKind.killed: "was killed",
    CauseKind.segfault: "crashed (SIGSEGV)",
    CauseKind.aborted: "aborted",
    CauseKind.xid: "hit a GPU error",
}


def _iso(t: float | None) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z") if t is not None else ""


def _excerpt(lines: list[str], at: int) -> list[str]:
    cut = lines[max(0, at - EXCERPT_BEFORE) : at + EXCERPT_AFTER + 1]
    return [printable(mask(line[: _EXCERPT_CHARS * 2]), _EXCERPT_CHARS) for line in cut]


def _cause(log: LogFile, sig: Signal, rank: int | None, manifest: Manifest | None) -> Cause:
    pod = log.pod or (manifest.pod_of(rank) if manifest is not None and rank is not None else "")
    node = manifest.node_of(rank) if manifest is not None and rank is not None else ""
    return Cause(
        rank=rank,
        kind=CauseKind(sig.kind),
        message=sig.message,
        exception=sig.exception,
        location=sig.location,
        time=_iso(sig.time),
        step=sig.step,
        source=log.name,
        line=sig.line + 1,
        pod=pod,
        node=node,
        primary=sig.primary,
        excerpt=_excerpt(log.text.lines, sig.line),
    )


def _rank_of(sig: Signal, ranks: tuple[int, ...]) -> int | None:
    """The global rank of a signal: its line's ``[rankN]:`` prefix, its ``[defaultN]:`` local rank (the
    pod's ranks in order: torchrun numbers a node's ranks from its first), or the file's one rank. A line
    naming a rank the file's pod does not hold is no one's: the file's rank would be a guess against its text.
    In a file whose ranks are unknown (``ranks`` empty: a flat log whose name names no rank) only a line's
    ``[rankN]:`` prefix says whose it is."""
    if sig.rank is not None:
        if not ranks:
            return sig.rank if sig.rank < MAX_WORLD_SIZE else None
        return sig.rank if sig.rank in ranks else None
    if sig.local_rank is not None and sig.local_rank < len(ranks):
        return sorted(ranks)[sig.local_rank]
    return ranks[0] if len(ranks) == 1 else None


def _by_launcher(ranked: list[tuple[Signal, int | None]]) -> list[tuple[Signal, int | None]]:
    """A log of several ranks without torchrun's line prefixes: its one traceback without a rank belongs to
    the one rank torchrun's summary names as failed with a positive exit code (an uncaught exception exits 1;
    the others it stopped end by a signal). With more of either, which traceback is whose is not known."""
    failed = {r for s, r in ranked if r is not None and s.exit_code is not None and s.exit_code > 0}
    loose = [i for i, (s, r) in enumerate(ranked) if r is None and s.exception]
    if len(failed) != 1 or len(loose) != 1:
        return ranked
    out = list(ranked)
    out[loose[0]] = (ranked[loose[0]][0], failed.pop())
    return out


def log_causes(log: LogFile, manifest: Manifest | None, year: int) -> list[tuple[Cause, float | None]]:
    """A log's causes, one a rank (its best signal) plus its first network or GPU signal, with times."""
    return _log_causes(log, manifest, year)[0]


def _log_causes(
    log: LogFile,
    manifest: Manifest | None,
    year: int,
    finished: frozenset[int] = frozenset(),
    recorded_ns: Mapping[int, int] | None = None,
    ends: _Ends | None = None,
) -> tuple[list[tuple[Cause, float | None]], list[str]]:
    """:func:`log_causes`, and a sentence for each exception the rank went on after (handled: no cause).
    ``finished``: ranks the dumps show took part in every collective to the end (a healthy verdict);
    ``recorded_ns``: each dumped rank's latest Flight Recorder timestamp (its own wall clock, as its log's)."""
    recorded_ns = recorded_ns or {}
    ends = ends or _Ends.of(manifest)
    by_rank: dict[int | None, list[Signal]] = {}
    handled: list[str] = []
    clean = ends.exited_cleanly(log)
    stopped = ends.stopped
    for sig, rank in _by_launcher(
        [(sig, _rank_of(sig, log.ranks)) for sig in scan(log.text.lines, year=year)]
    ):
        how = "" if not sig.exception else went_on(log.text.lines, sig, unprefixed=len(log.ranks) == 1)
        if not how and sig.exception and rank is not None and rank in clean:
            how = "its container exited 0"
        # only a time with its zone compares with Flight Recorder's epoch times (glog writes local time)
        later = 0.0
        if rank is not None and sig.time is not None and sig.zoned and rank in recorded_ns:
            later = recorded_ns[rank] / 1e9 - sig.time
        if not how and sig.exception and later > _SAME_MOMENT_S:
            how = f"its dump records collectives {later:.1f} s after it"
        if not how and rank in finished and rank not in stopped:
            how = "its dump shows it completed every collective its peers did"
        if how:
            what = (sig.exception + (f" at {sig.location}" if sig.location else "")) or sig.message[:80]
            who = f"rank {rank}" if rank is not None else "a rank"
            handled.append(f"{who}'s {what} ({log.name}, line {sig.line + 1}): {how}.")
            continue
        by_rank.setdefault(rank, []).append(sig)
    out: list[tuple[Cause, float | None]] = []
    for rank, sigs in by_rank.items():
        primary = [s for s in sigs if s.primary]
        best = (
            max(
                primary,
                key=lambda s: (-_RANKING.index(CauseKind(s.kind)) if s.kind in _RANKING else -99, s.line),
            )
            if primary
            else sigs[0]
        )
        out.append((_cause(log, best, rank, manifest), best.time))
        extra = next((s for s in sigs if s is not best and CauseKind(s.kind) in _NETWORK | _GPU), None)
        if extra is not None:
            out.append((_cause(log, extra, rank, manifest), extra.time))
    return out, handled


@dataclass(frozen=True)
class _Ends:
    """How the ranks' containers ended, once per verdict: the ranks that stopped (an end other than exit code
    0, or a restart), and each pod's record."""

    stopped: frozenset[int] = frozenset()
    pods: Mapping[str, PodRecord] = field(default_factory=dict)

    @classmethod
    def of(cls, manifest: Manifest | None) -> _Ends:
        if manifest is None:
            return cls()
        stopped = {
            r
            for pod in manifest.pods
            for e in pod.ended
            if e.exit_code != 0 or e.restart_count or e.signal
            for r in pod.ranks
        }
        return cls(frozenset(stopped), {p.pod: p for p in manifest.pods})

    def exited_cleanly(self, log: LogFile) -> set[int]:
        """The ranks of the log's pod whose container (the log's, else every one of the pod) ended with exit
        code 0 and never restarted: no exception in their log stopped them."""
        pod = self.pods.get(log.pod) if log.pod and log.variant != "previous" else None
        if pod is None:
            return set()
        ends = [e for e in pod.ended if not log.container or e.container == log.container]
        ok = ends and all(e.exit_code == 0 and e.restart_count == 0 for e in ends)
        return set(pod.ranks) if ok else set()


def end_causes(manifest: Manifest | None) -> list[Cause]:
    """What the manifest's container ends say: a kill, an OOM kill, a segfault, a SIGTERM, an exit code."""
    if manifest is None:
        return []
    out: list[Cause] = []
    for pod in manifest.pods:
        for end in pod.ended:
            code, sig, reason = end.exit_code, end.signal, end.reason
            if reason == "OOMKilled":
                kind = CauseKind.oom_killed
            elif code == 137 or sig == 9:
                kind = CauseKind.killed
            elif code == 139 or sig == 11:
                kind = CauseKind.segfault
            elif code == 134 or sig == 6:
                kind = CauseKind.aborted
            elif code == 143 or sig == 15:
                kind = CauseKind.terminated
            elif code not in (None, 0):
                kind = CauseKind.exit_code
            else:
                continue
            text = f"container {end.container} ended with exit code {code}" + (
                f" ({reason})" if reason else ""
            )
            text += f", signal {sig}" if sig else ""
            primary = kind in (CauseKind.oom_killed, CauseKind.killed, CauseKind.segfault, CauseKind.aborted)
            for rank in sorted(set(pod.ranks))[:MAX_CAUSES]:
                out.append(
                    Cause(
                        rank=rank,
                        kind=kind,
                        message=printable(text, 300),
                        source="manifest.json",
                        pod=pod.pod,
                        node=pod.node,
                        primary=primary,
                    )
                )
    return out


def with_causes(
    verdict: Verdict,
    gathered: Gathered,
    manifest: Manifest | None,
    *,
    year: int | None = None,
    recorded_ns: Mapping[int, int] | None = None,
) -> Verdict:
    """``verdict`` with the evidence beyond Flight Recorder: causes, the first to fail, hardware signals.
    ``recorded_ns``: each dumped rank's latest Flight Recorder timestamp (an exception logged well before it
    was not what stopped the rank)."""
    started = manifest.collection_started[:4] if manifest is not None else ""
    year = year or (int(started) if started.isdigit() else datetime.now(UTC).year)  # for glog's times
    timed: list[tuple[Cause, float | None]] = []
    unused: list[FileProblem] = []
    handled: list[str] = []
    # a healthy verdict: every rank that dumped took part in every collective to the end, so nothing stopped it
    finished = frozenset(verdict.ranks_seen) if verdict.status == Status.healthy else frozenset()
    ends = _Ends.of(manifest)
    for log in gathered.logs:
        found, survived = _log_causes(log, manifest, year, finished, recorded_ns, ends)
        timed.extend(found)
        handled.extend(survived)
        if not log.ranks and not found and not survived:
            unused.append(FileProblem(file=log.name, reason=UNRANKED_UNUSED))
    steps: dict[int, int] = {}  # the step a rank's log last named: where a killed rank was
    for log in gathered.logs:
        step = last_step(log.text.lines) if len(log.ranks) == 1 else None
        if step is not None:
            steps[log.ranks[0]] = step
    for end in end_causes(manifest):
        timed.append(
            (end.model_copy(update={"step": steps.get(end.rank)}) if end.rank is not None else end, None)
        )
    update: dict[str, object] = {"bad_files": verdict.bad_files + gathered.problems + unused}
    if handled:
        said = " ".join(handled[:_HANDLED_SAID]) + (
            f" ({len(handled) - _HANDLED_SAID} more)" if len(handled) > _HANDLED_SAID else ""
        )
        verdict = verdict.model_copy(
            update={"summary": f"{verdict.summary} Not causes (the rank went on): {said}".strip()}
        )
    if not timed and not gathered.nodes:
        return verdict.model_copy(update=update)
    per_rank = _best_per_rank(timed)
    first = _first(per_rank, verdict)
    causes = _ordered(timed, per_rank, first)
    from_nodes = hardware_signals(verdict, causes, gathered.nodes, manifest)
    update["causes"] = (causes + from_nodes)[:MAX_CAUSES]
    verdict = verdict.model_copy(update=update)
    if first is not None:
        verdict = _name_first(verdict, per_rank, first)
    if from_nodes:
        verdict = raise_hardware(verdict, causes, from_nodes)
    return verdict


def _best_per_rank(timed: list[tuple[Cause, float | None]]) -> dict[int, tuple[Cause, float | None]]:
    best: dict[int, tuple[Cause, float | None]] = {}
    for cause, t in timed:
        if cause.rank is None:
            continue
        have = best.get(cause.rank)
        if have is None or _weight(cause) > _weight(have[0]):
            best[cause.rank] = (cause, t)
    return best


def _weight(c: Cause) -> tuple[int, int, int]:
    rank = -_RANKING.index(c.kind) if c.kind in _RANKING else -99
    return (int(c.primary), int(c.source != "manifest.json"), rank)


def _first(per_rank: dict[int, tuple[Cause, float | None]], verdict: Verdict) -> int | None:
    """The rank that failed first: the earliest primary cause in time; without times, the one rank with a
    primary cause (a Flight Recorder culprit preferred)."""
    primary = {r: t for r, (c, t) in per_rank.items() if c.primary}
    if not primary:
        return None
    timed = sorted((t, r) for r, t in primary.items() if t is not None)
    if timed:
        return timed[0][1]
    culprits = [r for r in primary if r in verdict.culprit_ranks or r in verdict.missing_dumps]
    candidates = culprits or sorted(primary)
    return candidates[0] if len(candidates) == 1 else None


def _ordered(
    timed: list[tuple[Cause, float | None]],
    per_rank: dict[int, tuple[Cause, float | None]],
    first: int | None,
) -> list[Cause]:
    chosen = {id(c) for c, _ in per_rank.values()}
    keep = [(c, t) for c, t in timed if id(c) in chosen or c.rank is None or c.kind in _NETWORK | _GPU]
    keep.sort(
        key=lambda ct: (ct[0].rank != first, not ct[0].primary, ct[1] is None, ct[1] or 0.0, ct[0].rank or 0)
    )
    return [
        c.model_copy(update={"first": True}) if c.rank == first and id(c) in chosen else c for c, _ in keep
    ]


def _what(c: Cause, *, full: bool = False) -> str:
    """The cause in a few words (the exception type and where), or ``full``: with its message."""
    if (
        c.kind
        in (CauseKind.exception, CauseKind.cuda_oom, CauseKind.cuda_illegal_address, CauseKind.cuda_ecc)
        and c.exception
    ):
        what = (c.message if full else c.exception) + (f" at {c.location}" if c.location else "")
    else:
        what = c.message
    return what + (f" (step {c.step})" if c.step is not None else "")


def _name_first(verdict: Verdict, per_rank: dict[int, tuple[Cause, float | None]], first: int) -> Verdict:
    cause, t = per_rank[first]
    after = {r: tt for r, (c, tt) in per_rank.items() if r != first and not c.primary}
    verb = _VERB.get(cause.kind, "crashed")
    lead = f"rank {first} {verb} first" if after else f"rank {first} {verb}"
    text = f"{lead}: {_what(cause)}"
    if after:
        later = [tt for tt in after.values() if tt is not None]
        gap = f"{min(later) - t:.1f} s before " if t is not None and later and min(later) >= t else "; then "
        lost = "lost its peer" if len(after) == 1 else "lost their peer"
        text += (
            f", {gap}{ranks_text(after)} {lost}"
            if gap.endswith("before ")
            else f"{gap}{ranks_text(after)} only {lost}"
        )
    said = f"rank {first} {verb}: {_what(cause, full=True)}"
    sentence = f"Logs: {text}. {said} (from {cause.source}{f', line {cause.line}' if cause.line else ''})."
    update: dict[str, object] = {"summary": f"{verdict.summary} {sentence}".strip()}
    # Flight Recorder's own finding (a mismatch, a desync, a hang) keeps the headline: a rank that aborted on
    # it (gloo's receiver of a larger send) is its consequence. Where it could not say why, the logs can.
    explains = verdict.category in _UNEXPLAINED and (
        verdict.category != Category.missing_rank
        or first in verdict.missing_dumps
        or first in verdict.culprit_ranks
    )
    if verdict.category == Category.inconclusive and first in verdict.missing_dumps:
        # Flight Recorder saw no rank waiting on the one without a dump: gloo retires a collective that failed
        # because a member died as if it completed (seen in real runs: a peer's last all_reduce retired, the
        # dead rank never issued it). The logs say that rank failed first: it is the missing rank.
        update.update(
            category=Category.missing_rank, status=Status.problem, culprit_ranks=[first],
            culprit_kind=CulpritKind.crashed,
        )  # fmt: skip
    if explains:
        update["headline"] = printable(text, 400)
        update["short"] = printable(f"rank {first} {verb}: {_what(cause)}", 120)[:120]
        if not verdict.culprit_ranks:
            update["culprit_ranks"] = [first]
            update["culprit_kind"] = CulpritKind.crashed
        update["culprit_detail"] = f"{verdict.culprit_detail} {sentence}".strip()
        update["next_steps"] = _steps_knowing(verdict.next_steps, first, cause)
    return verdict.model_copy(update=update)


def _steps_knowing(steps: list[str], first: int, cause: Cause) -> list[str]:
    """The next steps once the evidence says why ``first`` died: the crash steps that ask for the cause, or say
    it cannot be seen, give way to one about the cause named."""
    kept = [s for s in steps if s not in (CRASH_READ_LOGS, CRASH_CHECK_EXIT, CRASH_UNSEEN)]
    if len(kept) == len(steps):
        return steps
    where = f" ({cause.source}{f', line {cause.line}' if cause.line else ''})"
    if cause.kind in (CauseKind.oom_killed, CauseKind.killed):
        step = (
            f"Rank {first} {_VERB[cause.kind]}{where}: look at its memory use and its node's events at that time "
            "(kubectl describe pod, the node's memory pressure), and raise its memory limit or lower the batch."
        )
    elif cause.exception and cause.location:
        step = (
            f"Start at {cause.location}: rank {first} raised {cause.message} there{where}; the others only waited "
            "for it."
        )
    else:
        step = f"Start at what stopped rank {first}: {cause.message}{where}; the others only waited for it."
    return [step, *kept]
