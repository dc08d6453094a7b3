"""A healthy gloo job whose dumps hold a collective overtaken by the next one: not retired, yet done with.

Run one process per rank::

    python -m frwatch_dev.workloads.overtaken_gloo RANK WORLD_SIZE PORT OUT_DIR

Every rank runs three small all_reduces, then enqueues a large all_reduce and a tiny one, both
``async_op=True``, waits for the tiny one and dumps its Flight Recorder (``OUT_DIR/nccl_trace_rank_<rank>``),
then waits for the large one and leaves cleanly. gloo runs a group's work on several threads (two by
default), so the tiny call completes while the large one still moves data: the dump shows the large call
``retired=False`` between calls that retired, and ``pg_status`` says the tiny (last) call completed (seen
with torch 2.13.0+cpu on every rank of every run tried). The job is healthy; an analyzer that reads the
unretired entry as the hang point calls it stuck.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from frwatch_dev.workloads.dump_on_failure import DumpFormat, trace_bytes

#: Elements of the large all_reduce: large enough to still move data when the tiny one has completed.
LARGE = 8_000_000


def main(argv: list[str]) -> int:
    rank, world_size, port, out = int(argv[0]), int(argv[1]), int(argv[2]), Path(argv[3])
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
    )
    trace_bytes(DumpFormat.PICKLE)  # the first dump warms the symbolizer (3-5 s)
    for _ in range(3):
        dist.all_reduce(torch.ones(16))
    large = dist.all_reduce(torch.ones(LARGE), async_op=True)
    tiny = dist.all_reduce(torch.ones(4), async_op=True)
    tiny.wait()
    (out / f"nccl_trace_rank_{rank}").write_bytes(trace_bytes(DumpFormat.PICKLE))
    large.wait()
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
