"""The source step of the Analyzing phase (``analyzer.sourceFromImage``): after the verdict is on the job,
the code the branch names is copied from the training image and report.html is rendered with it
(:mod:`.source_job`), in two Jobs: the copy Job in the training job's namespace (``analysisStep:
SourceCopy``), then the render Job in ``analyzer.namespace`` (``analysisStep: Source``); ``analyzerSourceJob``
names the one running. The phase stays Analyzing while they run, and turns Reported when the step ends.

The verdict never depends on it: the annotations, Events, cordon policy and the Incident's verdict fields
are written before the step starts (:func:`begin`), and whatever becomes of the step (no frames, no image,
a Job refused, failed, overdue or gone) the phase ends Reported with ``sourceReport`` saying why the
report has no code, and report.html is rendered again by the operator with that reason (:func:`finish`).

Facts that drive the step come from the Kubernetes API: the image from the training pods (those of
``status.observed``, read by name) or the job's pod template, never from the store. The file names come
from the verdict (evidence): they only choose what is copied, bounded and checked twice (:func:`.source_job.copy_list`,
:mod:`.source_copier`), into a pod that holds no credentials; what comes back (the hand-over object, the
copier's message) is the tenant's and is read as such (:mod:`.source_handover`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from frwatch_analyzers.report.html import render_html
from frwatch_analyzers.report.html.bridge import files_read
from frwatch_analyzers.store.layout import REPORT_HTML, RootUrl
from frwatch_analyzers.verdict import Verdict
from frwatch_operator import constants as c
from frwatch_operator.analysis.analyzer_job import effective_run
from frwatch_operator.analysis.job_outcome import JobState
from frwatch_operator.analysis.job_reading import read_job
from frwatch_operator.analysis.source_handover import BUNDLE_KEY
from frwatch_operator.analysis.source_job import (
    COPY_CONTAINER,
    FETCH_CONTAINER,
    HANDOVER_CONTAINER,
    TrainingImage,
    copy_job,
    copy_job_ref,
    copy_list,
    render_job,
    source_job_ref,
    template_image,
    training_container,
)
from frwatch_operator.config import Config
from frwatch_operator.errors import FatalError, FrwatchError
from frwatch_operator.incident.record import Incident
from frwatch_operator.kube.ports import KubeActions, Obj
from frwatch_operator.notices import Notice, Reason
from frwatch_operator.resources import CaptureSettings, IncidentPhase
from frwatch_operator.store.s3 import S3Store
from frwatch_operator.verdict.events import event_object
from frwatch_operator.verdict.reading import VerdictUnavailable, read_verdict
from frwatch_operator.verdict.report import one_line

logger = logging.getLogger(__name__)

#: ``status.analysisStep`` while the copy Job runs in the training job's namespace.
STEP_SOURCE_COPY = "SourceCopy"
#: ``status.analysisStep`` while the render Job runs (and after: the step that ran last).
STEP_SOURCE = "Source"
#: The steps :func:`advance` drives.
STEPS = (STEP_SOURCE_COPY, STEP_SOURCE)
#: The presigned URL outlives the copy Job's deadline by this much (seconds): a slow start still hands over.
URL_GRACE_SECONDS = 60
#: Pods of ``status.observed`` read, at most, to find the training image.
MAX_PODS_READ = 4
#: Lead of ``sourceReport`` when the code is in report.html.
WITH_CODE = "report.html shows the code"
WITHOUT_CODE = "report.html without code"


def training_image(view: Incident, training: Obj, kube: KubeActions) -> TrainingImage | None:
    """The image the ranks ran: a training pod's first training container (pods of ``status.observed``,
    the first few still there), else the job's pod template; None when neither names one."""
    pods = [p for p in (view.status.observed.pods if view.status.observed else []) if not p.deleted]
    for seen in pods[:MAX_PODS_READ]:
        pod = kube.get_pod(view.namespace, seen.name)
        if pod is None:
            continue
        spec = pod.get("spec") or {}
        container = training_container(spec)
        if container is not None:
            secrets = tuple(str(s.get("name")) for s in spec.get("imagePullSecrets") or [] if s.get("name"))
            return TrainingImage(str(container["image"]), f"pod {seen.name}", secrets)
    image = template_image(training)
    return TrainingImage(image, f"the {view.spec.job_ref.kind}'s pod template") if image else None


def begin(
    view: Incident,
    training: Obj,
    verdict: Verdict,
    reported: Mapping[str, Any],
    *,
    config: Config,
    settings: CaptureSettings | None,
    kube: KubeActions,
    store: S3Store,
    url: str,
    now: datetime,
) -> tuple[dict[str, Any], bool]:
    """The status after the verdict was surfaced (``reported``: the Reported status): the copy Job created in
    the Incident's namespace with a presigned URL for the hand-over's one key, and the phase kept Analyzing
    (``True``: call :func:`advance` later), or, when there is nothing to copy, nowhere to copy it from or no
    URL, Reported at once with the reason (``False``)."""
    wanted = copy_list(files_read(verdict))
    why = ""
    image = None
    if not wanted.paths:
        why = "the branch's frames name no absolute file path (no Python frames, or none usable)"
        if wanted.left_out:
            why += ": " + "; ".join(wanted.left_out[:3])
    else:
        try:
            image = training_image(view, training, kube)
        except FatalError as exc:  # forbidden, invalid: the step is given up, never the verdict
            image, why = None, f"the training pods could not be read: {exc}"
        if image is None and not why:
            why = f"no training image found (the attempt's pods are gone and the {view.spec.job_ref.kind} names none)"
    if image is None:
        return finish(view, verdict, reported, kube, store, url, now, why, ok=False), False
    root = RootUrl.parse(url)
    expires = config.analyzer.source_deadline_seconds + URL_GRACE_SECONDS
    try:
        put_url = store.presign_put(root.key(BUNDLE_KEY), expires, bucket=root.bucket)
    except FrwatchError as exc:
        why = f"no upload URL could be made for the hand-over: {exc}"
        return finish(view, verdict, reported, kube, store, url, now, why, ok=False), False
    manifest = copy_job(
        view.identity, training=image, files=wanted.paths, put_url=put_url, image=config.agent.image,
        settings=config.analyzer,
        ttl_seconds_after_finished=config.analyzer.ttl_seconds_after_finished,
    )  # fmt: skip
    created = _create(view, manifest, kube)
    if created:
        return finish(view, verdict, reported, kube, store, url, now, created, ok=False), False
    name = str(manifest["metadata"]["name"])
    said = (
        f"copying {len(wanted.paths)} source file{'s' if len(wanted.paths) != 1 else ''} the branch names from "
        f"image {image.image} ({image.seen_in}) in Job {view.namespace}/{name}, then rendering report.html with "
        "the code"
    )
    _event(view, kube, now, "Normal", said, key="started")
    status = {
        **reported,
        "phase": IncidentPhase.ANALYZING.value,
        "analysisStep": STEP_SOURCE_COPY,
        "analyzerSourceJob": name,
        "message": one_line(f"{reported.get('message', '')}; source step: {said}", 1024),
    }
    return status, True


def _create(view: Incident, manifest: Mapping[str, Any], kube: KubeActions) -> str:
    """Create one of the step's Jobs; "" when it is there and this Incident's, else why not."""
    ns, name = str(manifest["metadata"]["namespace"]), str(manifest["metadata"]["name"])
    try:
        job = kube.create_job(manifest)
    except FatalError as exc:
        return f"the Job {ns}/{name} was not created: {exc}"
    meta = job.get("metadata") or {}
    owners = [ref.get("uid") for ref in meta.get("ownerReferences") or []]
    if view.uid not in owners and (meta.get("annotations") or {}).get(c.ANN_INCIDENT_UID) != view.uid:  # an earlier Incident's, of the same name
        kube.delete_job(ns, name)
        return f"a Job {ns}/{name} of an earlier Incident of the same name was in the way (deleted)"
    return ""


def advance(
    view: Incident,
    *,
    config: Config,
    settings: CaptureSettings | None,
    kube: KubeActions,
    store: S3Store,
    url: str,
    now: datetime,
) -> tuple[dict[str, Any], bool]:
    """One look at the step's Job: ``(patch, False)`` while it runs (or when the copy ended and the render
    Job was started); ``(patch for Reported, True)`` when the step ended (or a Job is gone, or overdue)."""
    copying = view.status.analysis_step == STEP_SOURCE_COPY
    if copying:
        ns, name = copy_job_ref(view.identity)
    else:
        ns, name = source_job_ref(view.identity, config.analyzer)
        ns = view.status.analyzer_namespace or ns
    name = view.status.analyzer_source_job or name
    what = "copy Job" if copying else "source Job"
    try:
        read = read_job(kube, ns, name, analyzer=config.analyzer, settings=settings, now=now)
    except FatalError as exc:  # forbidden, invalid: the step is given up, never the verdict
        return finish(view, None, {}, kube, store, url, now, f"the {what} could not be read: {exc}", ok=False), True
    if read is None:
        why = f"the {what} {ns}/{name} was gone when frwatch looked"
        return finish(view, None, {}, kube, store, url, now, why, ok=False), True
    outcome, pods = read.outcome, read.pods
    if outcome.state is JobState.RUNNING:
        waiting = copy_waiting(pods) or outcome.message.replace("analyzer Job", what, 1)
        message = one_line(f"{_verdict_line(view)}; source step: {waiting}", 1024)
        return ({"message": message} if message != view.status.message else {}), False
    if outcome.state is JobState.SUCCEEDED and copying:
        return _render(view, config, settings, kube, store, url, now, copy_summary(pods))
    if outcome.state is JobState.SUCCEEDED:
        copied = str(((read.job.get("metadata") or {}).get("annotations") or {}).get(c.ANN_SOURCE_COPIED) or "")
        fetched = container_message(pods, FETCH_CONTAINER, init=True)
        said = "; ".join(x for x in (copied, fetched) if x)
        return finish(view, None, {}, kube, store, url, now, f"{WITH_CODE} ({said or 'the copy said nothing'})", ok=True), True
    why = outcome.message.replace("analyzer Job", what, 1)
    failed = copy_ending(pods) if copying else ""
    if failed:
        why += f"; the copy from the training image: {failed}"
    elif copying:
        handed = container_message(pods, HANDOVER_CONTAINER, init=False)
        why += f"; the hand-over: {handed}" if handed else ""
    else:
        fetched = container_message(pods, FETCH_CONTAINER, init=True)
        why += f"; the fetch of the copy: {fetched}" if fetched else ""
    return finish(view, None, {}, kube, store, url, now, why, ok=False), True


def _render(
    view: Incident,
    config: Config,
    settings: CaptureSettings | None,
    kube: KubeActions,
    store: S3Store,
    url: str,
    now: datetime,
    copied: str,
) -> tuple[dict[str, Any], bool]:
    """The copy was handed over: start the render Job in frwatch's namespace (``False``: the step goes on),
    or end the step saying why (``True``)."""
    run = effective_run(config.analyzer, settings)
    manifest = render_job(
        view.identity, evidence_url=url, s3=config.s3, run=run, copied=copied, settings=config.analyzer
    )
    created = _create(view, manifest, kube)
    if created:
        return finish(view, None, {}, kube, store, url, now, created, ok=False), True
    name = str(manifest["metadata"]["name"])
    message = one_line(f"{_verdict_line(view)}; source step: {copied or 'copied'}; rendering report.html in Job {name}", 1024)
    return {"analysisStep": STEP_SOURCE, "analyzerSourceJob": name, "message": message}, False


def finish(
    view: Incident,
    verdict: Verdict | None,
    reported: Mapping[str, Any],
    kube: KubeActions,
    store: S3Store,
    url: str,
    now: datetime,
    text: str,
    *,
    ok: bool,
) -> dict[str, Any]:
    """Phase Reported with ``sourceReport``; without code, report.html rendered again saying why (best effort:
    the one the analyzer Job wrote stays when the verdict cannot be read back) and a Warning on the Incident."""
    report = text if ok else f"{WITHOUT_CODE}: {text}"
    if not ok:
        report += _rerender(verdict, store, url, text)
    _event(view, kube, now, "Normal" if ok else "Warning", report, key="ended")
    head = str(reported.get("message") or "") or _verdict_line(view)
    return {
        **reported,
        "phase": IncidentPhase.REPORTED.value,
        "sourceReport": one_line(report, 1024),
        "message": one_line(f"{head}; {report}" if head else report, 1024),
    }


def _verdict_line(view: Incident) -> str:
    """The verdict's line as the Incident holds it (the status written when the verdict was surfaced)."""
    return view.status.verdict.short if view.status.verdict is not None else view.status.category


def _rerender(verdict: Verdict | None, store: S3Store, url: str, why: str) -> str:
    """Write report.html again with ``why`` where the code would be; "" or what kept it from being written."""
    try:
        verdict = verdict or read_verdict(store, url)
        root = RootUrl.parse(url)
        page = render_html(verdict, source_missing=f"The code could not be copied from the training image: {why}")
        store.put(root.key(REPORT_HTML), page.encode(), bucket=root.bucket, content_type="text/html; charset=utf-8")
    except (VerdictUnavailable, FrwatchError) as exc:
        logger.warning("report.html not rendered again at %s: %s", url, exc)
        return f" (report.html not rendered again: {exc})"
    return ""


def _event(view: Incident, kube: KubeActions, now: datetime, kind: str, message: str, *, key: str) -> None:
    """One Event on the Incident (``key``: the step's start or its end, each posted once)."""
    spec = Notice(
        "Normal" if kind == "Normal" else "Warning", Reason.SOURCE_REPORT, one_line(message, 1024), key=key
    )
    try:
        kube.create_event(event_object(spec, about=view.identity.reference(), incident_uid=view.uid, now=now))
    except FrwatchError as exc:  # an Event is not worth holding the report back
        logger.warning("Incident %s: %s Event not posted: %s", view.key, Reason.SOURCE_REPORT, exc)


def _copy_status(pods: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The copy container's status in the newest pod."""
    newest = max(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp", "")), default=None)
    for status in ((newest or {}).get("status") or {}).get("initContainerStatuses") or []:
        if status.get("name") == COPY_CONTAINER:
            return status  # type: ignore[no-any-return]
    return {}


def container_message(pods: Sequence[Mapping[str, Any]], name: str, *, init: bool) -> str:
    """The termination message of container ``name`` in the newest pod, bounded; "" when none."""
    newest = max(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp", "")), default=None)
    key = "initContainerStatuses" if init else "containerStatuses"
    for status in ((newest or {}).get("status") or {}).get(key) or []:
        if status.get("name") == name:
            term = (status.get("state") or {}).get("terminated") or {}
            return one_line(str(term.get("message") or ""), 400)
    return ""


def copy_summary(pods: Sequence[Mapping[str, Any]]) -> str:
    """The copier's termination message ("copied N of M files; skipped: ..."), bounded; "" when none."""
    term = (_copy_status(pods).get("state") or {}).get("terminated") or {}
    return one_line(str(term.get("message") or ""), 600) if term.get("exitCode") == 0 else ""


def copy_ending(pods: Sequence[Mapping[str, Any]]) -> str:
    """How the copy ended when it failed (exit code, reason, its message or log tail); "" otherwise."""
    status = _copy_status(pods)
    term = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get("terminated") or {}
    if term and term.get("exitCode") != 0:
        text = f"exit {term.get('exitCode')}"
        if term.get("reason"):
            text += f" [{term['reason']}]"
        message = one_line(str(term.get("message") or ""), 400)
        return f"{text}: {message}" if message else text
    return copy_waiting(pods)


def copy_waiting(pods: Sequence[Mapping[str, Any]]) -> str:
    """Why the copy container waits (ImagePullBackOff, ...); "" when it does not."""
    waiting = (_copy_status(pods).get("state") or {}).get("waiting") or {}
    reason = str(waiting.get("reason") or "")
    if not reason or reason == "PodInitializing":
        return ""
    return one_line(f"the copy from the training image waits: {reason} {waiting.get('message', '')}", 400)

