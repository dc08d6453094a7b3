"""Rank summaries, version 3: the same content as the JSON summaries (:mod:`.rank_summary`), as MessagePack
decoded by msgspec into typed structs.

Why msgspec: a summary is one small record of scalars, a few short lists and a dozen compressed int64
columns. msgspec decodes MessagePack straight into typed structs and checks every field's type, range and
length *while* it decodes (a declared length over a field's bound is refused before anything of that size is
allocated; no field is ``Any``, so nothing unexpected is built), which is what a hostile summary needs; the
columns arrive as ``bytes`` (no base64, no JSON text to scan). JSON (version 2) pays for parsing text and
base64 and then checks each field again in Python; pickle runs code; Arrow's IPC is built for large
columnar batches (its per-message schema and buffers cost more than a 20 KB record) and validates types
after reading, not field bounds while reading. Figures: ``benchmarks/bench_summary_formats.py``.

Layout: ``MAGIC`` then one MessagePack array (:class:`SummaryBody`, fields in order). A column is one marker
byte (``0``: values as they are, ``1``: differences from the previous value) then the zlib-compressed
little-endian int64 values. The signature table is zlib-compressed MessagePack (:class:`TableBody`), shared
byte for byte by ranks that behaved alike and decoded once. A reader tells the formats apart by the first
bytes: a JSON summary starts with ``{`` (:mod:`.decode` reads both).
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Callable, Mapping
from itertools import accumulate
from operator import sub
from typing import Annotated, Literal, Protocol, cast

import msgspec
from msgspec import Meta, Struct

from ..base.limits import MAX_CALL_SITE_FRAMES, MAX_GROUPS, MAX_WORLD_SIZE
from ..base.safe_text import printable
from ..decode.fields import I64
from ..trace.summarize import STATE_CODES, EntrySig, P2PEntry, PgTrace, Ranks, RankTrace, compact_ranks
from ..trace.tail_rows import TailRows
from .format import (
    LITTLE,
    MAX_COLUMN,
    MAX_CONTAINERS,
    MAX_P2P,
    MAX_SIGS,
    MAX_SUMMARY_BYTES,
    MAX_TAIL,
    MAX_TENSORS,
    TAIL_FIELDS,
    DumpDigest,
    SummaryError,
)


class Reader(Protocol):
    """What this module uses of :class:`.decode.Reader` (its caches and its budget): declared here, so the
    binary reader does not import the module that dispatches to it."""

    _digests: dict[tuple[int, int], bytes]
    _held: set[tuple[int, int, int]]
    _created: dict[tuple[str, bytes], array[int]]
    _bin_columns: dict[bytes, array[int]]
    _bin_deltas: dict[bytes, array[int]]
    _bin_tables: dict[bytes, dict[int, EntrySig]]

    def _spend(self, elements: int, where: str) -> None: ...

    def _digest(self, seqs: array[int], sigs: array[int]) -> bytes: ...

#: The first bytes of a version-3 summary.
MAGIC = b"frwatch.rank-summary/3\n"
VERSION = 3
#: A signature table inflates to at most this (a varied 2000-entry rank's is about 60 KB).
MAX_TABLE_BYTES = 4 * MAX_SUMMARY_BYTES // 8

_AS_IS, _DELTA = 0, 1
Int = Annotated[int, Meta(ge=-I64, le=I64 - 1)]
NonNeg = Annotated[int, Meta(ge=0, le=I64 - 1)]
Rank = Annotated[int, Meta(ge=0, lt=MAX_WORLD_SIZE)]
Text = Annotated[str, Meta(max_length=4096)]
Short = Annotated[str, Meta(max_length=40)]
Column = Annotated[bytes, Meta(max_length=4 * MAX_COLUMN)]
Tensors = Annotated[list[NonNeg], Meta(max_length=MAX_TENSORS)]


class DigestBody(Struct, array_like=True, frozen=True):
    size: NonNeg
    sha256: Annotated[str, Meta(max_length=64)]
    md5: Annotated[str, Meta(max_length=32)]


class PgBody(Struct, array_like=True, frozen=True):
    name: Text
    desc: Text
    backend: Short
    seqs: Column
    sigs: Column
    plain: Column
    created: Column
    var_seqs: Column
    var_in: Column
    var_out: Column
    tail: Column
    splits: Annotated[list[tuple[Annotated[int, Meta(ge=0, lt=MAX_TAIL)], Tensors, Tensors]], Meta(max_length=MAX_TAIL)]
    members_range: tuple[Rank, Rank, Annotated[int, Meta(ge=1, lt=MAX_WORLD_SIZE)]] | None
    members: Annotated[list[Rank], Meta(max_length=MAX_WORLD_SIZE)] | None
    last_enqueued: Int
    last_started: Int
    last_completed: Int
    status_known: bool
    first_record_id: Int


class P2PBody(Struct, array_like=True, frozen=True):
    pg: Text
    p2p_seq: Int
    kind: Literal["send", "recv"]
    src: Rank
    dst: Rank
    sig: Int
    state: Annotated[int, Meta(ge=-1, lt=len(STATE_CODES))]
    record_id: Int
    created_ns: Int


class SummaryBody(Struct, array_like=True, frozen=True):
    dump: DigestBody
    rank: Rank
    fmt: Annotated[str, Meta(max_length=16)]
    fr_version: Short
    backend: Short
    entries: NonNeg
    has_states: bool
    has_frames: bool
    has_timing: bool
    last_record_id: Int
    first_record_id: Int
    dumped_ns: Int
    world_ranks: tuple[Rank, Rank] | None
    pgs: Annotated[list[PgBody], Meta(max_length=MAX_GROUPS)]
    p2p: Annotated[list[P2PBody], Meta(max_length=MAX_P2P)]
    sigs: Annotated[bytes, Meta(max_length=MAX_SUMMARY_BYTES)]


Shape = Annotated[list[NonNeg], Meta(max_length=64)]
Shapes = Annotated[list[Shape], Meta(max_length=MAX_TENSORS)]
Dtypes = Annotated[list[Annotated[str, Meta(max_length=64)]], Meta(max_length=MAX_TENSORS)]
Frame = tuple[Text, Text, Int]


class SigBody(Struct, array_like=True, frozen=True):
    sig: Int
    op: Annotated[str, Meta(max_length=512)]
    input_sizes: Shapes
    input_dtypes: Dtypes
    output_sizes: Shapes
    output_dtypes: Dtypes
    site: NonNeg
    parts: Annotated[int, Meta(ge=1, le=I64 - 1)]
    varying: bool


class TableBody(Struct, array_like=True, frozen=True):
    sites: Annotated[list[Annotated[list[Frame], Meta(max_length=MAX_CALL_SITE_FRAMES)]], Meta(max_length=MAX_SIGS)]
    sigs: Annotated[list[SigBody], Meta(max_length=MAX_SIGS)]


_SUMMARY = msgspec.msgpack.Decoder(SummaryBody)
_TABLE = msgspec.msgpack.Decoder(TableBody)
_ENCODER = msgspec.msgpack.Encoder()


def _bad(where: str, what: str) -> SummaryError:
    return SummaryError(f"malformed summary: {where}: {what}")


#: Every byte but those that can open a MessagePack array or map (fixarray, fixmap, array16/32, map16/32).
_NOT_OPENERS = bytes(b for b in range(256) if not (0x80 <= b < 0xA0 or 0xDC <= b <= 0xDF))


def _containers(data: bytes, where: str) -> None:
    """Refuse MessagePack that could hold more than MAX_CONTAINERS arrays and maps, before decoding: every
    byte that can open one is counted (also inside strings, numbers and compressed columns: the bound errs
    on refusing, and only near ``MAX_SUMMARY_BYTES``). One pass in C (``bytes.translate``)."""
    if len(data.translate(None, _NOT_OPENERS)) > MAX_CONTAINERS:
        raise _bad(where, f"more than {MAX_CONTAINERS} arrays and maps")


# ---- writing ------------------------------------------------------------------------------------------


def pack_column(values: array[int], delta: bool = False) -> bytes:
    col, marker = values, _AS_IS
    if delta and len(values) > 1:
        diffs = [values[0], *map(sub, values[1:], values[:-1])]
        if min(diffs) >= -I64 and max(diffs) < I64:  # else a jump past int64: stored as is
            col, marker = array("q", diffs), _DELTA
    raw = array("q", col)
    if not LITTLE:
        raw.byteswap()
    return bytes([marker]) + zlib.compress(raw.tobytes(), 6)


def _members(ranks: Ranks | None) -> tuple[tuple[int, int, int] | None, list[int] | None]:
    if ranks is None:
        return None, None
    if isinstance(ranks, range) and ranks:
        return (ranks.start, ranks[-1], ranks.step), None
    return None, list(ranks)


def encode(trace: RankTrace, details: Mapping[int, EntrySig], dump: DumpDigest) -> bytes:
    """``trace`` (and the details of every signature it holds) as a version-3 summary's bytes."""
    held = {s for pg in trace.pgs.values() for s in (*pg.sigs, *pg.plain)} | {p.sig for p in trace.p2p}
    missing = held - details.keys()
    if missing:
        raise ValueError(f"{len(missing)} signature(s) of the trace have no detail")
    pgs = []
    for pg in trace.pgs.values():
        rng, members = _members(pg.config_ranks)
        tail = array("q", [
            x
            for t in pg.tail
            for x in (t.seq, t.record_id, t.sig, t.state, -1 if t.retired is None else int(t.retired),
                      t.created_ns, t.started_ns, t.completed_ns)
        ])
        splits = [(i, list(t.splits[0]), list(t.splits[1])) for i, t in enumerate(pg.tail) if t.splits]
        pgs.append(PgBody(
            pg.name, pg.desc, pg.backend, pack_column(pg.seqs, True), pack_column(pg.sigs), pack_column(pg.plain),
            pack_column(pg.created, True), pack_column(pg.var_seqs, True), pack_column(pg.var_in), pack_column(pg.var_out),
            pack_column(tail), splits, rng, members, pg.last_enqueued, pg.last_started, pg.last_completed,
            pg.status_known, pg.first_record_id,
        ))
    body = SummaryBody(
        DigestBody(dump.size, dump.sha256, dump.md5), trace.rank, trace.fmt, trace.version, trace.backend,
        trace.entries, trace.has_states, trace.has_frames, trace.has_timing, trace.last_record_id,
        trace.first_record_id, trace.dumped_ns, (trace.world_ranks[0], trace.world_ranks[1]) if trace.world_ranks else None,
        pgs,
        [P2PBody(p.pg, p.p2p_seq, cast(Literal["send", "recv"], p.kind), p.src, p.dst, p.sig, p.state, p.record_id, p.created_ns)
         for p in trace.p2p],
        _sig_table(sorted(held), details),
    )
    return MAGIC + _ENCODER.encode(body)


def _sig_table(sigs: list[int], details: Mapping[int, EntrySig]) -> bytes:
    sites: dict[tuple[tuple[str, str, int], ...], int] = {}
    rows = []
    for sig in sigs:
        d = details[sig]
        rows.append(SigBody(
            sig, d.op, [list(x) for x in d.input_sizes], list(d.input_dtypes),
            [list(x) for x in d.output_sizes], list(d.output_dtypes),
            sites.setdefault(d.call_site, len(sites)), d.parts, d.varying,
        ))
    table = TableBody([list(site) for site in sites], rows)
    return zlib.compress(_ENCODER.encode(table), 6)


# ---- reading ------------------------------------------------------------------------------------------


def decode(reader: Reader, data: bytes) -> tuple[RankTrace, DumpDigest]:
    """A version-3 summary's bytes (``MAGIC`` first; size already checked) -> the trace and its dump's
    digest, with ``reader``'s caches of shared columns and tables. Raises :class:`SummaryError`."""
    body = memoryview(data)[len(MAGIC):]
    _containers(data, "summary")
    try:
        b = _SUMMARY.decode(body)
    except msgspec.ValidationError as exc:
        raise SummaryError(f"malformed summary: {printable(str(exc), 160)}") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # found by the fuzz test: text not UTF-8
        raise SummaryError(f"not a summary or truncated: {printable(str(exc), 120)}") from None
    pgs: dict[str, PgTrace] = {}
    for i, p in enumerate(b.pgs):
        pg = _pg(reader, p, f"pgs[{i}]")
        if pg.name in pgs:
            raise _bad(f"pgs[{i}]", f"group {pg.name!r} twice")
        pgs[pg.name] = pg
    p2p = [
        P2PEntry(printable(e.pg), e.p2p_seq, e.kind, e.src, e.dst, e.sig, e.state, e.record_id, e.created_ns)
        for e in b.p2p
    ]
    details = _table(reader, b.sigs)
    if not all(p.sig in details for p in p2p):
        raise _bad("sigs", "a signature of the trace has no detail")
    for pg in pgs.values():
        key = (id(pg.sigs), id(pg.plain), id(details))
        if key in reader._held:
            continue
        if not details.keys() >= {*pg.sigs, *pg.plain}:
            raise _bad("sigs", "a signature of the trace has no detail")
        reader._held.add(key)
    d = b.dump
    trace = RankTrace(
        rank=b.rank, file="", fmt=printable(b.fmt), version=printable(b.fr_version),
        backend=printable(b.backend), entries=b.entries, pgs=pgs, p2p=p2p, sig_details=details,
        has_states=b.has_states, has_frames=b.has_frames, last_record_id=b.last_record_id,
        has_timing=b.has_timing, first_record_id=b.first_record_id, dumped_ns=b.dumped_ns,
        world_ranks=b.world_ranks,
    )
    return trace, DumpDigest(d.size, printable(d.sha256), printable(d.md5))


def inflate_column(
    packed: bytes | memoryview, delta: bool, where: str, spend: Callable[[int, str], None]
) -> array[int]:
    """A column's int64s from its zlib stream, both formats' (inflated within ``MAX_COLUMN``, the elements
    charged to ``spend`` before they are built; ``delta``: stored as differences, sequence numbers never
    going back)."""
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(packed, 8 * MAX_COLUMN)
    except zlib.error as exc:
        raise _bad(where, f"not a column ({printable(str(exc), 80)})") from None
    if inflate.unconsumed_tail or not inflate.eof or len(raw) % 8:
        raise _bad(where, "a column that is truncated or larger than allowed")
    spend(len(raw) // 8, where)
    col = array("q")
    col.frombytes(raw)
    if not LITTLE:
        col.byteswap()
    if delta and len(col) > 1:
        if where.endswith(".seqs") and min(col[1:]) < 0:
            raise _bad(where, "sequence numbers out of order")
        try:
            col = array("q", accumulate(col))
        except OverflowError:
            raise _bad(where, "a column past int64") from None
    return col


def column(reader: Reader, value: bytes, where: str, delta: bool, keep: bool = True) -> array[int]:
    """A column, inflated within bounds (``keep``: cached in ``reader`` for ranks that carry the same)."""
    cache = reader._bin_deltas if delta else reader._bin_columns
    got = cache.get(value) if keep else None
    if got is not None:
        reader._spend(len(got), where)
        return got
    if not value or value[0] not in (_AS_IS, _DELTA) or (value[0] == _DELTA and not delta):
        raise _bad(where, "not a column")
    col = inflate_column(memoryview(value)[1:], value[0] == _DELTA, where, reader._spend)
    if keep:
        if len(cache) > 1 << 16:
            cache.clear()
            reader._digests.clear()
            reader._held.clear()
        cache[value] = col
    return col


def _pg(reader: Reader, p: PgBody, where: str) -> PgTrace:
    name = printable(p.name)
    seqs = column(reader, p.seqs, f"{where}.seqs", True)
    sigs = column(reader, p.sigs, f"{where}.sigs", False)
    plain = column(reader, p.plain, f"{where}.plain", False)
    digest = reader._digest(seqs, sigs)
    created = reader._created.get((name, digest))
    if created is None:
        created = column(reader, p.created, f"{where}.created", True, keep=False)
    var_seqs = column(reader, p.var_seqs, f"{where}.var_seqs", True)
    var_in = column(reader, p.var_in, f"{where}.var_in", False)
    var_out = column(reader, p.var_out, f"{where}.var_out", False)
    if not len(seqs) == len(sigs) == len(plain) == len(created):
        raise _bad(where, "columns of different lengths")
    if not len(var_seqs) == len(var_in) == len(var_out):
        raise _bad(where, "size columns of different lengths")
    ranks: Ranks | None = None
    if p.members_range is not None:
        lo, hi, step = p.members_range
        if hi < lo or (hi - lo) % step:
            raise _bad(f"{where}.members", "not a range ending at its last member")
        ranks = range(lo, hi + 1, step)
    elif p.members:
        ranks = compact_ranks(p.members)
    tail = _tail(column(reader, p.tail, f"{where}.tail", False, keep=False), p.splits, f"{where}.tail")
    return PgTrace(
        name=name, desc=printable(p.desc), seqs=seqs, sigs=sigs, plain=plain, created=created, tail=tail,
        config_ranks=ranks, last_enqueued=p.last_enqueued, last_started=p.last_started,
        last_completed=p.last_completed, status_known=p.status_known, first_record_id=p.first_record_id,
        seq_digest=digest, plain_digest=reader._digest(seqs, plain), backend=printable(p.backend),
        var_seqs=var_seqs, var_in=var_in, var_out=var_out,
    )


def _tail(col: array[int], splits: list[tuple[int, list[int], list[int]]], where: str) -> TailRows:
    n, odd = divmod(len(col), TAIL_FIELDS)
    if odd or n > MAX_TAIL:
        raise _bad(where, f"not rows of {TAIL_FIELDS} (or more than {MAX_TAIL})")
    if n and (min(col[3::8]) < -1 or max(col[3::8]) >= len(STATE_CODES)):
        raise _bad(where, "a state out of range")
    if n and (min(col[4::8]) < -1 or max(col[4::8]) > 1):
        raise _bad(where, "retired is not -1, 0 or 1")
    pairs: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for i, a, b in splits:
        if i >= max(n, 1):
            raise _bad(where, "splits of a row it does not hold")
        pairs[i] = (tuple(a), tuple(b))
    return TailRows(col, pairs)


def _table(reader: Reader, packed: bytes) -> dict[int, EntrySig]:
    got = reader._bin_tables.get(packed)
    if got is not None:
        return got
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(packed, MAX_TABLE_BYTES)
    except zlib.error as exc:
        raise _bad("sigs", f"not a signature table ({printable(str(exc), 80)})") from None
    if inflate.unconsumed_tail or not inflate.eof:
        raise _bad("sigs", "a signature table that is truncated or larger than allowed")
    _containers(raw, "sigs")
    try:
        table = _TABLE.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise _bad("sigs", printable(str(exc), 160)) from None
    sites = [tuple((printable(n), printable(f), line) for n, f, line in site) for site in table.sites]
    details: dict[int, EntrySig] = {}
    for s in table.sigs:
        if s.site >= len(sites):
            raise _bad("sigs", "a call site it does not hold")
        details[s.sig] = EntrySig(
            op=printable(s.op, 512),
            input_sizes=tuple(map(tuple, s.input_sizes)),
            input_dtypes=tuple(printable(x, 64) for x in s.input_dtypes),
            output_sizes=tuple(map(tuple, s.output_sizes)),
            output_dtypes=tuple(printable(x, 64) for x in s.output_dtypes),
            call_site=sites[s.site],
            parts=s.parts,
            varying=s.varying,
        )
    if len(reader._bin_tables) > 1 << 12:
        reader._bin_tables.clear()
        reader._held.clear()
    reader._bin_tables[packed] = details
    return details
