"""Polling for tests: wait until something is true, and fail saying what was awaited and what was seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.25) -> T:
    """Poll ``fn`` until it returns something truthy; fail naming ``what`` and the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
