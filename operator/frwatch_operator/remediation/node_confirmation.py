"""Is a node the verdict calls sick sick in the Kubernetes API's eyes? Pure.

A verdict can be hardware-class because of a node record (``nodes/<node>.json``: the node's conditions and
the Events naming it, which the operator wrote into the store). Read back from the store, that record is
evidence, never authority: whoever can write the attempt's prefix could forge it. Before a node is
cordoned on such a claim, the node's conditions and Events as the API shows them now are read through the
same rules the analyzer applied (:func:`frwatch_analyzers.evidence.node_signals.node_signals`); a claim the API does
not bear out leaves the node alone (:attr:`~.remediation.SkipReason.NOT_CONFIRMED`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from frwatch_analyzers.evidence.node_signals import node_signals
from frwatch_analyzers.verdict import CauseKind, Verdict
from frwatch_operator.collect.node_evidence import node_record

#: Cause kinds that rest on a node record.
NODE_SIGNAL_KINDS = frozenset({CauseKind.node_condition, CauseKind.node_event})
#: Events about one node read to confirm a claim (the collection reads as many).
EVENTS_CHECKED = 256


def claimed_sick(verdict: Verdict) -> dict[str, str]:
    """Suspect nodes the verdict calls sick from a node record -> the first such signal's words."""
    suspects = set(verdict.suspect_nodes)
    claims: dict[str, str] = {}
    for cause in verdict.causes:
        if cause.kind in NODE_SIGNAL_KINDS and cause.node in suspects:
            claims.setdefault(cause.node, cause.message[:160])
    return claims


def unconfirmed(
    claims: Mapping[str, str],
    nodes: Mapping[str, Mapping[str, Any] | None],
    events: Mapping[str, Sequence[Mapping[str, Any]]],
) -> dict[str, str]:
    """The claimed nodes whose body (``nodes``, as just read) and Events (``events``) show no signal now."""
    out: dict[str, str] = {}
    for name, claim in claims.items():
        body = nodes.get(name)
        if body is None:
            continue  # no such node: the plan skips it anyway
        record = node_record(name, body, events.get(name, ()), read_at="")
        if not node_signals(name, record, "the Kubernetes API"):
            out[name] = claim
    return out
