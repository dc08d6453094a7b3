"""A verdict checked against what the cluster saw (the Incident's ``status.observed``). Pure.

verdict.json is read back from the store, where tenant-reachable processes write: it is evidence, never
authority. Before anything is annotated or a node is touched, the verdict's nodes are checked against the
pods and nodes the Kubernetes API showed for the attempt:

- a suspect node is kept only when a pod of the attempt ran on it and, where the cluster's view says
  which node held a culprit rank, it is the node of a culprit rank (the verdict's own evidence names it);
- ``groups[].nodes`` keep only nodes the cluster saw (decoys cannot dilute the suspect share);
- the job's nodes (the share's denominator) are the observed nodes, nothing the verdict says.

What was dropped is said, one phrase each, for the Warning Event ``EvidenceInconsistent``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from frwatch_analyzers.verdict import Verdict
from frwatch_operator.incident.observed_facts import ClusterView
from frwatch_operator.resources import IncidentObserved

#: How many names one phrase lists (the rest are counted).
NAMES_SHOWN = 3


@dataclass(frozen=True)
class CheckedVerdict:
    verdict: Verdict  #: the verdict with only the nodes the cluster confirms
    job_nodes: tuple[str, ...]  #: every node that ran a pod of the attempt (as the API showed)
    issues: tuple[str, ...]  #: what the verdict said that the cluster contradicts


def _names(items: Iterable[str]) -> str:
    listed = list(items)
    shown = ", ".join(repr(n[:64]) for n in listed[:NAMES_SHOWN])
    return shown + (f" (+{len(listed) - NAMES_SHOWN} more)" if len(listed) > NAMES_SHOWN else "")


def check_verdict(verdict: Verdict, observed: IncidentObserved | None) -> CheckedVerdict:
    """``verdict`` limited to the nodes the cluster confirms, the job's observed nodes, and the issues."""
    view = ClusterView.of(observed)
    issues: list[str] = []
    if observed is None:
        issues.append(
            "the Incident holds no record of the attempt's pods (opened by an older frwatch): no node is "
            "confirmed, none can be cordoned"
        )
    culprit_nodes = {view.node_of(r) for r in dict.fromkeys(verdict.culprit_ranks)} - {""}
    kept: list[str] = []
    foreign: list[str] = []
    not_culprits: list[str] = []
    for node in dict.fromkeys(n for n in verdict.suspect_nodes if n):
        if node not in view.nodes:
            foreign.append(node)
        elif culprit_nodes and node not in culprit_nodes:
            not_culprits.append(node)
        else:
            kept.append(node)
    if foreign:
        issues.append(f"the verdict names suspect node(s) {_names(foreign)} that ran no pod of this attempt")
    if not_culprits:
        issues.append(
            f"the verdict names node(s) {_names(not_culprits)} where no culprit rank ran (culprit ranks ran on "
            f"{_names(sorted(culprit_nodes))})"
        )
    decoys: dict[str, None] = {}
    groups = []
    for group in verdict.groups:
        known = [n for n in group.nodes if n in view.nodes]
        decoys.update((n, None) for n in group.nodes if n not in view.nodes)
        groups.append(group if len(known) == len(group.nodes) else group.model_copy(update={"nodes": known}))
    if decoys:
        issues.append(f"the verdict's groups name {len(decoys)} node(s) the cluster never ran this attempt on: "
                      f"{_names(decoys)}")  # fmt: skip
    checked = verdict.model_copy(update={"suspect_nodes": kept, "groups": groups})
    return CheckedVerdict(checked, tuple(sorted(view.nodes)), tuple(issues))
