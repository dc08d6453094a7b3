"""The real operator fans the analysis out: with ``analyzer.ranksPerPod`` 2, a 4-rank job's Incident first
runs the Indexed map Job (2 shards), then the analyzer Job reduces; the verdict is the one the single-pod
path gives (tests/e2e/test_e2e.py: rank 1 skipped a collective). On a real cluster this needs the operator
installed with ``--set analyzer.ranksPerPod=2`` (``FRWATCH_E2E_FANOUT=1`` says it is)."""

from __future__ import annotations

import pytest
from e2e_helpers import WORKLOAD, Target

from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_a_four_rank_job_fans_out_and_gets_the_single_pod_verdict(fanout_target: Target) -> None:
    target = fanout_target
    name = target.submit([*WORKLOAD, "--scenario", "skip"])
    ann = target.wait_verdict(name, timeout=180)
    incident = target.reported_incident(name)
    assert ann.get(c.ANN_SUSPECT_RANKS) == "1", (ann, incident["status"], target.diagnostics())
    status = incident["status"]
    assert status["analysisStep"] == "Reduce" and status["analyzerMapJob"].endswith("-map"), status
    jobs = target.analyzer_jobs(incident)
    assert status["analyzerMapJob"] in jobs and status["analyzerJob"] in jobs, jobs
    started = target.events(incident["metadata"]["name"], "AnalyzerStarted")
    assert any("4 ranks in 2 map pods" in m for m in started), started
