"""The local demo: a real 4-rank torch (gloo) training job with a rank-dependent bug runs as local
processes, every rank dumps its Flight Recorder (its output goes beside the dumps as ``rank<N>.log``), and
the analyzer names the earliest branch, and from the logs why a rank stopped.

No cluster is needed: this is the analyzer's half of frwatch, on real dumps, in about 15 seconds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.report import render

from ..workloads.local_launch import run_local_job
from ..workloads.scenarios import Scenario


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default=Scenario.SKIP.value, choices=[s.value for s in Scenario],
                   help="the bug the job has (default: %(default)s)")
    p.add_argument("--world-size", type=int, default=4, help="rank processes (default: %(default)s)")
    p.add_argument("--keep", type=Path, help="keep the dumps in this folder (default: a temporary one)")


def run(args: argparse.Namespace) -> int:
    if args.keep:
        return _run(args, args.keep)
    with tempfile.TemporaryDirectory(prefix="frwatch-demo-") as tmp:  # nothing left in the temp dir
        return _run(args, Path(tmp))


def _run(args: argparse.Namespace, out: Path) -> int:
    print(f"frwatch demo (local): {args.world_size} real torch gloo ranks, scenario '{args.scenario}'")
    print(f"  training ... (the job hangs; every rank dumps its Flight Recorder into {out})", flush=True)
    started = time.monotonic()
    result = run_local_job(args.scenario, args.world_size, out, deadline_s=120.0)
    for r in result.ranks:
        end = f"exit {r.exit_code}" if r.exit_code is not None else (r.signal or "killed")
        print(f"    rank {r.rank}: {end:<10} dump: {'yes' if r.dump else 'no'}")
        (out / f"rank{r.rank}.log").write_text(r.log)  # its output, beside the dumps: the analyzer reads it too
    print(f"  analysing {sum(1 for r in result.ranks if r.dump)} dump(s) ...\n", flush=True)
    verdict = analyze(str(out), world_size=args.world_size)
    sys.stdout.write(render(verdict))
    again = f"verdict JSON: frwatch analyze {out} --format json" if args.keep else "--keep DIR keeps the dumps"
    print(f"\n(done in {time.monotonic() - started:.1f} s; {again})")
    return 0
