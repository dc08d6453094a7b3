"""Live watch end to end on one machine: real torch gloo ranks (process-group timeout 300 s) with the
bootstrap on PYTHONPATH, the agent's sampler, and the live findings. Every finding must come while every
rank still runs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from live_ranks import LiveJob, live_job, with_pythonpath_appended

from frwatch_analyzers.live.watch import LiveKind, LiveReport, LiveWatch
from frwatch_operator.agent.live_sampler import LiveSampler, SamplerSettings
from frwatch_operator.agent.livebootstrap import install
from frwatch_operator.constants import ENV_LIVE_DIR

pytestmark = pytest.mark.slow
WORLD = 4
START_S = 180.0  # four torch ranks start slowly on a loaded 2-core machine
PERIOD_S = 1.0


def start_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    code_dir, live_dir = install(tmp_path)
    env = with_pythonpath_appended(os.environ, code_dir)
    env[ENV_LIVE_DIR] = str(live_dir)
    return env, live_dir


def rounds(job: LiveJob, sampler: LiveSampler, watch: LiveWatch, until_s: float):
    """Sample every PERIOD_S until ``until_s``; yields (report, pod) while every rank runs."""
    deadline = time.monotonic() + until_s
    while time.monotonic() < deadline and all(job.running()):
        pod = sampler.sample_once()
        yield watch.observe(pod.ranks, now=time.monotonic()), pod
        time.sleep(PERIOD_S)


def wait_all_sockets(sampler: LiveSampler, job: LiveJob) -> None:
    deadline = time.monotonic() + START_S
    while len(sampler.sockets()) < WORLD:
        assert time.monotonic() < deadline, "the ranks' sockets did not appear:\n" + job.log(0)
        assert all(job.running()), "a rank ended early:\n" + "\n".join(job.log(r) for r in range(WORLD))
        time.sleep(0.5)


def test_a_rank_dependent_skip_is_a_desync_found_while_every_rank_runs(tmp_path: Path) -> None:
    env, live_dir = start_env(tmp_path)
    with live_job(WORLD, tmp_path, ["--mode", "skip", "--fault-step", "5", "--steps", "50"], env) as job:
        sampler = LiveSampler(live_dir, "pod", SamplerSettings(period_s=PERIOD_S))
        watch = LiveWatch(range(WORLD))
        wait_all_sockets(sampler, job)
        found: LiveReport | None = None
        for report, pod in rounds(job, sampler, watch, until_s=60):
            if report.findings:
                found = report
                skipped_at_ns = max(
                    e.created_ns for r in pod.ranks if r.rank == 1 for g in r.groups for e in g.tail
                )
                break
        assert found is not None, "no finding within 60 s of the ranks being up"
        assert all(job.running())
    (f,) = found.findings
    assert (f.kind, f.seq, f.ranks, f.peers) == (LiveKind.desync, 5, [1], [0, 2, 3])
    assert "gloo:broadcast" in f.summary
    print(f"desync found {(time.time_ns() - skipped_at_ns) / 1e9:.1f} s after the culprit's broadcast")


def test_a_cpu_stuck_rank_is_a_stall_named_with_its_python_stack(tmp_path: Path) -> None:
    env, live_dir = start_env(tmp_path)
    with live_job(WORLD, tmp_path, ["--mode", "stuck", "--fault-step", "5", "--steps", "50"], env) as job:
        sampler = LiveSampler(live_dir, "pod", SamplerSettings(period_s=PERIOD_S))
        watch = LiveWatch(range(WORLD), stall_after_s=10)
        wait_all_sockets(sampler, job)
        stall = None
        for report, _ in rounds(job, sampler, watch, until_s=120):
            assert [f.kind for f in report.findings if f.kind is not LiveKind.stall] == []
            stall = next((f for f in report.findings if f.kind is LiveKind.stall and f.stacks), None)
            if stall is not None:
                break
        assert stall is not None, "no stall with a stack within 120 s"
        assert all(job.running())
    assert (stall.ranks, stall.peers, stall.seq) == ([1], [0, 2, 3], 5)
    assert "in load_batch" in stall.stacks[1] and "time.sleep" not in stall.summary


def test_a_slow_but_healthy_rank_is_no_finding(tmp_path: Path) -> None:
    """Rank 1's loader takes 2 s every step (the others wait in the all_reduce); threshold 10 s; 40 s watched."""
    env, live_dir = start_env(tmp_path)
    stop = tmp_path / "stop"
    args = ["--mode", "slow", "--pause-s", "2", "--steps", "100000", "--until-file", str(stop)]
    with live_job(WORLD, tmp_path, args, env) as job:
        sampler = LiveSampler(live_dir, "pod", SamplerSettings(period_s=PERIOD_S))
        watch = LiveWatch(range(WORLD), stall_after_s=10)
        wait_all_sockets(sampler, job)
        behind = 0
        for report, pod in rounds(job, sampler, watch, until_s=40):
            assert report.findings == [], report.findings
            lasts = {r.rank: r.groups[0].last_enqueued for r in pod.ranks if r.groups}
            behind += len(lasts) == WORLD and lasts[1] < max(lasts.values())
        assert all(job.running())
        stop.touch()
        assert job.wait(timeout_s=START_S) == [0] * WORLD
    assert behind >= 3  # the gap was there, round after round, and was rightly no stall


def test_a_rank_holding_the_gil_is_read_and_said(tmp_path: Path) -> None:
    """Rank 1 holds the GIL for 40 s once its socket is up (the bootstrap's own thread needs the GIL to
    start the server): fr_trace_json still answers, dump_traceback does not, and the sampler says why."""
    env, live_dir = start_env(tmp_path)
    fault = tmp_path / "fault"
    args = ["--mode", "gil", "--pause-s", "40", "--steps", "100000", "--fault-file", str(fault)]
    with live_job(WORLD, tmp_path, args, env) as job:
        sampler = LiveSampler(live_dir, "pod", SamplerSettings(period_s=PERIOD_S, stack_timeout_s=1.0))
        watch = LiveWatch(range(WORLD), stall_after_s=10)
        wait_all_sockets(sampler, job)
        fault.touch()
        said = None
        for _, pod in rounds(job, sampler, watch, until_s=60):
            r1 = next(r for r in pod.ranks if r.rank == 1)
            assert r1.error is None  # fr_trace_json needs no GIL
            if r1.stack_error:
                said = r1.stack_error
                break
        assert said is not None and "holds the GIL" in said
