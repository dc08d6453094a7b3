"""The summarizer's caches live as long as a worker: a rank summarised after others gives the summary it
gets alone, and every signature a trace holds has its detail among the details handed on, also when the
caches are cleared in between (their bound passed)."""

from __future__ import annotations

from array import array

import pytest

from frwatch_analyzers.load.merge import merge
from frwatch_analyzers.trace import summarize
from frwatch_analyzers.trace.summarize import Summarizer
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


def test_creation_times_read_as_before_the_fast_path() -> None:
    """The column of creation times, in C when every time is a plain int64, is what the checked
    comprehension gives (a time beyond int64 sends the whole column to the lenient reading)."""

    def checked(ents: list[dict[str, object]]) -> list[int]:
        times = [e.get("time_created_ns", 0) for e in ents]
        try:
            return list(array("q", [t if type(t) is int else 0 for t in times]))
        except OverflowError:
            return list(array("q", [summarize._as_int(t, 0) for t in times]))

    columns: list[list[dict[str, object]]] = [
        [{"time_created_ns": 5}, {}, {"time_created_ns": -3}],
        [
            {"time_created_ns": 5},
            {"time_created_ns": True},
            {"time_created_ns": "7"},
            {"time_created_ns": None},
        ],
        [
            {"time_created_ns": 1},
            {"time_created_ns": 1 << 63},
            {"time_created_ns": True},
            {"time_created_ns": "7"},
        ],
        [{"time_created_ns": 1 << 70}, {"time_created_ns": 2}],
        [],
    ]
    for ents in columns:
        assert list(summarize._created(ents)) == checked(ents)
    assert list(summarize._created(columns[0])) == [5, 0, -3]
    assert list(summarize._created(columns[1])) == [5, 0, 0, 0]


def test_one_call_site_in_groups_of_one_kind_keeps_each_groups_sizes() -> None:
    """Sizes seen at a call site are kept per group kind across files: two TP groups of other sizes at the
    same op and frames still get each their own signature."""
    frames = [{"name": "step", "filename": "/app/train.py", "line": 3}]

    def dump(pg: str, numel: int) -> dict[str, object]:
        entry = {
            "process_group": (pg, "tp"),
            "pg_id": int(pg),
            "profiling_name": "nccl:all_reduce",
            "input_sizes": [[numel]],
            "input_dtypes": ["Float"],
            "output_sizes": [[numel]],
            "output_dtypes": ["Float"],
            "state": "completed",
            "record_id": 0,
            "is_p2p": False,
            "collective_seq_id": 1,
            "frames": list(frames),
            "time_created_ns": 1,
        }
        return {"version": "2.10", "entries": [entry], "pg_config": {}, "pg_status": {}}

    shared = Summarizer()
    first = shared.summarize(dump("1", 8), 0, "r0", "pickle")
    second = shared.summarize(dump("2", 16), 1, "r1", "pickle")
    again = Summarizer().summarize(dump("2", 16), 1, "r1", "pickle")
    assert first.pgs["1"].sigs != second.pgs["2"].sigs
    assert second.pgs["2"].sigs == again.pgs["2"].sigs
