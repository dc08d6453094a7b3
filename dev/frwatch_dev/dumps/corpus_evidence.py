"""Conformance cases about the evidence itself: how much of it there is, and under which names.

Partial evidence (issue 24, principle 5). Each rank writes its own dump (torch's DebugInfoWriter: one file
``<TORCH_FR_DUMP_TEMP_FILE><global rank>`` per process, FlightRecorder.cpp), so a missing file says nothing of
what that rank issued; the failing rank is often the one without a dump (pytorch #196968), but so is a rank
whose dump was never collected. Truths:

- one usable dump of four, or two: no rank can be named; inconclusive at the collective the dumped ranks
  wait in (with three of four the rank without a dump is named crashed: the ``crashed`` class of corpus.py);
- a rank whose extra call is past everyone's program, with the others' dumps missing: inconclusive (the
  others' calls are unknown, not "never issued");
- a rank whose only file is garbage, the others waiting for it: that rank is the absent member, of unknown
  kind (it wrote a file: "crashed" is not known); with three garbage files of four, inconclusive.

Names (principle 9). The dump path is truncated on each write unless ``TORCH_FR_DUMP_DYNAMIC_FILE_NAME``
makes every write re-read ``TORCH_FR_DUMP_TEMP_FILE`` (FlightRecorder.cpp ``DebugInfoWriter::write``), so a
person keeps a second dump of a rank under another name: ``nccl_trace_rank_0.final``, ``nccl_trace_rank_0.1``.
Truths: such a file is its rank's and is picked or merged by content (the later dump is used): a waiting
rank's timeout dump kept as ``.final`` or as ``.1`` (read as rank 1's by its trailing number, it would leave
its rank with only its earlier dump) beside an earlier one under torch's name.

The garbage and name cases go through the files (``Case.on_disk``): :func:`verdict_of` writes them to a
folder and runs ``analyze(folder)``, as ``frwatch analyze DIR`` does.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path

from frwatch_analyzers.analyze import analyze, analyze_dumps
from frwatch_analyzers.verdict import Category, CulpritKind, Status, Verdict

from .corpus import FAULT_STEP, LAYOUTS, SIZE, TYPES, Case, Truth, _Layout, _program, _seq_t, _Type
from .program import Dump, World, world

#: What stands for a rank's unusable file (a truncated write: the pickle header and nothing usable).
GARBAGE = b"\x80\x02}q\x00(X\x07"
#: The collective types the evidence cases cover (a rooted, a gathering, an uneven and a plain one).
_TYPES = ("all_reduce", "broadcast", "all_gather_into_tensor", "all_to_all_single", "reduce_scatter_tensor")


def verdict_of(case: Case) -> Verdict:
    """The case's verdict: through its files on disk (``on_disk``: the rank comes from each file's name, and
    the case's garbage files are written beside its dumps), else from its decoded dumps."""
    if not case.on_disk:
        return analyze_dumps(case.files(), world_size=case.world_size)
    with tempfile.TemporaryDirectory(prefix="frwatch-corpus-") as tmp:
        for name, _rank, dump in case.files():
            (Path(tmp) / name).write_bytes(pickle.dumps(dump, 2))
        for name, _rank in case.garbage:
            (Path(tmp) / name).write_bytes(GARBAGE)
        return analyze(tmp, world_size=case.world_size)


def evidence_cases() -> list[Case]:
    out: list[Case] = []
    for t in TYPES:
        if t.name not in _TYPES:
            continue
        for backend in ("nccl", "gloo") if t.gloo else ("nccl",):
            for lay in LAYOUTS[:3:2]:  # one group, a subgroup beside the default group
                out += _cases(t, lay, backend)
    return out


def _cases(t: _Type, lay: _Layout, backend: str) -> list[Case]:
    w = _program(world(SIZE, backend=backend), t, lay)  # type: ignore[arg-type]  # backend: a Backend
    r, g, members, pg = lay.culprit, lay.group, lay.members, lay.pg_name
    s = _seq_t(FAULT_STEP)
    waiting = [m for m in members if m != r]
    tag = f" [{backend}, {lay.name}]"
    stuck = w.rank(r).stops_at(s, group=g)

    def keep(world_: World, ranks: list[int]) -> Callable[[], list[tuple[str, int, Dump]]]:
        def build() -> list[tuple[str, int, Dump]]:
            dumps = world_.dumps()
            return [(f"nccl_trace_rank_{x}", x, dumps[x]) for x in ranks]

        return build

    unknown = Truth(Status.inconclusive, Category.inconclusive, (), CulpritKind.unknown, pg, s)
    name = t.name
    out = [
        Case(f"{name}/partial evidence/one dump of four{tag}", name, "partial evidence", keep(stuck, waiting[:1]), unknown),
        Case(f"{name}/partial evidence/two dumps of four{tag}", name, "partial evidence", keep(stuck, waiting[:2]), unknown),
    ]  # fmt: skip
    beyond = _seq_t(7)  # past everyone's program (6 steps of three calls)
    extra = w.rank(r).extra_at(beyond, "broadcast", group=g)
    out.append(
        Case(
            f"{name}/partial evidence/an extra call, the others' dumps missing{tag}",
            name,
            "partial evidence",
            keep(extra, [r]),
            Truth(Status.inconclusive, Category.inconclusive, (), CulpritKind.unknown, pg, beyond),
        )
    )

    def without(ranks: set[int]) -> Callable[[], list[tuple[str, int, Dump]]]:
        def build() -> list[tuple[str, int, Dump]]:
            dumps = stuck.dumps()
            return [(f"nccl_trace_rank_{x}", x, d) for x, d in sorted(dumps.items()) if x not in ranks]

        return build

    def garbage(ranks: set[int]) -> tuple[tuple[str, int], ...]:
        return tuple((f"nccl_trace_rank_{x}", x) for x in sorted(ranks))

    out.append(
        Case(
            f"{name}/partial evidence/the stuck rank's file is garbage{tag}",
            name,
            "partial evidence",
            without({r}),
            Truth(Status.problem, Category.missing_rank, (r,), CulpritKind.unknown, pg, s),
            on_disk=True,
            garbage=garbage({r}),
        )
    )
    out.append(
        Case(
            f"{name}/partial evidence/three files of four are garbage{tag}",
            name,
            "partial evidence",
            without(set(range(SIZE)) - {waiting[0]}),
            unknown,
            on_disk=True,
            garbage=garbage(set(range(SIZE)) - {waiting[0]}),
        )
    )
    early = w.dumps(upto=len(w.program) // 3)
    keeper = next(
        x for x in waiting if x != 1
    )  # its second dump kept under another name (``.1``: not rank 1)

    def renamed(rank: int, suffix_late: str, suffix_early: str) -> Callable[[], list[tuple[str, int, Dump]]]:
        def build() -> list[tuple[str, int, Dump]]:
            late = stuck.dumps()
            return [
                *((f"nccl_trace_rank_{x}", x, d) for x, d in sorted(late.items()) if x != rank),
                (f"nccl_trace_rank_{rank}{suffix_late}", rank, late[rank]),
                (f"nccl_trace_rank_{rank}{suffix_early}", rank, early[rank]),
            ]

        return build

    cpu_stuck = Truth(Status.problem, Category.missing_rank, (r,), CulpritKind.cpu_stuck, pg, s, files=2)
    out.append(
        Case(f"{name}/dump names/a waiting rank's timeout dump kept as .final{tag}", name, "dump names",
             renamed(keeper, ".final", ""), cpu_stuck, on_disk=True)
    )  # fmt: skip
    out.append(
        Case(f"{name}/dump names/a waiting rank's timeout dump kept as .1{tag}", name, "dump names",
             renamed(keeper, ".1", ""), cpu_stuck, on_disk=True)
    )  # fmt: skip
    return out
