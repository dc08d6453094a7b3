"""How a worker's trace travels back to the parent (trace_wire): what arrives equals what was made, and a
message that refers to arrays the parent does not hold, or carries broken rows, is refused by name."""

from __future__ import annotations

import pickle
from array import array
from pathlib import Path
from typing import Any

import pytest

from frwatch_analyzers.analyze import analyze, analyze_dumps
from frwatch_analyzers.load import loading
from frwatch_analyzers.load.loading import ArrayPool
from frwatch_analyzers.trace.summarize import RankTrace, Summarizer
from frwatch_analyzers.trace.tail_rows import TailRows
from frwatch_analyzers.trace.wire import Packed, Packer, tail_rows, unpack
from frwatch_dev.dumps import world


def _traces() -> list[RankTrace]:
    dumps = world(8).all_reduce(steps=30).all_to_all(steps=4).rank(7).stops_at(31).dumps()
    summarizer = Summarizer()
    return [summarizer.summarize(d, r, f"r{r}", "pickle") for r, d in sorted(dumps.items())]


def test_traces_arrive_as_they_were_made() -> None:
    made = _traces()
    sent = _traces()  # the same again: packing rewrites its traces in place
    packer, pool = Packer(), ArrayPool()
    packs = [packer.pack(t) for t in sent]
    assert packs[0].shared == () and packs[3].shared == ("0",)  # rank 3 recorded what rank 0 did
    assert len(packs[3].trace.pgs["0"].sigs) == 0  # so it travels without its arrays
    assert packs[7].shared == ()  # the culprit's sequence is its own
    wires = [pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL) for p in packs]
    arrived = []
    for wire in wires:
        packed = pickle.loads(wire)
        assert isinstance(packed, Packed)
        assert unpack(packed, pool.held), packed.problem
        pool.intern(packed.trace)
        arrived.append(packed.trace)
    for want, got in zip(made, arrived, strict=True):
        assert want.pgs.keys() == got.pgs.keys()
        for name, pg in want.pgs.items():
            other = got.pgs[name]
            assert (pg.seqs, pg.sigs, pg.plain) == (other.seqs, other.sigs, other.plain)
            assert isinstance(other.tail, TailRows)
            assert list(other.tail) == list(pg.tail)  # every field, all_to_all splits included
            assert (pg.var_seqs, pg.var_in, pg.var_out) == (other.var_seqs, other.var_in, other.var_out)
    assert any(t.splits for t in made[0].pgs["0"].tail)  # the splits were there to travel


def test_a_reference_to_arrays_never_sent_is_refused() -> None:
    trace = _traces()[0]
    packed = Packer().pack(trace)
    packed.shared = ("0",)  # claims the parent holds group 0's sequence: it was never sent
    trace.pgs["0"].seqs = array("q")
    assert not unpack(packed, ArrayPool().held)
    assert "never sent" in packed.problem and "'0'" in packed.problem
    stranger = Packer().pack(_traces()[1])
    stranger.shared = ("no such group",)
    assert not unpack(stranger, ArrayPool().held)
    assert "never sent" in stranger.problem


def test_kept_entries_not_in_whole_rows_are_refused() -> None:
    trace = _traces()[0]
    packed = Packer().pack(trace)
    trace.pgs["0"].tail = TailRows(array("q", range(11)), {})
    assert not unpack(packed, ArrayPool().held)
    assert "whole rows" in packed.problem
    objects = Packed(_traces()[0])  # rows as objects: not what a worker sends
    assert not unpack(objects, ArrayPool().held)
    assert tail_rows(objects.trace.pgs["0"].tail) == objects.trace.pgs["0"].tail


def test_a_broken_message_from_a_worker_names_its_file(tmp_path: Path, monkeypatch: Any) -> None:
    """Through the real workers: the file whose message cannot be used is a bad file with the reason; the
    others are analyzed as ever."""
    w = world(4).all_reduce(steps=20).rank(3).stops_at(11)
    w.write(tmp_path)
    real = loading._summarise

    def lying(ref: Any, **kw: Any) -> Any:
        made = real(ref, **kw)
        if ref.rank == 2 and isinstance(made, Packed):  # a sequence no message carried
            made.trace.pgs["0"].seq_digest = b"forged digest..."
            made.shared = ("0",)
        return made

    monkeypatch.setattr(loading, "_summarise", lying)
    verdict = analyze(str(tmp_path))
    bad = {b.rank: b.reason for b in verdict.bad_files}
    assert set(bad) == {2} and "never sent" in bad[2], bad
    assert 3 in verdict.culprit_ranks  # the others were analyzed: the rank that stopped is still named


@pytest.mark.parametrize("jobs", [1, 2])
def test_through_the_workers_the_verdict_is_the_one_from_the_dumps(tmp_path: Path, jobs: int) -> None:
    w = world(16).all_reduce(steps=40).all_to_all(steps=3).rank(5).stops_at(30)
    w.write(tmp_path)
    got = analyze(str(tmp_path), jobs=jobs)
    want = analyze_dumps(w.dumps())
    assert got.culprit_ranks == want.culprit_ranks == [5]
    assert got.status == want.status and not got.bad_files
