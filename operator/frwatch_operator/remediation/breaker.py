"""The remediation circuit breaker: pure state, transitions and (de)serialisation. No I/O.

It counts the nodes frwatch cordoned in a sliding window. A cordon that would take the share of the
cluster's nodes cordoned in the window above ``share`` is refused and TRIPS the breaker; a tripped breaker
refuses every cordon until a person resets it (NVSentinel's rule: someone investigates before remediation
resumes). The state lives in a ConfigMap (``data``: strings only) so a restarted operator keeps it::

    status: TRIPPED | CLOSED        <- a person writes CLOSED to reset it
    trippedAt: RFC 3339             reason: why it tripped
    cordons: JSON [{"node", "incident", "at"}]   (the window's cordons; older ones are dropped)

Unreadable state is read as TRIPPED (the safe side), with a reason saying what to fix.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from frwatch_operator.times import parse_rfc3339, rfc3339


class BreakerStatus(StrEnum):
    CLOSED = "CLOSED"  #: cordons allowed, within the window's budget
    TRIPPED = "TRIPPED"  #: no cordon until a person resets it (data.status: CLOSED)


@dataclass(frozen=True)
class CordonRecord:
    """One cordon frwatch made: which node, for which incident (``namespace/name``), when."""

    node: str
    incident: str
    at: datetime


@dataclass(frozen=True)
class BreakerState:
    status: BreakerStatus = BreakerStatus.CLOSED
    tripped_at: datetime | None = None
    reason: str = ""
    cordons: tuple[CordonRecord, ...] = field(default=())

    @property
    def tripped(self) -> bool:
        return self.status is BreakerStatus.TRIPPED

    def in_window(self, now: datetime, window: timedelta) -> tuple[CordonRecord, ...]:
        """The cordons made in ``(now - window, now]``."""
        return tuple(r for r in self.cordons if now - window < r.at <= now)

    def pruned(self, now: datetime, window: timedelta) -> BreakerState:
        """The same state without the cordons that left the window (kept small in the ConfigMap)."""
        return replace(self, cordons=self.in_window(now, window))


@dataclass(frozen=True)
class BreakerDecision:
    allowed: bool
    state: BreakerState  #: the state after the decision (a cordon recorded, or the trip)
    reason: str  #: why not, or the budget left; a person reads it in an Event


def budget(cluster_nodes: int, share: float) -> int:
    """How many cordons a window allows: ``floor(share * cluster_nodes)`` (50% of 3 nodes: 1)."""
    return math.floor(share * max(cluster_nodes, 0) + 1e-9)


def try_cordon(
    state: BreakerState,
    *,
    node: str,
    incident: str,
    now: datetime,
    window: timedelta,
    share: float,
    cluster_nodes: int,
) -> BreakerDecision:
    """May frwatch cordon ``node`` now? Allowed: the cordon is recorded. Over budget: the breaker trips."""
    if state.tripped:
        since = f" since {rfc3339(state.tripped_at)}" if state.tripped_at else ""
        return BreakerDecision(
            False,
            state,
            f"circuit breaker TRIPPED{since} ({state.reason}); a person resets it after investigating "
            "(set data.status to CLOSED in its ConfigMap)",
        )
    recent = state.in_window(now, window)
    limit = budget(cluster_nodes, share)
    if len(recent) + 1 > limit:
        why = (
            f"cordoning {node} would make {len(recent) + 1} of {cluster_nodes} nodes cordoned by frwatch in "
            f"{_window_text(window)}, above the limit of {share:.0%} ({limit})"
        )
        tripped = BreakerState(BreakerStatus.TRIPPED, now, why, state.cordons)
        return BreakerDecision(False, tripped, f"circuit breaker TRIPPED now: {why}")
    # every record is kept (older ones still count for the per-namespace cap); the ConfigMap is pruned to
    # the longest window when it is stored
    recorded = replace(state, cordons=(*state.cordons, CordonRecord(node, incident, now)))
    return BreakerDecision(
        True, recorded, f"breaker: {len(recent) + 1} of {limit} cordons allowed in {_window_text(window)}"
    )


# --- the ConfigMap's data ------------------------------------------------------------------------------


def to_data(state: BreakerState) -> dict[str, str]:
    """The ConfigMap ``data`` of a state (strings only)."""
    return {
        "status": state.status.value,
        "trippedAt": rfc3339(state.tripped_at) if state.tripped_at else "",
        "reason": state.reason,
        "cordons": json.dumps(
            [{"node": r.node, "incident": r.incident, "at": rfc3339(r.at)} for r in state.cordons]
        ),
    }


def from_data(data: dict[str, str] | None) -> BreakerState:
    """The state in a ConfigMap's ``data`` (None or empty: a fresh, CLOSED breaker).

    Anything unreadable gives a TRIPPED state whose reason names the problem: a breaker that cannot tell
    how many nodes it cordoned must not cordon more.
    """
    if not data:
        return BreakerState()
    try:
        status = BreakerStatus(data.get("status", "CLOSED").strip().upper() or "CLOSED")
        tripped_at = _parse_time(data["trippedAt"]) if data.get("trippedAt") else None
        raw = json.loads(data.get("cordons") or "[]")
        if not isinstance(raw, list):
            raise ValueError("cordons is not a JSON list")
        cordons = tuple(
            CordonRecord(str(r["node"]), str(r.get("incident", "")), _parse_time(str(r["at"]))) for r in raw
        )
    except (ValueError, KeyError, TypeError) as exc:
        return BreakerState(
            BreakerStatus.TRIPPED,
            None,
            f"breaker state unreadable ({exc}); fix its ConfigMap or delete it to start afresh",
        )
    reason = data.get("reason", "")
    if status is BreakerStatus.CLOSED:
        return BreakerState(BreakerStatus.CLOSED, None, "", cordons)
    return BreakerState(status, tripped_at, reason, cordons)


def _parse_time(text: str) -> datetime:
    t = parse_rfc3339(text)
    if t is None:
        raise ValueError(f"not an RFC 3339 time with a zone: {text!r}")
    return t


def _window_text(window: timedelta) -> str:
    seconds = int(window.total_seconds())
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"
