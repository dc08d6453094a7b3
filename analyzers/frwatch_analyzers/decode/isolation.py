"""Work on untrusted files in worker processes that cannot take the analyzer down.

Each task runs in a forked worker under limits the kernel enforces: an address space (``RLIMIT_AS``: past
it the decoder gets a MemoryError, however few bytes asked for the memory) and CPU time (``RLIMIT_CPU``,
a backstop that holds even if the parent is gone). The parent gives each task a wall-clock budget and
kills the worker that overruns it. A worker that dies (a segfault in the decoder, the kernel's OOM killer,
the kill on timeout) costs only the task it was running: that task comes back as :class:`Lost` with the
reason, another worker starts, and the rest goes on. A task that ran out of memory is tried once more in a
fresh worker (memory left fragmented by earlier files must not cost a good file). Input as small as one
file still runs in a child, never in the parent.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import multiprocessing
import os
import resource
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")
R = TypeVar("R")

LostKind = Literal["crashed", "timeout", "memory", "killed", "deadline"]

#: Tracked objects alive since the last collection past which a worker collects cycles (dumps are trees
#: freed by reference counting, so the cyclic collector is off; a crafted cycle must not pile up).
_GC_AFTER = 50_000


@dataclass(frozen=True)
class Lost:
    """A task that gave no result: its worker died, ran out of time or memory, or it never ran."""

    kind: LostKind
    reason: str


@dataclass
class _Worker:
    proc: Any  # multiprocessing.Process
    conn: Connection
    pending: deque[int] = field(default_factory=deque)
    started: float = 0.0  # when the task at pending[0] started
    killed_on: int | None = None  # the task it was stopped on for running out of time


@dataclass(frozen=True)
class Budget(Generic[T]):
    """Limits of one run: per worker memory, per task seconds, and a deadline for the whole run."""

    memory_bytes: int
    seconds: Callable[[T], float]
    deadline_seconds: float | None = None


def run(
    tasks: Sequence[T],
    work: Callable[[T], R],
    budget: Budget[T],
    *,
    jobs: int = 1,
    batch: int = 1,
    arrived: Callable[[R], None] | None = None,
) -> list[R | Lost]:
    """``[work(t) for t in tasks]``, each in a worker process under ``budget``; a task that gives no
    result is a :class:`Lost` in its place. ``work`` and ``tasks`` reach the workers by fork; ``arrived``
    sees each result as it arrives."""
    n = len(tasks)
    results: list[R | Lost | None] = [None] * n
    if n == 0:
        return []
    ctx = multiprocessing.get_context("fork")
    queue: deque[int] = deque(range(n))
    retried: set[int] = set()
    workers: list[_Worker] = []
    jobs = max(1, min(jobs, n))
    start = time.monotonic()
    try:
        while queue or any(w.pending for w in workers):
            now = time.monotonic()
            if budget.deadline_seconds is not None and now - start > budget.deadline_seconds and queue:
                for i in queue:
                    results[i] = Lost(
                        "deadline", f"not read: the analysis ran out of its {budget.deadline_seconds:g} s"
                    )
                queue.clear()
            while queue and len(workers) < jobs:
                workers.append(_spawn(ctx, tasks, work, budget))
            for w in workers:
                if queue and len(w.pending) <= 1:
                    _dispatch(w, [queue.popleft() for _ in range(min(batch, len(queue)))], queue)
            busy = [w for w in workers if w.pending]
            if not busy:
                continue
            timeout = min(w.started + budget.seconds(tasks[w.pending[0]]) for w in busy) - time.monotonic()
            ready = set(wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], max(0.0, timeout)))
            for w in busy:
                if w.conn in ready:
                    _receive(w, results, queue, retried, arrived)
            now = time.monotonic()
            for w in list(workers):
                if w.pending and now - w.started > budget.seconds(tasks[w.pending[0]]):
                    w.killed_on = w.pending[0]
                    w.proc.kill()
                if w.killed_on is not None or not w.proc.is_alive():
                    w.proc.join()
                    _receive(w, results, queue, retried, arrived)  # what it sent before it ended
                    _bury(w, results, queue, lambda i: budget.seconds(tasks[i]))
                    workers.remove(w)
    finally:
        for w in workers:
            _stop(w)
    return [r if r is not None else Lost("crashed", "no result (internal error)") for r in results]


def _spawn(ctx: Any, tasks: Sequence[T], work: Callable[[T], R], budget: Budget[T]) -> _Worker:
    parent, child = ctx.Pipe(duplex=True)
    proc = ctx.Process(target=_worker_main, args=(child, tasks, work, budget), daemon=True)
    proc.start()
    child.close()
    return _Worker(proc, parent)


def _dispatch(w: _Worker, items: list[int], queue: deque[int]) -> None:
    if not w.pending:
        w.started = time.monotonic()
    try:
        w.conn.send(items)
    except OSError:  # the worker is gone (it is buried below); these tasks never reached it
        queue.extendleft(reversed(items))
        return
    w.pending.extend(items)


def _receive(
    w: _Worker,
    results: list[Any],
    queue: deque[int],
    retried: set[int],
    arrived: Callable[[Any], None] | None,
) -> None:
    """Take every message the worker has sent; an end of file is left for :func:`_bury`."""
    while w.pending:
        try:
            if not w.conn.poll():
                return
            i, status, value = w.conn.recv()
        except (EOFError, OSError):
            return
        w.pending.popleft()
        w.started = time.monotonic()
        if status == "ok":
            results[i] = value
            if arrived is not None:
                arrived(value)
        elif i in retried:
            results[i] = Lost("memory", value)
        else:  # out of memory: once more in a fresh worker, before anything else
            retried.add(i)
            queue.appendleft(i)


def _bury(w: _Worker, results: list[Any], queue: deque[int], seconds: Callable[[int], float]) -> None:
    """A worker has ended: the task it was running is lost; the tasks sent after it (all of them, when it
    retired cleanly or its last result came in just before the kill) go back to the front of the queue."""
    code = w.proc.exitcode
    if w.killed_on is not None:
        victim = w.killed_on if w.pending and w.pending[0] == w.killed_on else None
    else:
        victim = w.pending[0] if w.pending and code != 0 else None
    if victim is not None:
        w.pending.popleft()
        results[victim] = _death(code, w.killed_on is not None, seconds(victim))
    queue.extendleft(reversed(w.pending))
    w.pending.clear()
    w.conn.close()


def _death(code: int | None, timed_out: bool, seconds: float) -> Lost:
    if timed_out:
        return Lost("timeout", f"took longer than its {seconds:.3g} s budget (the worker was stopped)")
    if code is not None and code < 0:
        sig = -code
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        if sig == signal.SIGKILL:
            return Lost(
                "killed", "the worker was killed (SIGKILL, not by frwatch: the system ran out of memory?)"
            )
        if sig == signal.SIGXCPU:
            return Lost("timeout", "the worker used up its CPU time limit (SIGXCPU)")
        return Lost("crashed", f"the decoder crashed ({name})")
    return Lost("crashed", f"the worker exited with code {code}")


def _stop(w: _Worker) -> None:
    with contextlib.suppress(OSError):
        w.conn.send(None)
    w.proc.join(timeout=1)
    if w.proc.is_alive():
        w.proc.kill()
        w.proc.join()
    w.conn.close()


# --- worker side -----------------------------------------------------------------------------------------
def _worker_main(conn: Connection, tasks: Sequence[T], work: Callable[[T], R], budget: Budget[T]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it stops us
    # a crash on a crafted file writes no core (to fill a disk) and no traceback (the parent names the file)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    faulthandler.disable()
    limit_memory(budget.memory_bytes)
    # decoded dumps are acyclic trees freed by reference counting: the cyclic collector would only rescan
    # them again and again while they are built (about a third of the decode time)
    gc.disable()
    while True:
        try:
            items = conn.recv()
        except EOFError:
            return
        if items is None:
            return
        for i in items:
            _limit_cpu(budget.seconds(tasks[i]))
            try:
                message: tuple[int, str, Any] = (i, "ok", work(tasks[i]))
            except MemoryError:
                message = (
                    i,
                    "memory",
                    f"needs more than the {budget.memory_bytes >> 20} MB a worker may use",
                )
            if gc.get_count()[0] > _GC_AFTER:
                gc.collect(0)
            try:
                conn.send(message)
            except MemoryError:
                message = (i, "memory", "its summary needs more memory than a worker may use")
                conn.send(message)
            if message[1] == "memory":
                return  # retire: the parent starts a fresh worker and re-sends what this one still held


def limit_memory(budget_bytes: int) -> None:
    """Let this process map at most ``budget_bytes`` more than it has mapped now (Linux; elsewhere a no-op
    beyond what ``RLIMIT_AS`` means there)."""
    try:
        with open("/proc/self/statm") as fh:
            mapped = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        mapped = 0
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = mapped + budget_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _limit_cpu(seconds: float) -> None:
    """A CPU-time backstop for the next task: twice its wall budget from now, then SIGXCPU."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + 2 * seconds) + 2
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
