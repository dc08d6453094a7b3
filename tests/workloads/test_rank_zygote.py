"""Ranks forked from `rank_zygote` (one torch import for the job) against ranks spawned one `python -m` each.

The zygote imports torch without the ranks' late variables (RANK, MASTER_*, TORCH_FR_*...); each child sets
its own before torch.distributed reads them. torch reads the Flight Recorder's buffer size when the first
process group is created (`FlightRecorder<c10::Event>::get()` from ProcessGroupGloo's constructor): a
small buffer given to the ranks only must show in their dumps, which it would not if torch read it at import.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from frwatch_dev.workloads.forked_ranks import zygote_environ
from frwatch_dev.workloads.local_launch import ENV_RANKS_SPAWN, run_local_job
from realdumps import load_dump


def test_the_zygote_keeps_what_every_rank_shares_and_leaves_out_what_each_sets_after_the_fork() -> None:
    envs = [
        {"PATH": "/bin", "OMP_NUM_THREADS": "1", "RANK": str(r), "TORCH_FR_BUFFER_SIZE": "7", "X": str(r)}
        for r in range(3)
    ]
    assert zygote_environ(envs) == {"PATH": "/bin", "OMP_NUM_THREADS": "1"}


@pytest.mark.slow
def test_forked_ranks_take_the_flight_recorder_buffer_size_given_after_the_fork(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_RANKS_SPAWN, raising=False)
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "2")  # the ranks' env; the zygote's has none (torch: 2000)
    result = run_local_job("skip", 2, tmp_path, culprit=1, timeout_s=3.0, deadline_s=90.0)
    assert result.started_by == "fork", result.fork_refused
    assert {r.rank: r.ended for r in result.ranks} == {0: "exit 1", 1: "exit 1"}  # a collective timed out
    assert sorted(result.dumps) == [0, 1]
    for path in result.dumps.values():
        entries = load_dump(path)["entries"]
        assert len(entries) == 2  # the buffer wrapped at the ranks' size...
        assert max(e["record_id"] for e in entries) >= 2  # ...after more records than it holds
    # its RANK came from the environment set after the fork
    assert "faulty_training rank=1" in result.outcome(1).summary


@pytest.mark.slow
def test_frwatch_ranks_spawn_starts_each_rank_as_its_own_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_RANKS_SPAWN, "1")
    result = run_local_job("healthy", 2, tmp_path, timeout_s=3.0, deadline_s=90.0)
    assert result.started_by == "spawn" and result.fork_refused == ""
    assert {r.rank: r.ended for r in result.ranks} == {0: "exit 0", 1: "exit 0"}
