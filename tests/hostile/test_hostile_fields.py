"""Wrong types in every field, strings no encoder takes, and entries crafted to make the work quadratic: each
ends in a verdict with the file named precisely (or, when the file is valid, analysed in linear time), within
the stated bounds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hostile_run import analyze, within_bounds
from payloads import HOSTILE_RANK, WORLD, good_bytes, hostile_dump, one_seq_json, repeated_entries, with_value

from frwatch_analyzers.verdict import Status
from frwatch_dev.dumps import json_bytes, pickle_bytes, world

HOSTILE = f"nccl_trace_rank_{HOSTILE_RANK}"


def _folder(tmp_path: Path, hostile: bytes) -> Path:
    for rank in range(WORLD):
        if rank != HOSTILE_RANK:
            (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(good_bytes(rank))
    (tmp_path / HOSTILE).write_bytes(hostile)
    return tmp_path


WRONG_TYPES = [
    (
        ("entries", 0, "input_sizes"),
        [[1.5]],
        r"a dimension in input_sizes is 1\.5, not a non-negative integer",
    ),
    (
        ("entries", 0, "input_sizes"),
        [["x"]],
        r"a dimension in input_sizes is 'x', not a non-negative integer",
    ),
    (
        ("entries", 0, "input_sizes"),
        [[None]],
        r"a dimension in input_sizes is None, not a non-negative integer",
    ),
    (("entries", 0, "input_sizes"), [[-4]], r"a dimension in input_sizes is -4, not a non-negative integer"),
    (
        ("entries", 0, "output_sizes"),
        [[True]],
        r"a dimension in output_sizes is True, not a non-negative integer",
    ),
    (("entries", 0, "input_sizes"), "[[4]]", r"input_sizes is '\[\[4\]\]', not a list of shapes"),
    (("entries", 0, "input_sizes"), [4], r"a shape in input_sizes is 4, not a list of integers"),
    (("entries", 0, "input_dtypes"), [1], r"a dtype in input_dtypes is 1, not a string"),
    (("entries", 0, "output_dtypes"), "Float", r"output_dtypes is 'Float', not a list of dtype names"),
    (("entries", 0, "profiling_name"), 5, r"profiling_name is 5, not a string"),
    (("entries", 0, "state"), 2, r"state is 2, not a string"),
    (("entries", 0, "record_id"), "7", r"record_id is '7', not an integer"),
    (("entries", 0, "collective_seq_id"), 1.0, r"collective_seq_id is 1\.0, not an integer"),
    (("entries", 0, "is_p2p"), "yes", r"is_p2p is 'yes', not true or false"),
    (("entries", 0, "pg_id"), 1.5, r"pg_id is 1\.5, not an integer"),
    (
        ("entries", 0, "process_group"),
        ["0", 1],
        r"process_group is a list of 2, not \(name, description\) strings",
    ),
    (("entries", 0, "frames"), "train.py:3", r"frames is 'train\.py:3', not a list of frames"),
    (("entries", 0), [1, 2], r"entry 0 is a list of 2, not a dict"),
    (("pg_config",), [1], r"pg_config is a list of 1, not a dict"),
    (("pg_config", "0"), "ranks", r"pg_config\['0'\] is 'ranks', not a dict"),
    (("pg_config", "0", "ranks"), [0, 1.5], r"pg_config\['0'\]\.ranks is a list of 2, not a list of ranks"),
    (("pg_config", "0", "ranks"), "[0, x]", r"pg_config\['0'\]\.ranks is '\[0, x\]', not a list of ranks"),
    (("pg_status",), "idle", r"pg_status is 'idle', not a dict"),
    (("version",), 2.1, r"'version' is 2\.1, not a string"),
    (("entries",), {"0": {}}, r"'entries' is not a list"),
]


#: Every wrong type in both formats, except frames in JSON: torch's JSON dumps carry no frames at all.
WRONG_TYPES_BY_FORMAT = [
    (fmt, *case)
    for fmt in ("pickle", "json")
    for case in WRONG_TYPES
    if not (fmt == "json" and case[0][:1] == ("entries",) and "frames" in case[0])
]


@pytest.mark.parametrize(
    ("fmt", "path", "value", "reason"),
    WRONG_TYPES_BY_FORMAT,
    ids=lambda v: "/".join(map(str, v)) if isinstance(v, tuple) else None,
)
def test_wrong_types_everywhere(
    tmp_path: Path, fmt: str, path: tuple[object, ...], value: object, reason: str
) -> None:
    run = analyze(_folder(tmp_path, with_value(path, value, fmt)), "--format", "json")
    assert run.code == 0, run.stderr
    bad = run.bad(HOSTILE)
    assert bad.rank == HOSTILE_RANK and re.search(reason, bad.reason), bad.reason
    assert run.verdict.ranks_seen == [0, 1]
    assert run.verdict.status == Status.inconclusive
    within_bounds(run)


def test_an_entry_repeated_200k_times_through_memo_references(tmp_path: Path) -> None:
    hostile = repeated_entries(200_000)
    assert len(hostile) < 1_200_000
    run = analyze(_folder(tmp_path, hostile), "--format", "json")
    assert run.code == 0, run.stderr
    assert re.search(
        r"entry 1: record_id \d+ does not follow \d+ \(a Flight Recorder's record ids increase\)",
        run.bad(HOSTILE).reason,
    )
    within_bounds(run, seconds=20)


@pytest.mark.parametrize("ranks_with_it", [1, WORLD])
def test_20k_entries_sharing_one_sequence_number_cost_linear_time(tmp_path: Path, ranks_with_it: int) -> None:
    """A coalesced region of 20k entries is a valid dump: it is analysed, in linear time and memory (it was
    4.7 GB and 106 s)."""
    hostile = one_seq_json(20_000)
    for rank in range(WORLD):
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(
            hostile if rank >= WORLD - ranks_with_it else good_bytes(rank)
        )
    run = analyze(tmp_path, "--format", "json")
    assert run.code == 0, run.stderr
    v = run.verdict
    assert v.ranks_seen == [0, 1, 2] and v.bad_files == []
    if ranks_with_it == WORLD:
        assert v.status == Status.healthy
    else:  # rank 2 recorded something else at #1 than ranks 0 and 1
        assert v.status == Status.problem and v.culprit_ranks == [HOSTILE_RANK]
    within_bounds(run, seconds=20)


# --- strings no encoder takes, names that would rewrite a terminal -------------------------------------
EVIL = "\x1b[2J\x1b[31mEVIL\nFAKE LINE\u202e\ud800"
EVIL_SHOWN = r"\x1b[2J\x1b[31mEVIL\nFAKE LINE\u202e\ud800"


@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_lone_surrogates_and_escapes_in_names_reach_the_verdict_escaped(tmp_path: Path, fmt: str) -> None:
    """A group description and a call site carrying terminal escapes, a newline, a bidi override and a lone
    surrogate: the verdict is made in both formats; every printed line is escaped; JSON holds the escaped
    text (so it serialises)."""
    w = (
        world(4)
        .group("tp", ranks=[0, 1, 2, 3], desc=EVIL)
        .all_reduce(steps=3, group="tp", call_site=(EVIL, f"/workspace/{EVIL}.py", 7))
        .rank(3)
        .stops_at(3, group="tp")
    )
    encode = pickle_bytes if fmt == "pickle" else json_bytes
    for rank, dump in w.dumps().items():
        (tmp_path / f"rank{rank}").write_bytes(encode(dump))
    as_json = analyze(tmp_path, "--format", "json")
    assert as_json.code == 0, as_json.stderr
    v = as_json.verdict
    assert v.status == Status.problem and v.culprit_ranks == [3], v.headline
    assert v.earliest_branch is not None and v.earliest_branch.process_group.desc == EVIL_SHOWN
    assert "\x1b" not in as_json.stdout and "\\u001b" not in as_json.stdout
    as_text = analyze(tmp_path)
    assert as_text.code == 0, as_text.stderr
    assert "\x1b" not in as_text.stdout and "\u202e" not in as_text.stdout
    assert EVIL_SHOWN in as_text.stdout
    assert not any(line.startswith("FAKE LINE") for line in as_text.stdout.splitlines())
    within_bounds(as_text)


def test_pg_config_ranks_up_to_200_million(tmp_path: Path) -> None:
    dump = hostile_dump()
    dump["pg_config"]["0"]["ranks"] = json.dumps(list(range(0, 200_000_001, 10_000_000)))
    run = analyze(_folder(tmp_path, pickle_bytes(dump)), "--format", "json")
    assert run.code == 0, run.stderr
    assert "rank 10000000 is outside [0, 262144)" in run.bad(HOSTILE).reason
    within_bounds(run)


def test_a_dump_claiming_a_world_of_262144_ranks_among_dumps_of_3(tmp_path: Path) -> None:
    """Within the bounds, but contradicted by the other dumps: refused, and the world stays 3 ranks."""
    dump = hostile_dump()
    dump["pg_config"]["0"]["ranks"] = f"[0, 1, 2, {262_143}]"
    run = analyze(_folder(tmp_path, pickle_bytes(dump)), "--format", "json")
    assert run.code == 0, run.stderr
    reason = run.bad(HOSTILE).reason
    assert reason == "inconsistent: its default group has 262144 ranks; 2 of the 3 dumps that state one say 3"
    assert run.verdict.world_size == WORLD
    within_bounds(run)


def test_a_dump_filed_under_a_rank_its_own_default_group_does_not_hold(tmp_path: Path) -> None:
    for rank in (0, 1):
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(good_bytes(rank))
    (tmp_path / "nccl_trace_rank_7").write_bytes(good_bytes(HOSTILE_RANK))
    run = analyze(tmp_path, "--format", "json")
    assert run.code == 0, run.stderr
    assert (
        run.bad("nccl_trace_rank_7").reason
        == "inconsistent: filed as rank 7, but its default group '0' has ranks 0-2"
    )
    within_bounds(run)
