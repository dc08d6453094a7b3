"""The cordon policy: which suspect nodes to cordon after a verdict, and why not the others. Pure; no I/O.

Rules, in the order they apply (each skipped node gets its reason, which a person reads in an Event):

1. Remediation is off unless the operator turns it on; when on, it is a dry-run unless turned off.
   A CapturePolicy can only narrow the operator's settings (turn it off, force dry-run, lower the cap).
2. Only a ``hardware_class`` verdict that names suspect nodes leads to any cordon: a software fault
   (desync, missing rank, size/dtype mismatch ...) is never fixed by taking a node away.
3. No action at all when the suspects are more than ``max_suspect_share`` of the job's nodes: many
   "bad" nodes at once is the fabric or the software, not one bad host.
4. Per node: missing node, opt-out label ``frwatch.io/remediation=disabled``, a node a person uncordoned
   after frwatch cordoned it for THIS incident (never re-cordoned for it), a node already cordoned
   (by frwatch for this incident: done; by anyone else: left alone).
5. At most ``max_nodes_per_incident`` nodes per incident (those already cordoned for it count), and at
   most ``max_nodes_per_namespace`` nodes for all the incidents of one namespace in
   ``namespace_window`` (a tenant whose jobs keep failing cannot walk the cluster one Incident at a time).
6. The circuit breaker (:mod:`.breaker`) on the share of the cluster's nodes cordoned in its window.

The nodes considered are the verdict's suspects that the cluster confirms (the verdict loop checks them
against the Incident's ``status.observed`` first), and the share of rule 3 is over the nodes the cluster
saw the attempt run on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from frwatch_analyzers.base.safe_text import printable
from frwatch_analyzers.verdict import Verdict
from frwatch_operator import constants as c
from frwatch_operator.config import RemediationSettings
from frwatch_operator.remediation.breaker import BreakerState, try_cordon
from frwatch_operator.resources import CaptureSettings
from frwatch_operator.verdict.report import one_line


class Mode(StrEnum):
    OFF = "off"
    DRY_RUN = "dry-run"
    CORDON = "cordon"


class Action(StrEnum):
    CORDON = "cordon"  #: cordon it now (or, in dry-run, would)
    KEEP = "keep"  #: already cordoned by frwatch for this incident (a retry after a restart): nothing to do
    SKIP = "skip"  #: leave it alone, for the reason given


class SkipReason(StrEnum):
    """Why a suspect node was not cordoned, as a short code (the metrics' ``reason`` label); the sentence a
    person reads is the decision's ``reason``."""

    SOFTWARE_FAULT = "software_fault"  #: rule 2: the verdict is not hardware-class
    TOO_MANY_SUSPECTS = "too_many_suspects"  #: rule 3
    NO_SUCH_NODE = "no_such_node"
    OPTED_OUT = "opted_out"
    UNCORDONED_BY_PERSON = "uncordoned_by_person"
    ALREADY_CORDONED = "already_cordoned"  #: by someone else, or for another incident
    CAP = "cap"  #: rule 5
    NAMESPACE_CAP = "namespace_cap"  #: rule 5, across the namespace's incidents
    BREAKER = "breaker"  #: rule 6
    API_REFUSED = "api_refused"  #: the plan said cordon; the API refused (the node changed, or forbidden)
    #: the breaker's state could not be read or stored (its namespace missing, RBAC): no plan was made
    BREAKER_UNAVAILABLE = "breaker_unavailable"
    #: the verdict calls the node sick from its node record (read back from the store), and the node's
    #: conditions and Events as the API shows them now do not say so (DESIGN: facts that drive an action
    #: come from the Kubernetes API)
    NOT_CONFIRMED = "not_confirmed"
    #: the node is only nominated: what accuses it is the tenant's (dumps, logs, exits), and nothing the
    #: tenant cannot write (a failing probe, the node's own health agents, other namespaces' jobs) agrees
    NOT_CORROBORATED = "not_corroborated"
    #: the tenant pinned a pod of the attempt to the node: its evidence says nothing against that node
    PINNED = "pinned"


@dataclass(frozen=True)
class Rules:
    """The remediation settings in force for one incident (operator settings narrowed by its policy)."""

    enabled: bool = False
    dry_run: bool = True
    max_nodes_per_incident: int = 2
    breaker_share: float = 0.5
    breaker_window: timedelta = timedelta(minutes=5)
    max_suspect_share: float = 0.25
    max_nodes_per_namespace: int = 2
    namespace_window: timedelta = timedelta(hours=24)

    @property
    def mode(self) -> Mode:
        if not self.enabled:
            return Mode.OFF
        return Mode.DRY_RUN if self.dry_run else Mode.CORDON


def effective_rules(settings: RemediationSettings, capture: CaptureSettings | None = None) -> Rules:
    """The rules for one job: the switch, dry-run and cap of its effective capture settings (the operator's
    narrowed by its CapturePolicy, see :func:`frwatch_operator.capture.optin.apply_policy`: a policy can turn
    remediation off, force dry-run or lower the cap, never the reverse); breaker and share limits are
    the operator's alone."""
    enabled, dry_run, cap = settings.enabled, settings.dry_run, settings.max_nodes_per_incident
    if capture is not None:
        enabled = enabled and capture.remediation_enabled
        dry_run = dry_run or capture.remediation_dry_run
        cap = min(cap, capture.max_nodes_per_incident)
    return Rules(
        enabled=enabled,
        dry_run=dry_run,
        max_nodes_per_incident=cap,
        breaker_share=settings.breaker_share,
        breaker_window=timedelta(seconds=settings.breaker_window_seconds),
        max_suspect_share=settings.max_suspect_share,
        max_nodes_per_namespace=settings.max_nodes_per_namespace,
        namespace_window=timedelta(seconds=settings.namespace_window_seconds),
    )


@dataclass(frozen=True)
class NodeView:
    """What the policy needs of a Node object."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    uid: str = ""
    resource_version: str = ""

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> NodeView:
        meta = node.get("metadata") or {}
        return cls(
            name=str(meta.get("name", "")),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
            uid=str(meta.get("uid", "")),
            resource_version=str(meta.get("resourceVersion", "")),
        )

    @property
    def cordoned_for(self) -> str:
        """The incident frwatch cordoned this node for ("" if none)."""
        if self.annotations.get(c.ANN_CORDONED_BY) != c.CORDONED_BY_FRWATCH:
            return ""
        return self.annotations.get(c.ANN_CORDON_INCIDENT, "")


@dataclass(frozen=True)
class NodeDecision:
    node: str
    action: Action
    reason: str
    code: str = ""  #: a SkipReason value for SKIP decisions


@dataclass(frozen=True)
class CordonPlan:
    """The whole decision for one incident: computed in memory, carried out (or only shown) after."""

    mode: Mode
    decisions: tuple[NodeDecision, ...]
    summary: str  #: one line: what happens and why (the Remediated condition and the job's Event)
    breaker: BreakerState  #: the state to persist when the plan is carried out (mode CORDON)
    breaker_changed: bool

    @property
    def to_cordon(self) -> list[str]:
        return [d.node for d in self.decisions if d.action is Action.CORDON]

    @property
    def kept(self) -> list[str]:
        """Nodes this incident cordoned before (the plan runs again after a restart)."""
        return [d.node for d in self.decisions if d.action is Action.KEEP]

    @property
    def cordons(self) -> bool:
        """Whether the plan changes any node (only in CORDON mode)."""
        return self.mode is Mode.CORDON and bool(self.to_cordon)


def plan_cordons(
    *,
    verdict: Verdict,
    incident: str,
    job_nodes: Sequence[str],
    nodes: Mapping[str, NodeView | None],
    breaker: BreakerState,
    cluster_nodes: int,
    rules: Rules,
    now: datetime,
    unconfirmed: Mapping[str, str] | None = None,
    uncorroborated: Mapping[str, tuple[SkipReason, str]] | None = None,
) -> CordonPlan:
    """Decide, for each suspect node of ``verdict``, cordon or skip (with the reason).

    ``incident`` is ``namespace/name``; ``job_nodes`` the nodes the job attempt ran on (the manifest);
    ``nodes`` the suspect nodes' objects (None: no such node); ``cluster_nodes`` how many nodes the
    cluster has (the breaker's denominator); ``unconfirmed`` the suspect nodes whose sickness the verdict
    read from a node record and the API does not show now, each with what the record claimed;
    ``uncorroborated`` the nominated nodes nothing the tenant cannot write corroborates (or that the tenant
    pinned), each with its code and sentence (:mod:`.corroborating` decides it; such a node is never cordoned).
    """
    mode = rules.mode
    stop = gate(verdict, job_nodes, rules)
    if stop is not None:
        return CordonPlan(mode, (), stop, breaker, False)
    suspects = list(dict.fromkeys(n for n in verdict.suspect_nodes if n))
    decisions: list[NodeDecision] = []
    state = breaker
    counted = 0  # nodes cordoned for this incident, before or in this plan
    namespace = incident.split("/", 1)[0] + "/"
    by_namespace = {  # nodes cordoned for this namespace's incidents in its window (this one's included)
        r.node for r in breaker.cordons if r.incident.startswith(namespace) and now - rules.namespace_window < r.at
    }
    for name in suspects:
        view = nodes.get(name)
        if view is not None and view.cordoned_for == incident:
            counted += 1
    for name in suspects:
        view = nodes.get(name)

        def skip(code: SkipReason, reason: str, node: str = name) -> None:
            decisions.append(NodeDecision(node, Action.SKIP, reason, code.value))

        if view is None:
            skip(SkipReason.NO_SUCH_NODE, "no such node")
        elif view.labels.get(c.LABEL_NODE_OPT_OUT) == c.REMEDIATION_DISABLED:
            skip(SkipReason.OPTED_OUT, f"opted out (label {c.LABEL_NODE_OPT_OUT}={c.REMEDIATION_DISABLED})")
        elif view.cordoned_for == incident and not view.unschedulable:
            skip(
                SkipReason.UNCORDONED_BY_PERSON,
                "a person uncordoned it after frwatch cordoned it for this incident: "
                "never cordoned again for the same incident",
            )
        elif view.cordoned_for == incident:
            decisions.append(NodeDecision(name, Action.KEEP, "already cordoned by frwatch for this incident"))
        elif uncorroborated and name in uncorroborated:
            skip(*uncorroborated[name])
        elif unconfirmed and name in unconfirmed:
            skip(
                SkipReason.NOT_CONFIRMED,
                f"the verdict's node record says {unconfirmed[name]}, but the node's conditions and Events "
                "as the Kubernetes API shows them now say nothing of it: not cordoned on store evidence alone",
            )
        elif view.unschedulable:
            skip(SkipReason.ALREADY_CORDONED, "already cordoned, not by frwatch for this incident: left as it is")
        elif counted >= rules.max_nodes_per_incident:
            skip(SkipReason.CAP, f"per-incident cap of {rules.max_nodes_per_incident} node(s) reached")
        elif len(by_namespace) >= rules.max_nodes_per_namespace:
            hours = rules.namespace_window.total_seconds() / 3600
            skip(SkipReason.NAMESPACE_CAP,
                 f"per-namespace cap reached: {len(by_namespace)} node(s) already cordoned for incidents of "
                 f"namespace {namespace[:-1]} in the last {hours:g} h (at most {rules.max_nodes_per_namespace})")  # fmt: skip
        else:
            decision = try_cordon(
                state,
                node=name,
                incident=incident,
                now=now,
                window=rules.breaker_window,
                share=rules.breaker_share,
                cluster_nodes=cluster_nodes,
            )
            state = decision.state
            if decision.allowed:
                counted += 1
                by_namespace.add(name)
                decisions.append(NodeDecision(name, Action.CORDON, verdict_reason(verdict)))
            else:
                skip(SkipReason.BREAKER, decision.reason)
    plan_decisions = tuple(decisions)
    return CordonPlan(mode, plan_decisions, _summary(mode, plan_decisions), state, state is not breaker)


def gate(verdict: Verdict, job_nodes: Sequence[str], rules: Rules) -> str | None:
    """Why no node may be touched for this verdict at all (rules 1-3), or None: look at each node."""
    if rules.mode is Mode.OFF:
        return "remediation is off: no node touched (the operator's FRWATCH_REMEDIATION_ENABLED)"
    if not verdict.hardware_class:
        return (
            f"no cordon: the verdict is {verdict.category.value}, not hardware-class "
            "(a software fault is never fixed by cordoning a node)"
        )
    suspects = set(n for n in verdict.suspect_nodes if n)
    if not suspects:
        return "no cordon: the hardware-class verdict names no suspect node"
    on_job = set(job_nodes) | suspects
    share = len(suspects) / len(on_job)
    if share > rules.max_suspect_share:
        return (
            f"no cordon: {len(suspects)} of the job's {len(on_job)} nodes are suspects ({share:.0%} > "
            f"{rules.max_suspect_share:.0%}): that points at the fabric or the software, not at one bad host"
        )
    return None


def gate_skip_reason(verdict: Verdict, rules: Rules) -> SkipReason | None:
    """The code of :func:`gate`'s refusal, for the suspect nodes it leaves alone (None: remediation is off
    or the verdict names no suspect, so no node was considered)."""
    if rules.mode is Mode.OFF or not any(verdict.suspect_nodes):
        return None
    return SkipReason.TOO_MANY_SUSPECTS if verdict.hardware_class else SkipReason.SOFTWARE_FAULT


def verdict_reason(verdict: Verdict) -> str:
    """The one-line reason written on a cordoned node (annotation frwatch.io/cordon-reason)."""
    return one_line(f"{verdict.category.value}: {verdict.headline}", 256)


def _summary(mode: Mode, decisions: Sequence[NodeDecision]) -> str:
    verb = "dry-run: would cordon" if mode is Mode.DRY_RUN else "cordoned"
    parts = [f"{verb} {d.node}" for d in decisions if d.action is Action.CORDON]
    parts += [f"{d.node} already cordoned for this incident" for d in decisions if d.action is Action.KEEP]
    parts += [f"skip {d.node} ({d.reason})" for d in decisions if d.action is Action.SKIP]
    if not any(d.action in (Action.CORDON, Action.KEEP) for d in decisions):
        parts.insert(0, "dry-run: no cordon" if mode is Mode.DRY_RUN else "no cordon")
    return "; ".join(parts)


def cordon_patch(view: NodeView, *, incident: str, reason: str, evidence: str) -> dict[str, Any]:
    """The merge patch that cordons a node and says who, why and where the evidence is.

    It carries the resourceVersion the plan saw: a node changed since (a person acted) answers 409.
    """
    meta: dict[str, Any] = {
        "annotations": {
            c.ANN_CORDONED_BY: c.CORDONED_BY_FRWATCH,
            c.ANN_CORDON_REASON: printable(one_line(reason, 256)),
            c.ANN_CORDON_INCIDENT: incident,
            c.ANN_CORDON_EVIDENCE: evidence,
        }
    }
    if view.resource_version:
        meta["resourceVersion"] = view.resource_version
    return {"metadata": meta, "spec": {"unschedulable": True}}
