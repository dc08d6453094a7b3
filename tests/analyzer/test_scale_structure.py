"""What keeps big worlds cheap, pinned structurally (the figures themselves come from benchmarks/)."""

from __future__ import annotations

import pickle

from frwatch_analyzers.analyze import analyze_dumps
from frwatch_analyzers.load.loading import ArrayPool
from frwatch_analyzers.trace.summarize import Summarizer
from frwatch_dev.dumps import world


def test_a_rank_summary_does_not_grow_with_the_world_size() -> None:
    """pg_config lists every member in every rank's dump: kept as a list each, 16k ranks cost O(ranks^2)."""
    sizes = {}
    dump = world(8).all_reduce(steps=20).dumps()[0]
    for n in (8, 16384):
        dump["pg_config"]["0"]["ranks"] = str(list(range(n)))  # what rank 0 of an n-rank job writes
        trace = Summarizer().summarize(dump, 0, "r0", "pickle")
        assert trace.pgs["0"].config_ranks == range(n)
        sizes[n] = len(pickle.dumps(trace, protocol=pickle.HIGHEST_PROTOCOL))
    assert sizes[16384] < sizes[8] + 64, sizes


def test_ranks_that_behaved_alike_share_their_arrays() -> None:
    dumps = world(64).all_reduce(steps=50).rank(63).stops_at(51).dumps()
    summarizer, pool = Summarizer(), ArrayPool()
    traces = [summarizer.summarize(d, r, f"r{r}", "pickle") for r, d in sorted(dumps.items())]
    for t in traces:
        pool.intern(t)
    distinct = {id(t.pgs["0"].sigs) for t in traces}
    assert len(distinct) == 2  # the 63 waiting ranks, and the culprit
    assert analyze_dumps(dumps).culprit_ranks == [63]
