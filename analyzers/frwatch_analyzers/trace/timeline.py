"""One rank's own record, in the order it enqueued: what it was doing when it dumped, and whether what it
did last matches what it always did before.

Record ids count every entry a recorder wrote, so within one recorder they order a rank's calls across
all its process groups without any clock; clocks of different hosts can disagree by milliseconds, and a
loaded machine reorders events of different processes. Every judgement here is made from one rank's
record ids, never by comparing the timestamps of two ranks.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .summarize import STATE_CODES, RankTrace
from .tail_rows import finished


@dataclass(frozen=True, slots=True)
class Step:
    """One collective a rank enqueued (from the detail its summary keeps)."""

    record_id: int
    key: str  # the group's key
    seq: int
    sig: int
    done: bool | None  # completed (or retired); None: the dump cannot say


@dataclass(frozen=True)
class Status:
    """Where a rank stands relative to one group's collective it never enqueued."""

    what: str  # "no_dump" | "idle" | "blocked" | "moved_on"
    where: Step | None = None  # blocked: the collective it waits in; moved_on: its first call elsewhere
    history: bool | None = None  # its calls after the last one here match its own history (None: no history)


class Timeline:
    """A rank's steps per recorder, by record id."""

    def __init__(self, trace: RankTrace) -> None:
        self.trace = trace
        by_backend: dict[str, list[Step]] = {}
        start: dict[str, int] = {}
        for key, pg in trace.pgs.items():
            steps = by_backend.setdefault(pg.backend, [])
            tail = pg.tail
            through = finished(pg)  # calls before one that finished are done, whatever their row says
            for t in tail:
                done: bool | None
                if t.state == STATE_CODES["completed"] or t.retired is True or t.seq <= through:
                    done = True
                elif (trace.has_states and t.state >= 0) or t.retired is False:
                    done = False
                else:
                    done = None
                steps.append(Step(t.record_id, key, t.seq, t.sig, done))
            if tail and len(pg.seqs) and tail[0].seq > pg.seqs[0]:
                # the group's detail starts late: before its contiguous end, the order across groups has gaps
                first = len(tail) - 1
                while first > 0 and tail[first - 1].seq == tail[first].seq - 1:
                    first -= 1
                start[pg.backend] = max(start.get(pg.backend, -1), tail[first].record_id)
        self.steps = {b: sorted(s, key=lambda x: x.record_id) for b, s in by_backend.items()}
        self.contiguous = {
            b: [x for x in s if x.record_id >= start.get(b, -1)] for b, s in self.steps.items()
        }

    def blocking(self) -> Step | None:
        """The earliest call (by record id) the rank had not completed when it dumped: where it waits.
        Several recorders: the first such call of each, earliest recorder first (None: idle)."""
        for steps in self.steps.values():
            for s in steps:
                if s.done is False:
                    return s
        return None

    def status(self, key: str, backend: str) -> Status:
        """Why the rank never enqueued the next collective of group ``key``."""
        steps = self.contiguous.get(backend, [])
        mine = [i for i, s in enumerate(steps) if s.key == key]
        after = steps[mine[-1] + 1 :] if mine else []
        history = _consistent(steps, mine) if mine else None
        bp = self.blocking()
        if after and history is False:
            return Status("moved_on", after[0], history)
        if bp is None:
            return Status("idle", None, history)
        return Status("blocked", bp, history)


def _consistent(steps: list[Step], mine: list[int]) -> bool | None:
    """Are the rank's calls after its last call of the group a beginning of what it did, in its own
    history, after a call with the same signature of that group (before the next one)? None: no history."""
    last = mine[-1]
    now = [(s.key, s.sig) for s in steps[last + 1 :]]
    seen = [
        [(s.key, s.sig) for s in steps[a + 1 : b]]
        for a, b in itertools.pairwise(mine)
        if steps[a].sig == steps[last].sig
    ]
    if not seen:
        return None
    return any(h[: len(now)] == now for h in seen)
