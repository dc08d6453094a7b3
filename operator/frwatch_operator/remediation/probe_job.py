"""The probe: a short health check Job frwatch runs on a nominated node, and what its end says. Pure.

A nomination rests on what the tenant's ranks wrote (dumps, logs, exits): the tenant can fabricate all of
it. A probe is evidence the tenant cannot write: frwatch's own Job, in frwatch's namespace
(``analyzer.namespace``), pinned to the node (``nodeName``: it runs there even when the node is tainted or
cordoned), running the image and command of the settings (``remediation.probe_image``/``probe_command``,
e.g. ``dcgmi diag -r 1``) with no service-account token. Only a probe that ran and failed corroborates:

- the probe container ended with exit 0: ``Passed`` (the node is not cordoned for this incident);
- it ended with another exit, or ran past the Job's deadline: ``Failed`` (the node is sick);
- it never ran (image not pulled, the Job refused or gone, no pod of the Job's own): ``Inconclusive``
  (a probe that could not run says nothing about the node).

Only a pod the Job controls (its uid in the pod's controller reference) that ran on the node counts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from frwatch_operator import constants as c
from frwatch_operator.config import AnalyzerSettings, RemediationSettings
from frwatch_operator.incident.record import IncidentIdentity
from frwatch_operator.kube.names import fit_name, label_value

PROBE_CONTAINER = "probe"
JOB_PREFIX = "frwatch-probe-"
RUNNING, FAILED, PASSED, INCONCLUSIVE = "Running", "Failed", "Passed", "Inconclusive"
#: How long a finished probe Job is kept (seconds).
TTL_SECONDS = 3600
_DETAIL_MAX = 300
#: Container end reasons that mean the probe never ran (its image or command is wrong, not the node).
NEVER_RAN = frozenset({"StartError", "ContainerCannotRun", "CreateContainerError", "CreateContainerConfigError"})


def probe_job_name(incident: IncidentIdentity, node: str) -> str:
    """One probe Job per incident and node (creating it twice finds the first)."""
    digest = hashlib.sha256(f"{incident.uid}/{node}".encode()).hexdigest()[:10]
    return fit_name(f"{JOB_PREFIX}{label_value(node)[:40]}-{digest}")


def probe_job(
    incident: IncidentIdentity, node: str, *, remediation: RemediationSettings, analyzer: AnalyzerSettings
) -> dict[str, Any]:
    """The batch/v1 Job that checks ``node``'s health once, in the analyzer Jobs' namespace."""
    labels = {
        c.LABEL_APP_NAME: "frwatch",
        c.LABEL_COMPONENT: "probe",
        c.LABEL_MANAGED_BY: c.EVENT_COMPONENT,
        c.LABEL_INCIDENT: label_value(incident.name),
        c.LABEL_INCIDENT_NAMESPACE: label_value(incident.namespace),
    }
    container: dict[str, Any] = {
        "name": PROBE_CONTAINER,
        "image": remediation.probe_image,
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "resources": remediation.probe_resources.wire(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if remediation.probe_command:
        container["command"] = list(remediation.probe_command)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": probe_job_name(incident, node),
            "namespace": analyzer.namespace,
            "labels": labels,
            "annotations": {c.ANN_INCIDENT: incident.name, c.ANN_INCIDENT_UID: incident.uid, c.ANN_PROBE_NODE: node},
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": remediation.probe_deadline_seconds,
            "ttlSecondsAfterFinished": TTL_SECONDS,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeName": node,
                    "tolerations": [{"operator": "Exists"}],
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    **({"imagePullSecrets": [{"name": n} for n in analyzer.pull_secrets]} if analyzer.pull_secrets else {}),
                    "containers": [container],
                },
            },
        },
    }


def _own_pods(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], node: str) -> list[Mapping[str, Any]]:
    uid = (job.get("metadata") or {}).get("uid")
    out = []
    for pod in pods:
        refs = (pod.get("metadata") or {}).get("ownerReferences") or []
        owned = bool(uid) and any(r.get("uid") == uid and r.get("controller") for r in refs)
        if owned and (pod.get("spec") or {}).get("nodeName") == node:
            out.append(pod)
    return out


def _probe_state(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == PROBE_CONTAINER:
            return status.get("state") or {}
    return {}


def _words(text: object) -> str:
    return " ".join(str(text or "").split())[:_DETAIL_MAX]


def probe_result(job: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]], node: str) -> tuple[str, str]:
    """(result, detail) of a probe Job as read now (``job`` None: it is gone)."""
    if job is None:
        return INCONCLUSIVE, "the probe Job was gone when frwatch looked"
    conditions = {x.get("type"): x for x in (job.get("status") or {}).get("conditions") or [] if x.get("status") == "True"}
    own = _own_pods(job, pods, node)
    ended = [s["terminated"] for s in map(_probe_state, own) if isinstance(s.get("terminated"), Mapping)]
    ran = ended or [s for s in map(_probe_state, own) if "running" in s]
    if ended:
        term = ended[-1]
        code = term.get("exitCode")
        said = _words(term.get("message"))
        if code == 0:
            return PASSED, f"exit 0{': ' + said if said else ''}"
        if term.get("reason") in NEVER_RAN:  # the runtime could not start the probe: nothing about the node
            return INCONCLUSIVE, f"the probe could not start ({term['reason']}){': ' + said if said else ''}"[:_DETAIL_MAX]
        return FAILED, f"exit {code}{' [' + str(term['reason']) + ']' if term.get('reason') not in (None, 'Error') else ''}{': ' + said if said else ''}"[:_DETAIL_MAX]
    failed = conditions.get("Failed") or conditions.get("FailureTarget")
    if failed is not None:
        if failed.get("reason") == "DeadlineExceeded" and ran:
            return FAILED, "the probe was still running at its deadline (the node did not answer in time)"
        return INCONCLUSIVE, _words(f"the probe never ran: {failed.get('reason', 'Failed')} {failed.get('message', '')}")
    if conditions.get("Complete") or conditions.get("SuccessCriteriaMet"):
        return INCONCLUSIVE, "the probe Job completed without a pod of its own on the node"
    waiting = next((s.get("waiting") for s in map(_probe_state, own) if s.get("waiting")), None)
    detail = f"waiting: {waiting.get('reason', '')}" if isinstance(waiting, Mapping) else "running"
    return RUNNING, detail
