"""The verdict's words: the headline, what the culprits did (every sentence follows from the evidence it
cites), and the short form for ``kubectl describe`` (at most 120 characters).

About 420 lines by choice: every sentence a verdict says is here, so one file shows all the words a person
reads; each function words one kind of finding, and the rules that decide it are in ``rootcause``.
"""

from __future__ import annotations

import itertools
import statistics

from ..align.history import sig_at
from ..base.textfmt import call_site_text, op_short, ranks_text
from ..store.manifest import Manifest
from ..trace.rules import numel
from ..verdict import Category, CulpritKind
from .category import Candidate, Context

SHORT_MAX = 120


def headline(ctx: Context, c: Candidate) -> str:
    g, op, s = c.group, op_short(c.op), c.seq
    if c.d is not None and c.d.p2p:
        return _p2p_headline(ctx, c)
    waiting = _waiting(c)
    if c.states.get("unknown"):
        return _unknown_headline(c)
    unread = _unreadable(c)
    if unread and unread == c.culprits:
        verb = "wait" if len(waiting) > 1 else "waits"
        return (
            f"{ranks_text(waiting)} {verb} in {op} at collective #{s} of {g.label} for {ranks_text(unread)}, whose "
            f"dump could not be read: what {'it' if len(unread) == 1 else 'they'} issued is unknown"
        )
    if c.kind == CulpritKind.crashed:
        verb = "wait" if len(waiting) > 1 else "waits"
        return f"{ranks_text(c.culprits)} left no dump while {ranks_text(waiting)} {verb} in {at(op, s, g.label)}"
    if c.category == Category.missing_rank and c.culprits:
        verb = "wait" if len(waiting) > 1 else "waits"
        tie = " (as many ranks on each side: which side is wrong is not in the dumps)" if c.undecided else ""
        return f"{ranks_text(c.culprits)} never enqueued {at(op, s, g.label)} that {ranks_text(waiting)} {verb} in{tie}"
    if c.category == Category.missing_rank:
        verb = "wait" if len(waiting) > 1 else "waits"
        return f"{ranks_text(waiting)} {verb} in {at(op, s, g.label)} for ranks blocked elsewhere"
    if c.kind == CulpritKind.extra_call and _only_absent_differ(c):
        absent, dead = c.states.get("absent", []), c.states.get("no dump", [])
        unknown = f" ({ranks_text(dead)}: no dump, unknown)" if dead and absent else ""
        never = f"that {ranks_text(absent)} never issued" if absent else "that no other rank's dump shows"
        return (
            f"desync at collective #{s} of {g.label}: {ranks_text(c.culprits)} issued an extra {op_short(ctx.op(g, s, c.culprits))} "
            f"{never}{unknown}"
        )
    if c.category == Category.gpu_hang:
        others = sorted(set(c.states["started"]) | set(c.states["completed"]))
        return (
            f"GPU hang on {ranks_text(c.culprits)}: {at(op, s, g.label)} was scheduled but never started "
            f"there, while {ranks_text(others)} started it"
        )
    if c.category == Category.network_hang:
        return f"network hang: every member of {g.label} started {at(op, s)} and none completed it"
    if c.category == Category.transport_stall:
        return (
            f"transport stall: {at(op, s, g.label)} completed on {ranks_text(c.states['completed'])} and not "
            f"on {ranks_text(c.culprits)}"
        )
    if c.category == Category.inconclusive:
        if not ctx.states:
            return f"every member of {g.label} waits in {at(op, s)} and they agree on it"
        if ctx.timing and not c.states.get("started"):
            return f"every member of {g.label} enqueued {at(op, s)} and none started it"
        return f"every member of {g.label} enqueued {at(op, s)} and none completed it"
    return _mismatch_headline(ctx, c)


def at(op: str, seq: int, label: str = "") -> str:
    """``all_reduce at collective #5 of pg 0``: the number counts every collective of the group, not the
    calls of this op nor training steps, and the words say so."""
    return f"{op} at collective #{seq}{f' of {label}' if label else ''}"


def _only_absent_differ(c: Candidate) -> bool:
    """The ranks that differ from the extra call's issuers never enqueued anything there (no other call)."""
    return c.d is None or c.d.majority_absent or all(v.sig is None for v in c.d.views[1:])


def _unknown_headline(c: Candidate) -> str:
    """Too few usable dumps to name anyone: what the dumped ranks did, and who is unknown."""
    g, op, s, unknown = c.group, op_short(c.op), c.seq, c.states["unknown"]
    waiting = sorted(set(c.states.get("started", [])) | set(c.states.get("scheduled", [])))
    done = c.states.get("completed", [])
    if waiting:
        did = f"{ranks_text(waiting)} {'wait' if len(waiting) > 1 else 'waits'} in {op} at collective #{s} of {g.label}"
    else:
        did = f"{ranks_text(done)} issued {op} at collective #{s} of {g.label}"
    pron = "it" if len(unknown) == 1 else "they"
    return f"{did}; what {ranks_text(unknown)} issued is unknown ({pron} left no usable dump)"


def _unreadable(c: Candidate) -> list[int]:
    return sorted(r for r, st in c.statuses.items() if st.what == "unreadable")


def _p2p_headline(ctx: Context, c: Candidate) -> str:
    d = c.d
    assert d is not None
    first = d.views[0]
    if c.states.get("unknown") or c.kind == CulpritKind.crashed:
        waiter, culprit = first.ranks[0], d.odd[0]
        where = f"{op_short(c.op)} (p2p #{d.seq} of rank {waiter}) in {c.group.label}"
        if c.kind == CulpritKind.crashed:
            return f"rank {culprit} left no dump while rank {waiter} waits in its {where}"
        return f"rank {waiter} waits in its {where}; what rank {culprit} posted is unknown (no usable dump)"
    if c.category in (Category.gpu_hang, Category.network_hang, Category.transport_stall, Category.inconclusive) and d.transfer:
        src, dst = d.transfer
        pair = f"the transfer rank {src} -> rank {dst} (send p2p #{d.seq} of rank {src}) in {c.group.label}"
        if c.category == Category.gpu_hang:
            return f"GPU hang on {ranks_text(c.culprits)}: {pair} was scheduled there but never started, while its peer started it"
        if c.category == Category.network_hang:
            return f"network hang: both ends started {pair} and neither completed it"
        if c.category == Category.transport_stall:
            return f"transport stall: {pair} completed on the sender and not on {ranks_text(c.culprits)}"
        return f"both ends posted {pair} and neither completed it"
    if c.category == Category.missing_rank:
        waiter, culprit = first.ranks[0], d.odd[0]
        kind = "recv" if op_short(c.op).startswith("send") else "send"
        return (
            f"rank {culprit} never posted the {kind} matching rank {waiter}'s {op_short(c.op)} "
            f"(p2p #{d.seq} of rank {waiter}) in {c.group.label}"
        )
    a, b = d.views[0], d.views[1]
    sa = ctx.details.get(a.sig) if a.sig is not None else None
    sb = ctx.details.get(b.sig) if b.sig is not None else None
    what = "sizes" if c.category == Category.size_mismatch else "dtypes"
    va = (list(map(list, sa.input_sizes)) if what == "sizes" else list(sa.input_dtypes)) if sa else "?"
    vb = (list(map(list, sb.input_sizes)) if what == "sizes" else list(sb.input_dtypes)) if sb else "?"
    return (
        f"{c.category.value.replace('_', ' ')} on a send/recv pair in {c.group.label}: rank {a.ranks[0]} sends "
        f"{what} {va}, rank {b.ranks[0]} receives {vb}"
    )


def _p2p_detail(ctx: Context, c: Candidate, head: str, manifest: Manifest | None) -> str:
    d = c.d
    assert d is not None
    if c.category != Category.missing_rank:
        return f"{head}."
    waiter, culprit = d.views[0].ranks[0], d.odd[0]
    if c.kind == CulpritKind.crashed:
        ended = _ended_text(manifest, culprit)
        return (
            f"{head}. rank {culprit} left no dump while rank {waiter} waited for it: it most likely crashed or was "
            f"killed before it could dump.{ended}"
        )
    if c.kind == CulpritKind.cpu_stuck:
        return (
            f"{head}. rank {culprit} dumped while idle outside any collective: it is stuck on the CPU side (data "
            "loading, a host-side loop, a lock) before it posts the matching call."
        )
    return f"{head}. Rank {waiter} waits in it; rank {culprit} took another path or is blocked before it."


def _mismatch_headline(ctx: Context, c: Candidate) -> str:
    d = c.d
    assert d is not None
    g = c.group
    if d.balance:
        verb = "disagrees" if len(c.culprits) == 1 else "disagree"
        whose = f"{ranks_text(c.culprits)} {verb} with the others: " if c.culprits else ""
        return f"{kind_words(ctx, c)} in {at(op_short(c.op), c.seq, g.label)}: {whose}{d.balance}"
    ref = d.views[0]
    odd_views = [v for v in d.views[1:] if v.sig is not None]
    odd = "; ".join(_describe(ctx, v.sig, v.ranks, c.category) for v in odd_views if v.sig is not None)
    absent = [r for v in d.views[1:] if v.sig is None for r in v.ranks]
    absent_txt = f"; {ranks_text(absent)} never enqueued it" if absent else ""
    kind = "call-site desync" if d.call_site_only else kind_words(ctx, c)
    where = (
        f"collective #{c.seq} of {g.label}"
        if c.category == Category.desync
        else at(op_short(c.op), c.seq, g.label)
    )
    tie = " (as many ranks on each side: which side is wrong is not in the dumps)" if c.undecided else ""
    assert ref.sig is not None
    vs = _describe(ctx, ref.sig, ref.ranks, c.category)
    return f"{kind} {'at' if c.category == Category.desync else 'in'} {where}: {odd} vs {vs}{absent_txt}{tie}"


_KIND = {
    Category.desync: "desync",
    Category.size_mismatch: "size mismatch",
    Category.dtype_mismatch: "dtype mismatch",
    Category.tensor_count_mismatch: "tensor count mismatch",
}


def kind_words(ctx: Context, c: Candidate) -> str:
    """The finding's name; a size mismatch whose sides hold the same number of elements is a *shape*
    mismatch (a reshape: gloo and NCCL run it and the result lands in the wrong layout)."""
    if c.category == Category.size_mismatch and _same_numel(ctx, c):
        return "shape mismatch"
    return _KIND.get(c.category, c.category.value)


def _same_numel(ctx: Context, c: Candidate) -> bool:
    if c.d is None or c.d.balance:
        return False
    sigs = [ctx.details.get(v.sig) for v in c.d.views if v.sig is not None]
    if len(sigs) < 2 or any(s is None for s in sigs):
        return False
    counts = {(numel(s.input_sizes), numel(s.output_sizes)) for s in sigs if s is not None}
    shapes = {(s.input_sizes, s.output_sizes) for s in sigs if s is not None}
    return len(counts) == 1 and len(shapes) > 1


def culprit_op(ctx: Context, c: Candidate) -> str:
    """The op the culprits themselves issued at the finding (the reference's op when they are the
    reference, or no view names them)."""
    for v in c.d.views if c.d is not None else []:
        if v.sig is not None and set(v.ranks) & set(c.culprits) and v.sig in ctx.details:
            return ctx.details[v.sig].op
    return c.op


def _describe(ctx: Context, sig: int, ranks: list[int], cat: Category) -> str:
    s = ctx.details.get(sig)
    if s is None:
        return f"{ranks_text(ranks)}: ?"
    if cat == Category.size_mismatch:
        what = f"sizes {list(map(list, s.input_sizes))}"
        if s.output_sizes != s.input_sizes:
            what += f" -> {list(map(list, s.output_sizes))}"
    elif cat == Category.dtype_mismatch:
        what = f"dtypes {list(s.input_dtypes or s.output_dtypes)}"
    elif cat == Category.tensor_count_mismatch:
        what = f"{max(len(s.input_sizes), len(s.output_sizes), s.parts)} tensor(s)"
        if s.parts > 1:
            what = f"{s.parts - 1} op(s) in the region"
    else:
        what = op_short(s.op)
    site = call_site_text(s.call_site)
    return f"{ranks_text(ranks)} {what}{' at ' + site if site else ''}"


def _waiting(c: Candidate) -> list[int]:
    return sorted(
        set(c.states.get("started", []))
        | set(c.states.get("scheduled", []))
        | (set(c.states.get("completed", [])) if c.kind != CulpritKind.crashed else set())
    ) or sorted(r for v in (c.d.views if c.d else []) if v.sig is not None for r in v.ranks)


# --- what the culprits did ------------------------------------------------------------------------------------
def detail(ctx: Context, c: Candidate, manifest: Manifest | None) -> str:
    head = headline(ctx, c)
    if c.d is not None and c.d.p2p:
        return _p2p_detail(ctx, c, head, manifest)
    if c.category == Category.missing_rank:
        return " ".join([f"{head}.", *_absent_texts(ctx, c, manifest)]).strip()
    if c.kind == CulpritKind.extra_call and _only_absent_differ(c):
        absent = c.states.get("absent", [])
        not_stuck = (
            f" {ranks_text(absent)} {'is' if len(absent) == 1 else 'are'} not stuck in it." if absent else ""
        )
        return (
            f"{head}. Only {ranks_text(c.culprits)} enqueued it, and {c.note}: "
            f"{'it' if len(c.culprits) == 1 else 'they'} issued an extra call.{not_stuck}"
        )
    if c.category == Category.gpu_hang:
        prev = _prev_state(ctx, c)
        return (
            f"{head}. A kernel queued before it on the same stream never finished on {ranks_text(c.culprits)}"
            f"{prev}: suspect the GPU (XID errors, ECC, a hung kernel), not the program."
        )
    if c.category == Category.network_hang:
        return (
            f"{head}. All {len(c.suspects)} ranks entered the collective and agree on it: the transport (NIC, "
            "link, switch) stopped moving data. No single rank stands out in the dumps; the nodes of the group "
            "are the suspects."
        )
    if c.category == Category.transport_stall:
        return (
            f"{head}. {ranks_text(c.states['completed'])} completed it, which needs data from every member, so "
            f"{ranks_text(c.culprits)} took part and then stalled: a partial transport stall (a link or NIC "
            "between some ranks), not a GPU that never started. The dumps do not say which node or link; "
            "nothing here is proven hardware."
        )
    if c.category == Category.inconclusive and c.states.get("unknown"):
        unknown = c.states["unknown"]
        return (
            f"{head}. Only {len(ctx.traces)} of {len(ctx.world)} ranks left a usable dump: a rank without one may "
            f"have crashed, be stuck elsewhere, or its dump was not collected, and the dumps cannot say which nor "
            f"what it issued. Collect the dumps of {ranks_text(unknown)} (or their logs and exit codes) to decide."
        )
    if c.category == Category.inconclusive:
        return head + ". " + _inconclusive_text(ctx, c)
    return _mismatch_detail(ctx, c, head)


def _absent_texts(ctx: Context, c: Candidate, manifest: Manifest | None, most: int = 4) -> list[str]:
    """One sentence per way of being absent (ranks alike share one): a few, however many ranks."""
    alike: dict[tuple[str, str, int, int], list[int]] = {}
    for r in c.culprits:
        st = c.statuses.get(r)
        what = st.what if st is not None else "no_dump"
        where = st.where if st is not None else None
        last = -1
        if what == "idle":
            pg = ctx.traces[r].pgs.get(c.group.key)
            last = pg.seqs[-1] if pg is not None and len(pg.seqs) else -1
        key = (what, where.key if where else "", where.seq if where else -1, last)
        alike.setdefault(key, []).append(r)
    out = [_absent_text(ctx, c, ranks, manifest) for ranks in list(alike.values())[:most]]
    rest = sum(len(v) for v in list(alike.values())[most:])
    if rest:
        out.append(f"{rest} more rank(s) are absent in other ways (see the groups of ranks).")
    return out


def _absent_text(ctx: Context, c: Candidate, ranks: list[int], manifest: Manifest | None) -> str:
    r = ranks[0]
    who, one = ranks_text(ranks), len(ranks) == 1
    it, its, is_ = ("it", "its", "is") if one else ("they", "their", "are")
    st = c.statuses.get(r)
    waiting = _waiting(c)
    if st is not None and st.what == "unreadable":
        return (
            f"{who} left {'a file' if one else 'files'} that could not be read as a dump (see bad_files) while "
            f"{ranks_text(waiting)} waited at #{c.seq}: what {it} issued is unknown, so {it} {is_} named only as "
            f"the absent member{'' if one else 's'}, not as crashed."
        )
    if st is None or st.what == "no_dump":
        ended = "".join(_ended_text(manifest, x) for x in ranks[:4])
        return (
            f"{who} left no dump while {ranks_text(waiting)} waited at collective #{c.seq}: {it} most likely crashed or "
            f"{'was' if one else 'were'} killed before dumping (a process abort, OOM, a lost node).{ended}"
        )
    if st.what == "moved_on" and st.where is not None:
        where = f"{_op_of(ctx, r, st.where.key, st.where.seq)} in {ctx.groups[st.where.key].label}"
        return (
            f"{who} never called it: {it} moved on to {where} instead (what {it} enqueued after {its} last call "
            f"here is not what {it} always enqueued there before), so {it} took another path (a skipped call or a "
            f"rank-dependent branch); {it} {is_} not stuck in {c.group.label}."
        )
    if st.what == "blocked" and st.where is not None:
        return (
            f"{who} {is_} blocked inside {_op_of(ctx, r, st.where.key, st.where.seq)} of "
            f"{ctx.groups[st.where.key].label}, so {it} never reached collective #{c.seq} here."
        )
    pg = ctx.traces[r].pgs.get(c.group.key)
    last = pg.seqs[-1] if pg is not None and len(pg.seqs) else None
    return (
        f"{who} dumped while idle outside any collective ({its} last call here, #{last}, completed): {it} {is_} "
        f"stuck on the CPU side (data loading, a host-side loop, a lock) or left the training loop early; a "
        f"skipped call would show up as a different collective at #{c.seq}.{_quiet(ctx, c, r)}"
    )


def _mismatch_detail(ctx: Context, c: Candidate, head: str) -> str:
    d = c.d
    assert d is not None
    parts = [f"{head}."]
    ref_op = op_short(c.op)
    odd = next((v for v in d.views[1:] if v.sig is not None), None)
    odd_op = op_short(ctx.details[odd.sig].op) if odd is not None and odd.sig in ctx.details else "?"
    who = ranks_text(c.culprits)
    if c.shift == "skipped":
        parts.append(f"{who} skipped a call: its #{c.seq} is what the others issue next (#{c.seq + 1}).")
    elif c.shift == "extra":
        parts.append(f"{who} issued an extra call: its #{c.seq + 1} is the others' #{c.seq}.")
    elif c.shift == "skipped at the hang":
        parts.append(
            f"{who} skipped a call: its {odd_op} at #{c.seq} is what this group issued right after "
            f"{ref_op}, the call it left out."
        )
    elif c.shift == "extra at the hang":
        parts.append(
            f"{who} issued an extra call: its #{c.seq} repeats its #{c.seq - 1} ({odd_op}), and this group never "
            f"issued {odd_op} twice in a row before."
        )
    if c.note and not d.balance:
        parts.append(c.note[0].upper() + c.note[1:] + ".")
    if c.undecided and d.balance:
        parts.append("The records do not say which member is wrong, so no rank is named.")
    elif c.undecided:
        parts.append("Both sides are as large and neither one's record is wrong by itself: both are named.")
    if c.silent:
        parts.append(
            f"Every member went on past #{c.seq}: the collective did not hang, it ran with mismatched buffers "
            "(silent corruption of the result)."
            if c.category in (Category.size_mismatch, Category.dtype_mismatch, Category.tensor_count_mismatch)
            else f"Every member went on past #{c.seq}: the ranks paired collectives issued from different places "
            "in the code."
        )
    else:
        parts.append(
            f"The ranks stopped agreeing at collective #{c.seq} of {c.group.label}; later disagreements follow "
            "from it."
        )
    if c.group.no_dump and c.category in (Category.size_mismatch, Category.dtype_mismatch):
        parts.append(
            f"{ranks_text(c.group.no_dump)} left no dump: a byte-size mismatch makes gloo abort the receiving "
            "process (SIGABRT) before it can dump; NCCL may instead hang or corrupt memory."
        )
    return " ".join(parts)


def _inconclusive_text(ctx: Context, c: Candidate) -> str:
    if not ctx.states:
        return (
            "No rank is missing or different. gloo records no start or completion state, so a stalled transport "
            "cannot be told from a peer outside the dumps (a rank of another job, a process that is not a member)."
        )
    if not ctx.timing:
        return (
            "Without TORCH_NCCL_ENABLE_TIMING the dumps have no start times: 'scheduled' only means 'not "
            "completed', so a network hang (every member inside it) cannot be told from a GPU hang on one rank "
            "(that rank never started it). Re-run with TORCH_NCCL_ENABLE_TIMING=1 to tell them apart."
        )
    return (
        "The ranks agree, and each one's stream was still busy with earlier work. The dumps do not say which "
        "rank's GPU is behind (look at the collectives before it and at the GPUs)."
    )


def _prev_state(ctx: Context, c: Candidate) -> str:
    from ..align.groups import tail_entry
    from ..trace.summarize import STATE_NAMES

    pg = ctx.traces[c.culprits[0]].pgs.get(c.group.key)
    prev = tail_entry(pg, c.seq - 1) if pg is not None else None
    if prev is None or prev.state < 0:
        return ""
    return f" (its previous collective #{c.seq - 1} is '{STATE_NAMES[prev.state]}')"


def _op_of(ctx: Context, rank: int, key: str, seq: int) -> str:
    sig = sig_at(ctx.traces, rank, key, seq)
    s = ctx.details.get(sig) if sig is not None else None
    return at(op_short(s.op), seq) if s else f"collective #{seq}"


def _quiet(ctx: Context, c: Candidate, r: int) -> str:
    """How long before the others the idle rank's last call was created (on its peers' clock: said so)."""
    pg = ctx.traces[r].pgs.get(c.group.key)
    mine = pg.tail[-1].created_ns if pg is not None and pg.tail else 0
    peers = [ctx.created(w, c.group.key, c.seq) for w in _waiting(c)[:8]]
    peer_t = min((t for t in peers if t), default=0)
    step = _step_interval(ctx, c)
    if peer_t and mine and peer_t - mine > max(1e9, 20 * step * 1e9):
        gap = (peer_t - mine) / 1e9
        more = f" (they usually issue one every {step:.3f} s)" if step else ""
        return f" Its last collective was created {gap:.2f} s before the others entered #{c.seq}{more}."
    return ""


def _step_interval(ctx: Context, c: Candidate) -> float:
    for r in _waiting(c)[:4]:
        pg = ctx.traces[r].pgs.get(c.group.key)
        if pg is None or len(pg.tail) < 3:
            continue
        times = [t.created_ns for t in pg.tail[-16:] if t.created_ns]
        diffs = [(b - a) / 1e9 for a, b in itertools.pairwise(times) if b >= a]
        if diffs:
            return float(statistics.median(diffs))
    return 0.0


def _ended_text(m: Manifest | None, rank: int) -> str:
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


def exit_known(m: Manifest | None, ranks: list[int]) -> bool:
    """Does the manifest already state how every one of these ranks ended?"""
    return bool(ranks) and all(_ended_text(m, r) for r in ranks)


# --- the short form -------------------------------------------------------------------------------------------
def short(ctx: Context, c: Candidate, manifest: Manifest | None) -> str:
    """The verdict in at most 120 characters: what, who (with the op they issued), where ("collective #N
    of pg X": the number counts the group's collectives, not calls of one op or training steps)."""
    who, op, where = ranks_text(c.culprits), op_short(c.op), f"collective #{c.seq} of {c.group.label}"
    k = c.kind
    if k == CulpritKind.crashed:
        ended = _ended_text(manifest, c.culprits[0]) if c.culprits else ""
        code = ""
        if "exit code" in ended:
            code = ", exit " + ended.split("exit code", 1)[1].strip().rstrip(".")
        text = f"{who} crashed (no dump{code}); the others wait in {op}, {where}"
    elif k == CulpritKind.cpu_stuck:
        text = f"{who} CPU-stuck: never enqueued {op}, {where}, that the others wait in"
    elif k == CulpritKind.took_another_path:
        text = f"{who} took another path: skipped {op}, {where}"
    elif k == CulpritKind.extra_call:
        text = f"{who} issued an extra {op_short(culprit_op(ctx, c))} at {where}"
    elif k == CulpritKind.gpu_hang:
        text = f"GPU hang on {who}: {op}, {where}, never started there"
    elif k == CulpritKind.network_hang:
        text = f"network hang: every member started {op}, {where}, none completed"
    elif k == CulpritKind.transport_stall:
        text = f"transport stall: {op}, {where}, not completed on {who}, completed on others"
    elif k == CulpritKind.mismatched_call:
        mine = op_short(culprit_op(ctx, c))
        if c.category == Category.desync and c.d is not None and c.d.balance:
            whose = (
                f"{who} disagree{'s' if len(c.culprits) == 1 else ''}"
                if c.culprits
                else "the members disagree"
            )
            text = f"desync: {whose} on the root of {op}, {where}"
        elif c.category == Category.desync and mine != op:
            text = f"desync: {who} issued {mine} where the others issued {op}, {where}"
        else:
            text = f"{kind_words(ctx, c)}: {who} at {mine}, {where}"
    elif c.category == Category.inconclusive and c.states.get("unknown"):
        text = f"inconclusive: no usable dump from {ranks_text(c.states['unknown'])}; {op}, {where}"
    elif c.category == Category.inconclusive:
        text = f"inconclusive: every member waits in {op}, {where}"
    else:
        text = f"{c.category.value.replace('_', ' ')} at {op}, {where}" + (f": {who}" if c.culprits else "")
    return _cut(text)


def _cut(text: str) -> str:
    return text if len(text) <= SHORT_MAX else text[: SHORT_MAX - 3].rstrip() + "..."
