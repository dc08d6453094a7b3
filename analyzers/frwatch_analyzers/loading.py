"""The map step: read, decode and summarise every dump, on every core.

Each worker process reads a batch of files, decodes them with the refusing unpickler, summarises each
into a compact :class:`RankTrace` and drops the decoded dump at once, so memory stays proportional to the
summaries, not to the dumps. A file that cannot be used becomes a :class:`FileProblem` with its reason.
"""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .safe_load import DEFAULT_MAX_BYTES, DumpError, decode, decode_stream
from .sources import DumpRef, Inputs, S3Config, read_bytes, s3_client
from .summarize import PgTrace, Ranks, RankTrace, Summarizer
from .verdict import FileProblem


@dataclass(frozen=True)
class LoadOptions:
    jobs: int = 0  # worker processes; 0: one per core
    max_bytes: int = DEFAULT_MAX_BYTES
    s3: S3Config | None = None


@dataclass
class Loaded:
    traces: list[RankTrace]
    problems: list[FileProblem]
    bytes_read: int


# --- worker side -----------------------------------------------------------------------------------------
_summarizer: Summarizer | None = None
_client: Any = None


def _work(batch: Sequence[DumpRef], bucket: str | None, s3: S3Config | None, max_bytes: int) -> list[Any]:
    global _summarizer, _client
    if _summarizer is None:
        _summarizer = Summarizer()
        # decoded dumps are acyclic trees freed by reference counting: the cyclic collector would only
        # rescan them again and again while they are built (about a third of the decode time)
        gc.disable()
    if bucket is not None and _client is None:
        _client = s3_client(s3 or S3Config())
    out: list[Any] = []
    for ref in batch:
        out.append(_one(_summarizer, ref, bucket, max_bytes))
    return out


def _one(summarizer: Summarizer, ref: DumpRef, bucket: str | None, max_bytes: int) -> Any:
    try:
        if bucket is None and 0 < ref.size <= max_bytes:
            # a local file: the unpickler reads it straight from the OS buffer (no copy of the bytes)
            with open(ref.location, "rb", buffering=1 << 20) as fh:
                dump, fmt = decode_stream(cast(io.BufferedReader, fh))  # buffering>1 gives one
        else:
            dump, fmt = decode(read_bytes(ref, bucket, _client, max_bytes))
    except ValueError as exc:
        return FileProblem(file=ref.name, rank=ref.rank, reason=f"too large: {exc}")
    except DumpError as exc:
        return FileProblem(file=ref.name, rank=ref.rank, reason=str(exc))
    except OSError as exc:
        return FileProblem(file=ref.name, rank=ref.rank, reason=f"cannot read: {type(exc).__name__}: {exc}")
    except RecursionError:
        return FileProblem(file=ref.name, rank=ref.rank, reason="malformed dump: nested too deeply")
    except Exception as exc:  # botocore errors and the like: the file is named with the reason
        return FileProblem(file=ref.name, rank=ref.rank, reason=f"cannot read: {type(exc).__name__}: {exc}")
    try:
        rank = ref.rank if ref.rank is not None else _rank_in(dump)
        if rank is None:
            return FileProblem(
                file=ref.name, reason="no rank in the file name (expected a trailing number) nor in the dump"
            )
        return summarizer.summarize(dump, rank, ref.name, fmt)
    except DumpError as exc:
        return FileProblem(file=ref.name, rank=ref.rank, reason=str(exc))
    except RecursionError:
        return FileProblem(file=ref.name, rank=ref.rank, reason="malformed dump: nested too deeply")
    except Exception as exc:  # a dict of the wrong shape somewhere: name it, keep going
        return FileProblem(
            file=ref.name, rank=ref.rank, reason=f"malformed dump: {type(exc).__name__}: {exc}"
        )


def _rank_in(dump: dict[str, Any]) -> int | None:
    """A rank recorded in the dump itself (wrappers add a top-level ``rank``; torch 2.13 does not)."""
    value = dump.get("rank")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _work_star(args: tuple[Sequence[DumpRef], str | None, S3Config | None, int]) -> list[Any]:
    return _work(*args)


def _reset_worker_state(gc_was_enabled: bool) -> None:
    global _summarizer
    _summarizer = None
    if gc_was_enabled:
        gc.enable()


class ArrayPool:
    """Ranks that recorded the same sequence in a group share one copy of its arrays (and the first such
    rank's creation times): with 16k ranks that behave alike, memory holds a handful of arrays, not 16k."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, bytes], PgTrace] = {}
        self._members: dict[Ranks, Ranks] = {}

    def intern(self, trace: RankTrace) -> None:
        for name, pg in trace.pgs.items():
            shared = self._seen.setdefault((name, pg.seq_digest), pg)
            if shared is not pg:
                pg.seqs, pg.sigs, pg.plain, pg.created = (
                    shared.seqs,
                    shared.sigs,
                    shared.plain,
                    shared.created,
                )
            if isinstance(pg.config_ranks, tuple):
                pg.config_ranks = self._members.setdefault(pg.config_ranks, pg.config_ranks)


# --- parent side -----------------------------------------------------------------------------------------
def _batches(refs: list[DumpRef], size: int) -> Iterator[list[DumpRef]]:
    for i in range(0, len(refs), size):
        yield refs[i : i + size]


def load(inputs: Inputs, options: LoadOptions | None = None) -> Loaded:
    """Summarise every dump of ``inputs``; in parallel when there are enough files to pay for it."""
    opts = options or LoadOptions()
    refs = inputs.dumps
    jobs = opts.jobs or (os.cpu_count() or 1)
    total = sum(r.size for r in refs)
    results: list[Any] = []
    args_tail = (inputs.bucket, opts.s3, opts.max_bytes)
    if jobs <= 1 or len(refs) < 8 or total < 8 * 1024 * 1024:
        was_enabled = gc.isenabled()
        try:
            results = _work(refs, *args_tail)
        finally:
            _reset_worker_state(was_enabled)
    else:
        # small batches: the last ones of a run leave a core idle for at most a few files
        batch = max(1, min(8, len(refs) // (jobs * 8)))
        ctx = multiprocessing.get_context("fork")
        share = ArrayPool()
        with ctx.Pool(jobs) as pool:
            for chunk in pool.imap(_work_star, ((b, *args_tail) for b in _batches(refs, batch))):
                for item in chunk:
                    if isinstance(item, RankTrace):
                        share.intern(
                            item
                        )  # drop duplicate arrays as they arrive: memory ~ distinct behaviours
                    results.append(item)
    traces = [r for r in results if isinstance(r, RankTrace)]
    problems = [r for r in results if isinstance(r, FileProblem)]
    return Loaded(traces, problems, total)
