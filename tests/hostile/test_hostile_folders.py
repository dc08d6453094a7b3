"""Dump folders and manifests as an attacker lays them out: thousands of empty files, links, FIFOs, folders,
names that rewrite a terminal or are not UTF-8, ranks and world sizes no job has, a 1 GB manifest (on disk
and over S3). Each ends in a verdict with every odd entry named, within the stated bounds."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from hostile_run import analyze, within_bounds
from payloads import HOSTILE_RANK, WORLD, empty_files_and_two_good, good_bytes, memo_index

from frwatch_analyzers.verdict import Status
from frwatch_dev.dumps import pickle_bytes, world

HOSTILE = f"nccl_trace_rank_{HOSTILE_RANK}"


def _good(tmp_path: Path, ranks: tuple[int, ...] = (0, 1)) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    for rank in ranks:
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(good_bytes(rank))
    return tmp_path


def test_5000_empty_files_and_2_good_ranks_are_not_healthy(tmp_path: Path) -> None:
    """It was reported healthy with 5,001 ranks missing."""
    empty_files_and_two_good(tmp_path, world_size=2)
    run = analyze(tmp_path, "--format", "json")
    assert run.code == 0, run.stderr
    v = run.verdict
    assert v.ranks_seen == [0, 1] and v.world_size == 2
    assert len(v.bad_files) == 5000
    assert all(
        p.reason
        == f"empty file (filed as rank {int(p.file.rsplit('_', 1)[1])}, outside the world of 2 ranks)"
        for p in v.bad_files
    )
    assert v.status == Status.inconclusive
    assert "5000 unusable file(s) claim ranks 2-5001, outside the world" in v.headline
    within_bounds(run)


def test_5000_empty_files_in_a_world_that_holds_them(tmp_path: Path) -> None:
    empty_files_and_two_good(tmp_path, world_size=5002)
    run = analyze(tmp_path, "--format", "json")
    assert run.code == 0, run.stderr
    v = run.verdict
    assert v.world_size == 5002 and v.ranks_seen == [0, 1] and len(v.missing_dumps) == 5000
    assert {p.reason for p in v.bad_files} == {"empty file"} and len(v.bad_files) == 5000
    assert v.status != Status.healthy
    within_bounds(run)


def test_links_are_never_followed(tmp_path: Path) -> None:
    folder = _good(tmp_path / "dumps")
    (tmp_path / "elsewhere").write_bytes(good_bytes(HOSTILE_RANK))
    os.symlink("/etc/passwd", folder / "nccl_trace_rank_2")
    os.symlink(tmp_path / "no-such-file", folder / "nccl_trace_rank_3")
    os.symlink(tmp_path / "elsewhere", folder / "nccl_trace_rank_4")  # a link to a good dump
    run = analyze(folder, "--format", "json")
    assert run.code == 0, run.stderr
    assert (
        run.bad("rank_2").reason == "a symbolic link to /etc/passwd: not followed (a dump is a regular file)"
    )
    assert run.bad("rank_3").reason.startswith("a dangling symbolic link to ")
    assert run.bad("rank_4").reason.startswith(f"a symbolic link to {tmp_path / 'elsewhere'}: not followed")
    assert run.verdict.ranks_seen == [0, 1]
    within_bounds(run)


def test_fifos_folders_and_sockets_are_named_and_never_block(tmp_path: Path) -> None:
    folder = _good(tmp_path)
    os.mkfifo(folder / "nccl_trace_rank_2")  # nobody writes to it: opening it for reading would block
    (folder / "nccl_trace_rank_3").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "nccl_trace_rank_4"))
    try:
        run = analyze(folder, "--format", "json")
    finally:
        sock.close()
    assert run.code == 0, run.stderr
    assert run.bad("rank_2").reason == "a FIFO (named pipe): not read (a dump is a regular file)"
    assert run.bad("rank_3").reason.startswith("a folder: not read (a dump is a regular file)")
    assert run.bad("rank_4").reason.startswith("a socket: not read (a dump is a regular file)")
    within_bounds(run)


def test_names_with_escapes_newlines_and_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    folder = _good(tmp_path)
    evil = "\x1b[2J\x1b[31mrank\nFAKE LINE\u202e_2"
    (folder / evil).write_bytes(b"")
    os.close(
        os.open(os.path.join(os.fsencode(folder), b"nccl\xff\xfe_trace_rank_3"), os.O_CREAT | os.O_WRONLY)
    )
    run = analyze(folder, "--format", "json")
    assert run.code == 0, run.stderr
    assert run.bad(r"\x1b[2J\x1b[31mrank\nFAKE LINE\u202e_2").reason.startswith("empty file")
    assert run.bad(r"nccl\xff\xfe_trace_rank_3").reason.startswith("empty file")
    text = analyze(folder)
    assert text.code == 0, text.stderr
    assert "\x1b" not in text.stdout and "\u202e" not in text.stdout
    assert not any(line.startswith("FAKE LINE") for line in text.stdout.splitlines())
    assert r"nccl\xff\xfe_trace_rank_3: empty file" in text.stdout
    within_bounds(text)


def test_a_good_dump_under_a_name_that_is_not_utf8_is_used(tmp_path: Path) -> None:
    folder = _good(tmp_path)
    path = os.path.join(os.fsencode(folder), b"nccl\xff_trace_rank_2")
    with open(path, "wb") as fh:
        fh.write(good_bytes(HOSTILE_RANK))
    run = analyze(folder, "--format", "json")
    assert run.code == 0, run.stderr
    assert run.verdict.ranks_seen == [0, 1, 2] and run.verdict.status == Status.healthy
    within_bounds(run)


@pytest.mark.parametrize("digits", ["99999999999", "9" * 200, "262144"])
def test_an_empty_file_named_for_a_rank_no_job_has(tmp_path: Path, digits: str) -> None:
    folder = _good(tmp_path)
    (folder / f"nccl_trace_rank_{digits}").write_bytes(b"")
    run = analyze(folder, "--format", "json")
    assert run.code == 0, run.stderr
    bad = run.bad(f"rank_{digits[:20]}")
    assert bad.rank is None
    assert (
        bad.reason.startswith(f"rank {digits[:40]}")
        and "is beyond the limit of 262144 ranks: not read" in bad.reason
    )
    within_bounds(run)


def test_an_empty_file_at_the_highest_rank_allowed_does_not_size_the_world(tmp_path: Path) -> None:
    """Rank 262143 is within the bound, but the dumps agree on 3 ranks: the claim does not grow the world."""
    folder = _good(tmp_path)
    (folder / "nccl_trace_rank_262143").write_bytes(b"")
    run = analyze(folder, "--format", "json")
    assert run.code == 0, run.stderr
    v = run.verdict
    assert v.world_size == WORLD and v.missing_dumps == [2]
    assert run.bad("rank_262143").reason == "empty file (filed as rank 262143, outside the world of 3 ranks)"
    within_bounds(run)


def test_a_world_of_262144_ranks_that_nothing_contradicts_costs_little(tmp_path: Path) -> None:
    """Gloo dumps state no world; a manifest says 262144 (the largest allowed): the verdict lists 262142
    missing ranks, in bounded time and memory."""
    dumps = world(2, backend="gloo").all_reduce(steps=3).dumps()
    for rank, dump in dumps.items():
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(pickle_bytes(dump))
    (tmp_path / "manifest.json").write_text(json.dumps({"world_size": 262_144}))
    run = analyze(tmp_path, "--format", "json")
    assert run.code == 0, run.stderr
    v = run.verdict
    assert v.world_size == 262_144 and len(v.missing_dumps) == 262_142
    within_bounds(run)


# --- manifest.json ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        ({"world_size": 10**9}, "world_size 1000000000 ignored: outside [1, 262144]"),
        ({"world_size": 4096}, "world_size 4096 ignored: the dumps' default group has 3 ranks"),
        ({"ranks": [{"rank": 99_999_999_999}]}, "manifest ignored: rank 99999999999 is outside [0, 262144)"),
        ({"pods": [{"pod": "p", "ranks": [-1]}]}, "manifest ignored: rank -1 is outside [0, 262144)"),
        ({"world_size": "many"}, "manifest ignored: world_size: Input should be a valid integer"),
        ({"ranks": [{"rank": True}]}, "manifest ignored: ranks.0.rank: Input should be a valid integer"),
        ({"world_size": "3"}, "manifest ignored: world_size: Input should be a valid integer"),
    ],
)
def test_manifest_claims_held_to_bounds_and_to_the_dumps(
    tmp_path: Path, manifest: dict[str, object], reason: str
) -> None:
    folder = _good(tmp_path, ranks=(0, 1, 2))
    (folder / "manifest.json").write_text(json.dumps(manifest))
    run = analyze(folder, "--format", "json")
    assert run.code == 0, run.stderr
    assert run.bad("manifest.json").reason.startswith(reason), run.bad("manifest.json").reason
    assert run.verdict.world_size == WORLD and run.verdict.status == Status.healthy
    within_bounds(run)


def test_a_manifest_nested_100k_deep(tmp_path: Path) -> None:
    folder = _good(tmp_path, ranks=(0, 1, 2))
    (folder / "manifest.json").write_text('{"pods": ' + "[" * 100_000 + "]" * 100_000 + "}")
    run = analyze(folder, "--format", "json")
    assert run.code == 0, run.stderr
    assert "recursion limit exceeded" in run.bad("manifest.json").reason
    within_bounds(run)


def test_a_1gb_manifest_is_refused_unread(tmp_path: Path) -> None:
    folder = _good(tmp_path, ranks=(0, 1, 2))
    with open(folder / "manifest.json", "wb") as fh:
        fh.truncate(1 << 30)  # sparse: 1 GB long, nothing on disk
    run = analyze(folder, "--format", "json")
    assert run.code == 0, run.stderr
    assert run.bad("manifest.json").reason == (
        "manifest ignored: too large: 1073741824 bytes is over the limit of 67108864 bytes"
    )
    within_bounds(run)


def test_manifest_names_are_escaped(tmp_path: Path) -> None:
    w = world(4).all_reduce(steps=3).rank(3).stops_at(3)
    for rank, dump in w.dumps().items():
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(pickle_bytes(dump))
    node = "node-\x1b[2J\nFAKE"
    manifest = {
        "world_size": 4,
        "ranks": [{"rank": r, "pod": f"p{r}\x1b]0;x\x07", "node": node, "dumped": True} for r in range(4)],
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    run = analyze(tmp_path)
    assert run.code == 0, run.stderr
    assert "\x1b" not in run.stdout and "\x07" not in run.stdout
    assert r"node-\x1b[2J\nFAKE" in run.stdout
    within_bounds(run)


def test_a_manifest_that_is_a_link_or_a_fifo_is_not_read(tmp_path: Path) -> None:
    folder = _good(tmp_path / "a", ranks=(0, 1, 2))
    os.symlink("/etc/passwd", folder / "manifest.json")
    run = analyze(folder, "--format", "json")
    assert run.code == 0, run.stderr
    assert run.bad("manifest.json").reason == (
        "manifest ignored: a symbolic link to /etc/passwd: not followed (a dump is a regular file)"
    )
    folder = _good(tmp_path / "b", ranks=(0, 1, 2))
    os.mkfifo(folder / "manifest.json")
    run = analyze(folder, "--format", "json")
    assert run.code == 0, run.stderr
    assert (
        run.bad("manifest.json").reason
        == "manifest ignored: a FIFO (named pipe): not read (a dump is a regular file)"
    )
    within_bounds(run)


# --- over S3 ---------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("s3")
def test_hostile_objects_and_an_oversized_manifest_over_s3(s3) -> None:  # type: ignore[no-untyped-def]
    """Workers read from S3 too: the manifest over its limit is refused from the listing's size (never
    downloaded), a memo bomb is named, the good ranks are analysed."""
    client = s3.client()
    root = "frwatch/ns/hostile/uid-1/0"
    for rank in (0, 1):
        client.put_object(Bucket=s3.bucket, Key=f"{root}/ranks/{rank}.pickle", Body=good_bytes(rank))
    client.put_object(Bucket=s3.bucket, Key=f"{root}/ranks/2.pickle", Body=memo_index(0xFFFFFFFF))
    client.put_object(Bucket=s3.bucket, Key=f"{root}/manifest.json", Body=b" " * ((64 << 20) + 1))
    env = {**os.environ, **s3.env(), "AWS_ENDPOINT_URL": s3.endpoint, "AWS_REGION": "us-east-1"}
    run = analyze(f"s3://{s3.bucket}/{root}", "--format", "json", env=env)
    assert run.code == 0, run.stderr
    assert run.bad("manifest.json").reason == (
        "manifest ignored: too large: 67108865 bytes is over the limit of 67108864 bytes"
    )
    assert "a memo index of 4,294,967,295" in run.bad("ranks/2.pickle").reason
    assert run.verdict.ranks_seen == [0, 1]
    within_bounds(run)
