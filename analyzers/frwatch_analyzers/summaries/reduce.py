"""The map step's results read from the agents' summaries (:mod:`.rank_summary`) instead of the dumps.

A rank's summary is used only when it is whole, of this version, about that rank, and made from the very
dump the store holds: its recorded size must match the dump's, and its digest the dump's content (the MD5
the store lists as the ETag of an object uploaded in one part; else the sha256 of the dump's bytes, read
but not decoded). Every other rank, and every rank when ``--from-dumps`` is given, is decoded from its dump;
each summary that was not used is said in a note of the verdict, with why (:mod:`.summary_check`: also
a summary whose counts a dump of that size cannot hold; the note stays short at any rank count). Summaries are read in threads
(the store's latency, not the CPU, bounds reading 100k small objects) and decoded in this process: a summary
is bounded JSON checked field by field, with no code to run and no memory to exhaust.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..base.safe_text import printable
from ..store.sources import DumpRef, Inputs, S3Config, TooLarge, read_bytes, s3_client
from ..trace.summarize import RankTrace
from .check import fallback_note, implausible
from .rank_summary import MAX_SUMMARY_BYTES, DumpDigest, Reader, SummaryError

#: Threads reading summaries from the store at once.
READERS = 16


@dataclass
class FromSummaries:
    traces: list[RankTrace]  # one a rank whose summary was used
    dumps: list[DumpRef]  # the dumps still to decode
    fallbacks: dict[int, str] = field(default_factory=dict)  # rank -> why its summary was not used
    missing: list[int] = field(default_factory=list)  # ranks with one dump and no summary (when some have)
    bytes_read: int = 0

    def note(self) -> str:
        """One line for the verdict: how many ranks came from summaries, and which fell back, why (bounded:
        :func:`.summary_check.fallback_note`)."""
        return fallback_note(len(self.traces), self.fallbacks, self.missing)


def _dump_matches(ref: DumpRef, digest: DumpDigest, bucket: str | None, client: Any, max_bytes: int) -> str:
    """Why the dump at ``ref`` is not the one the summary was made from ("" when it is)."""
    if digest.size != ref.size:
        return f"made from a dump of {digest.size} bytes, the stored one has {ref.size}"
    etag = ref.etag.lower()
    if len(etag) == 32 and all(c in "0123456789abcdef" for c in etag):
        return "" if etag == digest.md5 else "made from another dump (its MD5 differs from the store's)"
    data = read_bytes(ref, bucket, client, max_bytes)  # a local file, or one uploaded in parts
    return "" if hashlib.sha256(data).hexdigest() == digest.sha256 else "made from another dump (sha256)"


def take(inputs: Inputs, s3: S3Config | None, max_bytes: int, *, from_dumps: bool = False) -> FromSummaries:
    """Split ``inputs.dumps`` into ranks read from valid summaries and dumps still to decode."""
    if from_dumps or not inputs.summaries:
        return FromSummaries([], list(inputs.dumps))
    per_rank = Counter(ref.rank for ref in inputs.dumps)
    # a rank's summary stands for its one dump; a rank with several files (two backends, a later dump) is
    # decoded whole, so that merge.py sees every file
    wanted = [
        ref
        for ref in inputs.dumps
        if ref.rank is not None and per_rank[ref.rank] == 1 and ref.rank in inputs.summaries
    ]
    missing = sorted(
        {r.rank for r in inputs.dumps if r.rank is not None and per_rank[r.rank] == 1}
        - inputs.summaries.keys()
    )
    client = s3_client(s3 or S3Config()) if inputs.bucket is not None else None
    reader = Reader()

    def fetch(ref: DumpRef) -> tuple[DumpRef, bytes | str]:
        summary = inputs.summaries[ref.rank or 0]
        try:
            return ref, read_bytes(summary, inputs.bucket, client, MAX_SUMMARY_BYTES)
        except TooLarge as exc:
            return ref, f"summary too large ({exc})"
        except Exception as exc:  # a store or file error: the dump is read instead
            return ref, f"summary unreadable ({type(exc).__name__}: {printable(str(exc), 120)})"

    out = FromSummaries([], [], missing=missing)
    used: set[str] = set()
    with ThreadPoolExecutor(READERS if client is not None else 1) as pool:
        fetched: Iterable[tuple[DumpRef, bytes | str]] = pool.map(fetch, wanted)
        for ref, data in fetched:
            rank = ref.rank or 0
            if isinstance(data, str):
                out.fallbacks[rank] = data
                continue
            out.bytes_read += len(data)
            try:
                trace, digest = reader.decode(data)
            except SummaryError as exc:
                out.fallbacks[rank] = f"summary not used: {exc}"
                continue
            if trace.rank != rank:
                out.fallbacks[rank] = f"summary is about rank {trace.rank}"
                continue
            try:
                why = _dump_matches(ref, digest, inputs.bucket, client, max_bytes)
            except Exception as exc:  # the dump itself cannot be read: decoding it will say why
                why = f"dump unreadable to check the summary ({type(exc).__name__})"
            if why:
                out.fallbacks[rank] = why
                continue
            why = implausible(trace, digest)  # the digest matches; the counts must fit that dump too
            if why:
                out.fallbacks[rank] = why
                continue
            trace.file = ref.name
            trace.files = [ref.name]
            out.traces.append(trace)
            reader.accept(trace)  # interned in this order by the caller (loading.ArrayPool)
            used.add(ref.location)
    out.dumps = [ref for ref in inputs.dumps if ref.location not in used]
    return out
