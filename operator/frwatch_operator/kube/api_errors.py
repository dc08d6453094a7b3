"""Kubernetes API errors in frwatch's words: the one translation every adapter uses (``kube``, the verdict
loop, ``own_secrets`` for the webhook certificate and the agents' key ring).

=============================  ======================  ==================================================
the API answered               raised                  the caller
=============================  ======================  ==================================================
nothing (unreachable), 429,    :class:`RetryableError`  tries again soon (kopf: ``TemporaryError``)
5xx
409                            :class:`ConflictError`   reads again and decides again (or: it exists)
404                            :class:`NotFoundError`   decides whether absent is an answer or a refusal
401, 403                       :class:`ApiRefusedError` says which grant to add (``fix``)
any other 4xx (400, 422, ...)  :class:`ApiRefusedError` says what to fix (the API server names it)
=============================  ======================  ==================================================
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from frwatch_operator.errors import (
    ApiRefusedError,
    ConflictError,
    FrwatchError,
    NotFoundError,
    RetryableError,
)

T = TypeVar("T")
#: How soon a call the API could not answer is tried again (seconds); a conflict is re-read sooner.
RETRY_SECONDS = 1.0
CONFLICT_RETRY_SECONDS = 0.5
#: The first word of a call's description (``annotate PyTorchJob ns/llama``) -> its RBAC verb, where they differ.
RBAC_VERBS = {"annotate": "patch", "replace": "update", "read": "get", "post": "create"}


def api_call(what: str, fn: Callable[[], T], *, grant: str = "") -> T:
    """``fn()``, its failures in frwatch's words. ``what``: the call, verb first (``create Job ns/name``);
    ``grant``: what a refused call needs, when more than the verb on the object's kind says."""
    try:
        return fn()
    except ApiException as exc:
        raise api_error(what, int(exc.status or 0), _detail(exc), grant) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise RetryableError(f"{what}: API server unreachable ({exc}); will retry", delay=RETRY_SECONDS) from exc


def api_error(what: str, status: int, detail: str, grant: str = "") -> FrwatchError:
    """The error of a call the API answered with ``status`` (see the module's table)."""
    if status == 404:
        return NotFoundError(f"{what}: not found ({detail})")
    if status == 409:
        return ConflictError(f"{what}: conflict: {detail}", delay=CONFLICT_RETRY_SECONDS)
    if status in (0, 429) or status >= 500:
        return RetryableError(f"{what}: API server answered {status}: {detail}; will retry", delay=RETRY_SECONDS)
    if status in (401, 403):
        action, _, target = what.partition(" ")
        fix = grant or (
            f"grant the operator's ServiceAccount '{RBAC_VERBS.get(action, action)}' on {target.split(' ')[0]} "
            "objects (the chart's RBAC lists every call the operator makes)"
        )
        said = f"; {grant}" if grant else ""  # a caller's own words are worth a log line
        return ApiRefusedError(
            f"{what}: forbidden ({detail}); the operator's RBAC must allow it{said}", call=what, status=status, fix=fix
        )
    fix = "fix what the API server names (an invalid object: the operator's or the CapturePolicy's settings)"
    return ApiRefusedError(f"{what}: refused ({status}): {detail}", call=what, status=status, fix=fix)


def _detail(exc: ApiException) -> str:
    """The API server's own words: the Status object's message, else the body, else the HTTP reason."""
    body = (exc.body or b"").decode(errors="replace") if isinstance(exc.body, bytes) else str(exc.body or "")
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        message = None
    return " ".join(str(message or body or exc.reason or "").split())[:1024]
