"""The verdict bound to the analyzer Job that made it: the sha256 of verdict.json's bytes in the Job's
termination message. Pure.

verdict.json sits in the store, under a prefix that tenants' keys may reach; the analyzer container's
termination message is written by the analyzer alone (a pod of frwatch's Job, in frwatch's namespace) and
read from the Kubernetes API. The analyzer starts its termination message with ``verdict-sha256:<hex>`` of
the exact bytes it wrote to ``--out``; the operator acts on a stored verdict only when its bytes have that
digest (``frwatch_operator.verdict.reading``). A verdict replaced in the store after the
analyzer wrote it is then refused, whoever wrote it.
"""

from __future__ import annotations

import hashlib
import re

#: What leads the analyzer's termination message, before the verdict's one-line summary.
DIGEST_LEAD = "verdict-sha256:"
_DIGEST = re.compile(r"verdict-sha256:([0-9a-f]{64})(?:\s|$)")


def digest_of(data: bytes) -> str:
    """The hex sha256 of verdict.json's bytes."""
    return hashlib.sha256(data).hexdigest()


def termination_line(verdict_json: bytes, summary: str) -> str:
    """The analyzer's termination message: the digest of the bytes written, then the summary."""
    return f"{DIGEST_LEAD}{digest_of(verdict_json)} {summary}"


def digest_in(message: str) -> str | None:
    """The digest a termination message starts with (None: it has none, e.g. the log tail of a crash)."""
    found = _DIGEST.match(message.lstrip())
    return found.group(1) if found else None
