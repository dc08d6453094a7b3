"""The analyzer's library entry points: dumps in, :class:`Verdict` out. No argv, no printing."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from .diagnose import World, diagnose
from .loading import ArrayPool, LoadOptions, load
from .manifest import Manifest
from .safe_load import DEFAULT_MAX_BYTES
from .sources import S3Config, discover
from .summarize import EntrySig, RankTrace, Summarizer
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
    traces, details, dup_problems = merge(loaded.traces)
    world = World(
        traces=traces,
        details=details,
        problems=problems + loaded.problems + dup_problems,
        manifest=manifest,
        world_size=world_size,
    )
    verdict = diagnose(world)
    verdict.stats["bytes"] = float(loaded.bytes_read)
    verdict.stats["seconds"] = round(time.perf_counter() - started, 3)
    return verdict


def analyze_dumps(
    dumps: Mapping[int, dict[str, Any]],
    *,
    world_size: int | None = None,
    manifest: Manifest | None = None,
) -> Verdict:
    """Analyze already-decoded dumps (``{global rank: dump dict}``), e.g. from a test builder."""
    summarizer = Summarizer()
    raw = [summarizer.summarize(d, rank, f"<rank {rank}>", "dict") for rank, d in sorted(dumps.items())]
    traces, details, problems = merge(raw)
    return diagnose(World(traces, details, problems, manifest, world_size))


def merge(raw: list[RankTrace]) -> tuple[dict[int, RankTrace], dict[int, EntrySig], list[FileProblem]]:
    """Index summaries by rank, collect signature details, share identical arrays to save memory."""
    traces: dict[int, RankTrace] = {}
    details: dict[int, EntrySig] = {}
    problems: list[FileProblem] = []
    share = ArrayPool()
    for t in sorted(raw, key=lambda t: (t.rank, t.fmt != "pickle", t.file)):
        details.update(t.sig_details)
        t.sig_details = {}
        if t.rank in traces:
            kept = traces[t.rank]
            problems.append(
                FileProblem(
                    file=t.file, rank=t.rank, reason=f"a second dump of rank {t.rank}: {kept.file} is used"
                )
            )
            continue
        share.intern(t)
        traces[t.rank] = t
    return traces, details, problems


def _parse_manifest(data: bytes, name: str) -> tuple[Manifest | None, FileProblem | None]:
    try:
        return Manifest.model_validate_json(data), None
    except ValidationError as exc:
        first = exc.errors()[0]
        return None, FileProblem(file=name, reason=f"manifest ignored: {first['loc']}: {first['msg']}")
