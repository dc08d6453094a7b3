"""Make the summary of one dump file (:mod:`.rank_summary`), decoded in a worker under hard limits.

The agent calls :func:`summarise_file` right after it uploaded a rank's dump; tools and the benchmark call
it to summarise a folder. The dump is read once, its digest taken from those bytes, and decoded and
summarised in a forked worker (:mod:`.isolation`: memory and time bounded, a crash costs only the
summary), so the summary is of exactly the bytes its digest names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..base.limits import DEFAULT_FILE_SECONDS, DEFAULT_MAX_FILE_BYTES, FILE_SECONDS_PER_MB, MIB
from ..decode import isolation
from ..decode.isolation import Budget, Lost
from ..decode.safe_load import DumpError, decode
from ..store.sources import open_regular
from ..trace.summarize import Summarizer
from .binary import encode as encode_binary
from .rank_summary import DumpDigest, encode


@dataclass(frozen=True)
class Made:
    """A summary's bytes and the digest of the dump it was made from."""

    data: bytes
    dump: DumpDigest


class NotSummarised(Exception):
    """The dump could not be summarised; the message says why (the analyzer decodes the dump instead)."""


def summary_of(data: bytes, rank: int, summarizer: Summarizer | None = None, *, binary: bool = False) -> Made:
    """The summary of a dump held in memory (runs wherever it is called: see :func:`summarise_file`).
    ``summarizer``: one kept across the dumps a worker summarises (the map step): its caches of signatures
    and call sites halve the cost of the next rank's (14 -> 6 ms of a 2000-entry varied rank), and the
    summary's bytes are the same (signatures are digests of what they stand for; only those the trace holds
    are written, in order). ``binary``: version 3 (:mod:`.summary_binary`), else JSON version 2."""
    dump, fmt = decode(data)
    summarizer = summarizer or Summarizer()
    trace = summarizer.summarize(dump, rank, "", fmt)
    del dump
    digest = DumpDigest.of(data)
    return Made((encode_binary if binary else encode)(trace, summarizer.details, digest), digest)


def _work(job: tuple[str, int, int, bool]) -> Made | str:
    path, rank, max_bytes, binary = job
    try:
        with open_regular(path, max_bytes) as fh:
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            return f"over {max_bytes} bytes"
        return summary_of(data, rank, binary=binary)
    except (DumpError, OSError, RecursionError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"[:300]


def summarise_file(
    path: str | os.PathLike[str],
    rank: int,
    *,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    memory_bytes: int = 512 * MIB,
    binary: bool = False,
) -> Made:
    """Summarise the dump at ``path`` in a worker process. Raises :class:`NotSummarised` with the reason."""
    seconds = DEFAULT_FILE_SECONDS + FILE_SECONDS_PER_MB * max_bytes / MIB
    budget: Budget[tuple[str, int, int, bool]] = Budget(memory_bytes, lambda _j: seconds)
    (result,) = isolation.run([(os.fspath(path), rank, max_bytes, binary)], _work, budget)
    if isinstance(result, Lost):
        raise NotSummarised(result.reason)
    if isinstance(result, str):
        raise NotSummarised(result)
    return result
