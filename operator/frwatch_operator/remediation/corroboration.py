"""Nominate, corroborate, then act: what a verdict's suspect nodes get (DESIGN.md, "Trust boundaries").

A verdict's suspects come from what the tenant's ranks wrote (dumps, logs, exit codes, summaries), which the
tenant can fabricate whole. So a suspect node is only **nominated**: recorded on the Incident
(``status.nominations``), annotated (``frwatch.io/nominated-by``), told in a ``FrwatchNominated`` Event on the
node, and counted in the skip metric (reasons ``not_corroborated``, ``pinned``). It is cordoned (or handed to
NVSentinel) only when evidence the tenant cannot write agrees:

1. the node's own health agents, read from the API now: an unhealthy condition (node-problem-detector, DCGM
   exporter, NVSentinel set them through ``nodes/status``), or a hardware Event about the node in namespace
   ``default`` (where node agents post; a tenant's Events in its own namespace do not count);
2. fleet memory (:mod:`.fleet_memory`): jobs of ``corroborating_namespaces`` namespaces nominated the node
   within the window;
3. a probe (:mod:`.probe_job`): frwatch's own health check Job on the node, run only when 1 and 2 do not
   corroborate, remediation is on and ``probe_image`` is set; only a probe that ran and failed corroborates.
   While probes run the Incident stays ``Analyzing`` with ``analysisStep: Probe``; the cordon plan runs when
   the last one ended (:func:`advance_probes`), on the verdict read again and checked against its digest.

A node the tenant pinned a pod to (:mod:`frwatch_operator.detect.placement`) is nominated with ``pinned`` and nothing
else: not remembered for the fleet, not probed, never cordoned for this job. A verdict that could not be
bound to its analyzer Job (``status.verdictDigest`` empty) nominates nothing and touches nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from frwatch_analyzers.evidence.node_signals import node_signals
from frwatch_analyzers.verdict import Verdict
from frwatch_operator import constants as c
from frwatch_operator.collect.node_evidence import node_record
from frwatch_operator.config import Config
from frwatch_operator.detect.placement import job_pins
from frwatch_operator.errors import ConflictError, FatalError, FrwatchError
from frwatch_operator.incident.record import Incident
from frwatch_operator.kube.ports import KubeActions, Obj
from frwatch_operator.notices import Notice, Reason
from frwatch_operator.remediation import fleet_memory as fleet
from frwatch_operator.remediation import probe_job as probes
from frwatch_operator.remediation.apply import RemediationResult, remediate
from frwatch_operator.remediation.cordon_policy import Mode, SkipReason, effective_rules, gate
from frwatch_operator.remediation.node_confirmation import EVENTS_CHECKED
from frwatch_operator.resources import NOMINATIONS_MAX, CaptureSettings, Condition, NodeNomination
from frwatch_operator.times import parse_rfc3339
from frwatch_operator.verdict.events import event_object
from frwatch_operator.verdict.report import one_line, remediated_condition

logger = logging.getLogger(__name__)

#: ``status.analysisStep`` while probe Jobs run on nominated nodes.
STEP_PROBE = "Probe"
#: The namespace node agents post their Events in (a tenant's own namespace's Events about a node never count).
NODE_EVENTS_NAMESPACE = "default"
#: How long past its deadline a probe Job may stay unfinished before it counts as inconclusive.
PROBE_GRACE = timedelta(minutes=2)
_WRITE_ATTEMPTS = 3


@dataclass(frozen=True)
class Acted:
    """What the nomination step did: the nominations, and either the cordon plan's outcome or probes begun."""

    nominations: list[NodeNomination] = field(default_factory=list)
    result: RemediationResult | None = None
    condition: Condition | None = None
    probing: bool = False


def uncorroborated(nominations: Sequence[NodeNomination]) -> dict[str, tuple[SkipReason, str]]:
    """The nominated nodes the cordon plan must leave alone, each with its code and sentence."""
    out: dict[str, tuple[SkipReason, str]] = {}
    for n in nominations:
        if n.pinned:
            out[n.node] = (SkipReason.PINNED, "nominated only: the tenant pinned a pod of this job to the node "
                           "(nodeName, hostname selector or affinity), so its evidence says nothing against it")  # fmt: skip
        elif not n.corroborated:
            probe = f"; probe {n.probe.lower()}: {n.probe_detail}" if n.probe else "; no probe"
            out[n.node] = (SkipReason.NOT_CORROBORATED, one_line(
                f"nominated only: the job's own evidence names it, and nothing it cannot write agrees (no health "
                f"signal from the node, {n.namespaces} namespace(s) nominated it{probe})", 400))  # fmt: skip
    return out


def act_on_verdict(
    *,
    view: Incident,
    verdict: Verdict,
    job_nodes: Sequence[str],
    training: Obj | None,
    bound: bool,
    config: Config,
    settings: CaptureSettings | None,
    kube: KubeActions,
    evidence: str,
    now: datetime,
    job_ref: Mapping[str, str],
) -> Acted:
    """Nominate the verdict's suspects, then run the cordon plan on what is corroborated, or begin probes."""
    rules = effective_rules(config.remediation, settings)
    if not bound:
        summary = ("no node touched: the verdict could not be bound to its analyzer Job (the Job was gone, or its "
                   "termination message carries no digest), so nothing it says is acted on")  # fmt: skip
        return Acted(condition=remediated_condition(rules.mode.value, summary, cordoned=False, now=now))
    suspects = list(dict.fromkeys(n for n in verdict.suspect_nodes if n)) if verdict.hardware_class else []
    annotate = rules.mode is Mode.CORDON  # frwatch may patch nodes only where it may cordon them (the chart's RBAC)
    nominations = _nominate(view, suspects[:NOMINATIONS_MAX], training, config, kube, now, annotate) if suspects else []
    skip = uncorroborated(nominations)
    to_probe = [n for n in nominations if not n.pinned and not n.corroborated]
    may_probe = (
        config.remediation.probe_image and rules.mode is not Mode.OFF and config.remediation.action != "none"
        and gate(verdict, job_nodes, rules) is None
    )  # fmt: skip
    if to_probe and may_probe:
        started = _start_probes(view, to_probe[: max(1, rules.max_nodes_per_incident)], config, kube, now)
        if started:
            merged = [started.get(n.node, n) for n in nominations]
            return Acted(merged, probing=True)
    return _remediate(view, verdict, job_nodes, nominations, skip, config, settings, kube, evidence, now, job_ref)


def _remediate(
    view: Incident, verdict: Verdict, job_nodes: Sequence[str], nominations: list[NodeNomination],
    skip: Mapping[str, tuple[SkipReason, str]], config: Config, settings: CaptureSettings | None,
    kube: KubeActions, evidence: str, now: datetime, job_ref: Mapping[str, str] | None,
) -> Acted:  # fmt: skip
    rules = effective_rules(config.remediation, settings)
    if config.remediation.action == "none" and rules.mode is not Mode.OFF:
        corroborated = [n.node for n in nominations if n.node not in skip]
        summary = (f"remediation.action none: nothing done; corroborated: {', '.join(corroborated) or 'none'}; "
                   f"nominated only: {', '.join(skip) or 'none'}")  # fmt: skip
        return Acted(nominations, condition=remediated_condition(rules.mode.value, summary, cordoned=False, now=now))
    result = remediate(
        verdict=verdict, incident=view.identity, job_nodes=job_nodes, rules=rules, settings=config.remediation,
        kube=kube, evidence=evidence, now=now, job_object=job_ref, uncorroborated=skip,
    )  # fmt: skip
    return Acted(nominations, result, result.condition)


# --- nominating ----------------------------------------------------------------------------------------


def _nominate(
    view: Incident, suspects: Sequence[str], training: Obj | None, config: Config, kube: KubeActions, now: datetime,
    annotate: bool,
) -> list[NodeNomination]:  # fmt: skip
    observed = view.status.observed
    pinned = job_pins(training) | {p.node for p in (observed.pods if observed else []) if p.pinned and p.node}
    counted = [n for n in suspects if n not in pinned]
    namespaces = _remember(view, counted, config, kube, now)
    out: list[NodeNomination] = []
    for node in suspects:
        signal = _health_signal(node, kube) if node not in pinned else ""
        count = len(namespaces.get(node, set()))
        corroborated = ""
        if signal:
            corroborated = f"the node's health agents: {signal}"
        elif count >= config.remediation.corroborating_namespaces:
            corroborated = f"jobs of {count} namespaces nominated it within the window"
        nomination = NodeNomination(
            node=node, pinned=node in pinned, namespaces=count, signal=signal[:300], corroborated=corroborated[:300]
        )
        _tell_nominated(view, nomination, kube, now, annotate)
        out.append(nomination)
    return out


def _remember(
    view: Incident, nodes: Sequence[str], config: Config, kube: KubeActions, now: datetime
) -> dict[str, set[str]]:
    """Record this incident's nominations in fleet memory; the namespaces that nominated each node. Fleet
    memory that cannot be read or stored corroborates nothing (logged)."""
    settings = config.remediation
    ns, name = settings.breaker_namespace, settings.nominations_configmap
    window = timedelta(seconds=settings.nomination_window_seconds)
    new = [fleet.Nomination(node, view.namespace, view.key, now) for node in nodes]
    for _ in range(_WRITE_ATTEMPTS):
        try:
            stored = kube.read_configmap(ns, name)
            kept = fleet.remember(fleet.from_data((stored or {}).get("data")), new, now=now, window=window)
            if nodes:
                version = (stored or {}).get("metadata", {}).get("resourceVersion") if stored else None
                kube.write_configmap(ns, name, fleet.to_data(kept), resource_version=version)
            return {n: fleet.namespaces_naming(kept, n, now=now, window=window) for n in nodes}
        except ConflictError:
            continue
        except FrwatchError as exc:
            logger.warning("Incident %s: fleet memory %s/%s not used: %s", view.key, ns, name, exc)
            break
    return {}


def _health_signal(node: str, kube: KubeActions) -> str:
    """What the node's own health agents say now (its conditions; hardware Events in ``default``), or ""."""
    try:
        body = kube.get_node(node)
        if body is None:
            return ""
        events = [e for e in kube.list_node_events(node, EVENTS_CHECKED)
                  if (e.get("metadata") or {}).get("namespace") in (NODE_EVENTS_NAMESPACE, None, "")]  # fmt: skip
    except FrwatchError as exc:
        logger.warning("node %s: health signals not read: %s", node, exc)
        return ""
    causes = node_signals(node, node_record(node, body, events, read_at=""), "the Kubernetes API")
    return causes[0].message if causes else ""


def _tell_nominated(view: Incident, n: NodeNomination, kube: KubeActions, now: datetime, annotate: bool) -> None:
    """The Event on the node and (``annotate``) its ``frwatch.io/nominated-by`` annotation (best effort:
    telling never holds the verdict back)."""
    how = ("pinned by the tenant: not evidence against it" if n.pinned
           else f"corroborated by {n.corroborated}" if n.corroborated
           else "not corroborated (yet): never cordoned on the job's own evidence")  # fmt: skip
    spec = Notice("Normal", Reason.NODE_NOMINATED, one_line(f"nominated by incident {view.key}: {how}", 280), n.node)
    try:
        body = kube.get_node(n.node)
        if body is None:
            return
        about = {"apiVersion": "v1", "kind": "Node", "name": n.node, "uid": str((body.get("metadata") or {}).get("uid", ""))}
        kube.create_event(event_object(spec, about=about, incident_uid=view.uid, now=now))
        if annotate:
            kube.patch_node(n.node, {"metadata": {"annotations": {c.ANN_NOMINATED_BY: view.key}}})
    except FrwatchError as exc:
        logger.warning("node %s: nomination not told: %s", n.node, exc)


# --- probing -------------------------------------------------------------------------------------------


def _start_probes(
    view: Incident, nominations: Sequence[NodeNomination], config: Config, kube: KubeActions, now: datetime
) -> dict[str, NodeNomination]:
    """Create the probe Jobs; the nominations with their Job (a create refused leaves that node unprobed)."""
    started: dict[str, NodeNomination] = {}
    for n in nominations:
        manifest = probes.probe_job(view.identity, n.node, remediation=config.remediation, analyzer=config.analyzer)
        try:
            kube.create_job(manifest)
        except FatalError as exc:
            logger.warning("Incident %s: probe of %s not created: %s", view.key, n.node, exc)
            continue
        started[n.node] = n.model_copy(update={"probe_job": manifest["metadata"]["name"], "probe": probes.RUNNING,
                                               "probe_detail": "created"})  # fmt: skip
    return started


def probe_status(nominations: Sequence[NodeNomination]) -> dict[str, Any]:
    """The status patch while probes run."""
    running = [n.node for n in nominations if n.probe == probes.RUNNING]
    return {
        "analysisStep": STEP_PROBE,
        "nominations": [n.wire() for n in nominations],
        "message": one_line(f"probing nominated node(s) {', '.join(running)} before any cordon", 1024),
    }


def read_probes(view: Incident, config: Config, kube: KubeActions, now: datetime) -> tuple[list[NodeNomination], bool]:
    """The nominations with each running probe read again; whether every probe has ended."""
    out: list[NodeNomination] = []
    ns = config.analyzer.namespace
    deadline = timedelta(seconds=config.remediation.probe_deadline_seconds) + PROBE_GRACE
    for n in view.status.nominations:
        if n.probe != probes.RUNNING:
            out.append(n)
            continue
        job = kube.get_batch_job(ns, n.probe_job)
        result, detail = probes.probe_result(job, kube.list_job_pods(ns, n.probe_job) if job else [], n.node)
        created = (job or {}).get("metadata", {}).get("creationTimestamp")
        if result == probes.RUNNING and created and _age(created, now) > deadline:
            result, detail = probes.INCONCLUSIVE, f"the probe Job has not finished {int(deadline.total_seconds())} s after its creation"
        if result != probes.RUNNING:
            corroborated = f"a probe frwatch ran on the node failed ({detail})" if result == probes.FAILED else ""
            n = n.model_copy(update={"probe": result, "probe_detail": detail[:300], "corroborated": corroborated[:300]})
            _tell_probed(view, n, kube, now)
        out.append(n)
    return out, all(n.probe != probes.RUNNING for n in out)


def _age(created: str, now: datetime) -> timedelta:
    at = parse_rfc3339(created)
    return now - at if at is not None else timedelta(0)


def _tell_probed(view: Incident, n: NodeNomination, kube: KubeActions, now: datetime) -> None:
    spec = Notice("Warning" if n.probe == probes.FAILED else "Normal", Reason.NODE_PROBED, one_line(f"probe for incident {view.key}: {n.probe} ({n.probe_detail})", 280), n.node)
    try:
        body = kube.get_node(n.node)
        if body is not None:
            about = {"apiVersion": "v1", "kind": "Node", "name": n.node, "uid": str((body.get("metadata") or {}).get("uid", ""))}
            kube.create_event(event_object(spec, about=about, incident_uid=view.uid, now=now))
    except FrwatchError as exc:
        logger.warning("node %s: probe result not told: %s", n.node, exc)


def after_probes(
    view: Incident, verdict: Verdict, job_nodes: Sequence[str], nominations: list[NodeNomination], *,
    config: Config, settings: CaptureSettings | None, kube: KubeActions, evidence: str, now: datetime,
    job_ref: Mapping[str, str] | None,
) -> Acted:  # fmt: skip
    """Every probe ended: the cordon plan on what is corroborated now."""
    return _remediate(view, verdict, job_nodes, nominations, uncorroborated(nominations), config, settings, kube,
                      evidence, now, job_ref)  # fmt: skip
