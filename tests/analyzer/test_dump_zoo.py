"""Every fixture of the dump zoo (real dumps of real torch releases, ``scripts/dump_zoo``) gets its verdict.

Each ``tests/fixtures/zoo/<release>/<scenario>/`` holds the dumps 4 real gloo rank processes of that torch
release wrote, and a MANIFEST saying what made them and what the job did (its truth, from the workload's
schedule). The tests check the files are the ones the MANIFEST names, and that ``frwatch analyze`` finds the
truth: category, culprit ranks, and the group and sequence number where the ranks part.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from frwatch_analyzers.cli import main as frwatch_analyze
from frwatch_analyzers.decode.safe_load import decode
from frwatch_dev.dump_zoo import FIXTURES, MANIFEST, OLDEST_RELEASE, SCENARIOS, parse_release

FIXTURE_DIRS = sorted(p.parent for p in FIXTURES.glob(f"*/*/{MANIFEST}"))


def _ids(path: Path) -> str:
    return f"{path.parent.name}-{path.name}"


def _manifest(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / MANIFEST).read_text())
    return data


def test_the_zoo_covers_three_releases_each_with_every_scenario() -> None:
    releases = sorted({p.parent.name for p in FIXTURE_DIRS}, key=parse_release)
    assert len(releases) >= 3, releases
    assert parse_release(releases[0]) == OLDEST_RELEASE, "the oldest release with gloo Flight Recorder"
    for release in releases:
        assert {p.name for p in FIXTURE_DIRS if p.parent.name == release} == set(SCENARIOS), release
    size = sum(f.stat().st_size for f in FIXTURES.rglob("*") if f.is_file())
    assert size < 5 * 2**20, f"the zoo is {size} bytes"


@pytest.mark.parametrize("folder", FIXTURE_DIRS, ids=_ids)
def test_fixture_matches_its_manifest(folder: Path) -> None:
    m = _manifest(folder)
    assert m["torch_release"] == folder.parent.name and m["scenario"] == folder.name
    assert m["torch_version"].split("+")[0] == m["torch_release"], "the venv's torch is the release named"
    assert m["made_by"] == f"scripts/dump_zoo {m['torch_release']} --scenario {m['scenario']}"
    assert m["rank_command"].startswith("python -m frwatch_dev.workloads.faulty_training --scenario ")
    assert m["truth"] == {
        "category": SCENARIOS[folder.name].truth.category,
        "culprit_ranks": SCENARIOS[folder.name].truth.culprit_ranks,
        "earliest_pg": SCENARIOS[folder.name].truth.earliest_pg,
        "earliest_seq": SCENARIOS[folder.name].truth.earliest_seq,
        "story": SCENARIOS[folder.name].truth.story,
    }
    on_disk = {f.name for f in folder.iterdir() if f.name != MANIFEST}
    assert on_disk == set(m["files"]), "every dump is in the MANIFEST and every listed dump is here"
    for name, entry in m["files"].items():
        data = (folder / name).read_bytes()
        assert len(data) == entry["bytes"] and hashlib.sha256(data).hexdigest() == entry["sha256"], name
        assert name == f"nccl_trace_rank_{entry['rank']}"
    # a rank that left no dump is the crashed one, and only there
    dumped = {entry["rank"] for entry in m["files"].values()}
    assert set(range(m["world_size"])) - dumped == (
        set(m["truth"]["culprit_ranks"]) if folder.name == "crash" else set()
    )


@pytest.mark.parametrize("folder", FIXTURE_DIRS, ids=_ids)
def test_frwatch_analyze_finds_the_truth(folder: Path, tmp_path: Path) -> None:
    truth = _manifest(folder)["truth"]
    out = tmp_path / "verdict.json"
    code = frwatch_analyze(
        [str(folder), "--format", "json", "--jobs", "1", "--world-size", "4", "--out", str(out)]
    )
    assert code in (0, 1), code
    v = json.loads(out.read_text())
    assert v["category"] == truth["category"], v["headline"]
    assert v["culprit_ranks"] == truth["culprit_ranks"], v["headline"]
    branch = v["earliest_branch"]
    if truth["earliest_seq"] is None:
        assert branch is None and v["status"] == "healthy"
    else:
        assert branch is not None, v["headline"]
        assert (branch["process_group"]["name"], branch["seq"]) == (
            truth["earliest_pg"],
            truth["earliest_seq"],
        )
        assert branch["op"] == "gloo:all_reduce"


#: Where the releases differ (read off the fixtures; FACTS.md "Dump format" describes 2.13's): 2.8.0 writes
#: version "2.9" and names the library's version ``nccl_version`` (empty for gloo), 2.13.0 and 2.14.1 write
#: "2.10" and ``comm_lib_version``. The change came with 2.9: its wheel's libtorch_cpu.so holds the strings
#: "2.10" and "comm_lib_version", 2.8.0's holds "nccl_version" (``strings``, the PyPI wheels of 2.8.0 to 2.12.0).
def _expected_version(release: str) -> tuple[str, str]:
    return ("2.9", "nccl_version") if parse_release(release) < (2, 9, 0) else ("2.10", "comm_lib_version")


#: What gloo's one pg_config entry (keyed '') lists on a rank that built a subgroup (the pairs {0,1} and
#: {2,3} of the subgroup scenarios): its newest ProcessGroupGloo records its ranks in its constructor, before
#: Python sets global_ranks_in_group; 2.8.0 to 2.13.0 record none, 2.14.1 the group-local ranks 0..k-1 (the
#: same '[0, 1]' on ranks 2 and 3). A rank that built only the default group lists the world.
def _expected_pg_config_ranks(release: str, scenario: str) -> str:
    if not scenario.startswith("subgroup"):
        return "[0, 1, 2, 3]"
    return "[]" if parse_release(release) < (2, 14, 0) else "[0, 1]"


def _expected_groups(scenario: str, rank: int) -> set[tuple[str, str]]:
    if not scenario.startswith("subgroup"):
        return {("0", "default_pg")}
    return {("0", "default_pg"), (str(rank // 2 + 1), f"tensor_parallel_{rank // 2}")}


@pytest.mark.parametrize("folder", FIXTURE_DIRS, ids=_ids)
def test_dumps_hold_what_the_analyzer_assumes_of_gloo(folder: Path) -> None:
    release = folder.parent.name
    version, lib_key = _expected_version(release)
    for name, meta in _manifest(folder)["files"].items():
        dump = decode((folder / name).read_bytes())[0]
        assert dump["version"] == version and dump[lib_key] == "", (name, dump["version"])
        # gloo's pg_config quirk: one entry keyed '' whatever the group is called in the entries
        assert list(dump["pg_config"]) == [""], name
        assert dump["pg_config"][""]["ranks"] == _expected_pg_config_ranks(release, folder.name), name
        assert dump["pg_status"]["0"]["last_started_collective"] == -1
        entries = dump["entries"]
        assert entries
        groups = {tuple(e["process_group"]) for e in entries}
        assert groups <= _expected_groups(folder.name, meta["rank"]) and ("0", "default_pg") in groups, name
        for group in groups:
            seqs = [e["collective_seq_id"] for e in entries if tuple(e["process_group"]) == group]
            assert seqs == list(range(1, len(seqs) + 1)), (name, group)
        for e in entries:
            assert e["state"] == "scheduled" and e["profiling_name"].startswith("gloo:")
            assert e["time_discovered_started_ns"] is None and e["time_discovered_completed_ns"] is None
            assert not e["is_p2p"]
            assert e["frames"], "the Python frames of the call are recorded"
        completed = dump["pg_status"]["0"]["last_completed_collective"]
        default = [e for e in entries if tuple(e["process_group"]) == ("0", "default_pg")]
        assert all(e["retired"] == (e["collective_seq_id"] <= completed) for e in default), name
