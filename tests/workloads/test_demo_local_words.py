"""Issue 26: `frwatch demo --local` says what the scenario injects (a healthy run says nothing hangs), and
`--kind` with `--local` is refused with a message instead of being ignored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from frwatch_dev.demo.local import INJECTS, header
from frwatch_dev.workloads.scenarios import Scenario

FRWATCH = Path(sys.executable).parent / "frwatch"


def test_every_scenario_says_what_it_injects_and_only_faults_hang() -> None:
    assert set(INJECTS) == set(Scenario)
    for scenario in Scenario:
        text = header(scenario)
        hangs = "hang" in text and "no hang" not in text
        assert hangs == (scenario in {Scenario.SKIP, Scenario.TYPE, Scenario.EXTRA_SAME_SHAPE, Scenario.SUBGROUP,
                                      Scenario.GATHER_ROOT}), (scenario, text)  # fmt: skip
    assert header(Scenario.SKIP) == "rank 1 skips a gradient all_reduce at step 4: every rank hangs"


def test_kind_with_local_is_refused_with_a_message() -> None:
    out = subprocess.run([str(FRWATCH), "demo", "--local", "--kind", "jobset"], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 2 and "--kind needs a cluster" in out.stderr, out.stderr


@pytest.mark.slow
def test_a_healthy_local_run_does_not_say_the_job_hangs() -> None:
    out = subprocess.run([str(FRWATCH), "demo", "--local", "--scenario", "healthy"], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "injected: no fault" in out.stdout and "hangs" not in out.stdout, out.stdout
