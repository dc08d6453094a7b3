"""The analyzer on REAL Flight Recorder dumps from real torch gloo ranks (4 processes per scenario).

The dumps are made once per session by ``frwatch_operator.workloads`` (the scenarios of issue 2); each test
pins what frwatch must say about one fault. fr_trace's answer on the same dumps is in the analyzer note:
it crashes on every one of them (gloo's broken pg_config).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.report import render
from frwatch_analyzers.verdict import Category, Status, Verdict

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def verdict_of(real_dumps: Callable[[str], Path]) -> Callable[[str], Verdict]:
    cache: dict[str, Verdict] = {}

    def get(scenario: str) -> Verdict:
        if scenario not in cache:
            cache[scenario] = analyze(str(real_dumps(scenario)), world_size=4)
        return cache[scenario]

    return get


def _site(v: Verdict, ranks: list[int]) -> str:
    for ev in v.evidence:
        for view in ev.views:
            if view.ranks == ranks and view.call_site:
                return view.call_site[0].name
    return ""


def test_healthy_run_is_healthy(verdict_of: Callable[[str], Verdict]) -> None:
    v = verdict_of("healthy")
    assert v.status == Status.healthy
    assert v.category == Category.healthy
    assert v.culprit_ranks == [] and v.missing_dumps == []
    assert v.stats["entries"] > 40


def test_skipped_collective_is_a_desync_at_the_skip_naming_the_other_call_site(
    verdict_of: Callable[[str], Verdict],
) -> None:
    v = verdict_of("skip")
    assert v.status == Status.problem
    assert v.category == Category.desync
    assert v.culprit_ranks == [1]
    assert v.earliest_branch is not None and v.earliest_branch.process_group.name == "0"
    # gloo pairs the culprit's next collective with its peers' skipped one: the culprit's call site differs
    assert _site(v, [1]) != _site(v, [0, 2, 3])
    assert not v.hardware_class


def test_other_collective_type_is_a_desync(verdict_of: Callable[[str], Verdict]) -> None:
    v = verdict_of("type")
    assert v.category == Category.desync
    assert v.culprit_ranks == [1]
    views = {tuple(view.ranks): view.op for view in v.evidence[0].views}
    assert views[(1,)] == "gloo:all_gather" and views[(0, 2, 3)] == "gloo:all_reduce"


def test_other_size_is_a_size_mismatch_and_the_aborted_receiver_is_explained(
    verdict_of: Callable[[str], Verdict],
) -> None:
    v = verdict_of("size")
    assert v.category == Category.size_mismatch
    assert v.culprit_ranks == [1]
    # gloo aborts a receiving process on a byte-size mismatch: it leaves no dump
    assert v.missing_dumps, "the aborted receiver left no dump"
    assert "SIGABRT" in v.summary


def test_other_dtype_with_other_byte_size_is_a_dtype_mismatch(verdict_of: Callable[[str], Verdict]) -> None:
    v = verdict_of("dtype")
    assert v.category == Category.dtype_mismatch
    assert v.culprit_ranks == [1]
    assert v.missing_dumps


def test_cpu_stuck_rank_is_missing_and_told_apart_from_a_skip(verdict_of: Callable[[str], Verdict]) -> None:
    v = verdict_of("cpu_stuck")
    assert v.category == Category.missing_rank
    assert v.culprit_ranks == [1]
    assert "idle outside any collective" in v.culprit_detail
    assert "stuck on the CPU side" in v.culprit_detail
    assert not v.hardware_class


def test_extra_same_shape_collective_is_found_where_it_happened_not_at_the_hang(
    verdict_of: Callable[[str], Verdict],
) -> None:
    v = verdict_of("extra_same_shape")
    assert v.category == Category.desync
    assert v.culprit_ranks == [1]
    assert v.earliest_branch is not None
    last_seen = max(g.last_enqueued.get("0", -1) for g in v.groups)
    assert v.earliest_branch.seq < last_seen - 1, "the branch is several steps before the hang"
    assert _site(v, [1]) == "clip_gradients_globally"


def test_fault_inside_a_subgroup_names_the_rank_that_moved_on(verdict_of: Callable[[str], Verdict]) -> None:
    v = verdict_of("subgroup")
    assert v.category == Category.missing_rank
    assert v.culprit_ranks == [3]
    b = v.earliest_branch
    assert b is not None and b.process_group.desc == "tensor_parallel_1"
    assert b.process_group.ranks == [2, 3], "membership inferred from entries: gloo's pg_config is broken"
    assert "moved on to" in v.culprit_detail, v.culprit_detail
    # the default group's disagreement (rank 2 never reached it) is a consequence, not a second root
    assert any(c.process_group == "0" for c in v.consequences)


@pytest.mark.parametrize(
    ("scenario", "category"),
    [("silent_shape", Category.size_mismatch), ("silent_dtype", Category.dtype_mismatch)],
)
def test_collectives_that_did_not_hang_are_still_reported(
    verdict_of: Callable[[str], Verdict], scenario: str, category: Category
) -> None:
    v = verdict_of(scenario)
    assert v.status == Status.problem
    assert v.category == category
    assert v.culprit_ranks == [1]
    assert v.findings[0].silent
    assert "silent corruption" in v.summary


def test_crashed_rank_without_a_dump_is_the_culprit(verdict_of: Callable[[str], Verdict]) -> None:
    v = verdict_of("crash")
    assert v.category == Category.missing_rank
    assert v.culprit_ranks == v.missing_dumps != []
    assert "left no dump" in v.headline


def test_report_reads_in_ten_seconds(verdict_of: Callable[[str], Verdict]) -> None:
    text = render(verdict_of("skip"))
    for part in ("PROBLEM / desync", "Groups of ranks", "Earliest branch", "Culprit: rank 1", "Next steps:"):
        assert part in text
    assert len(text.splitlines()) < 40


def test_json_dump_next_to_pickles_is_used(real_dumps: Callable[[str], Path], tmp_path: Path) -> None:
    """A rank that dumped JSON (no frames) is aligned with the pickles of the others."""
    import json
    import pickle
    import shutil

    from frwatch_analyzers.safe_load import decode

    src = real_dumps("skip")
    for f in src.iterdir():
        shutil.copy(f, tmp_path / f.name)
    # rewrite rank 2 as the JSON form of its own dump (what _dump_fr_trace_json gives: no frames, 0 timestamps)
    dump, _ = decode((src / "nccl_trace_rank_2").read_bytes())
    for e in dump["entries"]:
        e.pop("frames", None)
        e["process_group"] = list(e["process_group"])
    (tmp_path / "nccl_trace_rank_2").unlink()
    (tmp_path / "nccl_trace_rank_2.json").write_text(json.dumps(dump))
    assert pickle.loads  # the other ranks stay pickles
    v = analyze(str(tmp_path), world_size=4)
    assert v.category == Category.desync
    assert v.culprit_ranks == [1]
    assert v.ranks_seen == [0, 1, 2, 3]
