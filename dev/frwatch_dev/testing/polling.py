"""Polling for tests: wait until something is true, and fail saying what was awaited and what was seen.

The one poller of the test suite. ``wait_for`` polls a check; ``eventually`` is the same loop for reads
through the Kubernetes API, where an object not created yet (404) means "not yet", not a failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(
    fn: Callable[[], T | None],
    timeout: float = 30.0,
    what: str = "",
    interval: float = 0.25,
    *,
    not_yet: Callable[[Exception], bool] | None = None,
) -> T:
    """Poll ``fn`` until it returns something truthy; fail naming ``what`` and the last value seen.
    An exception ``not_yet`` accepts counts as a falsy answer (kept as the last value); any other
    exception propagates."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = fn()
        except Exception as exc:
            if not_yet is None or not not_yet(exc):
                raise
            last = exc
        else:
            if value:
                return value
            last = value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or fn}; last: {last!r}")


def not_found(exc: Exception) -> bool:
    """The Kubernetes API's 404: the object is not there yet."""
    return getattr(exc, "status", None) == 404


def any_error(exc: Exception) -> bool:
    """Every exception means "not yet" (a server still starting, an index not filled yet)."""
    return True


def eventually(check: Callable[[], Any], what: str, timeout: float = 20.0, every: float = 0.1) -> Any:
    """``wait_for`` for reads through the Kubernetes API: a 404 is "not yet"; every other error fails."""
    return wait_for(check, timeout, what, every, not_yet=not_found)
