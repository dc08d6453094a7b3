"""How a rank's :class:`~.summarize.RankTrace` travels from a worker back to the parent, compactly.

At 2048 ranks the parent spent more CPU taking summaries in (unpickling ~88 KB a rank, ~170 ``TailEntry``
objects among them) than deciding anything from them. A worker therefore sends:

- each group's kept entries as one int64 column (:class:`~.tail_rows.TailRows`, 8 fields a row), not as
  objects: one array pickles and unpickles as a memory copy;
- a group's four per-seq arrays (seqs, signatures, plain signatures, creation times) only the first time
  it sends that group's sequence (by its digest): ranks that recorded the same sequence share one copy in
  the parent anyway (:class:`~.loading.ArrayPool` keeps the first such rank's, creation times included),
  so a later rank's group travels without them and the parent takes the copy it already holds.

What comes back is checked before it is used: a group that refers to a sequence the parent does not hold,
or a tail column that is not whole rows, makes the file a problem with the reason (it would be a bug in the
worker, or a worker the dump took over), never a trace with empty arrays. The parent reads one worker's
messages in the order it sent them, so a reference always follows the message that carried the arrays.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter

from .summarize import PgTrace, RankTrace, TailEntry
from .tail_rows import FIELDS, TailRows

_ROW = attrgetter("seq", "record_id", "sig", "state", "retired", "created_ns", "started_ns", "completed_ns")


@dataclass
class Packed:
    """A trace as a worker sends it; ``shared``: the groups sent without their per-seq arrays."""

    trace: RankTrace
    shared: tuple[str, ...] = ()
    problem: str = field(default="", compare=False)  # set by :func:`unpack` when it cannot be used


def tail_rows(tail: Sequence[TailEntry]) -> TailRows:
    """``tail`` as one column of rows (the layout :mod:`.rank_summary` stores), read field by field in C."""
    if isinstance(tail, TailRows):
        return tail
    flat = list(chain.from_iterable(map(_ROW, tail)))
    flat[4::FIELDS] = [-1 if r is None else int(r) for r in flat[4::FIELDS]]  # retired: None/False/True
    splits = {i: t.splits for i, t in enumerate(tail) if t.splits is not None}
    return TailRows(array("q", flat), splits)


class Packer:
    """Worker side: remembers which groups' sequences this worker has sent (the parent holds them)."""

    def __init__(self) -> None:
        self._sent: set[tuple[str, bytes]] = set()

    def pack(self, trace: RankTrace) -> Packed:
        shared = []
        for name, pg in trace.pgs.items():
            pg.tail = tail_rows(pg.tail)
            key = (name, pg.seq_digest)
            if not pg.seq_digest:
                continue
            if key in self._sent:
                pg.seqs, pg.sigs, pg.plain, pg.created = array("q"), array("q"), array("q"), array("q")
                shared.append(name)
            else:
                self._sent.add(key)
        return Packed(trace, tuple(shared))


def unpack(packed: Packed, held: Callable[[str, bytes], PgTrace | None]) -> bool:
    """Parent side: restore the shared groups' arrays from those ``held`` (by group name and digest), in
    place; False, with ``packed.problem`` saying why, when the message cannot be used."""
    trace = packed.trace
    for name, pg in trace.pgs.items():
        tail = pg.tail
        if not isinstance(tail, TailRows) or not tail.whole():
            packed.problem = (
                f"internal: the worker sent group {name!r}'s kept entries not as one column of whole rows"
            )
            return False
    for name in packed.shared:
        group = trace.pgs.get(name)
        source = held(name, group.seq_digest) if group is not None else None
        if group is None or source is None or source is group:
            packed.problem = (
                f"internal: the worker referred to group {name!r}'s sequence, which it never sent"
            )
            return False
        group.seqs, group.sigs, group.plain, group.created = (
            source.seqs,
            source.sigs,
            source.plain,
            source.created,
        )
    return True
