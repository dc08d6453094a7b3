"""What reading a log costs the analyzer: decoding its tail (``logtext.decode_tail``) and scanning it
(``logscan.scan``), per shape of log, in milliseconds; and a whole attempt of N ranks with a log each.

    .venv/bin/python benchmarks/bench_evidence.py [--ranks 64]

The shapes: ordinary training lines, lines of 1 MB, ANSI colour, a flood of NCCL WARN lines (each a signal),
traceback-shaped noise and a million short lines. A log past ``MAX_LOG_BYTES`` is read by its tail only.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from frwatch_analyzers.evidence.causes import with_causes
from frwatch_analyzers.evidence.logscan import scan
from frwatch_analyzers.evidence.logtext import decode_tail
from frwatch_analyzers.evidence.read import gather
from frwatch_analyzers.verdict import Category, Status, Verdict

SHAPES: dict[str, bytes] = {
    "training lines, 9 MB": b"2026-11-25T14:39:35.100000Z [rank3]: step 7 loss 1.25 NCCL INFO x\n" * 140_000,
    "1 MB lines, 8 MB": (b"x" * (1 << 20) + b"\n") * 8,
    "ANSI colour, 4 MB": b"\x1b[31mred\x1b[0m " * 300_000,
    "NCCL WARN flood, 2.6 MB": b"h:1:2 [0] NCCL WARN NET/IB : Got completion from peer with status=12\n" * 30_000,
    "traceback-shaped noise, 3 MB": (b"Traceback (most recent call last):\n" + b'  File "a.py", line 1, in f\n' * 50)
    * 2000,
    "short lines, 2 MB": b"a\n" * 1_000_000,
}


def _one(data: bytes) -> tuple[float, float, int, int]:
    started = time.perf_counter()
    text = decode_tail(data)
    decoded = time.perf_counter()
    signals = scan(text.lines, year=2026)
    return (decoded - started) * 1000, (time.perf_counter() - decoded) * 1000, len(text.lines), len(signals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64, help="ranks of the whole-attempt run (one 9 MB log each)")
    args = parser.parse_args()
    print(f"{'shape':<32} {'decode ms':>10} {'scan ms':>8} {'lines':>8} {'signals':>8}")
    for name, data in SHAPES.items():
        dec, sc, lines, signals = _one(data)
        print(f"{name:<32} {dec:>10.0f} {sc:>8.0f} {lines:>8} {signals:>8}")
    with tempfile.TemporaryDirectory() as tmp:
        log = SHAPES["training lines, 9 MB"] + b"ValueError: the end\n"
        for rank in range(args.ranks):
            (Path(tmp) / f"rank{rank}.log").write_bytes(log)
        started = time.perf_counter()
        gathered = gather(tmp, None)
        verdict = Verdict(status=Status.inconclusive, category=Category.inconclusive, headline="-")
        with_causes(verdict, gathered, None, year=2026)
        took = time.perf_counter() - started
        print(f"{args.ranks} ranks x 9 MB logs (tails read): {took:.1f} s, {len(gathered.problems)} refused")


if __name__ == "__main__":
    main()
