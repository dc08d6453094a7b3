"""The analyzer's library entry points: dumps in, :class:`Verdict` out. No argv, no printing."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from .diagnose import World, diagnose
from .loading import ArrayPool, LoadOptions, load
from .manifest import Manifest
from .merge import merge
from .safe_load import DEFAULT_MAX_BYTES
from .sources import S3Config, discover
from .summarize import Summarizer
from .verdict import FileProblem, Verdict


def analyze(
    location: str,
    *,
    world_size: int | None = None,
    manifest: Manifest | None = None,
    jobs: int = 0,
    max_bytes: int = DEFAULT_MAX_BYTES,
    s3: S3Config | None = None,
) -> Verdict:
    """Analyze the dumps at a folder, a file or an ``s3://bucket/prefix``.

    Raises :class:`~frwatch_analyzers.sources.SourceError` only when the location itself is unusable;
    bad files inside it are named in ``verdict.bad_files`` and the analysis goes on without them.
    """
    started = time.perf_counter()
    inputs = discover(location, s3)
    problems: list[FileProblem] = []
    if manifest is None and inputs.manifest is not None:
        manifest, problem = _parse_manifest(inputs.manifest, f"{inputs.root.rstrip('/')}/manifest.json")
        if problem:
            problems.append(problem)
    loaded = load(inputs, LoadOptions(jobs=jobs, max_bytes=max_bytes, s3=s3))
    merged = merge(loaded.traces)
    _share(merged.traces)
    world = World(
        traces=merged.traces,
        details=merged.details,
        problems=problems + loaded.problems + merged.problems,
        manifest=manifest,
        world_size=world_size,
        files=merged.files,
        notes=merged.notes,
    )
    verdict = diagnose(world)
    verdict.stats["bytes"] = float(loaded.bytes_read)
    verdict.stats["seconds"] = round(time.perf_counter() - started, 3)
    return verdict


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
    return diagnose(world)


def _share(traces: Mapping[int, Any]) -> None:
    """Ranks that behaved alike share one copy of their arrays (memory ~ distinct behaviours)."""
    pool = ArrayPool()
    for t in traces.values():
        pool.intern(t)


def _parse_manifest(data: bytes, name: str) -> tuple[Manifest | None, FileProblem | None]:
    try:
        return Manifest.model_validate_json(data), None
    except ValidationError as exc:
        first = exc.errors()[0]
        return None, FileProblem(file=name, reason=f"manifest ignored: {first['loc']}: {first['msg']}")
