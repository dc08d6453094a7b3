"""The map step: read, decode and summarise every dump in worker processes with hard limits.

Each worker reads files one at a time, decodes each with the refusing unpickler, summarises it into a
compact :class:`RankTrace` and drops the decoded dump at once, so memory stays proportional to the
summaries, not to the dumps. Workers run under :mod:`frwatch_analyzers.decode.isolation` (memory and time limits
the kernel and the parent enforce; a worker's death costs only its file). A file that cannot be used
becomes a :class:`FileProblem` with its reason; a file that crashed, hung or exhausted its worker is then
scanned (:mod:`frwatch_analyzers.decode.pickle_scan`) to say why.
"""

from __future__ import annotations

import errno
import functools
import gc
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..base.limits import MAX_WORLD_SIZE, MIB, Limits, container_memory, fit
from ..base.safe_text import printable
from ..base.textfmt import ranks_text
from ..decode import isolation
from ..decode.isolation import Budget, Lost
from ..decode.pickle_scan import explain
from ..decode.safe_load import DumpError, decode, decode_stream
from ..store.sources import DumpRef, Inputs, S3Config, TooLarge, open_regular, read_bytes, s3_client
from ..summaries import reduce as from_summaries
from ..trace.summarize import PgTrace, Ranks, RankTrace, Summarizer
from ..trace.wire import Packed, Packer, unpack
from ..verdict import FileProblem

#: Seconds a post-mortem scan of one file may take (pure Python, about 1 s a MB; best effort: the bombs it
#: explains are a few KB), and how many lost files are scanned (the others keep how their worker ended).
_SCAN_SECONDS = 10.0
_SCANS = 16


@dataclass(frozen=True)
class LoadOptions:
    jobs: int = 0  # worker processes; 0: one per core
    limits: Limits = field(default_factory=Limits)
    s3: S3Config | None = None
    from_dumps: bool = False  # decode every dump, even where its agent's summary is valid


@dataclass
class Loaded:
    traces: list[RankTrace]
    problems: list[FileProblem]
    bytes_read: int
    notes: list[str] = field(default_factory=list)  # said in the verdict (which ranks came from summaries)
    from_summaries: int = 0  # ranks read from their agents' summaries


# --- worker side -----------------------------------------------------------------------------------------
_summarizer: Summarizer | None = None
_packer: Packer | None = None
_client: Any = None


def _client_for(bucket: str | None, s3: S3Config | None) -> Any:
    global _client
    if bucket is not None and _client is None:
        _client = s3_client(s3 or S3Config())
    return _client


def _summarise(ref: DumpRef, bucket: str | None, s3: S3Config | None, max_bytes: int) -> Packed | FileProblem:
    """One file -> its summary, packed to travel (:mod:`.trace_wire`), or its problem (runs in a worker; a
    MemoryError is the worker's to report)."""
    global _summarizer, _packer
    if _summarizer is None or _packer is None:
        _summarizer, _packer = Summarizer(), Packer()
    # The collector would walk the whole decoded dump again and again while it is built and read (a dump
    # is 100k+ containers; no cycle among them is needed); it runs once the file's objects are dropped.
    gc.disable()
    try:
        trace = _summarise_file(ref, bucket, s3, max_bytes, _summarizer)
        return _packer.pack(trace) if isinstance(trace, RankTrace) else trace
    finally:
        gc.enable()
        gc.collect(0)  # cycles a crafted pickle made (a list holding itself), while they are still young


def _summarise_file(
    ref: DumpRef, bucket: str | None, s3: S3Config | None, max_bytes: int, summarizer: Summarizer
) -> RankTrace | FileProblem:
    try:
        if bucket is None:
            # a local file: the unpickler reads it straight from the OS buffer (no copy of the bytes)
            with open_regular(ref.location, max_bytes) as fh:
                dump, fmt = decode_stream(fh)  # type: ignore[arg-type]  # a BufferedReader
        else:
            dump, fmt = decode(read_bytes(ref, bucket, _client_for(bucket, s3), max_bytes))
    except TooLarge as exc:
        return _problem(ref, f"too large: {exc} (--max-file-mb)")
    except DumpError as exc:
        return _problem(ref, str(exc))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return _problem(ref, "a symbolic link: not followed (a dump is a regular file)")
        return _problem(ref, f"cannot read: {printable(exc.strerror or str(exc), 200)}")
    except RecursionError:
        return _problem(ref, "malformed dump: nested too deeply")
    except MemoryError:
        raise
    except Exception as exc:  # botocore errors and the like: the file is named with the reason
        return _problem(ref, f"cannot read: {type(exc).__name__}: {printable(str(exc), 200)}")
    try:
        rank = ref.rank if ref.rank is not None else _rank_in(dump)
        if rank is None:
            why = "no rank in the file name (a number after 'rank' or at its end) nor in the dump"
            return _problem(ref, why)
        trace = summarizer.summarize(dump, rank, ref.name, fmt)
    except DumpError as exc:
        return _problem(ref, str(exc))
    except RecursionError:
        return _problem(ref, "malformed dump: nested too deeply")
    except MemoryError:
        raise
    except Exception as exc:  # a dict of the wrong shape somewhere the checks did not foresee: name it
        return _problem(ref, f"malformed dump: {type(exc).__name__}: {printable(str(exc), 200)}")
    del dump
    outside = _outside_own_group(trace)
    if outside:
        summarizer.forget(trace)  # its signature details were not handed on: a later file hands them
        return _problem(ref, outside)
    return trace


def _problem(ref: DumpRef, reason: str) -> FileProblem:
    return FileProblem(file=ref.name, rank=ref.rank, reason=reason)


def _rank_in(dump: dict[str, Any]) -> int | None:
    """A rank recorded in the dump itself (wrappers add a top-level ``rank``; torch 2.13 does not)."""
    value = dump.get("rank")
    return value if type(value) is int and 0 <= value < MAX_WORLD_SIZE else None


def _outside_own_group(trace: RankTrace) -> str:
    """A dump whose default group (by its own pg_config) does not hold the rank it is filed under lies
    about one of the two: neither can be trusted. Empty or broken member lists (gloo) say nothing."""
    for pg in trace.pgs.values():
        members = pg.config_ranks
        if members and (pg.name == "0" or pg.desc == "default_pg") and trace.rank not in members:
            return (
                f"inconsistent: filed as rank {trace.rank}, but its default group {pg.name!r} has "
                f"{ranks_text(members)}"
            )
    return ""


def _post_mortem(ref: DumpRef, bucket: str | None, s3: S3Config | None, max_bytes: int) -> str:
    """Why a file crashed, hung or exhausted a worker (runs in a worker, under the same limits)."""
    try:
        data = read_bytes(ref, bucket, _client_for(bucket, s3), max_bytes)
    except Exception:
        return ""
    return explain(data) if data[:1] == b"\x80" else ""


class ArrayPool:
    """Ranks that recorded the same sequence in a group share one copy of its arrays (and the first such
    rank's creation times): with 16k ranks that behave alike, memory holds a handful of arrays, not 16k."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, bytes], PgTrace] = {}
        self._members: dict[Ranks, Ranks] = {}
        self._sizes: dict[tuple[bytes, bytes, bytes], PgTrace] = {}

    def held(self, name: str, digest: bytes) -> PgTrace | None:
        """The group whose arrays ranks that recorded this sequence share (:mod:`.trace_wire`)."""
        return self._seen.get((name, digest))

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
            # equal size columns are the same objects: the balance checks sum them once per set of alike
            # ranks (align._balance_findings), not once a rank
            if pg.var_seqs:
                key = (pg.var_seqs.tobytes(), pg.var_in.tobytes(), pg.var_out.tobytes())
                alike = self._sizes.setdefault(key, pg)
                if alike is not pg:
                    pg.var_seqs, pg.var_in, pg.var_out = alike.var_seqs, alike.var_in, alike.var_out
            if isinstance(pg.config_ranks, tuple):
                pg.config_ranks = self._members.setdefault(pg.config_ranks, pg.config_ranks)


# --- parent side -----------------------------------------------------------------------------------------
def load(inputs: Inputs, options: LoadOptions | None = None) -> Loaded:
    """Summarise every dump of ``inputs`` in worker processes (one when there are few files)."""
    opts = options or LoadOptions()
    limits = opts.limits
    taken = from_summaries.take(inputs, opts.s3, limits.max_file_bytes, from_dumps=opts.from_dumps)
    refs = taken.dumps
    total = sum(r.size for r in refs)
    jobs = opts.jobs or (os.cpu_count() or 1)
    if not opts.jobs and (len(refs) < 8 or total < 8 * MIB):
        jobs = 1  # forking more workers would cost more than it saves (the one worker still isolates)
    limits, jobs = fit(limits, jobs, container_memory())  # every worker's budget fits the container
    # small batches: the last ones of a run leave a core idle for at most a few files
    batch = max(1, min(8, len(refs) // (jobs * 8)))
    share = ArrayPool()
    for trace in taken.traces:
        share.intern(trace)

    def arrived(item: object) -> None:
        # in the order each worker sent them: a group sent without its arrays takes those already held
        if isinstance(item, Packed) and unpack(item, share.held):
            share.intern(item.trace)  # drop duplicate arrays as they arrive: memory ~ distinct behaviours

    work = functools.partial(_summarise, bucket=inputs.bucket, s3=opts.s3, max_bytes=limits.max_file_bytes)
    budget: Budget[DumpRef] = Budget(
        limits.worker_memory_bytes, lambda r: limits.seconds_for(r.size), limits.deadline_seconds
    )
    started = time.monotonic()
    results = isolation.run(refs, work, budget, jobs=jobs, batch=batch, arrived=arrived)
    lost = [(ref, r) for ref, r in zip(refs, results, strict=True) if isinstance(r, Lost)]
    left = limits.deadline_seconds - (time.monotonic() - started)
    reasons = _explain_losses(lost, inputs, opts, limits, jobs, left)
    traces: list[RankTrace] = list(taken.traces)
    problems: list[FileProblem] = list(inputs.skipped)
    for ref, r in zip(refs, results, strict=True):
        if isinstance(r, Packed):
            if r.problem:
                problems.append(_problem(ref, r.problem))
            else:
                traces.append(r.trace)
        elif isinstance(r, FileProblem):
            problems.append(r)
        elif isinstance(r, Lost):
            problems.append(_problem(ref, reasons[ref.location]))
    note = taken.note()
    return Loaded(traces, problems, total + taken.bytes_read, [note] if note else [], len(taken.traces))


def _explain_losses(
    lost: list[tuple[DumpRef, Lost]],
    inputs: Inputs,
    opts: LoadOptions,
    limits: Limits,
    jobs: int,
    seconds_left: float,
) -> dict[str, str]:
    """The reason of each lost file: how its worker ended, what the post-mortem scan found, which limit."""
    flag = {
        "timeout": "--file-seconds",
        "memory": "--worker-memory-mb",
        "deadline": "--deadline-seconds",
    }
    reasons = {ref.location: lost_.reason for ref, lost_ in lost}
    for ref, lost_ in lost:
        if lost_.kind in flag:
            reasons[ref.location] += f" ({flag[lost_.kind]})"
    scan = [ref for ref, lost_ in lost if lost_.kind != "deadline"][:_SCANS]
    if scan and seconds_left > 0:
        work: Callable[[DumpRef], str] = functools.partial(
            _post_mortem, bucket=inputs.bucket, s3=opts.s3, max_bytes=limits.max_file_bytes
        )
        budget: Budget[DumpRef] = Budget(limits.worker_memory_bytes, lambda _r: _SCAN_SECONDS, seconds_left)
        found = isolation.run(scan, work, budget, jobs=jobs)
        for ref, why in zip(scan, found, strict=True):
            if isinstance(why, str) and why:
                reasons[ref.location] += f": {why}"
    return reasons
