"""Run ``frwatch analyze`` as a user runs it and measure what it cost: wall time, and the peak RSS of its
process tree (the analyzer and every worker it waited for), as the kernel accounts it (``wait4``).

The analyzer is started by a small launcher process, not by the test process itself: Linux carries the
high-water RSS of the process that forked into the child's own figure when the child execs, so a child of
a 300 MB pytest would report at least 300 MB. The launcher (a bare Python, about 10 MB) forks the analyzer,
waits for it with ``wait4`` and writes its peak RSS to a file.

Every hostile case runs under the same stated limits and is held to the same bounds (below); the figures
per case are printed by ``benchmarks/bench_hostile.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from frwatch_analyzers.verdict import FileProblem, Verdict

ROOT = Path(__file__).resolve().parents[2]

#: The limits every hostile case runs under: a worker may map 256 MB more than it started with, and a file
#: may take 2 s (+0.5 s a MB) to decode and summarise.
WORKER_MB = 256
FILE_SECONDS = 2
LIMITS = ["--worker-memory-mb", str(WORKER_MB), "--file-seconds", str(FILE_SECONDS)]

#: The bounds asserted for every case: the largest process of the tree (the analyzer, or a worker at its
#: limit: about 45 MB of Python plus the 256 MB budget) stays under PEAK_MB, and the verdict comes within
#: SECONDS on a loaded 2-core machine (most cases take under a second).
PEAK_MB = 320
SECONDS = 30.0


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float
    peak_mb: float

    @property
    def verdict(self) -> Verdict:
        return Verdict.model_validate_json(self.stdout)

    def bad(self, name_part: str) -> FileProblem:
        """The one bad_files entry whose file name contains ``name_part``."""
        found = [p for p in self.verdict.bad_files if name_part in p.file]
        assert len(found) == 1, (name_part, self.verdict.bad_files)
        return found[0]


_LAUNCHER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_pid, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def analyze(
    path: Path | str,
    *args: str,
    limits: list[str] | None = None,
    env: dict[str, str] | None = None,
    hard_timeout: float = 180,
) -> Run:
    """``python -m frwatch_analyzers.cli PATH ARGS`` under ``LIMITS``; killed after ``hard_timeout`` s."""
    cmd = [
        sys.executable,
        "-m",
        "frwatch_analyzers.cli",
        str(path),
        *(LIMITS if limits is None else limits),
        *args,
    ]
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory() as tmp,
    ):
        rss_file = os.path.join(tmp, "maxrss")
        started = time.monotonic()
        launcher = [sys.executable, "-S", "-c", _LAUNCHER, rss_file, *cmd]
        proc = subprocess.Popen(launcher, stdout=out, stderr=err, cwd=ROOT, env=env, start_new_session=True)
        timer = threading.Timer(hard_timeout, os.killpg, (proc.pid, signal.SIGKILL))
        timer.start()
        try:
            proc.wait()
        finally:
            timer.cancel()
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        peak_kb = int(Path(rss_file).read_text() or 0) if os.path.exists(rss_file) else 0
        return Run(
            code=proc.returncode,
            stdout=out.read().decode("utf-8", "backslashreplace"),
            stderr=err.read().decode("utf-8", "backslashreplace"),
            seconds=seconds,
            peak_mb=peak_kb / 1024,  # kB on Linux
        )


def within_bounds(run: Run, seconds: float = SECONDS, peak_mb: float = PEAK_MB) -> None:
    assert run.seconds < seconds, f"{run.seconds:.1f} s (bound {seconds} s)\n{run.stderr}"
    assert run.peak_mb < peak_mb, f"peak RSS {run.peak_mb:.0f} MB (bound {peak_mb} MB)"
