"""gloo subgroup membership from REAL dumps of torch 2.8.0, 2.13.0 and 2.14.1 (the dump zoo's pairs).

In ``subgroup_never_called`` ranks {0,1} and {2,3} each built a pair with ``new_group``; rank 1 skipped its
pair's first all_reduce, so no entry of rank 1 names its pair and rank 0 waits there alone. 2.14.1 writes
``'[0, 1]'`` as pg_config's ranks on every rank (2.8.0 to 2.13.0: ``'[]'``), which an older reading took
for a world of ranks 0 and 1: rank 1 looked like a rank outside every subgroup.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from frwatch_analyzers.align.gloo_subgroups import lists_the_world, subgroup_candidates
from frwatch_analyzers.align.groups import infer_groups
from frwatch_analyzers.decode.safe_load import decode
from frwatch_analyzers.trace.summarize import RankTrace, Summarizer
from frwatch_dev.dump_zoo import FIXTURES

RELEASES = ["2.8.0", "2.13.0", "2.14.1"]
WORLD = list(range(4))


def _traces(release: str, scenario: str) -> dict[int, RankTrace]:
    folder = FIXTURES / release / scenario
    summarizer = Summarizer()
    out = {}
    for path in sorted(Path(folder).glob("nccl_trace_rank_*")):
        rank = int(path.name.rsplit("_", 1)[1])
        out[rank] = summarizer.summarize(decode(path.read_bytes())[0], rank, path.name, "pickle")
    assert sorted(out) == WORLD
    return out


@pytest.mark.parametrize("release", RELEASES)
def test_no_rank_that_built_a_pair_lists_the_world(release: str) -> None:
    traces = _traces(release, "subgroup_never_called")
    assert [lists_the_world(t, len(WORLD)) for t in traces.values()] == [False] * 4
    # 2.14.1's '[0, 1]' is read as a range on ranks 0 and 1 (they are in it): still not the world
    expected = (0, 1) if release == "2.14.1" else None
    assert [traces[r].world_ranks for r in (0, 1)] == [expected, expected]


@pytest.mark.parametrize("release", RELEASES)
def test_the_rank_that_never_called_its_pair_is_the_only_candidate(release: str) -> None:
    traces = _traces(release, "subgroup_never_called")
    assert subgroup_candidates(traces, ["1", "2"], WORLD) == {1}


@pytest.mark.parametrize("release", RELEASES)
def test_the_waiting_pair_gets_its_silent_member(release: str) -> None:
    groups = infer_groups(_traces(release, "subgroup_never_called"), WORLD)
    assert groups["1"].members == [0, 1], groups["1"].membership_source
    assert "members that recorded no call of it" in groups["1"].membership_source
    assert groups["2"].members == [2, 3]  # the healthy pair: from its entries alone
    assert groups["0"].members == WORLD


@pytest.mark.parametrize("release", RELEASES)
def test_pairs_that_both_called_add_no_one(release: str) -> None:
    traces = _traces(release, "subgroup")  # rank 3 skipped its pair's step-3 call, after two calls
    assert subgroup_candidates(traces, ["1", "2"], WORLD) == set()
    groups = infer_groups(traces, WORLD)
    assert (groups["1"].members, groups["2"].members) == ([0, 1], [2, 3])


def test_a_default_group_only_job_lists_the_world_on_every_release() -> None:
    for release in RELEASES:
        traces = _traces(release, "healthy")
        assert all(lists_the_world(t, len(WORLD)) for t in traces.values()), release
        assert subgroup_candidates(traces, [], WORLD) == set()
