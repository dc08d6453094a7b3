"""A torchcomms job's GPU hang, for the end-to-end chain: real ranks, a **fabricated** torchcomms dump.

    python -m frwatch_dev.demo.torchcomms_hang [--steps 6] [--culprit 1] [--backend ncclx]

torchcomms cannot be installed here, and gloo on CPU cannot hang a GPU. The ranks really rendezvous and run
``--steps`` gloo all_reduces; then each rank fabricates the dump torchcomms' recorder would write after a
GPU hang on the culprit at the next step (``frwatch_dev.dumps.recorders``, built from torchcomms' source:
``<backend>:all_reduce``, the group's desc the backend, one process-wide counter, CUDA states) and writes it
where torchcomms writes it, ``<TORCHCOMM_FR_DUMP_TEMP_FILE><rank>`` (the variable the frwatch webhook sets),
then aborts as a rank torn down after a timeout. Nothing here hides that the dump is fabricated.
"""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from frwatch_dev.demo.gpu_hang import write_atomically
from frwatch_dev.dumps import pickle_bytes, world
from frwatch_dev.dumps.recorders import as_recorder
from frwatch_dev.workloads.say import say
from frwatch_operator import constants as c
from frwatch_operator.capture.recorder_env import ENV_TC_DUMP_TEMP_FILE

#: torchcomms' own default (DebugInfoWriter::getWriter): outside any shared volume
DEFAULT_PREFIX = os.path.expanduser("~/.cache/torch/comm_lib_trace_rank_")


def fabricated_dump(rank: int, world_size: int, steps: int, culprit: int, backend: str) -> bytes:
    hung = world(world_size).all_reduce(steps=steps).rank(culprit).not_started_at(steps + 1)
    return pickle_bytes(as_recorder(hung.dumps(), backend, "torchcomms")[rank])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frwatch_dev.demo.torchcomms_hang")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--culprit", type=int, default=1)
    parser.add_argument("--backend", default="ncclx")
    args = parser.parse_args(argv)
    rank, world_size = int(os.environ[c.ENV_RANK]), int(os.environ[c.ENV_WORLD_SIZE])

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timedelta(seconds=60))
    grad = torch.ones(64)
    for _ in range(args.steps):
        dist.all_reduce(grad)
    dist.barrier()
    dist.destroy_process_group()

    path = Path(f"{os.environ.get(ENV_TC_DUMP_TEMP_FILE) or DEFAULT_PREFIX}{rank}")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, fabricated_dump(rank, world_size, args.steps, args.culprit, args.backend))
    say(
        f"torchcomms_hang rank={rank}: {args.steps} real gloo all_reduces, then a simulated GPU hang on rank "
        f"{args.culprit}: torchcomms-style dump fabricated by the workload at {path}"
    )
    os.kill(os.getpid(), signal.SIGABRT)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
