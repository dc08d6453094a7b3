"""Real torch gloo runs for the blind cases: 4 ranks on this machine, each rank's Flight Recorder dumped in-process.

    .venv/bin/python tests/blind/gloo_runs.py SCENARIO OUT_DIR

Written without reading frwatch's own workloads. Gloo has no watchdog and no dump-on-timeout, so, as FACTS.md
section 1 says: a rank whose collective raises (the gloo timeout) drops a flag file; a thread in every rank
dumps its recorder when the flag appears; a rank that ends cleanly dumps at exit. Each rank's stdout and
stderr go to `rank<N>.log` next to its dump `nccl_trace_rank_<N>` (pickle, `_dump_fr_trace`).

Scenarios:
- healthy_logs: 12 steps of all_reduce / all_gather / broadcast; rank 1 catches and prints a
  ConnectionResetError traceback from a "metrics push" at step 4 and goes on; rank 0 emits a UserWarning;
  every rank finishes.
- cpu_stuck_rank3: rank 3 sleeps instead of calling the step-5 all_reduce (the others time out in it);
  rank 0 also emits a UserWarning and a handled traceback earlier.
- subgroup_skip: a subgroup [1, 2, 3] created with new_group (no group_desc); at step 4 rank 2 skips the
  subgroup's all_reduce and goes on to the next default-group all_reduce, where it waits with rank 0.
- rooted_rotating: gather and scatter whose root rotates over the ranks (healthy).
- two_roots: gather with root 0 at every step, except rank 2 passes dst=2 at step 5 (the others time out).
- a2a_uneven: all_to_all_single with uneven splits that balance (healthy).
- healthy_async: async collectives whose handles are kept and waited late (entries may stay unretired).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
import traceback
import warnings
from datetime import timedelta
from pathlib import Path

WORLD = 4
TIMEOUT_S = 6


def _dump(out: Path, rank: int, why: str) -> None:
    import torch

    data = torch._C._distributed_c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=True)
    path = out / f"nccl_trace_rank_{rank}"
    if path.exists():
        return
    tmp = out / f".tmp_{rank}"
    tmp.write_bytes(data)
    tmp.rename(path)
    print(f"[rank{rank}]: dumped Flight Recorder ({why}), {len(data)} bytes", flush=True)


def _watch_flag(out: Path, rank: int, done: threading.Event) -> None:
    flag = out / "FLAG"
    while not done.is_set():
        if flag.exists():
            _dump(out, rank, "a peer's collective failed")
            return
        time.sleep(0.05)


def _rank_main(scenario: str, out: Path, rank: int) -> int:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=timedelta(seconds=TIMEOUT_S))
    done = threading.Event()
    watcher = threading.Thread(target=_watch_flag, args=(out, rank, done), daemon=True)
    watcher.start()
    try:
        if scenario == "healthy_logs":
            _healthy_logs(dist, torch, rank)
        elif scenario == "cpu_stuck_rank3":
            _cpu_stuck(dist, torch, rank)
        elif scenario == "subgroup_skip":
            _subgroup_skip(dist, torch, rank)
        elif scenario == "healthy_async":
            _healthy_async(dist, torch, rank)
        elif scenario == "rooted_rotating":
            _rooted_rotating(dist, torch, rank)
        elif scenario == "two_roots":
            _two_roots(dist, torch, rank)
        elif scenario == "a2a_uneven":
            _a2a_uneven(dist, torch, rank)
        else:
            raise SystemExit(f"unknown scenario {scenario}")
        print(f"[rank{rank}]: training finished", flush=True)
        _dump(out, rank, "clean exit")
        done.set()
        dist.destroy_process_group()
        return 0
    except Exception:
        traceback.print_exc()
        (out / "FLAG").touch()
        _dump(out, rank, "own collective failed")
        done.set()
        os._exit(1)


def _healthy_logs(dist, torch, rank: int) -> None:  # type: ignore[no-untyped-def]
    for step in range(12):
        print(f"[rank{rank}]: step {step}", flush=True)
        t = torch.ones(64) * rank
        dist.all_reduce(t)
        out = [torch.zeros(8) for _ in range(WORLD)]
        dist.all_gather(out, torch.full((8,), float(rank)))
        b = torch.zeros(16)
        dist.broadcast(b, src=step % WORLD)
        if step == 4 and rank == 1:
            try:
                raise ConnectionResetError(104, "Connection reset by peer (metrics push to pushgateway:9091)")
            except ConnectionResetError:
                print(f"[rank{rank}]: metrics push failed, will retry next step", flush=True)
                traceback.print_exc()
        if step == 2 and rank == 0:
            warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly",
                          UserWarning, stacklevel=1)


def _cpu_stuck(dist, torch, rank: int) -> None:  # type: ignore[no-untyped-def]
    for step in range(10):
        print(f"[rank{rank}]: step {step}", flush=True)
        if step == 1 and rank == 0:
            warnings.warn("This DataLoader will create 8 worker processes in total.", UserWarning, stacklevel=1)
            try:
                {}["missing_metric"]
            except KeyError:
                traceback.print_exc()
                print(f"[rank{rank}]: metric missing, using default", flush=True)
        if step == 5 and rank == 3:
            print(f"[rank{rank}]: loading next shard (slow filesystem)", flush=True)
            time.sleep(TIMEOUT_S * 4)
        t = torch.ones(32)
        dist.all_reduce(t)
        g = torch.zeros(4)
        dist.broadcast(g, src=0)


def _subgroup_skip(dist, torch, rank: int) -> None:  # type: ignore[no-untyped-def]
    sub = dist.new_group([1, 2, 3])
    for step in range(8):
        print(f"[rank{rank}]: step {step}", flush=True)
        t = torch.ones(32)
        dist.all_reduce(t)
        if rank in (1, 2, 3):
            if step == 4 and rank == 2:
                print(f"[rank{rank}]: no gradients to sync this step", flush=True)
            else:
                s = torch.ones(16)
                dist.all_reduce(s, group=sub)


def _rooted_rotating(dist, torch, rank: int) -> None:  # type: ignore[no-untyped-def]
    for step in range(8):
        root = step % WORLD
        t = torch.ones(32)
        dist.all_reduce(t)
        mine = torch.full((16,), float(rank))
        dist.gather(mine, [torch.zeros(16) for _ in range(WORLD)] if rank == root else None, dst=root)
        got = torch.zeros(16)
        dist.scatter(got, [torch.full((16,), float(i)) for i in range(WORLD)] if rank == root else None, src=root)


def _two_roots(dist, torch, rank: int) -> None:  # type: ignore[no-untyped-def]
    for step in range(8):
        root = 2 if (step == 5 and rank == 2) else 0
        t = torch.ones(32)
        dist.all_reduce(t)
        mine = torch.full((16,), float(rank))
        dist.gather(mine, [torch.zeros(16) for _ in range(WORLD)] if rank == root else None, dst=root)


SPLITS = [[[4, 1, 2, 5], [3, 3, 0, 6], [1, 7, 2, 2], [2, 2, 8, 0]],
          [[0, 6, 3, 3], [5, 1, 1, 4], [2, 2, 6, 1], [4, 0, 3, 5]],
          [[2, 2, 2, 2], [1, 4, 4, 3], [6, 0, 1, 5], [3, 5, 0, 2]]]


def _a2a_uneven(dist, torch, rank: int) -> None:  # type: ignore[no-untyped-def]
    for sp in SPLITS:
        send = sp[rank]
        recv = [sp[j][rank] for j in range(WORLD)]
        out = torch.zeros(sum(recv), 8)
        dist.all_to_all_single(out, torch.ones(sum(send), 8), output_split_sizes=recv, input_split_sizes=send)
        t = torch.ones(32)
        dist.all_reduce(t)


def _healthy_async(dist, torch, rank: int) -> None:  # type: ignore[no-untyped-def]
    pending = []
    for step in range(10):
        t = torch.ones(128)
        pending.append((t, dist.all_reduce(t, async_op=True)))
        if len(pending) > 2:
            _, w = pending.pop(0)
            w.wait()
        g = torch.zeros(8)
        dist.broadcast(g, src=0)
    for _, w in pending:
        w.wait()
    dist.barrier()


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--rank":
        scenario, out, rank = os.environ["BLIND_SCENARIO"], Path(os.environ["BLIND_OUT"]), int(sys.argv[2])
        return _rank_main(scenario, out, rank)
    scenario, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, BLIND_SCENARIO=scenario, BLIND_OUT=str(out), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=os.environ.get("BLIND_PORT", "29611"), TORCH_FR_BUFFER_SIZE="2000",
               PYTHONWARNINGS="default")
    procs = []
    for rank in range(WORLD):
        log = open(out / f"rank{rank}.log", "w")  # noqa: SIM115 (closed below)
        procs.append((subprocess.Popen([sys.executable, __file__, "--rank", str(rank), "x"], env=env,
                                       stdout=log, stderr=subprocess.STDOUT), log))
    codes = []
    for proc, log in procs:
        codes.append(proc.wait(timeout=120))
        log.close()
    (out / "FLAG").unlink(missing_ok=True)
    print(scenario, "exit codes", codes)
    for path in sorted(out.glob("nccl_trace_rank_*")):
        with open(path, "rb") as f:
            d = pickle.load(f)  # our own fresh run, never an uploaded file
        print(path.name, len(d["entries"]), "entries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
