"""The verdict from the agents' summaries is the verdict from the dumps, scenario by scenario: a spread of
the conformance corpus (every class of problem and every collective type, split groups and subgroups,
timing on and off) and stragglers, with every rank read from its summary and with half of them read from
their dumps beside the others' summaries (a summary's tail is held as a column, a dump's as a list; members
as strided ranges either way: the two must meet in one analysis)."""

from __future__ import annotations

import pickle
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.summaries.writer import summary_of
from frwatch_dev.dumps import world
from frwatch_dev.dumps.corpus import Case, cases
from frwatch_dev.dumps.encode import pickle_bytes

#: Collectives whose sizes differ by rank by design: checked by balance across the members.
_BALANCED = (
    "gather",
    "scatter",
    "all_to_all",
    "all_to_all_single",
    "all_gather_uneven",
    "reduce_scatter_uneven",
)


def _spread() -> list[Case]:
    """A case for each class, each collective, each layout and each backend/timing variant not covered yet,
    and the size-varying collectives' wrong sizes and stalls."""
    covered: set[str] = set()
    out = []
    for c in cases():
        tags = c.name.rsplit("[", 1)[-1].rstrip("]").split(", ")
        facets = {f"class {c.klass}", f"collective {c.collective}", *tags}
        if c.collective in _BALANCED and c.klass in ("wrong size", "partial stall"):
            facets.add(f"{c.collective}/{c.klass}")  # the balance checks and their roots, from both sides
        if facets - covered:
            covered |= facets
            out.append(c)
    return out


def _core(verdict: Any) -> dict[str, Any]:
    """The verdict without what says how it was read (summary line, stats)."""
    out = verdict.model_dump()
    out.pop("stats")
    out.pop("summary")
    return out


def _write(root: Path, files: list[tuple[str, int, Any]], summarised: set[int]) -> Path:
    folder = root / "dumps"
    (folder / "summaries").mkdir(parents=True)
    per_rank = Counter(rank for _, rank, _ in files)
    for name, rank, dump in files:
        data = pickle_bytes(dump)
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
        if rank in summarised and per_rank[rank] == 1:
            (folder / "summaries" / f"{rank}.json").write_bytes(summary_of(data, rank).data)
    return folder


def _same_both_ways(tmp_path: Path, files: list[tuple[str, int, Any]], world_size: int) -> None:
    ranks = sorted({rank for _, rank, _ in files})
    for label, summarised in (("all", set(ranks)), ("half", set(ranks[::2]))):
        folder = _write(tmp_path / label, files, summarised)
        from_summaries = analyze(str(folder), world_size=world_size)
        from_dumps = analyze(str(folder), world_size=world_size, from_dumps=True)
        assert from_summaries.stats["from_summaries"] >= 1, label  # summaries were read, not skipped
        assert from_dumps.stats["from_summaries"] == 0
        assert _core(from_summaries) == _core(from_dumps), f"{label}: {from_dumps.headline}"


SPREAD = _spread()


@pytest.mark.parametrize("case", SPREAD, ids=[c.name for c in SPREAD])
def test_a_corpus_case_has_the_same_verdict_from_summaries(case: Case, tmp_path: Path) -> None:
    _same_both_ways(tmp_path, case.files(), case.world_size)


def test_the_spread_covers_every_class_and_layout() -> None:
    every = cases()
    assert {c.klass for c in SPREAD} == {c.klass for c in every}
    assert {c.collective for c in SPREAD} == {c.collective for c in every}
    assert any("split groups" in c.name for c in SPREAD) and any("subgroup" in c.name for c in SPREAD)


@pytest.mark.parametrize(
    "build",
    [
        lambda: world(8).all_reduce(steps=40).rank(5).late_by(35),
        lambda: world(8).all_reduce(steps=40).rank(6).slow_by(20).rank(2).stops_at(41),
    ],
    ids=["late to enqueue", "slow to start in a hang"],
)
def test_a_straggler_is_named_from_summaries_as_from_dumps(build: Any, tmp_path: Path) -> None:
    dumps = build().dumps()
    files = [(f"nccl_trace_rank_{r}", r, d) for r, d in sorted(dumps.items())]
    _same_both_ways(tmp_path, files, 8)
    verdict = analyze(str(tmp_path / "all" / "dumps"), world_size=8)
    assert verdict.stragglers, verdict.headline  # the comparison above compared a named straggler


def test_summaries_keep_strided_groups_as_ranges() -> None:
    """A DP-like group (every 4th rank) is three numbers in a summary, whatever the world size."""
    dumps = world(8).split("dp", [[0, 4], [1, 5], [2, 6], [3, 7]]).all_reduce(steps=3, group="dp").dumps()
    data = pickle.dumps(dumps[1], protocol=2)
    text = summary_of(data, 1).data
    assert b'"config_ranks":{"from":1,"to":5,"step":4}' in text
