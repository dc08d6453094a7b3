"""Findings while the job runs, from the agents' live summaries (live watch, issue 15). Pure: no I/O,
no clock of its own (the caller passes ``now``).

:class:`LiveWatch` keeps, across sampling rounds, only what a judgement over time needs: when each rank's
progress last moved and since when each gap between a group's members has been seen. Each round it
rebuilds the analyzer's own view from the summaries (:func:`.align.infer_groups` for members: pg_config,
the ranks whose entries name a group, the whole world for the default group) and says:

- **desync**: members of a group recorded different signatures (the analyzer's, :mod:`.rules`) at the
  same sequence number. The reference is the majority; a tie names every member (undecided), as the
  post-mortem analyzer does. Judged once every member has been read at or past that sequence number, or
  after ``settle_s``: the agents sample their pods at different moments (and early in a job some are not
  read yet), and a member read just before it enqueued, or not read at all, must not flip the majority or
  go unnamed. A member read short of the sequence number is waited for while it moves (until it has been
  still ``settle_s``); a member not read, for ``settle_s`` from when the disagreement was first seen. The
  entries seen for that sequence number are kept across rounds until judged, so a tail that moves on does
  not lose them.
- **stall**: some members enqueued sequence number ``s`` and others have not, seen for at least
  ``stall_after_s`` (default 60 s, far below a watchdog), while the laggards' own progress (any group)
  has not moved for as long. Each laggard's Python stack (``dump_traceback``), when the agent had one,
  says where it is. A slow but healthy rank moves between rounds: its gap is a new one each time.
- **stragglers** (informational, never an incident): the analyzer's own rule (:func:`.stragglers.stragglers`)
  over the entries the summaries keep: a rank consistently late to enqueue.

A rank whose latest summary is an error (unreadable this round) is left out of every judgement: live watch
degrades for that rank only.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from ..align.groups import GroupInfo, infer_groups
from ..align.stragglers import stragglers
from ..trace.summarize import STATE_CODES, PgTrace, RankTrace, TailEntry, compact_ranks
from ..verdict import Straggler
from .summary import LiveRank

#: A gap between members must be seen this long, and the laggards' progress stale this long (seconds).
STALL_AFTER_S = 60.0
#: How long members that have not enqueued a disagreeing sequence number yet are waited for (seconds).
SETTLE_S = 10.0
#: The most ranks a finding lists by name.
MAX_NAMED = 16


class LiveKind(StrEnum):
    """What live watch found."""

    #: Members recorded different collectives (or sizes, dtypes) at the same sequence number.
    desync = "desync"
    #: Some members have not enqueued what the others did, and have not moved, for the threshold.
    stall = "stall"


class LiveFinding(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: LiveKind
    process_group: str
    #: The sequence number where members disagree (desync) or that the laggards never enqueued (stall).
    seq: int
    #: The culprits: the minority (desync; every member when undecided) or the laggards (stall).
    ranks: list[int]
    #: The other members (the majority; those that enqueued ``seq``).
    peers: list[int]
    #: How long the gap has been seen (stall), seconds.
    for_s: float = 0.0
    #: Per culprit rank, its Python stack when the agent had one (stall).
    stacks: dict[int, str] = Field(default_factory=dict)
    summary: str

    @property
    def key(self) -> tuple[str, str, int]:
        """The same finding seen again in a later round has the same key."""
        return (self.kind.value, self.process_group, self.seq)


class LiveReport(BaseModel):
    model_config = ConfigDict(frozen=True)
    findings: list[LiveFinding]
    stragglers: list[Straggler]
    #: Ranks left out this round (their latest summary is an error), with why.
    unreadable: dict[int, str]


def _signed(sig_hex: str) -> int:
    v = int(sig_hex, 16)
    return v - (1 << 64) if v >= 1 << 63 else v


def _trace(s: LiveRank) -> RankTrace:
    """The analyzer's view of one rank rebuilt from its live summary (its last entries only)."""
    pgs: dict[str, PgTrace] = {}
    for g in s.groups:
        sigs = array("q", [_signed(e.sig) for e in g.tail])
        pgs[g.name] = PgTrace(
            name=g.name,
            desc=g.desc,
            seqs=array("q", [e.seq for e in g.tail]),
            sigs=sigs,
            plain=sigs,
            created=array("q", [e.created_ns for e in g.tail]),
            tail=[
                TailEntry(
                    seq=e.seq,
                    record_id=-1,
                    sig=sig,
                    state=STATE_CODES.get(e.state, -1),
                    retired=e.retired,
                    created_ns=e.created_ns,
                    started_ns=0,
                    completed_ns=0,
                )
                for e, sig in zip(g.tail, sigs, strict=True)
            ],
            config_ranks=compact_ranks(sorted(g.members)) if g.members else None,
            last_enqueued=g.last_enqueued,
            last_started=g.last_started,
            last_completed=g.last_completed,
            status_known=True,
        )
    return RankTrace(
        rank=s.rank, file=f"live:{s.rank}", fmt="json", version="", backend="", entries=0, pgs=pgs, p2p=[]
    )


def _what(s: LiveRank, sig: str) -> str:
    d = s.signatures.get(sig)
    return f"{d.op} {d.input_sizes} {d.input_dtypes}" if d else "an unknown entry"


def _names(ranks: Iterable[int]) -> str:
    rs = sorted(ranks)
    return ", ".join(map(str, rs[:MAX_NAMED])) + (
        f" and {len(rs) - MAX_NAMED} more" if len(rs) > MAX_NAMED else ""
    )


class LiveWatch:
    """The operator's live judgement of one job attempt, fed one round of summaries at a time."""

    def __init__(
        self, world: Iterable[int], stall_after_s: float = STALL_AFTER_S, settle_s: float = SETTLE_S
    ) -> None:
        self.world = sorted(set(world))
        self.stall_after_s = stall_after_s
        self.settle_s = settle_s
        #: Per group, the earliest disagreeing sequence number waiting for members: the entries seen, and
        #: when it was first seen.
        self._pending: dict[str, tuple[int, dict[int, tuple[str, LiveRank]], float]] = {}
        self._progress: dict[int, tuple[tuple[str, int], ...]] = {}
        self._moved_at: dict[int, float] = {}
        self._gap_since: dict[tuple[str, int, int], float] = {}  # (group, laggard, missing seq) -> first seen

    def observe(self, samples: Iterable[LiveRank], now: float) -> LiveReport:
        latest: dict[int, LiveRank] = {}
        for s in samples:
            if s.rank not in latest or s.sampled_ns >= latest[s.rank].sampled_ns:
                latest[s.rank] = s
        unreadable = {r: s.error for r, s in latest.items() if s.error}
        readable = {r: s for r, s in latest.items() if not s.error}
        for r, s in readable.items():
            progress = tuple(sorted((g.name, g.last_enqueued) for g in s.groups))
            if self._progress.get(r) != progress:
                self._progress[r] = progress
                self._moved_at[r] = now
        traces = {r: _trace(s) for r, s in readable.items()}
        groups = infer_groups(traces, self.world)
        findings: list[LiveFinding] = []
        seen_gaps: set[tuple[str, int, int]] = set()
        for g in groups.values():
            desync = self._desync(g, readable, now)
            if desync is not None:
                findings.append(desync)
            stall = self._stall(g, readable, now, seen_gaps)
            if stall is not None:
                findings.append(stall)
        self._gap_since = {k: v for k, v in self._gap_since.items() if k in seen_gaps}
        late = stragglers(traces, groups) if len(traces) >= 3 else []
        return LiveReport(findings=findings, stragglers=late, unreadable=unreadable)

    def _desync(self, g: GroupInfo, readable: dict[int, LiveRank], now: float) -> LiveFinding | None:
        by_seq: dict[int, dict[int, tuple[str, LiveRank]]] = {}  # seq -> rank -> (signature, its summary)
        last: dict[int, int] = {}
        for r in g.members:
            grp = next((x for x in readable[r].groups if x.name == g.name), None) if r in readable else None
            if grp is not None:
                last[r] = grp.last_enqueued
            elif r in readable:
                last[r] = 0
            for e in grp.tail if grp else ():
                by_seq.setdefault(e.seq, {})[r] = (e.sig, readable[r])
        pending = self._pending.pop(g.name, None)
        since = {pending[0]: pending[2]} if pending is not None else {}
        if pending is not None:
            held = by_seq.setdefault(pending[0], {})
            for r, seen in pending[1].items():
                held.setdefault(r, seen)
        for seq in sorted(by_seq):
            sigs = {r: sig for r, (sig, _) in by_seq[seq].items()}
            counts = Counter(sigs.values())
            if len(sigs) < 2 or len(counts) < 2:
                continue
            first = since.get(seq, now)
            unread = [r for r in g.members if r not in last]
            behind = sorted(r for r, at in last.items() if r not in sigs and at < seq)
            moving = any(now - self._moved_at.get(r, now) < self.settle_s for r in behind)
            if moving or (unread and now - first < self.settle_s):
                self._pending[g.name] = (seq, dict(by_seq[seq]), first)
                return None
            (top, n_top), (_, n_next) = counts.most_common(2)
            undecided = n_top == n_next
            culprits = sorted(sigs) if undecided else sorted(r for r, s in sigs.items() if s != top)
            peers = [] if undecided else sorted(r for r, s in sigs.items() if s == top)

            def what(rank: int, seq: int = seq) -> str:
                return _what(by_seq[seq][rank][1], by_seq[seq][rank][0])

            if undecided:
                text = "; ".join(f"rank {r}: {what(r)}" for r in culprits[:MAX_NAMED])
                summary = f"desync in {g.label} at seq {seq}, undecided between its members: {text}"
            else:
                summary = (
                    f"desync in {g.label} at seq {seq}: rank(s) {_names(culprits)} recorded {what(culprits[0])} "
                    f"where ranks {_names(peers)} recorded {what(peers[0])}"
                )
            if behind:
                summary += (
                    f" (ranks {_names(behind)} had not enqueued seq {seq} and had not moved"
                    f" for {self.settle_s:.0f} s)"
                )
            if unread:
                summary += f" (ranks {_names(unread)} could not be read)"

            return LiveFinding(
                kind=LiveKind.desync,
                process_group=g.name,
                seq=seq,
                ranks=culprits,
                peers=peers,
                summary=summary,
            )
        return None

    def _stall(
        self, g: GroupInfo, readable: dict[int, LiveRank], now: float, seen: set[tuple[str, int, int]]
    ) -> LiveFinding | None:
        enq = {}
        for r in g.members:
            grp = next((x for x in readable[r].groups if x.name == g.name), None) if r in readable else None
            if grp is not None:
                enq[r] = grp.last_enqueued
            elif r in readable and not readable[r].groups:
                enq[r] = 0  # up, but has enqueued nothing yet
        if len(enq) < 2:
            return None
        frontier = max(enq.values())
        laggards: list[int] = []
        since = now
        for r, last in enq.items():
            if last >= frontier:
                continue
            key = (g.name, r, last + 1)
            seen.add(key)
            first = self._gap_since.setdefault(key, now)
            stale = now - self._moved_at.get(r, now)
            if now - first >= self.stall_after_s and stale >= self.stall_after_s:
                laggards.append(r)
                since = min(since, first)
        if not laggards:
            return None
        seq = min(enq[r] for r in laggards) + 1
        peers = sorted(r for r, last in enq.items() if last >= seq)
        stacks = {r: s for r in laggards if (s := readable[r].stack)}
        where = "; ".join(
            f"rank {r}: {readable[r].stack_error}"
            for r in laggards
            if readable[r].stack_error and r not in stacks
        )
        summary = (
            f"stall in {g.label}: rank(s) {_names(laggards)} have not enqueued seq {seq} that ranks {_names(peers)} "
            f"enqueued, and have not moved, for {now - since:.0f} s" + (f" ({where})" if where else "")
        )
        return LiveFinding(
            kind=LiveKind.stall, process_group=g.name, seq=seq, ranks=sorted(laggards), peers=peers,
            for_s=round(now - since, 1), stacks=stacks, summary=summary,
        )  # fmt: skip
