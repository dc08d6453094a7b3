"""frwatch's own small error vocabulary, translated once at each boundary.

``RetryableError`` -> kopf ``TemporaryError(delay=...)``; ``FatalError`` -> kopf ``PermanentError``.
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
