"""Dumps are untrusted: nothing in a file may run code, and a bad file is named, never fatal."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.decode.safe_load import DumpError, decode
from frwatch_analyzers.verdict import Category, Status


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch /tmp/frwatch-pwned",))


def _dump(entries: list[dict[str, object]] | None = None, version: str = "2.10") -> dict[str, object]:
    return {"version": version, "pg_config": {}, "pg_status": {}, "entries": entries or []}


def _entry(seq: int, op: str = "nccl:all_reduce") -> dict[str, object]:
    return {
        "record_id": seq,
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": seq,
        "profiling_name": op,
        "time_created_ns": seq * 10**9,
        "input_sizes": [[4]],
        "input_dtypes": ["Float"],
        "output_sizes": [[4]],
        "output_dtypes": ["Float"],
        "state": "completed",
        "retired": True,
        "is_p2p": False,
        "frames": [],
    }


def test_a_pickle_that_asks_for_a_global_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = Path("/tmp/frwatch-pwned")
    marker.unlink(missing_ok=True)
    payload = pickle.dumps(_Boom(), protocol=2)
    with pytest.raises(DumpError, match=r"refused: the pickle asks for the global posix\.system"):
        decode(payload)
    assert not marker.exists()


def test_a_malicious_file_among_good_ones_is_named_and_the_rest_is_analysed(tmp_path: Path) -> None:
    marker = Path("/tmp/frwatch-pwned")
    marker.unlink(missing_ok=True)
    for r in range(3):
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(
            pickle.dumps(_dump([_entry(s) for s in range(1, 6)]), 2)
        )
    (tmp_path / "nccl_trace_rank_3").write_bytes(pickle.dumps({"entries": [_Boom()], "version": "2.10"}, 2))
    v = analyze(str(tmp_path), world_size=4)
    assert not marker.exists()
    assert v.ranks_seen == [0, 1, 2]
    assert v.missing_dumps == [3]
    [bad] = v.bad_files
    assert bad.rank == 3 and "refused" in bad.reason and bad.file.endswith("nccl_trace_rank_3")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file"),
        (pickle.dumps(_dump([_entry(1)]), 2)[:-40], "truncated pickle"),
        (b"\x80\x02}q\x00(X\x07", "truncated pickle"),
        (b"hello world, not a dump", "not a Flight Recorder dump"),
        (pickle.dumps([1, 2, 3], 2), "the top level is a list"),
        (pickle.dumps({"a": 1}, 2), "no version or entries key"),
        (pickle.dumps(_dump(version="1.0"), 2), "unsupported Flight Recorder version '1.0'"),
        (b'{"version": "2.10", "entries": [', "corrupt or truncated JSON"),
        (
            b'{"version": "2.10", "entries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "the JSON nests too deeply",
        ),
        (b'{"version": "2.10", "entries": [], "x": ' + b"9" * 5000 + b"}", "corrupt or truncated JSON"),
        (json.dumps({"version": "2.10", "entries": {}}).encode(), "'entries' is not a list"),
    ],
)
def test_bad_files_get_a_precise_reason(content: bytes, reason: str) -> None:
    with pytest.raises(DumpError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        decode(content)


def test_json_the_fast_parser_refuses_is_read_as_python_reads_it() -> None:
    """pydantic-core's parser nests 200 levels at most and takes no lone surrogate; Python's takes both, and a
    dump that needs either is still read (its fields are the summarizer's to judge)."""
    deep = {"version": "2.10", "entries": [], "x": json.loads("[" * 300 + "]" * 300)}
    assert decode(json.dumps(deep).encode())[0] == deep
    odd = {"version": "2.10", "entries": [{"process_group": ["0", "\ud800"]}]}
    dump, fmt = decode(json.dumps(odd).encode())
    assert fmt == "json" and dump["entries"][0]["process_group"] == ("0", "\ud800")


def test_empty_folder_gives_a_no_dump_verdict_not_a_crash(tmp_path: Path) -> None:
    v = analyze(str(tmp_path))
    assert v.status == Status.inconclusive
    assert v.category == Category.no_dump
    assert "no dump file was found" in v.headline


def test_only_bad_files_give_no_dump_with_every_file_named(tmp_path: Path) -> None:
    (tmp_path / "rank0.pkl").write_bytes(b"")
    (tmp_path / "rank1.pkl").write_bytes(b"garbage")
    v = analyze(str(tmp_path))
    assert v.category == Category.no_dump
    assert sorted(p.rank for p in v.bad_files if p.rank is not None) == [0, 1]


def test_oversized_files_are_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "rank0.pkl").write_bytes(pickle.dumps(_dump([_entry(s) for s in range(1, 2000)]), 2))
    v = analyze(str(tmp_path), max_bytes=1000)
    assert v.category == Category.no_dump
    assert "too large" in v.bad_files[0].reason


def test_a_file_without_a_rank_in_its_name_is_named(tmp_path: Path) -> None:
    (tmp_path / "dump.pkl").write_bytes(pickle.dumps(_dump([_entry(1)]), 2))
    (tmp_path / "rank0.pkl").write_bytes(pickle.dumps(_dump([_entry(1)]), 2))
    v = analyze(str(tmp_path))
    assert v.ranks_seen == [0]
    assert any("no rank in the file name" in p.reason for p in v.bad_files)


def test_the_rank_can_come_from_the_content_when_the_name_has_none(tmp_path: Path) -> None:
    dump = _dump([_entry(1)])
    dump["rank"] = 5
    (tmp_path / "dump.pkl").write_bytes(pickle.dumps(dump, 2))
    v = analyze(str(tmp_path))
    assert v.ranks_seen == [5]


def test_mixed_versions_are_analysed_and_flagged(tmp_path: Path) -> None:
    (tmp_path / "r0").write_bytes(pickle.dumps(_dump([_entry(s) for s in range(1, 4)], "2.10"), 2))
    (tmp_path / "r1").write_bytes(pickle.dumps(_dump([_entry(s) for s in range(1, 4)], "2.7"), 2))
    v = analyze(str(tmp_path))
    assert v.status == Status.healthy
    assert "different Flight Recorder versions (2.10, 2.7)" in v.summary


def test_a_malformed_manifest_is_named_and_ignored(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text('{"world_size": "many"}')
    (tmp_path / "r0").write_bytes(pickle.dumps(_dump([_entry(1)]), 2))
    v = analyze(str(tmp_path))
    assert v.ranks_seen == [0]
    assert any(p.file.endswith("manifest.json") and "manifest ignored" in p.reason for p in v.bad_files)
