"""The summary path of ``bench_analyze.py``: the map step and the reduce from summaries, through the CLI.

On the set the row already timed (fr_trace, frwatch from the dumps, the unpickle floor):

1. **map**: ``frwatch analyze DIR --map-shard 0/1 --jobs J`` summarises every rank's dump into
   ``DIR/summaries/<rank>.json`` (what an agent does for its rank, or one map pod for its shard). The figure
   per rank is the run's CPU (user+sys, children included) divided by the ranks: what one rank's map step
   costs wherever it runs; wall / ranks is what it costs on this machine with J workers.
2. **reduce**: ``frwatch analyze DIR --format json`` with the summaries there: the verdict from summaries
   (checked against the dumps' size and digest, :mod:`frwatch_analyzers.summaries.reduce`), which must name
   the same culprits as the run from the dumps and say every rank was read from its summary.

The summaries are removed afterwards, so a kept set is timed from its dumps on the next run.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def run(
    directory: Path,
    ranks: int,
    frwatch: Path,
    jobs: int,
    measure: Callable[[list[str]], dict[str, Any]],
    from_dumps: dict[str, Any] | None,
) -> dict[str, Any]:
    """The map and reduce figures for the set at ``directory`` (``from_dumps``: the row's dump run)."""
    summaries = directory / "summaries"
    shutil.rmtree(summaries, ignore_errors=True)
    out: dict[str, Any] = {}
    try:
        mapped = measure([str(frwatch), "analyze", str(directory), "--map-shard", "0/1", "--jobs", str(jobs)])
        line = _last_json(mapped["stdout"])
        mapped["result"] = line
        mapped["per_rank_cpu_ms"] = round(1000 * mapped["cpu_s"] / ranks, 2)
        mapped["per_rank_wall_ms"] = round(1000 * mapped["wall_s"] / ranks, 2)
        mapped["summaries_mb"] = round(sum(p.stat().st_size for p in summaries.glob("*.json")) / 1e6, 2)
        out["map"] = mapped
        print(
            f"map:      {mapped['wall_s']:.2f} s, {mapped['cpu_s']:.2f} s cpu, {mapped['tree_peak_rss_mb']:.0f} MB"
            f" -> {line.get('written')} summaries written ({mapped['summaries_mb']} MB), failed"
            f" {line.get('failed_count')}; per rank {mapped['per_rank_cpu_ms']} ms cpu,"
            f" {mapped['per_rank_wall_ms']} ms wall with --jobs {jobs}",
            flush=True,
        )
        reduced = measure([str(frwatch), "analyze", str(directory), "--format", "json"])
        verdict = _verdict(reduced["stdout"])
        reduced["from_summaries"] = (verdict.get("stats") or {}).get("from_summaries")
        reduced["culprit_ranks"] = verdict.get("culprit_ranks")
        same = None
        if from_dumps is not None and from_dumps.get("rc") == 0:
            same = _verdict(from_dumps.get("stdout", "")).get("culprit_ranks") == verdict.get("culprit_ranks")
        reduced["same_culprits_as_dumps"] = same
        out["reduce"] = reduced
        print(
            f"reduce:   {reduced['wall_s']:.2f} s, {reduced['cpu_s']:.2f} s cpu, "
            f"{reduced['tree_peak_rss_mb']:.0f} MB -> {reduced['from_summaries']:.0f} of {ranks} ranks from "
            f"summaries, culprits {reduced['culprit_ranks']} (same as from the dumps: {same})",
            flush=True,
        )
    finally:
        shutil.rmtree(summaries, ignore_errors=True)
    for r in out.values():
        r.pop("stdout", None)
        r["stderr"] = r["stderr"][-2000:]
    return out


def _last_json(text: str) -> dict[str, Any]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    try:
        got = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        return {}
    return got if isinstance(got, dict) else {}


def _verdict(text: str) -> dict[str, Any]:
    try:
        got = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return got if isinstance(got, dict) else {}


def print_rows(rows: list[dict[str, Any]]) -> None:
    """The summary path's figures under the main table (rows that have them)."""
    rows = [r for r in rows if "map" in r and "reduce" in r]
    if not rows:
        return
    print(f"\n{'ranks x entries':>16} | map: per rank cpu, wall | reduce from summaries (wall, cpu, rss) | "
          "frwatch from dumps / from summaries, wall")  # fmt: skip
    for row in rows:
        m, r, d = row["map"], row["reduce"], row.get("frwatch") or {}
        ratio = f"{d['wall_s'] / r['wall_s']:.1f}x" if d.get("wall_s") and r["wall_s"] else "-"
        print(
            f"{row['ranks']:>8} x {row['entries']:<5} | {m['per_rank_cpu_ms']:8.2f} ms {m['per_rank_wall_ms']:8.2f} ms"
            f" | {r['wall_s']:8.2f} s {r['cpu_s']:8.2f} s {r['tree_peak_rss_mb']:7.0f} MB | {ratio:>8}"
        )
