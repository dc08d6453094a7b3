"""The worker pool survives its workers: a segfault, the kernel's kill, a hang or an exhausted memory budget
costs only the task that caused it, named with the reason, and the other tasks all finish."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from hostile_run import analyze, within_bounds
from payloads import deep_tuple, dict_with_key, good_bytes, laughs_tuple, memo_index

from frwatch_analyzers.base.limits import MIB
from frwatch_analyzers.decode.isolation import Budget, Lost, run
from frwatch_analyzers.verdict import Status
from frwatch_dev.dumps import pickle_bytes, world


def _task(kind: str) -> str:
    if kind == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "hang":
        while True:
            time.sleep(0.05)
    if kind == "spin":
        while True:
            pass
    if kind == "memory":
        # one request past the budget: refused by RLIMIT_AS at once. Filling the budget block by block (the
        # zeroing touches every page) took over the task's 1 s budget at load 13 and came out a timeout.
        bytearray(2 * BUDGET.memory_bytes)
    if kind == "exit":
        os._exit(3)
    return f"done {kind} in {os.getpid()}"


BUDGET: Budget[str] = Budget(memory_bytes=128 * MIB, seconds=lambda kind: 1.0)


def test_every_kind_of_death_costs_only_its_task() -> None:
    tasks = ["ok", "segv", "ok", "killed", "ok", "hang", "ok", "memory", "ok", "exit", "ok"]
    started = time.monotonic()
    results = run(tasks, _task, BUDGET, jobs=2, batch=3)
    assert time.monotonic() - started < 30
    lost = {tasks[i]: r for i, r in enumerate(results) if isinstance(r, Lost)}
    assert lost["segv"] == Lost("crashed", "the decoder crashed (SIGSEGV)")
    assert lost["killed"].kind == "killed" and "SIGKILL, not by frwatch" in lost["killed"].reason
    assert lost["hang"] == Lost("timeout", "took longer than its 1 s budget (the worker was stopped)")
    assert lost["memory"] == Lost("memory", "needs more than the 128 MB a worker may use")
    assert lost["exit"] == Lost("crashed", "the worker exited with code 3")
    done = [r for r in results if isinstance(r, str)]
    assert len(done) == 6 and all(r.startswith("done ok in ") for r in done)
    assert all(int(r.rsplit(" ", 1)[1]) != os.getpid() for r in done)  # never in the parent


def test_a_cpu_bound_task_is_stopped_by_the_parent_and_by_the_kernel() -> None:
    results = run(["spin", "ok"], _task, BUDGET, jobs=1)
    assert results[0] == Lost("timeout", "took longer than its 1 s budget (the worker was stopped)")
    assert isinstance(results[1], str)


def test_a_task_out_of_memory_gets_a_second_try_in_a_fresh_worker() -> None:
    marker_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"frwatch-retry-{os.getpid()}"
    marker_dir.mkdir(exist_ok=True)

    def once(kind: str) -> str:
        # the first attempt runs out of memory, the second (in a fresh worker) succeeds
        marker = marker_dir / kind
        if kind == "flaky" and not marker.exists():
            marker.touch()
            raise MemoryError
        return kind

    try:
        assert run(["flaky", "ok"], once, BUDGET, jobs=1) == ["flaky", "ok"]
    finally:
        for p in marker_dir.iterdir():
            p.unlink()
        marker_dir.rmdir()


def test_past_the_deadline_the_tasks_not_started_are_named() -> None:
    budget: Budget[str] = Budget(memory_bytes=128 * MIB, seconds=lambda kind: 5.0, deadline_seconds=0.5)
    results = run(["hang-a-little", *["ok"] * 5], lambda k: time.sleep(1.0) or k, budget, jobs=1)
    assert results[0] == "hang-a-little"
    assert results[1:] == [Lost("deadline", "not read: the analysis ran out of its 0.5 s")] * 5


def test_results_arrive_as_they_are_made() -> None:
    seen: list[str] = []
    assert run(["a", "b", "c"], lambda k: k * 2, BUDGET, jobs=2, arrived=seen.append) == ["aa", "bb", "cc"]
    assert sorted(seen) == ["aa", "bb", "cc"]


def test_the_analyzer_survives_killers_among_many_good_files_on_two_workers(tmp_path: Path) -> None:
    """24 good ranks and, among them, a file that segfaults the decoder, one that hangs it and one that
    exhausts its memory: the three are named, the 24 analysed, on 2 workers."""
    dumps = world(27).all_reduce(steps=20).dumps()
    killers = {
        5: dict_with_key(deep_tuple(200_000)),
        13: dict_with_key(laughs_tuple(60)),
        21: memo_index(0xFFFFFFFF),
    }
    for rank, dump in dumps.items():
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(killers.get(rank) or pickle_bytes(dump))
    result = analyze(tmp_path, "--format", "json", "--jobs", "2")
    assert result.code == 0, result.stderr
    v = result.verdict
    assert v.ranks_seen == sorted(set(range(27)) - set(killers))
    assert "the decoder crashed (SIGSEGV)" in result.bad("rank_5").reason
    assert "took longer than its 2 s budget" in result.bad("rank_13").reason
    assert "needs more than the 256 MB a worker may use" in result.bad("rank_21").reason
    assert v.status == Status.inconclusive
    within_bounds(result)


def test_one_small_file_is_still_decoded_in_a_child(tmp_path: Path) -> None:
    (tmp_path / "nccl_trace_rank_0").write_bytes(dict_with_key(deep_tuple(200_000)))
    (tmp_path / "nccl_trace_rank_1").write_bytes(good_bytes(1))
    result = analyze(tmp_path, "--format", "json")
    assert result.code == 0, result.stderr  # the parent did not segfault
    assert "the decoder crashed (SIGSEGV)" in result.bad("rank_0").reason
    within_bounds(result)


class _Ended:
    """A worker process that has ended with ``exitcode``, and its closed pipe end."""

    def __init__(self, exitcode: int) -> None:
        self.exitcode = exitcode

    def close(self) -> None:
        pass


def test_a_result_that_came_in_just_before_the_kill_is_kept_and_nothing_else_is_blamed() -> None:
    from collections import deque

    from frwatch_analyzers.decode.isolation import _bury, _Worker

    results: list[object] = ["a done", None, None]
    queue: deque[int] = deque()
    w = _Worker(_Ended(-9), _Ended(0), pending=deque([1, 2]), killed_on=0)  # type: ignore[arg-type]
    _bury(w, results, queue, lambda i: 2.0)
    assert results == ["a done", None, None] and list(queue) == [1, 2]
    # killed on task 1 while it ran: task 1 is lost, task 2 goes back
    w = _Worker(_Ended(-9), _Ended(0), pending=deque([1, 2]), killed_on=1)  # type: ignore[arg-type]
    _bury(w, results, queue := deque(), lambda i: 2.0)
    assert results[1] == Lost("timeout", "took longer than its 2 s budget (the worker was stopped)")
    assert list(queue) == [2]
