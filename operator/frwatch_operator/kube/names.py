"""Names Kubernetes accepts: an object name or a label value fitted to its length limit. Pure.

Shared by every Job and Event frwatch builds (the analyzer, map, source and probe Jobs, the NVSentinel
request, the verdict's Events), so it sits with the adapter below all of them.
"""

from __future__ import annotations

import hashlib
import re

#: A Job's name becomes its pods' label value: at most 63 characters.
NAME_MAX = 63


def fit_name(base: str, limit: int = NAME_MAX) -> str:
    """``base`` if it fits in ``limit`` characters, else a prefix of it plus a short hash (stable, unique)."""
    if len(base) <= limit:
        return base
    digest = hashlib.sha256(base.encode()).hexdigest()[:8]
    return base[: limit - 9].rstrip("-.") + "-" + digest


def label_value(text: str) -> str:
    """A valid label value for ``text`` (63 characters at most, alphanumeric at both ends)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "-", text).strip("-_.")
    return fit_name(cleaned).strip("-_.")
