"""A zygote for local rank processes: import torch once, then fork one child per rank (cheaper than spawning).

`import torch` costs about 2 CPU-seconds a process; a 4-rank job that spawns its ranks pays it four times.
This process pays it once and forks the ranks from its single-threaded self. Run as::

    python -m frwatch_dev.workloads.rank_zygote

with one JSON line on stdin: ``{"module": ..., "args": [...], "ranks": [{"env": {...}, "cwd": ..., "log_fd": N}]}``
(`log_fd`: a file descriptor it inherited). Each child starts its own session, takes its rank's environment
(before anything of torch.distributed reads it: torch reads the Flight Recorder's buffer size when the first
process group is created, the dump prefix when it dumps), its cwd, stdin from /dev/null and stdout/stderr
onto `log_fd`, unwinds the zygote's frames and runs `module` as ``__main__`` with `args` from `atexit`: the
Python stacks Flight Recorder records then hold the module's frames and runpy's only, as under
``python -m module args``. The module is expected to end its process itself (the workload's `finish`
calls os._exit); should it return or raise instead, the child's status is 1 (a usage error's 2 is lost).

It reports on stdout, a line each: ``nofork <why>`` (it will not fork: the caller spawns instead),
``pid <rank> <pid>`` once a child runs, ``exit <rank> <code>`` when it ended (`code` as subprocess gives
it: the exit status, or minus the signal's number). It ends once every child has.
Forking is refused when this process holds more than one thread (torch's import may start none here; a
thread pool that existed would be lost in the children with its locks held).
"""

from __future__ import annotations

import atexit
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


class BecomeRank(BaseException):
    """Raised in a forked child once it is its rank: unwinds the zygote's frames before the module runs."""


def become_rank(module: str, args: Sequence[str], env: Mapping[str, str], cwd: str, log_fd: int) -> None:
    """In the forked child: take the rank's session, cwd, environment and stdio; run `module` at exit.

    The module runs from `atexit` (`runpy.run_module` called from C, after this process's own frames have
    unwound), so the Python stack Flight Recorder records for each collective is the workload's and runpy's
    alone, as under ``python -m``: the analyzer takes a dump's non-library frames as its call site.
    """
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
    # as under `python -m`, the module is __main__ only: the zygote's preload of it under its name is forgotten
    # (else runpy warns in the rank's log that it was found in sys.modules)
    sys.modules.pop(module, None)
    package, _, name = module.rpartition(".")
    if package in sys.modules and hasattr(sys.modules[package], name):
        delattr(sys.modules[package], name)
    atexit.register(runpy.run_module, module, run_name="__main__", alter_sys=True)


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
            try:
                for fd in log_fds:
                    if fd != int(spec["log_fd"]):
                        os.close(fd)
                become_rank(module, args, spec["env"], str(spec["cwd"]), int(spec["log_fd"]))
            except BaseException:  # never back into the zygote's loop
                traceback.print_exc()
                os._exit(1)
            raise BecomeRank
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
    try:
        return serve(job)
    except BecomeRank:
        return 1  # the status should the module return instead of ending the process itself (it does not)


if __name__ == "__main__":
    sys.exit(main())
