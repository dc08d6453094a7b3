"""What the cluster showed of one job attempt, as the Incident's status keeps it (``status.observed``). Pure.

The operator records, pass after pass while it collects, every pod of the attempt it saw through the
Kubernetes API: its node, its global ranks (a range from the job spec's layout, else the ranks its agent
dumped) and how its containers ended. This record, not the store, is what a cordon rests on: a node is a
candidate only when it is in ``nodes``, and a rank's node is looked up here (:class:`ClusterView`).

Ranks are kept as ranges (``"0-7,9"``): a pod of ``nprocPerNode: 5000000`` is one short string, never a
list. The record is bounded (:data:`~frwatch_operator.resources.OBSERVED_PODS_MAX` pods, 256 characters
of ranges a pod); what is cut is said (``truncated``, a trailing ``…``) and only ever makes a cordon
less likely, never more.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_analyzers.store.manifest import ContainerEnd
from frwatch_analyzers.store.pod_record import StoredPodRecord
from frwatch_operator.detect.pod_failure import PodFacts
from frwatch_operator.resources import (
    OBSERVED_PODS_MAX,
    ContainerExit,
    IncidentObserved,
    ObservedPod,
)

RANGES_MAX = 256
_CUT = "…"


def ranges_text(ranks: Sequence[int], limit: int = RANGES_MAX) -> str:
    """``range(0, 8)`` -> ``"0-7"``; ``(0, 1, 2, 5)`` -> ``"0-2,5"``; cut with ``…`` past ``limit``."""
    if isinstance(ranks, range):
        if not ranks or ranks.step != 1:
            return ""
        return str(ranks.start) if len(ranks) == 1 else f"{ranks.start}-{ranks.stop - 1}"
    spans: list[str] = []
    used = 0
    rs = sorted(set(ranks))
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        span = str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}"
        if used + len(span) + 1 > limit - len(_CUT):
            return ",".join(spans) + _CUT
        spans.append(span)
        used += len(span) + 1
        i = j + 1
    return ",".join(spans)


def parse_ranges(text: str) -> tuple[range, ...]:
    """The ranges of :func:`ranges_text` (a malformed part is skipped; nothing past MAX_WORLD_SIZE)."""
    out: list[range] = []
    for part in text.rstrip(_CUT).split(",")[:RANGES_MAX]:
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()) or len(first) > 7 or len(last) > 7:
            continue
        lo, hi = int(first), int(last or first)
        if lo <= hi < MAX_WORLD_SIZE:
            out.append(range(lo, hi + 1))
    return tuple(out)


def _pod(facts: PodFacts, record: StoredPodRecord | None) -> ObservedPod:
    ranks = record.ranks if record is not None and record.ranks else facts.ranks
    finished = dict(facts.finished_at)
    exits = [
        ContainerExit(container=e.container[:253], exit_code=e.exit_code, reason=e.reason[:64],
                      finished_at=finished.get(e.container, "")[:40])
        for e in facts.ended[:8]
    ]  # fmt: skip
    return ObservedPod(
        name=facts.name, node=facts.node, ranks=ranges_text(ranks), exits=exits, deleted=facts.deleted,
        pinned=facts.pinned,
    )


def observe(
    prior: IncidentObserved | None, pods: Iterable[PodFacts], records: Mapping[str, StoredPodRecord]
) -> IncidentObserved:
    """``prior`` updated with the pods seen now (``records``: checked agent records, for their ranks). A pod
    seen before and absent now (an operator restart emptied the watch's memory) keeps its entry; a pod's
    node, once the API showed one, is never blanked."""
    by_name = {p.name: p for p in prior.pods} if prior is not None else {}
    for facts in pods:
        new = _pod(facts, records.get(facts.name))
        old = by_name.get(facts.name)
        if old is not None and old.node and not new.node:
            new = new.model_copy(update={"node": old.node})
        if old is not None and old.pinned and not new.pinned:  # once pinned, always (a restart knows no spec)
            new = new.model_copy(update={"pinned": True})
        by_name[facts.name] = new
    names = sorted(by_name)
    kept = [by_name[n] for n in names[:OBSERVED_PODS_MAX]]
    nodes = sorted({p.node for p in by_name.values() if p.node} | set(prior.nodes if prior else ()))
    truncated = len(names) > OBSERVED_PODS_MAX or len(nodes) > OBSERVED_PODS_MAX or bool(prior and prior.truncated)
    return IncidentObserved(pods=kept, nodes=nodes[:OBSERVED_PODS_MAX], truncated=truncated)


def facts_of(pod: ObservedPod, namespace: str, job: str, attempt: str) -> PodFacts:
    """A pod known only from ``status.observed`` (seen by an earlier operator process) as PodFacts: it
    counts as deleted (nobody can ask its agent), with its node, ranks and exits as recorded."""
    ranges = parse_ranges(pod.ranks)
    ranks: Sequence[int] = ranges[0] if len(ranges) == 1 else tuple(sorted(set().union(*ranges)))
    ended = tuple(ContainerEnd(container=e.container, exit_code=e.exit_code, reason=e.reason) for e in pod.exits)
    return PodFacts(
        name=pod.name, namespace=namespace, job=job, attempt=attempt, node=pod.node, ranks=ranks,
        ended=ended, deleted=True,
    )  # fmt: skip


@dataclass(frozen=True)
class ClusterView:
    """Lookups over ``status.observed``: which nodes ran the attempt, and which pod (on which node) held a rank."""

    nodes: frozenset[str]
    _starts: tuple[int, ...]
    _spans: tuple[tuple[range, ObservedPod], ...]

    @classmethod
    def of(cls, observed: IncidentObserved | None) -> ClusterView:
        if observed is None:
            return cls(frozenset(), (), ())
        spans = sorted(
            ((r, p) for p in observed.pods for r in parse_ranges(p.ranks)),
            key=lambda s: s[0].start,
        )
        return cls(frozenset(observed.nodes), tuple(s[0].start for s in spans), tuple(spans))

    def pod_of(self, rank: int) -> ObservedPod | None:
        """The pod that held ``rank``, None when the cluster's view does not say."""
        i = bisect.bisect_right(self._starts, rank) - 1
        if i >= 0 and rank in self._spans[i][0]:
            return self._spans[i][1]
        return None

    def node_of(self, rank: int) -> str:
        """The node of the pod that held ``rank``, "" when the cluster's view does not say."""
        pod = self.pod_of(rank)
        return pod.node if pod is not None else ""
