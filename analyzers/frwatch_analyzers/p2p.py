"""Point-to-point ops: each send of rank a to rank b is matched with b's receive from a, in order.

Flight Recorder numbers p2p ops per rank (``p2p_seq_id``), so the numbers of two peers do not line up;
what lines up is the k-th send a->b with the k-th recv at b from a. Profiling names carry group-local
ranks (``nccl:send 1->2``, ``nccl:recv 2<-1``); they are mapped to global ranks through the group's
members. (gloo's Flight Recorder records no p2p ops at all: FACTS.md.)
"""

from __future__ import annotations

from .align import Disagreement, GroupInfo, View
from .summarize import STATE_CODES, EntrySig, P2PEntry, RankTrace
from .verdict import Category


def _to_global(members: list[int], local: int) -> int:
    return members[local] if 0 <= local < len(members) else local


def compare_p2p(
    traces: dict[int, RankTrace], groups: dict[str, GroupInfo], details: dict[int, EntrySig]
) -> list[Disagreement]:
    """Every unmatched or mismatched send/recv pair, as disagreements of their group (``p2p=True``)."""
    sends: dict[tuple[str, int, int], list[P2PEntry]] = {}
    recvs: dict[tuple[str, int, int], list[P2PEntry]] = {}
    for t in traces.values():
        for e in t.p2p:
            g = groups.get(e.pg)
            members = g.members if g is not None and g.members else []
            src, dst = _to_global(members, e.src), _to_global(members, e.dst)
            book = sends if e.kind == "send" else recvs
            book.setdefault((e.pg, src, dst), []).append(e)
    out: list[Disagreement] = []
    for key in sorted(set(sends) | set(recvs)):
        pg, src, dst = key
        s_list = sorted(sends.get(key, []), key=lambda e: e.p2p_seq)
        r_list = sorted(recvs.get(key, []), key=lambda e: e.p2p_seq)
        for k in range(max(len(s_list), len(r_list))):
            s = s_list[k] if k < len(s_list) else None
            r = r_list[k] if k < len(r_list) else None
            d = _pair(pg, src, dst, s, r, traces, details)
            if d is not None:
                out.append(d)
                break  # later pairs of this direction follow from the first broken one
    return out


def _pair(
    pg: str,
    src: int,
    dst: int,
    s: P2PEntry | None,
    r: P2PEntry | None,
    traces: dict[int, RankTrace],
    details: dict[int, EntrySig],
) -> Disagreement | None:
    if s is not None and r is not None:
        cat, _ = _compare_payload(details.get(s.sig), details.get(r.sig))
        if cat is None:
            return None
        return Disagreement(
            pg,
            s.p2p_seq,
            [View(s.sig, [src]), View(r.sig, [dst])],
            cat,
            [src, dst],
            p2p=True,
            when=s.created_ns,
        )
    present = s if s is not None else r
    assert present is not None
    if present.state == STATE_CODES["completed"]:
        return None  # the peer's half wrapped out of its ring buffer: no evidence
    waiter, culprit = (src, dst) if s is not None else (dst, src)
    if culprit in traces and not _holds_pair(traces[culprit], pg):
        return None  # the peer recorded no p2p in this group at all: its window says nothing
    return Disagreement(
        pg,
        present.p2p_seq,
        [View(present.sig, [waiter]), View(None, [culprit])],
        Category.missing_rank,
        [culprit],
        p2p=True,
        when=present.created_ns,
    )


def _holds_pair(t: RankTrace, pg: str) -> bool:
    return any(e.pg == pg for e in t.p2p) or pg in t.pgs


def _compare_payload(a: EntrySig | None, b: EntrySig | None) -> tuple[Category | None, bool]:
    if a is None or b is None:
        return None, False
    if a.input_dtypes != b.input_dtypes:
        return Category.dtype_mismatch, False
    if a.input_sizes != b.input_sizes:
        return Category.size_mismatch, False
    return None, False
