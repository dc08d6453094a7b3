"""The analyzer's library entry points: dumps in, :class:`Verdict` out. No argv, no printing.

Everything read from the location is untrusted: files are decoded in workers under
:mod:`frwatch_analyzers.base.limits`, and the claims they make (ranks, world sizes, group members) are checked
against sane bounds and against each other (:mod:`frwatch_analyzers.load.consistency`) before any of them sizes
a loop.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from .align.world import World
from .base.limits import MAX_MANIFEST_BYTES, MAX_WORLD_SIZE, Limits
from .base.safe_text import printable
from .base.textfmt import ranks_text
from .decode import isolation
from .decode.isolation import Budget, Lost
from .decode.safe_load import DEFAULT_MAX_BYTES
from .diagnose.diagnosis import diagnose
from .evidence.causes import with_causes
from .evidence.read import gather
from .load.consistency import checked_manifest, consistent_world
from .load.loading import ArrayPool, LoadOptions, load
from .load.merge import merge
from .store.layout import split_s3_url
from .store.manifest import Manifest, parse_manifest
from .store.sources import DumpRef, Inputs, S3Config, TooLarge, discover, read_bytes, s3_client
from .trace.recorders import issue_only_limits
from .trace.summarize import Summarizer
from .verdict import FileProblem, Status, Verdict


def analyze(
    location: str,
    *,
    world_size: int | None = None,
    manifest: Manifest | None = None,
    jobs: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    s3: S3Config | None = None,
    limits: Limits | None = None,
    from_dumps: bool = False,
) -> Verdict:
    """Analyze the dumps at a folder, a file or an ``s3://bucket/prefix``.

    A rank whose agent left a valid summary of its dump (``summaries/<rank>.json``) is read from it, unless
    ``from_dumps``; the verdict's summary says how many and which summaries were not used, and why.

    Raises :class:`~frwatch_analyzers.store.sources.SourceError` only when the location itself is unusable, and
    ValueError for a ``world_size`` outside ``[1, MAX_WORLD_SIZE]``; bad files inside the location are
    named in ``verdict.bad_files`` and the analysis goes on without them. ``limits`` (else the defaults
    with ``max_bytes``) bound every file's decoding.
    """
    if world_size is not None and not 1 <= world_size <= MAX_WORLD_SIZE:
        raise ValueError(f"a world size must be between 1 and {MAX_WORLD_SIZE}, not {world_size}")
    started = time.perf_counter()
    limits = limits or Limits(max_file_bytes=max_bytes)
    inputs = discover(location, s3)
    problems: list[FileProblem] = []
    if manifest is None and inputs.manifest is not None:
        manifest, problem = _load_manifest(inputs, s3, limits)
        if problem:
            problems.append(problem)
    loaded = load(inputs, LoadOptions(jobs=jobs, limits=limits, s3=s3, from_dumps=from_dumps))
    manifest_name = inputs.manifest.name if inputs.manifest is not None else "manifest"
    checked = consistent_world(loaded.traces, problems + loaded.problems, manifest, world_size, manifest_name)
    merged = merge(checked.traces)
    _share(merged.traces)
    world = World(
        traces=merged.traces,
        details=merged.details,
        problems=checked.problems + merged.problems,
        manifest=checked.manifest,
        world_size=checked.world_size,
        files=merged.files,
        notes=merged.notes + loaded.notes,
    )
    verdict = issue_only_limits(unchecked_ranks(diagnose(world), checked.outside), world.traces)
    recorded = {r: t.dumped_ns for r, t in merged.traces.items() if t.dumped_ns}
    verdict = _with_evidence(verdict, location, inputs, checked.manifest, s3, recorded)
    verdict.stats["from_summaries"] = float(loaded.from_summaries)
    verdict.stats["bytes"] = float(loaded.bytes_read)
    verdict.stats["seconds"] = round(time.perf_counter() - started, 3)
    return verdict


def _with_evidence(
    verdict: Verdict,
    location: str,
    inputs: Inputs,
    manifest: Manifest | None,
    s3: S3Config | None,
    recorded_ns: dict[int, int],
) -> Verdict:
    """The verdict with the logs, NCCL debug files and node records found next to the dumps."""
    suspects = {*verdict.culprit_ranks, *verdict.missing_dumps}
    if inputs.bucket is None:  # a single dump file has no evidence beside it: nothing found
        gathered = gather(location, manifest, suspects=suspects)
    else:
        prefix = split_s3_url(location)[1]
        client = s3_client(s3 or S3Config())
        gathered = gather(prefix, manifest, bucket=inputs.bucket, client=client, suspects=suspects)
    return with_causes(verdict, gathered, manifest, recorded_ns=recorded_ns)


def analyze_dumps(
    dumps: Mapping[int, dict[str, Any]] | Sequence[tuple[str, int, dict[str, Any]]],
    *,
    world_size: int | None = None,
    manifest: Manifest | None = None,
) -> Verdict:
    """Analyze already-decoded dumps, e.g. from a test builder: ``{global rank: dump}``, or
    ``[(file name, rank, dump), ...]`` when a rank left more than one file."""
    summarizer = Summarizer()
    named = (
        [(f"<rank {rank}>", rank, d) for rank, d in sorted(dumps.items())]
        if isinstance(dumps, Mapping)
        else dumps
    )
    raw = [summarizer.summarize(d, rank, name, "dict") for name, rank, d in named]
    merged = merge(raw)
    _share(merged.traces)
    world = World(
        merged.traces, merged.details, merged.problems, manifest, world_size, merged.files, merged.notes
    )
    return issue_only_limits(unchecked_ranks(diagnose(world)), world.traces)


def _share(traces: Mapping[int, Any]) -> None:
    """Ranks that behaved alike share one copy of their arrays (memory ~ distinct behaviours)."""
    pool = ArrayPool()
    for t in traces.values():
        pool.intern(t)


def unchecked_ranks(verdict: Verdict, outside: list[int] | None = None) -> Verdict:
    """A verdict cannot say healthy while ranks of the world went unchecked: ranks whose files could not be
    used, ranks ``outside`` the world the dumps agree on, or ranks that left no dump at all (a job that lost
    a rank did not succeed, even when the ranks that dumped agree and none waited on it). It is then
    inconclusive, and says which ranks and why; their logs and exits, when read, name the cause."""
    if verdict.status != Status.healthy:
        return verdict
    missing = set(verdict.missing_dumps)
    unusable = sorted({p.rank for p in verdict.bad_files if p.rank is not None and p.rank in missing})
    absent = sorted(missing - set(unusable))
    outside = outside or []
    if not unusable and not outside and not absent:
        return verdict
    parts = []
    if unusable:
        parts.append(f"the files of {ranks_text(unusable)} could not be used")
    if absent:
        it = "it" if len(absent) == 1 else "them"
        parts.append(f"{ranks_text(absent)} left no dump (no rank that dumped was waiting on {it})")
    if outside:
        parts.append(f"{len(outside)} unusable file(s) claim {ranks_text(outside)}, outside the world")
    seen = verdict.ranks_seen
    agree = f"the dump of {ranks_text(seen)} shows nothing wrong"
    if len(seen) > 1:
        agree = f"{len(seen)} ranks agree"
    headline = (
        f"inconclusive: {agree}, but {' and '.join(parts)}"
        + (" (see bad_files)" if unusable or outside else "")
    )
    summary = (
        f"{verdict.summary} What the unchecked ranks did is unknown: the job cannot be called healthy."
        + (f" Look at the log and exit of {ranks_text(absent)}." if absent else "")
    ).strip()
    return verdict.made_inconclusive(headline, summary, printable(f"inconclusive: {', '.join(parts)}", 120))


# --- manifest.json -----------------------------------------------------------------------------------------
def _load_manifest(
    inputs: Inputs, s3: S3Config | None, limits: Limits
) -> tuple[Manifest | None, FileProblem | None]:
    """Read and validate manifest.json in a worker (it is as untrusted as a dump)."""
    ref = inputs.manifest
    assert ref is not None
    budget: Budget[DumpRef] = Budget(limits.worker_memory_bytes, lambda r: limits.seconds_for(r.size))
    work = functools.partial(_read_manifest, bucket=inputs.bucket, s3=s3)
    [result] = isolation.run([ref], work, budget)
    if isinstance(result, Lost):
        return None, FileProblem(file=ref.name, reason=f"manifest ignored: {result.reason}")
    if isinstance(result, FileProblem):
        return None, result
    return checked_manifest(result, ref.name)


def _read_manifest(ref: DumpRef, bucket: str | None, s3: S3Config | None) -> Manifest | FileProblem:
    """Read and parse manifest.json (runs in a worker)."""
    try:
        client = s3_client(s3 or S3Config()) if bucket is not None else None
        data = read_bytes(ref, bucket, client, MAX_MANIFEST_BYTES)
    except TooLarge as exc:
        return FileProblem(file=ref.name, reason=f"manifest ignored: too large: {exc}")
    except MemoryError:
        raise
    except Exception as exc:  # OSError, botocore
        return FileProblem(file=ref.name, reason=f"manifest ignored: cannot read: {printable(str(exc), 200)}")
    manifest, problem = _parse_manifest(data, ref.name)
    return manifest if manifest is not None else problem  # type: ignore[return-value]


def _parse_manifest(data: bytes, name: str) -> tuple[Manifest | None, FileProblem | None]:
    try:
        return parse_manifest(data), None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        return None, FileProblem(
            file=name, reason=f"manifest ignored: {printable(where, 100)}: {printable(first['msg'], 200)}"
        )
    except ValueError as exc:  # over the size limit
        return None, FileProblem(file=name, reason=f"manifest ignored: too large: {exc}")
