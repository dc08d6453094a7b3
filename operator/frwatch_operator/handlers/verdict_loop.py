"""The verdict loop's kopf side: the circuit breaker's gauge at start-up, and the metrics of an Analyzing
pass. The Analyzing passes themselves are driven by the Incident's one timer
(:mod:`frwatch_operator.handlers.incident_phases`), which calls :func:`~frwatch_operator.analysis.analyzing.start_analysis`
and :func:`~frwatch_operator.analysis.analyzing.advance_analysis`.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from frwatch_operator.analysis.steps import Observed
from frwatch_operator.errors import FrwatchError
from frwatch_operator.handlers.deps import Deps
from frwatch_operator.metrics import Metrics
from frwatch_operator.remediation import breaker

logger = logging.getLogger(__name__)


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    kube = deps.kube

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
    if seen.repeat_action not in ("", "none"):
        metrics.same_bug_again(seen.repeat_action, seen.gpu_hours_not_spent)
    if seen.breaker_tripped is not None:
        metrics.breaker_state(seen.breaker_tripped)
