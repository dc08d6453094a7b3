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

from .align import GroupInfo
from .summarize import RankTrace
from .tail_rows import tail_columns
from .verdict import Straggler, StragglerKind

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
        for r in g.dumped:
            pg = traces[r].pgs.get(g.key)
            if pg is None:
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
        for kind, table in ((StragglerKind.late_enqueue, created), (StragglerKind.slow_start, start_delay)):
            for s in _late(g, table, kind):
                if (s.rank, kind) not in named:
                    named.add((s.rank, kind))
                    out.append(s)
    return sorted(out, key=lambda s: (s.rank, s.kind.value))


def _late(
    g: GroupInfo, table: dict[int, tuple[array[int], array[int]]], kind: StragglerKind
) -> list[Straggler]:
    lateness: dict[int, array[float]] = {}
    for ranks, values in table.values():
        if len(values) < max(3, len(g.dumped) // 2):
            continue
        mid = statistics.median(values)
        for r, t in zip(ranks, values, strict=True):
            late = lateness.get(r)
            if late is None:
                late = lateness[r] = array("d")
            late.append((t - mid) / 1e6)
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
