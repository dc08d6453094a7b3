"""Collection: expected ranks vs dumps in the store vs pods -> progress, whom to ask, and the manifest. Pure.

Inputs are what the operator read this pass: the keys under the attempt's root (``ranks/<rank>.<fmt>``,
``pods/<pod>.json``), the pod records the agents wrote (which ranks each pod really dumped, and on which
node), and the operator's own view of the attempt's pods (:class:`~frwatch_operator.detect.pod_failure.PodFacts`:
node, static ranks, how their containers ended, deleted or not). Collection is done when every expected
rank is accounted for: its dump is in the store, or the pod that held it is settled (gone, or its training
containers and its agent all ended: the agent drains every dump before it exits, so nothing more can come)
without a dump of it. Ranks still running keep collection open until the deadline (then the manifest says
who is missing and why). The pods are read before the store is listed (:func:`settled_ranks`), so a dump
an agent uploaded before it exited is always in the listing that follows.

The store is written by tenant-reachable processes: a pod record is evidence of which ranks a pod dumped,
never of where it ran. Only pods the operator saw through the Kubernetes API enter the manifest, always
with the node the API showed; a record of a pod nobody saw, a record naming another node, and a dump of a
rank out of range are left out and said (:func:`check_records`, :func:`out_of_range`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_analyzers.store.layout import AttemptKey, parse_key
from frwatch_analyzers.store.manifest import ContainerEnd, ContainerLog, Manifest, PodRecord, RankRecord
from frwatch_analyzers.store.pod_record import StoredPodRecord
from frwatch_operator.detect.pod_failure import FailureKind, PodFacts
from frwatch_operator.resources import ConditionReason

#: How many store problems one Event or condition names (the rest are counted).
ISSUES_SHOWN = 4



@dataclass(frozen=True)
class StoreListing:
    """What one listing of the attempt's root holds."""

    rank_keys: dict[int, str]  #: rank -> key of its (first) dump
    pod_keys: dict[str, str]  #: pod -> key of its record
    manifest_key: str | None  #: the manifest, when already written
    #: dumps whose rank is past MAX_WORLD_SIZE (their keys): never a rank of any job
    absurd_ranks: tuple[str, ...] = ()
    #: (pod, container, variant, key) of each container log in the store (``logs/``)
    log_keys: tuple[tuple[str, str, str, str], ...] = ()


def read_listing(key: AttemptKey, keys: Iterable[str]) -> StoreListing:
    """Sort the keys under ``key.root`` into dumps, pod records, container logs and the manifest
    (``ranks-later/`` and anything else are not collection's business)."""
    ranks: dict[int, str] = {}
    pods: dict[str, str] = {}
    manifest: str | None = None
    absurd: list[str] = []
    logs: list[tuple[str, str, str, str]] = []
    for k in keys:
        parsed = parse_key(key.root, k)
        if parsed is None:
            continue
        if parsed.kind == "manifest":
            manifest = k
        elif parsed.kind == "rank" and parsed.rank is not None:
            ranks.setdefault(parsed.rank, k)
        elif parsed.kind == "rank-out-of-bounds":
            absurd.append(k)
        elif parsed.kind == "pod":
            pods[parsed.name] = k
        elif parsed.kind == "log" and parsed.variant is not None:
            logs.append((parsed.name, parsed.container, parsed.variant, k))
    return StoreListing(
        dict(sorted(ranks.items())), dict(sorted(pods.items())), manifest, tuple(absurd), tuple(logs)
    )


def check_records(
    pods: Iterable[PodFacts], records: Mapping[str, StoredPodRecord]
) -> tuple[dict[str, StoredPodRecord], list[str]]:
    """The pod records that agree with what the cluster showed (keyed by pod), each with the node the API
    showed; and what was wrong with the others (one phrase each). A record of a pod the operator never saw
    for this attempt is left out; a record naming another node keeps its ranks (which dumps the pod
    wrote is the agent's evidence) but never its node."""
    by_name = {p.name: p for p in pods}
    kept: dict[str, StoredPodRecord] = {}
    issues: list[str] = []
    for key_pod, record in records.items():
        facts = by_name.get(key_pod)
        if facts is None or record.pod != key_pod:
            issues.append(f"pods/{key_pod}.json names a pod the cluster never showed in this attempt")
            continue
        if record.node and facts.node and record.node != facts.node:
            issues.append(f"pods/{key_pod}.json says node {record.node!r}, the cluster ran it on {facts.node}")
        kept[key_pod] = record.model_copy(update={"node": facts.node})
    return kept, issues


def out_of_range(listing: StoreListing, world_size: int | None) -> list[str]:
    """Dumps of ranks no pod of the job can hold (past the world size, or past every bound)."""
    issues = [f"{k.rsplit('/', 2)[-2]}/{k.rsplit('/', 1)[-1]} is past every world size" for k in listing.absurd_ranks]
    if world_size is not None:
        beyond = [r for r in listing.rank_keys if r >= world_size]
        if beyond:
            issues.append(f"dumps of rank(s) {_few(beyond)} are past the job's world size {world_size}")
    return issues


def _few(items: list[int]) -> str:
    shown = ", ".join(str(i) for i in items[:ISSUES_SHOWN])
    return shown + (f" (+{len(items) - ISSUES_SHOWN} more)" if len(items) > ISSUES_SHOWN else "")


@dataclass(frozen=True)
class Progress:
    """Where collection stands after one pass."""

    expected: int | None
    dumped: frozenset[int]
    missing: frozenset[int]  #: expected ranks without a dump (empty when the world size is unknown)
    done: bool
    deadline_reached: bool
    #: Done before the deadline although ranks are missing: each one's pod settled without its dump.
    accounted: bool = False


def assess(
    expected: int | None,
    dumped: Iterable[int],
    now: datetime,
    deadline: datetime,
    settled: frozenset[int] = frozenset(),
) -> Progress:
    """Done when every expected rank (world size known) dumped or is ``settled`` (its pod ended without
    its dump: :func:`settled_ranks`), else at the deadline."""
    have = frozenset(dumped)
    if expected is not None:
        expected = min(expected, MAX_WORLD_SIZE)
    missing = frozenset(range(expected)) - have if expected is not None else frozenset()
    complete = expected is not None and not missing
    accounted = expected is not None and bool(missing) and missing <= settled
    late = now >= deadline
    done = complete or accounted or late
    return Progress(expected, have, missing, done, late and not (complete or accounted), accounted and not complete)


def settled_ranks(pods: Iterable[PodFacts], records: Mapping[str, StoredPodRecord]) -> frozenset[int]:
    """The ranks whose pod is settled (:attr:`PodFacts.settled`): no dump of them can reach the store any
    more. Read the pods *before* listing the store: an agent uploads its dumps before it exits."""
    by_name = {p.name: p for p in pods}
    settled = {name for name, facts in by_name.items() if facts.settled}
    return frozenset(r for r, pod in rank_owners(by_name.values(), records).items() if pod in settled)


def rank_owners(pods: Iterable[PodFacts], records: Mapping[str, StoredPodRecord]) -> dict[int, str]:
    """rank -> pod: what the agents recorded (ranks actually dumped) wins over the static layout."""
    owners: dict[int, str] = {}
    for facts in pods:
        for r in facts.ranks:
            owners.setdefault(r, facts.name)
    for record in records.values():
        for r in record.ranks:
            owners[r] = record.pod
    return owners


def ranks_to_ask(
    missing: Iterable[int], pods: Iterable[PodFacts], records: Mapping[str, StoredPodRecord]
) -> dict[str, tuple[int, ...]]:
    """pod -> missing ranks it holds, for pods whose agent is live (they can still be asked to dump)."""
    by_name = {p.name: p for p in pods}
    owners = rank_owners(by_name.values(), records)
    out: dict[str, list[int]] = {}
    for rank in sorted(missing):
        pod = by_name.get(owners.get(rank, ""))
        if pod is not None and pod.agent_live:
            out.setdefault(pod.name, []).append(rank)
    return {name: tuple(ranks) for name, ranks in out.items()}


def why_missing(rank: int, pod: PodFacts | None, record: StoredPodRecord | None, asked: str) -> str:
    """What the operator knows about a rank without a dump (one sentence a person reads)."""
    if pod is None and record is None:
        return f"no pod of this attempt was seen holding rank {rank}"
    name = pod.name if pod is not None else record.pod if record is not None else "?"
    parts: list[str] = []
    if pod is not None and pod.failure is not None:
        f = pod.failure
        if f.kind is FailureKind.OOM_KILLED:
            parts.append(f"pod {name}: container {f.container} was OOMKilled (exit {f.exit_code})")
        else:
            parts.append(f.describe())
    elif pod is not None:
        for end in pod.ended:
            if end.exit_code not in (None, 0):
                parts.append(f"pod {name}: container {end.container} exited {end.exit_code} ({end.reason})")
    if pod is None or pod.deleted:
        parts.append(f"pod {name} was deleted before rank {rank}'s dump reached the store")
    elif pod.settled:
        parts.append(f"its agent drained and ended without a dump of rank {rank}")
    elif not parts:
        parts.append(f"pod {name} ({pod.phase or 'phase unknown'}) did not dump rank {rank} by the deadline")
    if asked:
        parts.append(asked)
    return "; ".join(parts)


def _pod_ranks(layout: Sequence[int], recorded: Sequence[int]) -> list[int]:
    """A pod's ranks: the job kind's layout (from the API) when the agent's record agrees with it, since the
    record lists only the ranks that dumped and the one that crashed without a dump is the pod's too; the
    record where it contradicts the layout (ranks placed by an elastic rendezvous, not by the pod's index)."""
    if recorded and not set(recorded) <= set(layout):
        return sorted(set(recorded))
    return sorted(set(layout)) if layout else sorted(set(recorded))


def merged_pods(
    pods: Iterable[PodFacts],
    records: Mapping[str, StoredPodRecord],
    logs: Mapping[str, list[ContainerLog]] | None = None,
) -> list[PodRecord]:
    """The manifest's pod list: the pods the operator saw (node and exits from the API), with the ranks
    their agents recorded when there is a record (``records`` already checked: :func:`check_records`), and
    their containers' log evidence (``logs``: pod -> ``container_logs.notes``)."""
    out: list[PodRecord] = []
    for facts in sorted(pods, key=lambda p: p.name):
        record = records.get(facts.name)
        out.append(
            PodRecord(
                pod=facts.name,
                node=facts.node,
                ranks=_pod_ranks(facts.ranks, record.ranks if record is not None else ()),
                phase=facts.phase,
                deleted=facts.deleted,
                ended=list(facts.ended),
                logs=list((logs or {}).get(facts.name, [])),
            )
        )
    return out


def build_manifest(
    key: AttemptKey,
    *,
    world_size: int | None,
    listing: StoreListing,
    pods: Iterable[PodFacts],
    records: Mapping[str, StoredPodRecord],
    asked: Mapping[str, str],
    started: str,
    ended: str,
    deadline_reached: bool,
    logs: Mapping[str, list[ContainerLog]] | None = None,
) -> Manifest:
    """The manifest of the attempt: every rank -> pod -> node, who dumped, and why the others did not.
    ``asked``: pod -> what became of asking its agent (goes into why_missing). ``pods`` are the pods the
    operator saw; ``records`` the agents' records that agree with them (:func:`check_records`)."""
    pod_list = list(pods)
    by_name = {p.name: p for p in pod_list}
    owners = rank_owners(pod_list, records)
    all_ranks = set(range(min(world_size, MAX_WORLD_SIZE))) if world_size is not None else set(owners)
    all_ranks |= set(listing.rank_keys)
    manifest_pods = merged_pods(pod_list, records, logs)
    node_of = {p.pod: p.node for p in manifest_pods}
    ranks: list[RankRecord] = []
    for rank in sorted(all_ranks):
        pod = owners.get(rank, "")
        dump = listing.rank_keys.get(rank)
        ranks.append(
            RankRecord(
                rank=rank,
                pod=pod,
                node=node_of.get(pod, ""),
                dumped=dump is not None,
                key=dump or "",
                why_missing=""
                if dump is not None
                else why_missing(rank, by_name.get(pod), records.get(pod), asked.get(pod, "")),
            )
        )
    return Manifest(
        namespace=key.namespace,
        job=key.job,
        job_uid=key.job_uid,
        attempt=key.attempt,
        world_size=world_size,
        ranks=ranks,
        pods=manifest_pods,
        collection_started=started,
        collection_ended=ended,
        deadline_reached=deadline_reached,
    )


def _failed_exit(end: ContainerEnd) -> bool:
    return end.exit_code not in (None, 0) or end.reason == "OOMKilled"


def exited_before_dump(manifest: Manifest) -> bool:
    """Whether no rank dumped and the pod of every rank shows a training container that failed (a non-zero
    exit or an OOM kill): the job crashed before any collective hung."""
    if not manifest.ranks or any(r.dumped for r in manifest.ranks):
        return False
    failed = {p.pod for p in manifest.pods if any(_failed_exit(e) for e in p.ended)}
    return all(r.pod in failed for r in manifest.ranks)


def collected_reason(manifest: Manifest) -> ConditionReason:
    """The ``Collected`` condition's reason for a manifest."""
    if manifest.deadline_reached:
        return ConditionReason.DEADLINE_REACHED
    if all(r.dumped for r in manifest.ranks):
        return ConditionReason.ALL_RANKS_DUMPED
    return ConditionReason.EVERY_RANK_EXITED if exited_before_dump(manifest) else ConditionReason.ALL_RANKS_ACCOUNTED
