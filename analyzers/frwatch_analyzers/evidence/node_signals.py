"""Node signals: whether a suspect node itself was sick, from the node record the operator read from the
Kubernetes API (:mod:`~frwatch_analyzers.store.node_record`), and how that makes a verdict hardware-class.

A signal is an unhealthy condition (``Ready`` not ``True``; a GPU, Xid, NVLink, ECC, InfiniBand, NIC, PCIe,
fabric or kernel-deadlock condition that is ``True``: node-problem-detector, DCGM, NVSentinel style) or a
recent Event naming the node that reports an Xid or a GPU/hardware error. It counts only on a suspect node:
one where a Flight Recorder culprit ran, or a rank whose log shows a cause or a network error. A line a
process printed in its own log never counts (it can print anything).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..base.safe_text import printable
from ..base.textfmt import ranks_text
from ..store.manifest import Manifest
from ..store.node_record import NodeRecord
from ..verdict import Category, Cause, CauseKind, CulpritKind, Status, Verdict
from .masking import mask

#: Cause kinds that say a rank's network failed: such a rank's node is a suspect.
NETWORK_KINDS = frozenset({CauseKind.nccl_network_error, CauseKind.gloo_connect})
_HW_CONDITION = re.compile(
    r"(?i)gpu|xid|nvlink|ecc|infiniband|\bib|nic\b|hardware|pcie|kernel.?deadlock|fabric"
)
_XID = re.compile(r"(?i)\bxid\b")
_HW_EVENT = re.compile(r"(?i)\bxid\b|gpu.{0,20}(?:error|fail|lost|unhealthy|fallen)|ecc|nvlink|hardware")


def node_signals(node: str, record: NodeRecord, source: str) -> list[Cause]:
    """The signals of a node record that say the node is sick."""
    out: list[Cause] = []
    for c in record.conditions:
        bad = (c.type == "Ready" and c.status in ("False", "Unknown")) or (
            c.status == "True" and (_HW_CONDITION.search(c.type) or _XID.search(c.reason))
        )
        if bad:
            text = (
                f"condition {c.type}={c.status}"
                + (f" ({c.reason})" if c.reason else "")
                + (f": {c.message}" if c.message else "")
            )
            out.append(
                Cause(
                    kind=CauseKind.node_condition,
                    message=printable(mask(text), 300),
                    time=c.last_transition_time,
                    source=source,
                    node=node,
                    primary=True,
                )
            )
    for e in record.events:
        if _HW_EVENT.search(f"{e.reason} {e.message}"):
            text = (
                f"Event {e.reason}" + (f" x{e.count}" if e.count and e.count > 1 else "") + f": {e.message}"
            )
            text += f" (from {e.source_component})" if e.source_component else ""
            out.append(
                Cause(
                    kind=CauseKind.node_event,
                    message=printable(mask(text), 300),
                    time=e.last_timestamp,
                    source=source,
                    node=node,
                    primary=True,
                )
            )
    return out


def _suspect_nodes(verdict: Verdict, causes: Iterable[Cause], manifest: Manifest | None) -> set[str]:
    ranks = set(verdict.culprit_ranks) | {
        c.rank for c in causes if c.rank is not None and (c.primary or c.kind in NETWORK_KINDS)
    }
    nodes = set(verdict.culprit_nodes) | {c.node for c in causes if c.rank in ranks and c.node}
    if manifest is not None:
        nodes |= {manifest.node_of(r) for r in ranks} - {""}
    return nodes


def hardware_signals(
    verdict: Verdict, causes: list[Cause], nodes: Mapping[str, NodeRecord], manifest: Manifest | None
) -> list[Cause]:
    """The node records' signals on suspect nodes: new causes, and what makes the verdict hardware-class.
    An Xid line in a rank's own log is evidence but raises nothing: the training process writes its log and
    can print anything; the node record holds what the operator read from the Kubernetes API."""
    suspects = _suspect_nodes(verdict, causes, manifest)
    found: list[Cause] = []
    for node in sorted(suspects):
        record = nodes.get(node)
        if record is not None:
            found.extend(node_signals(node, record, f"nodes/{node}.json"))
    return found


def raise_hardware(verdict: Verdict, causes: list[Cause], hardware: list[Cause]) -> Verdict:
    nodes = sorted({c.node for c in hardware if c.node})
    signal = hardware[0]
    on_node = [c for c in causes if c.node in nodes and c.rank is not None]
    ranks = sorted({c.rank for c in on_node if c.rank is not None})
    network = any(c.kind in NETWORK_KINDS for c in on_node)
    text = f"node {', '.join(nodes)} reports {signal.message}"
    if on_node:
        text += f" while {ranks_text(ranks)} there logged {on_node[0].message}"
    update: dict[str, object] = {
        "hardware_class": True,
        "suspect_nodes": sorted(set(verdict.suspect_nodes) | set(nodes)),
        "summary": f"{verdict.summary} Hardware: {text} (from {signal.source}).".strip(),
        "next_steps": [
            f"Check node {', '.join(nodes)} ({signal.message[:120]}) before rescheduling the job there: "
            "cordon it and run the GPU and network diagnostics (e.g. DCGM).",
            *verdict.next_steps,
        ],
    }
    if verdict.category == Category.inconclusive:
        category = Category.network_hang if network else Category.gpu_hang
        update.update(
            status=Status.problem,
            category=category,
            culprit_ranks=ranks or verdict.culprit_ranks,
            culprit_nodes=nodes,
            culprit_kind=CulpritKind.network_hang if network else CulpritKind.gpu_hang,
            headline=printable(f"hardware suspected: {text}", 400),
            short=printable(f"hardware suspected: node {', '.join(nodes)}: {signal.message}", 120)[:120],
        )
    return verdict.model_copy(update=update)
