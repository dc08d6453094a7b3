"""Training step time with and without live watch, and the agent's CPU and memory while it samples: real torch
gloo ranks, the real bootstrap, the real agent process (``frwatch agent`` against a local SeaweedFS).

    .venv/bin/python benchmarks/bench_live_overhead.py [--ranks 4] [--steps 1000] [--work 64] [--pairs 4]
        [--warmup 2000] [--period 1.0]

Each run is the same small job (each step: a ``--work`` x ``--work`` matmul and an all_reduce of 64 floats, no
sleep: the collective path dominates, the worst case for a sampler that takes the Flight Recorder's lock; first
``--warmup`` untimed all_reduces, so the sampler reads a full ring of 2000 entries as in a job that ran a while)
with a real agent beside it, as in a pod:
- off: the agent with live watch off, the ranks without the bootstrap;
- on: the agent with ``FRWATCH_AGENT_LIVE=true`` sampling every ``--period`` seconds (15 s in production: 1 s
  makes any cost 15 times easier to see), the ranks with the bootstrap on PYTHONPATH (each serves its socket).
Runs come in ``--pairs`` pairs, the order alternating (off-on, on-off, ...) so a drift of the shared machine's
load does not land on one side. Printed: each run's training-loop time (the slowest rank's), the median step
time off and on with their spread, the overhead of each pair and their median, the agent's CPU (user+sys of
the process, from /proc) per second and per sampling round, its peak RSS, and the load average before and
after (the machine is shared: read the figures with it).
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
sys.path.insert(0, str(ROOT / "tests"))
from live_ranks import live_job, with_pythonpath_appended  # noqa: E402

from fixtures.seaweed import SeaweedFS  # noqa: E402
from frwatch_dev.testing.agent_process import TOKEN, start_agent  # noqa: E402
from frwatch_operator import constants as c  # noqa: E402
from frwatch_operator.constants import ENV_LIVE_DIR  # noqa: E402

LOOP = re.compile(r"live_rank (\d+) done loop_s=([0-9.]+)")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of the process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run(s3: SeaweedFS, ranks: int, steps: int, work: int, warmup: int, live: bool, period: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="frwatch-live-bench-") as tmp:
        work_dir = Path(tmp)
        agent_env = {"FRWATCH_AGENT_LIVE": "true", "FRWATCH_AGENT_LIVE_PERIOD_SECONDS": str(period),
                     "FRWATCH_AGENT_LIVE_RANKS": f"0-{ranks - 1}"} if live else {}  # fmt: skip
        agent = start_agent(work_dir, s3.env(), **agent_env)
        try:
            env = dict(os.environ)
            if live:
                env = with_pythonpath_appended(env, agent.dump_dir / c.LIVE_BOOTSTRAP_SUBDIR)
                env[ENV_LIVE_DIR] = str(agent.dump_dir / c.LIVE_SOCKET_SUBDIR)
            args = ["--mode", "healthy", "--steps", str(steps), "--step-s", "0", "--work", str(work),
                    "--warmup", str(warmup)]  # fmt: skip
            cpu0, t0 = cpu_s(agent.proc.pid), time.monotonic()
            seen: set[int] = set()  # the ranks /live had read while they ran (asked every 2 s)
            done = threading.Event()

            def watch() -> None:
                while not done.wait(2.0):
                    status, body = agent.request("GET", "/live", TOKEN)
                    if status == 200:
                        seen.update(r["rank"] for r in body["ranks"] if r["groups"] and not r["error"])

            watcher = threading.Thread(target=watch, daemon=True)
            if live:
                watcher.start()
            with live_job(ranks, work_dir, args, env) as job:
                codes = job.wait(timeout_s=1800)
                done.set()
                if codes != [0] * ranks:
                    raise SystemExit(f"a rank failed: {codes}\n{job.log(0)}")
                loops = [float(m.group(2)) for r in range(ranks) for m in LOOP.finditer(job.log(r))]
                logs = [job.log(r) for r in range(ranks)]
            agent_cpu, wall = cpu_s(agent.proc.pid) - cpu0, time.monotonic() - t0
            if live:
                watcher.join()
                if sorted(seen) != list(range(ranks)) or any(log.count("frwatch-live:") != 1 for log in logs):
                    raise SystemExit(f"live watch did not read every rank while they ran: {sorted(seen)}\n{logs[0]}")
            rss = agent.peak_rss_mib()
        finally:
            agent.stop()
        return {"loop": max(loops), "agent_cpu": agent_cpu, "wall": wall, "rss": rss}


def spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.3f} (min {min(xs):.3f}, max {max(xs):.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--work", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=2000, help="untimed all_reduces first: a full 2000-entry ring")
    parser.add_argument("--period", type=float, default=1.0)
    ns = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's SIGTERM still stops the ranks
    print(f"{ns.ranks} ranks, {ns.steps} steps, sampling every {ns.period:g} s; load average before "
          f"{os.getloadavg()}; {os.cpu_count()} CPUs", flush=True)  # fmt: skip
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    overheads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="frwatch-live-bench-s3-") as s3dir:
        s3 = SeaweedFS(Path(s3dir))
        s3.start()
        try:
            for i in range(ns.pairs):
                pair: dict[bool, float] = {}
                for live in (False, True) if i % 2 == 0 else (True, False):
                    got = run(s3, ns.ranks, ns.steps, ns.work, ns.warmup, live, ns.period)
                    results[live].append(got)
                    pair[live] = got["loop"]
                    print(f"pair {i + 1} live={'on ' if live else 'off'}: {got['loop']:.2f} s for {ns.steps} steps "
                          f"({1000 * got['loop'] / ns.steps:.3f} ms a step); agent CPU {got['agent_cpu']:.2f} s "
                          f"over {got['wall']:.1f} s, peak RSS {got['rss']:.0f} MiB; load {os.getloadavg()[0]:.1f}",
                          flush=True)  # fmt: skip
                overheads.append(100 * (pair[True] - pair[False]) / pair[False])
        finally:
            s3.stop()
    off = [1000 * r["loop"] / ns.steps for r in results[False]]
    on = [1000 * r["loop"] / ns.steps for r in results[True]]
    print(f"step time (ms), live off: {spread(off)}")
    print(f"step time (ms), live on:  {spread(on)}")
    print(f"overhead of each pair (%): {', '.join(f'{o:+.1f}' for o in overheads)}; median {statistics.median(overheads):+.1f}%; "
          f"medians compared {100 * (statistics.median(on) - statistics.median(off)) / statistics.median(off):+.1f}%")  # fmt: skip
    for live in (False, True):
        rs = results[live]
        per_s = [r["agent_cpu"] / r["wall"] for r in rs]
        line = (f"agent, live {'on ' if live else 'off'}: CPU {100 * statistics.median(per_s):.1f}% of a core "
                f"(min {100 * min(per_s):.1f}, max {100 * max(per_s):.1f}); peak RSS median "
                f"{statistics.median(r['rss'] for r in rs):.0f} MiB (max {max(r['rss'] for r in rs):.0f})")  # fmt: skip
        if live:
            line += f"; about {1000 * statistics.median(per_s) * ns.period:.0f} ms of CPU a round of {ns.ranks} ranks"
        print(line)
    own = statistics.median(r["agent_cpu"] / r["wall"] for r in results[True]) - statistics.median(
        r["agent_cpu"] / r["wall"] for r in results[False]
    )
    print(f"sampling's own CPU (agent on minus off): {100 * own:.1f}% of a core, about {1000 * own * ns.period:.0f} ms "
          f"a round of {ns.ranks} ranks; at the production period of 15 s: {100 * own * ns.period / 15:.2f}% of a core")  # fmt: skip
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
