"""The demo's hardware-class fault: a GPU hang on one rank, which gloo on CPU cannot produce.

    python -m frwatch_dev.demo.gpu_hang [--steps 6] [--culprit 1]

Run one process per rank with the Kubeflow env (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``).
The ranks really rendezvous and run ``--steps`` gloo all_reduces (real torch, so the job is a real
distributed job), then each rank **fabricates** the Flight Recorder dump NCCL would leave after a GPU
hang at the next step (``frwatch_dev.dumps``: NCCL states ``scheduled``/``started``/``completed``;
the culprit's all_reduce scheduled but never started, its peers' started) and writes it where
``TORCH_FR_DUMP_TEMP_FILE`` says (through a temporary file and a rename, as the real workload does), says
so on stdout, and aborts at once as a rank torn down by NCCL's watchdog (SIGABRT): the frwatch agent
still uploads a dump written just before its pod goes away. Nothing here hides that the
dump is fabricated: it is a stand-in for the hardware this machine does not have.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from frwatch_dev.dumps import pickle_bytes, world
from frwatch_dev.workloads.say import say
from frwatch_operator import constants as c

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"


def fabricated_dump(rank: int, world_size: int, steps: int, culprit: int) -> bytes:
    """The NCCL-style dump of ``rank``: ``steps`` good all_reduces, then the culprit's GPU hang."""
    hung = world(world_size).all_reduce(steps=steps).rank(culprit).not_started_at(steps + 1)
    return pickle_bytes(hung.dumps()[rank])


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.rename(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m frwatch_dev.demo.gpu_hang", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--steps", type=int, default=6, help="good all_reduces before the hang (default 6)")
    parser.add_argument("--culprit", type=int, default=1, help="the rank whose GPU hangs (default 1)")
    args = parser.parse_args(argv)
    env = os.environ
    rank, world_size = int(env[c.ENV_RANK]), int(env[c.ENV_WORLD_SIZE])

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timedelta(seconds=60))
    grad = torch.ones(64)
    for _ in range(args.steps):
        dist.all_reduce(grad)
    dist.barrier()
    dist.destroy_process_group()

    prefix = env.get(c.ENV_FR_DUMP_TEMP_FILE) or env.get(c.ENV_FR_DUMP_TEMP_FILE_OLD) or DEFAULT_PREFIX
    path = Path(f"{prefix}{rank}")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, fabricated_dump(rank, world_size, args.steps, args.culprit))
    if rank == args.culprit:
        note = "its all_reduce was scheduled and never started"
    else:
        note = f"its all_reduce started and waits for rank {args.culprit}"
    say(
        f"gpu_hang rank={rank}: {args.steps} real gloo all_reduces, then a simulated GPU hang on rank "
        f"{args.culprit}: NCCL-style dump fabricated by the workload ({note}) at {path}"
    )
    os.kill(os.getpid(), signal.SIGABRT)  # as NCCL's watchdog tears a hung rank down
    return 1


if __name__ == "__main__":
    sys.exit(main())
