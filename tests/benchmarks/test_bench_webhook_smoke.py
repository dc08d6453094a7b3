"""bench_webhook.py runs: the benchmark at a tiny rate against the real webhook server, so it cannot rot unseen
(it failed with an ImportError at HEAD once, unnoticed, when a test builder it imported moved)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_webhook.py"


def test_bench_webhook_prints_its_figures_at_a_tiny_rate() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--rate", "10", "--seconds", "1", "--workers", "2", "--huge", "20",
         "--huge-runs", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "webhook latency, 10 requests at 10/s" in out.stdout
    assert "(5 injected, 5 untouched)" in out.stdout
    assert "p99" in out.stdout
    assert "huge pod: 20 containers" in out.stdout and "patched: True" in out.stdout
