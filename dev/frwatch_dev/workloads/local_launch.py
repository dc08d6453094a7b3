"""Run one faulty training job as local processes, one per rank, on loopback (as a PyTorchJob's pods would).

    result = run_local_job("skip", 4, Path("/tmp/dumps"), culprit=1, timeout_s=4.0)
    result.dumps  # {rank: Path} of the dump files the ranks wrote

or from a shell::

    python -m frwatch_dev.workloads.local_launch --scenario skip --world-size 4 --out /tmp/dumps

Each rank gets the env a Kubeflow PyTorchJob gives its pods (`RANK`, `WORLD_SIZE`, `MASTER_ADDR`,
`MASTER_PORT`, `PET_*`, `LOCAL_RANK`), the Flight Recorder variables (dump prefix `<dump_dir>/nccl_trace_rank_`),
and gloo pinned to loopback. A hard deadline kills whatever is left (each rank is its own process group).
This module does not import torch.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import frwatch_dev
import frwatch_operator
from frwatch_dev.ports import free_port
from frwatch_dev.workloads.forked_ranks import ForkedRank, start_forked
from frwatch_dev.workloads.scenarios import Scenario
from frwatch_operator.constants import (
    DUMP_FILE_PREFIX,
    ENV_FR_BUFFER_SIZE,
    ENV_FR_BUFFER_SIZE_OLD,
    ENV_FR_DUMP_TEMP_FILE,
    ENV_FR_DUMP_TEMP_FILE_OLD,
    ENV_GLOO_SOCKET_IFNAME,
    ENV_LOCAL_RANK,
    ENV_MASTER_ADDR,
    ENV_MASTER_PORT,
    ENV_PET_NNODES,
    ENV_PET_NODE_RANK,
    ENV_PET_NPROC_PER_NODE,
    ENV_RANK,
    ENV_WORLD_SIZE,
    WORKLOAD_DUMP_FLAG_FILE,
)

WORKLOAD_MODULE = "frwatch_dev.workloads.faulty_training"
LOOPBACK = "127.0.0.1"
#: Set to 1: every rank is its own `python -m` (as before the zygote), not a fork of one that imported torch.
ENV_RANKS_SPAWN = "FRWATCH_RANKS_SPAWN"


@dataclass(frozen=True)
class RankOutcome:
    """How one rank process ended."""

    rank: int
    #: The process's exit status (0, 1, ...), or None when it died of a signal or was killed at the deadline.
    exit_code: int | None
    #: The signal's name when it died of one ("SIGABRT": torn down after dumping, or killed by gloo).
    signal: str | None
    killed_at_deadline: bool
    dump: Path | None
    #: Its stdout and stderr, interleaved as written (the workload prints one summary line a rank).
    log: str

    @property
    def summary(self) -> str:
        """The workload's one-line report of what this rank did ("" when it died before printing it)."""
        lines = [ln for ln in self.log.splitlines() if ln.startswith("faulty_training rank=")]
        return lines[-1] if lines else ""

    @property
    def ended(self) -> str:
        if self.killed_at_deadline:
            return "killed at deadline"
        if self.signal:
            return self.signal
        return f"exit {self.exit_code}"


@dataclass(frozen=True)
class LocalJobResult:
    """What one local job did: per-rank endings, its duration and the dump files on disk."""

    scenario: str
    world_size: int
    dump_dir: Path
    duration_s: float
    ranks: tuple[RankOutcome, ...]
    #: The extra arguments the ranks got (after --scenario).
    args: tuple[str, ...] = field(default=())
    #: "fork" (forked by `rank_zygote` after one torch import) or "spawn" (a `python -m` each).
    started_by: str = "spawn"
    #: Why the ranks were spawned when forking was asked for ("" otherwise).
    fork_refused: str = ""

    @property
    def dumps(self) -> dict[int, Path]:
        return {r.rank: r.dump for r in self.ranks if r.dump is not None}

    @property
    def deadline_hit(self) -> bool:
        return any(r.killed_at_deadline for r in self.ranks)

    def outcome(self, rank: int) -> RankOutcome:
        return self.ranks[rank]

    def describe(self) -> str:
        lines = [
            f"scenario {self.scenario}: {self.world_size} ranks in {self.duration_s:.1f}s, dumps in {self.dump_dir}"
        ]
        for r in self.ranks:
            lines.append(f"  rank {r.rank}: {r.ended:<18} dump={'yes' if r.dump else 'no '}  {r.summary}")
        return "\n".join(lines)


def rank_environ(
    base: Mapping[str, str], *, rank: int, world_size: int, port: int, dump_prefix: str
) -> dict[str, str]:
    """The env of one rank's process: a PyTorchJob pod's Kubeflow variables, FR on, gloo on loopback."""
    env = dict(base)
    package_roots = [
        str(Path(m.__file__ or "").resolve().parent.parent) for m in (frwatch_dev, frwatch_operator)
    ]
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*package_roots, env.get("PYTHONPATH", "")) if p)
    env.update(
        {
            ENV_RANK: str(rank),
            ENV_WORLD_SIZE: str(world_size),
            ENV_MASTER_ADDR: LOOPBACK,
            ENV_MASTER_PORT: str(port),
            ENV_LOCAL_RANK: "0",
            ENV_PET_NODE_RANK: str(rank),
            ENV_PET_NPROC_PER_NODE: "1",
            ENV_PET_NNODES: str(world_size),
            ENV_FR_DUMP_TEMP_FILE: dump_prefix,
            ENV_FR_DUMP_TEMP_FILE_OLD: dump_prefix,
            ENV_GLOO_SOCKET_IFNAME: "lo",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if ENV_FR_BUFFER_SIZE not in env and ENV_FR_BUFFER_SIZE_OLD not in env:
        env[ENV_FR_BUFFER_SIZE] = "2000"
    return env


def _kill_group(proc: subprocess.Popen[bytes] | ForkedRank) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_local_job(
    scenario: str | Scenario,
    world_size: int,
    dump_dir: Path,
    *,
    culprit: int | None = None,
    timeout_s: float = 4.0,
    extra_args: Sequence[str] = (),
    deadline_s: float = 60.0,
    end_grace_s: float | None = None,
    separate_dirs: bool = False,
    python: str = sys.executable,
    spawn: bool | None = None,
) -> LocalJobResult:
    """Run `scenario` with `world_size` rank processes; their dumps land in `dump_dir` (created if absent).

    `separate_dirs`: each rank dumps into its own `dump_dir/rank<R>/`, as pods with their own dump volume
    do; the ranks then learn of a failure through the job's TCPStore only (no shared flag file).
    Returns when every rank has ended, or at `deadline_s`, when the ranks still running (and anything they
    started) are killed with SIGKILL and marked `killed_at_deadline`.
    `end_grace_s`: also kill them (the same way) this long after the job settled: a rank has ended and every
    other one has ended or written its dump (as a launcher tears a failed job down once its evidence is
    written). That moment is a sign the ranks give, whatever the machine's load; the deadline stays the
    bound for a job that never settles.
    `spawn`: start each rank as its own `python -m` (True), or fork them all from `rank_zygote`, which
    imports torch once (False: about 2 CPU-seconds less a rank); None: spawn when `FRWATCH_RANKS_SPAWN=1`.
    When the zygote will not fork (it holds threads after torch's import) the ranks are spawned and
    `fork_refused` says why. A forked rank's `/proc/<pid>/environ` shows the zygote's environment.
    """
    scenario = Scenario(scenario)
    dump_dir = Path(dump_dir)
    rank_dirs = [dump_dir / f"rank{r}" if separate_dirs else dump_dir for r in range(world_size)]
    for folder in {dump_dir, *rank_dirs}:
        folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    args = ["--scenario", scenario.value, "--timeout-s", str(timeout_s)]
    if culprit is not None:
        args += ["--culprit", str(culprit)]
    args += list(extra_args)
    started = time.monotonic()
    procs: list[subprocess.Popen[bytes] | ForkedRank] = []
    logs: list[IO[bytes]] = []
    if spawn is None:
        spawn = os.environ.get(ENV_RANKS_SPAWN, "") == "1"
    started_by, fork_refused = "spawn", ""
    try:
        envs = [
            rank_environ(
                os.environ,
                rank=rank,
                world_size=world_size,
                port=port,
                dump_prefix=str(rank_dirs[rank] / DUMP_FILE_PREFIX),
            )
            for rank in range(world_size)
        ]
        logs += [tempfile.TemporaryFile() for _ in range(world_size)]  # noqa: SIM115 - closed in the finally
        if not spawn:
            forked, fork_refused = start_forked(python, WORKLOAD_MODULE, args, envs, os.getcwd(), logs)
            if forked is not None:
                procs += forked
                started_by = "fork"
        for rank in range(world_size) if not procs else ():
            procs.append(
                subprocess.Popen(
                    [python, "-m", WORKLOAD_MODULE, *args],
                    env=envs[rank],
                    stdin=subprocess.DEVNULL,
                    stdout=logs[rank],
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # its own process group: the deadline kills all it started
                )
            )
        settled_at: float | None = None
        while any(proc.poll() is None for proc in procs):
            now = time.monotonic()
            if now - started >= deadline_s:
                break
            if end_grace_s is not None:
                ended = [proc.poll() is not None for proc in procs]
                dumped = [(rank_dirs[r] / f"{DUMP_FILE_PREFIX}{r}").is_file() for r in range(world_size)]
                if any(ended) and all(e or d for e, d in zip(ended, dumped, strict=True)):
                    settled_at = settled_at if settled_at is not None else now
                    if now - settled_at >= end_grace_s:
                        break
            time.sleep(0.05)
        killed: set[int] = set()
        for rank, proc in enumerate(procs):
            if proc.poll() is None:
                killed.add(rank)
                _kill_group(proc)
                proc.wait()
        duration = time.monotonic() - started
        for proc in procs:
            _kill_group(proc)  # anything a rank left behind in its group
        outcomes = []
        for rank, (proc, log) in enumerate(zip(procs, logs, strict=True)):
            log.seek(0)
            code = proc.returncode
            path = rank_dirs[rank] / f"{DUMP_FILE_PREFIX}{rank}"
            outcomes.append(
                RankOutcome(
                    rank=rank,
                    exit_code=code if code is not None and code >= 0 and rank not in killed else None,
                    signal=signal.Signals(-code).name if code is not None and code < 0 else None,
                    killed_at_deadline=rank in killed,
                    dump=path if path.is_file() else None,
                    log=log.read().decode(errors="replace"),
                )
            )
    finally:
        for proc in procs:
            if proc.poll() is None:
                _kill_group(proc)
                proc.wait()
        for log in logs:
            log.close()
    for folder in set(rank_dirs):  # the job's signal, not evidence: keep the folders to dumps
        with contextlib.suppress(OSError):
            (folder / WORKLOAD_DUMP_FLAG_FILE).unlink()
    return LocalJobResult(
        scenario=scenario.value,
        world_size=world_size,
        dump_dir=dump_dir,
        duration_s=duration,
        ranks=tuple(outcomes),
        args=tuple(args),
        started_by=started_by,
        fork_refused=fork_refused,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m frwatch_dev.workloads.local_launch",
        description="Run a faulty torch gloo training job as local rank processes and collect their FR dumps.",
    )
    parser.add_argument("--scenario", required=True, choices=[s.value for s in Scenario])
    parser.add_argument("--world-size", type=int, default=4)
    parser.add_argument("--out", type=Path, required=True, help="folder for the dumps")
    parser.add_argument("--culprit", type=int, default=None)
    parser.add_argument("--timeout-s", type=float, default=4.0, help="the ranks' gloo timeout")
    parser.add_argument("--deadline-s", type=float, default=60.0, help="kill what still runs after this")
    parser.add_argument("--separate-dirs", action="store_true", help="a dump folder per rank, as per pod")
    parser.add_argument("--verbose", action="store_true", help="print every rank's full log")
    parser.add_argument("extra", nargs="*", help="more workload arguments, after --")
    ns = parser.parse_args(argv)
    if ns.world_size < 2:
        parser.error("--world-size must be at least 2")
    result = run_local_job(
        ns.scenario,
        ns.world_size,
        ns.out,
        culprit=ns.culprit,
        timeout_s=ns.timeout_s,
        extra_args=ns.extra,
        deadline_s=ns.deadline_s,
        separate_dirs=ns.separate_dirs,
    )
    print(result.describe())
    if ns.verbose:
        for r in result.ranks:
            print(f"--- rank {r.rank} log\n{r.log.rstrip()}")
    return 1 if result.deadline_hit else 0


if __name__ == "__main__":
    sys.exit(main())
