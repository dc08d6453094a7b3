"""Cross-group root vs consequence (issue 24, principle 4): the rank that never enqueued a collective its peers
wait in is the culprit, not the one waiting for it, also when the two wait on each other across groups."""

from __future__ import annotations

import pytest

from frwatch_analyzers.analyze import analyze_dumps
from frwatch_analyzers.verdict import Category, CulpritKind
from frwatch_dev.dumps.program import World, world


def _sparse(backend: str) -> World:
    """A 2-rank subgroup called once every 32 calls: too little kept history to tell a skip by history."""
    w = world(4, backend=backend).group("a", ranks=[0, 1], desc="undefined")  # type: ignore[arg-type]
    return w.repeat(5, lambda x: x.all_reduce(steps=30).all_reduce(group="a").barrier())


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_a_wait_cycle_names_the_rank_that_never_enqueued_the_subgroups_call(backend: str) -> None:
    v = analyze_dumps(_sparse(backend).rank(1).skips(4, group="a").dumps(), world_size=4)
    assert (v.category, v.culprit_ranks, v.culprit_kind) == (
        Category.missing_rank,
        [1],
        CulpritKind.took_another_path,
    ), v.headline
    assert v.earliest_branch is not None and (v.earliest_branch.process_group.name, v.earliest_branch.seq) == ("1", 4)
    assert "which side is wrong is not in the dumps" not in v.headline
    assert "rank 1 is blocked inside " in v.culprit_detail and "#124 of pg 0" in v.culprit_detail
    # the world's barrier, where rank 0 never arrived, is the consequence
    assert any(c.process_group == "0" and "blocked" in c.explained_by for c in v.consequences)


def test_gloo_subgroup_members_dumps_keep_the_broken_pg_config() -> None:
    """The builder writes what real gloo members write (FACTS.md): the cases above stand on it."""
    d = _sparse("gloo").dumps()
    assert d[0]["pg_config"] == {"": {"name": "", "desc": "", "ranks": "[]"}}
    assert d[0]["entries"][30]["process_group"][1] == "undefined"


def test_a_gloo_member_that_never_called_its_subgroup_is_found_by_its_pg_config() -> None:
    """Its pg_config lists '[]' (in a subgroup) and it holds no entry of the only subgroup, where rank 0
    waits alone: it is that subgroup's missing member, not an invisible one."""
    w = world(4, backend="gloo").group("sub", ranks=[0, 1], desc="undefined")
    w = w.repeat(4, lambda x: x.all_reduce().barrier()).all_reduce(group="sub")
    w = w.repeat(2, lambda x: x.all_reduce().barrier())
    v = analyze_dumps(w.rank(1).stops_at(1, group="sub").dumps(), world_size=4)
    assert (v.category, v.culprit_ranks, v.culprit_kind) == (Category.missing_rank, [1], CulpritKind.cpu_stuck)
    assert v.earliest_branch is not None and v.earliest_branch.process_group.ranks == [0, 1]


def test_a_subgroup_created_and_never_called_adds_no_member() -> None:
    w = world(4, backend="gloo").group("a", ranks=[0, 1]).group("b", ranks=[2, 3])
    v = analyze_dumps(w.repeat(4, lambda x: x.all_reduce().all_reduce(group="a")).dumps(), world_size=4)
    assert v.category == Category.healthy, v.headline
