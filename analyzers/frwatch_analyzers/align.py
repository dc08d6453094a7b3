"""The reduce step, per process group: who is a member, and where members stop agreeing.

Ranks are aligned by ``(process group, collective_seq_id)``, never by record id or position, so ring
buffers that wrapped differently still line up. Ranks whose whole sequence of signatures is identical
form one cluster and are compared once: the cost is O(entries x clusters), not O(entries x ranks^2).
At each sequence number the reference is the behaviour of the most ranks (not whichever file came
first), so the culprit does not depend on file order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .summarize import STATE_CODES, EntrySig, PgTrace, Ranks, RankTrace, TailEntry
from .verdict import Category

#: Disagreements kept per group: the first ones (the branch) and the last ones (where it hung).
KEEP_FIRST = 24
KEEP_LAST = 8

ABSENT = None  # the view of ranks that never enqueued a sequence number


@dataclass
class View:
    """The ranks that recorded one and the same thing at a sequence number (sig None: never enqueued)."""

    sig: int | None
    ranks: list[int]


@dataclass
class Disagreement:
    pg: str
    seq: int
    views: list[View]  # the reference (most ranks) first
    category: Category
    odd: list[int]  # ranks not in the reference view
    majority_absent: bool = False  # the reference never enqueued it: the odd ranks went ahead
    call_site_only: bool = False  # same op, sizes and dtypes: only the call site differs
    tie: bool = False  # the reference view is no larger than another: the culprit side is a guess
    p2p: bool = False  # a send/recv pair (seq is the p2p_seq_id of the first view's rank)
    when: int = 0  # time_created_ns of the entry, when known


@dataclass
class GroupInfo:
    """One process group across the world."""

    name: str
    desc: str
    members: list[int]
    membership_source: str  # "pg_config" | "entries" | "default group: every rank"
    dumped: list[int]  # members with a dump
    no_dump: list[int]  # members without a dump
    frontier: int  # highest sequence number any member enqueued
    disagreements: list[Disagreement] = field(default_factory=list)
    total_disagreements: int = 0
    benign_call_sites: bool = False  # every disagreement is call-site-only and sequences stay aligned
    call_sites_compared: bool = True  # False when some members' dumps carry no frames


def infer_groups(traces: dict[int, RankTrace], world: list[int]) -> dict[str, GroupInfo]:
    """Every process group seen in any dump, with its members (pg_config when sane, else the entries)."""
    seen_in: dict[str, list[int]] = {}
    config: dict[str, Counter[Ranks]] = {}
    desc: dict[str, str] = {}
    for rank, t in traces.items():
        for name, pg in t.pgs.items():
            if len(pg.seqs):
                seen_in.setdefault(name, []).append(rank)
            if pg.config_ranks:
                config.setdefault(name, Counter())[pg.config_ranks] += (
                    1  # ranges hash in O(1); tuples are interned
                )
            if pg.desc and pg.desc != "undefined":
                desc.setdefault(name, pg.desc)
            else:
                desc.setdefault(name, pg.desc)
    world_set = set(world)
    groups: dict[str, GroupInfo] = {}
    for name in sorted(set(seen_in) | set(config), key=_pg_sort_key):
        entries_ranks = set(seen_in.get(name, []))
        d = desc.get(name, "")
        if name in config:
            ranks = set(config[name].most_common(1)[0][0]) | entries_ranks
            source = "pg_config"
        elif d == "default_pg" or (name == "0" and not d):
            ranks = world_set | entries_ranks
            source = "default group: every rank"
        else:
            ranks = entries_ranks
            source = "entries (pg_config absent or broken)"
        members = sorted(ranks)
        groups[name] = GroupInfo(
            name=name,
            desc=d,
            members=members,
            membership_source=source,
            dumped=[r for r in members if r in traces],
            no_dump=[r for r in members if r not in traces],
            frontier=max(
                (traces[r].pgs[name].last_enqueued for r in members if r in traces and name in traces[r].pgs),
                default=-1,
            ),
        )
    return groups


def _pg_sort_key(name: str) -> tuple[int, str]:
    return (int(name), "") if name.isdigit() else (1 << 30, name)


@dataclass
class _Cluster:
    ranks: list[int]
    pg: PgTrace | None
    lo: int
    hi: int
    by_seq: dict[int, int]


def _clusters(group: GroupInfo, traces: dict[int, RankTrace], plain: bool) -> list[_Cluster]:
    by_key: dict[tuple[bytes, int], _Cluster] = {}
    empty: list[int] = []
    for r in group.dumped:
        pg = traces[r].pgs.get(group.name)
        if pg is None or not len(pg.seqs):
            empty.append(r)
            continue
        key = (pg.plain_digest if plain else pg.seq_digest, pg.last_enqueued)
        c = by_key.get(key)
        if c is None:
            by_key[key] = _Cluster([r], pg, pg.seqs[0], pg.last_enqueued, {})
        else:
            c.ranks.append(r)
    clusters = list(by_key.values())
    for c in clusters:
        assert c.pg is not None
        c.by_seq = dict(zip(c.pg.seqs, c.pg.plain if plain else c.pg.sigs, strict=True))
    if empty:
        # a member that dumped but holds nothing of this group: it never enqueued anything here
        clusters.append(_Cluster(empty, None, 0, -1, {}))
    return clusters


def compare_group(group: GroupInfo, traces: dict[int, RankTrace], details: dict[int, EntrySig]) -> None:
    """Fill ``group.disagreements``: every sequence number where the dumped members differ."""
    # dumps without frames (JSON) next to dumps with frames: compare without call sites
    framed = {traces[r].has_frames for r in group.dumped}
    group.call_sites_compared = framed == {True}
    clusters = _clusters(group, traces, plain=not group.call_sites_compared)
    if len(clusters) <= 1:
        return
    seqs: set[int] = set()
    for c in clusters:
        seqs.update(c.by_seq)
    first: list[Disagreement] = []
    last: list[Disagreement] = []
    total = 0
    for s in sorted(seqs):
        views: dict[int | None, list[int]] = {}
        for c in clusters:
            sig = c.by_seq.get(s)
            if sig is not None:
                views.setdefault(sig, []).extend(c.ranks)
            elif s > c.hi:
                views.setdefault(ABSENT, []).extend(c.ranks)
            # else: wrapped out of this cluster's ring buffer, or a gap: no evidence either way
        if len(views) <= 1:
            continue
        total += 1
        d = _classify(group.name, s, views, details)
        if len(first) < KEEP_FIRST:
            first.append(d)
        else:
            last.append(d)
            if len(last) > KEEP_LAST:
                last.pop(0)
    group.disagreements = first + last
    group.total_disagreements = total
    group.benign_call_sites = (
        bool(first) and all(d.call_site_only for d in group.disagreements) and not _stuck(group, traces)
    )


def _stuck(group: GroupInfo, traces: dict[int, RankTrace]) -> bool:
    """Is any member inside a collective of this group, or did members stop at different places?"""
    ends = set()
    for r in group.dumped:
        pg = traces[r].pgs.get(group.name)
        if pg is None:
            continue
        ends.add(pg.last_enqueued)
        if traces[r].has_states and in_flight(pg, pg.last_enqueued, True):
            return True
    return len(ends) > 1 or bool(group.no_dump)


def _classify(
    pg: str, seq: int, views: dict[int | None, list[int]], details: dict[int, EntrySig]
) -> Disagreement:
    ordered = sorted(
        (View(sig, sorted(ranks)) for sig, ranks in views.items()),
        key=lambda v: (-len(v.ranks), v.sig is ABSENT, v.ranks[0]),
    )
    ref = ordered[0]
    tie = len(ordered) > 1 and len(ordered[1].ranks) == len(ref.ranks)
    odd = sorted(r for v in ordered[1:] for r in v.ranks)
    if ref.sig is ABSENT:
        return Disagreement(pg, seq, ordered, Category.desync, odd, majority_absent=True, tie=tie)
    ref_sig = details.get(ref.sig)
    worst: Category | None = None
    call_site_only = True
    for v in ordered[1:]:
        if v.sig is ABSENT:
            cat = Category.missing_rank
            call_site_only = False
        else:
            cat, only_site = compare_sigs(ref_sig, details.get(v.sig))
            call_site_only = call_site_only and only_site
        if worst is None or _SEVERITY[cat] > _SEVERITY[worst]:
            worst = cat
    assert worst is not None
    return Disagreement(pg, seq, ordered, worst, odd, call_site_only=call_site_only, tie=tie)


_SEVERITY = {
    Category.missing_rank: 1,
    Category.desync: 4,
    Category.size_mismatch: 2,
    Category.dtype_mismatch: 3,
}


def compare_sigs(a: EntrySig | None, b: EntrySig | None) -> tuple[Category, bool]:
    """How two recorded entries differ: (category, only the call site differs)."""
    if a is None or b is None:
        return Category.desync, False
    if a.op != b.op or a.parts != b.parts:
        return Category.desync, False
    if a.input_dtypes != b.input_dtypes or a.output_dtypes != b.output_dtypes:
        return Category.dtype_mismatch, False
    if a.input_sizes != b.input_sizes or a.output_sizes != b.output_sizes:
        return Category.size_mismatch, False
    return Category.desync, True


def numel(sizes: tuple[tuple[int, ...], ...]) -> int:
    total = 0
    for shape in sizes:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def tail_entry(pg: PgTrace, seq: int) -> TailEntry | None:
    for t in reversed(pg.tail):
        if t.seq == seq:
            return t
        if t.seq < seq:
            break
    return None


def in_flight(pg: PgTrace, seq: int, has_states: bool) -> bool | None:
    """Was the rank still inside ``seq`` when it dumped? None: the dump cannot say."""
    t = tail_entry(pg, seq)
    if has_states and t is not None and t.state >= 0:
        return t.state != STATE_CODES["completed"]
    if pg.status_known and pg.last_completed >= 0:
        if pg.last_completed >= seq:
            return False
        if t is not None and t.retired is False:
            return True
    if t is not None and t.retired is not None:
        return not t.retired
    return None
