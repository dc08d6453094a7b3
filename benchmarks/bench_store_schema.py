"""What reading the store's layout costs the operator each collection pass: sorting one listing of an attempt's
root (``collection.read_listing`` over ``layout.parse_key``) and parsing pod records
(``pod_record.parse_pod_record``), for a world of ``--ranks`` ranks (``--per-pod`` ranks a pod). Prints
the median of ``--repeat`` runs of each, per call and per key/record::

    .venv/bin/python benchmarks/bench_store_schema.py [--ranks 16384] [--per-pod 8] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "analyzers"))
sys.path.insert(0, str(REPO / "operator"))

from frwatch_analyzers.store.layout import AttemptKey  # noqa: E402
from frwatch_analyzers.store.pod_record import (  # noqa: E402
    MAX_POD_RECORD_BYTES,
    RankUpload,
    StoredPodRecord,
    parse_pod_record,
)
from frwatch_operator.collect.progress import read_listing  # noqa: E402


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16384)
    parser.add_argument("--per-pod", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    key = AttemptKey("frwatch", "team", "llama", "0b4c-uid", "0")
    pods = args.ranks // args.per_pod
    keys = [key.rank(r) for r in range(args.ranks)]
    keys += [key.pod(f"llama-worker-{p}") for p in range(pods)]
    keys += [key.later(r, 1732440000000 + r) for r in range(0, args.ranks, 97)] + [key.manifest]
    listing_s = median_seconds(lambda: read_listing(key, keys), args.repeat)
    print(f"read_listing: {len(keys)} keys in {listing_s * 1e3:.1f} ms ({listing_s / len(keys) * 1e6:.2f} us a key)")

    me = StoredPodRecord(pod="llama-worker-0", namespace="team", node="node-0", uid="u", job="llama",
                         job_uid="0b4c-uid", attempt="0", agent_started_at=1732440000.0)  # fmt: skip
    def upload(rank: int) -> RankUpload:
        return RankUpload(key=key.rank(rank), bytes=28_000_000, sha256="0" * 64, format="pickle", corrupt=False,
                          uploaded_at=1732440001.0)  # fmt: skip

    uploads = {r: [upload(r)] for r in range(args.per_pod)}
    record = me.with_uploads(uploads, [], []).agent_json()
    one_s = median_seconds(lambda: [parse_pod_record(record) for _ in range(pods)], args.repeat)
    print(f"parse_pod_record: {pods} records of {len(record)} bytes in {one_s * 1e3:.1f} ms "
          f"({one_s / pods * 1e6:.1f} us a record)")  # fmt: skip
    big = b'{"pod": "p", "ranks": [' + b",".join(b"%d" % r for r in range(120_000)) + b"]}"
    assert len(big) <= MAX_POD_RECORD_BYTES
    big_s = median_seconds(lambda: parse_pod_record(big), args.repeat)
    print(f"parse_pod_record: one record of {len(big)} bytes (120000 ranks) in {big_s * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
