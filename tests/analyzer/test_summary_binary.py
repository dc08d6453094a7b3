"""Binary summaries (version 3, :mod:`frwatch_analyzers.summaries.binary`): they decode to the very trace the JSON
summary (version 2) of the same dump decodes to, the verdict from them is the verdict from the dumps, JSON
summaries are still read, and a hostile one is refused with a reason while it is decoded (declared lengths
over a bound, wrong types, inflating columns and tables), never with another exception: fuzzed by seeded
mutations of real summaries, bytes and fields."""

from __future__ import annotations

import dataclasses
import pickle
import random
import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.summaries import binary as sb
from frwatch_analyzers.summaries.format import MAX_CONTAINERS
from frwatch_analyzers.summaries.rank_summary import Reader, SummaryError
from frwatch_analyzers.summaries.writer import summary_of
from frwatch_dev.dumps import varied

WORLD = 16
ENTRIES = 300
CULPRIT = varied.culprit(WORLD)


def _dump(rank: int) -> bytes:
    return pickle.dumps(varied.rank_dump(rank, WORLD, ENTRIES), protocol=2)


@pytest.fixture(scope="module")
def pair() -> tuple[bytes, bytes]:
    """The JSON and the binary summary of the culprit's dump."""
    data = _dump(CULPRIT)
    return summary_of(data, CULPRIT).data, summary_of(data, CULPRIT, binary=True).data


def test_a_binary_summary_decodes_to_the_trace_its_json_twin_decodes_to(pair: tuple[bytes, bytes]) -> None:
    as_json, as_binary = pair
    assert as_binary.startswith(sb.MAGIC) and as_json.startswith(b"{")
    assert len(as_binary) < len(as_json)
    (tj, dj), (tb, db) = Reader().decode(as_json), Reader().decode(as_binary)
    assert dj == db
    assert tb.pgs.keys() == tj.pgs.keys() and len(tb.pgs) == 3
    for name in tj.pgs:
        assert tb.pgs[name] == tj.pgs[name], name
    assert tb.sig_details == tj.sig_details and tb.p2p == tj.p2p
    assert dataclasses.replace(tb, pgs={}, sig_details={}) == dataclasses.replace(tj, pgs={}, sig_details={})


def test_the_verdict_from_binary_summaries_is_the_verdict_from_the_dumps(tmp_path: Path) -> None:
    varied.fabricate(tmp_path, WORLD, ENTRIES, workers=1)
    (tmp_path / "fabricated.json").unlink()
    (tmp_path / "summaries").mkdir()
    for rank in range(WORLD):
        data = (tmp_path / f"{varied.PREFIX}{rank}").read_bytes()
        # odd ranks keep JSON summaries: one folder may hold both versions (agents of two releases)
        made = summary_of(data, rank, binary=rank % 2 == 0)
        (tmp_path / "summaries" / f"{rank}.json").write_bytes(made.data)
    from_summaries = analyze(str(tmp_path))
    from_dumps = analyze(str(tmp_path), from_dumps=True)
    assert from_summaries.stats["from_summaries"] == WORLD
    assert from_dumps.category == "desync" and from_dumps.culprit_ranks == [CULPRIT]
    assert from_summaries.category == from_dumps.category
    assert from_summaries.culprit_ranks == from_dumps.culprit_ranks
    assert from_summaries.model_dump()["findings"] == from_dumps.model_dump()["findings"]


def _body(data: bytes) -> list[Any]:
    """A binary summary as plain MessagePack values (lists, ints, bytes, str), to edit."""
    out: list[Any] = msgspec.msgpack.decode(data[len(sb.MAGIC) :])
    return out


def _pack(body: Any) -> bytes:
    return sb.MAGIC + msgspec.msgpack.encode(body)


def _refused(data: bytes, *words: str) -> str:
    with pytest.raises(SummaryError) as err:
        Reader().decode(data)
    text = str(err.value)
    assert all(w in text for w in words), text
    return text


def test_a_declared_length_over_its_bound_is_refused_before_it_is_read(pair: tuple[bytes, bytes]) -> None:
    body = _body(pair[1])
    # the group list claims 2**32 - 1 groups in 5 bytes: refused at its header, nothing allocated for it
    head = msgspec.msgpack.encode(body[:13])  # the 13 fields before the groups, as an array of 13
    fields = head[1:]  # drop the fixarray header of 13
    data = sb.MAGIC + b"\xdc\x00\x10" + fields + b"\xdd\xff\xff\xff\xff"
    _refused(data, "malformed summary", "$[13]")
    members = body[13][0]
    members[12], members[13] = None, list(range(300_000))  # more members than a world holds
    _refused(_pack(body), "malformed summary")


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        ((1,), -1, ("$[1]",)),  # a negative rank
        ((1,), 1 << 40, ("$[1]",)),  # a rank past any world
        ((13, 0, 0), 7, ("$[13][0][0]",)),  # a group name that is a number
        ((13, 0, 3), "AAAA", ("$[13][0][3]",)),  # a column that is text
        ((14,), [["0", 1, "sideways", 0, 1, 1, 0, 1, 1]], ("$[14][0][2]",)),  # a p2p kind
        ((6,), 1, ("$[6]",)),  # has_states not a bool
        ((0, 0), -5, ("$[0][0]",)),  # a dump of negative size
    ],
)
def test_a_field_of_the_wrong_type_or_range_is_refused_naming_it(
    pair: tuple[bytes, bytes], path: tuple[int, ...], value: Any, words: tuple[str, ...]
) -> None:
    body = _body(pair[1])
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    _refused(_pack(body), "malformed summary", *words)


def test_inflating_columns_and_tables_are_refused_within_their_bounds(pair: tuple[bytes, bytes]) -> None:
    body = _body(pair[1])
    body[13][0][3] = b"\x01" + zlib.compress(bytes(64 << 20))  # 64 MB of zeros in 65 KB
    _refused(_pack(body), "larger than allowed")
    body = _body(pair[1])
    body[15] = zlib.compress(b"\x92" + b"\x90" * (MAX_CONTAINERS + 10))  # a table of a million empty lists
    _refused(_pack(body), "sigs", "arrays and maps")
    body = _body(pair[1])
    body[15] = zlib.compress(msgspec.msgpack.encode([[], [[1, "x", [], [], [], [], 5, 1, False]]]))
    _refused(_pack(body), "call site")


def test_json_summaries_are_still_read_and_other_bytes_are_not(pair: tuple[bytes, bytes]) -> None:
    trace, _ = Reader().decode(pair[0])
    assert trace.rank == CULPRIT
    _refused(pair[1][: len(sb.MAGIC) + 40], "truncated")
    _refused(b"frwatch.rank-summary/4\n" + pair[1][len(sb.MAGIC) :])


def _mutate_field(rng: random.Random, node: Any, depth: int = 0) -> Any:
    """``node`` with one field somewhere below it replaced by a hostile value."""
    hostile = [
        None, True, -1, 0, 1 << 62, -(1 << 63), 1.5, "", "x" * 5000, "\u202e", b"", b"\x01\x00", [], [[]] * 50,
        {"a": 1}, list(range(70)),
    ]  # fmt: skip
    if isinstance(node, list) and node and (depth < 6 and rng.random() < 0.75):
        i = rng.randrange(len(node))
        node[i] = _mutate_field(rng, node[i], depth + 1)
        return node
    if isinstance(node, bytes) and node and rng.random() < 0.5:  # a column or table with a byte changed
        at = rng.randrange(len(node))
        return node[:at] + bytes([rng.randrange(256)]) + node[at + 1 :]
    return rng.choice(hostile)


@pytest.mark.parametrize("seed", range(6))
def test_randomly_mutated_summaries_decode_or_are_refused_with_a_reason(
    pair: tuple[bytes, bytes], seed: int
) -> None:
    """Seeded, 300 summaries a seed: 1-3 fields replaced by hostile values (100 in the summary, 100 in its
    signature table), or bytes flipped, cut or inserted (100). Each decodes (then its trace is of the checked types) or raises SummaryError."""
    rng = random.Random(seed)
    good = pair[1]
    outcomes = {"decoded": 0, "refused": 0}
    for i in range(300):
        if i % 3 == 1:
            body = _body(good)
            for _ in range(rng.randint(1, 3)):
                body = _mutate_field(rng, body)
            data = _pack(body)
        elif i % 3 == 2:  # a field of the signature table (compressed again: it decompresses)
            body = _body(good)
            table = msgspec.msgpack.decode(zlib.decompress(body[15]))
            for _ in range(rng.randint(1, 3)):
                table = _mutate_field(rng, table)
            body[15] = zlib.compress(msgspec.msgpack.encode(table))
            data = _pack(body)
        else:
            buf = bytearray(good)
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(len(sb.MAGIC), len(buf))
                what = rng.randrange(3)
                if what == 0:
                    buf[at] = rng.randrange(256)
                elif what == 1:
                    del buf[at:]
                    buf += b"\x00"
                else:
                    buf[at:at] = rng.randbytes(rng.randint(1, 9))
            data = bytes(buf)
        try:
            trace, digest = Reader().decode(data)
        except SummaryError as exc:
            assert str(exc)
            outcomes["refused"] += 1
            continue
        outcomes["decoded"] += 1
        assert 0 <= trace.rank < 1 << 18 and digest.size >= 0
        for pg in trace.pgs.values():
            assert len(pg.seqs) == len(pg.sigs) == len(pg.created)
            assert {*pg.sigs, *pg.plain} <= trace.sig_details.keys()
    assert outcomes["refused"] > 100, outcomes  # the mutations reach the checks
