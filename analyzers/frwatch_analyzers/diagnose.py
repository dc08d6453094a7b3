"""From aligned groups to a verdict: the earliest branch, its consequences, the culprits and a category.

The root is the earliest disagreement that no other disagreement explains. A group's finding is
explained by another group's when the ranks it waits for (or that wait) are blocked inside that other
group: a rank stuck in group A is why it never reached group B. Among unexplained findings the earliest
in time wins. Hardware is blamed only on NCCL evidence of state (scheduled / started / completed).
"""

from __future__ import annotations

import bisect
import itertools
import statistics
from dataclasses import dataclass, field

from .align import (
    ABSENT,
    Disagreement,
    GroupInfo,
    compare_group,
    in_flight,
    infer_groups,
    tail_entry,
)
from .manifest import Manifest
from .nextsteps import next_steps
from .p2p import compare_p2p
from .summarize import STATE_CODES, STATE_NAMES, EntrySig, PgTrace, RankTrace
from .textfmt import call_site_text, op_short, ranks_text
from .verdict import (
    HARDWARE_CATEGORIES,
    Branch,
    Category,
    EntryView,
    Evidence,
    FileProblem,
    Finding,
    Frame,
    ProcessGroupRef,
    RankGroup,
    Status,
    Verdict,
)


@dataclass
class World:
    """Everything the reduce step knows."""

    traces: dict[int, RankTrace]
    details: dict[int, EntrySig]
    problems: list[FileProblem] = field(default_factory=list)
    manifest: Manifest | None = None
    world_size: int | None = None


@dataclass
class _Root:
    group: GroupInfo
    d: Disagreement | None  # None: a frontier finding (state-based or missing dumps), no disagreement
    category: Category
    culprits: list[int]
    headline: str
    detail: str
    seq: int
    op: str
    silent: bool = False


def diagnose(world: World) -> Verdict:
    traces = world.traces
    expected, world_note = _expected_ranks(world)
    missing = sorted(set(expected) - set(traces))
    if not traces:
        return _no_dump(world, expected, missing)
    groups = infer_groups(traces, expected)
    for g in groups.values():
        compare_group(g, traces, world.details)

    hard = {
        name: list(g.disagreements)
        for name, g in groups.items()
        if g.disagreements and not g.benign_call_sites
    }
    for d in compare_p2p(traces, groups, world.details):
        hard.setdefault(d.pg, []).append(d)
    root = _find_root(world, groups, hard) if hard else _frontier_root(world, groups)

    findings, consequences = _findings(world, groups, hard, root)
    verdict_groups = _rank_groups(world, groups, root, missing)
    nodes = _nodes(world, root.culprits if root else [])
    stats = {
        "files": float(len(traces) + len(world.problems)),
        "ranks": float(len(traces)),
        "entries": float(sum(t.entries for t in traces.values())),
        "process_groups": float(len(groups)),
        "disagreements": float(sum(g.total_disagreements for g in groups.values())),
    }
    notes = [n for n in (world_note, _version_note(traces), _benign_note(groups)) if n]
    if root is None:
        total = int(stats["entries"])
        return Verdict(
            status=Status.healthy,
            category=Category.healthy,
            headline=f"healthy: {len(traces)} ranks agree on every collective in {len(groups)} process group(s)",
            summary=" ".join(
                [f"{total} entries compared; no rank is missing a collective or stuck.", *notes]
            ),
            world_size=len(expected) or None,
            ranks_seen=sorted(traces),
            missing_dumps=missing,
            bad_files=world.problems,
            groups=verdict_groups,
            stats=stats,
        )
    branch_group = root.group
    status = Status.inconclusive if root.category == Category.inconclusive else Status.problem
    hw = root.category in HARDWARE_CATEGORIES
    evidence = _evidence(world, root)
    summary = " ".join([root.detail, *notes]).strip()
    return Verdict(
        status=status,
        category=root.category,
        hardware_class=hw,
        headline=root.headline,
        summary=summary,
        earliest_branch=Branch(
            process_group=ProcessGroupRef(
                name=branch_group.name, desc=branch_group.desc, ranks=branch_group.members
            ),
            seq=root.seq,
            op=root.op,
            p2p=bool(root.d and root.d.p2p),
        ),
        culprit_ranks=root.culprits,
        culprit_detail=root.detail,
        suspect_nodes=nodes,
        world_size=len(expected) or None,
        ranks_seen=sorted(traces),
        missing_dumps=missing,
        bad_files=world.problems,
        groups=verdict_groups,
        findings=findings,
        consequences=consequences,
        evidence=evidence,
        next_steps=next_steps(root.category, root.culprits, _root_sites(world, root), nodes, root.op),
        stats=stats,
    )


# --- world size ------------------------------------------------------------------------------------------
def _expected_ranks(world: World) -> tuple[list[int], str]:
    size = world.world_size
    source = "given"
    if size is None and world.manifest and world.manifest.world_size:
        size, source = world.manifest.world_size, "manifest"
    if size is None:
        for t in world.traces.values():
            for pg in t.pgs.values():
                if pg.config_ranks and (pg.desc == "default_pg" or pg.name == "0"):
                    top = pg.config_ranks[-1] if isinstance(pg.config_ranks, range) else max(pg.config_ranks)
                    size, source = max(size or 0, top + 1), "pg_config"
    seen = set(world.traces) | {p.rank for p in world.problems if p.rank is not None}
    if size is None:
        size = (max(seen) + 1) if seen else 0
        note = (
            "The world size is not known (no manifest, no usable pg_config): it is taken as the highest rank "
            "seen plus one, so ranks above it that left no file would go unnoticed."
        )
        return list(range(size)), note
    del source
    return list(range(max(size, max(seen) + 1 if seen else 0))), ""


def _no_dump(world: World, expected: list[int], missing: list[int]) -> Verdict:
    bad = world.problems
    reason = f"none of the {len(bad)} file(s) is a usable dump" if bad else "no dump file was found"
    return Verdict(
        status=Status.inconclusive,
        category=Category.no_dump,
        headline=f"no dump to compare: {reason}",
        summary=(
            "Without at least one rank's Flight Recorder dump there is nothing to align. Check that "
            "TORCH_FR_BUFFER_SIZE is not 0 and that the dump path is on a volume the agent reads."
        ),
        world_size=len(expected) or None,
        missing_dumps=missing,
        bad_files=bad,
    )


# --- root selection --------------------------------------------------------------------------------------
def _last_activity(t: RankTrace) -> tuple[PgTrace, int] | None:
    best: tuple[PgTrace, int] | None = None
    best_rid = -2
    for pg in t.pgs.values():
        if pg.tail and pg.tail[-1].record_id > best_rid:
            best_rid = pg.tail[-1].record_id
            best = (pg, pg.tail[-1].seq)
    return best


def _blocked_elsewhere(world: World, ranks: list[int], here: str) -> dict[int, tuple[str, int]]:
    out: dict[int, tuple[str, int]] = {}
    for r in ranks:
        t = world.traces.get(r)
        if t is None:
            continue
        act = _last_activity(t)
        if act is None:
            continue
        pg, seq = act
        if pg.name != here and in_flight(pg, seq, t.has_states) is not False:
            out[r] = (pg.name, seq)
    return out


def _time_of(world: World, group: str, seq: int, ranks: list[int]) -> int:
    for r in ranks:
        t = world.traces.get(r)
        pg = t.pgs.get(group) if t else None
        if pg is None:
            continue
        i = _index(pg, seq)
        if i is not None and pg.created[i]:
            return int(pg.created[i])
    return 0


def _find_root(world: World, groups: dict[str, GroupInfo], hard: dict[str, list[Disagreement]]) -> _Root:
    firsts = [ds[0] for ds in hard.values() if ds and not ds[0].p2p]
    firsts += [d for ds in hard.values() for d in ds if d.p2p]
    stuck_groups = {d.pg for d in firsts}
    explained: set[int] = set()
    for i, d in enumerate(firsts):
        waiting_on = [r for v in d.views if v.sig is ABSENT for r in v.ranks]
        dumped = [r for r in waiting_on if r in world.traces]
        blocked = _blocked_elsewhere(world, waiting_on, d.pg)
        if dumped and len(blocked) == len(dumped) and all(g in stuck_groups for g, _ in blocked.values()):
            explained.add(i)
    candidates = [d for i, d in enumerate(firsts) if i not in explained] or firsts

    def when(d: Disagreement) -> tuple[int, int]:
        if d.when:
            return (d.when, d.seq)
        ts = [x for x in (_time_of(world, d.pg, d.seq, v.ranks) for v in d.views if v.sig is not ABSENT) if x]
        return (min(ts) if ts else 1 << 62, d.seq)

    d = min(candidates, key=when)
    return _root_from(world, groups[d.pg], d) if not d.p2p else _p2p_root(world, groups[d.pg], d)


def _p2p_root(world: World, group: GroupInfo, d: Disagreement) -> _Root:
    first = d.views[0]
    sig = world.details.get(first.sig) if first.sig is not None else None
    op = sig.op if sig else "p2p"
    pg_label = _pg_label(group)
    if d.category == Category.missing_rank:
        waiter, culprit = first.ranks[0], d.odd[0]
        kind = "recv" if op.split(":", 1)[-1].startswith("send") else "send"
        headline = (
            f"rank {culprit} never posted the {kind} matching rank {waiter}'s {op_short(op)} "
            f"(p2p #{d.seq} of rank {waiter}) in {pg_label}"
        )
        detail = f"{headline}. " + (
            _no_dump_text(world, culprit, [waiter], d.seq)
            if culprit not in world.traces
            else f"Rank {waiter} waits in it; rank {culprit} took another path or is stuck before it."
        )
        return _Root(group, d, Category.missing_rank, [culprit], headline, detail, d.seq, op)
    a, b = d.views[0], d.views[1]
    sa = world.details.get(a.sig) if a.sig is not None else None
    sb = world.details.get(b.sig) if b.sig is not None else None
    what = "sizes" if d.category == Category.size_mismatch else "dtypes"
    va = (list(map(list, sa.input_sizes)) if what == "sizes" else list(sa.input_dtypes)) if sa else "?"
    vb = (list(map(list, sb.input_sizes)) if what == "sizes" else list(sb.input_dtypes)) if sb else "?"
    headline = (
        f"{d.category.value.replace('_', ' ')} on a send/recv pair in {pg_label}: rank {a.ranks[0]} sends "
        f"{what} {va}, rank {b.ranks[0]} receives {vb}"
    )
    return _Root(group, d, d.category, sorted(d.odd), headline, headline + ".", d.seq, op)


def _root_from(world: World, group: GroupInfo, d: Disagreement) -> _Root:
    ref = d.views[0]
    details = world.details
    pg_label = _pg_label(group)
    if d.majority_absent:
        ahead = d.odd
        present = [v for v in d.views if v.sig is not ABSENT]
        op = details[present[0].sig].op if present and present[0].sig in details else "?"
        blocked = _blocked_elsewhere(world, ref.ranks, group.name)
        where = ""
        if blocked:
            g, s = next(iter(blocked.values()))
            where = f" The others are blocked in pg {g} #{s}."
        headline = (
            f"desync in {pg_label} at #{d.seq}: {ranks_text(ahead)} issued an extra {op_short(op)} "
            f"that {ranks_text(ref.ranks)} never issued"
        )
        return _Root(
            group,
            d,
            Category.desync,
            ahead,
            headline,
            f"{ranks_text(ahead)} enqueued {op} #{d.seq} in {pg_label}; {ranks_text(ref.ranks)} never did.{where}",
            d.seq,
            op,
        )
    ref_sig = details.get(ref.sig) if ref.sig is not None else None
    op = ref_sig.op if ref_sig else "?"
    culprits = d.odd
    silent = _went_on(world, group, d)
    tie = " (as many ranks on each side: which side is wrong is a guess)" if d.tie else ""
    if (
        d.tie
        and d.category == Category.missing_rank
        and all(_moved_on(world, r, group.name) for r in culprits if r in world.traces)
    ):
        tie = ""
    if d.category == Category.missing_rank:
        detail = _missing_detail(world, group, d.seq, culprits, ref.ranks)
        headline = (
            f"{ranks_text(culprits)} never enqueued {op_short(op)} #{d.seq} in {pg_label} that "
            f"{ranks_text(ref.ranks)} {'wait' if len(ref.ranks) > 1 else 'waits'} in{tie}"
        )
        return _Root(group, d, Category.missing_rank, culprits, headline, detail, d.seq, op)
    odd_views = [v for v in d.views[1:] if v.sig is not None]
    odd_desc = "; ".join(
        _describe(details.get(v.sig), v.ranks, d.category) for v in odd_views if v.sig is not None
    )
    ref_desc = _describe(ref_sig, ref.ranks, d.category)
    absent = [r for v in d.views[1:] if v.sig is ABSENT for r in v.ranks]
    absent_txt = f"; {ranks_text(absent)} never enqueued it" if absent else ""
    kind = {
        Category.desync: "call-site desync" if d.call_site_only else "desync",
        Category.size_mismatch: "size mismatch",
        Category.dtype_mismatch: "dtype mismatch",
    }.get(d.category, d.category.value)
    what = "" if d.category == Category.desync else f" {op_short(op)}"  # a desync's sides name their ops
    headline = f"{kind} at {pg_label} #{d.seq}{what}: {odd_desc} vs {ref_desc}{absent_txt}{tie}"
    if silent:
        detail = (
            f"Every member went on past #{d.seq}: the collective did not hang, it ran with mismatched "
            "buffers (silent corruption of the result)."
            if d.category in (Category.size_mismatch, Category.dtype_mismatch)
            else f"Every member went on past #{d.seq}: the ranks paired collectives issued from different "
            "places in the code, and from there on their sequences are shifted."
        )
    else:
        detail = f"The ranks stopped agreeing at #{d.seq} of {pg_label}; later disagreements follow from it."
    shift = _shift(world, group, d)
    if shift:
        detail = f"{shift} {detail}"
    if group.no_dump and d.category in (Category.size_mismatch, Category.dtype_mismatch):
        detail += (
            f" {ranks_text(group.no_dump)} left no dump: a byte-size mismatch makes gloo abort the receiving "
            "process (SIGABRT) before it can dump; NCCL may instead hang or corrupt memory."
        )
    return _Root(group, d, d.category, culprits, headline, f"{headline}. {detail}", d.seq, op, silent=silent)


def _index(pg: PgTrace, seq: int) -> int | None:
    """Where ``seq`` sits in a group's arrays on a rank (None: the rank does not hold it)."""
    i = bisect.bisect_left(pg.seqs, seq)
    return i if i < len(pg.seqs) and pg.seqs[i] == seq else None


def _sig_at(world: World, rank: int, group: str, seq: int) -> int | None:
    pg = world.traces[rank].pgs.get(group)
    i = _index(pg, seq) if pg is not None else None
    return int(pg.sigs[i]) if pg is not None and i is not None else None


def _usually_follows(world: World, rank: int, group: str, before: int, first: int, then: int) -> bool:
    """Did ``rank`` earlier issue ``then`` right after ``first`` (so a rank issuing ``then`` in place of
    ``first`` skipped ``first``)?"""
    pg = world.traces[rank].pgs.get(group)
    if pg is None:
        return False
    sigs, seqs = pg.sigs, pg.seqs
    for i in range(len(seqs) - 1):
        if seqs[i] >= before:
            break
        if sigs[i] == first and sigs[i + 1] == then and seqs[i + 1] == seqs[i] + 1:
            return True
    return False


def _shift(world: World, group: GroupInfo, d: Disagreement) -> str:
    """Is the odd side one call ahead (it skipped one) or one behind (it issued an extra one)?"""
    ref = d.views[0]
    if ref.sig is None or len(d.views) != 2 or d.views[1].sig is None:
        return ""
    odd = d.views[1]
    r_ref, r_odd = ref.ranks[0], odd.ranks[0]
    ref_next = _sig_at(world, r_ref, group.name, d.seq + 1)
    odd_next = _sig_at(world, r_odd, group.name, d.seq + 1)
    ref_op = world.details[ref.sig].op if ref.sig in world.details else "?"
    site = call_site_text(world.details[ref.sig].call_site) if ref.sig in world.details else ""
    who = ranks_text(odd.ranks)
    if (ref_next is not None and ref_next == odd.sig and odd_next != ref.sig) or (
        ref_next is None
        and _usually_follows(world, r_ref, group.name, d.seq, ref.sig, odd.sig if odd.sig is not None else 0)
    ):
        return (
            f"{who} skipped {op_short(ref_op)}{' at ' + site if site else ''}: its #{d.seq} is what the others "
            f"issue next (#{d.seq + 1})."
        )
    if odd_next is not None and odd_next == ref.sig and ref_next != odd.sig:
        extra = world.details[odd.sig].op if odd.sig in world.details else "?"
        odd_site = call_site_text(world.details[odd.sig].call_site) if odd.sig in world.details else ""
        return (
            f"{who} issued an extra {op_short(extra)}{' at ' + odd_site if odd_site else ''}: its #{d.seq + 1} "
            f"is the others' #{d.seq}."
        )
    return ""


def _went_on(world: World, group: GroupInfo, d: Disagreement) -> bool:
    if any(v.sig is ABSENT for v in d.views):
        return False
    for v in d.views:
        for r in v.ranks:
            pg = world.traces[r].pgs.get(group.name)
            if pg is None or pg.last_enqueued <= d.seq:
                return False
    return True


def _describe(sig: EntrySig | None, ranks: list[int], cat: Category) -> str:
    if sig is None:
        return f"{ranks_text(ranks)}: ?"
    if cat == Category.size_mismatch:
        what = f"sizes {list(map(list, sig.input_sizes))}"
    elif cat == Category.dtype_mismatch:
        what = f"dtypes {list(sig.input_dtypes)}"
    else:
        what = op_short(sig.op)
    site = call_site_text(sig.call_site)
    return f"{ranks_text(ranks)} {what}{' at ' + site if site else ''}"


def _missing_detail(world: World, group: GroupInfo, seq: int, culprits: list[int], waiters: list[int]) -> str:
    parts = []
    blocked = _blocked_elsewhere(world, culprits, group.name)
    for r in culprits:
        t = world.traces.get(r)
        if r in blocked:
            g, s = blocked[r]
            passed = [w for w in waiters if w in world.traces and _passed(world.traces[w], g, s)]
            if passed:
                parts.append(
                    f"rank {r} is blocked inside pg {g} #{s}, which {ranks_text(passed)} already passed, "
                    f"so it never reached #{seq} here."
                )
            else:
                parts.append(
                    f"rank {r} never called it: it moved on to {_moved_on(world, r, group.name) or f'pg {g} #{s}'} "
                    f"(it skipped the call or took another branch) and now waits there for ranks that are still "
                    f"here: a cross-group deadlock caused by the skip."
                )
            continue
        if t is None:
            parts.append(_no_dump_text(world, r, waiters, seq))
            continue
        moved = _moved_on(world, r, group.name)
        if moved:
            parts.append(
                f"rank {r} never called it: it moved on to {moved} instead, so it took another path "
                f"(a skipped call or a rank-dependent branch), it is not stuck."
            )
            continue
        pg = t.pgs.get(group.name)
        last = pg.seqs[-1] if pg is not None and len(pg.seqs) else None
        quiet = ""
        peer_t = _time_of(world, group.name, seq, waiters)
        mine = pg.tail[-1].created_ns if pg is not None and pg.tail else 0
        step = _step_interval(world, group.name, waiters)
        if peer_t and mine and peer_t - mine > max(1e9, 20 * step * 1e9):
            gap = (peer_t - mine) / 1e9
            quiet = f" Its last collective was created {gap:.2f} s before the others entered #{seq}"
            quiet += f" (they usually issue one every {step:.3f} s)." if step else "."
        ended = _ended_text(world, r)
        parts.append(
            f"rank {r} dumped while idle outside any collective (last #{last} in {_pg_label(group)} completed):"
            f" it is stuck on the CPU side (data loading, a host-side loop, a lock) or it left the training "
            f"loop early; a skipped call would instead show up as a different collective at #{seq}.{quiet}"
            f"{ended}"
        )
    return " ".join(parts)


def _passed(t: RankTrace, group: str, seq: int) -> bool:
    pg = t.pgs.get(group)
    return pg is not None and pg.last_enqueued > seq


def _moved_on(world: World, rank: int, here: str) -> str:
    """Where a rank went after its last entry in ``here``: a later entry in another group, if any."""
    t = world.traces[rank]
    pg_here = t.pgs.get(here)
    here_rid = pg_here.tail[-1].record_id if pg_here is not None and pg_here.tail else -1
    act = _last_activity(t)
    if act is None:
        return ""
    pg, seq = act
    if pg.name == here or pg.tail[-1].record_id <= here_rid:
        return ""
    return f"{_op_of(world, pg, seq)} in pg {pg.name}" + (
        f" ({pg.desc})" if pg.desc and pg.desc != "undefined" else ""
    )


def _no_dump_text(world: World, rank: int, waiters: list[int], seq: int) -> str:
    ended = _ended_text(world, rank)
    return (
        f"rank {rank} left no dump while {ranks_text(waiters)} waited for it at #{seq}: it most likely crashed "
        f"or was killed before it could dump (a process abort, OOM, a lost node).{ended or ' Check its pod exit code.'}"
    )


def _ended_text(world: World, rank: int) -> str:
    m = world.manifest
    if m is None:
        return ""
    pod = m.pod_of(rank)
    for p in m.pods:
        if p.pod == pod:
            ends = [e for e in p.ended if e.exit_code not in (None, 0) or e.reason not in ("", "Completed")]
            if ends:
                e = ends[0]
                return (
                    f" Its pod {pod} ended: container {e.container} exit code {e.exit_code} {e.reason}".rstrip()
                    + "."
                )
            if p.deleted:
                return f" Its pod {pod} was deleted."
    for rr in m.ranks:
        if rr.rank == rank and rr.why_missing:
            return f" {rr.why_missing}."
    return ""


def _step_interval(world: World, group: str, ranks: list[int]) -> float:
    for r in ranks:
        t = world.traces.get(r)
        pg = t.pgs.get(group) if t else None
        if pg is None or len(pg.created) < 3:
            continue
        times = [x for x in pg.created[-16:] if x]
        diffs = [(b - a) / 1e9 for a, b in itertools.pairwise(times) if b >= a]
        if diffs:
            return float(statistics.median(diffs))
    return 0.0


# --- frontier (no disagreement) ------------------------------------------------------------------------------
def _frontier_root(world: World, groups: dict[str, GroupInfo]) -> _Root | None:
    """Members agree on every sequence number. Look at where they stand: missing dumps, NCCL states."""
    for g in groups.values():
        if not g.dumped:
            continue
        s = g.frontier
        waiting = [
            r
            for r in g.dumped
            if _at(world, r, g.name, s)
            and in_flight(world.traces[r].pgs[g.name], s, world.traces[r].has_states)
        ]
        if g.no_dump and waiting:
            op = _op_at(world, g, s)
            waiting = [r for r in g.dumped if _at(world, r, g.name, s)]
            detail = " ".join(_no_dump_text(world, r, waiting, s) for r in g.no_dump)
            headline = (
                f"{ranks_text(g.no_dump)} left no dump while {ranks_text(waiting)} wait in {op_short(op)} #{s} "
                f"of {_pg_label(g)}"
            )
            return _Root(g, None, Category.missing_rank, list(g.no_dump), headline, detail, s, op)
    for g in groups.values():
        states = _states_at(world, g, g.frontier)
        if not states:
            continue
        op = _op_at(world, g, g.frontier)
        sched = sorted(r for r, st in states.items() if st == STATE_CODES["scheduled"])
        started = sorted(r for r, st in states.items() if st == STATE_CODES["started"])
        done = sorted(r for r, st in states.items() if st == STATE_CODES["completed"])
        s = g.frontier
        if sched and (started or done):
            prev = _prev_entry_state(world, sched, g.name, s)
            headline = (
                f"GPU hang on {ranks_text(sched)}: {op_short(op)} #{s} of {_pg_label(g)} was scheduled but never "
                f"started there, while {ranks_text(started + done)} started it"
            )
            detail = (
                f"{headline}. A kernel queued before it on the same stream never finished on "
                f"{ranks_text(sched)}{prev}: suspect the GPU (XID errors, ECC, a hung kernel), not the program."
            )
            return _Root(g, None, Category.gpu_hang, sched, headline, detail, s, op)
        if started and not sched and not done and len(started) == len(g.members):
            headline = f"network hang: every member of {_pg_label(g)} started {op_short(op)} #{s} and none completed it"
            detail = (
                f"{headline}. All {len(started)} ranks entered the collective and agree on it: the transport "
                "(NIC, link, switch) stopped moving data. No single rank stands out in the dumps; the nodes of "
                "the group are the suspects."
            )
            return _Root(g, None, Category.network_hang, started, headline, detail, s, op)
        if sched and not started and not done and len(sched) == len(g.members):
            headline = f"every member of {_pg_label(g)} enqueued {op_short(op)} #{s} and none started it"
            detail = (
                f"{headline}: the ranks agree, and each one's stream was still busy with earlier work. The dumps "
                "do not say which rank's GPU is behind (look at the collectives before it and at the GPUs)."
            )
            return _Root(g, None, Category.inconclusive, [], headline, detail, s, op)
    for g in groups.values():
        if g.no_dump or not g.dumped or any(world.traces[r].has_states for r in g.dumped):
            continue
        s = g.frontier
        if (
            all(
                _at(world, r, g.name, s) and in_flight(world.traces[r].pgs[g.name], s, False)
                for r in g.dumped
            )
            and len(g.dumped) > 1
        ):
            op = _op_at(world, g, s)
            headline = f"every member of {_pg_label(g)} waits in {op_short(op)} #{s} and they agree on it"
            detail = (
                f"{headline}: no rank is missing or different. gloo records no start or completion state, so a "
                "stalled transport cannot be told from a peer outside the dumps (a rank of another job, a "
                "process that is not a member)."
            )
            return _Root(g, None, Category.inconclusive, [], headline, detail, s, op)
    return None


def _at(world: World, rank: int, group: str, seq: int) -> bool:
    pg = world.traces[rank].pgs.get(group)
    return pg is not None and pg.last_enqueued == seq


def _states_at(world: World, g: GroupInfo, seq: int) -> dict[int, int]:
    out = {}
    for r in g.dumped:
        t = world.traces[r]
        if not t.has_states:
            return {}
        pg = t.pgs.get(g.name)
        e = tail_entry(pg, seq) if pg is not None else None
        if e is None or e.state < 0:
            return {}
        out[r] = e.state
    return out


def _prev_entry_state(world: World, ranks: list[int], group: str, seq: int) -> str:
    t = world.traces.get(ranks[0])
    pg = t.pgs.get(group) if t else None
    if pg is None:
        return ""
    prev = tail_entry(pg, seq - 1)
    if prev is None or prev.state < 0:
        return ""
    return f" (its previous collective #{seq - 1} is '{STATE_NAMES[prev.state]}')"


def _op_at(world: World, g: GroupInfo, seq: int) -> str:
    for r in g.dumped:
        sig_id = _sig_at(world, r, g.name, seq)
        sig = world.details.get(sig_id) if sig_id is not None else None
        if sig:
            return sig.op
    return "?"


def _pg_label(g: GroupInfo) -> str:
    return f"pg {g.name}" + (f" ({g.desc})" if g.desc and g.desc != "undefined" else "")


# --- findings, groups, evidence --------------------------------------------------------------------------
def _findings(
    world: World, groups: dict[str, GroupInfo], hard: dict[str, list[Disagreement]], root: _Root | None
) -> tuple[list[Finding], list[Finding]]:
    findings: list[Finding] = []
    consequences: list[Finding] = []
    if root is None:
        return findings, consequences
    root_ref = f"pg {root.group.name} #{root.seq}"
    findings.append(
        Finding(
            category=root.category,
            process_group=root.group.name,
            seq=root.seq,
            op=root.op,
            ranks=root.culprits,
            summary=root.headline,
            silent=root.silent,
        )
    )
    for name, ds in hard.items():
        g = groups[name]
        for i, d in enumerate(ds):
            if root.d is not None and d is root.d:
                continue
            op = _view_op(world, d)
            if name == root.group.name and root.d is not None and d.seq > root.seq:
                why = f"follows from the branch at {root_ref}: from there on the sequences of these ranks are shifted"
            elif name == root.group.name and root.d is not None and d.seq < root.seq:
                why = "earlier, but the root explains more (this one is a consequence or unrelated)"
            else:
                blocked = _blocked_elsewhere(
                    world, [r for v in d.views if v.sig is ABSENT for r in v.ranks], name
                )
                why = (
                    f"{ranks_text(sorted(blocked))} blocked in {', '.join(sorted({f'pg {a} #{b}' for a, b in blocked.values()}))}"
                    if blocked
                    else f"a consequence of {root_ref}"
                )
            f = Finding(
                category=d.category,
                process_group=name,
                seq=d.seq,
                op=op,
                ranks=d.odd,
                summary=f"{_pg_label(g)} #{d.seq} {op_short(op)}: {ranks_text(d.odd)} differ",
                explained_by=why,
            )
            findings.append(f)
            consequences.append(f)
            if i >= 3 and name == root.group.name:
                rest = g.total_disagreements - i - 1
                if rest > 0:
                    more = f"... and {rest} more disagreement(s) in {_pg_label(g)}"
                    consequences.append(f.model_copy(update={"summary": more}))
                break
    return findings, consequences


def _view_op(world: World, d: Disagreement) -> str:
    for v in d.views:
        if v.sig is not None and v.sig in world.details:
            return world.details[v.sig].op
    return "?"


def _rank_groups(
    world: World, groups: dict[str, GroupInfo], root: _Root | None, missing: list[int]
) -> list[RankGroup]:
    keyed: dict[tuple[tuple[str, int, int, str], ...], list[int]] = {}
    culprits = set(root.culprits) if root else set()
    for r, t in world.traces.items():
        key = tuple(
            (
                name,
                pg.last_enqueued,
                pg.last_completed if pg.status_known else -2,
                _state_name(world, r, name, pg.last_enqueued),
            )
            for name, pg in sorted(t.pgs.items())
        )
        keyed.setdefault((*key, ("culprit", int(r in culprits), 0, "")), []).append(r)
    out = []
    for key, ranks in sorted(keyed.items(), key=lambda kv: min(kv[1])):
        ranks.sort()
        t = world.traces[ranks[0]]
        enq = {k[0]: k[1] for k in key if k[0] != "culprit"}
        done = {name: pg.last_completed for name, pg in t.pgs.items() if pg.status_known}
        flight = {}
        for name, pg in t.pgs.items():
            if in_flight(pg, pg.last_enqueued, t.has_states):
                flight[name] = _op_of(world, pg, pg.last_enqueued)
                if t.has_states:
                    flight[name] += f" [{_state_name(world, ranks[0], name, pg.last_enqueued)}]"
        label = _group_label(t, flight, culprits & set(ranks), root)
        if not t.has_states and flight:
            label = label.replace("inside ", "last in ") + " (not retired at dump time)"
        out.append(
            RankGroup(
                ranks=ranks,
                label=label,
                last_enqueued=enq,
                last_completed=done,
                in_flight=flight,
                nodes=_nodes(world, ranks),
            )
        )
    if missing:
        out.append(RankGroup(ranks=missing, label="no dump", nodes=_nodes(world, missing)))
    return out


def _op_of(world: World, pg: PgTrace, seq: int) -> str:
    i = _index(pg, seq)
    sig = world.details.get(pg.sigs[i]) if i is not None else None
    return f"{sig.op} #{seq}" if sig else f"#{seq}"


def _group_label(t: RankTrace, flight: dict[str, str], culprit: set[int], root: _Root | None) -> str:
    tag = "culprit: " if culprit else ""
    if flight:
        where = "; ".join(f"pg {k}: {v}" for k, v in sorted(flight.items()))
        return f"{tag}inside {where}"
    if root is not None:
        pg = t.pgs.get(root.group.name)
        if pg is not None:
            return f"{tag}idle, last at #{pg.last_enqueued} of pg {root.group.name}"
    return f"{tag}idle"


def _nodes(world: World, ranks: list[int]) -> list[str]:
    m = world.manifest
    if m is None:
        return []
    return sorted({n for n in (m.node_of(r) for r in ranks) if n})


def _root_sites(world: World, root: _Root) -> list[str]:
    sites: list[str] = []
    if root.d is None:
        return sites
    for v in reversed(root.d.views):
        if v.sig is not None and v.sig in world.details:
            site = call_site_text(world.details[v.sig].call_site)
            if site and site not in sites:
                sites.append(site)
    return sites


def _evidence(world: World, root: _Root) -> list[Evidence]:
    g = root.group
    views: list[EntryView] = []
    if root.d is not None:
        src = [(v.sig, v.ranks) for v in root.d.views]
    else:
        by_sig: dict[tuple[int | None, str], list[int]] = {}
        for r in g.dumped:
            sig = _sig_at(world, r, g.name, root.seq)
            by_sig.setdefault((sig, _state_name(world, r, g.name, root.seq)), []).append(r)
        src = [(sig, ranks) for (sig, _), ranks in by_sig.items()]
    for sig, ranks in src:
        det = world.details.get(sig) if sig is not None else None
        if root.d is not None and root.d.p2p:
            states = [_p2p_state(world, ranks[0], g.name, sig)]
        else:
            states = sorted({_state_name(world, r, g.name, root.seq) for r in ranks} - {""})
        views.append(
            EntryView(
                ranks=ranks,
                op=det.op if det else None,
                input_sizes=[list(s) for s in det.input_sizes] if det else [],
                input_dtypes=list(det.input_dtypes) if det else [],
                output_sizes=[list(s) for s in det.output_sizes] if det else [],
                output_dtypes=list(det.output_dtypes) if det else [],
                state="/".join(states) or None,
                call_site=[Frame(name=n, filename=f, line=ln) for n, f, ln in det.call_site] if det else [],
            )
        )
    if g.no_dump:
        views.append(EntryView(ranks=g.no_dump, op=None, state="no dump"))
    return [
        Evidence(
            process_group=g.name, seq=root.seq, views=views, note=f"membership from {g.membership_source}"
        )
    ]


def _p2p_state(world: World, rank: int, group: str, sig: int | None) -> str:
    t = world.traces.get(rank)
    if t is None:
        return "no dump"
    if sig is None:
        return "never posted it"
    for e in reversed(t.p2p):
        if e.pg == group and e.sig == sig:
            return STATE_NAMES.get(e.state, "")
    return ""


def _state_name(world: World, rank: int, group: str, seq: int) -> str:
    t = world.traces[rank]
    pg = t.pgs.get(group)
    if pg is None:
        return ""
    e = tail_entry(pg, seq)
    if e is None:
        return ""
    if t.has_states and e.state >= 0:
        return STATE_NAMES[e.state]
    if e.retired is not None:
        return "retired" if e.retired else "not retired (in flight)"
    return ""


def _version_note(traces: dict[int, RankTrace]) -> str:
    versions = sorted({t.version for t in traces.values()})
    if len(versions) > 1:
        return (
            f"The dumps come from different Flight Recorder versions ({', '.join(versions)}): read with care."
        )
    return ""


def _benign_note(groups: dict[str, GroupInfo]) -> str:
    benign = [g for g in groups.values() if g.benign_call_sites]
    if not benign:
        return ""
    return (
        "Rank-dependent call sites (same collective, sizes and dtypes, different code location) were seen in "
        + ", ".join(_pg_label(g) for g in benign)
        + " without any other disagreement: not treated as a problem."
    )
