"""Exactly one Incident per job attempt: a deterministic name, and the body to create. Pure.

Everyone who sees a failure of attempt N of job J (every failing pod, every duplicated event, an operator
that restarted and re-lists old pods) computes the same name and creates the same object; the API
server's 409 Conflict on the second create is the success that makes it exactly one. The job's uid is
part of the name: a job deleted and recreated under the same name is another job.

The attempt bump follows the same rule: opening the Incident of attempt N moves the job's
``frwatch.io/attempt`` to N+1 (never backwards, never further), so pods created by the restart belong
to the next attempt while late events of attempt N still land in its Incident.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_operator import constants as c
from frwatch_operator.resources import IncidentSpec, JobRef

#: Kubernetes object names used as label values must fit 63 characters.
MAX_NAME = 63
_UID_CHARS = 8
#: An attempt as frwatch writes it (``frwatch.io/attempt``, the JobSet restart-attempt label): a decimal
#: number. Anything else (``..``, a slash, an escape) never reaches an object key or a name.
_ATTEMPT = re.compile(r"[0-9]{1,18}")


def valid_attempt(value: object) -> bool:
    """Whether ``value`` is an attempt frwatch can put into object keys and names (1-18 digits)."""
    return isinstance(value, str) and _ATTEMPT.fullmatch(value) is not None


def incident_name(job: str, job_uid: str, attempt: str) -> str:
    """``<job>-<first 8 of uid>-<attempt>``, shortened (with a hash) to 63 DNS-1123 characters."""
    uid = re.sub(r"[^a-z0-9]", "", job_uid.lower())[:_UID_CHARS] or "nouid"
    tail = re.sub(r"[^a-z0-9-]", "-", attempt.lower()).strip("-") or "0"
    suffix = f"-{uid}-{tail}"
    base = re.sub(r"[^a-z0-9-]", "-", job.lower()).strip("-") or "job"
    room = MAX_NAME - len(suffix)
    if len(base) > room:
        digest = hashlib.sha256(job.encode()).hexdigest()[:6]
        base = base[: max(room - 7, 1)].rstrip("-") + "-" + digest
    return (base + suffix)[:MAX_NAME].rstrip("-")


def next_attempt(current: str | None, opened: str) -> str | None:
    """The job's new ``frwatch.io/attempt`` after opening the Incident of attempt ``opened``, or None when
    the annotation must stay (already past ``opened``, or attempts that are not numbers)."""
    try:
        opened_n = int(opened)
    except ValueError:
        return None
    try:
        current_n = int(current) if current not in (None, "") else 0
    except ValueError:
        current_n = 0
    return str(opened_n + 1) if current_n <= opened_n else None


def storage_url(bucket: str, key: AttemptKey) -> str:
    """``s3://bucket/<attempt root>``: where the attempt's evidence lives."""
    return str(key.at(bucket))


def incident_body(
    *,
    job: Mapping[str, Any],
    api_version: str,
    kind: str,
    attempt: str,
    trigger: str,
    storage: str,
) -> dict[str, Any]:
    """The Incident to create for attempt ``attempt`` of ``job`` (owned by the job: deleted with it)."""
    meta = job.get("metadata") if isinstance(job.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    name, uid, namespace = (
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
        str(meta.get("namespace") or ""),
    )
    spec = IncidentSpec(
        job_ref=JobRef(api_version=api_version, kind=kind, name=name, uid=uid),
        attempt=attempt,
        trigger=trigger[:512],
        storage_url=storage,
    )
    return {
        "apiVersion": f"{c.GROUP}/{c.VERSION}",
        "kind": c.INCIDENT_KIND,
        "metadata": {
            "name": incident_name(name, uid, attempt),
            "namespace": namespace,
            "labels": {c.LABEL_INCIDENT_JOB: name[:MAX_NAME], c.LABEL_INCIDENT_ATTEMPT: attempt[:MAX_NAME]},
            "ownerReferences": [
                {
                    "apiVersion": api_version,
                    "kind": kind,
                    "name": name,
                    "uid": uid,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": spec.wire(),
    }
