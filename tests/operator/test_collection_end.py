"""Collection ends as soon as every rank is accounted for: dumped, or its pod settled (training containers and
agent ended, or the pod gone) without a dump of it; ranks still running keep it open until the deadline. An
attempt where no rank dumped and every rank's pod failed is told apart (nothing to align)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from test_domain import pod, terminated

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_operator import constants as c
from frwatch_operator.collect.progress import (
    assess,
    build_manifest,
    collected_reason,
    read_listing,
    settled_ranks,
)
from frwatch_operator.detect.pod_failure import PodFacts, pod_facts
from frwatch_operator.resources import ConditionReason

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
KEY = AttemptKey("p", "ns", "j", "uid", "0")


def agent_state(state: dict[str, Any]) -> dict[str, Any]:
    return {"initContainerStatuses": [{"name": c.AGENT_CONTAINER, "state": state}]}


AGENT_RUNNING = agent_state({"running": {}})
AGENT_ENDED = agent_state({"terminated": {"exitCode": 0, "reason": "Completed"}})


def facts(name: str, rank: int, body: dict[str, Any], *, deleted: bool = False) -> PodFacts:
    return pod_facts(body | {"metadata": {**body["metadata"], "name": name}}, ranks=range(rank, rank + 1),
                     deleted=deleted)  # fmt: skip


@pytest.mark.parametrize(
    ("body", "deleted", "settled"),
    [
        (pod(statuses=[terminated(1)], **AGENT_ENDED), False, True),  # the agent drained and ended
        (pod(statuses=[terminated(1)], **AGENT_RUNNING), False, False),  # the agent is still draining
        (pod(statuses=[{"name": "pytorch", "state": {"running": {}}}], **AGENT_RUNNING), False, False),
        (pod(statuses=[terminated(1, last=True)], **AGENT_ENDED), False, False),  # restarted in place: running
        (pod(statuses=[{"name": "pytorch", "state": {"running": {}}}], **AGENT_RUNNING), True, True),  # gone
        (pod(statuses=[], **AGENT_ENDED), False, False),  # no training container reported yet
    ],
    ids=["exited-agent-drained", "exited-agent-draining", "running", "restarted", "deleted", "unreported"],
)
def test_a_pod_is_settled_once_nothing_more_can_come_from_it(
    body: dict[str, Any], deleted: bool, settled: bool
) -> None:
    assert pod_facts(body, deleted=deleted).settled is settled


def test_a_second_training_container_still_running_keeps_the_pod_open() -> None:
    body = pod(statuses=[terminated(1), {"name": "sidecar-trainer", "state": {"running": {}}}], **AGENT_ENDED)
    body["spec"]["containers"].append({"name": "sidecar-trainer"})
    assert not pod_facts(body).settled


def test_collection_ends_when_the_missing_ranks_pods_settled_and_not_before() -> None:
    deadline = NOW + timedelta(seconds=120)
    crashed = facts("j-worker-0", 1, pod(statuses=[terminated(1)], **AGENT_ENDED))
    waiting = facts("j-worker-1", 2, pod(statuses=[{"name": "pytorch", "state": {"running": {}}}], **AGENT_RUNNING))
    dumped = {0}
    settled = settled_ranks([crashed, waiting], {})
    assert settled == {1}
    still = assess(3, dumped, NOW, deadline, settled)
    assert not still.done and still.missing == {1, 2}  # rank 2 still runs: the deadline stays for it
    done = assess(2, dumped, NOW, deadline, settled)
    assert done.done and done.accounted and not done.deadline_reached
    complete = assess(2, {0, 1}, NOW, deadline, settled)
    assert complete.done and not complete.accounted  # every rank dumped: not "accounted"
    late = assess(3, dumped, deadline, deadline, settled)
    assert late.done and late.deadline_reached and not late.accounted


def manifest(pods: list[PodFacts], dumped: dict[int, str], deadline_reached: bool = False) -> Any:
    return build_manifest(
        KEY, world_size=len(pods), listing=read_listing(KEY, [f"{KEY.root}/{v}" for v in dumped.values()]),
        pods=pods, records={}, asked={}, started="t0", ended="t1", deadline_reached=deadline_reached,
    )  # fmt: skip


def test_how_collection_ended_is_named() -> None:
    ended = [facts(f"j-{r}", r, pod(statuses=[terminated(1)], **AGENT_ENDED)) for r in range(2)]
    assert collected_reason(manifest(ended, {})) == ConditionReason.EVERY_RANK_EXITED
    assert collected_reason(manifest(ended, {0: "ranks/0.pickle"})) == ConditionReason.ALL_RANKS_ACCOUNTED
    assert collected_reason(manifest(ended, {0: "ranks/0.pickle", 1: "ranks/1.json"})) == ConditionReason.ALL_RANKS_DUMPED
    assert collected_reason(manifest(ended, {}, deadline_reached=True)) == ConditionReason.DEADLINE_REACHED
    gone = [ended[0], facts("j-1", 1, pod(statuses=[], **AGENT_RUNNING), deleted=True)]
    assert collected_reason(manifest(gone, {})) == ConditionReason.ALL_RANKS_ACCOUNTED  # rank 1's pod vanished without an exit: no crash said


def test_the_manifest_says_a_settled_rank_left_no_dump() -> None:
    ended = [facts("j-0", 0, pod(statuses=[terminated(1)], **AGENT_ENDED)),
             facts("j-1", 1, pod(statuses=[terminated(0, "Completed")], **AGENT_ENDED))]  # fmt: skip
    m = manifest(ended, {1: "ranks/1.pickle"})
    why = m.ranks[0].why_missing
    assert "exited 1 (Error)" in why and "its agent drained and ended without a dump of rank 0" in why


def test_a_pods_ranks_are_its_layouts_when_its_agent_recorded_only_those_that_dumped() -> None:
    """torchrun's pod of ranks 2 and 3 whose rank 2 crashed without a dump: its agent records rank 3 alone,
    yet the pod held rank 2 too (its log is read as theirs). A record against the layout (an elastic
    rendezvous placed the ranks) is kept; without a layout the record is all there is."""
    from frwatch_analyzers.store.pod_record import StoredPodRecord
    from frwatch_operator.collect.progress import merged_pods

    body = pod(statuses=[terminated(1)], **AGENT_ENDED)
    two = pod_facts(body | {"metadata": {**body["metadata"], "name": "j-1"}}, ranks=range(2, 4))
    bare = pod_facts(body | {"metadata": {**body["metadata"], "name": "j-1"}})

    def ranks(facts: PodFacts, recorded: tuple[int, ...]) -> list[int]:
        [record] = merged_pods([facts], {"j-1": StoredPodRecord(pod="j-1", ranks=recorded)})
        return record.ranks

    assert ranks(two, (3,)) == [2, 3]
    assert ranks(two, ()) == [2, 3]
    assert ranks(two, (0, 1)) == [0, 1]
    assert ranks(bare, (3,)) == [3]
