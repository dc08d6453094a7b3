"""Pods of an opted-in job that run without capture, and what the job then says. Pure.

The webhook injects capture when a pod is created; it cannot change a pod that already runs, and it fails
open (a pod created while it is down, unreachable, or before the job reached its index is admitted as is).
The operator sees such pods through its watch (no frwatch agent in them) and says so:

- **The whole current attempt runs without capture** (no injected pod of it was ever recorded on the job,
  ``frwatch.io/attempt-started``): typically a job opted in while it runs. A failure of it can open no
  Incident (no agent, no dump). The job's ``frwatch.io/attempt`` moves past it, so the pods created from
  now on belong to the next attempt, which is captured; ``frwatch.io/not-captured`` says so on the job
  (with a Warning Event ``AttemptNotCaptured``). The annotation goes once a pod of a later attempt is seen
  injected.
- **Some pods of a captured attempt were admitted without capture** (the webhook missed them): a Warning
  Event ``PodNotCaptured`` per pod; the attempt's Incident will have no dump of their ranks.

Both writes are conditional on the job's resourceVersion (``Kube.annotate_if``), so one operator replica
among several makes them, once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from frwatch_operator import constants as c
from frwatch_operator.detect.job_failure import attempt_start, current_attempt
from frwatch_operator.incident.naming import next_attempt, valid_attempt

_GAP = re.compile(r"attempt ([0-9]{1,18}):")


def _annotations(job: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = job.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    return ann if isinstance(ann, Mapping) else {}


def not_captured_text(attempt: str, following: str, pod: str) -> str:
    """The value of ``frwatch.io/not-captured`` (it starts with ``attempt N:``, which :func:`gap_of` reads)."""
    return (
        f"attempt {attempt}: its pods run without Flight Recorder capture (e.g. {pod}), a failure of it opens no "
        f"Incident; attempt {following}, the pods created from now on, is captured"
    )


def gap_of(job: Mapping[str, Any]) -> str | None:
    """The attempt ``frwatch.io/not-captured`` names, or None."""
    value = _annotations(job).get(c.ANN_NOT_CAPTURED)
    m = _GAP.match(value) if isinstance(value, str) else None
    return m.group(1) if m else None


def whole_attempt_uncaptured(job: Mapping[str, Any], pod: str) -> dict[str, str | None] | None:
    """The job's annotations when a pod without capture is seen and no pod of the current attempt was ever
    seen injected: the attempt moves on and the job says so. None: part of the attempt is captured (or the
    job's attempt is not frwatch's number), nothing to change."""
    current = current_attempt(job)
    if not current or attempt_start(job) is not None or gap_of(job) is not None:
        return None  # part of it is captured, or already said (its pods are seen one by one)
    following = next_attempt(current, current)
    if following is None:
        return None
    return {c.ANN_ATTEMPT: following, c.ANN_NOT_CAPTURED: not_captured_text(current, following, pod)[:1024]}


def gap_closed(job: Mapping[str, Any], pod_attempt: str | None) -> dict[str, str | None]:
    """Removes ``frwatch.io/not-captured`` once a pod of a later attempt is seen injected (else nothing)."""
    gap = gap_of(job)
    if c.ANN_NOT_CAPTURED not in _annotations(job):
        return {}
    if gap is None or (valid_attempt(pod_attempt) and int(str(pod_attempt)) > int(gap)):
        return {c.ANN_NOT_CAPTURED: None}
    return {}
