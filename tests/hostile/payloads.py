"""Hostile dump files, written as an attacker would write them: raw pickle opcodes, or a real dump (from the
dump builder) with one field replaced by a raw opcode sequence or a wrong value.

Deep nesting and shared-reference bombs cannot be made with ``pickle.dumps`` (the pickler recurses, and it
would walk the shared references), so they are assembled from opcodes and spliced into a real dump where a
marker string was pickled.
"""

from __future__ import annotations

import copy
import json
import pickle
import struct
from pathlib import Path
from typing import Any

from frwatch_dev.dumps import json_view, pickle_bytes, world

PROTO2 = b"\x80\x02"
STOP = b"."
ONE = b"K\x01"  # BININT1 1
MARKER = "@@hostile@@"

#: The world every hostile case lives in: 3 ranks of 5 all_reduce steps; ranks 0 and 1 are good, rank 2's
#: file is the hostile one.
WORLD = 3
HOSTILE_RANK = 2


def good_dumps() -> dict[int, dict[str, Any]]:
    return world(WORLD).all_reduce(steps=5).dumps()


def good_bytes(rank: int) -> bytes:
    return pickle_bytes(good_dumps()[rank])


def hostile_dump() -> dict[str, Any]:
    """Rank 2's real dump, to be spoiled."""
    return copy.deepcopy(good_dumps()[HOSTILE_RANK])


# --- opcode sequences that push one object ---------------------------------------------------------------
def _str(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(raw)) + raw


def deep_tuple(depth: int, leaf: bytes = ONE) -> bytes:
    """``((((1,),),),)`` ``depth`` deep: one byte a level (TUPLE1)."""
    return leaf + b"\x85" * depth


def deep_list(depth: int, leaf: bytes = ONE) -> bytes:
    """``[[[[1]]]]``: MARK ... LIST."""
    return b"(" * depth + leaf + b"l" * depth


def deep_dict(depth: int, leaf: bytes = ONE) -> bytes:
    """``{'k': {'k': {...}}}``: MARK 'k' ... DICT."""
    return (b"(" + _str("k")) * depth + leaf + b"d" * depth


def laughs_tuple(levels: int, leaf: bytes = ONE) -> bytes:
    """``t(n+1) = (t(n), t(n))``: 2 bytes a level (DUP, TUPLE2); a walk visits 2**levels objects."""
    return leaf + b"2\x86" * levels


def laughs_list(levels: int, leaf: bytes = ONE, memo: int = 900_000) -> bytes:
    """``l(n+1) = [l(n), l(n)]`` through memo references (LONG_BINPUT/LONG_BINGET at a high index)."""
    put = b"r" + struct.pack("<I", memo)
    get = b"j" + struct.pack("<I", memo)
    return leaf + (put + b"0(" + get + get + b"l") * levels


def spliced(dump: dict[str, Any], path: tuple[Any, ...], raw: bytes) -> bytes:
    """``dump`` pickled with the value at ``path`` replaced by the object ``raw`` pushes."""
    target: Any = dump
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = MARKER
    data = pickle.dumps(dump, protocol=2)
    marker = _str(MARKER)
    assert data.count(marker) == 1
    return data.replace(marker, raw)


def with_value(path: tuple[Any, ...], value: Any, fmt: str = "pickle") -> bytes:
    """Rank 2's dump with one field set to ``value`` (pickle, or JSON as torch writes it)."""
    dump = hostile_dump()
    if fmt == "json":
        dump = json_view(dump)
    target: Any = dump
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    if fmt == "json":
        return json.dumps(dump).encode("utf-8", "surrogatepass")
    return pickle.dumps(dump, protocol=2)


# --- whole files made of opcodes -------------------------------------------------------------------------
def dict_with_key(key: bytes) -> bytes:
    """``{key: 1}``: the decoder hashes ``key`` while decoding."""
    return PROTO2 + b"}" + key + ONE + b"s" + STOP


def memo_index(index: int) -> bytes:
    """A 10-byte pickle that asks for a memo table of ``index`` slots."""
    return PROTO2 + ONE + b"r" + struct.pack("<I", index) + STOP


def many_dicts(count: int) -> bytes:
    """``[{}, {}, ...]``: one byte of file, about 64 bytes of memory each."""
    return PROTO2 + b"(" + b"}" * count + b"l" + STOP


def repeated_entries(count: int) -> bytes:
    """A real dump whose ``entries`` is one entry repeated ``count`` times (memo references: ~2 bytes each)."""
    dump = hostile_dump()
    dump["entries"] = [dump["entries"][-1]] * count
    return pickle.dumps(dump, protocol=2)


def one_seq_json(count: int) -> bytes:
    """A JSON dump of ``count`` entries sharing one collective_seq_id (a coalesced region), record ids rising."""
    dump = json_view(hostile_dump())
    template = dump["entries"][-1]
    entries = []
    for i in range(count):
        e = dict(template)
        e["record_id"] = i
        e["collective_seq_id"] = 1
        entries.append(e)
    dump["entries"] = entries
    return json.dumps(dump).encode()


def empty_files_and_two_good(folder: Path, world_size: int, empties: int = 5000) -> None:
    """Ranks 0 and 1 of a world of ``world_size`` ranks (by their pg_config), and ``empties`` empty files
    named for ranks 2, 3, ..."""
    good = world(world_size).all_reduce(steps=1).dumps()
    for rank in (0, 1):
        (folder / f"nccl_trace_rank_{rank}").write_bytes(pickle_bytes(good[rank]))
    for rank in range(2, 2 + empties):
        (folder / f"nccl_trace_rank_{rank}").write_bytes(b"")
