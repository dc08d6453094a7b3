"""Cordoning against the API emulator: the node's spec and annotations, the Events, the breaker's
ConfigMap surviving an operator restart, a person's uncordon and reset respected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from vl_builders import create_node, events_about, hardware_verdict

from frwatch_operator import constants as c
from frwatch_operator.config import RemediationSettings
from frwatch_operator.incident.record import IncidentIdentity
from frwatch_operator.kube.adapter import Kube
from frwatch_operator.remediation import breaker as brk
from frwatch_operator.remediation.apply import remediate
from frwatch_operator.remediation.cordon_policy import effective_rules

NOW = datetime.now(UTC).replace(microsecond=0)
EVIDENCE = "s3://frwatch/frwatch/ns/llama/uid/0/report.txt"


def nodes_for(ns: str, core: Any, count: int = 8) -> list[str]:
    names = [f"{ns[-6:]}-gpu-{i}" for i in range(count)]
    for name in names:
        create_node(core, name)
    return names


def settings(ns: str, **changes: Any) -> RemediationSettings:
    return RemediationSettings(**{"enabled": True, "dry_run": False, "breaker_namespace": ns,
                                  "breaker_configmap": "breaker", **changes})  # fmt: skip


def run(kube: Any, ns: str, name: str, suspects: list[str], job_nodes: list[str], remediation: RemediationSettings,
        now: datetime = NOW) -> Any:  # fmt: skip
    return remediate(
        verdict=hardware_verdict(*suspects), incident=IncidentIdentity(ns, name, f"uid-{name}"), job_nodes=job_nodes,
        rules=effective_rules(remediation), settings=remediation, kube=kube, evidence=EVIDENCE, now=now,
        job_object=None,
    )  # fmt: skip


def cordoned(core: Any, name: str) -> bool:
    spec = core.read_node(name).spec
    return bool(spec and spec.unschedulable)


def node_events(core: Any, name: str) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in events_about(core, "default", name)]


def test_cordon_then_a_persons_uncordon_sticks(
    k8s_namespace: str, core: Any, kube: Any, kubectl: Any
) -> None:
    ns = k8s_namespace
    names = nodes_for(ns, core)
    result = run(kube, ns, "llama-0", [names[3]], names, settings(ns))
    assert result.cordoned == [names[3]] and result.condition.status == "True"
    node = core.read_node(names[3])
    assert node.spec.unschedulable is True
    ann = node.metadata.annotations
    assert ann[c.ANN_CORDONED_BY] == "frwatch" and ann[c.ANN_CORDON_INCIDENT] == f"{ns}/llama-0"
    assert ann[c.ANN_CORDON_EVIDENCE] == EVIDENCE and ann[c.ANN_CORDON_REASON].startswith("gpu_hang: rank 3")
    assert [r for r, _ in node_events(core, names[3])] == ["FrwatchCordoned"]
    assert "SchedulingDisabled" in kubectl("get", "node", names[3]).stdout
    assert not any(cordoned(core, n) for n in names if n != names[3])
    stored = core.read_namespaced_config_map("breaker", ns).data
    assert [r.node for r in brk.from_data(stored).cordons] == [names[3]]

    kubectl("uncordon", names[3])  # a person decides the node is fine
    again = run(kube, ns, "llama-0", [names[3]], names, settings(ns), now=NOW + timedelta(seconds=30))
    assert again.cordoned == [] and "a person uncordoned it" in again.summary
    assert not cordoned(core, names[3])
    assert "FrwatchCordonSkipped" in [r for r, _ in node_events(core, names[3])]


def test_dry_run_touches_no_node_and_no_breaker(k8s_namespace: str, core: Any, kube: Any) -> None:
    ns = k8s_namespace
    names = nodes_for(ns, core)
    result = run(kube, ns, "llama-0", [names[2]], names, settings(ns, dry_run=True))
    assert result.cordoned == [] and result.condition.reason == "DryRun"
    assert "dry-run: would cordon" in result.summary
    assert not cordoned(core, names[2])
    assert not (core.read_node(names[2]).metadata.annotations or {})
    assert [r for r, _ in node_events(core, names[2])] == ["FrwatchWouldCordon"]
    assert core.list_namespaced_config_map(ns).items == []


def test_opted_out_node_is_left_alone(k8s_namespace: str, core: Any, kube: Any) -> None:
    ns = k8s_namespace
    names = nodes_for(ns, core)
    create_node(core, names[5], labels={c.LABEL_NODE_OPT_OUT: c.REMEDIATION_DISABLED})
    result = run(kube, ns, "llama-0", [names[5]], names, settings(ns))
    assert result.cordoned == [] and "opted out" in result.summary
    assert not cordoned(core, names[5])


def test_breaker_trips_and_stays_tripped_after_a_restart(
    k8s_namespace: str, core: Any, kube: Any, kubectl: Any
) -> None:
    ns = k8s_namespace
    names = nodes_for(ns, core)
    remediation = settings(ns)
    # the window already holds as many cordons as the breaker allows for this cluster's size
    allowed = brk.budget(kube.count_nodes(), remediation.breaker_share)
    full = brk.BreakerState(cordons=tuple(
        brk.CordonRecord(f"elsewhere-{i}", "other/incident", NOW - timedelta(seconds=60)) for i in range(allowed)))  # fmt: skip
    kube.write_configmap(ns, "breaker", brk.to_data(full), resource_version=None)

    tripped = run(kube, ns, "llama-0", [names[1]], names, remediation)
    assert tripped.cordoned == [] and "circuit breaker TRIPPED now" in tripped.summary
    assert not cordoned(core, names[1])
    assert core.read_namespaced_config_map("breaker", ns).data["status"] == "TRIPPED"
    assert any("circuit breaker" in m for _, m in node_events(core, names[1]))

    # a new operator process: a fresh client, an hour later (the window is long empty): still tripped
    from kubernetes import config as kconfig

    restarted = Kube(kconfig.new_client_from_config())
    later = NOW + timedelta(hours=1)
    still = run(restarted, ns, "llama-1", [names[2]], names, remediation, now=later)
    assert still.cordoned == [] and "circuit breaker TRIPPED since" in still.summary
    assert not cordoned(core, names[2])

    # a person investigates and resets it
    kubectl(
        "patch", "configmap", "breaker", "-n", ns, "--type", "merge", "-p", '{"data":{"status":"CLOSED"}}'
    )
    reset = run(restarted, ns, "llama-2", [names[4]], names, remediation, now=later + timedelta(seconds=5))
    assert reset.cordoned == [names[4]]
    assert cordoned(core, names[4])


def _node_record_verdict(node: str) -> Any:
    """A hardware-class verdict that rests on the node record read back from the store (an Xid Event)."""
    from frwatch_analyzers.verdict import Cause, CauseKind

    signal = Cause(kind=CauseKind.node_event, message="Event XidError: Xid 79: GPU has fallen off the bus",
                   source=f"nodes/{node}.json", node=node, primary=True)  # fmt: skip
    return hardware_verdict(node).model_copy(update={"causes": [signal]})


def test_a_node_record_the_api_does_not_bear_out_cordons_nothing(
    k8s_namespace: str, core: Any, kube: Any
) -> None:
    """A forged nodes/<node>.json (the store is tenant-reachable) must not get a healthy node cordoned: the
    node's conditions and Events are read from the API first; once the API shows the Xid, it is cordoned."""
    ns = k8s_namespace
    names = nodes_for(ns, core)
    node = names[5]

    def remediate_on_record() -> Any:
        return remediate(
            verdict=_node_record_verdict(node), incident=IncidentIdentity(ns, "llama-1", "uid-llama-1"),
            job_nodes=names, rules=effective_rules(settings(ns)), settings=settings(ns), kube=kube,
            evidence=EVIDENCE, now=NOW, job_object=None,
        )  # fmt: skip

    refused = remediate_on_record()
    assert refused.cordoned == [] and not cordoned(core, node)
    assert refused.skipped(_node_record_verdict(node), effective_rules(settings(ns))) == ["not_confirmed"]
    skipped = [m for r, m in node_events(core, node) if r == "FrwatchCordonSkipped"]
    assert len(skipped) == 1 and "not cordoned on store evidence alone" in skipped[0]

    core.create_namespaced_event("default", {
        "metadata": {"name": f"{node}.xid"}, "type": "Warning", "reason": "XidError",
        "message": "Xid 79: GPU has fallen off the bus", "count": 1,
        "involvedObject": {"kind": "Node", "name": node, "apiVersion": "v1"}, "source": {"component": "nvsentinel"},
    })  # fmt: skip
    confirmed = remediate_on_record()
    assert confirmed.cordoned == [node] and cordoned(core, node)
