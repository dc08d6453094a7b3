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
Truths: such a file is its rank's and is picked or merged by content (the later dump is used).

The garbage and name cases go through the files (``Case.on_disk``): :func:`verdict_of` writes them to a
folder and runs ``analyze(folder)``, as ``frwatch analyze DIR`` does.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import cast

from frwatch_analyzers.analyze import analyze, analyze_dumps
from frwatch_analyzers.verdict import Category, CulpritKind, Status, Verdict

from .corpus import FAULT_STEP, LAYOUTS, SIZE, TYPES, Case, Truth, _Layout, _program, _seq_t, _Type
from .program import Dump, World, world

#: What stands for a rank's unusable file (a truncated write: the pickle header and nothing usable). Built
#: into a case's files as its dump (cast: only :func:`verdict_of` writes it, as the bytes it is).
GARBAGE = b"\x80\x02}q\x00(X\x07"
#: The collective types the evidence cases cover (a rooted, a gathering, an uneven and a plain one).
_TYPES = ("all_reduce", "broadcast", "all_gather_into_tensor", "all_to_all_single", "reduce_scatter_tensor")


def verdict_of(case: Case) -> Verdict:
    """The case's verdict: through its files on disk (``on_disk``: the rank comes from each file's name, a
    ``bytes`` dump is written as it is), else from its decoded dumps."""
    if not case.on_disk:
        return analyze_dumps(case.files(), world_size=case.world_size)
    with tempfile.TemporaryDirectory(prefix="frwatch-corpus-") as tmp:
        for name, _rank, dump in case.files():
            data = dump if isinstance(dump, bytes) else pickle.dumps(dump, 2)
            (Path(tmp) / name).write_bytes(data)
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

    def garbled(ranks: set[int]) -> Callable[[], list[tuple[str, int, Dump]]]:
        def build() -> list[tuple[str, int, Dump]]:
            dumps = stuck.dumps()
            return [
                (f"nccl_trace_rank_{x}", x, cast(Dump, GARBAGE) if x in ranks else d)
                for x, d in sorted(dumps.items())
            ]

        return build

    out.append(
        Case(
            f"{name}/partial evidence/the stuck rank's file is garbage{tag}",
            name,
            "partial evidence",
            garbled({r}),
            Truth(Status.problem, Category.missing_rank, (r,), CulpritKind.unknown, pg, s),
            on_disk=True,
        )
    )
    out.append(
        Case(
            f"{name}/partial evidence/three files of four are garbage{tag}",
            name,
            "partial evidence",
            garbled(set(range(SIZE)) - {waiting[0]}),
            unknown,
            on_disk=True,
        )
    )
    early = w.dumps(upto=len(w.program) // 3)

    def renamed(suffix_late: str, suffix_early: str) -> Callable[[], list[tuple[str, int, Dump]]]:
        def build() -> list[tuple[str, int, Dump]]:
            late = stuck.dumps()
            return [(f"nccl_trace_rank_{x}{suffix_late}", x, d) for x, d in sorted(late.items())] + [
                (f"nccl_trace_rank_{x}{suffix_early}", x, d) for x, d in sorted(early.items())
            ]

        return build

    cpu_stuck = Truth(
        Status.problem, Category.missing_rank, (r,), CulpritKind.cpu_stuck, pg, s, files=2 * SIZE
    )
    out.append(
        Case(f"{name}/dump names/the timeout dumps kept as .final{tag}", name, "dump names",
             renamed(".final", ""), cpu_stuck, on_disk=True)
    )  # fmt: skip
    out.append(
        Case(f"{name}/dump names/the earlier dumps kept as .1{tag}", name, "dump names",
             renamed("", ".1"), cpu_stuck, on_disk=True)
    )  # fmt: skip
    return out
