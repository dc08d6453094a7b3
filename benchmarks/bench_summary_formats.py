"""What decoding one rank's summary costs, by format, side by side in one process: the JSON summary (version
2) and the binary one (version 3, MessagePack by msgspec) through the analyzer's ``Reader`` (every bound
checked), and as references without the checks: ``json.loads`` alone, msgspec's typed decode alone, and
``pickle.loads`` of the decoded ``RankTrace`` (what an unchecked, code-running format would cost: never used).

Each figure is the CPU (``process_time``) a summary, the lowest of ``--repeat`` rounds of ``--n`` decodes,
with fresh caches (``cold``: every column decoded) and with a reader that saw the rank's twin (``warm``: shared
columns and tables decoded once, as at scale)::

    .venv/bin/python benchmarks/bench_summary_formats.py [--entries 2000] [--n 200] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analyzers"))

import msgspec  # noqa: E402

from frwatch_analyzers.summaries import binary as sb  # noqa: E402
from frwatch_analyzers.summaries.rank_summary import Reader  # noqa: E402
from frwatch_analyzers.summaries.writer import summary_of  # noqa: E402
from frwatch_dev.dumps import varied  # noqa: E402


def _best(fn: Callable[[], Any], n: int, repeat: int) -> float:
    """The lowest CPU milliseconds a call over ``repeat`` rounds of ``n`` calls."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - t0) / n)
    return 1000 * best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--entries", type=int, default=2000)
    p.add_argument("--world", type=int, default=1024)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    rank = 3
    dump = pickle.dumps(varied.rank_dump(rank, args.world, args.entries), protocol=2)
    as_json = summary_of(dump, rank).data
    as_binary = summary_of(dump, rank, binary=True).data
    trace, _ = Reader().decode(as_binary)
    pickled = pickle.dumps(trace, protocol=5)
    warm_json, warm_binary = Reader(), Reader()
    warm_json.accept(warm_json.decode(as_json)[0])
    warm_binary.accept(warm_binary.decode(as_binary)[0])
    body = memoryview(as_binary)[len(sb.MAGIC) :]
    typed = msgspec.msgpack.Decoder(sb.SummaryBody)
    n, r = args.n, args.repeat
    load = os.getloadavg()[0]
    rows = {
        "json v2, Reader, cold": (len(as_json), _best(lambda: Reader().decode(as_json), n, r)),
        "binary v3, Reader, cold": (len(as_binary), _best(lambda: Reader().decode(as_binary), n, r)),
        "json v2, Reader, warm": (len(as_json), _best(lambda: warm_json.decode(as_json), n, r)),
        "binary v3, Reader, warm": (len(as_binary), _best(lambda: warm_binary.decode(as_binary), n, r)),
        "json.loads alone (no checks)": (len(as_json), _best(lambda: json.loads(as_json), n, r)),
        "msgspec typed decode alone": (len(as_binary), _best(lambda: typed.decode(body), n, r)),
        "pickle.loads of the RankTrace (unsafe)": (len(pickled), _best(lambda: pickle.loads(pickled), n, r)),
    }
    print(f"one rank of a {args.world}-rank varied world, {args.entries} entries; load {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f}; nproc {os.cpu_count()}")
    for name, (size, ms) in rows.items():
        print(f"{name:40} {size / 1000:7.1f} KB  {ms:7.3f} ms")
    if args.json:
        args.json.write_text(json.dumps({k: {"bytes": s, "cpu_ms": m} for k, (s, m) in rows.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
