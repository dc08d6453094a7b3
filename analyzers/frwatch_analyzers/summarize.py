"""One decoded dump -> a compact, picklable :class:`RankTrace` (the map step, the hot path).

The summary keeps, per process group, the sequence numbers a rank recorded and a stable 64-bit signature
of what it recorded at each: the fields its collective's rule (:mod:`.rules`) says must agree across the
members, and the user call site. Fields that may differ by design (all_to_all splits, the root's side of
gather and scatter, uneven all_gather/reduce_scatter) are left out of the signature and travel as per-rank
element counts, so ranks that differ by design still share one summary shape. Full detail (states, times,
record ids) is kept for the last entries of each group and for the first entries a rank had not completed
when it dumped: where a hang is read. Signatures are stable across processes (blake2b, not ``hash``), so
summaries made in different worker processes compare directly. Details of every distinct signature travel
once.

Over 400 lines by choice: the per-entry loop and the summary it builds are read together (the hot path).
"""

from __future__ import annotations

import hashlib
import operator
import re
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from . import fastscan, fields
from .limits import MAX_CALL_SITE_FRAMES, MAX_GROUPS
from .recorders import normalize
from .rules import Balance, Rule, api_order, rule_for
from .rules import elements as _elements
from .rules import numel as _numel
from .safe_load import DumpError, describe
from .safe_text import printable

#: How many of a group's last entries keep their full detail (states, times, record ids).
TAIL = 48
#: How many entries from the first one a rank had not completed keep their full detail as well.
OPEN_KEEP = 8

#: Keys a worker's caches hold before they are cleared (a few thousand in a real job: ops x sizes x sites),
#: and the sizes/dtypes remembered per (op, call site) for the fast path.
_CACHE_KEYS = 1 << 17
_SEEN_PER_SITE = 64

#: Frames from these paths are library plumbing; the first frame outside them is the user's call site.
_LIBRARY_MARKERS = ("/torch/", "\\torch\\", "/site-packages/", "/dist-packages/", "<frozen ", "/threading.py")

#: Members of a group: a range when contiguous (compact to pickle and to hash), else a tuple.
Ranks = range | tuple[int, ...]
Shapes = tuple[tuple[int, ...], ...]
#: What an (op, call site) carried once: sizes and dtypes as the entry had them (checked), the signature,
#: whether its sizes vary by rank, and its input and output elements.
_Seen = tuple[Any, Any, Any, Any, int, bool, int, int]

STATE_CODES = {"scheduled": 0, "started": 1, "completed": 2}
STATE_NAMES = {v: k for k, v in STATE_CODES.items()}

_FIELD_NAMES = (
    "process_group",
    "pg_id",
    "profiling_name",
    "input_sizes",
    "input_dtypes",
    "output_sizes",
    "output_dtypes",
    "state",
    "record_id",
    "is_p2p",
    "collective_seq_id",
)
_CREATED = operator.methodcaller("get", "time_created_ns", 0)
_FIELDS_NO_FRAMES = itemgetter(*_FIELD_NAMES)
_FIELDS = itemgetter(*_FIELD_NAMES, "frames")

_ROOTED = (Balance.GATHER, Balance.SCATTER)

_P2P_RE = re.compile(r"^(?P<type>send|recv)\s+(?P<a>[0-9]{1,9})\s*(?P<arrow>->|<-)\s*(?P<b>[0-9]{1,9})$")


@dataclass(frozen=True)
class EntrySig:
    """What a rank recorded at one sequence number, without times and states: the thing ranks must agree
    on. For a collective whose sizes may differ by rank (``varying``), only the number of tensors stays."""

    op: str
    input_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_sizes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    call_site: tuple[tuple[str, str, int], ...]  # (name, filename, line), innermost user frame first
    parts: int = 1  # >1: coalesced entries that share the sequence number
    varying: bool = False  # sizes left out by the collective's rule: see the per-rank counts


@dataclass(slots=True)
class TailEntry:
    """Full detail of one of the entries a rank's summary keeps for a group."""

    seq: int
    record_id: int
    sig: int
    state: int  # STATE_CODES; -1 unknown
    retired: bool | None
    created_ns: int
    started_ns: int
    completed_ns: int
    splits: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # all_to_all lists: elements per peer


@dataclass
class PgTrace:
    """One rank's record of one process group."""

    name: str
    desc: str
    seqs: array[int]  # sorted collective_seq_ids the rank holds (its ring-buffer window)
    sigs: array[int]  # signature digest per seq
    plain: array[int]  # the same without the call site: compared when some ranks' dumps have no frames (JSON)
    created: array[int]  # time_created_ns per seq (0 unknown)
    # the first entries not completed, then the last TAIL entries, by seq (read-only: a summary's are rows of
    # one column, tail_rows.TailRows)
    tail: Sequence[TailEntry]
    config_ranks: Ranks | None  # from pg_config when it is sane, else None (a range when contiguous)
    last_enqueued: int  # from pg_status when present, else the last seq held
    last_started: int
    last_completed: int  # from pg_status when present, else derived from states/retired
    status_known: bool
    first_record_id: int = -1
    seq_digest: bytes = b""  # digest of (seqs, sigs): ranks with equal digests behaved identically
    plain_digest: bytes = b""  # digest of (seqs, plain)
    backend: str = ""  # the profiling names' prefix ("nccl", "gloo"): each backend has its own recorder
    var_seqs: array[int] = field(default_factory=lambda: array("q"))  # entries whose sizes may differ by rank
    var_in: array[int] = field(default_factory=lambda: array("q"))  # their input elements
    var_out: array[int] = field(default_factory=lambda: array("q"))  # their output elements


@dataclass
class P2PEntry:
    pg: str
    p2p_seq: int
    kind: str  # "send" | "recv"
    src: int  # group-local, as the profiling name says
    dst: int
    sig: int
    state: int
    record_id: int
    created_ns: int


@dataclass
class Scan:
    """What a dump's entries say, per group, before the groups' summaries are built."""

    # per pg: seqs, sigs, entries, seqs whose sizes vary and their input and output elements (coalesced
    # entries merged)
    per_pg: dict[str, tuple[list[int], list[int], list[Any], list[int], list[int], list[int]]]
    pg_backend: dict[str, str]
    pg_desc: dict[str, str]
    pgid_to_name: dict[str, str]
    has_states: bool
    last_record_id: int
    has_frames: bool
    p2p: list[P2PEntry]


@dataclass
class RankTrace:
    """Everything the reduce step needs from one rank's dump."""

    rank: int
    file: str
    fmt: str
    version: str
    backend: str  # "nccl", "gloo", ... from profiling names
    entries: int
    pgs: dict[str, PgTrace]
    p2p: list[P2PEntry]
    sig_details: dict[int, EntrySig] = field(default_factory=dict)  # only signatures new to this worker
    has_states: bool = False  # NCCL-style started/completed states present
    has_frames: bool = False
    last_record_id: int = -1
    has_timing: bool = False  # some entry was seen 'started' (TORCH_NCCL_ENABLE_TIMING)
    first_record_id: int = -1
    dumped_ns: int = 0  # the latest timestamp in the summary: close to when the dump was taken
    world_ranks: tuple[int, int] | None = None  # (lowest, highest) rank of an unnamed pg_config entry (gloo)
    files: list[str] = field(default_factory=list)  # every file merged into this trace (merge.py)


def _digest(obj: object) -> int:
    return int.from_bytes(hashlib.blake2b(repr(obj).encode(), digest_size=8).digest(), "little", signed=True)


def _as_int(value: Any, default: int = -1) -> int:
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return number if -fields.I64 <= number < fields.I64 else default


def _parse_ranks(value: Any) -> list[int] | None:
    if isinstance(value, list | tuple):
        return list(value) if all(type(v) is int for v in value) else None
    if isinstance(value, str):
        text = value.strip().strip("[]").strip()
        if not text:
            return []
        try:
            return [int(v) for v in text.split(",")]
        except ValueError:
            return None
    return None


def compact_ranks(ranks: list[int]) -> Ranks:
    """A member list as a ``range`` when it is one, contiguous or strided (the usual cases: a TP group
    ``range(8k, 8k + 8)``, a DP group ``range(k, world, 8)``; 16k ranks pickle and hash as three ints, not
    16k), else a tuple. Members lists are per rank and per group: a list each would be O(ranks^2)."""
    if len(ranks) > 1 and ranks[1] > ranks[0]:
        step = ranks[1] - ranks[0]
        if (ranks[-1] - ranks[0]) % step == 0 and len(ranks) == (ranks[-1] - ranks[0]) // step + 1:
            members = range(ranks[0], ranks[-1] + 1, step)
            if ranks == list(members):
                return members
    elif len(ranks) == 1:
        return range(ranks[0], ranks[0] + 1)
    return tuple(ranks)


def _call_site(frames: Any, where: str = "an entry") -> tuple[tuple[str, str, int], ...]:
    if not isinstance(frames, list | tuple) or not frames:
        return ()
    checked = [fields.frame(f, where) for f in frames]  # every frame type-checked, library ones too
    user = [f for f in checked if not any(m in f[1] for m in _LIBRARY_MARKERS)]
    return tuple(user[:MAX_CALL_SITE_FRAMES]) if user else tuple(checked[:1])


def _compat(
    rule: Rule, isz: Shapes, idt: tuple[str, ...], osz: Shapes, odt: tuple[str, ...]
) -> tuple[Any, ...]:
    """The fields of an entry its rule says must agree (sizes that may differ keep only their count)."""
    if not rule.varying and rule.input_dtypes and rule.output_dtypes:
        return (isz, idt, osz, odt)
    return (
        isz if rule.inputs else (((),) * len(isz) if rule.input_count else ()),
        idt if rule.input_dtypes else (),
        osz if rule.outputs else (((),) * len(osz) if rule.output_count else ()),
        odt if rule.output_dtypes else (),
    )


def parse_p2p(op: str) -> tuple[str, int, int] | None:
    """``'nccl:send 1->2'`` -> ``('send', 1, 2)``; ``'nccl:recv 3<-0'`` -> ``('recv', 0, 3)`` as (kind, src, dst)."""
    name = op.split(":", 1)[-1].strip()
    m = _P2P_RE.match(name)
    if not m:
        return None
    a, b = int(m["a"]), int(m["b"])
    if m["type"] == "send":
        return "send", a, b
    return "recv", (b if m["arrow"] == "<-" else a), (a if m["arrow"] == "<-" else b)


class Summarizer:
    """Turns decoded dumps into RankTraces; remembers which signature details it already emitted."""

    def __init__(self, *, compiled: bool | None = None) -> None:
        # the per-entry loop's common case in C (fastscan.py): None the default, False Python alone
        self._c = fastscan.DEFAULT if compiled is None else fastscan.COMPILED if compiled else None
        self._emitted: set[int] = set()
        self._plain_of: dict[int, int] = {}  # signature -> the same without call site
        self._ranks_cache: dict[str, Ranks] = {}  # pg_config 'ranks' text -> members
        self._rules: dict[str, Rule] = {}
        # Kept across the files of a worker (ranks record the same signatures): every signature's detail,
        # the signature of each checked (op, kept fields, site) key, and per (op, call site) the sizes and
        # dtypes seen there, as entries had them (lists), most recent first. Bounded: cleared when full.
        self.details: dict[int, EntrySig] = {}
        self._key_cache: dict[Any, int] = {}
        self._by_site: dict[tuple[str, Any, str], list[_Seen]] = {}

    def _trim(self) -> None:
        """Past the bound, every cache goes at once (a cached signature whose detail was dropped would
        never be emitted again); a detail emitted before is emitted again when it comes back."""
        if max(len(self._key_cache), len(self._by_site), len(self.details)) > _CACHE_KEYS:
            self._key_cache.clear()
            self._by_site.clear()
            self.details.clear()
            self._plain_of.clear()
            self._emitted.clear()

    def summarize(self, dump: dict[str, Any], rank: int, file: str, fmt: str) -> RankTrace:
        dump = normalize(dump) if isinstance(dump, dict) else dump  # each recorder's fields (recorders.py)
        entries: list[Any] = dump.get("entries") or []
        self._trim()
        with_frames = bool(entries) and isinstance(entries[0], dict) and "frames" in entries[0]
        scan = self._scan(entries, with_frames)
        per_pg = scan.per_pg
        p2p = scan.p2p
        op0 = entries[0].get("profiling_name") if entries else None
        backend = printable(op0.split(":", 1)[0], 40) if type(op0) is str else ""
        pgs, world_ranks = self._build_pgs(
            dump, rank, per_pg, scan.pg_desc, scan.pgid_to_name, scan.pg_backend
        )
        details = self._new_details(per_pg, p2p)
        tails = [t for pg in pgs.values() for t in pg.tail]
        has_timing = any(t.started_ns > 0 or t.state == 1 for t in tails) or any(
            pg.last_started >= 0 for pg in pgs.values()
        )
        dumped_ns = max((max(t.created_ns, t.started_ns, t.completed_ns) for t in tails), default=0)
        dumped_ns = max([dumped_ns, *(p.created_ns for p in p2p[-64:])])
        first_rid = min((pg.first_record_id for pg in pgs.values() if pg.first_record_id >= 0), default=-1)
        return RankTrace(
            rank=rank,
            file=file,
            fmt=fmt,
            version=str(dump.get("version", "")),
            backend=backend,
            entries=len(entries),
            pgs=pgs,
            p2p=p2p,
            sig_details=details,
            has_states=scan.has_states,
            has_frames=scan.has_frames,
            last_record_id=scan.last_record_id,
            has_timing=has_timing,
            first_record_id=first_rid,
            dumped_ns=dumped_ns,
            world_ranks=world_ranks,
            files=[file],
        )

    def _scan(self, entries: list[Any], with_frames: bool) -> Scan:
        """The per-entry loop: every dump, every field type-checked and named when wrong."""
        site_cache: dict[tuple[int, ...], tuple[tuple[str, str, int], ...]] = {}
        local = self.details  # every signature's detail (this file's among them)
        # per pg: [seqs, sigs, entries, var seqs, var in, var out]  (coalesced entries merged)
        per_pg: dict[str, tuple[list[int], list[int], list[Any], list[int], list[int], list[int]]] = {}
        pg_backend: dict[str, str] = {}
        pg_desc: dict[str, str] = {}
        pgid_to_name: dict[str, str] = {}
        p2p: list[P2PEntry] = []
        has_states = False
        last_record_id = -1
        pg_cache: dict[Any, str] = {}
        by_site = self._by_site
        this_file: dict[Any, tuple[tuple[tuple[str, str, int], ...], list[_Seen]]] = {}
        get_state = STATE_CODES.get
        fast = _FIELDS if with_frames else _FIELDS_NO_FRAMES
        runs: dict[str, list[int]] = {}  # per pg: the part signatures of a coalesced region still open
        step = self._c.step if self._c is not None and type(entries) is list else None
        n, nxt = len(entries), 0
        memo: dict[Any, Any] = {}  # the compiled step's, for this scan
        ctx = (
            entries,
            with_frames,
            pg_cache,
            this_file,
            per_pg,
            runs,
            STATE_CODES,
            memo,
            site_cache,
            by_site,
        )
        while nxt < n:
            if step is not None:  # the common case in C, up to the first entry that is not (fastscan.py)
                nxt, has_states, last_record_id = step(ctx, nxt, has_states, last_record_id)
                if nxt >= n:
                    break
            i, e = nxt, entries[nxt]
            nxt += 1
            if type(e) is not dict:
                raise DumpError(f"malformed dump: entry {i} is {describe(e)}, not a dict")
            try:
                if with_frames:
                    pg, pg_id, op, isz, idt, osz, odt, state_name, record_id, is_p2p, seq, frames = fast(e)
                else:
                    pg, pg_id, op, isz, idt, osz, odt, state_name, record_id, is_p2p, seq = fast(e)
                    frames = None
            except KeyError:  # an older or partial entry: the same fields, one by one
                pg, pg_id, op, isz, idt, osz, odt, state_name, record_id, is_p2p, seq = map(
                    e.get, _FIELD_NAMES
                )
                frames = e.get("frames")
            # type-strict before anything is hashed: a nested tuple here would crash or hang a hash
            if type(pg) is not tuple or len(pg) != 2 or type(pg[0]) is not str or type(pg[1]) is not str:
                pg = fields.process_group(pg, f"entry {i}")
            if type(pg_id) is not int and type(pg_id) is not str:
                pg_id = fields.pg_id(pg_id, f"entry {i}")
            pgk = (pg_id, pg)
            pg_name = pg_cache.get(pgk)
            if pg_name is None:
                pg_name = pg_cache[pgk] = self._pg_name(i, pg_id, pg, pg_desc, pgid_to_name)
            if type(op) is not str:
                op = fields.text(op, "profiling_name", f"entry {i}")
            if frames:
                if type(frames) is not list:
                    frames = fields.frames(frames, f"entry {i}")
                fkey = tuple(map(id, frames))  # torch's pickler shares frame dicts across a dump
            else:
                fkey = ()
            # one lookup an entry: (op, frame list, group) -> its call site and the sizes and dtypes seen
            # there before (kept across files by op, call site and group kind: a group's size shows in
            # its sizes, so a group kind holds few of them)
            here = this_file.get((op, fkey, pgk))
            if here is None:
                if fkey:
                    site = site_cache.get(fkey)
                    if site is None:
                        site = site_cache[fkey] = _call_site(frames, f"entry {i}")
                else:
                    site = ()
                kind = pg[1] if pg is not None and len(pg) > 1 else ""
                here = this_file[(op, fkey, pgk)] = (site, by_site.setdefault((op, site, kind), []))
            site, seen = here
            # fast path: an op from a call site carries one of a few sizes and dtypes seen there before:
            # comparing the entry's lists with those (in C, no allocation, no deeper than the checked ones
            # they are compared with) is cheaper than checking them and building a key
            for cand in seen:
                if cand[0] == isz and cand[1] == idt and cand[2] == osz and cand[3] == odt:
                    _, _, _, _, sig, varying, n_in, n_out = cand
                    break
            else:
                sig, varying, n_in, n_out = self.signature(i, op, site, isz, idt, osz, odt)
                if len(seen) >= _SEEN_PER_SITE:
                    seen.pop()
                seen.insert(0, (isz, idt, osz, odt, sig, varying, n_in, n_out))
            if type(state_name) is str:
                state = get_state(state_name, -1)
            else:
                fields.state(state_name, f"entry {i}")
                state = -1
            if state > 0:
                has_states = True
            if type(record_id) is not int:
                record_id = fields.integer(record_id, "record_id", f"entry {i}")
            if record_id > last_record_id:
                last_record_id = record_id
            elif record_id >= 0:  # a recorder's ids increase; a repeated or reordered entry is not its dump
                raise DumpError(
                    f"malformed dump: entry {i}: record_id {record_id} does not follow {last_record_id} "
                    "(a Flight Recorder's record ids increase)"
                )
            if type(is_p2p) is not bool:
                is_p2p = fields.flag(is_p2p, "is_p2p", f"entry {i}")
            if is_p2p:
                parsed = parse_p2p(op)
                if parsed is not None:
                    kind, src, dst = parsed
                    p2p.append(
                        P2PEntry(
                            pg=pg_name,
                            p2p_seq=_as_int(e.get("p2p_seq_id")),
                            kind=kind,
                            src=src,
                            dst=dst,
                            sig=sig,
                            state=state,
                            record_id=record_id,
                            created_ns=_as_int(e.get("time_created_ns"), 0),
                        )
                    )
                elif state >= 0:
                    # a p2p batch's closing entry (nccl:coalesced) carries the batch's state; its sends and recvs
                    # (same group, same p2p_seq_id) stay 'scheduled' whatever happened (FACTS.md: coalescing)
                    p2p_seq = _as_int(e.get("p2p_seq_id"))
                    for part in reversed(p2p):
                        if part.pg != pg_name or part.p2p_seq != p2p_seq:
                            break
                        part.state = state
                continue  # p2p ops (and a p2p batch's closing entry) have no collective sequence number
            if type(seq) is not int:
                seq = fields.integer(seq, "collective_seq_id", f"entry {i}")
            cols = per_pg.get(pg_name)
            if cols is None:
                cols = per_pg[pg_name] = ([], [], [], [], [], [])
                pg_backend[pg_name] = printable(op.split(":", 1)[0], 40) if ":" in op else ""
            seqs_l, sigs_l, ents_l, var_s, var_i, var_o = cols
            if varying:
                var_s.append(seq)
                var_i.append(n_in)
                var_o.append(n_out)
            if seqs_l and seqs_l[-1] == seq:
                # coalesced: several entries share one sequence number; their signature is a chain digest
                # (O(1) a part) and the combined detail is built once, when the region ends (linear)
                run = runs.get(pg_name)
                if run is None:
                    run = runs[pg_name] = [sigs_l[-1]]
                run.append(sig)
                sigs_l[-1] = _digest((sigs_l[-1], sig))
                ents_l[-1] = e
            else:
                if runs:
                    run = runs.pop(pg_name, None)
                    if run is not None:
                        self._close_run(sigs_l[-1], run, local)
                seqs_l.append(seq)
                sigs_l.append(sig)
                ents_l.append(e)
        for name, run in runs.items():
            self._close_run(per_pg[name][1][-1], run, local)
        return Scan(
            per_pg=per_pg,
            pg_backend=pg_backend,
            pg_desc=pg_desc,
            pgid_to_name=pgid_to_name,
            has_states=has_states,
            last_record_id=last_record_id,
            has_frames=bool(site_cache),
            p2p=p2p,
        )

    @staticmethod
    def _pg_name(
        i: int, pg_id: Any, pg: tuple[str, ...] | None, pg_desc: dict[str, str], pgid_to_name: dict[str, str]
    ) -> str:
        pg_id = fields.pg_id(pg_id, f"entry {i}")  # bounded: str() of a huge integer fails
        if pg:
            name = printable(pg[0])
            desc = printable(pg[1]) if len(pg) > 1 else ""
        else:
            name, desc = ("?" if pg_id is None else printable(str(pg_id))), ""
        pg_desc.setdefault(name, desc)
        pgid_to_name.setdefault(printable(str(pg_id)), name)
        return name

    def signature(
        self, i: int, op: str, site: tuple[tuple[str, str, int], ...], isz: Any, idt: Any, osz: Any, odt: Any
    ) -> tuple[int, bool, int, int]:
        """Entry ``i``'s signature (its fields type-checked here), whether its sizes may vary by rank, and
        its input and output elements (counted only then)."""
        where = f"entry {i}"
        rule = self._rules.get(op)
        if rule is None:
            rule = self._rules[op] = rule_for(op)
        sizes_in = fields.sizes(isz, "input_sizes", where)  # hashable, type-checked copies
        sizes_out = fields.sizes(osz, "output_sizes", where)
        dtypes_in = fields.dtypes(idt, "input_dtypes", where)
        dtypes_out = fields.dtypes(odt, "output_dtypes", where)
        if rule.balance in _ROOTED:  # NCCL records scatter's sides swapped: read them as the API has them
            sizes_in, dtypes_in, sizes_out, dtypes_out = api_order(
                rule.balance, sizes_in, dtypes_in, sizes_out, dtypes_out
            )
        kept = _compat(rule, sizes_in, dtypes_in, sizes_out, dtypes_out)
        raw_key = (op, *kept, site)
        varying = rule.varying
        sig = self._key_cache.get(raw_key)
        if sig is None:
            sig = self._key_cache[raw_key] = self._new_sig(op, kept, site, varying, self.details)
        # an undefined placeholder (NCCL's non-root gather/scatter) holds no element: see rules.elements
        n_in, n_out = (
            (_elements(sizes_in, dtypes_in), _elements(sizes_out, dtypes_out)) if varying else (0, 0)
        )
        return sig, varying, n_in, n_out

    def _new_details(self, per_pg: Mapping[str, tuple[Any, ...]], p2p: list[P2PEntry]) -> dict[int, EntrySig]:
        """The details of the signatures this file holds (and of their call-site-less twins) that this
        worker has not emitted yet; marked emitted (see :meth:`forget` when the trace is dropped)."""
        held = {sig for cols in per_pg.values() for sig in set(cols[1])}
        held.update(p.sig for p in p2p)
        plain_of = self._plain_of
        held.update([plain_of[sig] for sig in held if sig in plain_of])
        emitted, local = self._emitted, self.details
        details = {sig: local[sig] for sig in held - emitted if sig in local}
        emitted.update(details)
        return details

    def forget(self, trace: RankTrace) -> None:
        """``trace`` is not handed on (its file is refused): its details are not emitted after all."""
        self._emitted.difference_update(trace.sig_details)

    def _close_run(self, combined: int, parts: list[int], local: dict[int, EntrySig]) -> None:
        """The detail of a coalesced region's chain signature ``combined``, from its parts, once."""
        if combined not in local:
            local[combined] = _combine_all([local[p] for p in parts])
            self._plain_of[combined] = _plain(local[combined], local)

    def _new_sig(
        self,
        op: str,
        kept: tuple[Any, ...],
        site: tuple[tuple[str, str, int], ...],
        varying: bool,
        local: dict[int, EntrySig],
    ) -> int:
        isz, idt, osz, odt = kept  # type-checked (fields.sizes/dtypes), only the fields that must agree
        esig = EntrySig(
            op=printable(op),
            input_sizes=isz,
            input_dtypes=tuple(map(printable, idt)),
            output_sizes=osz,
            output_dtypes=tuple(map(printable, odt)),
            call_site=site,
            varying=varying,
        )
        sig = _digest(esig)
        local[sig] = esig
        self._plain_of[sig] = _plain(esig, local)
        return sig

    def _build_pgs(
        self,
        dump: dict[str, Any],
        rank: int,
        per_pg: dict[str, tuple[list[int], list[int], list[Any], list[int], list[int], list[int]]],
        pg_desc: dict[str, str],
        pgid_to_name: dict[str, str],
        pg_backend: dict[str, str],
    ) -> tuple[dict[str, PgTrace], tuple[int, int] | None]:
        """The groups' summaries, and the world an unnamed pg_config entry lists (gloo writes
        ``{'': {'ranks': '[0, 1, 2, 3]'}}``: the name is broken, the member list is not)."""
        world: tuple[int, int] | None = None
        config = dump.get("pg_config") or {}
        status = dump.get("pg_status") or {}
        for part, value in (("pg_config", config), ("pg_status", status)):
            if type(value) is not dict:
                raise DumpError(f"malformed dump: {part} is {describe(value)}, not a dict")
        config_ranks: dict[str, Ranks] = {}
        for key, cfg in config.items():
            key = fields.group_key(key, "pg_config")
            if type(cfg) is not dict:
                raise DumpError(f"malformed dump: pg_config[{key!r}] is {describe(cfg)}, not a dict")
            where = f"pg_config[{key!r}]"
            name = fields.text(cfg.get("name"), "name", where) or key
            raw = cfg.get("ranks")
            ranks = self._ranks_cache.get(raw) if isinstance(raw, str) else None
            if ranks is None:
                fields.count_members(raw, where)
                parsed = _parse_ranks(raw)
                if parsed is None and raw is not None:
                    raise DumpError(f"malformed dump: {where}.ranks is {describe(raw)}, not a list of ranks")
                ranks = compact_ranks(fields.members(parsed, f"{where}.ranks")) if parsed else None
                if isinstance(raw, str) and ranks is not None:
                    self._ranks_cache[raw] = ranks  # every rank's dump repeats the same strings
            if name and ranks:
                config_ranks[name] = ranks
                pg_desc.setdefault(name, fields.text(cfg.get("desc"), "desc", where))
            elif ranks and rank in ranks and ranks[0] == 0:
                world = (0, max(ranks))
        status_by_name: dict[str, dict[str, Any]] = {}
        for pg_id, st in status.items():
            key = fields.group_key(pg_id, "pg_status")
            if type(st) is not dict:
                raise DumpError(f"malformed dump: pg_status[{key!r}] is {describe(st)}, not a dict")
            status_by_name[pgid_to_name.get(key, key)] = st
        names = set(per_pg) | set(config_ranks)
        if len(names) > MAX_GROUPS:
            raise DumpError(f"malformed dump: {len(names)} process groups, more than the {MAX_GROUPS} read")
        out: dict[str, PgTrace] = {}
        for name in names:
            seq_l, sig_l, ent_l, var_s, var_i, var_o = per_pg.get(name, ([], [], [], [], [], []))
            if not all(map(operator.le, seq_l, seq_l[1:])):  # rarely: entries out of order
                order = sorted(range(len(seq_l)), key=seq_l.__getitem__)
                seq_l, sig_l, ent_l = (
                    [seq_l[i] for i in order],
                    [sig_l[i] for i in order],
                    [ent_l[i] for i in order],
                )
            try:
                seqs = array("q", seq_l)
            except OverflowError:
                raise DumpError(f"malformed dump: pg {name}: a collective_seq_id is beyond 2**63") from None
            sigs = array("q", sig_l)
            plain_of = self._plain_of
            plain = array("q", map(plain_of.__getitem__, sig_l))
            created = _created(ent_l, self._c)
            tail = [_tail_entry(seq_l[i], sig_l[i], ent_l[i], self._c) for i in _kept(ent_l)]
            st = status_by_name.get(name)
            last_seq = seqs[-1] if seqs else -1
            if st is not None:
                enq = _as_int(st.get("last_enqueued_collective"))
                started = _as_int(st.get("last_started_collective"))
                completed = _as_int(st.get("last_completed_collective"))
                known = True
            else:
                enq, started, completed, known = last_seq, -1, _derived_completed(tail), False
            digest = hashlib.blake2b(seqs.tobytes() + sigs.tobytes(), digest_size=16).digest()
            plain_digest = hashlib.blake2b(seqs.tobytes() + plain.tobytes(), digest_size=16).digest()
            out[name] = PgTrace(
                name=name,
                desc=pg_desc.get(name, ""),
                seqs=seqs,
                sigs=sigs,
                plain=plain,
                created=created,
                tail=tail,
                config_ranks=config_ranks.get(name),
                last_enqueued=max(enq, last_seq),
                last_started=started,
                last_completed=completed,
                status_known=known,
                first_record_id=_as_int(ent_l[0].get("record_id")) if ent_l else -1,
                seq_digest=digest,
                plain_digest=plain_digest,
                backend=pg_backend.get(name, ""),
                var_seqs=array("q", var_s),
                var_in=array("q", var_i),
                var_out=array("q", var_o),
            )
        return out, world


def _created(ents: list[Any], compiled: fastscan.Compiled | None = None) -> array[int]:
    """``time_created_ns`` of each entry (0 unknown: missing, not an integer, beyond int64)."""
    plain = compiled.created(ents) if compiled is not None else None
    if plain is not None:  # every time a plain int64, read in C
        column = array("q")
        column.frombytes(plain)
        return column
    times = list(map(_CREATED, ents))
    if set(map(type, times)) <= {int}:  # the usual case, in C (a bool is not a time: it reads as 0 below)
        try:
            return array("q", times)
        except OverflowError:
            pass
    try:
        return array("q", [t if type(t) is int else 0 for t in times])
    except OverflowError:  # a time beyond int64 reads as unknown
        return array("q", [_as_int(t, 0) for t in times])


def _done(e: dict[str, Any]) -> bool:
    return e.get("state") == "completed" or e.get("retired") is True


def _kept(ents: list[Any]) -> list[int]:
    """Indices whose detail is kept: the first OPEN_KEEP from the first entry not done (read backwards:
    only the open end is walked), and the last TAIL."""
    n = len(ents)
    first_open = n
    while first_open > 0 and not _done(ents[first_open - 1]):
        first_open -= 1
    keep = set(range(max(0, n - TAIL), n))
    keep.update(range(first_open, min(n, first_open + OPEN_KEEP)))
    return sorted(keep)


def _tail_entry(
    seq: int, sig: int, e: dict[str, Any], compiled: fastscan.Compiled | None = None
) -> TailEntry:
    splits = None
    ins, outs = e.get("input_sizes"), e.get("output_sizes")
    if (
        type(ins) is list
        and type(outs) is list
        and len(ins) > 1
        and len(ins) == len(outs)
        and len(ins) <= 65_536
    ):
        name = e.get("profiling_name")
        if isinstance(name, str) and rule_for(name).varying:  # the sizes were type-checked in the loop
            splits = (tuple(_numel((s,)) for s in ins), tuple(_numel((s,)) for s in outs))
    row = compiled.detail(e, STATE_CODES) if compiled is not None else None
    if row is not None:  # every value plain, read in C
        record_id, state, retired_flag, created, started, completed = row
        return TailEntry(seq, record_id, sig, state, retired_flag, created, started, completed, splits)
    st = e.get("state")
    retired = e.get("retired")
    return TailEntry(
        seq=seq,
        record_id=_as_int(e.get("record_id")),
        sig=sig,
        state=STATE_CODES.get(st, -1) if isinstance(st, str) else -1,
        retired=retired if isinstance(retired, bool) else None,
        created_ns=_as_int(e.get("time_created_ns"), 0),
        started_ns=_as_int(e.get("time_discovered_started_ns"), 0),
        completed_ns=_as_int(e.get("time_discovered_completed_ns"), 0),
        splits=splits,
    )


def _derived_completed(tail: list[TailEntry]) -> int:
    done = -1
    for t in tail:
        if t.state == STATE_CODES["completed"] or t.retired:
            done = max(done, t.seq)
    return done


def _plain(sig: EntrySig, local: dict[int, EntrySig]) -> int:
    if not sig.call_site:
        return _digest(sig)
    bare = EntrySig(
        sig.op,
        sig.input_sizes,
        sig.input_dtypes,
        sig.output_sizes,
        sig.output_dtypes,
        (),
        sig.parts,
        sig.varying,
    )
    digest = _digest(bare)
    local.setdefault(digest, bare)
    return digest


def _combine_all(parts: list[EntrySig]) -> EntrySig:
    """One signature for a coalesced region: ops joined with '+' (once they differ), fields concatenated.
    Linear in the parts (a region of 20k entries must not cost 20k^2)."""
    first = parts[0]
    ops = [first.op]
    for p in parts[1:]:
        if len(ops) > 1 or p.op != first.op:
            ops.append(p.op.split(":", 1)[-1])
    op = "+".join(ops)
    if len(op) > 200:
        op = f"{op[:200]}+... ({len(parts)} parts)"
    return EntrySig(
        op=op,
        input_sizes=tuple(s for p in parts for s in p.input_sizes),
        input_dtypes=tuple(d for p in parts for d in p.input_dtypes),
        output_sizes=tuple(s for p in parts for s in p.output_sizes),
        output_dtypes=tuple(d for p in parts for d in p.output_dtypes),
        call_site=first.call_site,
        parts=sum(p.parts for p in parts),
        varying=any(p.varying for p in parts),
    )
