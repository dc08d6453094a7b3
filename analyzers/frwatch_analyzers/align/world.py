"""Everything the reduce step knows, as one value: the ranks' traces, the problems met reading them, the
manifest and the world's size. Built by :mod:`frwatch_analyzers.analyze`, read by :mod:`..diagnose`; it
lives below the diagnosis so that the diagnosis' parts (proof, lanes) can name it without a cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..store.manifest import Manifest
from ..trace.summarize import EntrySig, RankTrace
from ..verdict import DumpFile, FileProblem


@dataclass
class World:
    """Everything the reduce step knows."""

    traces: dict[int, RankTrace]
    details: dict[int, EntrySig]
    problems: list[FileProblem] = field(default_factory=list)
    manifest: Manifest | None = None
    world_size: int | None = None
    files: list[DumpFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
