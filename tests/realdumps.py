"""Real Flight Recorder dumps from real torch gloo ranks, each scenario made once per test session.

    dumps = RealDumps(tmp_dir)
    folder = dumps("skip")                      # 4 ranks of the skip scenario; their dump files in `folder`
    result = dumps.run("skip")                  # the whole LocalJobResult: exit codes, signals, logs
    mixed = dumps("skip", "--json-ranks", "3")  # a variant: rank 3 writes JSON next to the others' pickles
    dumps.load(folder / "nccl_trace_rank_0")    # a dump as data, loaded without trusting it

Two scenarios run at a time at most (the machine has 2 cores): asking for one scenario starts it and the
next scenario nobody has asked for yet, so a test module walking through the scenarios finds the next one
ready or half done. `timings` holds each run's wall time.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from frwatch_analyzers.decode.safe_load import decode
from frwatch_dev.workloads.local_launch import LocalJobResult, run_local_job
from frwatch_dev.workloads.scenarios import Scenario

WORLD_SIZE = 4
MAX_CONCURRENT = 2
DEADLINE_S = 90.0


def load_dump(path: Path) -> dict[str, Any]:
    """A dump file (pickle or JSON) as plain data, through the analyzer's refusing unpickler (the one safe
    unpickler: a global, an extension code or a persistent id is a DumpError, never a call)."""
    return decode(path.read_bytes())[0]


class RealDumps:
    """Runs the workload's scenarios on demand, at most two at a time, once per (scenario, extra args)."""

    def __init__(self, root: Path, *, world_size: int = WORLD_SIZE) -> None:
        self.root = root
        self.world_size = world_size
        self.timings: dict[str, float] = {}
        self._pool = ThreadPoolExecutor(max_workers=MAX_CONCURRENT, thread_name_prefix="real-dumps")
        self._runs: dict[tuple[str, tuple[str, ...]], Future[LocalJobResult]] = {}
        self._lock = threading.Lock()

    def __call__(self, scenario: str, *extra_args: str) -> Path:
        """The folder holding the dumps of `scenario` (run with `extra_args`)."""
        return self.run(scenario, *extra_args).dump_dir

    def run(self, scenario: str, *extra_args: str) -> LocalJobResult:
        """The whole result of `scenario`: per-rank endings, logs, dump files."""
        future = self._submit(Scenario(scenario).value, tuple(extra_args))
        self._prefetch_next()
        return future.result()

    load = staticmethod(load_dump)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _submit(self, scenario: str, extra: tuple[str, ...]) -> Future[LocalJobResult]:
        with self._lock:
            key = (scenario, extra)
            if key not in self._runs:
                name = "-".join([scenario, *(a.strip("-") for a in extra)])
                self._runs[key] = self._pool.submit(self._generate, scenario, extra, self.root / name)
            return self._runs[key]

    def _prefetch_next(self) -> None:
        for scenario in Scenario:
            if (scenario.value, ()) not in self._runs:
                self._submit(scenario.value, ())
                return

    def _generate(self, scenario: str, extra: tuple[str, ...], out: Path) -> LocalJobResult:
        result = run_local_job(scenario, self.world_size, out, extra_args=extra, deadline_s=DEADLINE_S)
        self.timings[out.name] = result.duration_s
        return result
