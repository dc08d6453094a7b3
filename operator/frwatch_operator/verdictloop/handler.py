"""The verdict loop's kopf handler: drives each Incident the core handed over, from ``Analyzing`` to
``Reported`` or ``Failed``. Thin: decode, call :func:`advance_analysis`, write the status it returns.

Wired by ``register(registry, deps)`` (from ``frwatch_operator.handlers.register_all``): a timer on
Incidents whose phase is ``Analyzing`` and whose hand-off condition (``AnalysisRequested``) is True, so
it takes over exactly where the core's collection timer stops. A restarted operator resumes: the timer
re-reads the Job and the store each pass.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from frwatch_operator import constants as c
from frwatch_operator.analysis_handoff import CONDITION
from frwatch_operator.errors import FrwatchError, NotFoundError
from frwatch_operator.handlers import Deps, translate_errors
from frwatch_operator.metrics import Metrics
from frwatch_operator.optin import CaptureSettings, defaults
from frwatch_operator.resources import IncidentPhase
from frwatch_operator.verdictloop import breaker, wiring
from frwatch_operator.verdictloop.analyzing import Observed, advance_analysis
from frwatch_operator.verdictloop.kube_actions import KubernetesActions

logger = logging.getLogger(__name__)


def handed_over(status: Mapping[str, Any], **_: Any) -> bool:
    """Whether the verdict loop owns this Incident now (kopf ``when`` filter)."""
    if str((status or {}).get("phase") or "") != IncidentPhase.ANALYZING.value:
        return False
    return any(
        isinstance(x, Mapping) and x.get("type") == CONDITION and x.get("status") == "True"
        for x in (status or {}).get("conditions") or []
    )


def _settings(deps: Deps, body: Mapping[str, Any]) -> CaptureSettings:
    namespace = str((body.get("metadata") or {}).get("namespace") or "")
    job = str(((body.get("spec") or {}).get("jobRef") or {}).get("name") or "")
    decision = deps.index.decide(namespace, job, deps.config)
    return decision.settings if decision is not None and decision.settings else defaults(deps.config)


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    kube = KubernetesActions(deps.kube.api)
    wiring.wire(kube)

    @kopf.on.startup(id="frwatch-breaker-gauge", registry=registry)
    def breaker_gauge(**_: Any) -> None:
        """The breaker gauge from its stored state, so a restarted operator shows a breaker still tripped."""
        r = deps.config.remediation
        if not r.enabled:
            return
        try:
            stored = kube.read_configmap(r.breaker_namespace, r.breaker_configmap)
        except FrwatchError as exc:  # a gauge is not worth delaying the start for
            logger.warning("circuit breaker state not read at start: %s", exc)
            return
        deps.metrics.breaker_state(breaker.from_data((stored or {}).get("data")).tripped)

    @kopf.timer(
        c.GROUP, c.VERSION, c.INCIDENT_PLURAL, id="frwatch-verdict-loop",
        interval=deps.config.operator.incident_poll_seconds, when=handed_over, registry=registry,
    )  # fmt: skip
    @translate_errors
    def verdict_loop_timer(body: kopf.Body, **_: Any) -> None:
        if not deps.leader.leading():  # one replica drives; the others' timers pass
            return
        step = advance_analysis(
            body, config=deps.config, kube=kube, store=deps.s3, settings=_settings(deps, body)
        )
        if step.status:
            meta = body.get("metadata") or {}
            try:
                deps.kube.patch_incident_status(
                    str(meta.get("namespace")), str(meta.get("name")), step.status
                )
            except NotFoundError:
                return  # the Incident was deleted meanwhile (with its job): nothing left to record
        record(deps.metrics, step.observed)


def record(metrics: Metrics, seen: Observed) -> None:
    """One metrics call for each thing a verdict-loop pass did (after its status was written, so a pass
    repeated after a failed write is not counted twice)."""
    if seen.analyzer_job:
        metrics.analyzer_job_ended(seen.analyzer_job)
    if seen.category:
        metrics.verdict_stored(seen.category, seen.hardware_class, seen.seconds_since_detection)
    for _ in range(seen.cordoned):
        metrics.cordoned(dry_run=False)
    for _ in range(seen.would_cordon):
        metrics.cordoned(dry_run=True)
    for reason in seen.skipped:
        metrics.cordon_skipped(reason)
    if seen.breaker_tripped is not None:
        metrics.breaker_state(seen.breaker_tripped)
