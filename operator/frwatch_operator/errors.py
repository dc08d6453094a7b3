"""frwatch's own small error vocabulary, translated once at each boundary.

``RetryableError`` -> kopf ``TemporaryError(delay=...)``; ``FatalError`` -> kopf ``PermanentError``. What
the Kubernetes API answers becomes one of these in one place (:mod:`frwatch_operator.kube.api_errors`).
Messages say what failed, on which object or key, and what to do.
"""

from __future__ import annotations


class FrwatchError(Exception):
    """Base of every error frwatch raises on purpose."""


class RetryableError(FrwatchError):
    """The operation may succeed later (store unreachable, throttled, 5xx): retry after ``delay`` seconds."""

    def __init__(self, message: str, *, delay: float = 5.0) -> None:
        super().__init__(message)
        self.delay = delay


class FatalError(FrwatchError):
    """Retrying cannot help (wrong credentials, no such bucket, malformed input): say it and stop."""


class NotFoundError(FatalError):
    """The object asked for does not exist (a normal answer for ``get``; ``exists`` returns False)."""


class ConflictError(RetryableError):
    """409: the object changed since it was read (or already exists): re-read, decide again."""


class ApiRefusedError(FatalError):
    """The API refused a call for good (401/403 forbidden, 422 invalid, other 4xx; a 404 on an object the
    call needs): the same call fails again until a person changes something (RBAC, a CRD, a setting).

    ``call``: what was asked (``annotate PyTorchJob ns/llama``); ``status``: the HTTP status; ``fix``: what
    a person grants or fixes so that it succeeds."""

    def __init__(self, message: str, *, call: str, status: int, fix: str) -> None:
        super().__init__(message)
        self.call = call
        self.status = status
        self.fix = fix


class NamespaceMissingError(FatalError):
    """404 on a create: the namespace to create the object in does not exist (a person must create it)."""

    def __init__(self, message: str, *, namespace: str) -> None:
        super().__init__(message)
        self.namespace = namespace
