"""What a group's own past says about a disagreement: did the odd ranks skip a call, issue an extra one,
or issue something the group never issues? Each answer comes from one rank's sequence of signatures (no
clock), and is given only when the record shows it; otherwise the answer is "cannot tell".
"""

from __future__ import annotations

import bisect

from ..trace.summarize import PgTrace, RankTrace
from .groups import ABSENT, Disagreement

#: How many sequence numbers after a disagreement are compared to tell a shift from a one-off difference.
WINDOW = 4


def index(pg: PgTrace, seq: int) -> int | None:
    """Where ``seq`` sits in a group's arrays on a rank (None: the rank does not hold it)."""
    i = bisect.bisect_left(pg.seqs, seq)
    return i if i < len(pg.seqs) and pg.seqs[i] == seq else None


def sig_at(traces: dict[int, RankTrace], rank: int, key: str, seq: int) -> int | None:
    t = traces.get(rank)
    pg = t.pgs.get(key) if t is not None else None
    i = index(pg, seq) if pg is not None else None
    return int(pg.sigs[i]) if pg is not None and i is not None else None


def shift(traces: dict[int, RankTrace], d: Disagreement) -> str:
    """``"skipped"`` when the odd ranks' calls are the others' calls one later, ``"extra"`` when they are
    one earlier, else ``""``. After the disagreement, a window of calls decides; at a hang (nothing
    after it) the group's history does (``"... at the hang"``): the odd call is what usually follows the
    others' call (skipped), or it repeats the odd rank's previous call where the group never repeats it
    (extra); when both readings fit, neither is claimed."""
    present = [v for v in d.views if v.sig is not ABSENT]
    if len(present) != 2 or any(v.sig is ABSENT for v in d.views):
        return ""
    ref, odd = present[0], present[1]
    r_ref, r_odd, key, s = ref.ranks[0], odd.ranks[0], d.pg, d.seq
    aligned = skipped = extra = 0
    for k in range(1, WINDOW + 1):
        a, b = sig_at(traces, r_ref, key, s + k), sig_at(traces, r_odd, key, s + k)
        if a is not None and b is not None and a == b:
            aligned += 1
        later = sig_at(traces, r_ref, key, s + k)
        mine = sig_at(traces, r_odd, key, s + k - 1)
        if later is not None and mine is not None and mine == later:
            skipped += 1
        earlier = sig_at(traces, r_ref, key, s + k - 1)
        nxt = sig_at(traces, r_odd, key, s + k)
        if earlier is not None and nxt is not None and nxt == earlier:
            extra += 1
    if skipped > aligned and skipped > extra:
        return "skipped"
    if extra > aligned and extra > skipped:
        return "extra"
    if aligned or sig_at(traces, r_ref, key, s + 1) is not None:
        return ""
    # a hang at the disagreement: only history can say, and only when one reading fits
    assert ref.sig is not None and odd.sig is not None
    skip_fits = follows(traces, r_ref, key, s, ref.sig, odd.sig)
    prev = sig_at(traces, r_odd, key, s - 1)
    extra_fits = prev == odd.sig and not follows(traces, r_ref, key, s, odd.sig, odd.sig)
    if skip_fits and not extra_fits:
        return "skipped at the hang"
    if extra_fits and not skip_fits:
        return "extra at the hang"
    return ""


def follows(traces: dict[int, RankTrace], rank: int, key: str, before: int, first: int, then: int) -> bool:
    """Did ``rank`` issue ``then`` right after ``first`` in this group, before ``before``?"""
    pg = traces[rank].pgs.get(key)
    if pg is None:
        return False
    sigs, seqs = pg.sigs, pg.seqs
    end = bisect.bisect_left(seqs, before)
    for i in range(min(end, len(seqs)) - 1):
        if sigs[i] == first and sigs[i + 1] == then and seqs[i + 1] == seqs[i] + 1:
            return True
    return False


def novel(traces: dict[int, RankTrace], rank: int, key: str, seq: int) -> bool:
    """Is ``rank``'s call at ``seq`` something this group never issued before, after the call before it?"""
    pg = traces[rank].pgs.get(key)
    i = index(pg, seq) if pg is not None else None
    if pg is None or i is None or i == 0:
        return False
    now, prev = pg.sigs[i], pg.sigs[i - 1]
    seen_op = any(pg.sigs[k] == now for k in range(i))
    seen_pair = any(pg.sigs[k] == prev and pg.sigs[k + 1] == now for k in range(i - 1))
    return not seen_op and not seen_pair and i >= 2


def new_transition(traces: dict[int, RankTrace], rank: int, key: str, seq: int) -> bool:
    """Did ``rank`` go from its call before ``seq`` to its call at ``seq`` for the first time?"""
    pg = traces[rank].pgs.get(key)
    i = index(pg, seq) if pg is not None else None
    if pg is None or i is None or i < 2:
        return False
    prev, now = pg.sigs[i - 1], pg.sigs[i]
    return not any(pg.sigs[k] == prev and pg.sigs[k + 1] == now for k in range(i - 1))
