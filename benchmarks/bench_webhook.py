"""Webhook latency at a fixed request rate against the real server (kopf WebhookServer, plain HTTP).

    .venv/bin/python benchmarks/bench_webhook.py [--rate 100] [--seconds 10]

Starts ``python -m frwatch_operator.webhook`` as its own process (an index of 50 jobs, half opted in, and
a CapturePolicy), then sends Pod CREATE AdmissionReviews open-loop at ``--rate`` per second (each timed
from its scheduled send time, so a slow answer cannot hide the ones queued behind it) over keep-alive
connections, and prints p50/p99/max. Target: p99 < 10 ms at 100 requests/s on the 2-core machine.

``--huge N`` then times, one at a time, ``--huge-runs`` AdmissionReviews of an opted-in pod with N
containers (issue 10: 4000 blocked the operator's event loop past the API server's 10 s timeout): the
webhook admits it unchanged with a warning after its size-budget check, and the print says how long
the round trip took (request body size included).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from frwatch_dev.ports import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "capture"))
from builders import job, pod, policy

from frwatch_dev.testing.admission import review


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--huge", type=int, default=0, help="containers of the huge pod (0: skip)")
    ap.add_argument("--huge-runs", type=int, default=5)
    args = ap.parse_args()

    objects = [job(f"job{i}", capture="enabled" if i % 2 == 0 else None) for i in range(50)]
    objects.append(policy("none-match", spec={"jobSelector": {"matchLabels": {"never": "x"}}}))
    tmp = Path(tempfile.mkdtemp(prefix="bench-webhook-"))
    (tmp / "objects.json").write_text(json.dumps(objects))
    port = free_port()
    env = {
        **os.environ,
        "FRWATCH_WEBHOOK_ADDR": "127.0.0.1",
        "FRWATCH_WEBHOOK_PORT": str(port),
        "FRWATCH_WEBHOOK_INSECURE": "true",
        "FRWATCH_LOG_LEVEL": "WARNING",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "frwatch_operator.webhook", "--objects", str(tmp / "objects.json")],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("serving"), line
        bodies = [
            json.dumps(
                review(pod(f"job{i % 50}", index=i, env=[{"name": "NCCL_DEBUG", "value": "WARN"}]))
            ).encode()
            for i in range(200)
        ]
        total = int(args.rate * args.seconds)
        latencies: list[float] = [0.0] * total
        injected = [False] * total
        start = time.perf_counter() + 0.5

        def worker(w: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            for i in range(w, total, args.workers):
                due = start + i / args.rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                conn.request(
                    "POST",
                    "/frwatch-inject",
                    body=bodies[i % len(bodies)],
                    headers={"Content-Type": "application/json"},
                )
                resp = conn.getresponse()
                data = resp.read()
                latencies[i] = time.perf_counter() - due
                injected[i] = b'"patch"' in data
                assert resp.status == 200

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(args.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ms = sorted(x * 1000 for x in latencies)
        p = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731
        print(
            f"webhook latency, {total} requests at {args.rate:.0f}/s over {args.seconds:.0f}s "
            f"({sum(injected)} injected, {total - sum(injected)} untouched), run {uuid.uuid4().hex[:6]}"
        )
        print(
            f"  p50 {p(0.50):.2f} ms   p90 {p(0.90):.2f} ms   p99 {p(0.99):.2f} ms   max {ms[-1]:.2f} ms   "
            f"mean {statistics.fmean(ms):.2f} ms"
        )
        if args.huge:
            huge_pod = pod("job0", containers=args.huge, env=[{"name": f"E{i}", "value": "x"} for i in range(5)])
            body = json.dumps(review(huge_pod)).encode()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            took: list[float] = []
            for _ in range(args.huge_runs):
                t0 = time.perf_counter()
                conn.request("POST", "/frwatch-inject", body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = json.loads(resp.read())["response"]
                took.append((time.perf_counter() - t0) * 1000)
            said = (data.get("warnings") or ["(no warning)"])[0]
            print(f"huge pod: {args.huge} containers, {len(body) / 1e6:.2f} MB request, "
                  f"patched: {'patch' in data}; round trip median {statistics.median(took):.1f} ms, "
                  f"max {max(took):.1f} ms over {args.huge_runs}")  # fmt: skip
            print(f"  {said}")
        return 0
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
