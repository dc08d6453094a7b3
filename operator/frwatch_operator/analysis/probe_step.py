"""The probe step of the Analyzing phase: the verdict is on the job, frwatch's probe Jobs run on the nominated
nodes (:mod:`.corroborating`), and the cordon plan waits for them. Recorded as ``analysisStep: Probe`` with
``status.nominations`` (each probe's Job and result); the phase stays Analyzing while a probe runs.

When the last probe ended, the verdict is read again from the store and bound again to the digest kept in
``status.verdictDigest`` (a verdict replaced while the probes ran is refused: nothing is touched), checked
against ``status.observed``, and the cordon plan runs on what is corroborated now. Then the phase is
Reported, or the source step begins (``analyzer.sourceFromImage``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from frwatch_analyzers.store.layout import RootUrl
from frwatch_analyzers.verdict import Verdict
from frwatch_operator.analysis import source_step
from frwatch_operator.config import Config
from frwatch_operator.incident.record import Incident, evidence_url
from frwatch_operator.kube.ports import KubeActions, Obj
from frwatch_operator.remediation import corroboration as corroborating
from frwatch_operator.remediation.cordon_policy import effective_rules
from frwatch_operator.resources import CaptureSettings, Condition, IncidentPhase
from frwatch_operator.store.s3 import S3Store
from frwatch_operator.verdict.evidence_check import check_verdict
from frwatch_operator.verdict.reading import VerdictUnavailable, read_verdict
from frwatch_operator.verdict.report import one_line, remediated_condition


def advance(
    view: Incident,
    *,
    config: Config,
    kube: KubeActions,
    store: S3Store,
    settings: CaptureSettings | None,
    now: datetime,
    training_of: Callable[[], tuple[Obj | None, dict[str, str] | None]],
) -> tuple[dict[str, Any], bool, tuple[corroborating.Acted, Verdict] | None]:
    """One look at the probes: ``(patch, False, ...)`` while one runs (or the source step began after them);
    ``(patch for Reported, True, ...)`` once the cordon plan ran, with what it did and on which verdict (for
    the metrics). ``training_of``: the training job and its involvedObject reference (None: gone), read only
    once the probes are over."""
    nominations, over = corroborating.read_probes(view, config, kube, now)
    if not over:
        wired = [n.wire() for n in nominations]
        return ({"nominations": wired} if wired != [n.wire() for n in view.status.nominations] else {}), False, None
    url = evidence_url(view.spec.storage_url, f"Incident {view.key}")
    training, job_ref = training_of()
    remediated: Condition | None
    acted: tuple[corroborating.Acted, Verdict] | None = None
    try:
        checked = check_verdict(read_verdict(store, url, view.status.verdict_digest or None), view.status.observed)
    except VerdictUnavailable as exc:
        checked = None
        mode = effective_rules(config.remediation, settings).mode.value
        summary = f"no node touched: the verdict could not be read again after the probes: {exc}"
        remediated = remediated_condition(mode, summary, cordoned=False, now=now)
    if checked is not None and job_ref is None:  # as when the job goes while it is analysed: no node touched
        mode = effective_rules(config.remediation, settings).mode.value
        summary = f"the {view.spec.job_ref.kind} was deleted while its nodes were probed: no node touched"
        remediated = remediated_condition(mode, summary, cordoned=False, now=now)
    elif checked is not None:
        done = corroborating.after_probes(
            view, checked.verdict, checked.job_nodes, nominations, config=config, settings=settings, kube=kube,
            evidence=RootUrl.parse(url).report_url, now=now, job_ref=job_ref,
        )  # fmt: skip
        remediated, acted = done.condition, (done, checked.verdict)
    conditions = list(view.status.conditions)
    if remediated is not None:
        conditions = [x for x in conditions if x.type != remediated.type] + [remediated]
    line = view.status.verdict.short if view.status.verdict is not None else view.status.category
    status: dict[str, Any] = {
        "phase": IncidentPhase.REPORTED.value, "analysisStep": "", "nominations": [n.wire() for n in nominations],
        "conditions": [x.wire() for x in conditions],
        "message": one_line(f"{line}; {remediated.message}" if remediated is not None else line, 1024),
    }  # fmt: skip
    if config.analyzer.source_from_image and training is not None and checked is not None:
        status, more = source_step.begin(
            view, training, checked.verdict, status, config=config, settings=settings, kube=kube, store=store,
            url=url, now=now,
        )  # fmt: skip
        return status, not more, acted
    return status, True, acted
