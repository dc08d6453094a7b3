"""The analyzer on REAL Flight Recorder dumps from real torch gloo ranks (4 processes per scenario).

The dumps are made once per session by ``frwatch_dev.workloads`` (the scenarios of issue 2); each test
pins what frwatch must say about one fault. fr_trace's answer on the same dumps is in the analyzer note:
it crashes on every one of them (gloo's broken pg_config).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.report.terminal import render
from frwatch_analyzers.verdict import Category, CulpritKind, Status, Verdict

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def verdict_of(real_dumps: Callable[..., Path]) -> Callable[..., Verdict]:
    cache: dict[tuple[str, ...], Verdict] = {}

    def get(scenario: str, *extra: str) -> Verdict:
        if (scenario, *extra) not in cache:
            cache[(scenario, *extra)] = analyze(str(real_dumps(scenario, *extra)), world_size=4)
        return cache[(scenario, *extra)]

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
    # the control broadcast happens here for the first time: no history says a call was skipped
    assert v.culprit_kind == CulpritKind.mismatched_call


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
    assert v.culprit_kind == CulpritKind.cpu_stuck and "py-spy" in v.next_steps[0]


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
    assert v.culprit_kind == CulpritKind.extra_call  # its #4 is the others' #3, and so on to the hang


def test_fault_inside_a_subgroup_names_the_rank_that_moved_on(verdict_of: Callable[[str], Verdict]) -> None:
    v = verdict_of("subgroup")
    assert v.category == Category.missing_rank
    assert v.culprit_ranks == [3]
    b = v.earliest_branch
    assert b is not None and b.process_group.desc == "tensor_parallel_1"
    assert b.process_group.ranks == [2, 3], "membership inferred from entries: gloo's pg_config is broken"
    assert "moved on to" in v.culprit_detail, v.culprit_detail
    assert v.culprit_kind == CulpritKind.took_another_path
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
    assert v.culprit_kind == CulpritKind.crashed


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

    from frwatch_analyzers.decode.safe_load import decode

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


def test_uneven_all_to_all_and_the_roots_of_gather_and_scatter_are_healthy(
    verdict_of: Callable[[str], Verdict],
) -> None:
    """Every step: an all_to_all_single whose splits differ by rank and step, a gather to rank 0, a scatter
    from it. Each rank records other sizes by design; nothing is wrong."""
    v = verdict_of("moe")
    assert v.status == Status.healthy, v.headline
    assert v.stats["entries"] > 100


def test_a_wrong_all_to_all_split_is_a_silent_size_mismatch_at_that_exchange(
    verdict_of: Callable[[str], Verdict],
) -> None:
    v = verdict_of("moe_bad_split")
    assert v.status == Status.problem and v.category == Category.size_mismatch
    b = v.earliest_branch
    # seq 1 broadcast_parameters; a step is dispatch, gather, scatter, sync: step 3's dispatch is #10
    assert b is not None and b.seq == 10 and b.op == "gloo:all_to_all"
    assert v.findings[0].silent, "gloo completed the exchange: silent corruption"
    assert v.culprit_ranks == [], "all_to_all_single records no per-peer splits: no rank can be named"
    assert "not in the dumps" in v.headline


def test_a_gather_to_the_wrong_root_names_the_rank_that_broke_with_the_usual_root(
    verdict_of: Callable[[str], Verdict],
) -> None:
    v = verdict_of("gather_root")
    assert v.category == Category.desync and v.culprit_ranks == [1]
    assert v.earliest_branch is not None and v.earliest_branch.op == "gloo:gather"
    assert "rank 0's root is rank 0; rank 1's root is rank 1" in v.headline, v.headline
    assert "it is rank 0, the root of every earlier call here" in v.headline


def test_a_root_that_rotates_every_step_is_healthy(verdict_of: Callable[..., Verdict]) -> None:
    """The MoE exchange gathers to and scatters from rank (step - 1) % 4: another root every step."""
    v = verdict_of("moe", "--rotate-root")
    assert v.status == Status.healthy, v.headline


def test_a_second_root_off_the_rotation_names_that_rank_not_the_rotation_s_root(
    verdict_of: Callable[..., Verdict],
) -> None:
    """At step 7 the rotation gives rank 2; rank 1 gathers to itself as well: every rank times out."""
    v = verdict_of("gather_root", "--rotate-root", "--fault-step", "7")
    assert v.category == Category.desync and v.culprit_ranks == [1], v.headline
    assert v.earliest_branch is not None and v.earliest_branch.op == "gloo:gather"
    assert "next in the rotation of roots" in v.headline and "(0, 1, 2, 3, 0, 1 -> 2)" in v.headline


def test_an_earlier_on_demand_dump_of_every_rank_is_used_by_content(
    real_dumps: Callable[..., Path], verdict_of: Callable[..., Verdict], tmp_path: Path
) -> None:
    """Every rank also wrote an on-demand JSON dump after step 2: two files a rank, picked by content."""
    v = verdict_of("cpu_stuck", "--ondemand-at-step", "2")
    assert v.category == Category.missing_rank and v.culprit_ranks == [1], v.headline
    assert len(v.dump_files) == 8
    used = {f.rank: Path(f.file).name for f in v.dump_files if f.role == "used"}
    assert used == {r: f"nccl_trace_rank_{r}" for r in range(4)}, v.dump_files  # the later pickles
    # names do not decide: the same files, each early dump under the name of the late one and back
    src = real_dumps("cpu_stuck", "--ondemand-at-step", "2")
    for f in src.iterdir():
        swapped = f.name[:-5] if f.name.endswith(".json") else f"{f.name}.json"
        (tmp_path / swapped).write_bytes(f.read_bytes())
    w = analyze(str(tmp_path), world_size=4)
    assert (w.category, w.culprit_ranks, w.earliest_branch) == (
        v.category,
        v.culprit_ranks,
        v.earliest_branch,
    )
    assert {f.rank: Path(f.file).name for f in w.dump_files if f.role == "used"} == {
        r: f"nccl_trace_rank_{r}.json" for r in range(4)
    }
