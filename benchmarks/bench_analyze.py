"""Time frwatch against PyTorch's fr_trace (torchfrtrace) and the unpickle floor, on the same dumps.

Fabricates R ranks x E entries of the real Flight Recorder schema (NCCL flavour, 9 Python frames an
entry, a ring buffer that wrapped) with one fault to find: the last rank stops one collective early and
every other rank waits in the collective it never joined. Then, in one run and on the same files:

1. ``torchfrtrace DIR -p nccl_trace_rank_``  (PyTorch's analyzer)
2. ``frwatch analyze DIR --format json``     (skipped with a message when not installed)
3. the summary path (``benchmarks/summary_path.py``, ``--skip-summaries`` to leave it out): the map step
   ``frwatch analyze DIR --map-shard 0/1`` writing every rank's summary (its CPU per rank printed), then
   ``frwatch analyze DIR`` reducing the summaries
4. the floor: loading every file with the C unpickler, one process, nothing else

Each measurement runs in a fresh subprocess that starts the tool, samples the RSS of the tool's whole
process tree every 50 ms and takes ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` (the largest single process)
when it ends. Usage::

    .venv/bin/python benchmarks/bench_analyze.py --ranks 64,512 --keep /tmp/frbench --json out.json

Issue 16's two targets in one run (fr_trace at 512 varied ranks, the floor ratio at 2048)::

    .venv/bin/python benchmarks/bench_analyze.py --ranks 512,2048 --keep /tmp/frbench
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analyzers"))

from frwatch_dev.dumps import Dump, world  # noqa: E402
from frwatch_dev.dumps import varied as varied_dumps  # noqa: E402
from frwatch_dev.dumps.fabricated import cached_set  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import summary_path  # noqa: E402

PREFIX = "nccl_trace_rank_"
BIN = Path(sys.executable).parent
SAMPLE_S = 0.05


# ----- fabrication ----------------------------------------------------------------------------


def _templates(entries: int, world_size: int) -> tuple[Dump, Dump]:
    """A waiting rank and the culprit, each holding ``entries`` entries of a wrapped ring.

    A training step is all_gather, reduce_scatter, all_reduce on the default group of ``world_size``
    ranks (built on 2 ranks with the sizes of ``world_size``: fr_trace checks numel against the group
    size); the run lasted past the ring's size.
    """
    shard, full = 524_288, 524_288 * world_size
    steps = math.ceil((entries + 150) / 3)
    program = world(2, buffer_size=entries).repeat(
        steps,
        lambda w: (
            w.all_gather(input_sizes=[[shard]], output_sizes=[[full]])
            .reduce_scatter(input_sizes=[[full]], output_sizes=[[shard]])
            .all_reduce(input_sizes=[[6_553_600]])
        ),
    )
    last_seq = 3 * steps
    dumps = program.rank(1).stops_at(last_seq + 1).dumps()
    return dumps[0], dumps[1]


def _fabricate_slice(args: tuple[str, int, int, list[int]]) -> int:
    """Write the dumps of ``ranks`` (run in a worker): the template, with per-rank fields varied."""
    directory, world_size, entries, ranks = args
    waiting, culprit = _templates(entries, world_size)
    pg_config = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world_size)))}}
    times = {
        id(t): [
            (e["time_created_ns"], e["time_discovered_started_ns"], e["time_discovered_completed_ns"])
            for e in t["entries"]
        ]
        for t in (waiting, culprit)
    }
    written = 0
    for rank in ranks:
        template = culprit if rank == world_size - 1 else waiting
        thread_id = str(139_975_964_072_832 + 4096 * rank)
        offset = 7_919 * rank
        for e, (created, started, completed) in zip(template["entries"], times[id(template)], strict=True):
            e["thread_id"] = thread_id
            e["time_created_ns"] = created + offset
            if started is not None:
                e["time_discovered_started_ns"] = started + offset
            if completed is not None:
                e["time_discovered_completed_ns"] = completed + offset
        dump = {**template, "pg_config": pg_config}
        data = pickle.dumps(dump, protocol=2)
        (Path(directory) / f"{PREFIX}{rank}").write_bytes(data)
        written += len(data)
    return written


def fabricate(directory: Path, world_size: int, entries: int, workers: int = 2) -> dict[str, Any]:
    """Write ``world_size`` dump files into ``directory`` (reused when a complete set is there)."""
    wanted = {"ranks": world_size, "entries": entries, "schema": "fr-2.10-nccl-stop-early-v2"}

    def make() -> int:
        slices = [list(range(w, world_size, workers)) for w in range(workers)]
        with ProcessPoolExecutor(workers) as pool:
            return sum(pool.map(_fabricate_slice, [(str(directory), world_size, entries, s) for s in slices]))

    return cached_set(directory, wanted, make)


# ----- measurement ----------------------------------------------------------------------------


def _tree_rss_kb(root: int) -> int:
    """The summed RSS (kB) of ``root`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().rsplit(b")", 1)[1].split()
            pid, ppid = int(entry.name), int(stat[1])
            rss[pid] = int(stat[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
            children.setdefault(ppid, []).append(pid)
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def _measure_here(cmd: list[str]) -> None:
    """Run ``cmd`` (inside a fresh measuring process) and print its figures as one JSON line."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = 0
    out_chunks: list[bytes] = []
    err_chunks: list[bytes] = []

    def drain(stream: Any, into: list[bytes]) -> None:
        for chunk in iter(lambda: stream.read(65536), b""):
            into.append(chunk)

    threads = [
        threading.Thread(target=drain, args=(proc.stdout, out_chunks), daemon=True),
        threading.Thread(target=drain, args=(proc.stderr, err_chunks), daemon=True),
    ]
    for t in threads:
        t.start()
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(SAMPLE_S)
    wall = time.perf_counter() - start
    for t in threads:
        t.join()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "wall_s": round(wall, 3),
                "rc": proc.returncode,
                "max_rss_mb": round(usage.ru_maxrss / 1024, 1),
                "tree_peak_rss_mb": round(max(peak, usage.ru_maxrss) / 1024, 1),
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
                "stdout": b"".join(out_chunks).decode(errors="replace"),
                "stderr": b"".join(err_chunks).decode(errors="replace"),
            }
        )
    )


def measure(cmd: list[str]) -> dict[str, Any]:
    """Figures of one run of ``cmd``, taken by a fresh subprocess (so RUSAGE_CHILDREN is its alone)."""
    out = subprocess.run(
        [sys.executable, __file__, "_measure", json.dumps(cmd)], capture_output=True, check=True, text=True
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# The floor: the fastest one process can merely unpickle every file. The C unpickler reading straight from
# the open file (a BytesIO makes it ~2.5x slower), with the collector off as frwatch's decoding workers run
# (like for like: with it on, the floor costs about twice as much and flatters the ratio). A subclass that
# refuses globals costs nothing more when it reads from a buffered file, so this is also the floor of a safe loader.
_FLOOR = """
import gc, os, pickle, sys
gc.disable()
class NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"global {module}.{name}")
n = 0
for entry in sorted(os.scandir(sys.argv[1]), key=lambda e: e.name):
    if entry.name.startswith(sys.argv[2]):
        with open(entry.path, "rb") as f:
            n += len(NoGlobals(f).load()["entries"])
print(n)
"""


# ----- the run --------------------------------------------------------------------------------


def _frtrace_summary(result: dict[str, Any]) -> str:
    lines = [ln for ln in result["stderr"].splitlines() if ln.strip()]
    if result["rc"] != 0 or any("Traceback" in ln for ln in lines):
        return "CRASHED: " + " | ".join(lines[-3:])
    keys = ("sequence number", "missing ranks", "error msg", "Culprit", "Too many mismatches")
    found = [ln.strip() for ln in lines if any(k in ln for k in keys)]
    return " | ".join(found[:2])[:200] if found else "(printed nothing: no finding)"


def _frwatch_summary(result: dict[str, Any]) -> str:
    if result["rc"] != 0:
        return "FAILED: " + " | ".join(result["stderr"].splitlines()[-3:])
    try:
        verdict = json.loads(result["stdout"])
    except json.JSONDecodeError:
        return "no JSON verdict on stdout"
    branch = verdict.get("earliest_branch") or {}
    return (
        f"{verdict.get('status')}/{verdict.get('category')} culprits={verdict.get('culprit_ranks')} "
        f"seq={branch.get('seq')}"
    )[:160]


def run_size(args: argparse.Namespace, ranks: int, root: Path) -> dict[str, Any]:
    if args.set == "varied":
        directory = root / f"varied-r{ranks}x{args.entries}"
        info = varied_dumps.fabricate(directory, ranks, args.entries, workers=args.workers)
    else:
        directory = root / f"r{ranks}x{args.entries}"
        info = fabricate(directory, ranks, args.entries, workers=args.workers)
    mb = info["bytes"] / 1e6
    how = "reused" if info["reused"] else f"fabricated in {info['fabricate_s']} s"
    print(
        f"\n== {ranks} ranks x {args.entries} entries, {args.set}: {mb:.0f} MB ({how}) in {directory}",
        flush=True,
    )
    row: dict[str, Any] = {
        "ranks": ranks,
        "entries": args.entries,
        "set": args.set,
        "mb": round(mb, 1),
        "dir": str(directory),
    }
    row["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]

    frtrace = BIN / "torchfrtrace"
    if args.skip_frtrace or ranks > args.frtrace_max:
        print(f"fr_trace: skipped (--skip-frtrace, or more ranks than --frtrace-max {args.frtrace_max})")
    elif not frtrace.exists():
        print(f"fr_trace: skipped ({frtrace} not found: install torch==2.13.0 into the venv)")
    else:
        r = measure([str(frtrace), str(directory), "-p", PREFIX])
        r["summary"] = _frtrace_summary(r)
        row["fr_trace"] = r
        print(f"fr_trace: {r['wall_s']:.2f} s, {r['tree_peak_rss_mb']:.0f} MB  -> {r['summary']}", flush=True)

    frwatch = args.frwatch or BIN / "frwatch"
    shutil.rmtree(directory / "summaries", ignore_errors=True)  # a kept set: timed from its dumps here
    if args.skip_frwatch:
        print("frwatch: skipped (--skip-frwatch)")
    elif not frwatch.exists():
        print(f"frwatch: skipped ({frwatch} not found: run scripts/setup to install the console script)")
    elif subprocess.run([str(frwatch), "analyze", "--help"], capture_output=True).returncode != 0:
        print("frwatch: skipped (`frwatch analyze` is not available yet)")
    else:
        cmd = [str(frwatch), "analyze", str(directory), "--format", "json"]
        if args.frwatch_args:
            cmd += args.frwatch_args.split()
        r = measure(cmd)
        r["summary"] = _frwatch_summary(r)
        row["frwatch"] = r
        print(f"frwatch:  {r['wall_s']:.2f} s, {r['tree_peak_rss_mb']:.0f} MB  -> {r['summary']}", flush=True)

    if "frwatch" in row and not args.skip_summaries:  # 4. the summary path (benchmarks/summary_path.py)
        row.update(summary_path.run(directory, ranks, frwatch, args.map_jobs, measure, row["frwatch"]))

    r = measure([sys.executable, "-c", _FLOOR, str(directory), PREFIX])
    r["summary"] = f"{r['stdout'].strip()} entries loaded"
    row["floor"] = r
    print(f"floor:    {r['wall_s']:.2f} s, {r['tree_peak_rss_mb']:.0f} MB  -> {r['summary']}", flush=True)
    row["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    for key in ("fr_trace", "frwatch", "floor"):  # keep the JSON small: the summaries say what they found
        if key in row:
            row[key].pop("stdout", None)
            row[key]["stderr"] = row[key]["stderr"][-2000:]
    if not args.keep:
        shutil.rmtree(directory)
    return row


def _ratio(a: dict[str, Any] | None, b: dict[str, Any] | None, key: str = "wall_s") -> str:
    if not a or not b or not b[key]:
        return "-"
    return f"{a[key] / b[key]:.1f}x"


def print_table(rows: list[dict[str, Any]]) -> None:
    def cell(r: dict[str, Any] | None) -> str:
        if not r:
            return f"{'-':^29}"
        return f"{r['wall_s']:7.2f} s {r['cpu_s']:7.2f} s {r['tree_peak_rss_mb']:6.0f} MB"

    tools = " | ".join(f"{t + ' (wall, cpu, rss)':^29}" for t in ("fr_trace", "frwatch", "floor"))
    head = f"{'ranks x entries':>16} {'MB':>6} | {tools}"
    print("\n" + head + " | fr_trace/frwatch wall, cpu | frwatch/floor wall, cpu | load avg")
    print("-" * len(head) + "-+---------------------------+-------------------------+---------")
    for row in rows:
        ft, fw, fl = row.get("fr_trace"), row.get("frwatch"), row.get("floor")
        print(
            f"{row['ranks']:>8} x {row['entries']:<5} {row['mb']:6.0f} | {cell(ft)} | {cell(fw)} | {cell(fl)} | "
            f"{_ratio(ft, fw):>15}, {_ratio(ft, fw, 'cpu_s'):>9} | {_ratio(fw, fl):>13}, {_ratio(fw, fl, 'cpu_s'):>9} | "
            + " ".join(
                f"{x:.1f}" for x in row.get("loadavg_before", [])[:1] + row.get("loadavg_after", [])[:1]
            )
        )
    print(
        "(cpu = user+sys of the tool's processes, children included: the steady figure on a shared machine;\n"
        " rss = peak RSS of its process tree, sampled every 50 ms, at least its largest process;\n"
        " load avg = 1-minute load before and after the row; load average now: "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
        + ")"
    )


#: Issue 16's targets: frwatch's CPU at most this many times the unpickle floor's (varied set, the largest
#: world measured), and fr_trace at least this many times slower than frwatch (varied set, 512 ranks).
TARGET_FLOOR_CPU = 1.5
TARGET_FRTRACE = 12.0
TARGET_FRTRACE_RANKS = 512


def targets(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 16's targets, judged from this run's rows (a line each; "not measured" when a row is missing)."""
    lines = []
    timed = [r for r in rows if r.get("frwatch") and r.get("floor")]
    if timed:
        top = max(timed, key=lambda r: r["ranks"])
        ratio = top["frwatch"]["cpu_s"] / max(top["floor"]["cpu_s"], 1e-9)
        per_rank = [1000 * top[k]["cpu_s"] / top["ranks"] for k in ("frwatch", "floor")]
        lines.append(
            f"CPU vs the unpickle floor at {top['ranks']} ranks ({top['set']}): {ratio:.2f}x "
            f"({per_rank[0]:.1f} ms vs {per_rank[1]:.1f} ms a rank; target <= {TARGET_FLOOR_CPU}x): "
            + ("met" if ratio <= TARGET_FLOOR_CPU else "NOT met")
        )
    else:
        lines.append("CPU vs the unpickle floor: not measured")
    both = [r for r in rows if r.get("frwatch") and r.get("fr_trace") and r["ranks"] == TARGET_FRTRACE_RANKS]
    if both:
        r = both[0]
        cpu = r["fr_trace"]["cpu_s"] / max(r["frwatch"]["cpu_s"], 1e-9)
        wall = r["fr_trace"]["wall_s"] / max(r["frwatch"]["wall_s"], 1e-9)
        lines.append(
            f"fr_trace / frwatch at {r['ranks']} ranks ({r['set']}): {cpu:.1f}x CPU, {wall:.1f}x wall "
            f"(target >= {TARGET_FRTRACE}x): " + ("met" if min(cpu, wall) >= TARGET_FRTRACE else "NOT met")
        )
    else:
        lines.append(
            f"fr_trace / frwatch at {TARGET_FRTRACE_RANKS} ranks: not measured (--ranks {TARGET_FRTRACE_RANKS},...)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_measure"]:
        _measure_here(json.loads(argv[1]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", default="64,512", help="comma-separated world sizes (default: 64,512)")
    p.add_argument("--entries", type=int, default=2000, help="entries a rank (ring-buffer size)")
    p.add_argument(
        "--set",
        choices=("varied", "uniform"),
        default="varied",
        help="varied: 3 kinds of group, 5 op types, 8 call stacks, one rank skips (frwatch_dev.dumps.varied); "
        "uniform: one 3-op step on one group, the last rank stops early (default: varied)",
    )
    p.add_argument("--skip-frtrace", action="store_true", help="do not run torchfrtrace")
    p.add_argument(
        "--frtrace-max", type=int, default=512, help="run torchfrtrace up to this many ranks (default: 512)"
    )
    p.add_argument("--skip-frwatch", action="store_true", help="do not run frwatch analyze")
    p.add_argument("--frwatch-args", default="", help="extra arguments for frwatch analyze")
    p.add_argument(
        "--frwatch",
        type=Path,
        help="the frwatch console script to time (default: this venv's; another checkout's for a before/after)",
    )
    p.add_argument("--skip-summaries", action="store_true", help="do not time the map step and the reduce")
    p.add_argument("--map-jobs", type=int, default=2, help="workers of the timed map step (default: 2)")
    p.add_argument("--keep", type=Path, help="keep the fabricated sets in DIR and reuse them on later runs")
    p.add_argument("--workers", type=int, default=2, help="fabrication processes (default: 2)")
    p.add_argument("--json", type=Path, help="also write the figures as JSON to FILE")
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.ranks.split(",") if x.strip()]
    root = args.keep or Path(tempfile.mkdtemp(prefix="frbench-"))
    rows = [run_size(args, ranks, root) for ranks in sizes]
    print_table(rows)
    summary_path.print_rows(rows)
    judged = targets(rows)
    print("\nissue 16 targets (one run, this machine; CPU is the steady figure when the load is high):")
    for line in judged:
        print(f"  {line}")
    if args.json:
        meta = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "argv": argv}
        args.json.write_text(json.dumps({"meta": meta, "rows": rows, "targets": judged}, indent=2))
        print(f"figures written to {args.json}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
