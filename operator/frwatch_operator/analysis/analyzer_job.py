"""The analyzer's batch/v1 Job manifest for one incident. Pure: builds a dict, sends nothing.

The Job runs where the cluster admin says (``analyzer.namespace``: the operator's own namespace), never in
the tenant's: no tenant can read its credentials, change its pod or pick its image (a CapturePolicy may
choose the image only when ``analyzer.allow_policy_image`` is on). The pod holds no Kubernetes
credentials (``automountServiceAccountToken: false``, no service links), runs as non-root on a read-only
root filesystem, and gets only the S3 endpoint and the analyzer's S3 credentials, from a Secret in its
namespace (``analyzer.credentials_secret``: read the evidence, write only verdict.json and report.txt;
``secretKeyRef``, optional: absent, boto3's default chain applies). In the Incident's own namespace it is
owned by the Incident; elsewhere (an owner cannot live in another namespace) its annotation
``frwatch.io/incident-uid`` says whose it is. It is removed ``ttlSecondsAfterFinished`` after it ends. Its
one-line summary lands in the container's termination message (``FallbackToLogsOnError``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from frwatch_analyzers.store.layout import RootUrl
from frwatch_operator import constants as c
from frwatch_operator.config import AnalyzerSettings, S3Settings
from frwatch_operator.incident.record import IncidentIdentity
from frwatch_operator.kube.names import fit_name, label_value
from frwatch_operator.resources import CaptureSettings, ComputeResources

JOB_NAME_PREFIX = "frwatch-analyze-"
#: The analyzer runs as this non-root user (any image frwatch ships has no need of root).
RUN_AS_USER = 65532


@dataclass(frozen=True)
class AnalyzerRun:
    """The analyzer Job's settings for one incident: the operator's, overridden by the CapturePolicy's."""

    image: str
    resources: ComputeResources
    deadline_seconds: int
    backoff_limit: int
    ttl_seconds_after_finished: int


def effective_run(settings: AnalyzerSettings, capture: CaptureSettings | None = None) -> AnalyzerRun:
    """The operator's analyzer settings, with the image, resources and deadline of the job's effective
    capture settings (its CapturePolicy's, see :mod:`frwatch_operator.capture.optin`) when given."""
    return AnalyzerRun(
        image=capture.analyzer_image if capture and settings.allow_policy_image else settings.image,
        resources=capture.analyzer_resources if capture else settings.resources,
        deadline_seconds=capture.analyzer_deadline_seconds if capture else settings.deadline_seconds,
        backoff_limit=settings.backoff_limit,
        ttl_seconds_after_finished=settings.ttl_seconds_after_finished,
    )


def analyzer_job_name(incident_name: str, incident_namespace: str = "") -> str:
    """The analyzer Job's name: one per incident, so creating it twice is a no-op (409). Run outside the
    Incident's namespace, the name carries that namespace (incidents of two namespaces share the Jobs')."""
    middle = f"{incident_namespace}-" if incident_namespace else ""
    return fit_name(JOB_NAME_PREFIX + middle + incident_name)


def analyzer_job_ref(incident: IncidentIdentity, settings: AnalyzerSettings) -> tuple[str, str]:
    """(namespace, name) of the incident's analyzer Job."""
    ns = settings.namespace
    return ns, analyzer_job_name(incident.name, "" if ns == incident.namespace else incident.namespace)


def worker_count(resources: ComputeResources) -> int:
    """Analyzer worker processes: the CPU limit (else request) rounded up, at least 1. Never "one per core":
    the node's core count says nothing about the container's CPU share."""
    quantity = resources.limits.get("cpu") or resources.requests.get("cpu") or "1"
    try:
        cores = float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)
    except ValueError:
        return 1
    return max(1, math.ceil(cores))


def analyzer_labels(incident: IncidentIdentity) -> dict[str, str]:
    return {
        c.LABEL_APP_NAME: "frwatch",
        c.LABEL_COMPONENT: "analyzer",
        c.LABEL_MANAGED_BY: c.EVENT_COMPONENT,
        c.LABEL_INCIDENT: label_value(incident.name),
        c.LABEL_INCIDENT_NAMESPACE: label_value(incident.namespace),
    }


def analyzer_command(evidence_url: str) -> list[str]:
    """The container's command: analyze the attempt's evidence, write verdict.json, report.txt and report.html
    beside it."""
    root = RootUrl.parse(evidence_url)
    return [
        "frwatch", "analyze", str(root),
        "--format", "json",
        "--out", root.verdict_url,
        "--report-out", root.report_url,
        "--html", root.report_html_url,
        "--termination-log", c.ANALYZER_TERMINATION_LOG,
    ]  # fmt: skip


def analyzer_env(s3: S3Settings, secret: str = "") -> list[dict[str, Any]]:
    """The S3 endpoint and region as values, the credentials as optional references to the analyzer's
    Secret (``secret``; empty: ``s3.credentials_secret``; both empty: none, the pod's ServiceAccount identity).

    The endpoint is S3's own (``AWS_ENDPOINT_URL_S3``), never the global ``AWS_ENDPOINT_URL``: boto3 sends
    every service there, STS included, so a web identity (IRSA) would ask the S3 endpoint for its role."""
    env: list[dict[str, Any]] = []
    if s3.endpoint_url:
        env.append({"name": c.ENV_AWS_ENDPOINT_URL_S3, "value": s3.endpoint_url})
    env.append({"name": c.ENV_AWS_REGION, "value": s3.region})
    name = secret or s3.credentials_secret
    for key in (c.ENV_AWS_ACCESS_KEY_ID, c.ENV_AWS_SECRET_ACCESS_KEY) if name else ():
        env.append({"name": key, "valueFrom": {"secretKeyRef": {"name": name, "key": key, "optional": True}}})
    return env


def analysis_budget_seconds(job_deadline_seconds: int) -> int:
    """How long the analyzer may decode: the Job's deadline less a margin to write the verdict (a tenth, at
    least 30 s); half the deadline when that leaves less than 30 s."""
    budget = job_deadline_seconds - max(30, job_deadline_seconds // 10)
    return budget if budget >= 30 else max(1, job_deadline_seconds // 2)


def analyzer_job(
    incident: IncidentIdentity,
    *,
    evidence_url: str,
    s3: S3Settings,
    run: AnalyzerRun,
    settings: AnalyzerSettings | None = None,
) -> dict[str, Any]:
    """The batch/v1 Job that analyzes one incident's evidence, in ``settings.namespace`` (default settings:
    the operator's namespace), with the analyzer's credentials."""
    settings = settings or AnalyzerSettings()
    namespace, name = analyzer_job_ref(incident, settings)
    labels = analyzer_labels(incident)
    command = [
        *analyzer_command(evidence_url),
        "--jobs",
        str(worker_count(run.resources)),
        # the analyzer stops decoding in time to write a verdict (naming what it could not read) before
        # Kubernetes kills the Job at its activeDeadlineSeconds
        "--deadline-seconds",
        str(analysis_budget_seconds(run.deadline_seconds)),
    ]
    container: dict[str, Any] = {
        "name": c.ANALYZER_CONTAINER,
        "image": run.image,
        "command": command,
        "env": analyzer_env(s3, settings.credentials_secret),
        "resources": run.resources.wire(),
        "terminationMessagePath": c.ANALYZER_TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {c.ANN_INCIDENT: incident.name, c.ANN_INCIDENT_UID: incident.uid},
            **({"ownerReferences": [incident.owner_reference()]} if namespace == incident.namespace else {}),
        },
        "spec": {
            "backoffLimit": run.backoff_limit,
            "activeDeadlineSeconds": run.deadline_seconds,
            "ttlSecondsAfterFinished": run.ttl_seconds_after_finished,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    **({"serviceAccountName": settings.service_account} if settings.service_account else {}),
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS_USER,
                        "runAsGroup": RUN_AS_USER,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    **(
                        {"imagePullSecrets": [{"name": n} for n in settings.pull_secrets]}
                        if settings.pull_secrets
                        else {}
                    ),
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}],
                },
            },
        },
    }
