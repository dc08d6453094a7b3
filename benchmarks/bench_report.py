"""The HTML report at scale: its size, the time to generate it from a verdict, and the time Debian's
chromium takes to load and lay it out, at 2048 and 16,384 ranks::

    .venv/bin/python benchmarks/bench_report.py [--ranks 2048,16384] [--entries 200] [--keep /tmp/frreport]

Dumps are fabricated as bench_analyze.py does (the real schema; the last rank stops one collective early,
every other rank waits), with a manifest of 8 ranks a pod and 2 pods a node, so the page names pods and
nodes. The analysis runs once per size (its time is printed for reference); the page is rendered
``--repeat`` times from the same verdict (median), and loaded ``--repeat`` times in one chromium (a fresh
user-data-dir), each load in a new tab: the render time is the navigation's ``loadEventEnd`` (parsing,
style, layout of the whole page).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analyzers"))
sys.path.insert(0, str(REPO / "dev"))

from bench_analyze import fabricate  # noqa: E402
from frwatch_analyzers.analyze import analyze  # noqa: E402
from frwatch_analyzers.report.html import render_html  # noqa: E402
from frwatch_analyzers.store.manifest import Manifest, PodRecord  # noqa: E402
from frwatch_dev.testing.browser import Browser, chromium_missing  # noqa: E402

PER_POD, PODS_PER_NODE = 8, 2


def write_manifest(folder: Path, ranks: int) -> None:
    pods = [
        PodRecord(
            pod=f"llama-worker-{p}",
            node=f"gpu-node-{p // PODS_PER_NODE}",
            ranks=list(range(p * PER_POD, min(ranks, (p + 1) * PER_POD))),
        )
        for p in range((ranks + PER_POD - 1) // PER_POD)
    ]
    (folder / "manifest.json").write_text(Manifest(world_size=ranks, pods=pods).model_dump_json())


def run_size(ranks: int, args: argparse.Namespace, root: Path, browser: Browser | None) -> dict[str, Any]:
    folder = root / f"r{ranks}x{args.entries}"
    made = fabricate(folder, ranks, args.entries)
    write_manifest(folder, ranks)
    start = time.perf_counter()
    verdict = analyze(str(folder))
    analyze_s = time.perf_counter() - start
    renders, page = [], ""
    for _ in range(args.repeat):
        start = time.perf_counter()
        page = render_html(verdict)
        renders.append(time.perf_counter() - start)
    out = root / f"report-{ranks}.html"
    out.write_text(page)
    row: dict[str, Any] = {
        "ranks": ranks,
        "entries": args.entries,
        "dumps_mb": round(made.get("bytes", 0) / 1e6, 1),
        "analyze_s": round(analyze_s, 2),
        "verdict": f"{verdict.status.value}/{verdict.category.value} culprits={verdict.culprit_ranks}",
        "lanes": sum(len(t.lanes) for t in verdict.timelines),
        "verdict_json_kb": round(len(verdict.model_dump_json()) / 1024, 1),
        "html_kb": round(len(page.encode()) / 1024, 1),
        "html_gzip_kb": round(len(gzip.compress(page.encode())) / 1024, 1),
        "generate_ms": round(statistics.median(renders) * 1000, 1),
    }
    if browser is not None:
        loads, walls = [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            seen = browser.open(out)
            walls.append(time.perf_counter() - start)
            loads.append(seen.render_ms)
            if seen.console_errors or seen.failed:
                row["browser_problems"] = seen.console_errors + seen.failed
            seen.page.close()
        row["chromium_load_ms"] = round(statistics.median(loads), 1)
        row["chromium_wall_ms"] = round(statistics.median(walls) * 1000, 1)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", default="2048,16384", help="comma-separated world sizes")
    p.add_argument(
        "--entries", type=int, default=200, help="entries a rank (the page does not grow with them)"
    )
    p.add_argument("--repeat", type=int, default=5, help="renders and page loads per size (median)")
    p.add_argument("--keep", type=Path, help="keep the fabricated sets in DIR and reuse them")
    p.add_argument("--json", type=Path, help="also write the figures as JSON to FILE")
    args = p.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="frreport-"))
    root.mkdir(parents=True, exist_ok=True)
    missing = chromium_missing()
    if missing:
        print(f"no browser figures: {missing}")
    rows = []
    if missing:
        rows = [run_size(int(r), args, root, None) for r in args.ranks.split(",")]
    else:
        with Browser(root) as browser:
            rows = [run_size(int(r), args, root, browser) for r in args.ranks.split(",")]
    keys = list(rows[0])
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(str(row.get(k, "")) for k in keys))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
