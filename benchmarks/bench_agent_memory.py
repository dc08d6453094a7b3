"""The agent's memory and upload time for large dumps, against a real SeaweedFS.

    .venv/bin/python benchmarks/bench_agent_memory.py [--dumps 8] [--mb 40] [--limit-mib 256]

Starts SeaweedFS and ``frwatch agent`` (its data segment limited to ``--limit-mib`` with RLIMIT_DATA:
stricter than the sidecar's container limit, which counts only touched pages), writes ``--dumps`` pickled
dumps of the real schema of ``--mb`` MB each into its folder at once (ranks 0..N-1), waits until every
one is in the store with its exact size, and prints the agent's peak RSS (``VmHWM`` of the process, and
the figure it logs itself at exit, also its own ``VmHWM``), its idle RSS before the dumps, and the time from
the last write to the last upload. Target (issues 10 and 25): 8 x 40 MB under a 256 Mi limit with a peak
RSS below 100 MB. Exit 1 when a dump is missing, the agent failed, or the peak is not below ``--bound-mb``.
``tests/capture/test_agent_memory.py`` runs it at tiny sizes as a smoke test; the figures are in
``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from fixtures.seaweed import SeaweedFS  # noqa: E402
from frwatch_analyzers.store.layout import AttemptKey  # noqa: E402
from frwatch_dev.testing.agent_process import big_dump, start_agent  # noqa: E402
from frwatch_operator import constants as c  # noqa: E402
from frwatch_operator.store.s3 import S3Store  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dumps", type=int, default=8)
    ap.add_argument("--mb", type=float, default=40.0)
    ap.add_argument("--limit-mib", type=int, default=256)
    ap.add_argument("--bound-mb", type=float, default=100.0, help="the peak RSS must stay below this (MB)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    s3 = SeaweedFS(work / "s3")
    s3.start()
    try:
        agent = start_agent(work, s3.env(), data_limit_bytes=args.limit_mib << 20)
        store = S3Store(s3.settings())
        time.sleep(1.0)
        idle = agent.peak_rss_mib()
        dumps = {r: big_dump(int(args.mb * 1e6), rank=r) for r in range(args.dumps)}
        for r, data in dumps.items():
            (agent.dump_dir / f"{c.DUMP_FILE_PREFIX}{r}").write_bytes(data)
        written = time.monotonic()
        pending = set(dumps)
        while pending and time.monotonic() - written < 600:
            pending = {r for r in pending if store.size(AttemptKey.of_root(agent.root).rank(r)) != len(dumps[r])}
            if agent.proc.poll() is not None:
                break
            time.sleep(0.2)
        took = time.monotonic() - written
        alive = agent.proc.poll() is None
        peak = agent.peak_rss_mib() if alive else float("nan")
        code = agent.stop() if alive else agent.proc.returncode
        logged = [json.loads(line)["event"] for line in agent.log.read_text().splitlines()
                  if "peak RSS" in line]  # fmt: skip
        total = sum(len(d) for d in dumps.values())
        print(
            f"dumps: {args.dumps} x {args.mb:g} MB ({total / 1e6:.0f} MB), RLIMIT_DATA {args.limit_mib} MiB"
        )
        print(f"uploaded: {args.dumps - len(pending)}/{args.dumps} in {took:.1f} s "
              f"({total / 1e6 / max(took, 1e-9):.0f} MB/s); agent exit code {code}")  # fmt: skip
        peak_mb = peak * (1 << 20) / 1e6
        print(f"agent RSS: idle {idle:.1f} MiB, peak (VmHWM) {peak:.1f} MiB = {peak_mb:.1f} MB "
              f"(bound {args.bound_mb:g} MB: {'below' if peak_mb < args.bound_mb else 'NOT below'})")  # fmt: skip
        print(f"agent's own figure: {logged[-1] if logged else '(none logged)'}")
        return 0 if not pending and code == 0 and peak_mb < args.bound_mb else 1
    finally:
        s3.stop()


if __name__ == "__main__":
    sys.exit(main())
