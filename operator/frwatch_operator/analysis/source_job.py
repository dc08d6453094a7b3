"""The source step's two batch/v1 Jobs: the code the branch names, copied from the training job's own image
in the training job's namespace, and report.html rendered with it in frwatch's. Pure: builds dicts, sends
nothing.

**The copy Job** (:func:`copy_job`) runs in the training job's own namespace, owned by the Incident, so the
tenant's image never runs where frwatch keeps its keys. Its **init container** runs the training image
(read from the training job's pods, or its pod template, through the Kubernetes API: never from the store)
with the image's Python and :mod:`.source_copier`'s text as its argument: no shell, ``cp`` or frwatch code
has to be in the image. It copies only the files the verdict's frames name (:func:`copy_list`: at most
:data:`MAX_FILES` absolute, normalised paths; each at most :data:`MAX_FILE_BYTES`, :data:`MAX_TOTAL_BYTES`
in all, regular UTF-8 files reached through no link) into an ``emptyDir`` at :data:`SOURCE_DIR`. Then the
**hand-over container** (frwatch's image, :mod:`.source_handover`) packs that folder into one object and
PUTs it to a presigned URL the operator minted for exactly one key (``source/files.json`` under the
attempt's root), expiring a minute after the Job's ``activeDeadlineSeconds``. Neither container gets store
keys, a service-account token (``automountServiceAccountToken: false``) or service links; the init
container gets no environment at all; both run as non-root on a read-only root filesystem with every
capability dropped, with resource limits; the Job is not retried (``backoffLimit: 0``). The URL is in the
Job's spec, which the tenant can read: it lets whoever holds it write that one key until it expires, and
nothing else; what is there is read as the tenant's (hostile) input.

**The render Job** (:func:`render_job`) runs where the analyzer Jobs run (``analyzer.namespace``), with the
analyzer's keys: its init container (frwatch's image) fetches the object and unpacks it, checked again
and bounded, into an ``emptyDir``; the analyzer container (the analyzer Job's, the ``emptyDir`` read-only)
runs ``frwatch analyze`` on the same evidence with ``--source`` and writes ``report.html`` over the one
without code. The verdict is not rewritten: verdict.json and report.txt stay the analyzer Job's. No tenant
image runs there.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from frwatch_analyzers.store.layout import RootUrl
from frwatch_operator import constants as c
from frwatch_operator.analysis import source_copier
from frwatch_operator.analysis.analyzer_job import (
    RUN_AS_USER,
    AnalyzerRun,
    analyzer_job,
    analyzer_job_ref,
    analyzer_labels,
)
from frwatch_operator.config import AnalyzerSettings, S3Settings
from frwatch_operator.incident.record import IncidentIdentity
from frwatch_operator.kube.names import fit_name

#: Files copied at most (the bridge reads at most 12 sides of 9 frames, most of them the same files).
MAX_FILES = 32
#: A file larger than this is skipped (the analyzer's own limit: ``htmlreport.sourcefiles.MAX_SOURCE_BYTES``).
MAX_FILE_BYTES = 2 * 1024 * 1024
#: Bytes copied in all, at most; the emptyDir's sizeLimit is a little more.
MAX_TOTAL_BYTES = 32 * 1024 * 1024
EMPTYDIR_LIMIT = "40Mi"
#: Where the copy is mounted (read-write for the copier, read-only for the analyzer): a path no training
#: code lives at.
SOURCE_DIR = "/frwatch-source"
SOURCE_SUFFIX = "-src"
COPY_CONTAINER = "copy-source"
#: The copy container's termination message file (the kubelet's default path, given explicitly).
COPY_TERMINATION_LOG = "/dev/termination-log"
#: The copier's resources: it reads at most MAX_TOTAL_BYTES.
COPY_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}
#: The copy Job's name: this prefix and the Incident's name, in the Incident's namespace.
COPY_JOB_PREFIX = "frwatch-source-"
#: The copy Job's container (frwatch's image) that hands the copy over through the presigned URL.
HANDOVER_CONTAINER = "hand-over"
#: The render Job's init container (frwatch's image) that fetches and unpacks the hand-over.
FETCH_CONTAINER = "fetch-source"
#: The hand-over's and the fetch's resources: they hold the bundle (at most about twice MAX_TOTAL_BYTES) and
#: its decoded text at once (measured: 217 MiB peak unpacking 16 files of 2 MB of non-ASCII text).
HANDOVER_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}


@dataclass(frozen=True)
class CopyList:
    """The paths to copy, and the names left out with their reasons."""

    paths: tuple[str, ...]
    left_out: tuple[str, ...] = ()


def copy_list(names: Iterable[str], max_files: int = MAX_FILES) -> CopyList:
    """The file names a verdict's frames give (hostile: from dumps and logs), normalised and bounded: absolute
    paths only (``source_copier.normalise``: no ``..``, no control characters, none under /proc, /sys, /dev,
    /run), each once, at most ``max_files``; every name left out is said with its reason (at most 8)."""
    paths: list[str] = []
    left_out: list[str] = []
    for name in names:
        path, why = source_copier.normalise(name)
        if not why and path in paths:
            continue
        if not why and len(paths) >= max_files:
            why = f"more than {max_files} files"
        if why:
            if len(left_out) < 8:
                left_out.append(f"{name[:120]!r}: {why}")
            continue
        paths.append(path)
    return CopyList(tuple(paths), tuple(left_out))


def training_container(pod_spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first training container of a pod spec: a regular container that is not the frwatch agent."""
    for container in pod_spec.get("containers") or []:
        if isinstance(container, Mapping) and container.get("name") != c.AGENT_CONTAINER and container.get("image"):
            return container
    return None


def template_image(job: Mapping[str, Any], depth: int = 8) -> str:
    """The training image a job object names: ``spec.trainer.image`` (a TrainJob's), else the first training
    container of the first pod template found in its spec (a PyTorchJob's replica specs, a JobSet's
    replicated Jobs); "" when it names none (a TrainJob that leaves the image to its runtime)."""
    spec = job.get("spec") or {}
    trainer = spec.get("trainer") if isinstance(spec, Mapping) else None
    if isinstance(trainer, Mapping) and isinstance(trainer.get("image"), str) and trainer["image"]:
        return str(trainer["image"])
    return _find_image(spec, depth)


def _find_image(node: Any, depth: int) -> str:
    if depth <= 0:
        return ""
    if isinstance(node, Mapping):
        if isinstance(node.get("containers"), list):
            found = training_container(node)
            if found is not None:
                return str(found["image"])
        for value in node.values():
            image = _find_image(value, depth - 1)
            if image:
                return image
    elif isinstance(node, list):
        for value in node[:16]:
            image = _find_image(value, depth - 1)
            if image:
                return image
    return ""


@dataclass(frozen=True)
class TrainingImage:
    """The image the training ranks ran, where it was read, and the pull Secrets of its pod."""

    image: str
    seen_in: str  #: "pod NAME" or "the KIND's pod template"
    pull_secrets: tuple[str, ...] = ()


def source_job_ref(incident: IncidentIdentity, settings: AnalyzerSettings) -> tuple[str, str]:
    """(namespace, name) of the incident's render Job: the analyzer Job's name plus ``-src``."""
    ns, name = analyzer_job_ref(incident, settings)
    return ns, fit_name(name[: 63 - len(SOURCE_SUFFIX)].rstrip("-.") + SOURCE_SUFFIX)


def copy_job_ref(incident: IncidentIdentity) -> tuple[str, str]:
    """(namespace, name) of the incident's copy Job: in the Incident's (the training job's) namespace."""
    return incident.namespace, fit_name(COPY_JOB_PREFIX + incident.name)


def bundle_url(evidence_url: str) -> str:
    """``s3://`` URL of the hand-over object under the attempt's root."""
    return RootUrl.parse(evidence_url).url(c.SOURCE_BUNDLE_KEY)


def copier_command(python: str, files: Iterable[str]) -> list[str]:
    """The init container's command: the image's Python running the copier's text."""
    program = inspect.getsource(source_copier)
    return [
        python, "-I", "-S", "-c", program,
        SOURCE_DIR, str(MAX_FILE_BYTES), str(MAX_TOTAL_BYTES), COPY_TERMINATION_LOG, "--", *files,
    ]  # fmt: skip


def _restricted() -> dict[str, Any]:
    """Every container's securityContext (Pod Security "restricted", a read-only root)."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }


def copy_job(
    incident: IncidentIdentity,
    *,
    training: TrainingImage,
    files: Iterable[str],
    put_url: str,
    image: str,
    settings: AnalyzerSettings | None = None,
    ttl_seconds_after_finished: int = 3600,
) -> dict[str, Any]:
    """The copy Job, in the Incident's namespace: the training image copies ``files`` into an ``emptyDir``,
    frwatch's ``image`` (the agent's: it is pulled in training namespaces already, with the pull Secrets the
    webhook gives training pods) hands them over to ``put_url`` (a presigned PUT of one key). No credentials
    anywhere."""
    settings = settings or AnalyzerSettings()
    ns, name = copy_job_ref(incident)
    labels = {**analyzer_labels(incident), c.LABEL_COMPONENT: "source-copy"}
    copier = {
        "name": COPY_CONTAINER,
        "image": training.image,
        "command": copier_command(settings.source_python, files),
        "resources": copy.deepcopy(COPY_RESOURCES),
        "terminationMessagePath": COPY_TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": _restricted(),
        "volumeMounts": [{"name": "source", "mountPath": SOURCE_DIR}],
    }
    hand_over = {
        "name": HANDOVER_CONTAINER,
        "image": image,
        "command": ["frwatch", "source", "hand-over", SOURCE_DIR, "--termination-log", COPY_TERMINATION_LOG],
        "env": [{"name": c.ENV_SOURCE_PUT_URL, "value": put_url}],
        "resources": copy.deepcopy(HANDOVER_RESOURCES),
        "terminationMessagePath": COPY_TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": _restricted(),
        "volumeMounts": [{"name": "source", "mountPath": SOURCE_DIR, "readOnly": True}],
    }
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "runAsGroup": RUN_AS_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "initContainers": [copier],
        "containers": [hand_over],
        "volumes": [{"name": "source", "emptyDir": {"sizeLimit": EMPTYDIR_LIMIT}}],
    }
    if training.pull_secrets:  # the training pod's own, in this namespace
        pod["imagePullSecrets"] = [{"name": s} for s in training.pull_secrets]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels,
            "annotations": {c.ANN_INCIDENT: incident.name, c.ANN_INCIDENT_UID: incident.uid},
            "ownerReferences": [incident.owner_reference()],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": settings.source_deadline_seconds,
            "ttlSecondsAfterFinished": ttl_seconds_after_finished,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def render_job(
    incident: IncidentIdentity,
    *,
    evidence_url: str,
    s3: S3Settings,
    run: AnalyzerRun,
    copied: str = "",
    settings: AnalyzerSettings | None = None,
) -> dict[str, Any]:
    """The render Job: the analyzer Job's pod plus an init container that fetches and unpacks the hand-over
    into an ``emptyDir`` mounted read-only at :data:`SOURCE_DIR`; its container writes report.html only.
    ``copied``: what the copy said it copied (kept on the Job as ``frwatch.io/source-copied``)."""
    settings = settings or AnalyzerSettings()
    job = copy.deepcopy(analyzer_job(incident, evidence_url=evidence_url, s3=s3, run=run, settings=settings))
    _, name = source_job_ref(incident, settings)
    job["metadata"]["name"] = name
    if copied:
        job["metadata"]["annotations"][c.ANN_SOURCE_COPIED] = copied[:1024]
    for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
        labels[c.LABEL_COMPONENT] = "analyzer-source"
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    root = RootUrl.parse(evidence_url)
    command = list(container["command"])
    # the same analysis, its page with the code: verdict.json and report.txt are not written again
    for flag in ("--out", "--report-out", "--html"):
        if flag in command:
            i = command.index(flag)
            del command[i : i + 2]
    command += ["--html", root.report_html_url, "--source", SOURCE_DIR]
    container["command"] = command
    container["volumeMounts"] = [
        *container["volumeMounts"],
        {"name": "source", "mountPath": SOURCE_DIR, "readOnly": True},
    ]
    pod["initContainers"] = [
        {
            "name": FETCH_CONTAINER,
            "image": run.image,
            "command": [
                *("frwatch", "source", "fetch", bundle_url(evidence_url), SOURCE_DIR),
                *("--termination-log", COPY_TERMINATION_LOG),
            ],
            "env": copy.deepcopy(container["env"]),
            "resources": copy.deepcopy(HANDOVER_RESOURCES),
            "terminationMessagePath": COPY_TERMINATION_LOG,
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "securityContext": copy.deepcopy(container["securityContext"]),
            "volumeMounts": [{"name": "source", "mountPath": SOURCE_DIR}],
        }
    ]
    pod["volumes"] = [*pod["volumes"], {"name": "source", "emptyDir": {"sizeLimit": EMPTYDIR_LIMIT}}]
    return job
