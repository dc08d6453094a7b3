"""Read a rank's summary back from the store (:mod:`.rank_summary` describes the format): hostile input like a
dump. :class:`Reader` checks every field's type and bound by a schema written out by hand, counts the JSON
containers before parsing, inflates each column within a bound and all of them within ``MAX_ELEMENTS``, and
decodes the columns and signature tables that ranks alike share once.

About 400 lines by choice: every check of a hostile summary sits beside the field it guards, in one reader."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import zlib
from array import array
from typing import Any

from ..base.limits import MAX_CALL_SITE_FRAMES, MAX_GROUPS, MAX_WORLD_SIZE
from ..base.safe_text import printable
from ..decode.fields import I64
from ..trace.summarize import STATE_CODES, EntrySig, P2PEntry, PgTrace, Ranks, RankTrace, compact_ranks
from ..trace.tail_rows import TailRows
from . import binary as summary_binary
from .format import (
    FORMAT,
    MAX_COLUMN,
    MAX_CONTAINERS,
    MAX_ELEMENTS,
    MAX_P2P,
    MAX_SIGS,
    MAX_SUMMARY_BYTES,
    MAX_TAIL,
    MAX_TENSORS,
    READS,
    TAIL_FIELDS,
    DumpDigest,
    SummaryError,
)

_MAX_TEXT = 4096
_MAX_TABLE_BYTES = 4 * MAX_SUMMARY_BYTES


def _bad(where: str, what: str) -> SummaryError:
    return SummaryError(f"malformed summary: {where}: {what}")


def _int(value: Any, where: str, lo: int = -I64, hi: int = I64) -> int:
    if type(value) is not int or not lo <= value < hi:
        raise _bad(where, "not an integer in range")
    return value


def _bool(value: Any, where: str) -> bool:
    if type(value) is not bool:
        raise _bad(where, "not true or false")
    return value


def _text(value: Any, where: str, limit: int = _MAX_TEXT) -> str:
    if type(value) is not str or len(value) > limit:
        raise _bad(where, "not a string (or too long)")
    return printable(value)


def _list(value: Any, where: str, limit: int) -> list[Any]:
    if type(value) is not list or len(value) > limit:
        raise _bad(where, f"not a list of at most {limit}")
    return value


def _containers(data: bytes, where: str) -> None:
    """Refuse JSON text of more than MAX_CONTAINERS arrays and objects before it is parsed (a bracket in a
    string counts too: the bound only errs on the side of refusing)."""
    if data.count(b"[") + data.count(b"{") > MAX_CONTAINERS:
        raise _bad(where, f"more than {MAX_CONTAINERS} JSON arrays and objects")


class Reader:
    """Decodes summaries; columns met before (ranks that behaved alike) are decoded once."""

    def __init__(self) -> None:
        self._columns: dict[str, array[int]] = {}
        self._deltas: dict[str, array[int]] = {}
        self._tables: dict[str, dict[int, EntrySig]] = {}
        self._digests: dict[tuple[int, int], bytes] = {}
        self._elements = 0  # decoded by the summary being read (MAX_ELEMENTS)
        # ids of (sigs, plain, details) already checked to hold every signature they name: cached objects
        # only, and cleared with the caches that keep them alive
        self._held: set[tuple[int, int, int]] = set()
        # (group, seq digest) -> the creation times of the first accepted rank that recorded it
        self._created: dict[tuple[str, bytes], array[int]] = {}
        # version 3 (:mod:`.summary_binary`): the same caches, keyed by the columns' and tables' bytes
        self._bin_columns: dict[bytes, array[int]] = {}
        self._bin_deltas: dict[bytes, array[int]] = {}
        self._bin_tables: dict[bytes, dict[int, EntrySig]] = {}

    def accept(self, trace: RankTrace) -> None:
        """``trace`` is used: ranks decoded after it that recorded the same sequence in a group take its
        creation times instead of decoding theirs. The analyzer keeps only the first such rank's times
        (:class:`~.loading.ArrayPool`, interning in the same order), and a delta column is the costliest to
        decode (a Python int an element): 16k ranks alike decode one. Such a rank's own column is then not
        read, nor checked: nothing of it is used."""
        if len(self._created) > 1 << 16:
            self._created.clear()
        for name, pg in trace.pgs.items():
            self._created.setdefault((name, pg.seq_digest), pg.created)

    def column(self, value: Any, where: str, delta: bool = False, keep: bool = True) -> array[int]:
        """A column (``keep``: remembered for the ranks that carry the same one; times differ by rank and
        are not kept, or every rank's would stay in memory)."""
        if type(value) is not str or len(value) > 4 * MAX_COLUMN:
            raise _bad(where, "not a column")
        cache: dict[str, array[int]] = (self._deltas if delta else self._columns) if keep else {}
        got = cache.get(value)
        if got is not None:
            self._spend(len(got), where)
            return got
        text = value
        if delta and value.startswith("r"):  # stored as is: a jump past int64
            text, delta = value[1:], False
        try:
            packed = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _bad(where, f"not a column ({printable(str(exc), 80)})") from None
        col = summary_binary.inflate_column(packed, delta, where, self._spend)
        if len(cache) > 1 << 16:
            cache.clear()
            self._digests.clear()  # keyed by the ids of cached columns: those may now be freed
            self._held.clear()
        cache[value] = col
        return col

    def _spend(self, elements: int, where: str) -> None:
        self._elements += elements
        if self._elements > MAX_ELEMENTS:
            raise _bad(where, f"columns of more than {MAX_ELEMENTS} elements in all")

    def _digest(self, seqs: array[int], sigs: array[int]) -> bytes:
        """What :mod:`.summarize` digests, once per pair of shared columns (cached columns live on, so
        their ids stay theirs)."""
        key = (id(seqs), id(sigs))
        got = self._digests.get(key)
        if got is None:
            got = hashlib.blake2b(seqs.tobytes() + sigs.tobytes(), digest_size=16).digest()
            if len(self._digests) > 1 << 16:
                self._digests.clear()
            self._digests[key] = got
        return got

    def decode(self, data: bytes) -> tuple[RankTrace, DumpDigest]:
        """A summary's bytes -> the trace and the dump it was made from. Raises :class:`SummaryError`."""
        if len(data) > MAX_SUMMARY_BYTES:
            raise SummaryError(f"too large: {len(data)} bytes, more than {MAX_SUMMARY_BYTES}")
        if not data:
            raise SummaryError("empty")
        self._elements = 0
        if data.startswith(summary_binary.MAGIC):
            return summary_binary.decode(self, data)
        _containers(data, "summary")
        try:
            body = json.loads(data)
        except RecursionError:
            raise SummaryError("malformed summary: nested too deeply") from None
        except (UnicodeDecodeError, ValueError) as exc:
            raise SummaryError(f"not JSON or truncated: {printable(str(exc), 120)}") from None
        if type(body) is not dict:
            raise SummaryError("malformed summary: not an object")
        if body.get("format") != FORMAT:
            raise SummaryError(
                f"not a frwatch rank summary (format {printable(str(body.get('format')), 40)!r})"
            )
        if body.get("version") not in READS or type(body.get("version")) is not int:
            raise SummaryError(
                f"summary version {printable(str(body.get('version')), 20)!r}, this analyzer reads "
                f"{' and '.join(map(str, READS))}"
            )
        try:
            return self._trace(body)
        except RecursionError:
            raise SummaryError("malformed summary: nested too deeply") from None
        except SummaryError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise SummaryError(
                f"malformed summary: {type(exc).__name__}: {printable(str(exc), 120)}"
            ) from None

    def _trace(self, b: dict[str, Any]) -> tuple[RankTrace, DumpDigest]:
        d = b["dump"]
        if type(d) is not dict:
            raise _bad("dump", "not an object")
        digest = DumpDigest(
            size=_int(d["bytes"], "dump.bytes", 0),
            sha256=_text(d["sha256"], "dump.sha256", 64),
            md5=_text(d["md5"], "dump.md5", 32),
        )
        rank = _int(b["rank"], "rank", 0, MAX_WORLD_SIZE)
        world = b["world_ranks"]
        if world is not None:
            w = _list(world, "world_ranks", 2)
            world = (
                _int(w[0], "world_ranks", 0, MAX_WORLD_SIZE),
                _int(w[1], "world_ranks", 0, MAX_WORLD_SIZE),
            )
        pgs: dict[str, PgTrace] = {}
        for i, p in enumerate(_list(b["pgs"], "pgs", MAX_GROUPS)):
            if type(p) is not dict:
                raise _bad(f"pgs[{i}]", "not an object")
            pg = self._pg(p, f"pgs[{i}]")
            if pg.name in pgs:
                raise _bad(f"pgs[{i}]", f"group {pg.name!r} twice")
            pgs[pg.name] = pg
        p2p = [self._p2p(e, f"p2p[{i}]") for i, e in enumerate(_list(b["p2p"], "p2p", MAX_P2P))]
        details = self._sig_table(b["sigs"])
        if not all(p.sig in details for p in p2p):
            raise _bad("sigs", "a signature of the trace has no detail")
        for pg in pgs.values():
            key = (id(pg.sigs), id(pg.plain), id(details))  # all three cached: ranks alike check once
            if key in self._held:
                continue
            if not details.keys() >= {*pg.sigs, *pg.plain}:
                raise _bad("sigs", "a signature of the trace has no detail")
            self._held.add(key)
        trace = RankTrace(
            rank=rank,
            file="",
            fmt=_text(b["fmt"], "fmt", 16),
            version=_text(b["fr_version"], "fr_version", 40),
            backend=_text(b["backend"], "backend", 40),
            entries=_int(b["entries"], "entries", 0),
            pgs=pgs,
            p2p=p2p,
            sig_details=details,
            has_states=_bool(b["has_states"], "has_states"),
            has_frames=_bool(b["has_frames"], "has_frames"),
            last_record_id=_int(b["last_record_id"], "last_record_id"),
            has_timing=_bool(b["has_timing"], "has_timing"),
            first_record_id=_int(b["first_record_id"], "first_record_id"),
            dumped_ns=_int(b["dumped_ns"], "dumped_ns"),
            world_ranks=world,
        )
        return trace, digest

    def _pg(self, p: dict[str, Any], where: str) -> PgTrace:
        name = _text(p["name"], f"{where}.name")
        seqs = self.column(p["seqs"], f"{where}.seqs", delta=True)
        sigs = self.column(p["sigs"], f"{where}.sigs")
        plain = self.column(p["plain"], f"{where}.plain")
        digest = self._digest(seqs, sigs)
        created = self._created.get((name, digest))
        if created is None:
            created = self.column(p["created"], f"{where}.created", delta=True, keep=False)
        elif type(p["created"]) is not str:
            raise _bad(f"{where}.created", "not a column")
        var_seqs = self.column(p["var_seqs"], f"{where}.var_seqs", delta=True)
        var_in = self.column(p["var_in"], f"{where}.var_in")
        var_out = self.column(p["var_out"], f"{where}.var_out")
        if not len(seqs) == len(sigs) == len(plain) == len(created):
            raise _bad(where, "columns of different lengths")
        if not len(var_seqs) == len(var_in) == len(var_out):
            raise _bad(where, "size columns of different lengths")
        cfg = p["config_ranks"]
        ranks: Ranks | None = None
        if type(cfg) is dict:
            lo, hi = (
                _int(cfg["from"], f"{where}.config_ranks", 0, MAX_WORLD_SIZE),
                _int(cfg["to"], f"{where}.config_ranks", 0, MAX_WORLD_SIZE),
            )
            step = _int(cfg.get("step", 1), f"{where}.config_ranks", 1, MAX_WORLD_SIZE)
            if hi < lo or (hi - lo) % step:
                raise _bad(f"{where}.config_ranks", "not a range ending at its last member")
            ranks = range(lo, hi + 1, step)
        elif cfg is not None:
            members = [
                _int(r, f"{where}.config_ranks", 0, MAX_WORLD_SIZE) for r in _list(cfg, where, MAX_WORLD_SIZE)
            ]
            ranks = compact_ranks(members) if members else None
        tail = self._tail(self.column(p["tail"], f"{where}.tail", keep=False), p["splits"], f"{where}.tail")
        plain_digest = self._digest(seqs, plain)
        return PgTrace(
            name=name,
            desc=_text(p["desc"], f"{where}.desc"),
            seqs=seqs,
            sigs=sigs,
            plain=plain,
            created=created,
            tail=tail,
            config_ranks=ranks,
            last_enqueued=_int(p["last_enqueued"], f"{where}.last_enqueued"),
            last_started=_int(p["last_started"], f"{where}.last_started"),
            last_completed=_int(p["last_completed"], f"{where}.last_completed"),
            status_known=_bool(p["status_known"], f"{where}.status_known"),
            first_record_id=_int(p["first_record_id"], f"{where}.first_record_id"),
            seq_digest=digest,
            plain_digest=plain_digest,
            backend=_text(p["backend"], f"{where}.backend", 40),
            var_seqs=var_seqs,
            var_in=var_in,
            var_out=var_out,
        )

    @staticmethod
    def _tail(col: array[int], splits: Any, where: str) -> TailRows:
        """The kept entries: 8 int64 a row (seq, record id, signature, state, retired -1/0/1, created,
        started, completed), and the all_to_all splits of the few rows that have them."""
        n, odd = divmod(len(col), TAIL_FIELDS)
        if odd or n > MAX_TAIL:
            raise _bad(where, f"not rows of {TAIL_FIELDS} (or more than {MAX_TAIL})")
        if n and (min(col[3::8]) < -1 or max(col[3::8]) >= len(STATE_CODES)):
            raise _bad(where, "a state out of range")
        if n and (min(col[4::8]) < -1 or max(col[4::8]) > 1):
            raise _bad(where, "retired is not -1, 0 or 1")
        pairs: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        for item in _list(splits, where, MAX_TAIL):
            i, a, b = _list(item, where, 3)
            pairs[_int(i, where, 0, max(n, 1))] = (
                tuple(_int(x, where, 0) for x in _list(a, where, MAX_TENSORS)),
                tuple(_int(x, where, 0) for x in _list(b, where, MAX_TENSORS)),
            )
        return TailRows(col, pairs)  # rows of the checked column: TailEntry objects only when read

    @staticmethod
    def _p2p(e: Any, where: str) -> P2PEntry:
        pg, p2p_seq, kind, src, dst, sig, state, rid, created = _list(e, where, 9)
        if kind not in ("send", "recv"):
            raise _bad(where, "kind is not send or recv")
        return P2PEntry(
            pg=_text(pg, where),
            p2p_seq=_int(p2p_seq, where),
            kind=kind,
            src=_int(src, where, 0, MAX_WORLD_SIZE),
            dst=_int(dst, where, 0, MAX_WORLD_SIZE),
            sig=_int(sig, where),
            state=_int(state, where, -1, len(STATE_CODES)),
            record_id=_int(rid, where),
            created_ns=_int(created, where),
        )

    def _sig_table(self, text: Any) -> dict[int, EntrySig]:
        if type(text) is not str or len(text) > MAX_SUMMARY_BYTES:
            raise _bad("sigs", "not a signature table")
        got = self._tables.get(text)
        if got is not None:
            return got
        try:
            inflate = zlib.decompressobj()
            raw = inflate.decompress(base64.b64decode(text, validate=True), _MAX_TABLE_BYTES)
        except (binascii.Error, ValueError, zlib.error) as exc:
            raise _bad("sigs", f"not a signature table ({printable(str(exc), 80)})") from None
        if inflate.unconsumed_tail or not inflate.eof:
            raise _bad("sigs", "a signature table that is truncated or larger than allowed")
        _containers(raw, "sigs")
        table = json.loads(raw)
        if type(table) is not dict:
            raise _bad("sigs", "not an object")
        sites = [self._site(x, f"sites[{i}]") for i, x in enumerate(_list(table["sites"], "sites", MAX_SIGS))]
        details = dict(
            self._sig(x, f"sigs[{i}]", sites) for i, x in enumerate(_list(table["sigs"], "sigs", MAX_SIGS))
        )
        if len(self._tables) > 1 << 12:
            self._tables.clear()
            self._held.clear()  # keyed by the ids of cached tables: those may now be freed
        self._tables[text] = details
        return details

    @staticmethod
    def _site(value: Any, where: str) -> tuple[tuple[str, str, int], ...]:
        frames = []
        for f in _list(value, where, MAX_CALL_SITE_FRAMES):
            name, filename, line = _list(f, where, 3)
            frames.append((_text(name, where), _text(filename, where), _int(line, where)))
        return tuple(frames)

    @staticmethod
    def _sig(s: Any, where: str, sites: list[tuple[tuple[str, str, int], ...]]) -> tuple[int, EntrySig]:
        sig, op, isz, idt, osz, odt, site, parts, varying = _list(s, where, 9)

        def shapes(v: Any) -> tuple[tuple[int, ...], ...]:
            return tuple(
                tuple(_int(x, where, 0) for x in _list(shape, where, 64))
                for shape in _list(v, where, MAX_TENSORS)
            )

        def names(v: Any) -> tuple[str, ...]:
            return tuple(_text(x, where, 64) for x in _list(v, where, MAX_TENSORS))

        return _int(sig, where), EntrySig(
            op=_text(op, where, 512),
            input_sizes=shapes(isz),
            input_dtypes=names(idt),
            output_sizes=shapes(osz),
            output_dtypes=names(odt),
            call_site=sites[_int(site, where, 0, len(sites))],
            parts=_int(parts, where, 1),
            varying=_bool(varying, where),
        )
