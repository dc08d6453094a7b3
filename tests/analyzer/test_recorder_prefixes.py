"""Every recorder prefix gives the verdict legacy ``nccl:`` gives for the same scenario, through ``frwatch
analyze`` on files, or the verdict its recorder's fields allow (the c10d hook records no completion).

The dumps of torch 2.15's hook recorders and of torchcomms are built from their source (fabricated, not
recorded: neither installs here): :mod:`frwatch_dev.dumps.recorders` names the lines each rule rests on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from frwatch_analyzers.cli import main
from frwatch_dev.dumps import json_bytes, pickle_bytes, world
from frwatch_dev.dumps.recorders import Style, as_recorder

BUILT_IN = ["nccl", "xccl", "nccl-legacy"]
HOOK = ["nccl2", "ncclx", "rccl", "rcclx", "mccl", "hccl", "c10d"]
TORCHCOMMS = ["ncclx", "nccl", "rccl", "gloo"]
SCENARIOS = ["healthy", "skip", "crash", "gpu_hang"]


def _scenario(name: str) -> tuple[dict[int, Any], int | None]:
    """The builder's legacy ``nccl:`` dumps (CUDA timing on) and the rank that left no dump, if any."""
    w = world(4, queued=2).all_reduce(steps=10).all_gather()
    if name == "skip":
        w = world(4, queued=2).all_reduce(steps=10).rank(2).stops_at(11)
    if name == "crash":
        w = world(4, queued=2).all_reduce(steps=10).rank(1).stops_at(11)
    if name == "gpu_hang":
        w = world(4, queued=2).all_reduce(steps=10).rank(2).not_started_at(10)
    dumps = w.dumps()
    gone = 1 if name == "crash" else None
    return {r: d for r, d in dumps.items() if r != gone}, gone


def _analyze(tmp: Path, dumps: dict[int, Any], file_prefix: str, *, as_json: bool = False) -> dict[str, Any]:
    folder = tmp / "dumps"
    folder.mkdir()
    for rank, d in dumps.items():
        (folder / f"{file_prefix}{rank}").write_bytes(json_bytes(d) if as_json else pickle_bytes(d))
    out = tmp / "verdict.json"
    assert main([str(folder), "--format", "json", "--out", str(out), "--world-size", "4"]) in (0, 1, 2)
    return json.loads(out.read_text())


def _key(v: dict[str, Any], seq_shift: int = 0) -> tuple[Any, ...]:
    branch = v["earliest_branch"]
    return (
        v["status"],
        v["category"],
        v["culprit_ranks"],
        v["hardware_class"],
        None if branch is None else branch["seq"] + seq_shift,
        sorted(v["missing_dumps"]),
    )


def _legacy(tmp: Path, scenario: str) -> dict[str, Any]:
    dumps, _ = _scenario(scenario)
    return _analyze(tmp / "legacy", dumps, "nccl_trace_rank_")


def _run(tmp: Path, scenario: str, prefix: str, style: Style, **kw: Any) -> dict[str, Any]:
    dumps, _ = _scenario(scenario)
    return _analyze(tmp / "new", as_recorder(dumps, prefix, style, **kw), "nccl_trace_rank_")


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("prefix", BUILT_IN)
def test_a_built_in_prefix_reads_as_legacy_nccl(tmp_path: Path, prefix: str, scenario: str) -> None:
    (tmp_path / "legacy").mkdir()
    (tmp_path / "new").mkdir()
    want = _legacy(tmp_path, scenario)
    got = _run(tmp_path, scenario, prefix, "legacy")
    assert _key(got) == _key(want), (got["headline"], want["headline"])


@pytest.mark.parametrize("spelling", [False, True], ids=["backend name", "c10d early names"])
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("prefix", HOOK)
def test_a_hook_recorder_says_what_issue_only_records_allow(
    tmp_path: Path, prefix: str, scenario: str, spelling: bool
) -> None:
    (tmp_path / "legacy").mkdir()
    (tmp_path / "new").mkdir()
    want = _legacy(tmp_path, scenario)
    got = _run(tmp_path, scenario, prefix, "hook", hook_spelling=spelling)
    if scenario == "skip":
        # who never issued a collective is in the hook's records: the same verdict as legacy nccl
        assert _key(got) == _key(want), (got["headline"], want["headline"])
        return
    if scenario == "crash":
        # legacy nccl shows the others waiting on the dead rank; the hook retired their calls at issue,
        # so it can name the rank without a dump, never that anyone waits on it
        assert want["category"] == "missing_rank" and want["missing_dumps"] == [1]
        assert (got["status"], got["missing_dumps"], got["hardware_class"]) == ("inconclusive", [1], False)
        assert "rank 1 left no dump" in got["headline"]
        return
    # healthy and a GPU hang look the same to a recorder that retires an op when its call returns
    assert want["category"] == ("healthy" if scenario == "healthy" else "gpu_hang")
    assert (got["status"], got["category"], got["culprit_ranks"], got["hardware_class"]) == (
        "inconclusive",
        "inconclusive",
        [],
        False,
    )
    assert "agree on every collective they issued" in got["headline"]
    assert f"{prefix}:" in got["headline"] and "records no completion" in got["headline"]


@pytest.mark.parametrize("pre_2013", [False, True], ids=["retired", "sync ops never retired (before #2013)"])
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("backend", TORCHCOMMS)
def test_torchcomms_gives_the_legacy_verdict(
    tmp_path: Path, backend: str, scenario: str, pre_2013: bool
) -> None:
    (tmp_path / "legacy").mkdir()
    (tmp_path / "new").mkdir()
    want = _legacy(tmp_path, scenario)
    dumps, _ = _scenario(scenario)
    tc = as_recorder(dumps, backend, "torchcomms", retired_sync_ops=not pre_2013)
    # the file torchcomms writes: <TORCHCOMM_FR_DUMP_TEMP_FILE><rank>, default ~/.cache/torch/comm_lib_trace_rank_
    got = _analyze(tmp_path / "new", tc, "comm_lib_trace_rank_")
    cpu = backend == "gloo"  # onPreHook records events for CUDA devices only: no states on a CPU communicator
    unknown_last = cpu and pre_2013 and scenario != "crash"
    if (cpu and scenario == "gpu_hang") or unknown_last:
        # no states: nobody can be shown not started; before #2013 on CPU the last call of each communicator
        # cannot be told done either. Never a culprit, never hardware, never healthy.
        assert (got["status"], got["category"], got["culprit_ranks"], got["hardware_class"]) == (
            "inconclusive",
            "inconclusive",
            [],
            False,
        ), got["headline"]
        return
    # torchcomms counts collectives from 0 (FlightRecorder::record: collective_seq_id_++), the builder from 1
    assert _key(got) == _key(want, seq_shift=-1), (got["headline"], want["headline"])


def test_torchcomms_with_two_communicators_pairs_each_communicators_calls(tmp_path: Path) -> None:
    """One process-wide counter numbers every communicator's calls: ranks outside a subgroup count
    differently; the analyzer pairs the k-th call of each communicator instead."""
    w = world(4, queued=1).group("tp", ranks=[0, 1]).all_reduce(steps=3).all_reduce(group="tp").all_reduce()
    w = w.all_reduce(group="tp").all_reduce().rank(3).stops_at(6)
    tc = as_recorder(w.dumps(), "ncclx", "torchcomms")
    seqs = {r: [e["collective_seq_id"] for e in d["entries"]] for r, d in tc.items()}
    assert seqs[0] != seqs[2][: len(seqs[0])] or len(seqs[0]) != len(seqs[2])  # the counters differ
    got = _analyze(tmp_path, tc, "comm_lib_trace_rank_")
    assert (got["category"], got["culprit_ranks"]) == ("missing_rank", [3]), got["headline"]


def test_torchcomms_json_dump_from_the_debug_handler_reads_the_same(tmp_path: Path) -> None:
    """``torchcomms_fr_trace_json`` answers JSON (``dump_json``): the same verdict as its pickle file."""
    dumps, _ = _scenario("skip")
    tc = as_recorder(dumps, "ncclx", "torchcomms")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _analyze(tmp_path / "a", tc, "comm_lib_trace_rank_")
    b = _analyze(tmp_path / "b", tc, "comm_lib_trace_rank_", as_json=True)
    assert _key(a) == _key(b) and a["category"] == "missing_rank"


def test_two_recorders_of_one_rank_are_merged_by_content(tmp_path: Path) -> None:
    """torch 2.15's hook recorder (nccl2, the world group) and torchcomms' (ncclx, its own communicator)
    each leave a file per rank: both are one rank's view, each group compared with its own recorder."""
    w = world(4, queued=2).all_reduce(steps=10).rank(2).stops_at(11)
    dumps = w.dumps()
    hook = as_recorder(dumps, "nccl2", "hook")
    tc = as_recorder(world(4).all_reduce(steps=4).dumps(), "ncclx", "torchcomms")
    folder = tmp_path / "dumps"
    folder.mkdir()
    for r in range(4):
        (folder / f"nccl_trace_rank_{r}").write_bytes(pickle_bytes(hook[r]))
        (folder / f"comm_lib_trace_rank_{r}").write_bytes(pickle_bytes(tc[r]))
    out = tmp_path / "v.json"
    main([str(folder), "--format", "json", "--out", str(out), "--world-size", "4"])
    v = json.loads(out.read_text())
    assert (v["category"], v["culprit_ranks"]) == ("missing_rank", [2]), v["headline"]
    assert len(v["dump_files"]) == 8 and v["missing_dumps"] == []
    assert {f["backend"] for f in v["dump_files"]} == {"nccl2", "ncclx"}


def test_a_mixed_groups_cpu_half_is_not_recorded_so_a_skip_there_is_never_healthy(tmp_path: Path) -> None:
    """``cpu:gloo,cuda:nccl2``: the hook resolves the backend per op and records the CUDA half only
    (FACTS.md section 6, #192233). A rank that skips a CPU collective leaves CUDA records that agree."""
    w = world(4, queued=0).repeat(5, lambda x: x.all_reduce().all_gather()).rank(2).stops_at(10)
    dumps = as_recorder(w.dumps(), "nccl2", "hook")
    for d in dumps.values():  # all_gather ran on CPU tensors: the gloo half, not recorded
        d["entries"] = [e for e in d["entries"] if not e["profiling_name"].endswith("all_gather")]
        for i, e in enumerate(d["entries"]):
            e["collective_seq_id"] = i + 1  # the recorder's own counter saw the CUDA half only
    v = _analyze(tmp_path, dumps, "nccl_trace_rank_")
    assert v["status"] != "healthy" and not v["hardware_class"], v["headline"]
    assert "records no completion" in v["headline"]


def test_torchcomms_process_wide_counter_does_not_make_a_healthy_subgroup_job_a_hang(tmp_path: Path) -> None:
    """Ranks 0-1 also call a tp communicator: their world calls carry other counter values than ranks 2-3's.
    Read as written, ranks 2-3 'never enqueued' a world call; paired per communicator, all agree."""
    w = world(4, queued=1).group("tp", ranks=[0, 1]).all_reduce(steps=3).all_reduce(group="tp").all_reduce()
    w = w.all_reduce(group="tp").all_reduce().all_gather()
    tc = as_recorder(w.dumps(), "ncclx", "torchcomms")
    assert [e["collective_seq_id"] for e in tc[0]["entries"]][-3:] == [5, 6, 7]
    assert [e["collective_seq_id"] for e in tc[2]["entries"]][-2:] == [4, 5]
    got = _analyze(tmp_path, tc, "comm_lib_trace_rank_")
    assert (got["status"], got["category"]) == ("healthy", "healthy"), got["headline"]
