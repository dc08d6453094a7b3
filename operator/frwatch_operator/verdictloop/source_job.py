"""The source step's batch/v1 Job: the code the branch names, copied from the training job's own image, and
report.html rendered with it. Pure: builds dicts, sends nothing.

The training image holds the code (the frames name its files), so the Job's **init container** runs that
image (read from the training job's pods, or its pod template, through the Kubernetes API: never from the
store) with the image's Python and :mod:`.source_copier`'s text as its argument: no shell, ``cp`` or frwatch
code has to be in the image. It copies only the files the verdict's frames name (:func:`copy_list`: at most
:data:`MAX_FILES` absolute, normalised paths; each at most :data:`MAX_FILE_BYTES`, :data:`MAX_TOTAL_BYTES`
in all, regular UTF-8 files reached through no link) into an ``emptyDir`` at :data:`SOURCE_DIR`. The
init container gets no environment, no credentials, no service-account token, no service links; it runs
as non-root on a read-only root filesystem with every capability dropped (as the chart's other pods) and
small resources. Then the **analyzer container** (the analyzer Job's, with the ``emptyDir`` read-only)
runs ``frwatch analyze`` on the same evidence with ``--source`` and writes ``report.html`` over the one
without code. The verdict is not rewritten: verdict.json and report.txt stay the analyzer Job's.

The Job runs where the analyzer Jobs run (``analyzer.namespace``): that is where the analyzer's S3 keys
are, and no tenant may read them. The tenant's image thus runs there, without credentials; a private image
needs its pull Secret there (``analyzer.imagePullSecrets``; the training pod's own pull Secrets are used
when the job runs in that namespace).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from frwatch_analyzers.layout import RootUrl
from frwatch_operator import constants as c
from frwatch_operator.config import AnalyzerSettings, S3Settings
from frwatch_operator.incident import IncidentIdentity
from frwatch_operator.verdictloop import source_copier
from frwatch_operator.verdictloop.analyzer_job import (
    AnalyzerRun,
    analyzer_job,
    analyzer_job_ref,
    fit_name,
)

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
    """(namespace, name) of the incident's source Job: the analyzer Job's name plus ``-src``."""
    ns, name = analyzer_job_ref(incident, settings)
    return ns, fit_name(name[: 63 - len(SOURCE_SUFFIX)].rstrip("-.") + SOURCE_SUFFIX)


def copier_command(python: str, files: Iterable[str]) -> list[str]:
    """The init container's command: the image's Python running the copier's text."""
    program = inspect.getsource(source_copier)
    return [
        python, "-I", "-S", "-c", program,
        SOURCE_DIR, str(MAX_FILE_BYTES), str(MAX_TOTAL_BYTES), COPY_TERMINATION_LOG, "--", *files,
    ]  # fmt: skip


def source_job(
    incident: IncidentIdentity,
    *,
    evidence_url: str,
    s3: S3Settings,
    run: AnalyzerRun,
    training: TrainingImage,
    files: Iterable[str],
    settings: AnalyzerSettings | None = None,
) -> dict[str, Any]:
    """The source step's Job: the analyzer Job's pod plus the copier as its init container and the copy
    mounted read-only at :data:`SOURCE_DIR`; its container writes report.html only."""
    settings = settings or AnalyzerSettings()
    job = copy.deepcopy(analyzer_job(incident, evidence_url=evidence_url, s3=s3, run=run, settings=settings))
    ns, name = source_job_ref(incident, settings)
    job["metadata"]["name"] = name
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
            "name": COPY_CONTAINER,
            "image": training.image,
            "command": copier_command(settings.source_python, files),
            "resources": copy.deepcopy(COPY_RESOURCES),
            "terminationMessagePath": COPY_TERMINATION_LOG,
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "securityContext": copy.deepcopy(container["securityContext"]),
            "volumeMounts": [{"name": "source", "mountPath": SOURCE_DIR}],
        }
    ]
    pod["volumes"] = [*pod["volumes"], {"name": "source", "emptyDir": {"sizeLimit": EMPTYDIR_LIMIT}}]
    secrets = list(settings.pull_secrets)
    if ns == incident.namespace:  # the training pod's own pull Secrets live in this namespace
        secrets += [s for s in training.pull_secrets if s not in secrets]
    if secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in secrets]
    return job
