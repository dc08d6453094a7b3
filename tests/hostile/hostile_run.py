"""Run ``frwatch analyze`` as a user runs it and measure what it cost: wall time, and the peak RSS of its
process tree (the analyzer and every worker it waited for), as the kernel accounts it (``wait4``).

Every hostile case runs under the same stated limits and is held to the same bounds (below); the figures
per case are printed by ``benchmarks/bench_hostile.py``.
"""

from __future__ import annotations

import os
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
PEAK_MB = 360
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
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT, env=env)
        timer = threading.Timer(hard_timeout, proc.kill)
        timer.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        seconds = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(
            code=proc.returncode,
            stdout=out.read().decode("utf-8", "backslashreplace"),
            stderr=err.read().decode("utf-8", "backslashreplace"),
            seconds=seconds,
            peak_mb=usage.ru_maxrss / 1024,  # kB on Linux
        )


def within_bounds(run: Run, seconds: float = SECONDS, peak_mb: float = PEAK_MB) -> None:
    assert run.seconds < seconds, f"{run.seconds:.1f} s (bound {seconds} s)\n{run.stderr}"
    assert run.peak_mb < peak_mb, f"peak RSS {run.peak_mb:.0f} MB (bound {peak_mb} MB)"
