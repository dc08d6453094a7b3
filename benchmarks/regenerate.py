"""Regenerate the figure tables of ``benchmarks/README.md``: run each benchmark, then write its rows between the
markers ``<!-- regenerated: begin -->`` and ``<!-- regenerated: end -->``. Every row names the command that
made it, the machine (``nproc``, CPU model) and the load it ran under (the 1-minute load average before and
after, and ``--shared``: what else ran on the machine). Times that are ratios of two tools were measured side
by side in one run: they survive load better than absolute times::

    .venv/bin/python benchmarks/regenerate.py --analyze-ranks 512 --reduce-ranks 16384 --keep /tmp/frregen \\
        --shared "8 other sessions' builds and tests on the same 2 cores"

``--smoke`` runs every benchmark at a tiny size (the test suite runs it so the tables cannot rot).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
README = BENCH / "README.md"
BEGIN, END = "<!-- regenerated: begin -->", "<!-- regenerated: end -->"


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"nproc {os.cpu_count()}, {model}, Python {platform.python_version()}"


def _load() -> float:
    return os.getloadavg()[0]


def _run(script: str, args: list[str], out_json: Path) -> tuple[str, str, float]:
    """Run ``script`` with ``args`` (its figures to ``out_json``); the command as a reader types it, the load
    before -> after, and the wall seconds."""
    cmd = [sys.executable, str(BENCH / script), *args, "--json", str(out_json)]
    shown = " ".join([".venv/bin/python", f"benchmarks/{script}", *map(shlex.quote, args)])
    before, t0 = _load(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{shown} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return f"`{shown}`", f"load {before:.1f} -> {_load():.1f}", time.perf_counter() - t0


def analyze_rows(ranks: str, entries: int, keep: Path, smoke: bool) -> list[str]:
    """bench_analyze.py: frwatch and the like-for-like unpickle floor, side by side, CPU per rank."""
    args = ["--ranks", ranks, "--entries", str(entries), "--skip-frtrace", "--keep", str(keep / "analyze")]
    if smoke:
        args += ["--skip-summaries", "--workers", "1"]
    out = keep / "analyze.json"
    command, load, _ = _run("bench_analyze.py", args, out)
    rows = []
    for r in json.loads(out.read_text())["rows"]:
        fw, fl = r.get("frwatch"), r.get("floor")
        if not fw or not fl:
            continue
        n = r["ranks"]
        rows.append(
            f"| {n} x {r['entries']} ({r['set']}) | {1000 * fw['cpu_s'] / n:.2f} ms | {1000 * fl['cpu_s'] / n:.2f} ms "
            f"| {fw['cpu_s'] / max(fl['cpu_s'], 1e-9):.2f}x | {fw['tree_peak_rss_mb']:.0f} MB | {command} | "
            f"{machine()} | {load} |"
        )
    return [
        "### frwatch against the unpickle floor (`bench_analyze.py`)",
        "",
        "CPU (user+sys of the whole process tree) a rank; the floor unpickles the same files in one process with",
        "the garbage collector off, as frwatch's workers decode; frwatch runs with its default workers.",
        "",
        "| ranks x entries | frwatch CPU a rank | floor CPU a rank | frwatch/floor CPU | frwatch peak RSS | command "
        "| machine | load |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]


def reduce_rows(ranks: str, keep: Path, smoke: bool, repeat: int = 2) -> list[str]:
    """bench_reduce.py: the reduce from JSON (v2) and binary (v3) summaries, side by side in one run."""
    args = ["--smoke"] if smoke else ["--ranks", ranks, "--formats", "json,binary", "--repeat", str(repeat)]
    args += ["--keep", str(keep / "reduce")]
    out = keep / "reduce.json"
    command, load, _ = _run("bench_reduce.py", args, out)
    got = json.loads(out.read_text())
    rows = []
    for world in sorted({r["ranks"] for r in got}):
        for fmt in ("json", "binary"):
            runs = [r for r in got if r["ranks"] == world and r["format"] == fmt]
            if not runs:
                continue
            best = min(runs, key=lambda r: r["total_cpu_s"])
            rows.append(
                f"| {world} | {fmt} | {best['decode_ms_per_rank']:.3f} ms | {best['cpu_ms_per_rank']:.3f} ms "
                f"| {best['peak_rss_mb']} MB | {len(runs)} | {command} | {machine()} | {load} |"
            )
    return [
        "### The reduce from summaries, JSON (v2) and binary (v3) side by side (`bench_reduce.py`)",
        "",
        "In one process: reading, decoding and interning every rank's summary (decode), then consistency, merge,",
        "alignment and diagnosis (whole reduce). CPU a rank, the lower of the alternating runs of each format.",
        "",
        "| ranks | format | decode CPU a rank | whole reduce CPU a rank | peak RSS | runs | command | machine | load |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]


def formats_rows(keep: Path, smoke: bool) -> list[str]:
    """bench_summary_formats.py: one summary's decode by format, side by side in one process."""
    args = ["--world", "64", "--entries", "100", "--n", "5", "--repeat", "1"] if smoke else []
    out = keep / "formats.json"
    command, load, _ = _run("bench_summary_formats.py", args, out)
    rows = [
        f"| {name} | {v['bytes'] / 1000:.1f} KB | {v['cpu_ms']:.3f} ms | {command} | {machine()} | {load} |"
        for name, v in json.loads(out.read_text()).items()
    ]
    return [
        "### One summary's decode by format (`bench_summary_formats.py`)",
        "",
        "CPU a summary, the lowest of the rounds; cold: fresh caches, warm: a reader that saw the rank's twin",
        "(shared columns and tables decoded once, as at scale). The last three rows check nothing (references).",
        "",
        "| decode | size | CPU | command | machine | load |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def write(readme: Path, section: list[str]) -> None:
    text = readme.read_text() if readme.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{readme}: the markers {BEGIN} and {END} are missing")
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    readme.write_text(head + BEGIN + "\n" + "\n".join(section) + "\n" + END + tail)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--analyze-ranks", default="512", help="bench_analyze.py world sizes (comma-separated)")
    p.add_argument("--entries", type=int, default=2000)
    p.add_argument("--reduce-ranks", default="16384", help="bench_reduce.py world sizes (comma-separated)")
    p.add_argument("--repeat", type=int, default=2, help="bench_reduce.py runs of each format, alternating")
    p.add_argument("--keep", type=Path, help="keep (and reuse) the fabricated sets here")
    p.add_argument("--shared", default="", help="what else ran on the machine meanwhile (said in the tables)")
    p.add_argument("--readme", type=Path, default=README)
    p.add_argument("--smoke", action="store_true", help="tiny sizes (the test suite)")
    args = p.parse_args(argv)
    keep = args.keep or Path(tempfile.mkdtemp(prefix="frregen-"))
    keep.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        args.analyze_ranks, args.entries = "16", 40
    parts: list[Callable[[], list[str]]] = [
        lambda: analyze_rows(args.analyze_ranks, args.entries, keep, args.smoke),
        lambda: reduce_rows(args.reduce_ranks, keep, args.smoke, args.repeat),
        lambda: formats_rows(keep, args.smoke),
    ]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    section = [
        f"Regenerated {stamp} by `.venv/bin/python benchmarks/regenerate.py"
        + ("".join(f" {shlex.quote(a)}" for a in (argv if argv is not None else sys.argv[1:])))
        + f"` on {machine()}."
        + (f" The machine was shared: {args.shared}." if args.shared else ""),
        "",
    ]
    for part in parts:
        section += [*part(), ""]
    print("\n".join(section))
    write(args.readme, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
