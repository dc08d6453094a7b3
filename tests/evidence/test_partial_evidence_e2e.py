"""End to end through ``frwatch analyze DIR``: four real torch 2.13 gloo ranks (handled_ranks.py) whose rank 2
stops calling collectives at step 4 while ranks 1 and 3 logged a traceback they caught and went on from, and
every rank a real torch UserWarning.

- With one dump of the four (rank 1's) and the four logs, the verdict says what rank 1 did and that what the
  others issued is unknown: inconclusive, no culprit, no cause (the handled tracebacks and the warning are
  none). ``--fail-on problem`` passes it, ``--fail-on inconclusive`` does not. (Before: "rank 3 crashed
  first: ValueError", ranks 0,2-3 named as crashed.)
- With every dump, rank 2 is CPU-stuck and the logs still name no cause."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from frwatch_dev.ports import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WORLD = 4


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The four ranks' dumps (``nccl_trace_rank_<r>``) and logs (``rank<r>.log``, stdout and stderr as one)."""
    out = tmp_path_factory.mktemp("handled")
    env = dict(os.environ, WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    env.update(GLOO_SOCKET_IFNAME="lo", TORCH_FR_BUFFER_SIZE="2000", PYTHONUNBUFFERED="1")
    procs = []
    for r in range(WORLD):
        log = (out / f"rank{r}.log").open("wb")
        procs.append(
            subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("handled_ranks.py")), str(out)],
                env=dict(env, RANK=str(r)),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        log.close()
    try:
        codes = [p.wait(timeout=150) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    assert codes == [0] * WORLD, [(out / f"rank{r}.log").read_text()[-2000:] for r in range(WORLD)]
    assert sorted(f.name for f in out.glob("nccl_trace_rank_*")) == [
        f"nccl_trace_rank_{r}" for r in range(WORLD)
    ]
    return out


def _analyze(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frwatch_operator.cli", "analyze", str(folder), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_one_dump_of_four_names_no_one_and_the_handled_tracebacks_are_no_causes(
    run: Path, tmp_path: Path
) -> None:
    logs = sorted(run.glob("rank*.log"))
    assert "ConnectionResetError" in logs[1].read_text() and "UserWarning" in logs[0].read_text()
    for f in [run / "nccl_trace_rank_1", *logs]:
        shutil.copy(f, tmp_path / f.name)
    out = _analyze(tmp_path, "--format", "json")
    assert out.returncode == 0, out.stderr
    v = json.loads(out.stdout)
    assert (v["status"], v["category"], v["culprit_ranks"]) == ("inconclusive", "inconclusive", [])
    assert v["missing_dumps"] == [0, 2, 3] and v["causes"] == []
    assert v["headline"] == (
        "rank 1 waits in all_reduce at collective #4 of pg 0 (default_pg); what ranks 0,2-3 issued is unknown "
        "(they left no usable dump)"
    )
    assert "never" not in v["headline"] + v["summary"] and "crashed first" not in v["summary"]
    assert "rank 3's ValueError at handled_ranks.py" in v["summary"] and "went on to step 3" in v["summary"]
    assert "Collect the dumps of ranks 0,2-3" in v["next_steps"][0]
    # missing evidence is no proven problem, and not enough to pass a stricter gate
    assert _analyze(tmp_path, "--fail-on", "problem").returncode == 0
    assert _analyze(tmp_path, "--fail-on", "inconclusive").returncode == 1


def test_with_every_dump_rank_2_is_cpu_stuck_and_still_no_log_line_is_a_cause(run: Path) -> None:
    out = _analyze(run, "--format", "json")
    assert out.returncode == 0, out.stderr
    v = json.loads(out.stdout)
    assert (v["category"], v["culprit_ranks"], v["culprit_kind"]) == ("missing_rank", [2], "cpu_stuck")
    assert v["causes"] == []
    assert "rank 1's ConnectionResetError at handled_ranks.py" in v["summary"]
