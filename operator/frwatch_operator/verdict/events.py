"""core/v1 Event objects for what the verdict loop says. Pure.

An Event's name is derived from what it says and about whom (incident, reason, key, object), so posting
it again after a restart is a no-op (409) instead of a duplicate line in ``kubectl describe``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from frwatch_analyzers.base.safe_text import printable
from frwatch_operator import constants as c
from frwatch_operator.kube.names import fit_name
from frwatch_operator.notices import Notice
from frwatch_operator.times import rfc3339

#: Events about cluster-scoped objects (nodes) live here, as the kubelet's do.
CLUSTER_EVENT_NAMESPACE = "default"


def involved(obj: Mapping[str, Any], *, api_version: str, kind: str) -> dict[str, str]:
    """The involvedObject reference of an object as the API served it."""
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": api_version,
        "kind": kind,
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid", "")),
    }
    if meta.get("namespace"):
        ref["namespace"] = str(meta["namespace"])
    return ref


def event_object(
    spec: Notice, *, about: Mapping[str, str], incident_uid: str, now: datetime
) -> dict[str, Any]:
    """The Event (core/v1) saying ``spec`` about the object ``about`` (an involvedObject reference)."""
    namespace = about.get("namespace") or CLUSTER_EVENT_NAMESPACE
    digest = hashlib.sha256(
        "\0".join(
            [incident_uid, spec.reason.value, spec.key, about.get("uid", ""), about.get("name", "")]
        ).encode()
    ).hexdigest()[:12]
    when = rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": fit_name(f"{about.get('name', 'object')}.frwatch-{digest}", 253),
            "namespace": namespace,
        },
        "involvedObject": dict(about),
        "type": spec.type,
        "reason": spec.reason.value,
        "message": printable(spec.message),
        "source": {"component": c.EVENT_COMPONENT},
        "reportingComponent": c.EVENT_COMPONENT,
        "reportingInstance": c.EVENT_COMPONENT,
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
    }
