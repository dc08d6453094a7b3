"""What the verdict loop tells the metrics: a short code for each node left alone, and one call per thing a
pass did (the handler's ``record``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from vl_builders import hardware_verdict

from frwatch_analyzers.verdict import Category, Status, Verdict
from frwatch_operator import constants as c
from frwatch_operator.analysis.steps import Observed
from frwatch_operator.handlers.verdict_loop import record
from frwatch_operator.metrics import Metrics
from frwatch_operator.remediation.apply import RemediationResult
from frwatch_operator.remediation.breaker import BreakerState, BreakerStatus
from frwatch_operator.remediation.cordon_policy import CordonPlan, NodeView, Rules, plan_cordons

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
ON, DRY, OFF = Rules(enabled=True, dry_run=False), Rules(enabled=True, dry_run=True), Rules()
JOB_NODES = [f"gpu-{i}" for i in range(8)]


def codes(verdict: Verdict, rules: Rules, nodes: dict[str, NodeView | None], *, cluster_nodes: int = 100,
          breaker: BreakerState | None = None) -> list[str]:  # fmt: skip
    plan = plan_cordons(
        verdict=verdict, incident="ns/i", job_nodes=JOB_NODES, nodes=nodes, breaker=breaker or BreakerState(),
        cluster_nodes=cluster_nodes, rules=rules, now=NOW,
    )  # fmt: skip
    return RemediationResult(plan).skipped(verdict, rules)


@pytest.mark.parametrize(
    ("nodes", "rules", "breaker", "expected"),
    [
        ({"gpu-3": NodeView("gpu-3", labels={c.LABEL_NODE_OPT_OUT: c.REMEDIATION_DISABLED})}, ON, None, ["opted_out"]),
        ({"gpu-3": None}, ON, None, ["no_such_node"]),
        ({"gpu-3": NodeView("gpu-3", unschedulable=True)}, ON, None, ["already_cordoned"]),
        ({"gpu-3": NodeView("gpu-3", annotations={c.ANN_CORDONED_BY: c.CORDONED_BY_FRWATCH,
                                                  c.ANN_CORDON_INCIDENT: "ns/i"})}, ON, None, ["uncordoned_by_person"]),
        ({"gpu-3": NodeView("gpu-3")}, ON, BreakerState(BreakerStatus.TRIPPED, NOW - timedelta(hours=1), "x"), ["breaker"]),
        ({"gpu-3": NodeView("gpu-3")}, DRY, None, []),  # would cordon: nothing skipped
    ],
)  # fmt: skip
def test_each_node_left_alone_has_a_short_code(
    nodes: dict[str, NodeView | None], rules: Rules, breaker: BreakerState | None, expected: list[str]
) -> None:
    assert codes(hardware_verdict("gpu-3"), rules, nodes, breaker=breaker) == expected


def test_the_cap_skips_the_nodes_past_it() -> None:
    nodes: dict[str, NodeView | None] = {"gpu-1": NodeView("gpu-1"), "gpu-2": NodeView("gpu-2")}
    capped = Rules(enabled=True, dry_run=False, max_nodes_per_incident=1)
    assert codes(hardware_verdict("gpu-1", "gpu-2", ranks=[1, 2]), capped, nodes) == ["cap"]


def test_the_gate_leaves_every_suspect_alone_with_its_reason() -> None:
    software = Verdict(status=Status.problem, category=Category.missing_rank, hardware_class=False,
                       headline="rank 1 skipped", culprit_ranks=[1], suspect_nodes=["gpu-1", "gpu-2"])  # fmt: skip
    gated = RemediationResult(CordonPlan(DRY.mode, (), "stop", BreakerState(), False))
    assert gated.skipped(software, DRY) == ["software_fault", "software_fault"]
    assert gated.skipped(software, OFF) == []  # remediation off: no node was considered
    many = hardware_verdict("gpu-1", "gpu-2", "gpu-3", ranks=[1, 2, 3])
    assert gated.skipped(many, ON) == ["too_many_suspects"] * 3


def test_record_makes_one_call_per_thing_a_pass_did() -> None:
    m = Metrics()
    record(m, Observed())  # a pass that only looked: nothing moves
    record(m, Observed(analyzer_job="deadline"))
    record(m, Observed(analyzer_job="succeeded", category="gpu_hang", hardware_class=True, seconds_since_detection=42,
                       would_cordon=2, skipped=("cap", "opted_out"), breaker_tripped=True))  # fmt: skip
    text = m.exposition().decode()
    for line in (
        'frwatch_analyzer_jobs_total{outcome="deadline"} 1.0',
        'frwatch_analyzer_jobs_total{outcome="succeeded"} 1.0',
        'frwatch_verdicts_total{category="gpu_hang",hardware_class="true"} 1.0',
        "frwatch_verdict_latency_seconds_sum 42.0",
        'frwatch_cordons_total{mode="dry_run"} 2.0',
        'frwatch_cordons_skipped_total{reason="cap"} 1.0',
        'frwatch_cordons_skipped_total{reason="opted_out"} 1.0',
        "frwatch_remediation_breaker_tripped 1.0",
    ):
        assert line in text, line
    assert 'mode="applied"' not in text
