"""Stragglers: ranks consistently behind their peers, named in a hang and in a healthy set alike.

Two ways to be late, measured over the collectives whose detail every rank's summary keeps (its last
ones per group):
- late to enqueue: the entry's ``time_created_ns`` against the median of the group's members for the same
  collective. Wall clocks of different hosts are compared: a clock offset between nodes looks the same,
  and the verdict says so;
- slow to start: ``time_discovered_started_ns - time_created_ns`` on the rank's own clock (timing on)
  against the members' median: its GPU or stream starts each collective late while its peers wait in it.
A rank is named when it is late by at least ``MIN_MS`` and by several times the typical spread on most of
the compared collectives, and only a few ranks are (when many are, no single one stands out).
"""

from __future__ import annotations

import statistics
from array import array
from collections.abc import Iterable
from itertools import compress, repeat
from operator import sub, truediv

from ..trace.summarize import RankTrace
from ..trace.tail_rows import TailRows, stacked, tail_columns
from ..verdict import Straggler, StragglerKind
from .groups import GroupInfo

MIN_MS = 5.0
SHARE = 0.8
MIN_COMPARED = 8
SPREAD_FACTOR = 4.0


def stragglers(traces: dict[int, RankTrace], groups: dict[str, GroupInfo]) -> list[Straggler]:
    out: list[Straggler] = []
    named: set[tuple[int, StragglerKind]] = set()
    for g in groups.values():
        if len(g.dumped) < 3:
            continue
        # seq -> (ranks, values): two flat arrays, not a dict a rank (16 bytes a sample at 16k ranks)
        created: dict[int, tuple[array[int], array[int]]] = {}
        start_delay: dict[int, tuple[array[int], array[int]]] = {}
        alike: dict[bytes, tuple[array[int], list[int], list[TailRows]]] = {}
        for r in g.dumped:
            pg = traces[r].pgs.get(g.key)
            if pg is None:
                continue
            if isinstance(pg.tail, TailRows):  # a summary's: read by column, ranks with the same seqs at once
                seqs = pg.tail.seqs()
                same = alike.setdefault(seqs.tobytes(), (seqs, [], []))
                same[1].append(r)
                same[2].append(pg.tail)
                continue
            for seq, created_ns, started_ns in zip(*tail_columns(pg.tail), strict=True):
                if created_ns:
                    ranks, values = created.setdefault(seq, (array("q"), array("q")))
                    ranks.append(r)
                    values.append(created_ns)
                    if started_ns:
                        ranks, values = start_delay.setdefault(seq, (array("q"), array("q")))
                        ranks.append(r)
                        values.append(started_ns - created_ns)
        for seqs, members, tails in alike.values():
            every, n = array("q", members), len(seqs)
            created_block, started_block = stacked(tails, 5), stacked(tails, 6)  # row j: block[j::n]
            for j, seq in enumerate(seqs):
                _add(created, seq, every, created_block[j::n], start_delay, started_block[j::n])
        for kind, table in ((StragglerKind.late_enqueue, created), (StragglerKind.slow_start, start_delay)):
            for s in _late(g, table, kind):
                if (s.rank, kind) not in named:
                    named.add((s.rank, kind))
                    out.append(s)
    return sorted(out, key=lambda s: (s.rank, s.kind.value))


def _add(
    created: dict[int, tuple[array[int], array[int]]],
    seq: int,
    ranks: array[int],
    created_ns: array[int],
    start_delay: dict[int, tuple[array[int], array[int]]],
    started_ns: array[int],
) -> None:
    """The samples of ``ranks`` at ``seq``: their creation times where known, and their start delays where
    both times are."""
    if 0 in created_ns:
        ranks, created_ns, started_ns = _where(created_ns, ranks, created_ns, started_ns)
    if not created_ns:
        return
    _put(created, seq, ranks, created_ns)
    if 0 in started_ns:
        ranks, created_ns, started_ns = _where(started_ns, ranks, created_ns, started_ns)
    if not started_ns:
        return
    _put(start_delay, seq, ranks, map(sub, started_ns, created_ns))


def _where(known: array[int], *columns: array[int]) -> tuple[array[int], ...]:
    """``columns`` kept where ``known`` is not 0 (an unknown time)."""
    return tuple(array("q", compress(column, known)) for column in columns)


def _put(table: dict[int, tuple[array[int], array[int]]], seq: int, ranks: array[int], values: Iterable[int]) -> None:
    """``ranks``' samples ``values`` at ``seq`` appended to ``table``."""
    into_ranks, into_values = table.setdefault(seq, (array("q"), array("q")))
    into_ranks.extend(ranks)
    into_values.extend(values)


def _late(
    g: GroupInfo, table: dict[int, tuple[array[int], array[int]]], kind: StragglerKind
) -> list[Straggler]:
    # the collectives' samples by the ranks they came from (alike ranks hold the same seqs: one set, or a few),
    # end to end: rank k's lateness is then block[k::len(ranks)], sliced in C, not appended a sample at a time
    blocks: dict[bytes, tuple[array[int], array[float]]] = {}
    for ranks, values in table.values():
        if len(values) < max(3, len(g.dumped) // 2):
            continue
        mid = statistics.median(values)
        same = blocks.get(ranks.tobytes())
        if same is None:
            same = blocks[ranks.tobytes()] = (ranks, array("d"))
        same[1].extend(map(truediv, map(sub, values, repeat(mid)), repeat(1e6)))
    lateness: dict[int, array[float]] = {}
    for ranks, block in blocks.values():
        n = len(ranks)
        for k, r in enumerate(ranks):
            late = lateness.get(r)
            if late is None:
                lateness[r] = block[k::n]
            else:
                late.extend(block[k::n])
    typical = {r: statistics.median(v) for r, v in lateness.items() if len(v) >= MIN_COMPARED}
    if len(typical) < 3:
        return []
    spread = statistics.median(abs(x) for x in typical.values())
    threshold = max(MIN_MS, SPREAD_FACTOR * spread)
    found = []
    for r, med in typical.items():
        if med < threshold:
            continue
        share = sum(1 for x in lateness[r] if x >= threshold / 2) / len(lateness[r])
        if share >= SHARE:
            found.append((r, med, share, len(lateness[r])))
    if len(found) > max(1, len(typical) // 10):
        return []  # many ranks late alike: no single one stands out
    verb = "enqueues its collectives" if kind == StragglerKind.late_enqueue else "starts its collectives"
    return [
        Straggler(
            rank=r,
            kind=kind,
            process_group=g.key,
            median_ms=round(med, 2),
            share=round(share, 3),
            compared=n,
            summary=f"rank {r} {verb} {med:.0f} ms after its peers on {share:.0%} of the last {n} collectives of "
            f"{g.label}",
        )
        for r, med, share, n in found
    ]
