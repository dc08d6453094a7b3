"""The reduce step, per process group: who is a member, and where members stop agreeing.

Ranks are aligned by ``(process group, collective_seq_id)``, never by record id or position, so ring
buffers that wrapped differently still line up. Ranks whose whole sequence of signatures is identical
form one cluster and are compared once: the cost is O(entries x clusters), not O(entries x ranks^2).
Signatures hold only what each collective's rule (:mod:`.rules`) says must agree, so uneven all_to_all
splits or a gather's root do not split clusters; the sizes that may differ are checked across the group
by the rule's balance (sums, roots, per-pair splits) at every sequence number every member holds.
At each sequence number the reference is the behaviour of the most ranks (not whichever file came
first), so the culprit does not depend on file order; who is wrong in a tie is decided later, from states
and history (:mod:`.rootcause`).

About 490 lines by choice: group membership and the comparison at each sequence number share the cluster,
signature and in-flight helpers; the reduce step reads top to bottom in one file. A broken balance reads
the history of the same call where the rule needs it (the roots of earlier gathers, whether earlier
all_to_alls split evenly), only at the sequence numbers where the balance is broken.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter

from ..base.textfmt import ranks_text
from ..trace.rules import Balance, Imbalance, check_balance, rule_for
from ..trace.summarize import STATE_CODES, STATE_NAMES, EntrySig, PgTrace, Ranks, RankTrace, TailEntry
from ..trace.tail_rows import find, finished
from ..verdict import Category
from .gloo_subgroups import subgroup_candidates

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
    pg: str  # the group's key
    seq: int
    views: list[View]  # the reference (most ranks) first
    category: Category
    odd: list[int]  # ranks not in the reference view (a balance finding: the ranks its figures name)
    majority_absent: bool = False  # the reference never enqueued it: the odd ranks went ahead
    call_site_only: bool = False  # same op, sizes and dtypes: only the call site differs
    tie: bool = False  # the reference view is no larger than another
    p2p: bool = False  # a send/recv pair (seq is the p2p_seq_id of the first view's rank)
    when: int = 0  # time_created_ns of the entry, when known
    balance: str = ""  # a broken balance rule (all_to_all sums, gather root ...): the figures
    transfer: tuple[int, int] | None = None  # p2p: (sender, receiver), global ranks


@dataclass
class GroupInfo:
    """One process group across the world."""

    key: str  # unique: the name, or name/r<lowest member> for split groups, name@backend for two recorders
    name: str  # process_group[0] as the dumps name it
    desc: str
    members: list[int]
    membership_source: str
    dumped: list[int]  # members with a dump
    no_dump: list[int]  # members without a dump
    frontier: int  # highest sequence number any member enqueued
    disagreements: list[Disagreement] = field(default_factory=list)
    total_disagreements: int = 0
    complete: bool = (
        True  # every member is known (False: members from entries while world ranks left no dump)
    )
    benign_call_sites: bool = False  # every disagreement is call-site-only and sequences stay aligned
    call_sites_compared: bool = True  # False when some members' dumps carry no frames

    @property
    def label(self) -> str:
        return f"pg {self.name}" + (f" ({self.desc})" if self.desc and self.desc != "undefined" else "")


def infer_groups(traces: dict[int, RankTrace], world: list[int]) -> dict[str, GroupInfo]:
    """Every process group seen in any dump, with its members from every sane source: pg_config (the
    member list most ranks give), the ranks whose entries name the group, and the whole world for the
    default group."""
    seen_in: dict[str, list[int]] = {}
    config: dict[str, Counter[Ranks]] = {}
    desc: dict[str, str] = {}
    names: dict[str, str] = {}
    for rank, t in traces.items():
        for key, pg in t.pgs.items():
            names.setdefault(key, pg.name)
            if len(pg.seqs):
                seen_in.setdefault(key, []).append(rank)
            if pg.config_ranks:
                config.setdefault(key, Counter())[pg.config_ranks] += 1  # ranges hash in O(1)
            if pg.desc and pg.desc != "undefined":
                desc[key] = pg.desc
            else:
                desc.setdefault(key, pg.desc)
    world_set = set(world)
    unseen = bool(world_set - set(traces))
    hidden = _hidden_members(traces, seen_in, config, desc, names, world)
    groups: dict[str, GroupInfo] = {}
    for key in sorted(set(seen_in) | set(config), key=_pg_sort_key):
        entries_ranks = set(seen_in.get(key, []))
        d, name = desc.get(key, ""), names[key]
        if key in config:
            ranks = set(config[key].most_common(1)[0][0]) | entries_ranks
            source = "pg_config"
        elif d == "default_pg" or (name == "0" and not d):
            ranks = world_set | entries_ranks
            source = "default group: every rank of the world"
        else:
            ranks = entries_ranks | hidden.get(key, set())
            source = "entries (pg_config absent or broken)" + (
                "; with the members that recorded no call of it (gloo's pg_config lists none)"
                if key in hidden
                else ""
            )
        members = sorted(ranks)
        groups[key] = GroupInfo(
            key=key,
            name=name,
            desc=d,
            members=members,
            membership_source=source,
            complete=not (unseen and source.startswith("entries")),
            dumped=[r for r in members if r in traces],
            no_dump=[r for r in members if r not in traces],
            frontier=max(
                (traces[r].pgs[key].last_enqueued for r in members if r in traces and key in traces[r].pgs),
                default=-1,
            ),
        )
    return groups


def _hidden_members(
    traces: dict[int, RankTrace],
    seen_in: dict[str, list[int]],
    config: dict[str, Counter[Ranks]],
    desc: dict[str, str],
    names: dict[str, str],
    world: list[int],
) -> dict[str, set[int]]:
    """gloo subgroup members that recorded no call of their subgroup, where one subgroup waits for them.

    gloo's pg_config names no group and lists no subgroup's members (:mod:`.gloo_subgroups`), so a member
    that never enqueued its group's first call (or whose calls wrapped out of its ring) is otherwise
    invisible, and the members that wait look alone. The ranks that built a subgroup but recorded no call
    in any are given to the one subgroup whose members seen all wait in its newest call; where no subgroup
    or several wait so, the dumps do not say which: none is added."""
    subgroups = [
        k
        for k in seen_in
        if k not in config and desc.get(k) != "default_pg" and not (names.get(k) == "0" and not desc.get(k))
    ]
    waiting = []
    for key in subgroups:
        seen = [traces[r].pgs[key] for r in seen_in[key]]
        # only where every member seen waits in the same newest call (nobody absent, nothing to explain it): a
        # subgroup created but never called leaves the same pg_config, and must not be taken for this one
        if (
            seen[0].backend == "gloo"
            and len({pg.last_enqueued for pg in seen}) == 1
            and all(in_flight(pg, pg.last_enqueued, False) for pg in seen)
        ):
            waiting.append(key)
    if len(waiting) != 1:
        return {}
    key = waiting[0]
    inside = subgroup_candidates(traces, subgroups, world) - set(seen_in[key])
    return {key: inside} if inside else {}


def _pg_sort_key(key: str) -> tuple[int, str]:
    head = key.split("/", 1)[0].split("@", 1)[0]
    return (int(head), key) if head.isdigit() else (1 << 30, key)


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
        pg = traces[r].pgs.get(group.key)
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
    """Fill ``group.disagreements``: every sequence number where the dumped members differ, or where a
    rule's balance across the members is broken."""
    # dumps without frames (JSON) next to dumps with frames: compare without call sites
    framed = {traces[r].has_frames for r in group.dumped}
    group.call_sites_compared = framed == {True}
    clusters = _clusters(group, traces, plain=not group.call_sites_compared)
    found: dict[int, Disagreement] = {}
    if len(clusters) > 1:
        seqs: set[int] = set()
        for c in clusters:
            seqs.update(c.by_seq)
        for s in sorted(seqs):
            views: dict[int | None, list[int]] = {}
            for c in clusters:
                sig = c.by_seq.get(s)
                if sig is not None:
                    views.setdefault(sig, []).extend(c.ranks)
                elif s > c.hi:
                    views.setdefault(ABSENT, []).extend(c.ranks)
                # else: wrapped out of this cluster's ring buffer, or a gap: no evidence either way
            if len(views) > 1:
                found[s] = _classify(group.key, s, views, details)
    for d in _balance_findings(group, traces, details):
        found.setdefault(d.seq, d)
    ordered = [found[s] for s in sorted(found)]
    group.disagreements = ordered[:KEEP_FIRST] + ordered[max(KEEP_FIRST, len(ordered) - KEEP_LAST) :]
    group.total_disagreements = len(ordered)
    group.benign_call_sites = (
        bool(ordered) and all(d.call_site_only for d in group.disagreements) and not _stuck(group, traces)
    )


def _balance_findings(
    group: GroupInfo, traces: dict[int, RankTrace], details: dict[int, EntrySig]
) -> list[Disagreement]:
    """The per-collective balance rules, at every sequence number every member recorded."""
    if group.no_dump or len(group.members) < 2 or not group.complete:
        return []
    # members whose count columns are the same objects (a summary reader's shared columns, an ArrayPool's)
    # are summed once, times their number: 16k ranks alike cost one pass, not 16k
    alike: dict[tuple[int, int, int], tuple[PgTrace, list[int]]] = {}
    for r in group.dumped:
        pg = traces[r].pgs.get(group.key)
        if pg is None:
            return []
        key = (id(pg.var_seqs), id(pg.var_in), id(pg.var_out))
        same = alike.get(key)
        if same is None:
            alike[key] = (pg, [r])
        else:
            same[1].append(r)
    sums: dict[int, list[int]] = {}  # seq -> [members holding it, sum in, sum out]
    nonzero: dict[int, list[tuple[int, int, int]]] = {}  # seq -> (index in alike, in, out) where nonzero
    first_in: dict[int, tuple[int, int]] = {}
    for c, (pg, ranks) in enumerate(alike.values()):  # by first rank: first_in is the lowest rank's
        k = len(ranks)
        for s, i, o in zip(pg.var_seqs, pg.var_in, pg.var_out, strict=True):
            acc = sums.get(s)
            if acc is None:
                acc = sums[s] = [0, 0, 0]
                first_in[s] = (i, o)
            acc[0] += k
            acc[1] += k * i
            acc[2] += k * o
            if i or o:
                nonzero.setdefault(s, []).append((c, i, o))
    who = [ranks for _, ranks in alike.values()]
    balances: dict[str, Balance] = {}  # op -> its rule's balance (a few ops, hundreds of seqs)
    n = len(group.members)
    out: list[Disagreement] = []
    for s in sorted(sums):
        held, total_in, total_out = sums[s]
        if held != n:
            continue  # a member's window does not hold it (or a coalesced region repeats the seq)
        sig = _sig_of(traces[group.dumped[0]].pgs[group.key], s)
        esig = details.get(sig) if sig is not None else None
        if esig is None:
            continue
        balance = balances.get(esig.op)
        if balance is None:
            balance = balances[esig.op] = rule_for(esig.op).balance
        if balance is Balance.NONE:
            continue
        # who recorded what: only the root-finding checks read it
        ins, outs = (
            _nonzero(nonzero.get(s, []), who) if balance in (Balance.GATHER, Balance.SCATTER) else ([], [])
        )
        found = _check(balance, group, traces, s, total_in, total_out, ins, outs, first_in[s])
        if found is not None:
            cat = Category.desync if found.root else Category.size_mismatch  # another root: another call
            out.append(
                Disagreement(
                    group.key, s, [View(sig, list(group.dumped))], cat, found.ranks, balance=found.text
                )
            )
    return out


def _nonzero(
    found: list[tuple[int, int, int]], who: list[list[int]]
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(rank, input elements) and (rank, output elements) where nonzero, by rank (a rank's own in the
    order its columns hold them)."""
    ins = sorted(((r, i) for c, i, _ in found if i for r in who[c]), key=itemgetter(0))
    outs = sorted(((r, o) for c, _, o in found if o for r in who[c]), key=itemgetter(0))
    return ins, outs


def _check(
    balance: Balance,
    group: GroupInfo,
    traces: dict[int, RankTrace],
    seq: int,
    total_in: int,
    total_out: int,
    ins: list[tuple[int, int]],
    outs: list[tuple[int, int]],
    one: tuple[int, int],
) -> Imbalance | None:
    members = group.members
    if balance is Balance.ALL_TO_ALL:
        splits = {}
        for r in members:  # per-peer lists (all_to_all with lists, where the rank's summary kept them)
            t = tail_entry(traces[r].pgs[group.key], seq)
            if t is None or t.splits is None:
                break
            splits[r] = t.splits
        if total_in == total_out and len(splits) != len(members):
            return None  # the sums balance and no pair can be checked
        # sums that balance can still hide a split table sent to the wrong peers: the pairs say so
        pgs = {r: traces[r].pgs[group.key] for r in members}
        counts = {r: _counts_at(pg, seq) for r, pg in pgs.items()}
        found = check_balance(
            balance,
            members,
            counts,
            splits if len(splits) == len(members) else None,
            even_before=_even_before(pgs, seq),
        )
        if found is not None and not found.ranks:
            # the states place the fault next to the members still in it, and no closer: a rank left waiting
            # is short of what a peer sent (its own stale split, or the peer's), so it is not named
            open_ = [r for r, pg in pgs.items() if in_flight(pg, seq, traces[r].has_states)]
            if 0 < len(open_) < len(members):
                found = Imbalance(
                    [],
                    f"{found.text}; {ranks_text(open_)} did not complete it while the others did: the "
                    "elements missing or left over are between them and a peer, and either side's split fits",
                )
        return found
    if balance in (Balance.GATHER, Balance.SCATTER):
        if balance is Balance.GATHER:
            counts = {r: (one[0], 0) for r in members} | {r: (one[0], o) for r, o in outs}
        else:
            counts = {r: (0, one[1]) for r in members} | {r: (i, one[1]) for r, i in ins}
        roots = outs if balance is Balance.GATHER else ins
        if len(roots) == 1:  # one root: only its size can be wrong, no history is needed
            return check_balance(balance, members, counts)
        pgs = {r: traces[r].pgs[group.key] for r in members}
        return check_balance(balance, members, counts, roots_before=_roots_before(pgs, seq, balance))
    if balance in (Balance.GATHER_V, Balance.SCATTER_V):
        counts = {members[0]: (total_in, one[1]) if balance is Balance.GATHER_V else (one[0], total_out)}
        return check_balance(balance, members[:1], counts)
    return None


#: Earlier calls of the same kind read back for a rooted or all_to_all call's history (per member), and the
#: most entries of other varying calls stepped over to find them (a rare call among frequent ones).
HISTORY = 32
HISTORY_SCAN = 1024


def _counts_at(pg: PgTrace, seq: int) -> tuple[int, int]:
    """The rank's input and output elements at ``seq`` (a coalesced region's parts summed)."""
    k = bisect.bisect_left(pg.var_seqs, seq)
    i = o = 0
    while k < len(pg.var_seqs) and pg.var_seqs[k] == seq:
        i, o, k = i + pg.var_in[k], o + pg.var_out[k], k + 1
    return i, o


def _earlier(pgs: dict[int, PgTrace], seq: int) -> dict[int, dict[int, tuple[int, int]]]:
    """Per earlier sequence number of the same call (each member's own signature at ``seq``) that every
    member holds: member -> (input, output elements); the last :data:`HISTORY` of them."""
    by_seq: dict[int, dict[int, tuple[int, int]]] = {}
    for r, pg in pgs.items():
        sig, found = _sig_of(pg, seq), 0
        k = bisect.bisect_left(pg.var_seqs, seq) - 1
        stop = max(-1, k - HISTORY_SCAN)
        while k > stop and found < HISTORY:
            s = pg.var_seqs[k]
            if _sig_of(pg, s) == sig:
                found += 1
                by_seq.setdefault(s, {})[r] = (pg.var_in[k], pg.var_out[k])
            k -= 1
    return {s: v for s, v in sorted(by_seq.items()) if len(v) == len(pgs)}


def _roots_before(pgs: dict[int, PgTrace], seq: int, balance: Balance) -> list[int]:
    """The root of each earlier gather/scatter of the same call, oldest first (calls with one root)."""
    side = 1 if balance is Balance.GATHER else 0
    out = []
    for held in _earlier(pgs, seq).values():
        roots = [r for r, c in held.items() if c[side] > 0]
        if len(roots) == 1:
            out.append(roots[0])
    return out


def _even_before(pgs: dict[int, PgTrace], seq: int) -> bool | None:
    """Did every member send and receive the same total at every earlier exchange of this all_to_all
    (None: no earlier one that every member holds)?"""
    earlier = _earlier(pgs, seq)
    if not earlier:
        return None
    return all(len(set(held.values())) == 1 and next(iter(held.values()))[0] == next(iter(held.values()))[1]
               for held in earlier.values())  # fmt: skip


def _sig_of(pg: PgTrace, seq: int) -> int | None:
    i = bisect.bisect_left(pg.seqs, seq)
    return int(pg.sigs[i]) if i < len(pg.seqs) and pg.seqs[i] == seq else None


def _stuck(group: GroupInfo, traces: dict[int, RankTrace]) -> bool:
    """Is any member inside a collective of this group, or did members stop at different places?"""
    ends = set()
    for r in group.dumped:
        pg = traces[r].pgs.get(group.key)
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
    Category.size_mismatch: 2,
    Category.dtype_mismatch: 3,
    Category.tensor_count_mismatch: 4,
    Category.desync: 5,
}


def compare_sigs(a: EntrySig | None, b: EntrySig | None) -> tuple[Category, bool]:
    """How two recorded entries differ, by meaning: another collective (or region) is a desync; the same
    collective with another number of tensors (or ops in a region) is its own finding; then dtypes, then
    sizes; only the call site: a call-site desync. Returns (category, only the call site differs)."""
    if a is None or b is None:
        return Category.desync, False
    if a.op != b.op:
        return Category.desync, False
    if (
        a.parts != b.parts
        or len(a.input_sizes) != len(b.input_sizes)
        or len(a.output_sizes) != len(b.output_sizes)
    ):
        return Category.tensor_count_mismatch, False
    if a.input_dtypes != b.input_dtypes or a.output_dtypes != b.output_dtypes:
        return Category.dtype_mismatch, False
    if a.input_sizes != b.input_sizes or a.output_sizes != b.output_sizes:
        return Category.size_mismatch, False
    return Category.desync, True


def tail_entry(pg: PgTrace, seq: int) -> TailEntry | None:
    return find(pg.tail, seq)


def in_flight(pg: PgTrace, seq: int, has_states: bool) -> bool | None:
    """Was the rank still inside ``seq`` when it dumped? None: the dump cannot say. A call followed by calls of
    the group that finished is not (:func:`.tail_rows.done_through`)."""
    t = tail_entry(pg, seq)
    if seq <= finished(pg):
        return False
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


def entry_state(t: RankTrace, group: str, seq: int, unretired: str) -> str:
    """What the rank's dump says of its entry ``seq`` in ``group``: the state's name (a dump with states), else
    "retired" or ``unretired``; "" when it kept no such entry or says neither."""
    pg = t.pgs.get(group)
    e = tail_entry(pg, seq) if pg is not None else None
    if e is None:
        return ""
    done = e.state == STATE_CODES["completed"] or e.retired is True
    if not done and pg is not None and seq <= finished(pg):
        return "done (a later call of the group finished)"
    if t.has_states and e.state >= 0:
        return STATE_NAMES[e.state]
    if e.retired is not None:
        return "retired" if e.retired else unretired
    return ""
