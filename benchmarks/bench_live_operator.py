"""The operator's live round at scale: ``live_pull.pull_all`` + ``LiveJudge`` against many simulated agents.

    .venv/bin/python benchmarks/bench_live_operator.py [--pods 1000] [--ranks-per-pod 8] [--pods-per-job 16]
        [--rounds 10] [--workers 16] [--shards 1 --shard 0]

A separate process (so its CPU is not counted as the operator's) serves ``GET /live`` for every simulated
pod: one aiohttp server with one loopback port per pod (the pod is told by the port the request came in on),
answering each pod's n-th request with a realistic summary made by the agent's own summariser
(``live_summary.summarize_live``) from a gloo-style ``fr_trace_json`` answer whose ranks have all enqueued
``100 + n`` collectives (a healthy job that moves on every round; 16 entries a group kept, ~2 KB a rank).
The pods are split into jobs of ``--pods-per-job`` pods; every round runs, as ``handlers/live.py`` does, each
job in turn: ``pull_all`` (at most ``--workers`` agents at once, each call signed and its answer proven: ``agentauth``) then that job's
``LiveJudge.judge``. Not simulated: the per-job pod list the real round reads from the API server (one list
call a job) and Incident/Event writes (only on a finding; there is none here).

With ``--shards N`` (``operator.live_shards``) the ``--pods`` are the cluster's: each job gets a uid and only
the jobs of shard ``--shard`` (``live_shards.shard_of``, sha256 of the uid, as the operator picks them) are
simulated and run: one replica's round when it holds that one shard.

Prints per round: wall time, the operator process's CPU (user+sys, ``time.process_time``), bytes pulled,
and at the end the medians, the peak RSS, and the request rate and bytes a second this means at the
period ``--period`` (15 s, the chart's default).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import socket
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "live"))
from fake_worker import fr_answer  # noqa: E402

from frwatch_analyzers.live.summary import LivePod, summarize_live  # noqa: E402
from frwatch_operator.live.judge import LiveJudge  # noqa: E402
from frwatch_operator.live.pull import pull_all  # noqa: E402
from frwatch_operator.live.shards import shard_of  # noqa: E402

TOKEN = "bench-token"


def rank_summary(last: int, rank: int, world: int, now_ns: int) -> dict[str, object]:
    """One rank's summary dict at progress ``last`` (the agent's own reduction of a realistic answer)."""
    answer = fr_answer(last, t0=now_ns - (last + 1) * 10**8)
    answer["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": json.dumps(list(range(world)))}}
    return summarize_live(json.dumps(answer).encode(), rank, now_ns).model_dump(mode="json")


def serve(socks: list[socket.socket], ranks_per_pod: int, pods_per_job: int, ready: object) -> None:
    """The simulated agents (run in a child process)."""
    from aiohttp import web

    from frwatch_operator.agent.auth import PROOF_HEADER, CallChecker, answer_proof

    checker = CallChecker(TOKEN)
    count: dict[int, int] = {}
    cache: dict[tuple[int, int], dict[str, object]] = {}  # (progress, job world) -> rank-0 summary
    index = {s.getsockname()[1]: i for i, s in enumerate(socks)}

    async def live(request: web.Request) -> web.Response:
        nonce = checker.check(request.headers.get("Authorization", ""), "GET", request.raw_path, b"")
        if nonce is None:
            return web.Response(status=401)
        pod = index[request.transport.get_extra_info("sockname")[1]]  # type: ignore[union-attr]
        n = count[pod] = count.get(pod, -1) + 1
        world = pods_per_job * ranks_per_pod
        key = (100 + n, world)
        if key not in cache:
            cache[key] = rank_summary(100 + n, 0, world, time.time_ns())
        first = (pod % pods_per_job) * ranks_per_pod
        ranks = [dict(cache[key], rank=first + i) for i in range(ranks_per_pod)]
        body = json.dumps({"schema": "frwatch.live/v1", "pod": f"pod-{pod}", "ranks": ranks})
        return web.Response(text=body, content_type="application/json",
                            headers={PROOF_HEADER: answer_proof(TOKEN, nonce, 200)})  # fmt: skip

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/live", live)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        for s in socks:
            await web.SockSite(runner, s, backlog=512).start()
        ready.set()  # type: ignore[attr-defined]
        await asyncio.Event().wait()

    asyncio.run(main())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--ranks-per-pod", type=int, default=8)
    parser.add_argument("--pods-per-job", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=16, help="agents pulled at once (live_pull.WORKERS)")
    parser.add_argument("--timeout", type=float, default=2.0, help="the operator's agent timeout (2 s)")
    parser.add_argument("--period", type=float, default=15.0, help="the live poll period to extrapolate at")
    parser.add_argument("--shards", type=int, default=1, help="operator.live_shards (--pods: the whole cluster's)")
    parser.add_argument("--shard", type=int, default=0, help="the one shard whose jobs are run")
    ns = parser.parse_args()
    every = [min(ns.pods_per_job, ns.pods - first) for first in range(0, ns.pods, ns.pods_per_job)]
    uids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"frwatch-bench-job-{j}")) for j in range(len(every))]
    sized = [n for n, uid in zip(every, uids, strict=True) if shard_of(uid, ns.shards) == ns.shard]
    total, ns.pods = ns.pods, sum(sized)  # from here on --pods: the pods of this shard
    if ns.shards > 1:
        print(f"shard {ns.shard} of {ns.shards}: {len(sized)} of {len(every)} jobs, {ns.pods} of {total} pods")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, ns.pods + 512)), hard))
    socks = []
    for _ in range(ns.pods):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    server = ctx.Process(target=serve, args=(socks, ns.ranks_per_pod, ns.pods_per_job, ready), daemon=True)
    server.start()
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()  # the child keeps its copies
    if not ready.wait(120):
        raise SystemExit("the simulated agents did not start")
    jobs: list[dict[str, tuple[str, int, str | None]]] = []
    for first in range(0, ns.pods, ns.pods_per_job):
        jobs.append({f"pod-{p}": ("127.0.0.1", ports[p], TOKEN) for p in range(first, min(first + ns.pods_per_job, ns.pods))})
    # (a shard's last job may be cut: a full one elsewhere; the same pod count, judged the same way)
    world = ns.pods_per_job * ns.ranks_per_pod
    judges = [LiveJudge(range(world), stall_after_s=60.0) for _ in jobs]
    print(f"{ns.pods} pods x {ns.ranks_per_pod} ranks in {len(jobs)} jobs of {ns.pods_per_job} pods; "
          f"pull {ns.workers} at once; load average {os.getloadavg()}", flush=True)  # fmt: skip
    walls: list[float] = []
    cpus: list[float] = []
    judge_cpus: list[float] = []
    try:
        for r in range(ns.rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            failed = findings = read = 0
            judged = 0.0
            for agents, judge in zip(jobs, judges, strict=True):
                pulled = pull_all(agents, ns.timeout, workers=ns.workers)
                j0 = time.process_time()  # the pool's threads are done: this is the judge's alone
                result = judge.judge(pulled, time.time())
                judged += time.process_time() - j0
                failed += len(result.unreachable)
                findings += len(result.findings)
                read += sum(len(a.ranks) for a in pulled.values() if isinstance(a, LivePod))
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if failed or findings or read != ns.pods * ns.ranks_per_pod:
                print(f"round {r + 1}: {failed} agent(s) failed, {findings} finding(s), {read} ranks read "
                      "(the simulation is wrong or the machine too loaded)", flush=True)  # fmt: skip
            walls.append(wall)
            cpus.append(cpu)
            judge_cpus.append(judged)
            print(f"round {r + 1}: wall {wall:.2f} s, operator CPU {cpu:.2f} s (judging {judged:.2f} s), "
                  f"{read} ranks read", flush=True)  # fmt: skip
        # the answer's size, out of the timed rounds: one more pull of the first job
        first = pull_all(jobs[0], ns.timeout, workers=ns.workers)
        sizes = [len(a.model_dump_json(by_alias=True)) for a in first.values() if isinstance(a, LivePod)]
    finally:
        server.kill()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    per_pod = statistics.mean(sizes)
    print(f"median round: wall {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}), "
          f"CPU {statistics.median(cpus):.2f} s (min {min(cpus):.2f}, max {max(cpus):.2f}; judging "
          f"{statistics.median(judge_cpus):.2f} s, pulling and parsing the rest); "
          f"operator peak RSS {peak_mib:.0f} MiB; /live answer {per_pod / 1024:.1f} KB a pod "
          f"({per_pod / ns.ranks_per_pod / 1024:.2f} KB a rank)")  # fmt: skip
    for cluster in sorted({total, 10_000}):
        pods = cluster / ns.shards  # one shard's, about (the measured one: ns.pods of total)
        scale = pods / ns.pods
        what = f"one shard of {ns.shards} (~{pods:.0f} pods)" if ns.shards > 1 else "the operator"
        print(f"at {cluster} pods every {ns.period:g} s, {what}: {pods / ns.period:.0f} requests/s, "
              f"{pods * per_pod / ns.period / 1e6:.2f} MB/s of JSON, about {scale * statistics.median(cpus):.1f} s "
              f"of CPU a round ({100 * scale * statistics.median(cpus) / ns.period:.0f}% of a core)")  # fmt: skip
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
