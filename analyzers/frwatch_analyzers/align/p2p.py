"""Point-to-point ops: each send of rank a to rank b is matched with b's receive from a, in order.

Flight Recorder numbers p2p ops per rank (``p2p_seq_id``), so the numbers of two peers do not line up;
what lines up is the k-th send a->b with the k-th recv at b from a (as torch's fr_trace matches them:
``torch/distributed/flight_recorder/components/types.py``, ``Op.match``). Profiling names carry group-local
ranks (``nccl:send 1->2``, ``nccl:recv 2<-1``); they are mapped to global ranks through the group's
members. (gloo's Flight Recorder records no p2p ops at all: FACTS.md.)

A transfer gets the same state reasoning as a collective (:mod:`.rootcause`): along each direction the
earliest pair that is broken (a half never posted, payloads that disagree) or still open when the ranks
dumped is the finding. An open pair reads by its two states: the recv ``scheduled`` while the send
``started`` is a GPU hang on the receiver (and the reverse on the sender); both ``started``, none
``completed``, a network hang; the send completed and the recv not, the receiver's (a GPU hang when it never
started there with start times recorded, else a stall). A pair whose payloads disagree is the side that departs from every earlier
transfer of the same direction, when exactly one side does. A rank blocked in an open p2p op cannot post
its next one: :func:`open_transfer` says where it waits, so the half it never posted is a consequence.
"""

from __future__ import annotations

from ..trace.summarize import STATE_CODES, EntrySig, P2PEntry, RankTrace
from ..verdict import Category
from .groups import Disagreement, GroupInfo, View

_COMPLETED, _STARTED, _SCHEDULED = STATE_CODES["completed"], STATE_CODES["started"], STATE_CODES["scheduled"]

Transfer = tuple[str, int, int]  # (group key, sender, receiver), global ranks


def _to_global(members: list[int], local: int) -> int:
    return members[local] if 0 <= local < len(members) else local


def transfer_of(e: P2PEntry, groups: dict[str, GroupInfo]) -> Transfer:
    g = groups.get(e.pg)
    members = g.members if g is not None and g.members else []
    return e.pg, _to_global(members, e.src), _to_global(members, e.dst)


def transfer_key(t: Transfer) -> str:
    """The key a transfer's finding goes by among the candidates (groups go by their own key)."""
    return f"p2p:{t[0]}:{t[1]}->{t[2]}"


def open_transfer(trace: RankTrace, groups: dict[str, GroupInfo]) -> tuple[Transfer, P2PEntry] | None:
    """The rank's earliest p2p op (by record id) its dump says it had not completed: where it waits."""
    pending = [e for e in trace.p2p if e.state in (_SCHEDULED, _STARTED)]
    if not pending:
        return None
    e = min(pending, key=lambda x: x.record_id)
    return transfer_of(e, groups), e


def entries_of(
    traces: dict[int, RankTrace], groups: dict[str, GroupInfo], d: Disagreement
) -> dict[int, P2PEntry]:
    """A p2p finding's entries on its ranks: the k-th send src->dst and the k-th recv at dst from src, found
    from the entry its first view names (the send, or the lone half of a pair whose other half is missing)."""
    if d.transfer is None or not d.views or not d.views[0].ranks:
        return {}
    key: Transfer = (d.pg, *d.transfer)
    src, dst = d.transfer

    def of(rank: int, kind: str) -> list[P2PEntry]:
        t = traces.get(rank)
        mine = [e for e in t.p2p if e.kind == kind and transfer_of(e, groups) == key] if t else []
        return sorted(mine, key=lambda e: e.p2p_seq)

    sends, recvs = of(src, "send"), of(dst, "recv")
    first, other, peer = (sends, recvs, dst) if d.views[0].ranks[0] == src else (recvs, sends, src)
    for k, e in enumerate(first):
        if e.p2p_seq == d.seq:
            found = {d.views[0].ranks[0]: e}
            if k < len(other):
                found[peer] = other[k]
            return found
    return {}


def compare_p2p(
    traces: dict[int, RankTrace], groups: dict[str, GroupInfo], details: dict[int, EntrySig]
) -> list[Disagreement]:
    """Per direction, the first send/recv pair that is broken or open, as a disagreement of its group
    (``p2p=True``)."""
    sends: dict[Transfer, list[P2PEntry]] = {}
    recvs: dict[Transfer, list[P2PEntry]] = {}
    for t in traces.values():
        for e in t.p2p:
            book = sends if e.kind == "send" else recvs
            book.setdefault(transfer_of(e, groups), []).append(e)
    timing = any(t.has_timing for t in traces.values())  # TORCH_NCCL_ENABLE_TIMING: 'started' means something
    out: list[Disagreement] = []
    for key in sorted(set(sends) | set(recvs)):
        s_list = sorted(sends.get(key, []), key=lambda e: e.p2p_seq)
        r_list = sorted(recvs.get(key, []), key=lambda e: e.p2p_seq)
        for k in range(max(len(s_list), len(r_list))):
            s = s_list[k] if k < len(s_list) else None
            r = r_list[k] if k < len(r_list) else None
            d = _pair(key, s, r, s_list[:k], r_list[:k], traces, details, timing)
            if d is not None:
                out.append(d)
                break  # later pairs of this direction follow from the first broken one
    return out


def _pair(
    key: Transfer,
    s: P2PEntry | None,
    r: P2PEntry | None,
    s_before: list[P2PEntry],
    r_before: list[P2PEntry],
    traces: dict[int, RankTrace],
    details: dict[int, EntrySig],
    timing: bool,
) -> Disagreement | None:
    pg, src, dst = key
    if s is not None and r is not None:
        views = [View(s.sig, [src]), View(r.sig, [dst])]
        cat = _compare_payload(details.get(s.sig), details.get(r.sig))
        if cat is not None:
            odd = _departs(s, r, s_before, r_before, details, src, dst)
            return Disagreement(
                pg, s.p2p_seq, views, cat, odd, p2p=True, when=s.created_ns, transfer=(src, dst)
            )
        return _open_pair(key, s, r, views, timing)
    present = s if s is not None else r
    assert present is not None
    if present.state == _COMPLETED:
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
        transfer=(src, dst),
    )


def _open_pair(
    key: Transfer, s: P2PEntry, r: P2PEntry, views: list[View], timing: bool
) -> Disagreement | None:
    """Both halves posted, not both completed: read by their states, as a collective's members are."""
    pg, src, dst = key
    if r.state == _COMPLETED or s.state < 0 or r.state < 0:
        return None  # the data arrived (the sender's completion may lag), or a dump without states
    if s.state == _COMPLETED:
        # the sender finished while the receiver did not: never started there with start times recorded is a
        # GPU hang on the receiver (its stream never reached the recv); otherwise it took part and stalled
        cat = Category.gpu_hang if timing and r.state == _SCHEDULED else Category.transport_stall
        return Disagreement(
            pg, s.p2p_seq, views, cat, [dst], p2p=True, when=s.created_ns, transfer=(src, dst)
        )
    if s.state == _STARTED and r.state == _STARTED:
        cat, odd = Category.network_hang, []  # both ends in it: no rank departs, the link is the suspect
    elif s.state == _STARTED and r.state == _SCHEDULED:
        cat, odd = Category.gpu_hang, [dst]  # the sender started; the receiver's stream never reached it
    elif r.state == _STARTED and s.state == _SCHEDULED:
        cat, odd = Category.gpu_hang, [src]
    else:
        cat, odd = Category.inconclusive, []  # both scheduled: without start times nothing says who
    return Disagreement(pg, s.p2p_seq, views, cat, odd, p2p=True, when=s.created_ns, transfer=(src, dst))


def _departs(
    s: P2PEntry,
    r: P2PEntry,
    s_before: list[P2PEntry],
    r_before: list[P2PEntry],
    details: dict[int, EntrySig],
    src: int,
    dst: int,
) -> list[int]:
    """The side of a disagreeing pair that departs from every earlier transfer of the direction (its payload
    is not one its own side ever had, while the other side's is); both when neither or both do."""

    def payload(e: P2PEntry) -> tuple[object, ...] | None:
        sig = details.get(e.sig)
        return (sig.input_sizes, sig.input_dtypes) if sig is not None else None

    seen_s = {payload(e) for e in s_before}
    seen_r = {payload(e) for e in r_before}
    new_s = bool(s_before) and payload(s) not in seen_s
    new_r = bool(r_before) and payload(r) not in seen_r
    if new_s != new_r:
        return [src] if new_s else [dst]
    return sorted({src, dst})


def _holds_pair(t: RankTrace, pg: str) -> bool:
    return any(e.pg == pg for e in t.p2p) or pg in t.pgs


def _compare_payload(a: EntrySig | None, b: EntrySig | None) -> Category | None:
    if a is None or b is None:
        return None
    if a.input_dtypes != b.input_dtypes:
        return Category.dtype_mismatch
    if a.input_sizes != b.input_sizes:
        return Category.size_mismatch
    return None
