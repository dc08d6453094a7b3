"""The summarizer's caches live as long as a worker: a rank summarised after others gives the summary it
gets alone, and every signature a trace holds has its detail among the details handed on, also when the
caches are cleared in between (their bound passed)."""

from __future__ import annotations

import pytest

from frwatch_analyzers import summarize
from frwatch_analyzers.merge import merge
from frwatch_analyzers.summarize import Summarizer
from frwatch_dev.dumps import varied

WORLD, ENTRIES = 16, 300


@pytest.mark.parametrize("bound", [summarize._CACHE_KEYS, 40])
def test_a_shared_summarizer_gives_each_rank_its_own_summary(
    monkeypatch: pytest.MonkeyPatch, bound: int
) -> None:
    monkeypatch.setattr(summarize, "_CACHE_KEYS", bound)
    dumps = [varied.rank_dump(rank, WORLD, ENTRIES) for rank in range(WORLD)]
    shared = Summarizer()
    together = [shared.summarize(d, rank, f"r{rank}", "pickle") for rank, d in enumerate(dumps)]
    alone = [Summarizer().summarize(d, rank, f"r{rank}", "pickle") for rank, d in enumerate(dumps)]
    for a, b in zip(together, alone, strict=True):
        assert a.pgs.keys() == b.pgs.keys()
        for name in a.pgs:
            pa, pb = a.pgs[name], b.pgs[name]
            assert (pa.seqs, pa.sigs, pa.plain, pa.created, pa.tail) == (
                pb.seqs,
                pb.sigs,
                pb.plain,
                pb.created,
                pb.tail,
            )
    merged = merge(together)
    held = {s for t in merged.traces.values() for pg in t.pgs.values() for s in (*pg.sigs, *pg.plain)}
    assert held <= merged.details.keys()
    alone_details = {s: d for t in alone for s, d in t.sig_details.items()}
    assert all(merged.details[s] == alone_details[s] for s in held)
