"""Start a small real torch gloo job as local processes for the live-watch tests, and always stop it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from frwatch_dev.ports import free_port
from frwatch_dev.workloads.local_launch import rank_environ

PROGRAM = Path(__file__).with_name("live_rank_program.py")


@dataclass
class LiveJob:
    procs: list[subprocess.Popen[bytes]]
    logs: list[IO[bytes]]

    def log(self, rank: int) -> str:
        self.logs[rank].seek(0)
        return self.logs[rank].read().decode(errors="replace")

    def running(self) -> list[bool]:
        return [p.poll() is None for p in self.procs]

    def wait(self, timeout_s: float) -> list[int | None]:
        out: list[int | None] = []
        for p in self.procs:
            try:
                out.append(p.wait(timeout=timeout_s))
            except subprocess.TimeoutExpired:
                out.append(None)
        return out


def with_pythonpath_appended(base: Mapping[str, str], folder: Path) -> dict[str, str]:
    """The env with ``folder`` appended to PYTHONPATH, as the webhook does (the user's entries first)."""
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), str(folder)) if p)
    return env


@contextlib.contextmanager
def live_job(
    world_size: int,
    work: Path,
    args: Sequence[str],
    env: Mapping[str, str],
    program: Path = PROGRAM,
    rank_env: Mapping[int, Mapping[str, str | None]] | None = None,
) -> Iterator[LiveJob]:
    """``world_size`` ranks of ``program``; ``rank_env`` changes one rank's environment (None removes a key)."""
    port = free_port()
    job = LiveJob(procs=[], logs=[])
    try:
        for rank in range(world_size):
            log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
            job.logs.append(log)
            renv = rank_environ(
                env, rank=rank, world_size=world_size, port=port, dump_prefix=str(work / "fr_")
            )
            for key, value in ((rank_env or {}).get(rank) or {}).items():
                if value is None:
                    renv.pop(key, None)
                else:
                    renv[key] = value
            job.procs.append(
                subprocess.Popen(
                    [sys.executable, str(program), *args],
                    env=renv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        yield job
    finally:
        for p in job.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for log in job.logs:
            log.close()
