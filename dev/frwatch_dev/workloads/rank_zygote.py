"""A zygote for local rank processes: import torch once, then fork one child per rank (cheaper than spawning).

`import torch` costs about 2 CPU-seconds a process; a 4-rank job that spawns its ranks pays it four times.
This process pays it once and forks the ranks from its single-threaded self. Run as::

    python -m frwatch_dev.workloads.rank_zygote

with one JSON line on stdin: ``{"module": ..., "args": [...], "ranks": [{"env": {...}, "cwd": ..., "log_fd": N}]}``
(`log_fd`: a file descriptor it inherited). Each child starts its own session, takes its rank's environment
(before anything of torch.distributed reads it: torch reads the Flight Recorder's buffer size when the first
process group is created, the dump prefix when it dumps), its cwd, stdin from /dev/null and stdout/stderr
onto `log_fd`, then runs `module` as ``__main__`` with `args`, as ``python -m module args`` would.

It reports on stdout, a line each: ``nofork <why>`` (it will not fork: the caller spawns instead),
``pid <rank> <pid>`` once a child runs, ``exit <rank> <code>`` when it ended (`code` as subprocess gives
it: the exit status, or minus the signal's number). It ends once every child has.
Forking is refused when this process holds more than one thread (torch's import may start none here; a
thread pool that existed would be lost in the children with its locks held).
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

PRELOAD = ("torch", "torch.distributed")


def thread_count() -> int:
    """The threads of this process as the kernel counts them (Python's and any native pool's)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def report(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run_child(module: str, args: Sequence[str], env: Mapping[str, str], cwd: str, log_fd: int) -> int:
    """In the forked child: become the rank's process, run its module, return its exit status."""
    os.setsid()  # its own process group: the launcher's deadline kills it and all it started
    os.chdir(cwd)
    os.environ.clear()  # putenv/unsetenv underneath: torch's getenv sees the rank's environment
    os.environ.update(env)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(null)
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except BaseException:  # the child reports it as python would, then exits 1
        traceback.print_exc()
        return 1
    return 0


def serve(job: Mapping[str, Any]) -> int:
    for name in (*PRELOAD, str(job["module"])):  # the module's own imports too (run again as __main__)
        __import__(name)
    threads = thread_count()
    if threads != 1:
        report(f"nofork {threads} threads after importing torch")
        return 0
    module = str(job["module"])
    args = [str(a) for a in job["args"]]
    children: dict[int, int] = {}
    log_fds = [int(spec["log_fd"]) for spec in job["ranks"]]
    for rank, spec in enumerate(job["ranks"]):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for fd in log_fds:
                    if fd != int(spec["log_fd"]):
                        os.close(fd)
                code = run_child(module, args, spec["env"], str(spec["cwd"]), int(spec["log_fd"]))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        children[pid] = rank
        report(f"pid {rank} {pid}")
    for fd in log_fds:
        os.close(fd)
    while children:
        pid, status = os.wait()
        if pid in children:
            report(f"exit {children.pop(pid)} {os.waitstatus_to_exitcode(status)}")
    return 0


def main() -> int:
    job = json.loads(sys.stdin.readline())
    sys.stdin.close()
    return serve(job)


if __name__ == "__main__":
    sys.exit(main())
