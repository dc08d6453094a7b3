"""A job whose ranks dump only when asked through NCCL's on-demand pipe, imitated for gloo: one rank crashes.

Run one process per rank, as a PyTorchJob pod's container runs it::

    python -m frwatch_dev.workloads.on_demand [--crash-rank 0] [--steps 3] [--max-runtime-s 120]

Every rank runs ``--steps`` all_reduces (gloo, CPU) with the Flight Recorder on. Then the crash rank
writes its own dump and exits 1, as a rank whose process fails after dumping. Every other rank does what
an NCCL rank with ``TORCH_NCCL_DEBUG_INFO_PIPE_FILE`` does: it makes the FIFO ``<prefix><rank>.pipe`` and
dumps (``<TORCH_FR_DUMP_TEMP_FILE><rank>``) when something is written to it, never by itself. So its
dump exists only if someone asked: frwatch's operator, through the rank's agent (``POST /dump``). It exits
0 after dumping on request, 2 when nobody asked within ``--max-runtime-s``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from frwatch_dev.workloads.dump_on_failure import (
    DumpFormat,
    dump_path,
    dump_prefix_from,
    trace_bytes,
    write_atomically,
)
from frwatch_dev.workloads.faulty_training import RankEnv
from frwatch_dev.workloads.say import say
from frwatch_operator.constants import ENV_NCCL_PIPE_FILE

EXIT_ASKED, EXIT_CRASHED, EXIT_NOT_ASKED = 0, 1, 2
PIPE_SUFFIX = ".pipe"


def wait_for_request(pipe: Path, max_wait_s: float) -> bool:
    """Make the FIFO and wait until something is written to it (True) or ``max_wait_s`` passes (False)."""
    pipe.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(pipe, 0o666)
    os.chmod(pipe, 0o666)  # noqa: S103 - the agent (another uid) writes to it, as to NCCL's pipe
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    deadline = time.monotonic() + max_wait_s
    try:
        while time.monotonic() < deadline:
            try:
                if os.read(fd, 64):
                    return True
            except BlockingIOError:
                pass
            time.sleep(0.05)
        return False
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m frwatch_dev.workloads.on_demand", description=__doc__)
    parser.add_argument("--crash-rank", type=int, default=0, help="the rank that dumps and exits 1")
    parser.add_argument("--steps", type=int, default=3, help="all_reduces before the crash")
    parser.add_argument("--max-runtime-s", type=float, default=120.0, help="how long a rank waits to be asked")
    args = parser.parse_args(argv)
    env = RankEnv.from_environ(os.environ)
    dist.init_process_group(
        "gloo", init_method=f"tcp://{env.master_addr}:{env.master_port}", rank=env.rank,
        world_size=env.world_size, timeout=timedelta(seconds=60),
    )  # fmt: skip
    tensor = torch.ones(8)
    for _ in range(args.steps):
        dist.all_reduce(tensor)
    dist.barrier()
    prefix = dump_prefix_from(os.environ)
    if env.rank == args.crash_rank:
        write_atomically(dump_path(prefix, env.rank), trace_bytes(DumpFormat.PICKLE))
        say(f"on_demand: rank {env.rank} dumped and crashes (exit {EXIT_CRASHED})")
        return EXIT_CRASHED
    pipe = Path(f"{os.environ.get(ENV_NCCL_PIPE_FILE) or prefix}{env.rank}{PIPE_SUFFIX}")
    if not wait_for_request(pipe, args.max_runtime_s):
        say(f"on_demand: rank {env.rank} was never asked to dump within {args.max_runtime_s:.0f}s")
        return EXIT_NOT_ASKED
    write_atomically(dump_path(prefix, env.rank), trace_bytes(DumpFormat.PICKLE))
    say(f"on_demand: rank {env.rank} dumped on request through {pipe}")
    return EXIT_ASKED


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # no process-group teardown: a peer is gone, and gloo's may block on it
