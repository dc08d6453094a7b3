"""A node's conditions and the recent Events naming it -> ``nodes/<node>.json``
(:class:`~frwatch_analyzers.store.node_record.NodeRecord`), and which nodes of an attempt to read. Pure.

Whatever wrote them is read the same way: node-problem-detector's conditions (``KernelDeadlock``,
``ReadonlyFilesystem``, a GPU health condition an NPD plugin or DCGM exporter sets) and Events (an Xid
reported by NVSentinel, DCGM or an NPD custom plugin, the kubelet's own ``NodeNotReady``): the operator
needs none of them installed. The record is evidence for the analyzer; a cordon still rests on the
Incident's ``status.observed`` and the node the API shows (``remediation.apply``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from frwatch_analyzers.store.manifest import Manifest
from frwatch_analyzers.store.node_record import NodeCondition, NodeEvent, NodeRecord


def _failed(manifest: Manifest) -> set[str]:
    """Pods that ended with a failed exit, or were deleted, or held a rank without a dump."""
    pods = {
        p.pod
        for p in manifest.pods
        if p.deleted or any(e.exit_code not in (None, 0) or e.reason == "OOMKilled" for e in p.ended)
    }
    pods |= {r.pod for r in manifest.ranks if not r.dumped and r.pod}
    return pods


def nodes_to_read(manifest: Manifest, limit: int) -> list[str]:
    """The attempt's nodes, those of failed pods and of ranks without a dump first (each once, by name
    within each group), at most ``limit``."""
    suspect_pods = _failed(manifest)
    first = sorted({p.node for p in manifest.pods if p.node and p.pod in suspect_pods})
    rest = sorted({p.node for p in manifest.pods if p.node} - set(first))
    return (first + rest)[: max(0, limit)]


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _when(event: Mapping[str, Any]) -> str:
    """An Event's latest time as the API wrote it (``lastTimestamp``, else ``eventTime``, else the first)."""
    for name in ("lastTimestamp", "eventTime", "firstTimestamp"):
        value = event.get(name)
        if isinstance(value, str) and value:
            return value
    return _text(_map(event.get("metadata")).get("creationTimestamp"))


def node_record(
    name: str,
    node: Mapping[str, Any] | None,
    events: Sequence[Mapping[str, Any]],
    read_at: str,
    unavailable: Sequence[str] = (),
    max_events: int = 256,
) -> NodeRecord:
    """The record of node ``name`` (``node``: its body, None when it could not be read; ``events``: the
    Events naming it, any order: the most recent ``max_events`` are kept, newest first)."""
    conditions = [
        NodeCondition(
            type=_text(x.get("type")), status=_text(x.get("status")), reason=_text(x.get("reason")),
            message=_text(x.get("message")), last_transition_time=_text(x.get("lastTransitionTime")),
        )
        for x in (_map(_map(node).get("status")).get("conditions") or [])[:256]
        if isinstance(x, Mapping) and _text(x.get("type"))
    ]  # fmt: skip
    newest = sorted((e for e in events if isinstance(e, Mapping)), key=_when, reverse=True)[:max_events]
    kept = [
        NodeEvent(
            type=_text(e.get("type")), reason=_text(e.get("reason")), message=_text(e.get("message")),
            count=e.get("count") if isinstance(e.get("count"), int) and not isinstance(e.get("count"), bool) else None,
            last_timestamp=_when(e),
            source_component=_text(_map(e.get("source")).get("component")) or _text(e.get("reportingComponent")),
        )
        for e in newest
    ]  # fmt: skip
    return NodeRecord(node=name, conditions=tuple(conditions), events=tuple(kept), read_at=read_at,
                      unavailable=tuple(unavailable))  # fmt: skip
