"""Builders for the capture tests: PyTorchJobs, CapturePolicies, pods of a job, AdmissionReviews."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from frwatch_operator import constants as c


def job(
    name: str = "llama",
    ns: str = "team",
    *,
    capture: str | None = "enabled",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    ann = dict(annotations or {})
    if capture is not None:
        ann[c.ANN_CAPTURE] = capture
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": uid or str(uuid.uuid4()),
            "labels": dict(labels or {}),
            "annotations": ann,
        },
    }


def policy(
    name: str, ns: str = "team", *, spec: Any = None, created: str = "2026-01-01T00:00:00Z"
) -> dict[str, Any]:
    return {
        "apiVersion": "frwatch.io/v1alpha1",
        "kind": "CapturePolicy",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": created},
        "spec": {} if spec is None else spec,
    }


def pod(
    job_name: str = "llama",
    ns: str = "team",
    *,
    index: int = 0,
    env: list[dict[str, Any]] | None = None,
    containers: int = 1,
    init: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    conts = []
    for i in range(containers):
        cont: dict[str, Any] = {"name": "pytorch" if i == 0 else f"side{i}", "image": "trainer:1"}
        if env is not None:
            cont["env"] = copy.deepcopy(env)
        conts.append(cont)
    meta: dict[str, Any] = {
        "name": f"{job_name}-worker-{index}",
        "namespace": ns,
        "labels": {
            c.KF_LABEL_JOB_NAME: job_name,
            c.KF_LABEL_REPLICA_TYPE: "worker",
            c.KF_LABEL_REPLICA_INDEX: str(index),
            **(labels or {}),
        },
    }
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"containers": conts, "restartPolicy": "Never"}
    if init is not None:
        spec["initContainers"] = copy.deepcopy(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    """name -> value (or the valueFrom dict)."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}
