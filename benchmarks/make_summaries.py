"""Make N ranks' summaries in the binary format (version 3, ``frwatch_analyzers.summaries.binary``) directly, in
parallel: the input of the 131,072-rank reduce, in minutes rather than hours.

A few real ranks of the varied set (``frwatch_dev.dumps.varied``: 5 collective types, 3 sizes, 2 dtypes,
8 call sites, a default group, TP groups of 8 and DP groups of N/8, one rank that skips a default-group
collective) are summarised in the real world size: a waiting rank and the culprit. Every other rank's
summary is derived from the template of its kind as MessagePack structs: its rank, its TP and DP groups
(names and members, as ranges) and its times (each time column's first value and the tail's times shifted)
replaced, the shifted columns compressed again. Each rank's summary is its own bytes, as agents write them::

    .venv/bin/python benchmarks/make_summaries.py DIR --ranks 131072 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
import zlib
from array import array
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analyzers"))

import msgspec  # noqa: E402

from frwatch_analyzers.summaries import binary as sb  # noqa: E402
from frwatch_dev.dumps import varied  # noqa: E402

ENTRIES = 2000
SUFFIX = ".bin"
_DECODER = msgspec.msgpack.Decoder(sb.SummaryBody)
_ENCODER = msgspec.msgpack.Encoder()


def templates(world: int, entries: int = ENTRIES) -> dict[str, tuple[int, bytes]]:
    """The binary summaries of a waiting rank (rank 0) and of the culprit, in a world of ``world`` ranks."""
    from frwatch_analyzers.summaries.writer import summary_of

    out = {}
    for kind, rank in (("waiting", 0), ("culprit", varied.culprit(world))):
        data = pickle.dumps(varied.rank_dump(rank, world, entries), protocol=2)
        out[kind] = (rank, summary_of(data, rank, binary=True).data)
    return out


def _shifted(column: bytes, shift: int, tail: bool = False) -> bytes:
    """A packed column with its first value (a delta column) or every time of its rows (a tail) shifted."""
    if not shift:
        return column
    col = array("q")
    col.frombytes(zlib.decompress(column[1:]))
    if tail:
        for i in range(len(col)):
            if i % 8 >= 5 and col[i] > 0:
                col[i] += shift
    elif col:
        col[0] += shift
    return column[:1] + zlib.compress(col.tobytes(), 1)  # level 1: 0.6 ms a rank, level 6 12 ms


def derive(template: sb.SummaryBody, base_rank: int, rank: int, world: int) -> bytes:
    shift = 7_919 * (rank - base_rank)
    tp, dp = rank // 8, rank % 8
    names = {
        "tp": (str(1 + tp), (8 * tp, 8 * tp + 7, 1)),
        "dp": (str(1 + world // 8 + dp), (dp, world - 8 + dp, 8)),
    }
    pgs = []
    for pg in template.pgs:
        name, members = names.get(pg.desc, (pg.name, (0, world - 1, 1)))
        created = _shifted(pg.created, shift) if pg.created[:1] == b"\x01" else pg.created
        pgs.append(msgspec.structs.replace(
            pg, name=name, members_range=members, members=None, created=created,
            tail=_shifted(pg.tail, shift, tail=True),
        ))  # fmt: skip
    body = msgspec.structs.replace(template, rank=rank, dumped_ns=template.dumped_ns + shift, pgs=pgs)
    return sb.MAGIC + _ENCODER.encode(body)


def _write(job: tuple[Path, int, int, dict[str, tuple[int, bytes]], int]) -> int:
    directory, lo, hi, temps, world = job
    parsed = {k: (r, _DECODER.decode(memoryview(d)[len(sb.MAGIC) :])) for k, (r, d) in temps.items()}
    culprit = varied.culprit(world)
    total = 0
    for rank in range(lo, hi):
        base, body = parsed["culprit" if rank == culprit else "waiting"]
        data = derive(body, base, rank, world)
        (directory / f"{rank}{SUFFIX}").write_bytes(data)
        total += len(data)
    return total


def make(directory: Path, world: int, workers: int = 2, entries: int = ENTRIES) -> dict[str, float]:
    """Write ``world`` summaries to ``directory``; the bytes written and the seconds it took."""
    t0 = time.perf_counter()
    directory.mkdir(parents=True, exist_ok=True)
    temps = templates(world, entries)
    step = max(1, -(-world // (8 * max(workers, 1))))
    jobs = [(directory, lo, min(lo + step, world), temps, world) for lo in range(0, world, step)]
    with ProcessPoolExecutor(max(workers, 1)) as pool:
        total = sum(pool.map(_write, jobs))
    return {"ranks": world, "bytes": total, "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("directory", type=Path)
    p.add_argument("--ranks", type=int, default=131072, help="world size (a multiple of 8)")
    p.add_argument("--entries", type=int, default=ENTRIES)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = p.parse_args(argv)
    print(json.dumps(make(args.directory, args.ranks, args.workers, args.entries)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
