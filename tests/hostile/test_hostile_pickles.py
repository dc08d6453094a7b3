"""Pickles that try to run code, crash, hang or exhaust the decoder: each ends in a verdict, the file named in
``bad_files`` with what it does, the good ranks analysed, within the stated time and memory bounds
(``hostile_run``: a worker may map 256 MB, a file may take 2 s)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hostile_run import WORKER_MB, analyze, within_bounds
from payloads import (
    HOSTILE_RANK,
    PROTO2,
    deep_dict,
    deep_list,
    deep_tuple,
    dict_with_key,
    good_bytes,
    hostile_dump,
    laughs_list,
    laughs_tuple,
    many_dicts,
    memo_index,
    spliced,
)

from frwatch_analyzers.verdict import Category, Status

HOSTILE = f"nccl_trace_rank_{HOSTILE_RANK}"


def _folder(tmp_path: Path, hostile: bytes) -> Path:
    for rank in (0, 1):
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(good_bytes(rank))
    (tmp_path / HOSTILE).write_bytes(hostile)
    return tmp_path


def _contained(tmp_path: Path, hostile: bytes, reason: str, *args: str) -> None:
    """The hostile file is named with ``reason`` (a regex), ranks 0 and 1 are analysed, the verdict says
    rank 2 could not be checked, and the run stays within bounds."""
    run = analyze(_folder(tmp_path, hostile), "--format", "json", *args)
    assert run.code == 0, run.stderr
    v = run.verdict
    bad = run.bad(HOSTILE)
    assert bad.rank == HOSTILE_RANK
    assert re.search(reason, bad.reason), bad.reason
    assert v.ranks_seen == [0, 1]
    assert v.status == Status.inconclusive and v.category == Category.inconclusive
    assert "the files of rank 2 could not be used" in v.headline
    within_bounds(run)


# --- opcodes of every kind ------------------------------------------------------------------------------
REFUSED_GLOBAL = r"refused: the pickle asks for the global {}; a Flight Recorder dump needs none"
CORRUPT = r"^corrupt pickle: \w+: "


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        pytest.param(
            PROTO2 + b"cos\nsystem\n(S'touch /tmp/frwatch-pwned'\ntR.",
            REFUSED_GLOBAL.format(r"os\.system"),
            id="GLOBAL+REDUCE",
        ),
        pytest.param(
            b"cos\nsystem\n(S'touch /tmp/frwatch-pwned'\ntR.",
            r"not a Flight Recorder dump \(starts with b'cos\\nsyst'; expected a pickle or JSON\)",
            id="protocol-0",
        ),
        pytest.param(
            b"\x80\x04\x8c\x08builtins\x8c\x04eval\x93\x8c\x011\x85R.",
            REFUSED_GLOBAL.format(r"builtins\.eval"),
            id="STACK_GLOBAL",
        ),
        pytest.param(PROTO2 + b"(S'ls'\nios\nsystem\n.", REFUSED_GLOBAL.format(r"os\.system"), id="INST"),
        pytest.param(
            PROTO2 + b"(}o.", r"^corrupt pickle: TypeError: 'dict' object is not callable", id="OBJ"
        ),
        pytest.param(
            PROTO2 + b"X\x03\x00\x00\x00abc)R.",
            r"^corrupt pickle: TypeError: 'str' object is not callable",
            id="REDUCE",
        ),
        pytest.param(
            PROTO2 + b"}}b.",
            r"^corrupt pickle: AttributeError: 'dict' object has no attribute '__dict__'",
            id="BUILD",
        ),
        pytest.param(PROTO2 + b"})\x81.", CORRUPT + r"NEWOBJ class argument must be a type", id="NEWOBJ"),
        pytest.param(
            b"\x80\x04})}\x92.", CORRUPT + r"NEWOBJ_EX class argument must be a type", id="NEWOBJ_EX"
        ),
        pytest.param(PROTO2 + b"Pabc\n.", r"refused: the pickle uses persistent ids", id="PERSID"),
        pytest.param(
            PROTO2 + b"X\x01\x00\x00\x00aQ.", r"refused: the pickle uses persistent ids", id="BINPERSID"
        ),
        pytest.param(PROTO2 + b"\x82\x01.", CORRUPT + r"unregistered extension code 1", id="EXT1"),
        pytest.param(PROTO2 + b"\x84\xff\xff\xff\x7f.", CORRUPT + r"unregistered extension code", id="EXT4"),
        pytest.param(b"\x80\x63.", CORRUPT + r"unsupported pickle protocol: 99", id="PROTO-99"),
        pytest.param(
            b"\x80\x04\x95" + b"\xff" * 7 + b"\x7fK\x01.", CORRUPT + r"read would overflow", id="FRAME-huge"
        ),
        pytest.param(PROTO2 + b"h\x05.", CORRUPT + r"Memo value not found at index 5", id="GET-missing"),
        pytest.param(
            PROTO2 + b"\x8b\xff\xff\xff\x7f\x00\x00.",
            r"needs more than the 256 MB a worker may use \(--worker-memory-mb\): the pickle is malformed: not enough "
            r"data in stream to read long4",
            id="LONG4-claims-2GB",
        ),
        pytest.param(
            PROTO2 + b"L" + b"1" * 5000 + b"L\n.",
            CORRUPT + r"Exceeds the limit \(4300 digits\)",
            id="LONG-5000-digits",
        ),
    ],
)
def test_opcode_of_every_kind(tmp_path: Path, payload: bytes, reason: str) -> None:
    marker = Path("/tmp/frwatch-pwned")
    marker.unlink(missing_ok=True)
    _contained(tmp_path, payload, reason)
    assert not marker.exists()


def test_a_string_that_claims_4_eib_exhausts_no_memory(tmp_path: Path) -> None:
    # BINUNICODE8: the decoder asks for the claimed length at once; past the worker's budget it is refused
    payload = b"\x80\x04\x8d" + b"\xff" * 7 + b"\x3f."
    _contained(tmp_path, payload, rf"needs more than the {WORKER_MB} MB a worker may use.*expected \d+ bytes")


# --- the memory the decoder is asked for ------------------------------------------------------------------
def test_memo_bomb_is_stopped_by_the_workers_memory_limit(tmp_path: Path) -> None:
    # 10 bytes that ask for a memo table of 2**32 slots (32 GB)
    _contained(
        tmp_path,
        memo_index(0xFFFFFFFF),
        rf"needs more than the {WORKER_MB} MB a worker may use \(--worker-memory-mb\): a memo index of 4,294,967,295",
    )


def test_memo_bomb_under_the_default_limits(tmp_path: Path) -> None:
    run = analyze(_folder(tmp_path, memo_index(0xFFFFFFFF)), "--format", "json", limits=[])
    assert run.code == 0, run.stderr
    assert "needs more than the 1024 MB a worker may use" in run.bad(HOSTILE).reason
    within_bounds(run, peak_mb=1024 + 150)


def test_one_byte_objects_that_grow_64_times_in_memory(tmp_path: Path) -> None:
    # 6 MB of EMPTY_DICT: 6 million dicts, about 400 MB once decoded: past the worker's 256 MB
    _contained(tmp_path, many_dicts(6_000_000), rf"needs more than the {WORKER_MB} MB a worker may use")


# --- nesting 200k deep, in every field ----------------------------------------------------------------------
DEEP = 200_000


@pytest.mark.parametrize(
    ("path", "raw", "reason"),
    [
        (
            ("entries", 0, "process_group"),
            deep_tuple(DEEP),
            r"entry 0: process_group is a tuple of 1, not \(name, description\)",
        ),
        (("entries", 0, "process_group"), deep_list(DEEP), r"entry 0: process_group is a list of 1"),
        (("entries", 0, "process_group"), deep_dict(DEEP), r"entry 0: process_group is a dict of 1"),
        (
            ("entries", 0, "input_sizes"),
            deep_tuple(DEEP),
            r"entry 0: a dimension in input_sizes is a tuple of 1",
        ),
        (
            ("entries", 0, "input_sizes"),
            deep_list(DEEP),
            r"entry 0: a dimension in input_sizes is a list of 1",
        ),
        (
            ("entries", 0, "output_sizes"),
            deep_dict(DEEP),
            r"entry 0: output_sizes is a dict of 1, not a list of shapes",
        ),
        (("entries", 0, "input_dtypes"), deep_list(DEEP), r"entry 0: a dtype in input_dtypes is a list of 1"),
        (("entries", 0, "frames"), deep_list(DEEP), r"entry 0: a frame is a list of 1, not a dict"),
        (
            ("entries", 0, "frames", 0, "filename"),
            deep_tuple(DEEP),
            r"entry 0: a frame's filename is a tuple of 1",
        ),
        (("entries", 0, "frames", 0), deep_dict(DEEP), r"entry 0: a frame's name is None, not a string"),
        (
            ("entries", 0, "profiling_name"),
            deep_tuple(DEEP),
            r"entry 0: profiling_name is a tuple of 1, not a string",
        ),
        (("entries", 0, "state"), deep_dict(DEEP), r"entry 0: state is a dict of 1, not a string"),
        (
            ("entries", 0, "collective_seq_id"),
            deep_list(DEEP),
            r"entry 0: collective_seq_id is a list of 1, not an integer",
        ),
        (("entries", 0), deep_list(DEEP), r"entry 0 is a list of 1, not a dict"),
        (
            ("pg_config", "0", "ranks"),
            deep_list(DEEP),
            r"pg_config\['0'\]\.ranks is a list of 1, not a list of ranks",
        ),
        (("pg_config", "0", "name"), deep_dict(DEEP), r"pg_config\['0'\]: name is a dict of 1, not a string"),
        (("pg_config",), deep_tuple(DEEP), r"pg_config is a tuple of 1, not a dict"),
        (("pg_status", "0"), deep_list(DEEP), r"pg_status\['0'\] is a list of 1, not a dict"),
        (("version",), deep_tuple(DEEP), r"'version' is a tuple of 1, not a string"),
    ],
    ids=lambda v: "/".join(map(str, v)) if isinstance(v, tuple) else None,
)
def test_nesting_200k_deep_in_every_field(
    tmp_path: Path, path: tuple[object, ...], raw: bytes, reason: str
) -> None:
    _contained(tmp_path, spliced(hostile_dump(), path, raw), reason)


def test_a_dict_key_nested_200k_deep_crashes_only_its_worker(tmp_path: Path) -> None:
    # the C unpickler hashes dict keys as it decodes; hashing a deep tuple recurses without a guard
    _contained(
        tmp_path,
        dict_with_key(deep_tuple(200_000)),
        r"the decoder crashed \(SIGSEGV\): a dict key nests more than 1000 deep \(at byte \d+\): "
        r"hashing it crashes the decoder",
    )


# --- shared references ("billion laughs"): 2**60 objects from a few hundred bytes -----------------------
LEVELS = 60


@pytest.mark.parametrize(
    ("path", "raw", "reason"),
    [
        (
            ("entries", 0, "process_group"),
            laughs_tuple(LEVELS),
            r"process_group is a tuple of 2, not \(name, description\)",
        ),
        (("entries", 0, "input_sizes"), laughs_list(LEVELS), r"a dimension in input_sizes is a list of 2"),
        (("entries", 0, "frames"), laughs_list(LEVELS), r"a frame is a list of 2, not a dict"),
        (("entries", 0, "profiling_name"), laughs_tuple(LEVELS), r"profiling_name is a tuple of 2"),
        (("entries", 0, "frames", 0, "name"), laughs_tuple(LEVELS), r"a frame's name is a tuple of 2"),
        (
            ("pg_config", "0", "ranks"),
            laughs_list(LEVELS),
            r"pg_config\['0'\]\.ranks is a list of 2, not a list of ranks",
        ),
        (("entries",), laughs_list(LEVELS, leaf=b"}"), r"entry 0 is a list of 2, not a dict"),
    ],
    ids=lambda v: "/".join(map(str, v)) if isinstance(v, tuple) else None,
)
def test_shared_reference_bombs_are_refused_without_walking_them(
    tmp_path: Path, path: tuple[object, ...], raw: bytes, reason: str
) -> None:
    hostile = spliced(hostile_dump(), path, raw)
    assert len(hostile) < 40_000
    _contained(tmp_path, hostile, reason)


def test_a_dict_key_made_of_shared_references_is_stopped_by_the_time_budget(tmp_path: Path) -> None:
    # hashing the key while decoding visits 2**60 objects: only the time budget stops it
    _contained(
        tmp_path,
        dict_with_key(laughs_tuple(LEVELS)),
        r"took longer than its 2 s budget \(the worker was stopped\) \(--file-seconds\): a dict key is built from "
        r"shared references: hashing it visits more than 100,000,000 objects",
    )


# --- huge integers ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        (("entries", 0, "collective_seq_id"), 2**100, r"pg 0: a collective_seq_id is beyond 2\*\*63"),
        (("entries", 0, "input_sizes"), [[2**100]], r"a dimension in input_sizes is an integer of 101 bits"),
        (("entries", 0, "pg_id"), 10**4000, r"pg_id is an integer of 13288 bits"),
        (("entries", 0, "frames", 0, "line"), -(2**70), r"a frame's line is an integer of 71 bits"),
        (("pg_config", "0", "ranks"), "[0, 1, 200000000]", r"rank 200000000 is outside \[0, 262144\)"),
        (
            ("pg_config", "0", "ranks"),
            [0, 1, 10**30],
            r"rank an integer of 100 bits is outside \[0, 262144\)",
        ),
    ],
    ids=lambda v: "/".join(map(str, v)) if isinstance(v, tuple) else None,
)
def test_huge_integers(tmp_path: Path, path: tuple[object, ...], value: object, reason: str) -> None:
    from payloads import with_value

    _contained(tmp_path, with_value(path, value), reason)
