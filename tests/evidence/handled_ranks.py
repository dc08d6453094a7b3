"""A small real gloo job for tests/evidence/test_partial_evidence_e2e.py (run as a script, one process a rank).

Every rank all_reduces once a step and prints ``step N``. At step 2 rank 1 fails a metrics push and rank 3 a
row read; both catch the exception, print its traceback and go on (handled: no cause). At step 3 every rank
triggers a real torch UserWarning. At step 4 rank 2 stops calling collectives (it sleeps: CPU-stuck) and
the others block in the all_reduce. Four seconds into step 4 a thread in each rank writes its Flight
Recorder dump (JSON, torch's in-process ``_dump_fr_trace_json``: gloo has no dump-on-timeout; the pickle
dump's stack symbolization takes 10 s on a loaded machine) to
``<out>/nccl_trace_rank_<rank>`` and ends the process.

    python handled_ranks.py OUT   (with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set)
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback

import torch
import torch.distributed as dist


def push_metrics(step: int) -> None:
    raise ConnectionResetError(104, "Connection reset by peer")


def read_row(step: int) -> None:
    raise ValueError(f"bad row in shard 3 at step {step}, skipped")


def dump_later(out: str, rank: int) -> None:
    time.sleep(4.0)
    data = torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False)
    with open(os.path.join(out, f"nccl_trace_rank_{rank}"), "wb") as fh:
        fh.write(data)
    print(f"rank {rank} dumped", flush=True)
    os._exit(0)


def main() -> None:
    out = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    x = torch.ones(1024)
    for step in range(1, 6):
        if step == 4:
            threading.Thread(target=dump_later, args=(out, rank), daemon=True).start()
            if rank == 2:
                time.sleep(600)
        dist.all_reduce(x)
        print(f"step {step} loss {1.0 / step:.3f}", flush=True)
        if step == 2 and rank in (1, 3):
            try:
                push_metrics(step) if rank == 1 else read_row(step)
            except (ConnectionResetError, ValueError):
                print("retrying later", flush=True)
                traceback.print_exc()
                sys.stderr.flush()
        if step == 3:
            torch.tensor(torch.tensor(1.0))  # torch 2.13: "UserWarning: To copy construct from a tensor ..."
            sys.stderr.flush()


if __name__ == "__main__":
    main()
