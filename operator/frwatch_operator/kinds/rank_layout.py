"""A job's static rank layout (what its spec tells) and the small readers every job kind shares. Pure.

A world size from a job spec is data, never a loop bound: past :data:`MAX_WORLD_SIZE`
(``frwatch_analyzers.base.limits``) it is out of bounds, and a pod's ranks are a ``range``, never a list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE


@dataclass(frozen=True)
class RankLayout:
    """A job's static rank layout, as far as its spec tells it."""

    world_size: int | None  #: total ranks; None when the spec cannot tell (elastic, nproc "auto")
    nproc_per_node: int | None  #: processes per pod; None when unknown
    masters: int  #: master replicas (node ranks before the first worker)
    #: Why the spec's world size is not used ("": it is, or the spec cannot tell): an out-of-bounds spec.
    problem: str = ""

    def ranks_of(self, replica_type: str, replica_index: int | None) -> range:
        """Global ranks of the pod ``(replica_type, replica_index)`` (a range: never a list); empty when
        unknown or past :data:`MAX_WORLD_SIZE`."""
        if self.nproc_per_node is None or replica_index is None or replica_index >= MAX_WORLD_SIZE:
            return range(0)
        kind = replica_type.lower()
        if kind == "master":
            node_rank = replica_index
        elif kind == "worker":
            node_rank = self.masters + replica_index
        else:
            return range(0)
        first = node_rank * self.nproc_per_node
        if first + self.nproc_per_node > MAX_WORLD_SIZE:
            return range(0)
        return range(first, first + self.nproc_per_node)


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


#: What a number of more than 12 digits in a spec reads as: out of every bound (never parsed whole).
_HUGE = 10**12


def int_or_none(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return min(value, _HUGE) if value >= 0 else None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        digits = value.strip()
        return int(digits) if len(digits) <= 12 else _HUGE
    return None


def short(value: object) -> str:
    """A spec value quoted for a message, cut to 24 characters."""
    text = repr(value)
    return text if len(text) <= 24 else text[:23] + "…"
