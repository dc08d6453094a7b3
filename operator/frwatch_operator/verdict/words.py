"""A verdict in the words people read where they look (``kubectl describe``, ``kubectl get incidents``). Pure.

- the **short line** (``frwatch.io/verdict``): the analyzer's ``short`` (at most 120 characters, which
  ``kubectl describe`` shows whole), else the headline cut to fit;
- the **kind** of the finding in words (CPU-stuck, took another path, extra call, crashed with its exit,
  GPU hang, network hang): the analyzer's ``culprit_kind``, else (older verdicts) what the category and the
  culprit detail say;
- **where the culprits ran**, from what the Kubernetes API showed (the Incident's ``status.observed``). Only a
  hardware-class finding makes those nodes *suspects*; for a software finding the node is where the bug
  ran, not a reason to drain it;
- the **next steps**, with the exact ``kubectl logs`` of a crashed culprit's pod first when the cluster knows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from frwatch_analyzers.verdict import Category, CulpritKind, Verdict
from frwatch_operator.incident.observed_facts import ClusterView, ranges_text
from frwatch_operator.resources import IncidentObserved

#: ``kubectl describe`` (1.32, measured on the local cluster) prints ``frwatch.io/verdict: <value>`` on one line
#: up to a value of 120 bytes, moves longer values to the next line and cuts them at 138 with ``...``.
SHORT_MAX = 120
#: At most this many next steps are shown (the analyzer recommends two or three).
STEPS_MAX = 3
#: How many culprit ranks are looked up for where they ran (the rest are counted).
WHERE_RANKS_MAX = 4096

KIND_WORDS: dict[CulpritKind, str] = {
    CulpritKind.took_another_path: "took another path",
    CulpritKind.cpu_stuck: "CPU-stuck",
    CulpritKind.extra_call: "extra call",
    CulpritKind.mismatched_call: "different call",
    CulpritKind.crashed: "crashed",
    CulpritKind.gpu_hang: "GPU hang",
    CulpritKind.network_hang: "network hang",
    CulpritKind.transport_stall: "transport stall",
    CulpritKind.unknown: "unknown",
}


def flat(text: str, limit: int) -> str:
    """One line (whitespace collapsed), cut with ``...`` past ``limit`` characters (ASCII: kubectl counts
    bytes, and the analyzer's ``short`` cuts the same way)."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."


def kind_of(verdict: Verdict) -> CulpritKind | None:
    """What the culprits did: the analyzer's ``culprit_kind``, else (verdicts written before it existed)
    what the category and ``culprit_detail`` say; None when no culprit is named."""
    if verdict.culprit_kind is not None:
        return verdict.culprit_kind
    by_category = {
        Category.gpu_hang: CulpritKind.gpu_hang,
        Category.network_hang: CulpritKind.network_hang,
        Category.desync: CulpritKind.mismatched_call,
        Category.size_mismatch: CulpritKind.mismatched_call,
        Category.dtype_mismatch: CulpritKind.mismatched_call,
    }
    if verdict.category in by_category:
        return by_category[verdict.category]
    if not verdict.culprit_ranks:
        return None
    detail = verdict.culprit_detail.lower()
    for words, kind in (
        ("stuck", CulpritKind.cpu_stuck),
        ("crash", CulpritKind.crashed),
        ("no dump", CulpritKind.crashed),
        ("another path", CulpritKind.took_another_path),
        ("moved on", CulpritKind.took_another_path),
        ("extra", CulpritKind.extra_call),
    ):
        if words in detail:
            return kind
    return CulpritKind.unknown


def ranks_words(ranks: Sequence[int]) -> str:
    """``rank 1``, ``ranks 0-3,7``."""
    return ("rank " if len(set(ranks)) == 1 else "ranks ") + ranges_text(ranks)


@dataclass(frozen=True)
class Words:
    """Everything a person reads about one verdict."""

    short: str  #: at most SHORT_MAX characters
    kind: CulpritKind | None
    kind_text: str  #: e.g. "CPU-stuck", "crashed (exit 1, Error)"; "" when no culprit is named
    culprits: str  #: e.g. "rank 1", "ranks 0-3"; "" when none
    where: str  #: e.g. "rank 1 ran on node-b"; "" when the cluster did not say
    ran_on: tuple[str, ...]  #: the nodes the culprits ran on (the cluster's view, else the verdict's)
    suspects: bool  #: whether those nodes are suspects (hardware-class findings only)
    next_steps: tuple[str, ...]


def _exit_words(view: ClusterView, ranks: Sequence[int]) -> str:
    """``exit 1, Error`` for the first culprit whose pod shows a failed exit, "" when none does."""
    for rank in ranks[:WHERE_RANKS_MAX]:
        pod = view.pod_of(rank)
        for e in pod.exits if pod is not None else []:
            if e.exit_code not in (None, 0) or e.reason == "OOMKilled":
                return ", ".join(x for x in (f"exit {e.exit_code}" if e.exit_code is not None else "", e.reason) if x)
    return ""


def words(verdict: Verdict, observed: IncidentObserved | None = None, namespace: str = "") -> Words:
    """The verdict in words; ``observed``: the Incident's ``status.observed`` (where ranks ran, exits)."""
    view = ClusterView.of(observed)
    kind = kind_of(verdict)
    ranks = list(dict.fromkeys(verdict.culprit_ranks))
    kind_text = KIND_WORDS[kind] if kind is not None else ""
    if kind is CulpritKind.crashed and (code := _exit_words(view, ranks)):
        kind_text = f"crashed ({code})"
    nodes = list(dict.fromkeys(n for n in (view.node_of(r) for r in ranks[:WHERE_RANKS_MAX]) if n))
    if not nodes:  # the cluster did not record it (an older Incident): the verdict's own, already checked
        nodes = list(dict.fromkeys(n for n in verdict.suspect_nodes if n))
    culprits = ranks_words(ranks) if ranks else ""
    where = ""
    if culprits and nodes:
        shown = ", ".join(nodes[:3]) + (f" (+{len(nodes) - 3} more)" if len(nodes) > 3 else "")
        where = f"{culprits} ran on {'node' if len(nodes) == 1 else 'nodes'} {shown}"
    short = verdict.short.strip() if verdict.short.strip() else ""
    if not short:
        head = verdict.headline or f"{verdict.status.value}: {verdict.category.value}"
        short = f"{kind_text}: {head}" if kind_text and kind_text.split(" ")[0].lower() not in head.lower() else head
    return Words(
        short=flat(short, SHORT_MAX),
        kind=kind,
        kind_text=kind_text,
        culprits=culprits,
        where=where,
        ran_on=tuple(nodes),
        suspects=verdict.hardware_class,
        next_steps=_steps(verdict, kind, view, ranks, namespace),
    )


def _steps(
    verdict: Verdict, kind: CulpritKind | None, view: ClusterView, ranks: Sequence[int], namespace: str
) -> tuple[str, ...]:
    steps = [flat(s, 512) for s in verdict.next_steps if s.strip()]
    if kind is CulpritKind.crashed:
        for rank in ranks[:WHERE_RANKS_MAX]:
            pod = view.pod_of(rank)
            failed = [e for e in pod.exits if e.exit_code not in (None, 0) or e.reason == "OOMKilled"] if pod else []
            if pod is not None and failed:
                ns = f" -n {namespace}" if namespace else ""
                logs = f"Read why rank {rank} ended: kubectl logs{ns} {pod.name} -c {failed[0].container}"
                if not any(pod.name in s for s in steps):
                    steps.insert(0, logs)
                break
    return tuple(steps[:STEPS_MAX])
