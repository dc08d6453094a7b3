"""Where the ranks stopped agreeing, and why: the root, its category, its culprits and what they did.

Read top to bottom, this file is every rule that decides a verdict's category (one file by design, so it
runs under 500 lines).

1. Per process group, one candidate: the earlier of
   - the group's first disagreement (:mod:`.align`): another collective, tensor count, dtype or size at
     the same sequence number, a broken balance (:mod:`.rules`), or members that never enqueued what the
     others did; and
   - its *open point*: the earliest collective some member had not completed when it dumped. Ranks keep
     enqueuing behind a stuck collective, so the newest entries say nothing; the open point does.
2. Each candidate is classified (:func:`_mismatch` and :func:`_at_point`):
   - a mismatch is a desync / tensor_count_mismatch / dtype_mismatch / size_mismatch; the odd ranks skipped
     a call (took_another_path), issued an extra one (extra_call) or issued another one (mismatched_call),
     as the record after it (or the group's history) shows. Between two equal sides the side whose own sizes
     cannot be right, or whose call the group never issues, is the culprit; else both are named.
   - a member that never enqueued the collective: no dump -> crashed; idle (nothing in flight) -> cpu_stuck;
     what it enqueued after its last call here is not what it always did -> took_another_path (it moved
     on); blocked in another group's collective -> not a culprit here: a *wait-for edge* to that group;
     waiting in an open p2p transfer (a recv whose data never came) with nothing after it completed -> it
     cannot enqueue anything behind it: an edge to that transfer's finding (same group or another).
     When the absent members are as many as the present ones or more, the present ones went ahead: they
     issued an extra call only if their call is one the group never issued; else the absent ones' states
     decide (idle, blocked, moved on); else the verdict says it cannot decide.
   - everyone enqueued it and some did not complete it: members queued behind another group's collective
     -> edges; the rest by state: scheduled where peers started or completed -> gpu_hang (hardware, only
     with timing); started by every member, completed by none -> network_hang (hardware; no culprit rank:
     the evidence singles out none, the members' nodes are the suspects); completed by some, still in it on
     others -> transport_stall (not hardware; the culprits are the stalled side: the ranks that took part
     and did not complete);
     no member completed it and the dumps have no start times, or nobody started it -> inconclusive.
     gloo records no states: every member in flight is inconclusive.
   - members without a dump while dumped members wait -> crashed; a member whose only file could not be
     read -> unknown (it wrote something: why it is absent is not known). A member without a usable dump is
     never evidence of what it issued: it counts for no side of an extra call, and when as many ranks of the
     world left no usable dump as left one, none of them is named: the verdict is inconclusive and names
     them as unknown (one dump of four says what that rank issued, nothing of the other three).
   - a send without its recv: the peer that never posted its half is crashed, CPU-stuck or blocked in a
     collective or an earlier transfer (an edge: a rank blocked in a recv cannot post its next send); an open
     pair reads by its states like a collective (recv scheduled while the send started: GPU hang on the
     receiver; both started, none completed: network hang, no culprit rank); a pair that disagrees on sizes
     or dtypes names the side that departs from the direction's earlier transfers, else both ranks.
3. The root is a candidate no other candidate explains. A candidate is explained when it waits only on
   ranks blocked in other candidates' groups (and names no culprit of its own). Several roots: the earliest
   (on one rank's clock where they share a rank; a p2p finding by that rank's record ids). A cycle of waiting with no history to break it is
   reported as undecided.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..align.groups import ABSENT, Disagreement, GroupInfo, tail_entry
from ..align.history import new_transition, novel, shift, sig_at
from ..align.p2p import entries_of, open_transfer, transfer_key
from ..base.textfmt import ranks_text
from ..trace.rules import rule_for, syntax_problem
from ..trace.summarize import STATE_CODES, EntrySig, RankTrace
from ..trace.tail_rows import finished, first_open
from ..trace.timeline import Status, Step, Timeline
from ..verdict import Category, CulpritKind

_COMPLETED, _STARTED = STATE_CODES["completed"], STATE_CODES["started"]


@dataclass
class Candidate:
    """A group's earliest finding, classified."""

    group: GroupInfo
    seq: int
    op: str
    category: Category
    kind: CulpritKind
    culprits: list[int]
    d: Disagreement | None = None
    states: dict[str, list[int]] = field(default_factory=dict)  # completed/started/scheduled/absent/no dump
    statuses: dict[int, Status] = field(default_factory=dict)  # why each absent member is absent
    edges: dict[int, Step] = field(default_factory=dict)  # waited-on rank -> the other group's call it is in
    shift: str = ""  # "skipped" | "extra"
    undecided: bool = False  # the evidence names no side: every side is listed
    silent: bool = False  # every member went on past it: no hang, wrong results
    timing: bool = True  # start times present (TORCH_NCCL_ENABLE_TIMING)
    note: str = ""  # a fact the wording cites (a broken balance, a rank's own impossible sizes)
    when: int = 0
    # ranks whose nodes are suspect where the evidence singles out no rank (a network hang: every member in it)
    suspects: list[int] = field(default_factory=list)
    chain: str = ""  # a p2p finding: its transfer's key (p2p.transfer_key), what edges into it name
    # a p2p finding: rank -> (recorder, record id) of its entry there, to order it on a rank's own record
    marks: dict[int, tuple[str, int]] = field(default_factory=dict)

    @property
    def hardware(self) -> bool:
        return self.category in (Category.gpu_hang, Category.network_hang)


class Context:
    """The world as the root search reads it; timelines are built once per rank, on demand."""

    def __init__(
        self,
        traces: dict[int, RankTrace],
        details: dict[int, EntrySig],
        groups: dict[str, GroupInfo],
        world: list[int] | None = None,
        unreadable: set[int] | None = None,
    ):
        self.traces, self.details, self.groups = traces, details, groups
        self.world = world if world is not None else sorted(traces)
        #: ranks of the world whose files could not be used (no evidence: unknown, never "crashed")
        self.unreadable = (unreadable or set()) - set(traces)
        self._timelines: dict[int, Timeline] = {}
        self.timing = any(t.has_timing for t in traces.values())
        self.states = any(t.has_states for t in traces.values())

    @property
    def few_dumps(self) -> bool:
        """As many ranks of the world left no usable dump as left one: their absence singles out none."""
        return len(set(self.world) - set(self.traces)) >= len(self.traces)

    def timeline(self, rank: int) -> Timeline:
        tl = self._timelines.get(rank)
        if tl is None:
            tl = self._timelines[rank] = Timeline(self.traces[rank])
        return tl

    def op(self, g: GroupInfo, seq: int, ranks: list[int] | None = None) -> str:
        for r in ranks if ranks is not None else g.dumped:
            sig = sig_at(self.traces, r, g.key, seq)
            if sig is not None and sig in self.details:
                return self.details[sig].op
        return "?"

    def created(self, rank: int, key: str, seq: int) -> int:
        pg = self.traces[rank].pgs.get(key)
        t = tail_entry(pg, seq) if pg is not None else None
        return t.created_ns if t is not None else 0


# --- 1. one candidate per group ---------------------------------------------------------------------------
def candidates(ctx: Context, hard: dict[str, list[Disagreement]], p2p: list[Candidate]) -> list[Candidate]:
    out = list(p2p)
    for key, g in ctx.groups.items():
        firsts = [d for d in hard.get(key, []) if not d.p2p]
        d = firsts[0] if firsts else None
        point = open_point(ctx, g)
        if d is not None and (point is None or d.seq <= point):
            absent_only = d.category == Category.missing_rank or d.majority_absent
            found = _at_point(ctx, g, d.seq, d) if absent_only else _mismatch(ctx, g, d)
            if found is not None:
                out.append(found)
        elif point is not None:
            c = _at_point(ctx, g, point, None)
            if c is not None:
                out.append(c)
    return [c for c in out if c is not None]


def open_point(ctx: Context, g: GroupInfo) -> int | None:
    """The earliest sequence number a dumped member enqueued and had not completed when it dumped."""
    best: int | None = None
    for r in g.dumped:
        t = ctx.traces[r]
        pg = t.pgs.get(g.key)
        if pg is None:
            continue
        # read from the tail's columns when it is held as one; a row left open before calls that finished is done
        seq = first_open(pg.tail, t.has_states, pg.last_completed if pg.status_known else -1)
        if seq is not None:
            best = seq if best is None else min(best, seq)
    return best


# --- 2a. a different call at the same point ---------------------------------------------------------------
def _mismatch(ctx: Context, g: GroupInfo, d: Disagreement) -> Candidate:
    culprits = list(d.odd)
    undecided = False
    note = d.balance
    if d.balance:
        undecided = not culprits
    elif d.tie:
        culprits, undecided, note = _break_tie(ctx, g, d)
        if not undecided:  # the other side is the reference
            views = sorted(
                d.views,
                key=lambda v: (v.sig is not ABSENT and bool(set(v.ranks) & set(culprits)), v.sig is ABSENT),
            )
            d = replace(d, views=views, odd=sorted(culprits))
    how = shift(ctx.traces, d) if not d.balance else ""
    kind = (
        CulpritKind.took_another_path
        if how.startswith("skipped")
        else CulpritKind.extra_call
        if how.startswith("extra")
        else CulpritKind.mismatched_call
    )
    went_on = all(
        (pg := ctx.traces[r].pgs.get(g.key)) is not None and pg.last_enqueued > d.seq
        for v in d.views
        for r in v.ranks
    ) and not any(v.sig is ABSENT for v in d.views)
    ref = d.views[0]
    op = ctx.details[ref.sig].op if ref.sig is not None and ref.sig in ctx.details else "?"
    return Candidate(
        g,
        d.seq,
        op,
        d.category,
        kind,
        sorted(culprits),
        d,
        shift=how,
        undecided=undecided,
        silent=went_on,
        note=note,
        when=_first_time(ctx, g, d.seq),
        timing=ctx.timing,
    )


def _break_tie(ctx: Context, g: GroupInfo, d: Disagreement) -> tuple[list[int], bool, str]:
    """Two sides as large: the side whose own sizes cannot be right for the group, else the side that
    issued what the group never issued before; else both, undecided."""
    sides = [v for v in d.views if v.sig is not ABSENT]
    wrong = []
    for v in sides:
        sig = ctx.details.get(v.sig) if v.sig is not None else None
        if sig is None:
            continue
        problem = syntax_problem(rule_for(sig.op), len(g.members), sig.input_sizes, sig.output_sizes)
        if problem and not sig.varying:
            wrong.append((v, problem))
    if len(wrong) == 1:
        v, problem = wrong[0]
        return list(v.ranks), False, f"{ranks_text(v.ranks)}: {problem}"
    tests = (
        (novel, "issued a call this group never issued before"),
        (new_transition, "followed its previous call with one it never issued after it before"),
    )
    for test, said in tests:
        odd = [v for v in sides if test(ctx.traces, v.ranks[0], g.key, d.seq)]
        if len(odd) == 1:
            return list(odd[0].ranks), False, f"{ranks_text(odd[0].ranks)} {said}"
    return sorted(r for v in d.views for r in v.ranks), True, ""


# --- 2b. who never enqueued it, and who did not complete it -------------------------------------------------
def _at_point(ctx: Context, g: GroupInfo, s: int, d: Disagreement | None) -> Candidate | None:
    states: dict[str, list[int]] = {
        "completed": [],
        "started": [],
        "scheduled": [],
        "absent": [],
        "no dump": [],
    }
    states["no dump"] = list(g.no_dump)
    edges: dict[int, Step] = {}
    for r in g.dumped:
        t = ctx.traces[r]
        pg = t.pgs.get(g.key)
        if pg is None or pg.last_enqueued < s:
            states["absent"].append(r)
            continue
        e = tail_entry(pg, s)
        if e is None or e.state == _COMPLETED or e.retired is True or s <= finished(pg):
            # a call followed by calls of the group that finished is done (tail_rows.done_through)
            states["completed"].append(r)
            continue
        states["started" if e.state == _STARTED else "scheduled"].append(r)
        bp = ctx.timeline(r).blocking()
        if (
            bp is not None
            and bp.key != g.key
            and bp.record_id < e.record_id
            and t.pgs[bp.key].backend == pg.backend  # record ids order calls of one recorder only
        ):
            edges[r] = bp  # queued behind a collective of another group it has not completed
    present = states["completed"] + states["started"] + states["scheduled"]
    op = ctx.op(g, s, present)
    base = Candidate(
        g,
        s,
        op,
        Category.missing_rank,
        CulpritKind.unknown,
        [],
        d,
        states,
        edges=edges,
        when=_first_time(ctx, g, s),
        timing=ctx.timing,
    )
    missing = states["absent"] + states["no dump"]
    if not present:
        return None
    if missing:
        return _absent(ctx, base, present)
    return _by_state(ctx, base)


def _absent(ctx: Context, c: Candidate, present: list[int]) -> Candidate:
    g = c.group
    absent, dead = c.states["absent"], c.states["no dump"]
    backend = _backend(ctx, g, present)
    c.statuses = {r: ctx.timeline(r).status(g.key, backend) for r in absent}
    c.statuses.update({r: Status("unreadable" if r in ctx.unreadable else "no_dump") for r in dead})
    if len(absent) >= len(present) and novel(ctx.traces, present[0], g.key, c.seq):
        # the few went ahead with a call the group never issues: they issued an extra one
        c.category, c.kind, c.culprits = Category.desync, CulpritKind.extra_call, sorted(present)
        c.note = "the call is one this group never issued before"
        return c
    for r, st in c.statuses.items():
        held = _held(ctx, r) if st.what in ("idle", "blocked") else None
        if held is not None:
            # it waits in an open transfer (a recv whose data never came) recorded before any collective it
            # has not completed: it cannot enqueue anything behind it, this call included, so its absence is
            # a consequence of that transfer (a wait-for edge to its finding), in this group or another
            c.statuses[r] = st = Status("blocked", held, st.history)
        if st.what == "blocked" and st.where is not None and st.where.key != g.key:
            c.edges[r] = st.where
    culprits = sorted(r for r, st in c.statuses.items() if st.what != "blocked")
    if ctx.few_dumps:
        culprits = [r for r in culprits if r not in dead]
        if not culprits and not c.edges:
            return _unknown(c, dead)
    kinds = {c.statuses[r].what for r in culprits}
    c.culprits = culprits
    for what, kind in (
        ("moved_on", CulpritKind.took_another_path),
        ("idle", CulpritKind.cpu_stuck),
        ("no_dump", CulpritKind.crashed),
    ):
        if what in kinds:
            c.kind = kind
            break
    return c


def _unknown(c: Candidate, ranks: list[int]) -> Candidate:
    """Too few dumps to name anyone: inconclusive, with the ranks whose record is missing as unknown."""
    c.category, c.kind, c.culprits = Category.inconclusive, CulpritKind.unknown, []
    c.states["unknown"] = sorted(ranks)
    return c


def _by_state(ctx: Context, c: Candidate) -> Candidate:
    """Everyone enqueued it; some did not complete it."""
    st = c.states
    inside_started = [r for r in st["started"] if r not in c.edges]
    inside_sched = [r for r in st["scheduled"] if r not in c.edges]
    done = st["completed"]
    if c.edges:
        c.kind = CulpritKind.unknown  # they wait for ranks queued behind another group: a consequence
        return c
    if not ctx.states:
        unseen = sorted(set(ctx.world) - set(ctx.traces))
        if not c.group.complete and unseen and ctx.few_dumps:
            return _unknown(c, unseen)
        if not c.group.complete and unseen:
            # gloo's pg_config names no members: the members are the ranks whose entries name the group, so a
            # member without a dump is invisible here; the ranks without a dump are the peers they wait for
            c.kind, c.culprits = CulpritKind.crashed, unseen
            c.statuses = {r: Status("unreadable" if r in ctx.unreadable else "no_dump") for r in unseen}
            if all(r in ctx.unreadable for r in unseen):
                c.kind = CulpritKind.unknown
            c.note = "gloo's pg_config does not list the members: the ranks without a dump may be members"
            return c
        c.category, c.kind, c.culprits = Category.inconclusive, CulpritKind.unknown, []
        return c
    if ctx.timing:
        if inside_sched and (inside_started or done):
            c.category, c.kind, c.culprits = Category.gpu_hang, CulpritKind.gpu_hang, inside_sched
        elif inside_started and not done and not inside_sched:
            # every member started it and none completed it: no rank departs from the others, so none is the
            # culprit; the links and nodes between them are the suspects
            c.category, c.kind, c.culprits = Category.network_hang, CulpritKind.network_hang, []
            c.suspects = inside_started
        elif inside_started and done:
            c.category, c.kind, c.culprits = (
                Category.transport_stall,
                CulpritKind.transport_stall,
                inside_started,
            )
        else:
            c.category, c.kind, c.culprits = Category.inconclusive, CulpritKind.unknown, []
        return c
    not_done = inside_started + inside_sched
    if done and not_done:
        c.category, c.kind, c.culprits = (
            Category.transport_stall,
            CulpritKind.transport_stall,
            sorted(not_done),
        )
    else:
        c.category, c.kind, c.culprits = Category.inconclusive, CulpritKind.unknown, []
    return c


# --- 2c. point-to-point ------------------------------------------------------------------------------------------
_P2P_KINDS = {
    Category.gpu_hang: CulpritKind.gpu_hang,
    Category.network_hang: CulpritKind.network_hang,
    Category.transport_stall: CulpritKind.transport_stall,
    Category.inconclusive: CulpritKind.unknown,
}


def p2p_candidate(ctx: Context, d: Disagreement) -> Candidate:
    """A transfer read as a collective is (:mod:`.p2p`): a half never posted names the peer that did not post
    it, crashed (no dump) or CPU-stuck (idle), unless it waits elsewhere: blocked in an earlier p2p op or a
    collective, it cannot post this one, so the half is a consequence (a wait-for edge); an open pair reads by
    its states (GPU hang on the side that never started, network hang with no culprit rank); a pair whose
    payloads disagree names the side that departs from the direction's earlier transfers (else both)."""
    groups = ctx.groups
    g = groups.get(d.pg) or GroupInfo(d.pg, d.pg.split("/", 1)[0].split("@", 1)[0], "", [], "p2p", [], [], -1)
    first = d.views[0]
    sig = ctx.details.get(first.sig) if first.sig is not None else None
    op = sig.op if sig else "p2p"
    c = Candidate(g, d.seq, op, d.category, CulpritKind.mismatched_call, sorted(d.odd), d, when=d.when)
    if d.transfer is not None:
        c.chain = transfer_key((d.pg, *d.transfer))
        for r, e in entries_of(ctx.traces, groups, d).items():
            pg = ctx.traces[r].pgs.get(e.pg)
            c.marks[r] = (pg.backend if pg is not None else "", e.record_id)
    if d.category in _P2P_KINDS:
        c.kind = _P2P_KINDS[d.category]
        src, dst = d.transfer or (first.ranks[0], d.views[-1].ranks[0])
        peer = [r for r in (src, dst) if r not in d.odd]
        if d.category == Category.transport_stall:
            c.states = {"started": list(d.odd), "scheduled": [], "completed": peer}
        elif d.category == Category.gpu_hang:
            c.states = {"started": peer, "scheduled": list(d.odd), "completed": []}
        else:
            c.states = {"started": [src, dst], "scheduled": [], "completed": []}
        if d.category == Category.network_hang:
            c.suspects = [src, dst]  # both ends in it: the link between them (and their nodes) is the suspect
        c.timing = ctx.timing
        return c
    if d.category == Category.missing_rank:
        waiter, culprit = first.ranks[0], d.odd[0]
        c.states = {"started": [waiter], "absent": [culprit]}
        if culprit not in ctx.traces and (ctx.few_dumps or culprit in ctx.unreadable):
            return _unknown(c, [culprit])  # its record is missing: what it posted is not known
        if culprit not in ctx.traces:
            c.kind = CulpritKind.crashed
            return c
        bp = ctx.timeline(culprit).blocking()
        held = _held(ctx, culprit)
        if held is not None:
            # blocked in an earlier transfer (a recv whose data never came): it cannot post this half
            c.kind, c.culprits = CulpritKind.unknown, []
            c.edges = {culprit: held}
        elif bp is None:
            c.kind = CulpritKind.cpu_stuck
        elif bp.key in groups and bp.key != d.pg:
            c.kind, c.culprits = CulpritKind.unknown, []
            c.edges = {culprit: bp}
        else:
            c.kind = CulpritKind.unknown
    return c


def _held(ctx: Context, r: int) -> Step | None:
    """The open transfer rank ``r`` waits in, as a step whose key is the transfer's finding: its earliest p2p
    op not completed, when no collective it has not completed comes before it (record ids order the calls of
    one recorder: NCCL records p2p ops and collectives in one ring) and nothing after it completed (a rank
    that went on past it was not held there)."""
    if r not in ctx.traces:
        return None
    trace = ctx.traces[r]
    found = open_transfer(trace, ctx.groups)
    if found is None:
        return None
    t, e = found
    if any(x.record_id > e.record_id and x.state == _COMPLETED for x in trace.p2p):
        return None
    bp = ctx.timeline(r).blocking()
    if bp is not None and bp.record_id < e.record_id:
        return None
    pg = trace.pgs.get(e.pg)
    backend = pg.backend if pg is not None else None
    for s in ctx.timeline(r).steps.get(backend or "", []):
        if s.record_id > e.record_id and s.done is True:
            return None  # a collective it enqueued after the transfer completed: the rank went on
    return Step(e.record_id, transfer_key(t), e.p2p_seq, e.sig, False)


# --- 3. the root ----------------------------------------------------------------------------------------------
def root(ctx: Context, cands: list[Candidate]) -> tuple[Candidate | None, list[Candidate]]:
    """The root and the other candidates (its consequences, or unrelated)."""
    if not cands:
        return None, []
    by_key = {c.group.key: c for c in cands if c.d is None or not c.d.p2p}
    by_key.update({c.chain: c for c in cands if c.chain})  # a rank blocked in a transfer waits on its finding
    culprits_of = {k: set(c.culprits) for k, c in by_key.items()}

    def explained(c: Candidate) -> bool:
        if not c.edges:
            return False
        targets = {s.key for s in c.edges.values()}
        if not all(k in by_key for k in targets):
            return False
        covered = set().union(*(culprits_of[k] for k in targets))
        return set(c.culprits) <= covered

    roots = [c for c in cands if not explained(c)]
    if not roots:  # every candidate waits on another: a cycle the history could not break
        # the ranks absent from the smallest group's call went on to a call of another group instead (where
        # they are blocked) while its members wait in it: the rank that never enqueued the call its peers wait
        # in is the culprit, not the one waiting for it (a subgroup's call is the narrower decision: a
        # rank-dependent branch around it is the usual bug); without such ranks the cycle stays undecided
        first = min(cands, key=lambda c: (len(c.group.members), c.group.key))
        went_elsewhere = sorted(r for r, st in first.statuses.items() if r in first.edges and st.what == "blocked")
        if first.category == Category.missing_rank and went_elsewhere:
            first.culprits, first.kind = went_elsewhere, CulpritKind.took_another_path
        else:
            first.undecided = True
            first.culprits = sorted(first.edges) or first.culprits
            first.kind = CulpritKind.unknown
        roots = [first]
    best = roots[0]
    for c in roots[1:]:
        if _earlier(ctx, c, best):
            best = c
    return best, [c for c in cands if c is not best]


def _earlier(ctx: Context, a: Candidate, b: Candidate) -> bool:
    """Is ``a`` earlier than ``b``? On one rank's own clock when a rank recorded both, else the earliest
    creation time of each; a software finding before a state one at the same time."""
    if a.marks or b.marks:
        # a p2p finding's seq counts that rank's p2p ops (p2p_seq_id), not its group's collectives: on a rank
        # that recorded both, its own record ids order them (one recorder writes p2p ops and collectives
        # alike), never a collective of the same number nor another rank's clock
        for r in sorted(set(_ranks(a)) & set(_ranks(b))):
            ra, rb = _record(ctx, a, r), _record(ctx, b, r)
            if ra is not None and rb is not None and ra[0] == rb[0] and ra[1] != rb[1]:
                return ra[1] < rb[1]
        if a.when and b.when and a.when != b.when:
            return a.when < b.when
        return (a.hardware, a.group.key) < (b.hardware, b.group.key)
    common = sorted(set(a.group.dumped) & set(b.group.dumped))
    for r in common:
        ta, tb = ctx.created(r, a.group.key, a.seq), ctx.created(r, b.group.key, b.seq)
        if ta and tb:
            return ta < tb
    if a.when and b.when and a.when != b.when:
        return a.when < b.when
    return (a.hardware, a.group.key) < (b.hardware, b.group.key)


def _ranks(c: Candidate) -> list[int]:
    return sorted(c.marks) if c.chain else list(c.group.dumped)


def _record(ctx: Context, c: Candidate, r: int) -> tuple[str, int] | None:
    """(recorder, record id) of candidate ``c``'s entry on rank ``r``."""
    if c.chain:
        return c.marks.get(r)
    pg = ctx.traces[r].pgs.get(c.group.key) if r in ctx.traces else None
    t = tail_entry(pg, c.seq) if pg is not None else None
    return (pg.backend, t.record_id) if pg is not None and t is not None else None


# --- helpers --------------------------------------------------------------------------------------------------
def _first_time(ctx: Context, g: GroupInfo, seq: int) -> int:
    times = [ctx.created(r, g.key, seq) for r in g.dumped[:64]]
    return min((t for t in times if t), default=0)


def _backend(ctx: Context, g: GroupInfo, ranks: list[int]) -> str:
    for r in ranks:
        pg = ctx.traces[r].pgs.get(g.key)
        if pg is not None:
            return pg.backend
    return ""
