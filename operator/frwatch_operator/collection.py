"""Collection: expected ranks vs dumps in the store vs pods -> progress, whom to ask, and the manifest. Pure.

Inputs are what the operator read this pass: the keys under the attempt's root (``ranks/<rank>.<fmt>``,
``pods/<pod>.json``), the pod records the agents wrote (which ranks each pod really dumped, and on which
node), and the operator's own view of the attempt's pods (:class:`~frwatch_operator.detection.PodFacts`:
node, static ranks, how their containers ended, deleted or not). Collection is done when every expected
rank's dump is in the store, or at the deadline (then the manifest says who is missing and why).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from frwatch_analyzers.layout import MANIFEST, PODS_DIR, RANKS_DIR, AttemptKey
from frwatch_analyzers.manifest import Manifest, PodRecord, RankRecord
from frwatch_operator.detection import FailureKind, PodFacts

_RANK_KEY = re.compile(r"(\d+)\.(pickle|json)")


@dataclass(frozen=True)
class StoredPodRecord:
    """``pods/<pod>.json`` as found in the store (written by the pod's agent, or by the operator)."""

    pod: str
    node: str
    ranks: tuple[int, ...]
    by_agent: bool


@dataclass(frozen=True)
class StoreListing:
    """What one listing of the attempt's root holds."""

    rank_keys: dict[int, str]  #: rank -> key of its (first) dump
    pod_keys: dict[str, str]  #: pod -> key of its record
    manifest_key: str | None  #: the manifest, when already written


def read_listing(key: AttemptKey, keys: Iterable[str]) -> StoreListing:
    """Sort the keys under ``key.root`` into dumps, pod records and the manifest (``ranks-later/`` and
    anything else are not collection's business)."""
    root = key.root + "/"
    ranks: dict[int, str] = {}
    pods: dict[str, str] = {}
    manifest: str | None = None
    for k in keys:
        if not k.startswith(root):
            continue
        rel = k[len(root) :]
        if rel == MANIFEST:
            manifest = k
        elif rel.startswith(RANKS_DIR + "/"):
            m = _RANK_KEY.fullmatch(rel[len(RANKS_DIR) + 1 :])
            if m:
                ranks.setdefault(int(m.group(1)), k)
        elif rel.startswith(PODS_DIR + "/") and rel.endswith(".json") and rel.count("/") == 1:
            pods[rel[len(PODS_DIR) + 1 : -len(".json")]] = k
    return StoreListing(dict(sorted(ranks.items())), dict(sorted(pods.items())), manifest)


def parse_pod_record(data: bytes) -> StoredPodRecord | None:
    """A pod record's facts, or None when it is not one (never raises)."""
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("pod"), str):
        return None
    ranks = obj.get("ranks")
    good = tuple(sorted(int(r) for r in ranks if isinstance(r, int))) if isinstance(ranks, list) else ()
    return StoredPodRecord(obj["pod"], str(obj.get("node") or ""), good, by_agent="dumps" in obj)


@dataclass(frozen=True)
class Progress:
    """Where collection stands after one pass."""

    expected: int | None
    dumped: frozenset[int]
    missing: frozenset[int]  #: expected ranks without a dump (empty when the world size is unknown)
    done: bool
    deadline_reached: bool


def assess(expected: int | None, dumped: Iterable[int], now: datetime, deadline: datetime) -> Progress:
    """Done when every expected rank dumped (world size known), else at the deadline."""
    have = frozenset(dumped)
    missing = frozenset(range(expected)) - have if expected is not None else frozenset()
    complete = expected is not None and not missing
    late = now >= deadline
    return Progress(expected, have, missing, complete or late, late and not complete)


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
    elif not parts:
        parts.append(f"pod {name} ({pod.phase or 'phase unknown'}) did not dump rank {rank} by the deadline")
    if asked:
        parts.append(asked)
    return "; ".join(parts)


def merged_pods(pods: Iterable[PodFacts], records: Mapping[str, StoredPodRecord]) -> list[PodRecord]:
    """The manifest's pod list: the operator's view, completed by the agents' records (a pod known only
    from its record was deleted before the operator could see it)."""
    by_name = {p.name: p for p in pods}
    out: list[PodRecord] = []
    for name in sorted(set(by_name) | set(records)):
        facts, record = by_name.get(name), records.get(name)
        out.append(
            PodRecord(
                pod=name,
                node=(facts.node if facts is not None and facts.node else record.node if record else ""),
                ranks=sorted(
                    record.ranks if record is not None and record.ranks else facts.ranks if facts else ()
                ),
                phase=facts.phase if facts is not None else "",
                deleted=facts.deleted if facts is not None else True,
                ended=list(facts.ended) if facts is not None else [],
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
) -> Manifest:
    """The manifest of the attempt: every rank -> pod -> node, who dumped, and why the others did not.
    ``asked``: pod -> what became of asking its agent (goes into why_missing)."""
    pod_list = list(pods)
    by_name = {p.name: p for p in pod_list}
    owners = rank_owners(pod_list, records)
    all_ranks = set(range(world_size)) if world_size is not None else set(owners) | set(listing.rank_keys)
    all_ranks |= set(listing.rank_keys)
    manifest_pods = merged_pods(pod_list, records)
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


def operator_pod_record(record: PodRecord, key: AttemptKey) -> bytes:
    """``pods/<pod>.json`` written by the operator for a pod whose agent wrote none (it never dumped, or
    was never injected): the same pod facts the manifest holds, marked as the operator's."""
    body = {"writer": "operator", "namespace": key.namespace, "job": key.job, "job_uid": key.job_uid,
            "attempt": key.attempt, **record.model_dump(mode="json")}  # fmt: skip
    return json.dumps(body, indent=1, sort_keys=True).encode()
