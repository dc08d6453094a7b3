"""Training step time with and without live watch, what one sample costs the rank and the agent, and the agent's
CPU and memory while it samples: real torch gloo ranks, the real bootstrap, the real agent process (``frwatch
agent`` against a local SeaweedFS).

    .venv/bin/python benchmarks/bench_live_overhead.py [--ranks 4] [--steps 1600] [--work 64] [--pairs 10]
        [--warmup 2000] [--period 15] [--calls 10] [--skip-pairs]

Each run is the same small job (each step: a ``--work`` x ``--work`` matmul and an all_reduce of 64 floats, no
sleep: the collective path dominates, the worst case for a sampler that takes the Flight Recorder's lock; first
``--warmup`` untimed all_reduces, so every sample reads a full ring of 2000 entries as in a job that ran a while).

1. **One sample's cost** (calibration, no agent): the ranks with the bootstrap, then ``--calls`` rounds of the
   agent's own sampler (``LiveSampler.sample_once``, in this process) 0.5 s apart. Per ``fr_trace_json``: the CPU
   of the rank's ``pt_workerserver`` threads (``/proc/<pid>/task/<tid>/schedstat``, torch's C++ server: no GIL),
   the answer's size and latency; per round: the sampler's CPU (``time.process_time``). Hence the model: with
   the job keeping every core busy (4 ranks on 2 cores do), each CPU-second a round takes is taken from the
   ranks, so the step time grows by (rank side + agent side, a round) / (period x cores).
2. **Pairs**: a real agent beside the job, as in a pod. off: live watch off, the ranks without the bootstrap;
   on: ``FRWATCH_AGENT_LIVE=true`` sampling every ``--period`` s (15 in production), the ranks with the
   bootstrap on PYTHONPATH. ``--pairs`` pairs, the order alternating (off-on, on-off, ...) so a drift of the
   shared machine's load does not land on one side. Per run: the training loop's wall time (the slowest
   rank's), the ranks' CPU in the loop (every thread, the server's included: steadier than wall time when the
   machine is shared only if the ranks leave some CPU idle; here they do not, see the README), the server
   threads' CPU, the agent's CPU and peak RSS, and the machine's busy CPU from /proc/stat minus ours (the other
   sessions' load: noise). Per pair: the overhead in wall time and in CPU per step; over the pairs: the mean,
   the median and a bootstrap 95% interval of the mean (10,000 resamples of the pairs, seeded), set against
   the model's prediction for the period.
"""

from __future__ import annotations

import argparse
import array
import os
import random
import re
import resource
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "live"))
sys.path.insert(0, str(ROOT / "tests"))
from live_ranks import live_job, with_pythonpath_appended  # noqa: E402

from fixtures.seaweed import SeaweedFS  # noqa: E402
from frwatch_dev.testing.agent_process import TOKEN, start_agent  # noqa: E402
from frwatch_operator import constants as c  # noqa: E402
from frwatch_operator.agent.live_sampler import LiveSampler  # noqa: E402
from frwatch_operator.agent.livebootstrap import install  # noqa: E402
from frwatch_operator.agent.worker_client import call  # noqa: E402
from frwatch_operator.constants import ENV_LIVE_DIR  # noqa: E402

DONE = re.compile(r"live_rank (\d+) done loop_s=([0-9.]+) cpu_s=([0-9.]+) server_cpu_s=([0-9.]+)")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of the process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_busy_s() -> float:
    """CPU seconds every core of the machine has been busy since boot (user, nice, system, irq, softirq, steal)."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (f[0] + f[1] + f[2] + f[5] + f[6] + f[7]) / TICK


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's children that were waited for (the ranks once they end)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def server_cpu_s(pid: int) -> float:
    """CPU seconds of the process's ``pt_workerserver`` threads (torch's worker server and its pool)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            if Path(f"/proc/{pid}/task/{tid}/comm").read_text().startswith("pt_workerserver"):
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def job_args(
    steps: int, work: int, warmup: int, until: Path | None = None, step_times: Path | None = None
) -> list[str]:
    args = ["--mode", "healthy", "--steps", str(steps), "--step-s", "0", "--work", str(work), "--warmup", str(warmup)]
    args += ["--until-file", str(until)] if until else []
    return args + (["--step-times", str(step_times)] if step_times else [])


#: The per-round estimate's windows (s): the steps done in the W before a round against the W after it. A round's
#: time is rank 0's ``sampled_ns`` (taken when its answer is summarised, after every rank's was read), so the
#: after-window starts LEAD before it.
WINDOW_S, LEAD_S = 5.0, 1.0


def round_losses(ends_ns: list[int], rounds_ns: list[int]) -> list[float]:
    """Per round, the job's time lost to it (s): W x (1 - steps in the W after / steps in the W before), from
    the slowest rank's step ends. Rounds whose windows do not both lie inside the loop are left out."""
    import bisect

    out = []
    first, last = ends_ns[0], ends_ns[-1]
    w, lead = int(WINDOW_S * 1e9), int(LEAD_S * 1e9)
    for ts in rounds_ns:
        cut = ts - lead
        if cut - w < first or cut + w > last:
            continue
        before = bisect.bisect_left(ends_ns, cut) - bisect.bisect_left(ends_ns, cut - w)
        after = bisect.bisect_left(ends_ns, cut + w) - bisect.bisect_left(ends_ns, cut)
        if before:
            out.append(WINDOW_S * (1 - after / before))
    return out


def placebo_rounds(ends_ns: list[int], period: float) -> list[int]:
    """Times a round would have had in a run without live watch (every period from the loop's start, offset by
    half a period): the same estimate there measures the estimator's own noise and bias."""
    step = int(period * 1e9)
    return list(range(ends_ns[0] + step // 2, ends_ns[-1], step))


def calibrate(ranks: int, work: int, warmup: int, calls: int) -> dict[str, float]:
    """One sample's cost, measured: the rank's server threads per call, the sampler's CPU per round."""
    with tempfile.TemporaryDirectory(prefix="frwatch-live-cost-") as tmp:
        work_dir = Path(tmp)
        code_dir, live_dir = install(work_dir)
        env = with_pythonpath_appended(dict(os.environ), code_dir)
        env[ENV_LIVE_DIR] = str(live_dir)
        until = work_dir / "stop"
        with live_job(ranks, work_dir, job_args(10**9, work, warmup, until), env) as job:
            deadline = time.monotonic() + 300
            sampler = LiveSampler(live_dir, "bench")
            # wait until every rank answers with a full ring (the warm-up done)
            while time.monotonic() < deadline:
                pod = sampler.sample_once()
                full = [r for r in pod.ranks if r.groups and r.groups[0].last_enqueued >= warmup]
                if len(full) == ranks:
                    break
                time.sleep(1.0)
            else:
                raise SystemExit(f"the ranks did not fill their rings in time\n{job.log(0)}")
            pids = [p.pid for p in job.procs]
            server: list[float] = []
            agent: list[float] = []
            sizes: list[int] = []
            for _ in range(calls):
                time.sleep(0.5)
                s0 = [server_cpu_s(pid) for pid in pids]
                a0 = time.process_time()
                sampler.sample_once()
                agent.append(time.process_time() - a0)
                time.sleep(0.1)  # the server thread's last bytes and clean-up
                server.extend(server_cpu_s(pid) - s for pid, s in zip(pids, s0, strict=True))
            for path in sampler.sockets().values():
                sizes.append(len(call(str(path), "fr_trace_json", timeout_s=10, max_bytes=64 << 20).body))
            until.touch()
            job.wait(timeout_s=120)
    return {
        "server_call": statistics.median(server),
        "server_min": min(server),
        "server_max": max(server),
        "agent_round": statistics.median(agent),
        "agent_min": min(agent),
        "agent_max": max(agent),
        "bytes": statistics.median(sizes),
    }


def run(s3: SeaweedFS, ranks: int, steps: int, work: int, warmup: int, live: bool, period: float) -> dict[str, Any]:
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
            cpu0, t0, busy0, own0 = cpu_s(agent.proc.pid), time.monotonic(), machine_busy_s(), time.process_time()
            seen: set[int] = set()  # the ranks /live had read while they ran (asked every 5 s)
            rounds: set[int] = set()  # rank 0's sampled_ns of each round seen
            done = threading.Event()

            def watch() -> None:
                while not done.wait(min(5.0, period / 3)):
                    status, body = agent.request("GET", "/live", TOKEN)
                    if status == 200:
                        seen.update(r["rank"] for r in body["ranks"] if r["groups"] and not r["error"])
                        rounds.update(r["sampled_ns"] for r in body["ranks"] if r["rank"] == 0 and r["groups"])

            watcher = threading.Thread(target=watch, daemon=True)
            if live:
                watcher.start()
            reaped0 = children_cpu_s()
            times_dir = work_dir / "step-times"
            times_dir.mkdir()
            with live_job(ranks, work_dir, job_args(steps, work, warmup, step_times=times_dir), env) as job:
                codes = job.wait(timeout_s=1800)
                done.set()
                if codes != [0] * ranks:
                    raise SystemExit(f"a rank failed: {codes}\n{job.log(0)}")
                logs = [job.log(r) for r in range(ranks)]
                found = [m for log in logs for m in DONE.finditer(log)]
            ranks_life = children_cpu_s() - reaped0  # the ranks' whole lives (start-up and warm-up too): reaped
            wall, busy = time.monotonic() - t0, machine_busy_s() - busy0
            agent_cpu, own = cpu_s(agent.proc.pid) - cpu0, time.process_time() - own0
            if live:
                watcher.join()
                if sorted(seen) != list(range(ranks)) or any(log.count("frwatch-live:") != 1 for log in logs):
                    raise SystemExit(f"live watch did not read every rank while they ran: {sorted(seen)}\n{logs[0]}")
            rss = agent.peak_rss_mib()
        finally:
            agent.stop()
        loop = max(float(m.group(2)) for m in found)
        rank_cpu = sum(float(m.group(3)) for m in found)
        per_rank = [array.array("q", (times_dir / f"rank-{r}.bin").read_bytes()) for r in range(ranks)]
        ends = [max(col) for col in zip(*per_rank, strict=True)]  # a step ends for the job when its last rank's does
        losses = round_losses(ends, sorted(rounds) if live else placebo_rounds(ends, period))
        return {
            "losses": losses,
            "loop": loop,
            "rank_cpu": rank_cpu,
            "server_cpu": sum(float(m.group(4)) for m in found),
            "agent_cpu": agent_cpu,
            "wall": wall,
            "rss": rss,
            "others": max(0.0, busy - agent_cpu - ranks_life - own) / wall,  # cores the other sessions used
        }


def per_round_line(on_runs: list[dict[str, Any]], off_runs: list[dict[str, Any]], period: float) -> str:
    """Within the runs: the job's time lost per sampling round (the W after a round against the W before it),
    against the same estimate at placebo times of the runs without live watch; their difference over the
    period is the step-time overhead, free of the run-to-run drift the pairs carry."""
    on = [x for r in on_runs for x in r["losses"]]
    off = [x for r in off_runs for x in r["losses"]]
    if len(on) < 2 or len(off) < 2:
        return f"  per round: too few rounds inside the runs ({len(on)} sampled, {len(off)} placebo)"
    rng = random.Random(15)
    diffs = sorted(
        statistics.mean([rng.choice(on) for _ in on]) - statistics.mean([rng.choice(off) for _ in off])
        for _ in range(10_000)
    )
    d = statistics.mean(on) - statistics.mean(off)
    lo, hi = diffs[249], diffs[9749]
    return (f"  per round ({WINDOW_S:g} s windows): the job lost {1000 * statistics.mean(on):+.1f} ms a sampled round "
            f"({len(on)} rounds; median {1000 * statistics.median(on):+.1f}), {1000 * statistics.mean(off):+.1f} ms at "
            f"placebo times without live watch ({len(off)}; median {1000 * statistics.median(off):+.1f}): "
            f"{1000 * d:+.1f} ms a round, 95% [{1000 * lo:+.1f}, {1000 * hi:+.1f}] -> step-time overhead at "
            f"{period:g} s: {100 * d / period:+.2f}%, 95% [{100 * lo / period:+.2f}, {100 * hi / period:+.2f}]%")  # fmt: skip


def boot_interval(xs: list[float], stat: Callable[[list[float]], float] = statistics.mean) -> tuple[float, float]:
    """A bootstrap 95% interval of ``stat`` over ``xs`` (10,000 resamples, seeded: the same figures each time)."""
    rng = random.Random(15)
    draws = sorted(stat([rng.choice(xs) for _ in xs]) for _ in range(10_000))
    return draws[249], draws[9749]


def spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.3f} (min {min(xs):.3f}, max {max(xs):.3f})"


def summary_line(name: str, xs: list[float]) -> str:
    lo, hi = boot_interval(xs)
    return (f"  {name} of each pair (%): {', '.join(f'{o:+.2f}' for o in xs)}\n"
            f"    mean {statistics.mean(xs):+.2f}%, median {statistics.median(xs):+.2f}%, bootstrap 95% interval "
            f"of the mean [{lo:+.2f}, {hi:+.2f}]%")  # fmt: skip


def run_model(on: dict[str, Any], off: dict[str, Any], cores: int) -> tuple[float, float]:
    """The step-time overhead (%) the pair's own measured sampling CPU predicts: the CPU the on-run spent on
    sampling (the ranks' server threads, and the agent's beyond its off-run rate) taken from the job, spread over
    every busy core (the lower figure: the other sessions lose their share of it too) or all from the job (the
    upper: the job then needs it on top of its own CPU, at the rate the off-run had). The two agree when the job
    has the machine to itself and keeps it busy."""
    sampling = on["server_cpu"] + on["agent_cpu"] - off["agent_cpu"] / off["wall"] * on["wall"]
    sampling *= on["loop"] / on["wall"]  # the share that fell in the timed loop (not start-up and warm-up)
    return 100 * sampling / (cores * off["loop"]), 100 * sampling / off["rank_cpu"]


def fit_k(points: list[tuple[float, float]]) -> float:
    """The k of overhead = k / period (least squares through the origin), from (period, overhead %) points."""
    return sum(o / p for p, o in points) / sum(1 / p**2 for p, _ in points)


def fit_line(points: list[tuple[float, float]], cores: int) -> str:
    """The measured overheads fitted as k / period (what a fixed CPU cost a round predicts), with an interval."""
    rng = random.Random(15)
    draws = sorted(fit_k([rng.choice(points) for _ in points]) for _ in range(10_000))
    k = fit_k(points)
    return (f"fit of every pair's step-time overhead as k / period: k = {k:.1f} %*s (bootstrap 95% "
            f"[{draws[249]:.1f}, {draws[9749]:.1f}]), i.e. {10 * k * cores:.0f} ms of CPU a round taken from "
            f"{cores} busy cores; at 15 s: {k / 15:+.2f}% [{draws[249] / 15:+.2f}, {draws[9749] / 15:+.2f}]")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1600)
    parser.add_argument("--work", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=10, help="pairs at each period")
    parser.add_argument("--warmup", type=int, default=2000, help="untimed all_reduces first: a full 2000-entry ring")
    parser.add_argument("--period", default="15", help="sampling period(s), comma-separated: pairs interleaved")
    parser.add_argument("--calls", type=int, default=10, help="sampling rounds of the calibration")
    parser.add_argument("--skip-pairs", action="store_true", help="the calibration only")
    ns = parser.parse_args()
    periods = [float(x) for x in ns.period.split(",")]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's SIGTERM still stops the ranks
    cores = os.cpu_count() or 1
    print(f"{ns.ranks} ranks, {ns.steps} steps a run, sampling every {ns.period} s; {cores} CPUs; load average "
          f"before {tuple(round(x, 2) for x in os.getloadavg())}", flush=True)  # fmt: skip
    cost = calibrate(ns.ranks, ns.work, ns.warmup, ns.calls)
    per_round = ns.ranks * cost["server_call"] + cost["agent_round"]
    print(f"one sample, rank side: fr_trace_json of a 2000-entry ring = {cost['bytes'] / 1e3:.0f} KB, "
          f"{1000 * cost['server_call']:.1f} ms of the server threads' CPU (median; min "
          f"{1000 * cost['server_min']:.1f}, max {1000 * cost['server_max']:.1f}), no GIL", flush=True)  # fmt: skip
    print(f"one round, agent side: {1000 * cost['agent_round']:.1f} ms of CPU for {ns.ranks} ranks (median; min "
          f"{1000 * cost['agent_min']:.1f}, max {1000 * cost['agent_max']:.1f})", flush=True)  # fmt: skip
    for p in sorted({1.0, 3.0, 15.0, *periods}):
        print(f"model: a round = {1000 * per_round:.0f} ms of CPU; every {p:g} s on {cores} busy cores -> "
              f"{100 * per_round / (p * cores):.2f}% step time", flush=True)  # fmt: skip
    if ns.skip_pairs:
        return 0
    results: dict[tuple[float, bool], list[dict[str, Any]]] = {}
    wall_over: dict[float, list[float]] = {p: [] for p in periods}
    cpu_over: dict[float, list[float]] = {p: [] for p in periods}
    model_over: dict[float, list[tuple[float, float]]] = {p: [] for p in periods}
    with tempfile.TemporaryDirectory(prefix="frwatch-live-bench-s3-") as s3dir:
        s3 = SeaweedFS(Path(s3dir))
        s3.start()
        try:
            for i in range(ns.pairs):
                for period in periods:
                    pair: dict[bool, dict[str, Any]] = {}
                    for live in (False, True) if i % 2 == 0 else (True, False):
                        got = run(s3, ns.ranks, ns.steps, ns.work, ns.warmup, live, period)
                        results.setdefault((period, live), []).append(got)
                        pair[live] = got
                        print(f"{period:g} s, pair {i + 1} live={'on ' if live else 'off'}: {got['loop']:.2f} s "
                              f"({1000 * got['loop'] / ns.steps:.3f} ms a step), ranks' CPU "
                              f"{1000 * got['rank_cpu'] / ns.steps:.3f} ms a step (server threads "
                              f"{1000 * got['server_cpu']:.0f} ms); agent CPU {got['agent_cpu']:.2f} s over "
                              f"{got['wall']:.1f} s, peak RSS {got['rss']:.0f} MiB; other sessions "
                              f"{got['others']:.2f} cores; load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
                    off_loop, off_cpu = pair[False]["loop"], pair[False]["rank_cpu"]
                    wall_over[period].append(100 * (pair[True]["loop"] - off_loop) / off_loop)
                    cpu_over[period].append(100 * (pair[True]["rank_cpu"] - off_cpu) / off_cpu)
                    model_over[period].append(run_model(pair[True], pair[False], cores))
        finally:
            s3.stop()
    for period in periods:
        off = [1000 * r["loop"] / ns.steps for r in results[(period, False)]]
        on = [1000 * r["loop"] / ns.steps for r in results[(period, True)]]
        print(f"sampling every {period:g} s ({ns.pairs} pairs); the model: {100 * per_round / (period * cores):+.2f}%")
        print(f"  step time (ms), live off: {spread(off)}; live on: {spread(on)}")
        print(summary_line("step-time overhead", wall_over[period]))
        print(summary_line("ranks' CPU-a-step overhead", cpu_over[period]))
        print("  the model from each pair's own sampling CPU (%), spread over the cores .. all from the job: "
              + ", ".join(f"{lo:+.2f}..{hi:+.2f}" for lo, hi in model_over[period]))  # fmt: skip
        print(per_round_line(results[(period, True)], results[(period, False)], period))
        rs_on = results[(period, True)]
        per_s = [r["agent_cpu"] / r["wall"] for r in rs_on]
        srv = statistics.median(r["server_cpu"] / r["loop"] for r in rs_on)
        print(f"  agent, live on: CPU {100 * statistics.median(per_s):.2f}% of a core (min {100 * min(per_s):.2f}, "
              f"max {100 * max(per_s):.2f}); peak RSS median {statistics.median(r['rss'] for r in rs_on):.0f} MiB "
              f"(max {max(r['rss'] for r in rs_on):.0f}); the ranks' server threads {100 * srv:.2f}% of a core")  # fmt: skip
    rs_off = [r for (_, live), rs in results.items() if not live for r in rs]
    per_s = [r["agent_cpu"] / r["wall"] for r in rs_off]
    print(f"agent, live off: CPU {100 * statistics.median(per_s):.2f}% of a core; peak RSS median "
          f"{statistics.median(r['rss'] for r in rs_off):.0f} MiB")  # fmt: skip
    others = [r["others"] for rs in results.values() for r in rs]
    print(f"other sessions on this machine during the runs: {statistics.median(others):.2f} cores median "
          f"(min {min(others):.2f}, max {max(others):.2f}) of {cores}")  # fmt: skip
    if len(periods) > 1:
        print(fit_line([(p, o) for p in periods for o in wall_over[p]], cores))
    print(f"load average after: {tuple(round(x, 2) for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
