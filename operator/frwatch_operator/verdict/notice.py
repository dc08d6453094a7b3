"""What the people on call are told when a verdict lands, and when (issue 29): pure, no I/O.

One message per Incident that reached ``Reported`` with a verdict: the one-line verdict, the job and its
attempt, and where the full report is. The body is Slack-compatible JSON (``{"text": ...}``: Slack's and
Mattermost's incoming webhooks take it as is; any receiver that reads a JSON ``text`` field does).

Everything in the message comes from the Incident's status, which the operator wrote from a verdict the
tenant's evidence influenced: it is text to show, bounded and stripped of control characters here, never a
decision. Whether to send is decided from the phase, the time the verdict was stored and whether the
Incident already carries :data:`NOTIFIED_ANNOTATION` (so a restarted operator or a new leader does not
send twice, and an operator upgraded to notifications does not announce every old Incident).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from frwatch_operator.times import parse_rfc3339

#: Set on an Incident once its notification was sent or given up (value: ``sent`` or ``failed: <why>``).
NOTIFIED_ANNOTATION: Final = "frwatch.io/notified"
#: Longest text sent (Slack truncates long messages; a verdict line is one sentence).
TEXT_MAX: Final = 600
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
#: A chat receiver's markup in text the tenant influenced: Slack's control sequences (``<!channel>``,
#: ``<url|label>``) need ``<``, ``>`` and ``&`` (escaped as Slack asks), Mattermost's mentions an ``@`` before a
#: word (a zero-width space after it keeps the text readable and pings nobody).
_MENTION = re.compile(r"@(?=\w)")
_CUT_ENTITY = re.compile(r"&[a-z]*$")


@dataclass(frozen=True)
class Notice:
    """One message for one Incident."""

    incident_uid: str
    namespace: str
    incident: str
    text: str

    def body(self) -> bytes:
        """The Slack-compatible JSON body."""
        return json.dumps({"text": self.text}, ensure_ascii=False).encode()


def _clean(value: object, limit: int) -> str:
    text = _CONTROL.sub(" ", str(value or "")).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _inert(text: str) -> str:
    """``text`` with no markup a chat receiver acts on (no mention, no link, no ``<!channel>``), at most
    :data:`TEXT_MAX` characters (an escape cut in half is dropped)."""
    text = _MENTION.sub("@\u200b", text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
    return text if len(text) <= TEXT_MAX else _CUT_ENTITY.sub("", text[: TEXT_MAX - 3]) + "..."


def due(body: Mapping[str, Any], now: datetime, max_age_seconds: float) -> bool:
    """Whether this Incident should be announced now: Reported with a verdict, not yet announced, and its
    verdict stored less than ``max_age_seconds`` ago (older ones were Reported before notifications were
    turned on, or while no replica led: announcing them late would page people for old news)."""
    meta = body.get("metadata") or {}
    if NOTIFIED_ANNOTATION in (meta.get("annotations") or {}):
        return False
    status = body.get("status") or {}
    if status.get("phase") != "Reported" or not status.get("verdict"):
        return False
    analyzed = parse_rfc3339(str(status.get("analyzedAt") or ""))
    if analyzed is None:
        return False
    return 0 <= (now - analyzed).total_seconds() <= max_age_seconds


def notice_of(body: Mapping[str, Any]) -> Notice:
    """The message for a Reported Incident (call :func:`due` first)."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    verdict = status.get("verdict") or {}
    job = spec.get("jobRef") or {}
    namespace = _clean(meta.get("namespace"), 63)
    job_name = f"{_clean(job.get('kind'), 32)} {namespace}/{_clean(job.get('name'), 253)}"
    attempt = _clean(spec.get("attempt"), 64)
    line = _clean(verdict.get("short") or verdict.get("headline"), 240)
    category = _clean(status.get("category"), 64)
    report = _clean(verdict.get("reportUrl") or status.get("reportUrl"), 300)
    text = f"frwatch: {job_name}" + (f" (attempt {attempt})" if attempt else "") + f": {line}"
    if category:
        text += f" [{category}]"
    text += f". Incident {namespace}/{_clean(meta.get('name'), 253)}"
    if report:
        text += f"; report: {report}"
    return Notice(
        incident_uid=str(meta.get("uid") or ""),
        namespace=str(meta.get("namespace") or ""),
        incident=str(meta.get("name") or ""),
        text=_inert(_clean(text, TEXT_MAX * 2)),
    )
