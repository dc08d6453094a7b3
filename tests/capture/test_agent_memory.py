"""The agent's memory does not grow with the dumps: 8 dumps of 40 MB under a 256 Mi limit, peak below 100 MB.

The limit is RLIMIT_DATA (heap and every private writable mapping of the process, thread stacks included:
stricter than a container limit, which counts touched pages only); the peak is the process's own VmHWM
read from /proc while it runs, and the figure it logs at exit. benchmarks/bench_agent_memory.py prints
the same measurement with timings.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from frwatch_dev.testing.agent_process import big_dump, start_agent
from frwatch_operator import constants as c
from frwatch_operator.s3store import S3Store

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
