"""A group's kept entries held as one int64 column, the way a summary stores them: a sequence of
:class:`~.summarize.TailEntry` built on access.

A summary keeps ~56 entries a group, ~170 a rank: at 16k ranks, 2.8 million ``TailEntry`` objects of ~250
bytes (their times are ints past the small-int cache) would be ~700 MB and seconds of CPU to build, for a
reduce that reads most of them once or never. Held as the summary's column (8 int64 a row: seq, record id,
signature, state, retired -1/0/1, created, started, completed) they cost 64 bytes a row. Consumers that read
every rank's times (:mod:`.stragglers`, :mod:`.merge`) read the columns directly (:func:`tail_columns`);
every other consumer sees a read-only sequence of ``TailEntry`` as before. The rows are checked when the
summary is decoded (:mod:`.rank_summary`), not here.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

from .summarize import PgTrace, TailEntry

FIELDS = 8
_RETIRED = (None, False, True)  # by retired + 1


class TailRows(Sequence[TailEntry]):
    """Read-only rows of a checked tail column; ``splits``: row index -> the all_to_all lists."""

    __slots__ = ("_col", "_seqs", "_splits")

    def __init__(self, col: array[int], splits: dict[int, tuple[tuple[int, ...], tuple[int, ...]]]) -> None:
        self._col = col
        self._splits = splits
        self._seqs: array[int] | None = None

    def __len__(self) -> int:
        return len(self._col) // FIELDS

    def _row(self, i: int) -> TailEntry:
        c, o = self._col, i * FIELDS
        return TailEntry(
            c[o], c[o + 1], c[o + 2], c[o + 3], _RETIRED[c[o + 4] + 1], c[o + 5], c[o + 6], c[o + 7],
            self._splits.get(i),
        )  # fmt: skip

    @overload
    def __getitem__(self, i: int) -> TailEntry: ...
    @overload
    def __getitem__(self, i: slice) -> list[TailEntry]: ...
    def __getitem__(self, i: int | slice) -> TailEntry | list[TailEntry]:
        n = len(self)
        if isinstance(i, slice):
            return [self._row(k) for k in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("tail row out of range")
        return self._row(i)

    def __iter__(self) -> Iterator[TailEntry]:
        return map(self._row, range(len(self)))

    def __reversed__(self) -> Iterator[TailEntry]:
        return map(self._row, range(len(self) - 1, -1, -1))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TailRows):
            return self._col == other._col and self._splits == other._splits
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable peers (lists) are unhashable too

    def __reduce__(self) -> tuple[Any, ...]:
        return TailRows, (self._col, self._splits)  # the column and the splits: not the cached seqs

    def whole(self) -> bool:
        """Whether the column holds whole rows (a column from elsewhere than a checked summary is checked)."""
        return len(self._col) % FIELDS == 0

    def __repr__(self) -> str:
        return f"TailRows({list(self)!r})"

    def column(self, field: int) -> array[int]:
        """One field of every row (0 seq, 3 state, 4 retired, 5 created, 6 started ...), in C."""
        return self._col[field::FIELDS]

    def seqs(self) -> array[int]:
        if self._seqs is None:
            self._seqs = self._col[0::FIELDS]
        return self._seqs


def stacked(tails: list[TailRows], field: int) -> array[int]:
    """One field of tails that hold the same rows, end to end: row ``j`` of every tail is
    ``block[j::rows]``, sliced in C."""
    block = array("q")
    for t in tails:
        block.extend(t.column(field))
    if tails and len(block) != len(tails) * len(tails[0]):
        raise ValueError("tails of different lengths")
    return block


def find(tail: Sequence[TailEntry], seq: int) -> TailEntry | None:
    """The last row of ``tail`` at ``seq``, read from its end (rows are by seq: stops at a lower one)."""
    if isinstance(tail, TailRows):
        seqs = tail.seqs()
        for k in range(len(seqs) - 1, -1, -1):
            s = seqs[k]
            if s == seq:
                return tail[k]
            if s < seq:
                break
        return None
    for t in reversed(tail):
        if t.seq == seq:
            return t
        if t.seq < seq:
            break
    return None


def done_through(tail: Sequence[TailEntry], last_completed: int = -1) -> int:
    """The highest sequence number the rank had finished in the group: its newest row completed or retired,
    or ``pg_status``'s last completed collective (-1 when neither).

    Every call up to that one counts as done, whatever its own row says. A later call of the group completed
    only once every member issued it, so no member is missing at an earlier one and it is not where the job
    waits: NCCL runs a group's calls in order on one stream; gloo runs them on several threads, so a large
    async call overtaken by a small one stays ``retired=False`` while it still moves data (real torch 2.13
    ranks: ``frwatch_dev.workloads.overtaken_gloo``); torchcomms before its April 2026 fix never retired
    sync ops; a coalesced region's parts stay ``scheduled`` while its closing entry completes. Reading such a
    row as in flight makes a healthy job look stuck."""
    done = last_completed
    if isinstance(tail, TailRows):
        for seq, state, retired in zip(tail.seqs(), tail.column(3), tail.column(4), strict=True):
            if (state == 2 or retired == 1) and seq > done:
                done = seq
        return done
    for e in tail:
        if (e.state == 2 or e.retired is True) and e.seq > done:
            done = e.seq
    return done


def finished(pg: PgTrace) -> int:
    """:func:`done_through` of a rank's group, with its ``pg_status`` when the dump has one."""
    return done_through(pg.tail, pg.last_completed if pg.status_known else -1)


def first_open(tail: Sequence[TailEntry], has_states: bool, last_completed: int = -1) -> int | None:
    """The seq of the first row not completed nor retired, when the dump says it was open (a state, or
    retired false) and no later call of the group finished (:func:`done_through`); None when that first row
    cannot say, or every row is done."""
    finished = done_through(tail, last_completed)
    if isinstance(tail, TailRows):
        for seq, state, retired in zip(tail.seqs(), tail.column(3), tail.column(4), strict=True):
            if state == 2 or retired == 1 or seq <= finished:
                continue
            if (has_states and state >= 0) or retired == 0:
                return seq
            return None
        return None
    for e in tail:
        if e.state == 2 or e.retired is True or e.seq <= finished:
            continue
        if (has_states and e.state >= 0) or e.retired is False:
            return e.seq
        return None
    return None


def tail_columns(tail: Sequence[TailEntry]) -> tuple[Any, Any, Any]:
    """(seqs, created_ns, started_ns) of ``tail``'s rows, without building an object a row when it is held
    as a column."""
    if isinstance(tail, TailRows):
        return tail.column(0), tail.column(5), tail.column(6)
    return [t.seq for t in tail], [t.created_ns for t in tail], [t.started_ns for t in tail]


def done_count(tail: Sequence[TailEntry]) -> int:
    """How many rows are completed (state 2) or retired."""
    if isinstance(tail, TailRows):
        return sum(1 for s, r in zip(tail.column(3), tail.column(4), strict=True) if s == 2 or r == 1)
    return sum(1 for x in tail if x.state == 2 or x.retired is True)
