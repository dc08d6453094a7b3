"""Start a job's rank processes through `rank_zygote` (one torch import, a fork per rank), seen as Popen-likes.

    ranks = start_forked(python, module, args, envs, cwd, logs)   # None: the zygote would not fork
    ranks[0].poll(); ranks[0].pid; ranks[0].returncode            # as subprocess.Popen's

Each `ForkedRank` has what `local_launch` uses of a Popen: `pid` (its own session and process group, so
`os.killpg(pid, ...)` reaches it and all it started), `poll()`, `wait()` and `returncode` (the exit status,
or minus the signal's number), read from the zygote's reports. `/proc/<pid>/environ` of a forked rank holds
the zygote's environment, not the rank's (the kernel keeps the one given at exec): nothing may read a rank's
settings there. This module does not import torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import IO

ZYGOTE_MODULE = "frwatch_dev.workloads.rank_zygote"
#: Variables each rank sets for itself after the fork; the zygote starts without them, so that anything read
#: at torch's import (instead of at process-group creation, as torch's source has it) shows in a test.
LATE_PREFIXES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_", "PET_", "TORCH_FR_", "TORCH_NCCL_", "GLOO_")
#: How long the zygote may take to import torch and say whether it forks (a loaded machine: many seconds).
READY_TIMEOUT_S = 120.0


def zygote_environ(envs: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The variables every rank has with the same value, less those each rank sets after the fork."""
    common = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}
    return {k: v for k, v in common.items() if not k.startswith(LATE_PREFIXES)}


class _Zygote:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        assert proc.stdout is not None
        self.out: IO[bytes] = proc.stdout
        os.set_blocking(self.out.fileno(), False)
        self.buf = b""
        self.eof = False
        self.lines: list[str] = []

    def pump(self, timeout_s: float = 0.0) -> None:
        """Read whatever the zygote reported (waiting up to `timeout_s` for something)."""
        if self.eof:
            return
        ready, _, _ = select.select([self.out], [], [], timeout_s)
        if not ready:
            return
        chunk = os.read(self.out.fileno(), 65536)
        if not chunk:
            self.eof = True
            self.proc.wait()
            return
        self.buf += chunk
        *complete, self.buf = self.buf.split(b"\n")
        self.lines += [ln.decode() for ln in complete]


class ForkedRank:
    """One rank forked by the zygote, with the part of subprocess.Popen's interface the launcher uses."""

    def __init__(self, zygote: _Zygote, rank: int, pid: int, ranks: dict[int, ForkedRank]) -> None:
        self._zygote = zygote
        self.rank = rank
        self.pid = pid
        self.returncode: int | None = None
        self._ranks = ranks

    def _take_reports(self) -> None:
        z = self._zygote
        while z.lines:
            kind, rank, value = z.lines.pop(0).split()
            if kind == "exit":
                self._ranks[int(rank)].returncode = int(value)
        if z.eof:  # the zygote is gone: a rank it never reported on ended unseen (it never happens by design)
            for r in self._ranks.values():
                if r.returncode is None:
                    r.returncode = -9
        if all(r.returncode is not None for r in self._ranks.values()):
            z.proc.wait()  # it ends after its last report; reaped, its CPU (and its ranks') counts as ours

    def poll(self) -> int | None:
        if self.returncode is None:
            self._zygote.pump()
            self._take_reports()
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            self._zygote.pump(0.2)
            self._take_reports()
        return self.returncode


def start_forked(
    python: str,
    module: str,
    args: Sequence[str],
    envs: Sequence[Mapping[str, str]],
    cwd: str,
    logs: Sequence[IO[bytes]],
    *,
    zygote_env: Mapping[str, str] | None = None,
) -> tuple[list[ForkedRank] | None, str]:
    """Fork `len(envs)` ranks of `module`; ([ranks], "") or (None, why) when the zygote would not fork."""
    fds = [log.fileno() for log in logs]
    job = {
        "module": module,
        "args": list(args),
        "ranks": [{"env": dict(env), "cwd": cwd, "log_fd": fd} for env, fd in zip(envs, fds, strict=True)],
    }
    proc = subprocess.Popen(
        [python, "-m", ZYGOTE_MODULE],
        env=dict(zygote_env) if zygote_env is not None else zygote_environ(envs),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        pass_fds=fds,
        cwd=cwd,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(job).encode() + b"\n")
    proc.stdin.close()
    zygote = _Zygote(proc)
    ranks: dict[int, ForkedRank] = {}
    deadline = time.monotonic() + READY_TIMEOUT_S
    while len(ranks) < len(envs):
        if zygote.eof or time.monotonic() > deadline:
            why = "the zygote ended before forking every rank" if zygote.eof else "the zygote took too long"
            for r in ranks.values():
                with_killpg(r.pid)
            with_killpg(proc.pid, group=False)
            proc.wait()
            return None, why
        zygote.pump(0.5)
        while zygote.lines and len(ranks) < len(envs):
            line = zygote.lines[0]
            if line.startswith("nofork"):
                proc.wait()
                return None, line.removeprefix("nofork ").strip()
            if not line.startswith("pid "):
                break
            zygote.lines.pop(0)
            _, rank, pid = line.split()
            ranks[int(rank)] = ForkedRank(zygote, int(rank), int(pid), ranks)
    return [ranks[r] for r in range(len(envs))], ""


def with_killpg(pid: int, *, group: bool = True) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
