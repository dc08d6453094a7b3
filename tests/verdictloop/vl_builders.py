"""Builders of the verdict-loop tests: jobs, Incidents, nodes, verdicts, and a stand-in Job controller."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from frwatch_analyzers.verdict import Category, Status, Verdict
from frwatch_analyzers.verdict_binding import termination_line
from frwatch_operator import constants as c
from frwatch_operator.capture.optin import defaults
from frwatch_operator.config import Config
from frwatch_operator.resources import CaptureSettings


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def create_pytorchjob(custom: client.CustomObjectsApi, namespace: str, name: str = "llama") -> dict[str, Any]:
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED}},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}},
    }
    return custom.create_namespaced_custom_object(c.KF_GROUP, c.KF_VERSION, namespace, c.KF_PLURAL, body)  # type: ignore[no-any-return]


def create_incident(
    custom: client.CustomObjectsApi,
    namespace: str,
    job: dict[str, Any],
    *,
    storage_url: str,
    name: str | None = None,
    attempt: str = "0",
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An Incident owned by ``job`` (as the core opens it), with ``status`` written through /status."""
    meta = job["metadata"]
    body = {
        "apiVersion": f"{c.GROUP}/{c.VERSION}",
        "kind": c.INCIDENT_KIND,
        "metadata": {
            "name": name or f"{meta['name']}-{attempt}",
            "ownerReferences": [{
                "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": meta["name"], "uid": meta["uid"],
                "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": {
            "jobRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": meta["name"], "uid": meta["uid"]},
            "attempt": attempt,
            "trigger": "pod llama-worker-0 exited 1",
            "storageUrl": storage_url,
        },
    }  # fmt: skip
    args = (c.GROUP, c.VERSION, namespace, c.INCIDENT_PLURAL)
    created = custom.create_namespaced_custom_object(*args, body)
    if status is not None:
        created = custom.patch_namespaced_custom_object_status(
            *args, created["metadata"]["name"], {"status": status}
        )
    return created  # type: ignore[no-any-return]


def observed_record(ranks_on: dict[str, str] | None = None) -> dict[str, Any]:
    """``status.observed`` as the core records it: node -> the ranks its pod held (default: rank r on node-r,
    four pods)."""
    ranks_on = ranks_on or {f"node-{r}": str(r) for r in range(4)}
    pods = [{"name": f"llama-worker-{i}", "node": node, "ranks": ranks} for i, (node, ranks) in enumerate(ranks_on.items())]
    return {"pods": pods, "nodes": sorted(ranks_on)}


def analyzing(
    conditions: list[dict[str, Any]] | None = None, observed: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The status the core leaves at the hand-off (``observed``: the cluster's view of the attempt's pods)."""
    return {
        "phase": "Analyzing",
        "observed": observed or observed_record(),
        "collectedAt": now_text(),
        "counts": {"expectedRanks": 4, "dumpedRanks": 4, "missingRanks": 0},
        "conditions": conditions
        or [
            {
                "type": "Collected",
                "status": "True",
                "reason": "AllRanksDumped",
                "message": "4 of 4 ranks dumped",
            },
            {"type": "AnalysisRequested", "status": "True", "reason": "Requested", "message": "handed over"},
        ],
        "message": "collected: 4 of 4 ranks dumped",
    }


def set_observed(custom: client.CustomObjectsApi, incident: dict[str, Any], nodes: list[str]) -> None:
    """The core's record of the attempt's pods: rank i ran on ``nodes[i]`` (what a cordon may rest on)."""
    meta = incident["metadata"]
    custom.patch_namespaced_custom_object_status(
        c.GROUP, c.VERSION, meta["namespace"], c.INCIDENT_PLURAL, meta["name"],
        {"status": {"observed": observed_record({n: str(i) for i, n in enumerate(nodes)})}},
    )  # fmt: skip


def get_incident(custom: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any]:
    return custom.get_namespaced_custom_object(c.GROUP, c.VERSION, namespace, c.INCIDENT_PLURAL, name)  # type: ignore[no-any-return]


def write_status(
    custom: client.CustomObjectsApi, incident: dict[str, Any], patch: dict[str, Any]
) -> dict[str, Any]:
    """What the core's Kube.patch_incident_status does with a Step's status."""
    meta = incident["metadata"]
    return custom.patch_namespaced_custom_object_status(  # type: ignore[no-any-return]
        c.GROUP, c.VERSION, meta["namespace"], c.INCIDENT_PLURAL, meta["name"], {"status": patch}
    )


def create_node(core: client.CoreV1Api, name: str, *, labels: dict[str, str] | None = None) -> None:
    try:
        core.delete_node(name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise
    core.create_node({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    })  # fmt: skip


def create_s3_secret(core: client.CoreV1Api, namespace: str, name: str, access: str, secret: str) -> None:
    core.create_namespaced_secret(namespace, {
        "metadata": {"name": name},
        "data": {c.ENV_AWS_ACCESS_KEY_ID: base64.b64encode(access.encode()).decode(),
                 c.ENV_AWS_SECRET_ACCESS_KEY: base64.b64encode(secret.encode()).decode()},
    })  # fmt: skip


def hardware_verdict(
    *nodes: str, ranks: list[int] | None = None, category: Category = Category.gpu_hang
) -> Verdict:
    return Verdict(
        status=Status.problem,
        category=category,
        hardware_class=category in (Category.gpu_hang, Category.network_hang),
        headline=f"rank {ranks[0] if ranks else 3} never started all_reduce #41 while its peers did: a GPU kernel hung",
        culprit_ranks=ranks if ranks is not None else [3],
        culprit_detail="stuck",
        suspect_nodes=list(nodes),
        next_steps=["run dcgmi diag -r 3 on the suspect node", "check the node's XID errors in dmesg"],
    )


def bound(verdict_json: bytes, summary: str = "problem/gpu_hang: ...") -> str:
    """The analyzer's termination message for the verdict bytes it wrote (their digest binds them to the Job)."""
    return termination_line(verdict_json, summary)


def node_agent_says(core: client.CoreV1Api, node: str, message: str = "Xid 79: GPU has fallen off the bus") -> None:
    """The node's own health agent reports a hardware fault: an Event about the node in namespace default
    (what corroborates a nomination, where no tenant writes)."""
    core.create_namespaced_event("default", {
        "metadata": {"name": f"{node}.xid"}, "type": "Warning", "reason": "XidError", "message": message,
        "count": 1, "involvedObject": {"kind": "Node", "name": node, "apiVersion": "v1"},
        "source": {"component": "dcgm-exporter"},
    })  # fmt: skip


def settings(config: Config, **changes: Any) -> CaptureSettings:
    return defaults(config).model_copy(update=changes)


# --- a stand-in for the Job controller and the kubelet: what they would write ------------------------------


def finish_job(
    batch: client.BatchV1Api,
    core: client.CoreV1Api,
    job: dict[str, Any],
    *,
    condition: str,
    reason: str = "",
    message: str = "",
    exit_code: int = 0,
    termination_message: str = "",
) -> None:
    """Record a finished Job as Kubernetes would: its pod (terminated analyzer container with the
    termination message) and the Job's conditions."""
    meta = job["metadata"]
    ns, name = meta["namespace"], meta["name"]
    pod_name = f"{name}-x7k2p"
    core.create_namespaced_pod(ns, {
        "metadata": {
            "name": pod_name,
            "labels": {**job["spec"]["template"]["metadata"]["labels"], c.LABEL_BATCH_JOB_NAME: name, "job-name": name},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": meta["uid"], "controller": True}],
        },
        "spec": job["spec"]["template"]["spec"],
    })  # fmt: skip
    terminated = {
        "exitCode": exit_code,
        "reason": "Completed" if exit_code == 0 else "Error",
        "message": termination_message,
        "startedAt": now_text(),
        "finishedAt": now_text(),
    }
    core.patch_namespaced_pod_status(pod_name, ns, {"status": {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "containerStatuses": [{"name": c.ANALYZER_CONTAINER, "image": "frwatch", "imageID": "", "ready": False,
                               "restartCount": 0, "state": {"terminated": terminated}}],
    }})  # fmt: skip
    conditions = [{"type": condition, "status": "True", "reason": reason, "message": message,
                   "lastTransitionTime": now_text(), "lastProbeTime": now_text()}]  # fmt: skip
    if condition == "Complete":
        conditions.insert(0, {**conditions[0], "type": "SuccessCriteriaMet"})
    status: dict[str, Any] = {"startTime": now_text(), "conditions": conditions}
    status["succeeded" if exit_code == 0 else "failed"] = 1
    batch.patch_namespaced_job_status(name, ns, {"status": status})


def events_about(core: client.CoreV1Api, namespace: str, name: str) -> list[Any]:
    """The Events of a namespace about the object called ``name``."""
    return [e for e in core.list_namespaced_event(namespace).items if e.involved_object.name == name]
