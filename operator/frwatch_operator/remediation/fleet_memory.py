"""Fleet memory: which namespaces' jobs nominated which node, and when. Pure.

One tenant controls everything its ranks write, so a node its jobs accuse stays only nominated, however
often. The same node nominated by jobs of ``corroborating_namespaces`` (2 by default) different namespaces
within ``nomination_window_seconds`` is corroborated: it takes several tenants' failures to agree. The
memory lives in the API, in a ConfigMap of the operator's namespace (``remediation.nominations_configmap``,
beside the breaker's), read and replaced with optimistic concurrency, so replicas and restarts share it.

A pinned node (``frwatch_operator.detect.placement``) is never remembered: a tenant's choice of node is no
evidence against it. Bounded: at most :data:`KEPT` entries, the oldest dropped first.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from frwatch_operator.times import parse_rfc3339, rfc3339

FIELD = "nominations.json"
KEPT = 4096


@dataclass(frozen=True)
class Nomination:
    node: str
    namespace: str
    incident: str  #: namespace/name
    at: datetime


def from_data(data: Mapping[str, str] | None) -> list[Nomination]:
    """The nominations a ConfigMap's ``data`` holds (what cannot be read is skipped)."""
    try:
        entries = json.loads((data or {}).get(FIELD) or "[]")
    except ValueError:
        return []
    out: list[Nomination] = []
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, dict):
            continue
        at = parse_rfc3339(e.get("at"))
        fields = [e.get(k) for k in ("node", "namespace", "incident")]
        if at is not None and all(isinstance(f, str) and f for f in fields):
            out.append(Nomination(str(e["node"]), str(e["namespace"]), str(e["incident"]), at))
    return out


def to_data(nominations: Iterable[Nomination]) -> dict[str, str]:
    entries = [{"node": n.node, "namespace": n.namespace, "incident": n.incident, "at": rfc3339(n.at)} for n in nominations]
    return {FIELD: json.dumps(entries, separators=(",", ":"))}


def remember(
    stored: Iterable[Nomination], new: Iterable[Nomination], *, now: datetime, window: timedelta
) -> list[Nomination]:
    """``stored`` with ``new`` added (one entry per node and incident), those older than ``window`` dropped,
    at most :data:`KEPT` kept (the newest)."""
    by_key: dict[tuple[str, str], Nomination] = {}
    for n in [*stored, *new]:
        if now - n.at <= window:
            by_key.setdefault((n.node, n.incident), n)
    return sorted(by_key.values(), key=lambda n: n.at)[-KEPT:]


def namespaces_naming(nominations: Iterable[Nomination], node: str, *, now: datetime, window: timedelta) -> set[str]:
    """The namespaces whose jobs nominated ``node`` within ``window``."""
    return {n.namespace for n in nominations if n.node == node and now - n.at <= window}
