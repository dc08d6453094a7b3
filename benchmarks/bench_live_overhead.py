"""Training step time with and without live watch: real torch gloo ranks, the bootstrap, the agent's sampler.

    .venv/bin/python benchmarks/bench_live_overhead.py [--ranks 2] [--steps 1000] [--work 64] [--rounds 3]
        [--period 1.0]

Runs the same small job (each step: an ``--work`` x ``--work`` matmul and an all_reduce of 64 floats, no
sleep: the collective path dominates, the worst case for a sampler that takes the Flight Recorder's lock)
``--rounds`` times without and with live watch, alternating. With live watch each rank has the bootstrap on
PYTHONPATH and this process runs the agent's sampler every ``--period`` seconds (15 s in production: 1 s
makes any cost 15 times easier to see). Prints each run's training-loop time (the slowest rank's) and the
median overhead, and the sampler's own CPU time per round.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "live"))
from live_ranks import live_job, with_pythonpath_appended  # noqa: E402

from frwatch_operator.agent.live_sampler import LiveSampler, SamplerSettings  # noqa: E402
from frwatch_operator.agent.livebootstrap import install  # noqa: E402
from frwatch_operator.constants import ENV_LIVE_DIR  # noqa: E402

LOOP = re.compile(r"live_rank (\d+) done loop_s=([0-9.]+)")


def run(ranks: int, steps: int, work: int, live: bool, period: float) -> tuple[float, list[float]]:
    with tempfile.TemporaryDirectory(prefix="frwatch-live-bench-") as tmp:
        work_dir = Path(tmp)
        env = dict(os.environ)
        sampler: LiveSampler | None = None
        if live:
            code_dir, live_dir = install(work_dir)
            env = with_pythonpath_appended(env, code_dir)
            env[ENV_LIVE_DIR] = str(live_dir)
            sampler = LiveSampler(live_dir, "bench", SamplerSettings(period_s=period))
        stop = threading.Event()
        cpu: list[float] = []

        def sample() -> None:
            assert sampler is not None
            while not stop.wait(period):
                t = time.thread_time()
                sampler.sample_once()
                cpu.append(time.thread_time() - t)

        args = ["--mode", "healthy", "--steps", str(steps), "--step-s", "0", "--work", str(work)]
        with live_job(ranks, work_dir, args, env) as job:
            thread = threading.Thread(target=sample, daemon=True) if sampler else None
            if thread:
                thread.start()
            codes = job.wait(timeout_s=900)
            stop.set()
            if codes != [0] * ranks:
                raise SystemExit(f"a rank failed: {codes}\n{job.log(0)}")
            loops = [float(m.group(2)) for r in range(ranks) for m in LOOP.finditer(job.log(r))]
        return max(loops), cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--work", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--period", type=float, default=1.0)
    ns = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's SIGTERM still stops the ranks
    off: list[float] = []
    on: list[float] = []
    cpu: list[float] = []
    for i in range(ns.rounds):
        for live in (False, True):
            loop, c = run(ns.ranks, ns.steps, ns.work, live, ns.period)
            (on if live else off).append(loop)
            cpu += c
            print(f"round {i + 1} live={'on ' if live else 'off'}: {loop:.2f} s for {ns.steps} steps "
                  f"({1000 * loop / ns.steps:.2f} ms a step)", flush=True)  # fmt: skip
    a, b = statistics.median(off), statistics.median(on)
    print(
        f"median step: off {1000 * a / ns.steps:.3f} ms, on {1000 * b / ns.steps:.3f} ms: {100 * (b - a) / a:+.1f}%"
    )
    if cpu:
        print(f"sampler CPU a round ({ns.ranks} ranks): median {1000 * statistics.median(cpu):.1f} ms, "
              f"max {1000 * max(cpu):.1f} ms over {len(cpu)} rounds")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
