"""One rank of a small real torch gloo job for the live-watch tests (run as a script, one process a rank).

    python live_rank_program.py --mode healthy|skip|stuck|slow|gil --steps N [--step-s S] [--pause-s P]
        [--no-worker-server-ranks R,...]

Every step each rank calls ``train_step`` -> ``sync_gradients`` (an all_reduce of 64 floats). The culprit
(rank 1) plays the mode from ``--fault-step``: ``skip`` calls ``agree_to_continue`` (a broadcast) where the
others all_reduce (one desync, then every rank waits); ``stuck`` sleeps in ``load_batch`` forever;
``slow`` sleeps ``--pause-s`` in ``load_batch`` every step; ``gil`` holds the GIL ``--pause-s`` (a C call that
keeps it) once. The process-group timeout is ``--timeout-s`` (300 by default: the watchdog is far away).
The rank prints ``live_rank <rank> done loop_s=<seconds of the training loop> cpu_s=<the process's CPU seconds
in that loop, every thread> server_cpu_s=<CPU seconds of torch's worker-server threads so far, 0 without one>``
when it finished every step, and exits 0 (the CPU figures are for ``benchmarks/bench_live_overhead.py``;
so is ``--step-times``: when each step ended).
Nothing here imports frwatch: live watch reaches the rank through the bootstrap on PYTHONPATH only.
"""

from __future__ import annotations

import argparse
import array
import ctypes
import os
import sys
import time
import warnings
from datetime import timedelta

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

CULPRIT = 1


def load_batch(mode: str, is_fault: bool, pause_s: float) -> torch.Tensor:
    if mode == "stuck" and is_fault:
        while True:
            time.sleep(1.0)  # a data loader waiting on a dead file system
    if mode == "slow":
        time.sleep(pause_s)  # a slow but healthy loader
    if mode == "gil" and is_fault:
        ctypes.PyDLL(None).sleep(int(pause_s))  # a C call that keeps the GIL
    return torch.ones(64)


def sync_gradients(grads: torch.Tensor) -> None:
    dist.all_reduce(grads)


def agree_to_continue(flag: torch.Tensor) -> None:
    dist.broadcast(flag, src=0)


def agree_to_stop(mine: bool) -> bool:
    flag = torch.tensor([1.0 if mine else 0.0])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


FAULT_DONE: list[bool] = []


def train_step(rank: int, step: int, args: argparse.Namespace) -> None:
    culprit = rank == CULPRIT
    if args.fault_file:  # the fault strikes once, at the first step after the file appears
        is_fault = culprit and not FAULT_DONE and os.path.exists(args.fault_file)
        if is_fault:
            FAULT_DONE.append(True)
    else:
        is_fault = culprit and step == args.fault_step
    grads = load_batch(args.mode if culprit else "healthy", is_fault, args.pause_s)
    if args.mode == "skip" and is_fault:
        agree_to_continue(grads)
    else:
        sync_gradients(grads)


def server_cpu_s() -> float:
    """CPU seconds of this process's ``pt_workerserver`` threads (torch's worker server and its pool), from /proc."""
    total = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if not f.read().startswith("pt_workerserver"):
                    continue
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])  # ns on a CPU
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["healthy", "skip", "stuck", "slow", "gil"], default="healthy")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--fault-step", type=int, default=3)
    parser.add_argument("--step-s", type=float, default=0.1)
    parser.add_argument("--pause-s", type=float, default=1.0)
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument("--fault-file", default="", help="the fault strikes once this file exists")
    parser.add_argument("--until-file", default="", help="stop (all ranks together) once this file exists")
    parser.add_argument("--work", type=int, default=0, help="an N x N matmul each step (0: none)")
    parser.add_argument("--warmup", type=int, default=0, help="all_reduces before the timed loop")
    parser.add_argument("--step-times", default="", help="a directory: write each step's end "
                        "(time.time_ns, int64) to rank-<rank>.bin there")
    parser.add_argument("--no-worker-server-ranks", default="", help="comma-separated ranks whose torch has no "
                        "_WorkerServer (an older or trimmed build: removed from this process before init)")
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if str(rank) in args.no_worker_server_ranks.split(","):
        import torch._C._distributed_c10d as c10d

        del c10d._WorkerServer
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=args.timeout_s))
    work = torch.randn(args.work, args.work) if args.work else None
    for _ in range(args.warmup):  # untimed: fills the Flight Recorder's ring, as a job that ran a while has
        dist.all_reduce(torch.ones(64))
    ends = array.array("q", bytes(8 * args.steps)) if args.step_times else None
    started, cpu_started = time.perf_counter(), time.process_time()
    for step in range(1, args.steps + 1):
        if work is not None:
            work @ work  # a step's compute
        train_step(rank, step, args)
        if args.step_s:
            time.sleep(args.step_s)
        if ends is not None:
            ends[step - 1] = time.time_ns()
        if args.until_file and agree_to_stop(os.path.exists(args.until_file)):
            break
    loop_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    if ends is not None:
        with open(os.path.join(args.step_times, f"rank-{rank}.bin"), "wb") as out:
            ends.tofile(out)
    dist.barrier()
    print(f"live_rank {rank} done loop_s={loop_s:.4f} cpu_s={cpu_s:.4f} server_cpu_s={server_cpu_s():.4f}", flush=True)
    sys.stdout.flush()
    os._exit(0)  # skip gloo's teardown (it can abort after a failed peer)


if __name__ == "__main__":
    sys.exit(main())
