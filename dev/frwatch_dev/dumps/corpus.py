"""The conformance corpus: every collective type torch records, crossed with the ways a job goes wrong,
each case with its truth. Built with the public dump builder; the truth of a case is written from the
meaning of its fault (what the culprit did, what the dumps can prove), never from frwatch's answer.

    for case in cases():
        verdict = analyze_dumps(case.files(), world_size=case.world_size)
        assert not check(verdict, case.truth), case.name

Each collective type runs in a training step with a companion collective in the same group (so a skipped
or extra call shows as a different call), in one of four layouts: one group; split groups sharing a
name; a subgroup beside the default group; two subgroups beside it (three groups). Faults strike the
culprit at step 4. State classes come with and without TORCH_NCCL_ENABLE_TIMING, clean (nothing enqueued
after the stuck call) and queued (ranks enqueue on behind it). gloo variants cover what gloo records.

Over 400 lines by choice: it is the table of cases and their truths; one module keeps every truth in view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from frwatch_analyzers.verdict import Category, CulpritKind, Status, Verdict

from .kinds import records
from .program import DEFAULT_GROUP, Dump, World, world

STEPS = 6
FAULT_STEP = 4
SIZE = 4


@dataclass(frozen=True)
class Truth:
    """What a correct verdict says about a case (None: not checked)."""

    status: Status
    category: Category
    culprits: tuple[int, ...] = ()
    kind: CulpritKind | None = None
    group: str | None = None  # the earliest branch's process group name
    seq: int | None = None
    hardware: bool = False
    files: int = 0  # dump_files the verdict must list (a rank with more than one file)


@dataclass(frozen=True)
class Case:
    name: str
    collective: str
    klass: str
    build: Callable[[], list[tuple[str, int, Dump]]] = field(repr=False, compare=False)
    truth: Truth
    world_size: int = SIZE
    #: analyzed through its files on disk (each file's rank from its name; corpus_evidence.verdict_of)
    on_disk: bool = False
    #: ``(file name, rank)`` of files beside the dumps that are no dump (garbage): written only on disk
    garbage: tuple[tuple[str, int], ...] = ()

    def files(self) -> list[tuple[str, int, Dump]]:
        """``[(file name, rank, dump)]``: one per rank, two for a rank with two dumps."""
        return self.build()


@dataclass(frozen=True)
class _Type:
    name: str  # the builder kind
    companion: str  # a second collective of each step in the same group, then a barrier (broadcast)
    kw: dict[str, object] = field(default_factory=dict)
    gloo: bool = True


def _splits(n: int) -> Callable[[int], list[list[int]]]:
    """Uneven all_to_all splits that change every step, as token routing does."""
    return lambda step: [[(7 * i + 3 * j + step) % 11 + 1 for j in range(n)] for i in range(n)]


# every collective type torch records, with what makes its legitimate per-rank differences show
TYPES = [
    _Type("all_reduce", "all_gather"),
    _Type("reduce", "all_reduce", {"root": 1}),
    _Type("broadcast", "all_reduce", {"root": 1}),
    _Type("all_gather", "all_reduce"),
    _Type("all_gather_into_tensor", "all_reduce"),
    _Type("all_gather_into_tensor_coalesced", "all_reduce", {"tensors": [[1024], [2048]]}, gloo=False),
    _Type("all_gather_uneven", "all_reduce", gloo=False),
    _Type("reduce_scatter", "all_reduce", gloo=False),
    _Type("reduce_scatter_tensor", "all_gather"),
    _Type("reduce_scatter_tensor_coalesced", "all_reduce", {"tensors": [[1024], [2048]]}, gloo=False),
    _Type("reduce_scatter_uneven", "all_reduce", gloo=False),
    _Type("all_to_all", "all_reduce", {"uneven": True}),
    _Type("all_to_all_single", "all_reduce", {"uneven": True}),
    _Type("gather", "all_reduce", {"root": 0}),
    _Type("scatter", "all_reduce", {"root": 0}),
    _Type("barrier", "all_reduce"),
    _Type("all_reduce_coalesced", "all_gather"),
    _Type("coalesced", "all_gather", {"parts": ["all_reduce", "all_reduce"]}, gloo=False),
]


@dataclass(frozen=True)
class _Layout:
    name: str
    group: str  # where the collective under test runs
    members: tuple[int, ...]  # its members (the culprit's part, for split groups)
    culprit: int
    declare: Callable[[World], World]
    pg_name: str


LAYOUTS = [
    _Layout("one group", DEFAULT_GROUP, (0, 1, 2, 3), 2, lambda w: w, "0"),
    _Layout("split groups", "tp", (2, 3), 2, lambda w: w.split("tp", [[0, 1], [2, 3]]), "1"),
    _Layout("subgroup", "sub", (0, 1, 2), 1, lambda w: w.group("sub", ranks=[0, 1, 2]), "1"),
    _Layout(
        "three groups",
        "ep",
        (1, 2, 3),
        3,
        lambda w: w.group("tp", ranks=[0, 1]).group("ep", ranks=[1, 2, 3]),
        "2",
    ),
]
GLOO_LAYOUTS = [LAYOUTS[0], LAYOUTS[3]]


def _program(w: World, t: _Type, lay: _Layout) -> World:
    kw = dict(t.kw)
    if kw.pop("uneven", False):
        kw["splits"] = _splits(len(lay.members))
    if t.name == "coalesced":
        parts = kw.pop("parts")
        assert isinstance(parts, list)

        def step(x: World) -> World:
            x = x.coalesced(parts, group=lay.group).collective(t.companion, group=lay.group)
            x = x.collective(_third(t), group=lay.group)
            return x if lay.group == DEFAULT_GROUP else x.all_reduce()

        return lay.declare(w).repeat(STEPS, step)
    if t.name.endswith("_uneven"):
        kw["uneven"] = [[1024 * (i + 1)] for i in range(len(lay.members))]

    def body(x: World) -> World:
        x = x.collective(t.name, group=lay.group, **kw).collective(t.companion, group=lay.group)  # type: ignore[arg-type]
        x = x.collective(_third(t), group=lay.group)
        if lay.name == "three groups":
            x = x.all_reduce(group="tp")
        return x if lay.group == DEFAULT_GROUP else x.all_reduce()

    return lay.declare(w).repeat(STEPS, body)


def _third(t: _Type) -> str:
    """The step's third collective: a cycle of three tells a skipped call from an extra one at a hang."""
    return "barrier" if "barrier" not in (t.name, t.companion) else "broadcast"


def _seq_t(step: int) -> int:
    return 3 * (step - 1) + 1


def _other_op(t: _Type) -> str:
    for k in ("reduce", "broadcast", "all_to_all_single"):
        if k not in (t.name, t.companion, _third(t)):
            return k
    return "barrier"


def _bigger(w: World, t: _Type, lay: _Layout) -> tuple[list[list[int]], list[list[int]]]:
    """The culprit's sizes at the fault, wrong: its inputs (and, where outputs mirror them, its outputs)
    hold twice the elements; an all_to_all sends twice what its peers expect."""
    op = next(o for o in w.program if o.kind == t.name and o.group == lay.group)
    recs = records(op.payload(0), backend=w.backend, n=len(lay.members), me=lay.members.index(lay.culprit))
    recs = recs[:1]  # the only entry, or a region's first op
    r = recs[0]
    ins = [[2 * s[0], *s[1:]] if s else [] for s in r.input_sizes]  # [] : NCCL's undefined placeholder
    outs = [list(s) for s in r.output_sizes]
    if t.name not in ("all_to_all", "all_to_all_single", "gather"):
        outs = [[2 * s[0], *s[1:]] if s else [] for s in r.output_sizes]
    return ins, outs


def _count(w: World, t: _Type, lay: _Layout) -> int:
    op = next(o for o in w.program if o.kind == t.name and o.group == lay.group)
    recs = records(op.payload(0), backend=w.backend, n=len(lay.members), me=lay.members.index(lay.culprit))
    if len(recs) > 1:
        return len(recs)  # a region: one op more
    return max(len(recs[0].input_sizes), len(recs[0].output_sizes)) + 1


def _files(
    w: World, *, extra: Callable[[], list[tuple[str, int, Dump]]] | None = None
) -> Callable[[], list[tuple[str, int, Dump]]]:
    def build() -> list[tuple[str, int, Dump]]:
        out = [(f"nccl_trace_rank_{r}", r, d) for r, d in sorted(w.dumps().items())]
        return out + (extra() if extra else [])

    return build


def _collective_cases(t: _Type, lay: _Layout, backend: str, index: int) -> list[Case]:
    base = world(SIZE, backend=backend)  # type: ignore[arg-type]
    w = _program(base, t, lay)
    r, g, members = lay.culprit, lay.group, lay.members
    s, s_c = _seq_t(FAULT_STEP), _seq_t(FAULT_STEP) + 1

    def case(klass: str, world_: World, truth: Truth, variant: str = "", build=None) -> Case:  # type: ignore[no-untyped-def]
        name = f"{t.name}/{klass}" + (f"/{variant}" if variant else "") + f" [{backend}, {lay.name}]"
        return Case(name, t.name, klass, build or _files(world_), truth)

    def problem(
        cat: Category, kind: CulpritKind, culprits: tuple[int, ...] = (r,), seq: int = s, **kw: object
    ) -> Truth:
        return Truth(Status.problem, cat, culprits, kind, lay.pg_name, seq, **kw)  # type: ignore[arg-type]

    mismatch = CulpritKind.mismatched_call
    out = [case("healthy", w, Truth(Status.healthy, Category.healthy))]
    out.append(
        case("wrong op", w.rank(r).op_at(s, _other_op(t), group=g), problem(Category.desync, mismatch))
    )
    if t.name != "barrier":
        ins, outs = _bigger(w, t, lay)
        culprits = () if t.name == "all_to_all_single" else (r,)
        out.append(
            case(
                "wrong size",
                w.rank(r).sizes_at(s, ins, outs, group=g),
                problem(Category.size_mismatch, mismatch, culprits),
            )
        )
        out.append(
            case(
                "wrong dtype",
                w.rank(r).dtype_at(s, "BFloat16", group=g),
                problem(Category.dtype_mismatch, mismatch),
            )
        )
        out.append(
            case(
                "wrong tensor count",
                w.rank(r).count_at(s, _count(w, t, lay), group=g),
                problem(Category.tensor_count_mismatch, mismatch),
            )
        )
    out.append(
        case("skipped", w.rank(r).skips(s, group=g), problem(Category.desync, CulpritKind.took_another_path))
    )
    out.append(
        case(
            "extra",
            w.rank(r).extra_at(s_c, t.name, group=g),
            problem(Category.desync, CulpritKind.extra_call, seq=s_c),
        )
    )
    out.append(
        case(
            "cpu-stuck", w.rank(r).stops_at(s, group=g), problem(Category.missing_rank, CulpritKind.cpu_stuck)
        )
    )
    out.append(
        case(
            "crashed",
            w.rank(r).stops_at(s, group=g).without_dump(r),
            problem(Category.missing_rank, CulpritKind.crashed),
        )
    )
    snapshot = w.rank(r).stops_at(s, group=g)
    early = w.dumps(upto=len(w.program) // 3)[r]
    out.append(
        case(
            "two dumps",
            snapshot,
            Truth(
                Status.problem, Category.missing_rank, (r,), CulpritKind.cpu_stuck, lay.pg_name, s, files=2
            ),
            "an earlier on-demand dump of the culprit",
            build=_files(snapshot, extra=lambda: [(f"ondemand/nccl_trace_rank_{r}", r, early)]),
        )
    )
    if backend == "gloo":
        return out
    if index % 3 == 0:  # a second recorder: a gloo group beside the NCCL ones
        cpu = world(SIZE, backend="gloo").all_reduce(steps=5, tensors=[[16]])
        out.append(
            case(
                "two dumps",
                w,
                Truth(Status.healthy, Category.healthy, files=2 * SIZE),
                "a gloo recorder beside",
                build=_files(
                    w, extra=lambda: [(f"gloo_trace_rank_{x}", x, d) for x, d in sorted(cpu.dumps().items())]
                ),
            )
        )
    inconclusive = Truth(Status.inconclusive, Category.inconclusive, (), None, lay.pg_name, s)
    for timing, queued in ((True, 0), (True, 3), (False, 2 * (index % 2))):
        q = "queued" if queued else "clean"
        wt = _program(world(SIZE, timing=timing, queued=queued), t, lay)
        v = f"{q}, timing {'on' if timing else 'off'}"
        gpu = problem(Category.gpu_hang, CulpritKind.gpu_hang, hardware=True) if timing else inconclusive
        net = (
            problem(Category.network_hang, CulpritKind.network_hang, (), hardware=True)
            if timing
            else inconclusive
        )
        out.append(case("GPU hang", wt.rank(r).not_started_at(s, group=g), gpu, v))
        out.append(case("network hang", wt.all_started_none_completed_at(s, group=g, ranks=[r]), net, v))
    stalled = _program(world(SIZE, timing=index % 2 == 0, queued=2), t, lay)
    done_on = [m for m in members if m != r]
    out.append(
        case(
            "partial stall",
            stalled.stalls_at(s, completed_on=done_on, group=g),
            problem(Category.transport_stall, CulpritKind.transport_stall),
            f"timing {'on' if index % 2 == 0 else 'off'}",
        )
    )
    return out


def _p2p_cases(kind: str) -> list[Case]:
    def program(w: World) -> World:
        if kind == "send/recv":
            return w.repeat(STEPS, lambda x: x.all_reduce().send(0, 1))
        return w.repeat(STEPS, lambda x: x.all_reduce().batch_isend_irecv([(0, 1), (1, 0)]))

    w = program(world(SIZE))
    out = [
        Case(f"{kind}/healthy [nccl]", kind, "healthy", _files(w), Truth(Status.healthy, Category.healthy))
    ]

    def edited(field_: str, value: object) -> Callable[[], list[tuple[str, int, Dump]]]:
        """Rank 1's last recv changed: the side that departs from every earlier transfer of the pair."""

        def build() -> list[tuple[str, int, Dump]]:
            dumps = w.dumps()
            recv = [
                e for e in dumps[1]["entries"] if e["is_p2p"] and e["profiling_name"].startswith("nccl:recv")
            ][-1]
            recv[field_] = value
            if field_ == "input_dtypes":
                recv["output_dtypes"] = value
            return [(f"nccl_trace_rank_{r}", r, d) for r, d in sorted(dumps.items())]

        return build

    out.append(
        Case(
            f"{kind}/wrong size [nccl]",
            kind,
            "wrong size",
            edited("input_sizes", [[8, 4096, 512]]),
            Truth(Status.problem, Category.size_mismatch, (1,), CulpritKind.mismatched_call, "0"),
        )
    )
    out.append(
        Case(
            f"{kind}/wrong dtype [nccl]",
            kind,
            "wrong dtype",
            edited("input_dtypes", ["Float"]),
            Truth(Status.problem, Category.dtype_mismatch, (1,), CulpritKind.mismatched_call, "0"),
        )
    )

    def unmatched(crash: bool) -> Callable[[], list[tuple[str, int, Dump]]]:
        def build() -> list[tuple[str, int, Dump]]:
            dumps = w.dumps()
            mine = [e for e in dumps[1]["entries"] if e["is_p2p"]]
            last_seq = mine[-1]["p2p_seq_id"]
            dumps[1]["entries"] = [
                e for e in dumps[1]["entries"] if not (e["is_p2p"] and e["p2p_seq_id"] == last_seq)
            ]
            for e in dumps[0]["entries"]:
                if e["is_p2p"] and e["p2p_seq_id"] == last_seq:
                    e.update(state="started", retired=False, time_discovered_completed_ns=None)
                    e.pop("duration_ms", None)
            if crash:
                del dumps[1]
            return [(f"nccl_trace_rank_{r}", r, d) for r, d in sorted(dumps.items())]

        return build

    out.append(
        Case(
            f"{kind}/cpu-stuck [nccl]",
            kind,
            "cpu-stuck",
            unmatched(False),
            Truth(Status.problem, Category.missing_rank, (1,), CulpritKind.cpu_stuck, "0"),
        )
    )
    out.append(
        Case(
            f"{kind}/crashed [nccl]",
            kind,
            "crashed",
            unmatched(True),
            Truth(Status.problem, Category.missing_rank, (1,), CulpritKind.crashed, "0"),
        )
    )
    early = w.dumps(upto=STEPS)[1]
    out.append(
        Case(
            f"{kind}/two dumps [nccl]",
            kind,
            "two dumps",
            _files(w, extra=lambda: [("ondemand/nccl_trace_rank_1", 1, early)]),
            Truth(Status.healthy, Category.healthy, files=2),
        )
    )
    return out


def cases() -> list[Case]:
    """Every case of the corpus (about 370), in a stable order."""
    out: list[Case] = []
    for i, t in enumerate(TYPES):
        out += _collective_cases(t, LAYOUTS[i % len(LAYOUTS)], "nccl", i)
        if t.gloo:
            out += _collective_cases(t, GLOO_LAYOUTS[i % len(GLOO_LAYOUTS)], "gloo", i)
    for kind in ("send/recv", "batch_isend_irecv"):
        out += _p2p_cases(kind)
    from .corpus_evidence import evidence_cases  # it builds on this module's layouts
    from .corpus_recorders import recorder_cases  # every recorder prefix (issue 28)
    from .corpus_roots import all_to_all_cases, rooted_cases  # they build on this module's Case and Truth
    from .corpus_states import cases as state_cases

    return out + rooted_cases() + all_to_all_cases() + state_cases() + evidence_cases() + recorder_cases()


def check(v: Verdict, truth: Truth) -> list[str]:
    """How a verdict differs from the truth ([]: right)."""
    wrong = []
    if v.status != truth.status:
        wrong.append(f"status {v.status.value} != {truth.status.value}")
    if v.category != truth.category:
        wrong.append(f"category {v.category.value} != {truth.category.value}")
    if tuple(v.culprit_ranks) != truth.culprits:
        wrong.append(f"culprits {v.culprit_ranks} != {list(truth.culprits)}")
    if truth.kind is not None and v.culprit_kind != truth.kind:
        wrong.append(f"kind {v.culprit_kind} != {truth.kind.value}")
    if v.hardware_class != truth.hardware:
        wrong.append(f"hardware_class {v.hardware_class} != {truth.hardware}")
    b = v.earliest_branch
    if truth.group is not None and (b is None or b.process_group.name != truth.group):
        wrong.append(f"branch group {b.process_group.name if b else None} != {truth.group}")
    if truth.seq is not None and (b is None or b.seq != truth.seq):
        wrong.append(f"branch seq {b.seq if b else None} != {truth.seq}")
    if truth.files and len(v.dump_files) != truth.files:
        wrong.append(f"{len(v.dump_files)} dump_files listed, not {truth.files}")
    if len(v.short) > 120:
        wrong.append(f"short is {len(v.short)} characters")
    return wrong


def classes() -> list[str]:
    """The case classes, in the corpus's order."""
    return list(dict.fromkeys(c.klass for c in cases()))
