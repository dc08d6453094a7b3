"""Varied Flight Recorder dumps for the benchmarks: several groups, a random op mix, many call sites.

The uniform set of ``bench_analyze.py`` repeats one 3-op step on one group: every entry of a call site
carries the sizes it carried last time, which flatters a summarizer that caches by call site. Real jobs
are not like that. This set, for R ranks (a multiple of 8) and E entries a rank:

- three kinds of group: the default group of R ranks, a TP group of 8 ranks (``r // 8``) and a DP group of
  R/8 ranks (``r % 8``), each rank recording its own instance (names as torch numbers them: ``"0"``, then
  ``1 + r // 8``, then ``1 + R/8 + r % 8``), with a ``pg_config`` of the rank's three groups;
- a random program (one seed, the same on every rank): each step picks a group kind, one of 5 collective
  types (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``, ``all_to_all``), one
  of 3 sizes, one of 2 dtypes and one of 8 call stacks of 9 Python frames (4 of them torch's own);
- the shape of a real torch pickle: frame dicts and strings shared by every entry of a dump (memoized by
  the pickler), every list its entry's own; NCCL flavour (states, times, ``duration_ms``), a ring buffer
  that wrapped (record ids start past 0);
- one fault: rank ``R // 2 + 3`` skips the default group's collective at step ``K`` and goes on to step
  ``K + 1``, another collective of the default group: at that sequence number it records another op than
  every other rank (a desync), and every rank waits there (``started``).
"""

from __future__ import annotations

import pickle
import random
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from .fabricated import cached_set

PREFIX = "nccl_trace_rank_"
SCHEMA = "fr-2.10-nccl-varied-v3"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
STACKS = 8
SEED = 20_261_125

_LIB = [
    ("all_reduce", "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", 3245),
    ("wrapper", "/usr/lib/python3/dist-packages/torch/distributed/c10d_logger.py", 83),
    ("_fn", "/usr/lib/python3/dist-packages/torch/_dynamo/eval_frame.py", 929),
    ("forward", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1773),
]


def culprit(world_size: int) -> int:
    return world_size // 2 + 3


def _stacks() -> list[list[tuple[str, str, int]]]:
    """8 call stacks: torch's frames, then 5 user frames that differ by stack."""
    out = []
    for s in range(STACKS):
        user = [
            (f"step_{s}", f"/app/train/layers_{s % 3}.py", 100 + 17 * s),
            ("forward", f"/app/train/model_{s % 2}.py", 40 + s),
            ("train_step", "/app/train/loop.py", 212),
            ("train", "/app/train/loop.py", 88),
            ("<module>", "/app/train/main.py", 12),
        ]
        out.append([*_LIB, *user])
    return out


def program(world_size: int, entries: int) -> tuple[list[tuple[int, int, int, int, int]], int]:
    """The steps every rank runs, as (group kind 0/1/2, op index, size index, dtype index, stack), and the
    step the culprit skips (a default-group step close to the end)."""
    rng = random.Random(SEED)  # noqa: S311  (a fixed program, not a secret)
    steps = [
        (
            rng.choices((0, 1, 2), (3, 5, 2))[0],
            rng.randrange(len(OPS)),
            rng.randrange(3),
            rng.randrange(2),
            rng.randrange(STACKS),
        )
        for _ in range(entries + 300)
    ]
    skip = next(
        i
        for i in range(len(steps) - 12, 0, -1)
        if steps[i][0] == steps[i + 1][0] == 0 and steps[i][1:3] != steps[i + 1][1:3]
    )
    return steps[: skip + 2], skip


def _groups(rank: int, world_size: int) -> list[tuple[str, str, list[int]]]:
    tp, dp = rank // 8, rank % 8
    return [
        ("0", "default_pg", list(range(world_size))),
        (str(1 + tp), "tp", list(range(8 * tp, 8 * tp + 8))),
        (str(1 + world_size // 8 + dp), "dp", list(range(dp, world_size, 8))),
    ]


def rank_dump(rank: int, world_size: int, entries: int) -> dict[str, Any]:
    """The dump of one rank (plain data, objects shared the way torch's pickler shares them)."""
    steps, skip = program(world_size, entries)
    bad = culprit(world_size)
    groups = _groups(rank, world_size)
    frames = [[{"name": n, "filename": f, "line": ln} for n, f, ln in stack] for stack in _stacks()]
    ops = [f"nccl:{op}" for op in OPS]
    dtypes = ["Float", "BFloat16"]
    thread_name, thread_id = "pt_autograd_0", str(139_975_964_072_832 + 4096 * rank)
    seq = [0, 0, 0]
    out: list[dict[str, Any]] = []
    base = 1_764_000_000_000_000_000 + 7_919 * rank
    last = len(steps) - 1
    record_id = 0
    for i, (kind, opi, sizei, dti, stack) in enumerate(steps):
        if rank == bad and i == skip:
            continue  # the skipped collective: never enqueued
        if rank != bad and i == last:
            break  # the others wait in the skipped step and never get here
        name, desc, members = groups[kind]
        g = len(members)
        n = (1 << (16 + 2 * sizei)) * (1 + kind)
        op = OPS[opi]
        if op == "all_gather":
            isz, osz = [[n]], [[n * g]]
        elif op == "reduce_scatter":
            isz, osz = [[n * g]], [[n]]
        elif op == "all_to_all":
            isz, osz = [[g * 64, n // 64]], [[g * 64, n // 64]]
        else:
            isz, osz = [[n]], [[n]]
        seq[kind] += 1
        created = base + i * 1_000_000
        done = (rank == bad and i < last) or (rank != bad and i < skip)
        out.append(
            {
                "frames": list(frames[stack]),
                "record_id": record_id,
                "pg_id": int(name),
                "process_group": (name, desc),
                "thread_name": thread_name,
                "thread_id": thread_id,
                "collective_seq_id": seq[kind],
                "p2p_seq_id": 0,
                "op_id": seq[kind],
                "profiling_name": ops[opi],
                "time_created_ns": created,
                "input_sizes": isz,
                "input_dtypes": [dtypes[dti]],
                "output_sizes": osz,
                "output_dtypes": [dtypes[dti]],
                "state": "completed" if done else "started",
                "time_discovered_started_ns": created + 2_000,
                "time_discovered_completed_ns": created + 600_000 if done else None,
                "retired": done,
                "timeout_ms": 600_000,
                "is_p2p": False,
                "duration_ms": 0.45 if done else None,
            }
        )
        record_id += 1
    kept = out[-entries:]
    status = {}
    for name, _desc, _members in groups:
        mine = [e for e in out if e["process_group"][0] == name]
        status[name] = {
            "last_enqueued_collective": mine[-1]["collective_seq_id"] if mine else -1,
            "last_started_collective": mine[-1]["collective_seq_id"] if mine else -1,
            "last_completed_collective": max(
                (e["collective_seq_id"] for e in mine if e["retired"]), default=-1
            ),
        }
    return {
        "version": "2.10",
        "pg_config": {
            name: {"name": name, "desc": desc, "ranks": str(members)} for name, desc, members in groups
        },
        "pg_status": status,
        "comm_lib_version": "2.27.5",
        "entries": kept,
    }


def _write_slice(args: tuple[str, int, int, list[int]]) -> int:
    directory, world_size, entries, ranks = args
    written = 0
    for rank in ranks:
        data = pickle.dumps(rank_dump(rank, world_size, entries), protocol=2)
        (Path(directory) / f"{PREFIX}{rank}").write_bytes(data)
        written += len(data)
    return written


def fabricate(directory: Path, world_size: int, entries: int, workers: int = 2) -> dict[str, Any]:
    """Write ``world_size`` varied dumps into ``directory`` (reused when a complete set is there)."""
    if world_size % 8 or world_size < 16:
        raise ValueError("the varied set needs a world size that is a multiple of 8, 16 or more")
    wanted = {"ranks": world_size, "entries": entries, "schema": SCHEMA}

    def make() -> int:
        slices = [list(range(w, world_size, workers)) for w in range(workers)]
        with ProcessPoolExecutor(workers) as pool:
            return sum(pool.map(_write_slice, [(str(directory), world_size, entries, s) for s in slices]))

    return cached_set(directory, wanted, make)
