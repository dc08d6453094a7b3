"""The cordon policy as a table: each row a situation, the plan it must give (pure: no cluster)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from vl_builders import hardware_verdict

from frwatch_analyzers.verdict import Category, Status, Verdict
from frwatch_operator import constants as c
from frwatch_operator.config import RemediationSettings
from frwatch_operator.remediation.breaker import (
    BreakerState,
    BreakerStatus,
    CordonRecord,
    from_data,
    to_data,
    try_cordon,
)
from frwatch_operator.remediation.cordon_policy import (
    Action,
    Mode,
    NodeView,
    Rules,
    effective_rules,
    plan_cordons,
)
from frwatch_operator.resources import CaptureSettings, ComputeResources

NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
INCIDENT = "team-a/llama-0"
JOB_NODES = [f"gpu-{i}" for i in range(8)]
ON = Rules(enabled=True, dry_run=False)
DRY = Rules(enabled=True, dry_run=True)
OFF = Rules()
MINE = {c.ANN_CORDONED_BY: c.CORDONED_BY_FRWATCH, c.ANN_CORDON_INCIDENT: INCIDENT}


def node(name: str, *, unschedulable: bool = False, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None) -> NodeView:  # fmt: skip
    return NodeView(
        name, labels or {}, annotations or {}, unschedulable, uid=f"uid-{name}", resource_version="7"
    )


def software(category: Category) -> Verdict:
    return Verdict(status=Status.problem, category=category, hardware_class=False, headline="rank 1 skipped all_reduce",
                   culprit_ranks=[1], suspect_nodes=["gpu-1"])  # fmt: skip


@dataclass
class Row:
    verdict: Verdict
    rules: Rules
    expect_mode: Mode
    expect: dict[str, str]  #: node -> "cordon" or a fragment of the skip reason; {} = no per-node decision
    summary: str = ""  #: a fragment of the plan's summary
    nodes: dict[str, NodeView | None] = field(default_factory=dict)
    breaker: BreakerState = field(default_factory=BreakerState)
    cluster_nodes: int = 100
    job_nodes: list[str] = field(default_factory=lambda: list(JOB_NODES))


TABLE = {
    "off by default: nothing, whatever the verdict": Row(
        hardware_verdict("gpu-3"), Rules(), Mode.OFF, {}, "remediation is off"),
    "dry-run by default when on: the plan only": Row(
        hardware_verdict("gpu-3"), Rules(enabled=True), Mode.DRY_RUN, {"gpu-3": "cordon"}, "dry-run: would cordon gpu-3"),
    "on: cordon the suspect": Row(
        hardware_verdict("gpu-3"), ON, Mode.CORDON, {"gpu-3": "cordon"}, "cordoned gpu-3"),
    "network hang is hardware-class too": Row(
        hardware_verdict("gpu-3", category=Category.network_hang), ON, Mode.CORDON, {"gpu-3": "cordon"}),
    "software verdict (desync) never cordons": Row(
        software(Category.desync), ON, Mode.CORDON, {}, "not hardware-class"),
    "software verdict (missing rank) never cordons": Row(
        software(Category.missing_rank), ON, Mode.CORDON, {}, "not hardware-class"),
    "hardware verdict without suspect nodes": Row(
        hardware_verdict(), ON, Mode.CORDON, {}, "names no suspect node"),
    "per-incident cap: 2 of 2 suspects, cap 1": Row(
        hardware_verdict("gpu-3", "gpu-5", ranks=[3, 5]), Rules(enabled=True, dry_run=False, max_nodes_per_incident=1,
        max_suspect_share=0.5), Mode.CORDON, {"gpu-3": "cordon", "gpu-5": "per-incident cap of 1"}),
    "per-incident cap counts nodes already cordoned for it": Row(
        hardware_verdict("gpu-3", "gpu-5", ranks=[3, 5]), Rules(enabled=True, dry_run=False, max_nodes_per_incident=1,
        max_suspect_share=0.5), Mode.CORDON, {"gpu-3": "already cordoned by frwatch", "gpu-5": "per-incident cap"},
        nodes={"gpu-3": node("gpu-3", unschedulable=True, annotations=MINE)}),
    "too many suspects: fabric or software, no action": Row(
        hardware_verdict("gpu-1", "gpu-2", "gpu-3", ranks=[1, 2, 3]), ON, Mode.CORDON, {},
        "3 of the job's 8 nodes are suspects"),
    "too many suspects without a manifest (only the suspects known)": Row(
        hardware_verdict("gpu-3"), ON, Mode.CORDON, {}, "1 of the job's 1 nodes", job_nodes=[]),
    "manual uncordon respected for the same incident": Row(
        hardware_verdict("gpu-3"), ON, Mode.CORDON, {"gpu-3": "a person uncordoned it"},
        nodes={"gpu-3": node("gpu-3", unschedulable=False, annotations=MINE)}),
    "a node uncordoned after ANOTHER incident may be cordoned again": Row(
        hardware_verdict("gpu-3"), ON, Mode.CORDON, {"gpu-3": "cordon"},
        nodes={"gpu-3": node("gpu-3", annotations={**MINE, c.ANN_CORDON_INCIDENT: "team-a/llama-7"})}),
    "opted-out node": Row(
        hardware_verdict("gpu-3"), ON, Mode.CORDON, {"gpu-3": "opted out"},
        nodes={"gpu-3": node("gpu-3", labels={c.LABEL_NODE_OPT_OUT: c.REMEDIATION_DISABLED})}),
    "a node cordoned by a person is left as it is": Row(
        hardware_verdict("gpu-3"), ON, Mode.CORDON, {"gpu-3": "not by frwatch"},
        nodes={"gpu-3": node("gpu-3", unschedulable=True)}),
    "no such node": Row(
        hardware_verdict("gpu-3"), ON, Mode.CORDON, {"gpu-3": "no such node"}, nodes={"gpu-3": None}),
    "breaker trips: 2 of 4 nodes cordoned in the window, a third would pass 50%": Row(
        hardware_verdict("gpu-3"), ON, Mode.CORDON, {"gpu-3": "circuit breaker TRIPPED now"}, cluster_nodes=4,
        breaker=BreakerState(cordons=(CordonRecord("a", "x/1", NOW - timedelta(minutes=1)),
                                      CordonRecord("b", "x/2", NOW - timedelta(minutes=2))))),
    "breaker: cordons older than the window do not count": Row(
        hardware_verdict("gpu-3"), ON, Mode.CORDON, {"gpu-3": "cordon"}, cluster_nodes=4,
        breaker=BreakerState(cordons=(CordonRecord("a", "x/1", NOW - timedelta(minutes=6)),
                                      CordonRecord("b", "x/2", NOW - timedelta(minutes=9))))),
    "breaker tripped earlier stays tripped (until a person resets it)": Row(
        hardware_verdict("gpu-3"), ON, Mode.CORDON, {"gpu-3": "circuit breaker TRIPPED since"},
        breaker=BreakerState(BreakerStatus.TRIPPED, NOW - timedelta(hours=3), "5 of 8 nodes")),
    "dry-run shows the breaker would refuse": Row(
        hardware_verdict("gpu-3"), DRY, Mode.DRY_RUN, {"gpu-3": "circuit breaker TRIPPED"}, cluster_nodes=1),
}  # fmt: skip


@pytest.mark.parametrize("row", TABLE.values(), ids=TABLE.keys())
def test_cordon_policy(row: Row) -> None:
    nodes = {n: node(n) for n in row.verdict.suspect_nodes} | row.nodes
    plan = plan_cordons(
        verdict=row.verdict, incident=INCIDENT, job_nodes=row.job_nodes, nodes=nodes, breaker=row.breaker,
        cluster_nodes=row.cluster_nodes, rules=row.rules, now=NOW,
    )  # fmt: skip
    assert plan.mode is row.expect_mode
    got = {d.node: ("cordon" if d.action is Action.CORDON else d.reason) for d in plan.decisions}
    assert set(got) == set(row.expect), plan.summary
    for name, want in row.expect.items():
        assert (got[name] == "cordon") if want == "cordon" else (want in got[name]), (name, got[name])
    assert row.summary in plan.summary
    assert plan.cordons == (row.expect_mode is Mode.CORDON and "cordon" in row.expect.values())


def test_a_policy_only_narrows_the_operator() -> None:
    capture = CaptureSettings(
        buffer_size=2000, bucket="b", prefix="p", collection_deadline_seconds=60, analyzer_image="i",
        analyzer_resources=ComputeResources(), analyzer_deadline_seconds=60, agent_resources=ComputeResources(),
        remediation_enabled=True, remediation_dry_run=False, max_nodes_per_incident=9,
    )  # fmt: skip
    assert effective_rules(RemediationSettings(), capture).mode is Mode.OFF  # the operator's off wins
    operator_on = RemediationSettings(enabled=True, dry_run=True, max_nodes_per_incident=2)
    assert effective_rules(operator_on, capture).mode is Mode.DRY_RUN  # the operator's dry-run wins
    rules = effective_rules(
        RemediationSettings(enabled=True, dry_run=False, max_nodes_per_incident=2), capture
    )
    assert rules.mode is Mode.CORDON and rules.max_nodes_per_incident == 2  # the smaller cap wins


# --- the breaker's state: transitions and the ConfigMap form ------------------------------------------------


def test_breaker_budget_and_trip_latch() -> None:
    window = timedelta(minutes=5)
    state = BreakerState()
    for i in range(5):
        decision = try_cordon(
            state, node=f"n{i}", incident="ns/i", now=NOW, window=window, share=0.5, cluster_nodes=10
        )
        assert decision.allowed
        state = decision.state
    refused = try_cordon(
        state, node="n5", incident="ns/i", now=NOW, window=window, share=0.5, cluster_nodes=10
    )
    assert not refused.allowed and refused.state.tripped and "6 of 10" in refused.reason
    later = NOW + timedelta(hours=1)  # the window is empty again, but a tripped breaker stays tripped
    assert not try_cordon(refused.state, node="n6", incident="ns/j", now=later, window=window, share=0.5,
                          cluster_nodes=10).allowed  # fmt: skip


def test_breaker_state_survives_its_configmap_form() -> None:
    tripped = try_cordon(
        BreakerState(cordons=(CordonRecord("a", "ns/1", NOW),)), node="b", incident="ns/2", now=NOW,
        window=timedelta(minutes=5), share=0.5, cluster_nodes=2,
    ).state  # fmt: skip
    data = to_data(tripped)
    assert data["status"] == "TRIPPED" and all(isinstance(v, str) for v in data.values())
    assert from_data(data) == tripped
    assert from_data({**data, "status": "CLOSED"}).tripped is False  # a person's reset
    assert from_data(None) == BreakerState()


@pytest.mark.parametrize("data", [{"status": "HALF"}, {"cordons": "{not json"}, {"cordons": '[{"node": "a"}]'},
                                  {"cordons": '[{"node": "a", "at": "2026-01-01T00:00:00"}]'}])  # fmt: skip
def test_unreadable_breaker_state_is_tripped(data: dict[str, str]) -> None:
    state = from_data(data)
    assert state.tripped and "unreadable" in state.reason
