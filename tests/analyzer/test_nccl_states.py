"""NCCL-only evidence (states scheduled/started/completed), from the dump builder of the real schema.

gloo cannot show these (FACTS.md): its state is always 'scheduled'. Hardware is blamed only here.
"""

from __future__ import annotations

from frwatch_analyzers.analyze import analyze_dumps
from frwatch_analyzers.store.manifest import Manifest, RankRecord
from frwatch_analyzers.verdict import Category, Status
from frwatch_dev.dumps import world


def _manifest(n: int, per_node: int = 2) -> Manifest:
    return Manifest(
        world_size=n,
        ranks=[
            RankRecord(rank=r, pod=f"job-worker-{r // per_node}", node=f"node-{r // per_node}", dumped=True)
            for r in range(n)
        ],
    )


def test_gpu_hang_names_the_rank_that_never_started_and_its_node() -> None:
    dumps = world(8).all_reduce(steps=20).rank(5).not_started_at(20).dumps()
    v = analyze_dumps(dumps, manifest=_manifest(8))
    assert v.status == Status.problem
    assert v.category == Category.gpu_hang
    assert v.hardware_class
    assert v.culprit_ranks == [5]
    assert v.suspect_nodes == ["node-2"]
    assert v.earliest_branch is not None and v.earliest_branch.seq == 20
    states = {tuple(view.ranks): view.state for view in v.evidence[0].views}
    assert states[(5,)] == "scheduled"


def test_network_hang_every_member_started_none_completed() -> None:
    dumps = world(4).all_reduce(steps=12).all_started_none_completed_at(12).dumps()
    v = analyze_dumps(dumps, manifest=_manifest(4))
    assert v.category == Category.network_hang
    assert v.hardware_class
    # no rank departs from the others: none is the culprit; the nodes of the stalled group are the suspects
    assert v.culprit_ranks == []
    assert v.suspect_nodes == ["node-0", "node-1"]
    assert v.earliest_branch is not None and v.earliest_branch.process_group.ranks == [0, 1, 2, 3]
    assert "All 4 ranks entered" in v.culprit_detail
    assert any("node-0, node-1" in s for s in v.next_steps)


def test_a_software_fault_is_never_hardware_class_even_with_states() -> None:
    for w in (
        world(4).all_reduce(steps=10).rank(2).stops_at(11),
        world(4).all_reduce(steps=10).rank(2).op_at(7, "all_gather"),
        world(4).all_reduce(steps=10).rank(2).sizes_at(7, [[12]]),
        world(4).all_reduce(steps=10).rank(2).dtype_at(7, "BFloat16"),
    ):
        v = analyze_dumps(w.dumps())
        assert v.status == Status.problem
        assert not v.hardware_class, v.headline
        assert v.culprit_ranks == [2]


def test_healthy_nccl_world_is_healthy() -> None:
    v = analyze_dumps(world(16).all_reduce(steps=30).all_gather(steps=5).dumps())
    assert v.status == Status.healthy
    assert [g.ranks for g in v.groups] == [list(range(16))]


def test_missing_rank_headline_and_groups() -> None:
    v = analyze_dumps(world(8).all_reduce(steps=40).rank(7).stops_at(41).dumps())
    assert v.category == Category.missing_rank
    assert v.culprit_ranks == [7]
    assert v.headline.startswith("rank 7 never enqueued all_reduce at collective #41 of pg 0")
    labels = {tuple(g.ranks): g.label for g in v.groups}
    assert "started" in labels[(0, 1, 2, 3, 4, 5, 6)]
    assert labels[(7,)].startswith("culprit")


def test_every_rank_enqueued_none_started_is_inconclusive_not_hardware() -> None:
    dumps = world(4).all_reduce(steps=6).all_started_none_completed_at(6).dumps()
    for d in dumps.values():
        last = d["entries"][-1]
        last["state"], last["time_discovered_started_ns"] = "scheduled", None
    v = analyze_dumps(dumps)
    assert v.status == Status.inconclusive
    assert v.category == Category.inconclusive
    assert not v.hardware_class
    assert "none started it" in v.headline


def test_gloo_ranks_all_waiting_in_the_same_collective_is_inconclusive() -> None:
    dumps = world(4, backend="gloo").all_reduce(steps=6).dumps()
    for d in dumps.values():
        d["entries"][-1]["retired"] = False
        d["pg_status"]["0"]["last_completed_collective"] = 5
    v = analyze_dumps(dumps)
    assert v.category == Category.inconclusive
    assert "gloo records no start or completion state" in v.summary
