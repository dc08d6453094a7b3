"""Write a rank's summary (:mod:`.rank_summary` describes the format): the trace's scalars, its columns
compressed (:func:`_column`), its signatures' details as one shared table (:func:`_sig_table`)."""

from __future__ import annotations

import base64
import json
import zlib
from array import array
from collections.abc import Mapping
from operator import sub
from typing import Any

from ..decode.fields import I64
from ..trace.summarize import EntrySig, RankTrace
from .format import FORMAT, LITTLE, VERSION, DumpDigest


def _column(values: array[int], delta: bool = False) -> str:
    col = values
    if delta and len(values) > 1:
        diffs = [values[0], *map(sub, values[1:], values[:-1])]
        if min(diffs) >= -I64 and max(diffs) < I64:
            col = array("q", diffs)
        else:  # a jump past int64: stored as is, marked by a leading "r"
            return "r" + _column(values)
    raw = array("q", col)
    if not LITTLE:
        raw.byteswap()
    return base64.b64encode(zlib.compress(raw.tobytes(), 6)).decode("ascii")


def _ranks(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, range) and value:
        if value.step == 1:
            return {"from": value.start, "to": value[-1]}
        return {"from": value.start, "to": value[-1], "step": value.step}
    return list(value)


def encode(trace: RankTrace, details: Mapping[int, EntrySig], dump: DumpDigest) -> bytes:
    """``trace`` (and the details of every signature it holds, from ``details``) as a summary's bytes."""
    held = {s for pg in trace.pgs.values() for s in (*pg.sigs, *pg.plain)} | {p.sig for p in trace.p2p}
    missing = held - details.keys()
    if missing:
        raise ValueError(f"{len(missing)} signature(s) of the trace have no detail")
    body = {
        "format": FORMAT,
        "version": VERSION,
        "dump": {"bytes": dump.size, "sha256": dump.sha256, "md5": dump.md5},
        "rank": trace.rank,
        "fmt": trace.fmt,
        "fr_version": trace.version,
        "backend": trace.backend,
        "entries": trace.entries,
        "has_states": trace.has_states,
        "has_frames": trace.has_frames,
        "has_timing": trace.has_timing,
        "last_record_id": trace.last_record_id,
        "first_record_id": trace.first_record_id,
        "dumped_ns": trace.dumped_ns,
        "world_ranks": list(trace.world_ranks) if trace.world_ranks else None,
        "pgs": [
            {
                "name": pg.name,
                "desc": pg.desc,
                "backend": pg.backend,
                "seqs": _column(pg.seqs, delta=True),
                "sigs": _column(pg.sigs),
                "plain": _column(pg.plain),
                "created": _column(pg.created, delta=True),
                "var_seqs": _column(pg.var_seqs, delta=True),
                "var_in": _column(pg.var_in),
                "var_out": _column(pg.var_out),
                "tail": _column(
                    array(
                        "q",
                        [
                            x
                            for t in pg.tail
                            for x in (
                                t.seq,
                                t.record_id,
                                t.sig,
                                t.state,
                                -1 if t.retired is None else int(t.retired),
                                t.created_ns,
                                t.started_ns,
                                t.completed_ns,
                            )
                        ],
                    )
                ),
                "splits": [
                    [i, list(t.splits[0]), list(t.splits[1])] for i, t in enumerate(pg.tail) if t.splits
                ],
                "config_ranks": _ranks(pg.config_ranks),
                "last_enqueued": pg.last_enqueued,
                "last_started": pg.last_started,
                "last_completed": pg.last_completed,
                "status_known": pg.status_known,
                "first_record_id": pg.first_record_id,
            }
            for pg in trace.pgs.values()
        ],
        "p2p": [
            [p.pg, p.p2p_seq, p.kind, p.src, p.dst, p.sig, p.state, p.record_id, p.created_ns]
            for p in trace.p2p
        ],
        "sigs": _sig_table(sorted(held), details),
    }
    return json.dumps(body, separators=(",", ":")).encode()


def _sig_table(sigs: list[int], details: Mapping[int, EntrySig]) -> str:
    """The signatures' details as one JSON text (ranks that behaved alike carry the same text: a reader
    decodes it once), call sites listed once and named by their index."""
    sites: dict[tuple[tuple[str, str, int], ...], int] = {}
    rows = []
    for sig in sigs:
        d = details[sig]
        site = sites.setdefault(d.call_site, len(sites))
        rows.append(
            [
                sig,
                d.op,
                [list(x) for x in d.input_sizes],
                list(d.input_dtypes),
                [list(x) for x in d.output_sizes],
                list(d.output_dtypes),
                site,
                d.parts,
                d.varying,
            ]
        )
    text = json.dumps(
        {"sites": [[list(f) for f in site] for site in sites], "sigs": rows}, separators=(",", ":")
    )
    return base64.b64encode(zlib.compress(text.encode(), 6)).decode("ascii")
