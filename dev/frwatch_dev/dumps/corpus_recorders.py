"""Corpus cases for every recorder prefix (issue 28): the same four scenarios (healthy, a skipped collective,
a crashed rank without a dump, a GPU hang) as legacy ``nccl:``, as each recorder writes them
(:mod:`.recorders`, built from torch's and torchcomms' source: fabricated, not recorded).

The truths: a built-in prefix (``xccl``, ``nccl-legacy``) says what ``nccl:`` says; torchcomms says it too,
one sequence number lower (it counts from 0); a c10d hook recorder (``nccl2`` and the others) says the skip,
and for the rest what issue-only records allow: the crashed rank left no dump (nobody is shown waiting) and
healthy and hung ranks alike "agree on what they issued" (inconclusive, never hardware).
"""

from __future__ import annotations

from collections.abc import Callable

from frwatch_analyzers.verdict import Category, CulpritKind, Status

from .corpus import Case, Truth
from .program import Dump, World, world
from .recorders import Style, as_recorder

SIZE = 4
Files = list[tuple[str, int, Dump]]
HOOK = ("nccl2", "ncclx", "rccl", "rcclx", "mccl", "hccl")
BUILT_IN = ("xccl", "nccl-legacy")
TORCHCOMMS = ("ncclx", "gloo")


def _scenario(name: str) -> tuple[World, int | None]:
    base = world(SIZE, queued=2).all_reduce(steps=10)
    return {
        "healthy": (base.all_gather(), None),
        "skip": (base.rank(2).stops_at(11), None),
        "crash": (base.rank(1).stops_at(11), 1),
        "gpu_hang": (base.rank(2).not_started_at(10), None),
    }[name]


def _build(scenario: str, prefix: str, style: Style, file_prefix: str) -> Callable[[], Files]:
    def build() -> Files:
        w, gone = _scenario(scenario)
        dumps = as_recorder({r: d for r, d in w.dumps().items() if r != gone}, prefix, style)
        return [(f"{file_prefix}{r}", r, d) for r, d in sorted(dumps.items())]

    return build


def _legacy_truth(scenario: str, shift: int = 0) -> Truth:
    return {
        "healthy": Truth(Status.healthy, Category.healthy),
        "skip": Truth(Status.problem, Category.missing_rank, (2,), CulpritKind.cpu_stuck, "0", 11 + shift),
        "crash": Truth(Status.problem, Category.missing_rank, (1,), None, "0", 11 + shift),
        "gpu_hang": Truth(Status.problem, Category.gpu_hang, (2,), None, "0", 10 + shift, hardware=True),
    }[scenario]


def _hook_truth(scenario: str) -> Truth:
    if scenario == "skip":
        return _legacy_truth(scenario)
    return Truth(Status.inconclusive, Category.inconclusive)


def recorder_cases() -> list[Case]:
    out: list[Case] = []
    for scenario in ("healthy", "skip", "crash", "gpu_hang"):
        klass = f"recorder: {scenario}"
        for p in BUILT_IN:
            out.append(Case(f"{scenario} [{p}:, built-in]", "all_reduce", klass,
                            _build(scenario, p, "legacy", "nccl_trace_rank_"), _legacy_truth(scenario)))  # fmt: skip
        for p in HOOK:
            out.append(Case(f"{scenario} [{p}:, c10d hook]", "all_reduce", klass,
                            _build(scenario, p, "hook", "nccl_trace_rank_"), _hook_truth(scenario)))  # fmt: skip
        for p in TORCHCOMMS:
            cpu_hang = p == "gloo" and scenario == "gpu_hang"  # a CPU communicator records no states
            truth = (
                Truth(Status.inconclusive, Category.inconclusive) if cpu_hang else _legacy_truth(scenario, -1)
            )
            out.append(Case(f"{scenario} [{p}:, torchcomms]", "all_reduce", klass,
                            _build(scenario, p, "torchcomms", "comm_lib_trace_rank_"), truth))  # fmt: skip
    return out
