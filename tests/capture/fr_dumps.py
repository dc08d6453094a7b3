"""Make real Flight Recorder dumps with real torch gloo ranks: ``python fr_dumps.py OUTDIR [WORLD]``.

Each rank runs a few collectives, then writes ``_dump_fr_trace()`` (pickle) to ``OUTDIR/rank<r>.pickle``
and ``_dump_fr_trace_json()`` to ``OUTDIR/rank<r>.json``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from frwatch_dev.ports import free_port


def _rank(rank: int, world: int, port: int, out: str) -> None:
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = torch.ones(16)
    for _ in range(3):
        dist.all_reduce(t)
    dist.broadcast(t, src=0)
    dist.barrier()
    c10d = torch._C._distributed_c10d
    Path(out, f"rank{rank}.pickle").write_bytes(c10d._dump_fr_trace())
    Path(out, f"rank{rank}.json").write_bytes(c10d._dump_fr_trace_json())
    dist.destroy_process_group()


def main() -> None:
    out, world = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2
    port = free_port()
    import torch.multiprocessing as mp

    mp.start_processes(_rank, args=(world, port, out), nprocs=world, start_method="spawn", join=True)


if __name__ == "__main__":
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    main()
