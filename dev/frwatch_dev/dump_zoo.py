"""The dump zoo: real Flight Recorder dumps of real torch releases, kept as test fixtures.

    scripts/dump_zoo 2.14.1            # one release: its venv, its four jobs, its fixtures
    scripts/dump_zoo 2.8.0 2.13.0 --scenario skip

For each release this makes (once) a venv under ``~/.cache/frwatch-zoo/venvs/torch-<release>`` with only
``torch==<release>`` in it (pip, with this machine's pip configuration: a local wheel where one lies on disk,
else the public index's build and what it pulls in), then runs small real gloo jobs with
``frwatch_dev.workloads`` (4 rank processes on loopback, that venv's python) and keeps every rank's dump
under ``tests/fixtures/zoo/<release>/<scenario>/`` with a ``MANIFEST.json``: the torch build, the exact rank
command and Flight Recorder variables, the date, each file's size and sha256, how each rank ended, and the
scenario's truth (what the job did, known from the workload, not from the analyzer). Nothing here imports
torch; the ranks do.

Flight Recorder records gloo collectives from torch 2.8.0 on: 2.7.1's libtorch_cpu has no ``TORCH_FR_*``
variable and its gloo work carries no trace id; 2.8.0 has both and the ``_dump_fr_trace`` binding the
workload dumps through. An older release is refused before its venv is made.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from frwatch_dev.workloads.local_launch import WORKLOAD_MODULE, run_local_job
from frwatch_dev.workloads.scenarios import DEFAULT_CHECK_EVERY, DEFAULTS, Scenario
from frwatch_operator.constants import DUMP_FILE_PREFIX, ENV_FR_BUFFER_SIZE

#: The oldest release whose gloo process groups feed Flight Recorder (see the module's docstring).
OLDEST_RELEASE = (2, 8, 0)
WORLD_SIZE = 4
#: The ring holds far more than these jobs record (about 15 entries a rank): no entry is dropped.
BUFFER_SIZE = 64
GLOO_TIMEOUT_S = 4.0
DEADLINE_S = 90.0
MANIFEST = "MANIFEST.json"
REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "zoo"
CACHE = Path(os.environ.get("FRWATCH_ZOO_CACHE", Path.home() / ".cache" / "frwatch-zoo"))


@dataclass(frozen=True)
class Truth:
    """What the job did, from the workload's own schedule (never read back from the dumps)."""

    category: str
    culprit_ranks: list[int]
    #: The group and collective_seq_id where the ranks part (None: they never do).
    earliest_pg: str | None
    earliest_seq: int | None
    story: str


def gradient_sync_seq(step: int) -> int:
    """collective_seq_id of step `step`'s gradient all_reduce in the default group.

    The workload's schedule: the initial parameter broadcast (#1), then per step one gradient all_reduce,
    and after every ``DEFAULT_CHECK_EVERY``-th step one control broadcast.
    """
    return 1 + step + (step - 1) // DEFAULT_CHECK_EVERY


@dataclass(frozen=True)
class ZooScenario:
    name: str
    workload: Scenario
    truth: Truth
    #: None: the workload scenario's default rank and step
    culprit_rank: int | None = None
    step: int | None = None

    @property
    def culprit(self) -> int:
        return DEFAULTS[self.workload].culprit if self.culprit_rank is None else self.culprit_rank

    @property
    def fault_step(self) -> int:
        return DEFAULTS[self.workload].fault_step if self.step is None else self.step

    @property
    def extra_args(self) -> list[str]:
        return [] if self.step is None else ["--fault-step", str(self.step)]


def _scenarios() -> dict[str, ZooScenario]:
    skip, stuck, crash, sub = (
        DEFAULTS[s] for s in (Scenario.SKIP, Scenario.CPU_STUCK, Scenario.CRASH, Scenario.SUBGROUP)
    )
    return {
        "healthy": ZooScenario(
            "healthy",
            Scenario.HEALTHY,
            Truth("healthy", [], None, None, "every rank trains 8 steps and dumps at exit"),
        ),
        "skip": ZooScenario(
            "skip",
            Scenario.SKIP,
            Truth(
                "desync",
                [skip.culprit],
                "0",
                gradient_sync_seq(skip.fault_step),
                f"rank {skip.culprit} skips step {skip.fault_step}'s gradient all_reduce; every rank hangs",
            ),
        ),
        "crash": ZooScenario(
            "crash",
            Scenario.CRASH,
            Truth(
                "missing_rank",
                [crash.culprit],
                "0",
                gradient_sync_seq(crash.fault_step),
                f"rank {crash.culprit} dies of a Python exception in its data loader at step"
                f" {crash.fault_step} (no dump); the others fail in that step's all_reduce",
            ),
        ),
        "hang": ZooScenario(
            "hang",
            Scenario.CPU_STUCK,
            Truth(
                "missing_rank",
                [stuck.culprit],
                "0",
                gradient_sync_seq(stuck.fault_step),
                f"rank {stuck.culprit} blocks in its data loader at step {stuck.fault_step}; the others"
                " time out in that step's all_reduce",
            ),
        ),
        "subgroup": ZooScenario(
            "subgroup",
            Scenario.SUBGROUP,
            Truth(
                "missing_rank",
                [sub.culprit],
                subgroup_pg(sub.culprit),
                subgroup_seq(sub.fault_step),
                f"pairs {{0,1}} and {{2,3}} each all_reduce in their own subgroup every step; rank"
                f" {sub.culprit} skips step {sub.fault_step}'s and moves on to the default group's gradient"
                f" all_reduce, where the other pair and it hang; rank {sub.culprit ^ 1} waits in the subgroup's",
            ),
        ),
        # rank 1 skips its pair's first all_reduce: it never calls its subgroup, so no entry of its own names
        # the group (2.14.1's pg_config lists '[0, 1]' for it, as for every rank of a pair: not its world)
        "subgroup_never_called": ZooScenario(
            "subgroup_never_called",
            Scenario.SUBGROUP,
            Truth(
                "missing_rank",
                [1],
                subgroup_pg(1),
                subgroup_seq(1),
                "pairs {0,1} and {2,3} each all_reduce in their own subgroup every step; rank 1 skips step 1's"
                " (it never calls its subgroup) and waits in the default group's gradient all_reduce with"
                " ranks 2 and 3; rank 0 waits in the subgroup's first all_reduce",
            ),
            culprit_rank=1,
            step=1,
        ),
    }


def subgroup_pg(rank: int) -> str:
    """The name (pg id) of `rank`'s pair in the subgroup workload: ``new_group`` numbers the groups it makes
    after the default group (0), in order, on every rank: {0,1} is 1 and {2,3} is 2."""
    return str(rank // 2 + 1)


def subgroup_seq(step: int) -> int:
    """collective_seq_id of step `step`'s all_reduce in a pair's subgroup: its only call, one per step."""
    return step


SCENARIOS = _scenarios()


def parse_release(text: str) -> tuple[int, int, int]:
    parts = text.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"a torch release is X.Y.Z: {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])


def venv_python(release: str, cache: Path = CACHE) -> Path:
    """The python of `release`'s venv, made (once) with only torch installed."""
    if parse_release(release) < OLDEST_RELEASE:
        raise ValueError(
            f"torch {release} has no Flight Recorder for gloo (it arrived in"
            f" {'.'.join(map(str, OLDEST_RELEASE))})"
        )
    venv = cache / "venvs" / f"torch-{release}"
    python = venv / "bin" / "python"
    if torch_version(python).split("+")[0] == release:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--progress-bar", "off", f"torch=={release}"], check=True
    )
    found = torch_version(python)
    if found.split("+")[0] != release:
        raise RuntimeError(f"{venv}: torch {found or 'missing'} after installing torch=={release}")
    return python


def torch_version(python: Path) -> str:
    """The torch build `python` imports ("" when it has none)."""
    if not python.exists():
        return ""
    done = subprocess.run(
        [str(python), "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    return done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else ""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_fixture(release: str, scenario: ZooScenario, python: Path, root: Path = FIXTURES) -> Path:
    """Run `scenario` on `python`'s torch; keep its dumps and a MANIFEST under root/release/name."""
    build = torch_version(python)
    out = root / release / scenario.name
    before = os.environ.get(ENV_FR_BUFFER_SIZE)
    with tempfile.TemporaryDirectory(prefix="frwatch-zoo-") as tmp:
        os.environ[ENV_FR_BUFFER_SIZE] = str(BUFFER_SIZE)  # the ranks' env starts from this process's
        try:
            result = run_local_job(
                scenario.workload,
                WORLD_SIZE,
                Path(tmp),
                culprit=scenario.culprit,
                extra_args=scenario.extra_args,
                timeout_s=GLOO_TIMEOUT_S,
                deadline_s=DEADLINE_S,
                python=str(python),
            )
        finally:
            if before is None:
                os.environ.pop(ENV_FR_BUFFER_SIZE, None)
            else:
                os.environ[ENV_FR_BUFFER_SIZE] = before
        if result.deadline_hit:
            raise RuntimeError(
                f"torch {release} {scenario.name}: ranks still ran at the deadline\n{result.describe()}"
            )
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        files = {}
        for rank, path in sorted(result.dumps.items()):
            shutil.copyfile(path, out / path.name)
            files[path.name] = {"rank": rank, "bytes": path.stat().st_size, "sha256": sha256(path)}
    manifest = {
        "torch_release": release,
        "torch_version": build,
        "python": sys.version.split()[0],
        "made_by": f"scripts/dump_zoo {release} --scenario {scenario.name}",
        "rank_command": shlex.join(["python", "-m", WORKLOAD_MODULE, *result.args]),
        "rank_env": {
            ENV_FR_BUFFER_SIZE: str(BUFFER_SIZE),
            "TORCH_FR_DUMP_TEMP_FILE": f"<dir>/{DUMP_FILE_PREFIX}",
            "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT": f"0..{WORLD_SIZE - 1}/{WORLD_SIZE}/127.0.0.1/<free port>",
        },
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "world_size": WORLD_SIZE,
        "scenario": scenario.name,
        "workload_scenario": scenario.workload.value,
        "truth": asdict(scenario.truth),
        "ranks": {str(r.rank): r.ended for r in result.ranks},
        "files": files,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/dump_zoo", description="Real Flight Recorder dumps of torch releases, as test fixtures."
    )
    parser.add_argument("releases", nargs="+", help="torch releases, X.Y.Z (2.8.0 or newer)")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="default: all")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="default: %(default)s")
    ns = parser.parse_args(argv)
    names = ns.scenario or list(SCENARIOS)
    for release in ns.releases:
        try:
            python = venv_python(release)
        except (ValueError, RuntimeError, subprocess.CalledProcessError) as exc:
            print(f"dump_zoo: torch {release}: {exc}", file=sys.stderr)
            return 1
        for name in names:
            out = make_fixture(release, SCENARIOS[name], python, ns.out)
            print(f"dump_zoo: torch {release} {name}: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
