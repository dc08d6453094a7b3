"""Fan-out simulation: N map processes (``frwatch analyze URL --map-shard I/N``, as the Indexed map Job's
pods run) against a real SeaweedFS, then the reduce (``frwatch analyze URL``, reading the summaries).

    .venv/bin/python benchmarks/bench_fanout.py --ranks 256 --entries 2000 --shards 4

The dumps are the varied set (``frwatch_dev.dumps.varied``: several groups, a random op mix, many call
sites), uploaded under ``ranks/``. Prints, per shard: ranks summarised and wall seconds; then the reduce's
wall seconds and the same verdict decoded from the dumps in one process (``--from-dumps``) for comparison.
On one machine the N map processes share its cores: the per-shard time is what one pod of that size would
take with those cores, not a cluster's figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_dev.dumps import varied
from frwatch_dev.localcluster.objectstore import ObjectStore


def _cli(url: str, *args: str, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "frwatch_analyzers.cli", url, *args], env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    return time.perf_counter() - start, done


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=256, help="world size (a multiple of 8, 16 or more)")
    p.add_argument("--entries", type=int, default=2000, help="Flight Recorder entries a rank")
    p.add_argument("--shards", type=int, default=4, help="map processes run at once")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-fanout-") as tmp:
        work = Path(tmp)
        varied.fabricate(work / "dumps", args.ranks, args.entries)
        store = ObjectStore(work / "store")
        store.start()
        try:
            s3 = store.client()
            key = AttemptKey("bench", "team", "llama", "uid-1", "0")
            total = 0
            for rank in range(args.ranks):
                data = (work / "dumps" / f"{varied.PREFIX}{rank}").read_bytes()
                total += len(data)
                s3.put_object(Bucket=store.bucket, Key=key.rank(rank), Body=data)
            url = str(key.at(store.bucket))
            env = {**os.environ, "AWS_ENDPOINT_URL": store.endpoint, "AWS_REGION": store.region,
                   "AWS_ACCESS_KEY_ID": store.access_key, "AWS_SECRET_ACCESS_KEY": store.secret_key}  # fmt: skip
            print(f"{args.ranks} ranks x {args.entries} entries, {total / 1e6:.1f} MB of dumps, {args.shards} shards")
            start = time.perf_counter()
            procs = [
                (i, time.perf_counter(), subprocess.Popen(
                    [sys.executable, "-m", "frwatch_analyzers.cli", url, "--map-shard", f"{i}/{args.shards}"],
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
                for i in range(args.shards)
            ]  # fmt: skip
            for i, began, proc in procs:
                out, err = proc.communicate()
                seconds = time.perf_counter() - began
                if proc.returncode != 0:
                    print(f"shard {i}/{args.shards}: exit {proc.returncode}: {err.strip()[-500:]}")
                    return 1
                line = json.loads(out)
                print(f"shard {i}/{args.shards}: {line['written']} summaries written, "
                      f"{line['failed_count']} failed, {seconds:.2f} s")  # fmt: skip
            print(f"map step (all shards at once): {time.perf_counter() - start:.2f} s wall")
            reduce_s, reduced = _cli(url, "--format", "json", env=env)
            dumps_s, decoded = _cli(url, "--format", "json", "--from-dumps", env=env)
            a, b = json.loads(reduced.stdout), json.loads(decoded.stdout)
            print(f"reduce from summaries: {reduce_s:.2f} s wall ({a['stats'].get('from_summaries')} ranks from summaries)")
            print(f"single pod from dumps: {dumps_s:.2f} s wall")
            same = all(a[k] == b[k] for k in ("status", "category", "headline", "culprit_ranks"))
            print(f"same verdict: {same} ({a['category']}, culprits {a['culprit_ranks']})")
            return 0 if same else 1
        finally:
            store.stop()


if __name__ == "__main__":
    sys.exit(main())
