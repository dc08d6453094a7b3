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
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from ..base.limits import MAX_GROUPS
from ..base.safe_text import printable
from ..decode import fastscan, fields
from ..decode.safe_load import DumpError, describe
from .entry_fields import OPEN_KEEP, TAIL, parse_p2p
from .entry_fields import as_int as _as_int
from .entry_fields import call_site as _call_site
from .entry_fields import combine_all as _combine_all
from .entry_fields import compat as _compat
from .entry_fields import created_column as _created
from .entry_fields import derived_completed as _derived_completed
from .entry_fields import digest as _digest
from .entry_fields import kept as _kept
from .entry_fields import parse_ranks as _parse_ranks
from .entry_fields import plain_sig as _plain
from .entry_fields import tail_entry as _tail_entry
from .rank_trace import (
    STATE_CODES,
    STATE_NAMES,
    EntrySig,
    P2PEntry,
    PgTrace,
    Ranks,
    RankTrace,
    TailEntry,
    compact_ranks,
)
from .recorders import normalize
from .rules import Balance, Rule, api_order, rule_for
from .rules import elements as _elements

#: The trace's model lives in :mod:`.rank_trace` and the per-entry readers in :mod:`.entry_fields`; these
#: names stay importable from here.
__all__ = [
    "OPEN_KEEP",
    "STATE_CODES",
    "STATE_NAMES",
    "TAIL",
    "EntrySig",
    "P2PEntry",
    "PgTrace",
    "RankTrace",
    "Ranks",
    "Scan",
    "Summarizer",
    "TailEntry",
    "compact_ranks",
    "parse_p2p",
]

#: Keys a worker's caches hold before they are cleared (a few thousand in a real job: ops x sizes x sites),
#: and the sizes/dtypes remembered per (op, call site) for the fast path.
_CACHE_KEYS = 1 << 17
_SEEN_PER_SITE = 64

#: What an (op, call site) carried once: sizes and dtypes as the entry had them (checked), the signature,
#: whether its sizes vary by rank, and its input and output elements.
_Seen = tuple[Any, Any, Any, Any, int, bool, int, int]


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
_FIELDS_NO_FRAMES = itemgetter(*_FIELD_NAMES)
_FIELDS = itemgetter(*_FIELD_NAMES, "frames")

_ROOTED = (Balance.GATHER, Balance.SCATTER)


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
