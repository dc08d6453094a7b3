"""Time as Kubernetes writes it: RFC 3339 in UTC with a ``Z``. The one place times are formatted and
parsed (Incident status, conditions, Events, annotations, the breaker, the Lease). Pure.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

Precision = Literal["seconds", "milliseconds", "microseconds"]


def rfc3339(t: datetime, timespec: Precision = "seconds") -> str:
    """``2026-11-01T07:30:41Z`` (``timespec`` adds ``.123`` or ``.123456``: a Lease's MicroTime)."""
    return t.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def now_rfc3339(timespec: Precision = "seconds") -> str:
    return rfc3339(datetime.now(UTC), timespec)


def parse_rfc3339(value: object) -> datetime | None:
    """An RFC 3339 time as the API writes it (``...Z`` or an offset); None when absent, malformed, or
    without a zone (a time that names no zone cannot be compared with the cluster's)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
