"""``frwatch analyze LOCATION --map-shard I/N``: the map step of a fanned-out analysis.

One index of the analyzer's Indexed Job (see ``frwatch_operator.analysis.fanout``) summarises the raw
dumps of its shard of ranks into the store, where an agent would have left them (``summaries/<rank>.json``,
:meth:`frwatch_analyzers.store.layout.AttemptKey.summary`), so the reduce step (a plain ``frwatch analyze``)
reads summaries instead of decoding every dump in one pod.

- **Which ranks**: those whose rank ``% N == I``, among the ranks with exactly one dump in the listing (a
  rank with several files is decoded whole by the reduce step, as :mod:`.from_summaries` does). Shards are
  disjoint and cover every such rank, whatever the listing's order.
- **Which are summarised**: a rank whose summary is already valid for its dump (whole, this version, about
  that rank, made from that very dump: :func:`.from_summaries.take` checks it) is left alone.
- **How**: each dump is read and summarised in a worker process under the analyzer's limits
  (:mod:`.isolation`, :func:`.summary_writer.summary_of`: the one decoder); a dump that cannot be
  summarised is named in the result and left for the reduce step to decode and report.

The result is one JSON line. A store that cannot be listed or written is an error (exit 2): the Job
retries the index.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.limits import FILE_SECONDS_PER_MB, MIB, Limits
from ..base.safe_text import printable
from ..decode import isolation
from ..decode.isolation import Budget, Lost
from ..store.layout import SUMMARIES_DIR, split_s3_url
from ..store.sources import (
    DumpRef,
    Inputs,
    S3Config,
    SourceError,
    TooLarge,
    discover,
    read_bytes,
    s3_client,
    store_error_text,
)  # fmt: skip
from ..trace.summarize import Summarizer
from .reduce import take
from .writer import Made, summary_of


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``I/N`` with 0 <= I < N; ValueError otherwise."""
        left, sep, right = text.partition("/")
        if not sep or not left.isdigit() or not right.isdigit() or len(text) > 24:
            raise ValueError(f"a shard is I/N (e.g. 0/4): {printable(text, 40)}")
        index, count = int(left), int(right)
        if count < 1 or index >= count:
            raise ValueError(f"a shard needs 0 <= I < N: {printable(text, 40)}")
        return cls(index, count)

    def holds(self, rank: int) -> bool:
        return rank % self.count == self.index


@dataclass
class MapResult:
    shard: Shard
    written: list[int] = field(default_factory=list)  # ranks whose summary this step wrote
    valid: list[int] = field(default_factory=list)  # ranks that already had a valid summary
    failed: dict[int, str] = field(default_factory=dict)  # rank -> why it was not summarised

    def line(self) -> str:
        return json.dumps(
            {
                "shard": f"{self.shard.index}/{self.shard.count}",
                "written": len(self.written),
                "already_valid": len(self.valid),
                "failed": {str(r): why for r, why in sorted(self.failed.items())[:50]},
                "failed_count": len(self.failed),
            }
        )


def shard_dumps(inputs: Inputs, shard: Shard) -> list[DumpRef]:
    """The dumps of the shard's ranks: one a rank, for ranks with exactly one dump."""
    per_rank: dict[int, int] = {}
    for ref in inputs.dumps:
        if ref.rank is not None:
            per_rank[ref.rank] = per_rank.get(ref.rank, 0) + 1
    return [
        ref
        for ref in inputs.dumps
        if ref.rank is not None and per_rank[ref.rank] == 1 and shard.holds(ref.rank)
    ]


def summary_location(inputs: Inputs, rank: int) -> str:
    """Where ``rank``'s summary goes: ``<root>/summaries/<rank>.json`` (the key the agent writes)."""
    if inputs.bucket is not None:
        _, prefix = split_s3_url(inputs.root)
        return f"{prefix}/{SUMMARIES_DIR}/{rank}.json" if prefix else f"{SUMMARIES_DIR}/{rank}.json"
    return str(Path(inputs.root) / SUMMARIES_DIR / f"{rank}.json")


#: The store client of this worker process (made after the fork: a client is not shared across processes).
_CLIENTS: dict[int, Any] = {}
#: The summarizer of this worker process, kept across the ranks it summarises (:func:`.summary_of`).
_SUMMARIZERS: dict[int, Summarizer] = {}


def _work(job: tuple[DumpRef, str | None, S3Config, int]) -> Made | str:
    ref, bucket, s3, max_bytes = job
    client = None
    if bucket is not None:
        client = _CLIENTS.get(os.getpid())
        if client is None:
            client = _CLIENTS[os.getpid()] = s3_client(s3)
    try:
        data = read_bytes(ref, bucket, client, max_bytes)
        summarizer = _SUMMARIZERS.get(os.getpid())
        if summarizer is None:
            summarizer = _SUMMARIZERS[os.getpid()] = Summarizer()
        return summary_of(data, ref.rank or 0, summarizer, binary=True)  # version 3: summary_binary
    except TooLarge as exc:
        return f"too large: {exc}"[:300]
    except Exception as exc:  # a dump the decoder refuses, or a read error: the reduce step decodes and says
        return f"{type(exc).__name__}: {printable(str(exc), 240)}"


def map_shard(
    location: str, shard: Shard, *, s3: S3Config | None = None, limits: Limits | None = None, jobs: int = 1
) -> MapResult:
    """Summarise the shard's dumps that have no valid summary, and write each summary to the store.
    Raises :class:`SourceError` when the location cannot be listed or a summary cannot be written."""
    limits = limits or Limits()
    s3 = s3 or S3Config.from_env()
    inputs = discover(location, s3)
    mine = shard_dumps(inputs, shard)
    result = MapResult(shard)
    checked = take(
        Inputs(inputs.root, mine, None, bucket=inputs.bucket, summaries=inputs.summaries),
        s3,
        limits.max_file_bytes,
    )
    result.valid = sorted(t.rank for t in checked.traces)
    todo = checked.dumps

    def seconds(job: tuple[DumpRef, str | None, S3Config, int]) -> float:
        return limits.file_seconds + FILE_SECONDS_PER_MB * job[0].size / MIB

    budget = Budget(limits.worker_memory_bytes, seconds, limits.deadline_seconds)
    client = s3_client(s3) if inputs.bucket is not None else None
    tasks = [(ref, inputs.bucket, s3, limits.max_file_bytes) for ref in todo]
    for (ref, *_), made in zip(tasks, isolation.run(tasks, _work, budget, jobs=jobs), strict=True):
        rank = ref.rank or 0
        if isinstance(made, Lost):
            result.failed[rank] = made.reason
        elif isinstance(made, str):
            result.failed[rank] = made
        else:
            _put(inputs, summary_location(inputs, rank), made.data, client)
            result.written.append(rank)
    result.written.sort()
    return result


def _put(inputs: Inputs, location: str, data: bytes, client: Any) -> None:
    if inputs.bucket is not None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            client.put_object(Bucket=inputs.bucket, Key=location, Body=data, ContentType="application/json")
        except (BotoCoreError, ClientError) as exc:
            raise SourceError(f"s3://{inputs.bucket}/{location}: cannot write the summary: {store_error_text(exc)}") from exc
        return
    target = Path(location)
    try:
        target.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except OSError as exc:
        raise SourceError(f"{printable(location)}: cannot write the summary: {exc}") from exc
