"""The agent's memory does not grow with the dumps: 8 dumps of 40 MB under a 256 Mi limit, peak below 100 MB.

The limit is RLIMIT_DATA (heap and every private writable mapping of the process, thread stacks included:
stricter than a container limit, which counts touched pages only); the peak is the process's own VmHWM
read from /proc while it runs, and the figure it logs at exit (its own VmHWM too: ``ru_maxrss`` would carry
the size of whatever process started it across fork and exec, a kubelet's or a test runner's: the 220 MiB
issue 25 saw). benchmarks/bench_agent_memory.py prints the same measurement with timings; it runs here at
tiny sizes as a smoke test.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from frwatch_dev.testing.agent_process import big_dump, start_agent
from frwatch_operator import constants as c
from frwatch_operator.store.s3 import S3Store

ROOT = Path(__file__).resolve().parents[2]
DUMPS = 8
DUMP_BYTES = 40_000_000
LIMIT = 256 << 20
PEAK_MB = 100  #: megabytes (10**6 bytes)


@pytest.mark.slow
def test_eight_40mb_dumps_upload_under_256mi_with_a_peak_below_100mb(s3, tmp_path: Path) -> None:
    agent = start_agent(tmp_path, s3.env(), data_limit_bytes=LIMIT)
    store = S3Store(s3.settings())
    try:
        digests = {}
        for rank in range(DUMPS):
            data = big_dump(DUMP_BYTES, rank=rank)
            assert len(data) >= DUMP_BYTES
            digests[rank] = (len(data), hashlib.sha256(data).hexdigest())
            (agent.dump_dir / f"{c.DUMP_FILE_PREFIX}{rank}").write_bytes(data)
            del data
        deadline = time.monotonic() + 300
        missing = set(digests)
        while missing and time.monotonic() < deadline and agent.proc.poll() is None:
            missing = {r for r in missing if store.size(f"{agent.root}/ranks/{r}.pickle") != digests[r][0]}
            time.sleep(0.2)
        assert agent.proc.poll() is None, f"the agent died:\n{agent.log.read_text()[-3000:]}"
        assert not missing, f"not uploaded: {sorted(missing)}"
        peak = agent.peak_rss_mib()
        assert agent.stop() == 0
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
    for rank, (size, sha) in digests.items():
        stored = store.get(f"{agent.root}/ranks/{rank}.pickle")
        assert (len(stored), hashlib.sha256(stored).hexdigest()) == (size, sha)
    logged = [json.loads(line)["event"] for line in agent.log.read_text().splitlines() if "peak RSS" in line]
    assert logged and f"{DUMPS} ranks uploaded" in logged[-1]
    peak_mb = peak * (1 << 20) / 1e6
    assert peak_mb < PEAK_MB, f"peak RSS {peak_mb:.1f} MB (bound {PEAK_MB} MB): {logged[-1]}"
    assert logged_mib(logged[-1]) * (1 << 20) / 1e6 < PEAK_MB, logged[-1]


def logged_mib(line: str) -> float:
    """The peak the agent logs at exit ("...; peak RSS 87.8 MiB")."""
    found = re.search(r"peak RSS ([0-9.]+) MiB", line)
    assert found, line
    return float(found.group(1))


def test_the_agents_own_figure_is_its_memory_not_the_memory_of_the_process_that_started_it(
    s3, tmp_path: Path
) -> None:
    """Started by a large process (here the test runner holding 300 MiB, as a kubelet would be), the agent's
    logged peak is still its own: within a few MiB of its VmHWM, far below its parent's size."""
    ballast = bytearray(300 << 20)
    ballast[:: 4096] = b"\x01" * len(ballast[:: 4096])  # touched: resident in this process
    agent = start_agent(tmp_path, s3.env())
    del ballast
    try:
        own = agent.peak_rss_mib()
        assert agent.stop() == 0
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
    [line] = [json.loads(x)["event"] for x in agent.log.read_text().splitlines() if "peak RSS" in x]
    assert logged_mib(line) < 200, line  # its parent held more than 300 MiB when it forked
    assert abs(logged_mib(line) - own) < 8, (line, own)


def test_the_benchmark_runs_and_prints_its_figures_at_tiny_sizes() -> None:
    """``benchmarks/bench_agent_memory.py`` as a smoke test: 2 dumps of 1 MB, its real store and agent."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_agent_memory.py"), "--dumps", "2", "--mb", "1"],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    out = done.stdout
    assert "uploaded: 2/2" in out and "agent exit code 0" in out, out
    peak = re.search(r"peak \(VmHWM\) ([0-9.]+) MiB = ([0-9.]+) MB \(bound 100 MB: below\)", out)
    assert peak and 0 < float(peak.group(1)) < 100, out
    assert re.search(r"agent's own figure: .*2 ranks uploaded.*peak RSS [0-9.]+ MiB", out), out


def test_the_agent_keeps_one_malloc_arena_unless_the_environment_says_otherwise() -> None:
    """glibc's per-thread arenas cost the agent 6 MiB of its peak (benchmarks/README.md); an operator's own
    MALLOC_ARENA_MAX is left alone."""
    code = "from frwatch_operator.agent.main import one_malloc_arena; print(one_malloc_arena())"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    said = [
        subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=60).stdout.strip()
        for e in (env, {**env, "MALLOC_ARENA_MAX": "4"})
    ]
    assert said == ["True", "False"], said
