"""Admission for the tests: an AdmissionReview of a pod, as the API server sends it, and the pod with the
webhook's answer applied."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from frwatch_operator.capture.webhook_patch import apply_ops


def review(
    obj: Any, ns: str = "team", *, operation: str = "CREATE", uid: str | None = None
) -> dict[str, Any]:
    """The AdmissionReview the API server sends the webhook for ``obj`` (a pod) in namespace ``ns``."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": ns,
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:kubeflow:training-operator"},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
        },
    }


def patched(obj: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with the webhook's ``answer`` (the AdmissionReview's ``response``, which must allow it)
    applied."""
    assert answer["allowed"] is True
    if "patch" not in answer:
        return obj
    return apply_ops(json.loads(json.dumps(obj)), json.loads(base64.b64decode(answer["patch"])))
