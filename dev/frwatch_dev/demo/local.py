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
from frwatch_analyzers.report.terminal import render

from ..workloads.local_launch import run_local_job
from ..workloads.scenarios import DEFAULTS, Scenario

#: What each scenario injects and what the ranks then do (``workloads.scenarios``), for the demo's header.
INJECTS: dict[Scenario, str] = {
    Scenario.HEALTHY: "no fault: every rank trains to the end and dumps at exit",
    Scenario.SKIP: "rank {c} skips a gradient all_reduce at step {s}: every rank hangs",
    Scenario.TYPE: "rank {c} all_gathers where the others all_reduce at step {s}: every rank hangs",
    Scenario.SIZE: "rank {c} all_reduces a larger bucket at step {s}: a neighbour aborts, the others fail",
    Scenario.DTYPE: "rank {c} all_reduces in float64 at step {s}: a neighbour aborts, the others fail",
    Scenario.CPU_STUCK: "rank {c} blocks in its data loader at step {s}: the others time out waiting",
    Scenario.EXTRA_SAME_SHAPE: "rank {c} issues one extra same-shape all_reduce at step {s}: the ranks drift "
    "apart silently and hang at the next control broadcast",
    Scenario.SUBGROUP: "rank {c} skips its tensor-parallel subgroup all_reduce at step {s}: every rank hangs",
    Scenario.SILENT_SHAPE: "rank {c} all_reduces another shape of the same size at step {s}: no hang, "
    "silent corruption",
    Scenario.SILENT_DTYPE: "rank {c} all_reduces int32 bits of the same byte size at step {s}: no hang, "
    "silent corruption",
    Scenario.CRASH: "rank {c} raises a Python exception at step {s}: the others fail at once",
    Scenario.KILLED: "rank {c} is SIGKILLed at step {s} (as an OOM kill): the others fail at once",
    Scenario.MOE: "no fault, mixture-of-experts: uneven all_to_all splits by design; every rank finishes",
    Scenario.MOE_BAD_SPLIT: "rank {c} expects 3 more rows than its peer sends at step {s}: no hang, "
    "garbage rows",
    Scenario.GATHER_ROOT: "rank {c} gathers to itself while the others gather to rank 0 at step {s}: "
    "every rank hangs",
}


def header(scenario: Scenario) -> str:
    """The line that says what the scenario injects and what the ranks then do."""
    defaults = DEFAULTS[scenario]
    return INJECTS[scenario].format(c=defaults.culprit, s=defaults.fault_step)


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
    print(f"  injected: {header(Scenario(args.scenario))}")
    print(f"  training ... (each rank's Flight Recorder dump goes into {out})", flush=True)
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
