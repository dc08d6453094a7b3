"""Carry out the cordon policy for one verdict: read what it needs, plan (pure), write, then tell.

Order (compute the whole change, write once, tell after the write succeeded):

1. the gate (remediation off, software verdict, no suspects, too many suspects): nothing is read;
2. read the breaker's ConfigMap, the suspect nodes, the cluster's node count; plan (:mod:`.remediation`);
3. in cordon mode, persist the breaker FIRST (optimistic concurrency: a conflict re-reads and re-plans),
   so a crash after a cordon can never lose its count; then patch each node (conditional on the
   resourceVersion the plan saw: a node a person changed meanwhile is left alone);
4. Events on each suspect node (cordoned, would cordon, skipped and why) and the plan on the job and the
   Incident; the Incident's ``Remediated`` condition.

When the breaker's ConfigMap cannot be read or stored (its namespace does not exist, RBAC refuses), no
node is touched: a breaker that cannot count cordons must not allow one. The outcome is final for the
incident, never retried in a loop: ``Remediated`` False with reason ``BreakerStateUnavailable`` and one
Warning Event of that reason on the job and the Incident saying what to create or grant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from frwatch_analyzers.verdict import Verdict
from frwatch_operator.config import RemediationSettings
from frwatch_operator.errors import ConflictError, FatalError, NamespaceMissingError
from frwatch_operator.incident.record import IncidentIdentity
from frwatch_operator.kube.ports import KubeActions
from frwatch_operator.notices import Notice, Reason
from frwatch_operator.remediation import breaker as brk
from frwatch_operator.remediation.cordon_policy import (
    Action,
    CordonPlan,
    Mode,
    NodeDecision,
    NodeView,
    Rules,
    SkipReason,
    cordon_patch,
    gate,
    gate_skip_reason,
    plan_cordons,
)
from frwatch_operator.remediation.node_confirmation import EVENTS_CHECKED, claimed_sick, unconfirmed
from frwatch_operator.remediation.nvsentinel import maintenance_request, request_name
from frwatch_operator.resources import Condition, ConditionReason
from frwatch_operator.verdict.events import event_object
from frwatch_operator.verdict.report import one_line, remediated_condition

_PLAN_ATTEMPTS = 3


class BreakerUnavailable(Exception):
    """The circuit breaker's ConfigMap cannot be read or stored; ``str()`` says why and what to do."""


@dataclass(frozen=True)
class RemediationResult:
    plan: CordonPlan
    cordoned: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  #: node -> why the API refused the cordon
    condition: Condition | None = None
    nodes: Mapping[str, NodeView | None] = field(default_factory=dict)  #: the suspect nodes as read
    #: The circuit breaker as stored after this plan (None: not read, the gate stopped first).
    breaker_tripped: bool | None = None

    @property
    def summary(self) -> str:
        text = self.plan.summary
        if self.failed:
            text += "; not cordoned after all: " + "; ".join(f"{n} ({why})" for n, why in self.failed.items())
        return text

    @property
    def dry_run_cordons(self) -> list[str]:
        """Nodes the plan would have cordoned (dry-run only)."""
        return self.plan.to_cordon if self.plan.mode is Mode.DRY_RUN else []

    def skipped(self, verdict: Verdict, rules: Rules) -> list[str]:
        """A SkipReason code for each suspect node left alone (the gate's refusal counts every suspect)."""
        if not self.plan.decisions:
            code = gate_skip_reason(verdict, rules)
            return [code.value] * len(set(filter(None, verdict.suspect_nodes))) if code is not None else []
        codes = [d.code for d in self.plan.decisions if d.action is Action.SKIP]
        return codes + [SkipReason.API_REFUSED.value] * len(self.failed)


def remediate(
    *,
    verdict: Verdict,
    incident: IncidentIdentity,
    job_nodes: Sequence[str],
    rules: Rules,
    settings: RemediationSettings,
    kube: KubeActions,
    evidence: str,
    now: datetime,
    job_object: Mapping[str, str] | None,
    uncorroborated: Mapping[str, tuple[SkipReason, str]] | None = None,
) -> RemediationResult:
    """Plan and carry out (or, in dry-run, only show) the cordons for one verdict.

    ``job_object``: the training job's involvedObject reference (the plan's Event goes there too);
    ``uncorroborated``: the suspect nodes that are only nominated (:mod:`.corroborating`): never touched.
    With ``settings.action`` ``nvsentinel`` a node the plan cordons gets NVSentinel's MaintenanceRequest
    instead of frwatch's cordon (:mod:`.nvsentinel`).
    """
    incident_ref = incident.reference()
    stop = gate(verdict, job_nodes, rules)
    if stop is not None:
        plan = CordonPlan(rules.mode, (), stop, brk.BreakerState(), False)
        result = RemediationResult(plan)
    else:
        try:
            result = _plan_and_cordon(
                verdict, incident, job_nodes, rules, settings, kube, evidence, now, uncorroborated or {}
            )
        except BreakerUnavailable as exc:
            return _without_breaker(verdict, incident, rules, str(exc), kube, now, job_object)
        _node_events(result, incident, kube, now, settings.action == "nvsentinel")
    cordoned = bool(result.cordoned) or (result.plan.mode is Mode.CORDON and bool(result.plan.kept))
    condition = remediated_condition(result.plan.mode.value, result.summary, cordoned=cordoned, now=now)
    spec = Notice("Warning" if cordoned else "Normal", Reason.REMEDIATION, one_line(result.summary, 1024))
    for about in (job_object, incident_ref):
        if about is not None:
            kube.create_event(event_object(spec, about=about, incident_uid=incident.uid, now=now))
    return RemediationResult(
        result.plan, result.cordoned, result.failed, condition, result.nodes, result.breaker_tripped
    )


def _plan_and_cordon(
    verdict: Verdict,
    incident: IncidentIdentity,
    job_nodes: Sequence[str],
    rules: Rules,
    settings: RemediationSettings,
    kube: KubeActions,
    evidence: str,
    now: datetime,
    uncorroborated: Mapping[str, tuple[SkipReason, str]],
) -> RemediationResult:
    ns, cm_name = settings.breaker_namespace, settings.breaker_configmap
    for attempt in range(_PLAN_ATTEMPTS):
        try:
            stored = kube.read_configmap(ns, cm_name)
        except FatalError as exc:
            raise _unavailable(settings, exc) from exc
        state = brk.from_data((stored or {}).get("data"))
        version = (stored or {}).get("metadata", {}).get("resourceVersion") if stored else None
        suspects = list(dict.fromkeys(verdict.suspect_nodes))
        bodies = {name: kube.get_node(name) for name in suspects}
        nodes = {name: _view(body) for name, body in bodies.items()}
        plan = plan_cordons(
            verdict=verdict,
            incident=incident.key,
            job_nodes=job_nodes,
            nodes=nodes,
            breaker=state,
            cluster_nodes=kube.count_nodes(),
            rules=rules,
            now=now,
            unconfirmed=_unconfirmed(verdict, bodies, kube),
            uncorroborated=uncorroborated,
        )
        if plan.mode is Mode.CORDON and plan.breaker_changed:
            try:
                kube.write_configmap(
                    ns, cm_name, brk.to_data(plan.breaker.pruned(now, max(rules.breaker_window, rules.namespace_window))),
                    resource_version=version,
                )  # fmt: skip
            except ConflictError:
                if attempt + 1 == _PLAN_ATTEMPTS:
                    raise
                continue  # another writer moved the breaker: read it again and decide again
            except FatalError as exc:
                raise _unavailable(settings, exc) from exc
        if plan.mode is not Mode.CORDON:  # the breaker as stored (a dry-run plan's state is hypothetical)
            return RemediationResult(plan, nodes=nodes, breaker_tripped=state.tripped)
        cordoned: list[str] = []
        failed: dict[str, str] = {}
        for name in plan.to_cordon:
            view = nodes[name]
            assert view is not None  # the plan cordons only nodes it saw
            decision = next(d for d in plan.decisions if d.node == name)
            try:
                if settings.action == "nvsentinel":  # NVSentinel cordons (and drains) under its own rules
                    kube.create_maintenance_request(
                        maintenance_request(node=name, incident=incident.key, reason=decision.reason, evidence=evidence)
                    )
                else:
                    kube.patch_node(
                        name, cordon_patch(view, incident=incident.key, reason=decision.reason, evidence=evidence)
                    )
                cordoned.append(name)
            except ConflictError:
                failed[name] = "the node changed since it was read (a person acted?): left as it is"
            except FatalError as exc:
                failed[name] = str(exc)
        return RemediationResult(plan, cordoned, failed, nodes=nodes, breaker_tripped=plan.breaker.tripped)
    raise AssertionError("unreachable")


def _unavailable(settings: RemediationSettings, exc: FatalError) -> BreakerUnavailable:
    where = f"ConfigMap {settings.breaker_namespace}/{settings.breaker_configmap}"
    if isinstance(exc, NamespaceMissingError):
        return BreakerUnavailable(
            f"the circuit breaker's state cannot be stored: the namespace {exc.namespace} of its {where} does "
            f"not exist; create it (kubectl create namespace {exc.namespace}) or set "
            "FRWATCH_REMEDIATION_BREAKER_NAMESPACE (chart: the release namespace) to an existing one"
        )
    return BreakerUnavailable(
        f"the circuit breaker's state in {where} cannot be read or stored ({exc}); grant the operator get, "
        "create and update on it (the chart's Role in its namespace)"
    )


def _without_breaker(
    verdict: Verdict,
    incident: IncidentIdentity,
    rules: Rules,
    why: str,
    kube: KubeActions,
    now: datetime,
    job_object: Mapping[str, str] | None,
) -> RemediationResult:
    """No breaker, no cordon: every suspect node left alone, said once on the job and the Incident."""
    suspects = list(dict.fromkeys(n for n in verdict.suspect_nodes if n))
    code = SkipReason.BREAKER_UNAVAILABLE.value
    decisions = tuple(NodeDecision(n, Action.SKIP, why, code) for n in suspects)
    summary = f"no cordon of {', '.join(suspects)}: {why}; frwatch cordons nothing until its breaker can count"
    plan = CordonPlan(rules.mode, decisions, summary, brk.BreakerState(), False)
    reason = Reason.BREAKER_UNAVAILABLE
    spec = Notice("Warning", reason, one_line(summary, 1024))
    for about in (job_object, incident.reference()):
        if about is not None:
            kube.create_event(event_object(spec, about=about, incident_uid=incident.uid, now=now))
    condition = remediated_condition(rules.mode.value, summary, cordoned=False, now=now, reason=ConditionReason.BREAKER_STATE_UNAVAILABLE)
    return RemediationResult(plan, condition=condition)


def _unconfirmed(
    verdict: Verdict, bodies: Mapping[str, Mapping[str, Any] | None], kube: KubeActions
) -> dict[str, str]:
    """Suspect nodes called sick from a node record read back from the store that the API does not bear out
    now (Events that cannot be read count as none: the node's conditions may still confirm it)."""
    claims = claimed_sick(verdict)
    events: dict[str, list[dict[str, Any]]] = {}
    for name in claims:
        if bodies.get(name) is None:
            continue
        try:
            events[name] = kube.list_node_events(name, EVENTS_CHECKED)
        except FatalError:
            events[name] = []
    return unconfirmed(claims, bodies, events)


def _view(node: Mapping[str, object] | None) -> NodeView | None:
    return NodeView.of(node) if node is not None else None


def _node_events(
    result: RemediationResult, incident: IncidentIdentity, kube: KubeActions, now: datetime, handed_off: bool
) -> None:
    for d in result.plan.decisions:
        view = result.nodes.get(d.node)
        if view is None or d.action is Action.KEEP:
            continue  # no such node: nothing to post an Event on; kept: its Event was posted the first time
        about = {"apiVersion": "v1", "kind": "Node", "name": view.name, "uid": view.uid}
        if d.node in result.failed:
            spec = Notice(
                "Warning", Reason.NODE_CORDON_FAILED,
                f"frwatch did not cordon this node for incident {incident.key}: {result.failed[d.node]}", d.node,
            )  # fmt: skip
        elif d.action is Action.CORDON and result.plan.mode is Mode.CORDON and handed_off:
            spec = Notice(
                "Warning", Reason.NODE_CORDONED,
                f"Handed to NVSentinel by frwatch for incident {incident.key} (MaintenanceRequest "
                f"{request_name(incident.key, d.node)}): {d.reason}", d.node,
            )  # fmt: skip
        elif d.action is Action.CORDON and result.plan.mode is Mode.CORDON:
            spec = Notice(
                "Warning", Reason.NODE_CORDONED,
                f"Cordoned by frwatch for incident {incident.key}: {d.reason}", d.node,
            )  # fmt: skip
        elif d.action is Action.CORDON:
            spec = Notice(
                "Normal", Reason.NODE_WOULD_CORDON,
                f"dry-run: frwatch would cordon this node for incident {incident.key}: {d.reason}", d.node,
            )  # fmt: skip
        else:
            spec = Notice(
                "Normal", Reason.NODE_CORDON_SKIPPED,
                f"frwatch did not cordon this node for incident {incident.key}: {d.reason}", d.node,
            )  # fmt: skip
        kube.create_event(event_object(spec, about=about, incident_uid=incident.uid, now=now))
