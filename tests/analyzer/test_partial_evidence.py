"""A verdict claims only what the evidence shows, and every dump of a rank is read.

- A rank without a usable dump says nothing of what it issued: with as many such ranks as ranks that dumped,
  no one is named (inconclusive, the unknown ranks said); they never count as "never issued" an extra call;
  a rank whose only file is garbage is the absent member of unknown kind, never "crashed".
- A dump's file name gives its rank as torch writes it (``<TORCH_FR_DUMP_TEMP_FILE><rank>``, FlightRecorder.cpp's
  DebugInfoWriter) with whatever a person appended: ``nccl_trace_rank_0.final`` and ``nccl_trace_rank_0.1``
  are rank 0's, and merged with its other file by content."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from frwatch_analyzers.analyze import analyze, analyze_dumps
from frwatch_analyzers.store.layout import rank_from_name
from frwatch_analyzers.verdict import Category, CulpritKind, Status
from frwatch_dev.dumps import world

STEPS = world(4).repeat(6, lambda x: x.all_reduce().all_gather())


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("nccl_trace_rank_3", 3),
        ("comm_lib_trace_rank_12", 12),
        ("nccl_trace_rank_0.final", 0),
        ("nccl_trace_rank_0.1", 0),
        ("nccl_trace_rank_2.1764201600123", 2),
        ("rank3.pkl", 3),
        ("host7-rank-5.json", 5),
        ("torchcomm_fr_trace_6", 6),
        ("dump_4.final.pickle", 4),
        ("3.json", 3),
        ("dump.pkl", None),
    ],
)
def test_the_rank_of_a_dump_is_the_number_torch_wrote_after_the_prefix(name: str, rank: int | None) -> None:
    assert rank_from_name(name) == rank


def test_one_dump_of_four_says_what_that_rank_did_and_nothing_of_the_others() -> None:
    dumps = STEPS.rank(2).stops_at(5).dumps()
    v = analyze_dumps({1: dumps[1]}, world_size=4)
    assert (v.status, v.category, v.culprit_ranks, v.missing_dumps) == (
        Status.inconclusive,
        Category.inconclusive,
        [],
        [0, 2, 3],
    )
    assert v.headline == (
        "rank 1 waits in all_reduce at collective #5 of pg 0 (default_pg); what ranks 0,2-3 issued is unknown "
        "(they left no usable dump)"
    )
    assert "crashed" not in v.short and "never" not in v.headline
    assert v.next_steps[0].startswith("Collect the dumps of ranks 0,2-3")


def test_three_dumps_of_four_still_name_the_rank_without_one() -> None:
    dumps = STEPS.rank(2).stops_at(5).dumps()
    del dumps[2]
    v = analyze_dumps(dumps, world_size=4)
    assert (v.category, v.culprit_ranks, v.culprit_kind) == (Category.missing_rank, [2], CulpritKind.crashed)


def test_an_extra_call_is_not_what_ranks_without_a_dump_never_issued() -> None:
    extra = STEPS.rank(1).extra_at(13, "broadcast").dumps()[1]  # a call past the end of everyone's program
    base = STEPS.dumps()
    only = analyze_dumps({1: extra}, world_size=4)
    assert only.status == Status.inconclusive and only.culprit_ranks == []
    assert "never issued" not in only.headline
    pair = analyze_dumps({1: extra, 2: base[2]}, world_size=4)  # ranks 0,3: no dump
    assert (pair.category, pair.culprit_ranks, pair.culprit_kind) == (
        Category.desync,
        [1],
        CulpritKind.extra_call,
    )
    assert pair.headline.endswith(
        "rank 1 issued an extra broadcast that rank 2 never issued (ranks 0,3: no dump, unknown)"
    )
    assert "rank 2 is not stuck in it" in pair.culprit_detail


def test_a_rank_whose_only_file_is_garbage_is_unknown_not_crashed(tmp_path: Path) -> None:
    for r, d in STEPS.rank(2).stops_at(5).dumps().items():
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(b"\x80\x02garbage" if r == 2 else pickle.dumps(d, 2))
    v = analyze(str(tmp_path))
    assert (v.category, v.culprit_ranks, v.culprit_kind) == (Category.missing_rank, [2], CulpritKind.unknown)
    assert "crashed" not in v.headline + v.short and "never enqueued" not in v.headline
    assert "whose dump could not be read" in v.headline
    assert [p.rank for p in v.bad_files] == [2]


def test_three_garbage_files_of_four_are_as_good_as_no_dump(tmp_path: Path) -> None:
    for r, d in STEPS.rank(2).stops_at(5).dumps().items():
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(d, 2) if r == 1 else b"not a dump")
    v = analyze(str(tmp_path))
    assert (v.status, v.culprit_ranks) == (Status.inconclusive, [])
    assert "what ranks 0,2-3 issued is unknown" in v.headline


def test_a_ranks_later_dump_under_a_suffixed_name_is_read_and_used(tmp_path: Path) -> None:
    """Every rank's timeout dump was copied to ``<name>.final`` beside an earlier on-demand dump under torch's
    own name (the dump path is truncated on each write: a person keeps the later one aside)."""
    late = STEPS.rank(2).stops_at(5).dumps()
    early = STEPS.dumps(upto=len(STEPS.program) // 3)
    for r in range(4):
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(early[r], 2))
        (tmp_path / f"nccl_trace_rank_{r}.final").write_bytes(pickle.dumps(late[r], 2))
    v = analyze(str(tmp_path))
    assert (v.category, v.culprit_ranks, v.culprit_kind) == (
        Category.missing_rank,
        [2],
        CulpritKind.cpu_stuck,
    )
    assert v.bad_files == []
    used = {f.file.rsplit("/", 1)[-1] for f in v.dump_files if f.role == "used"}
    assert used == {f"nccl_trace_rank_{r}.final" for r in range(4)}


def test_a_dot_number_after_the_rank_is_not_another_rank(tmp_path: Path) -> None:
    late = STEPS.rank(2).stops_at(5).dumps()
    early = STEPS.dumps(upto=len(STEPS.program) // 3)
    for r in range(4):
        (tmp_path / f"nccl_trace_rank_{r}").write_bytes(pickle.dumps(late[r], 2))
    (tmp_path / "nccl_trace_rank_0.1").write_bytes(pickle.dumps(early[0], 2))
    v = analyze(str(tmp_path))
    assert v.culprit_ranks == [2] and "disagree" not in v.summary  # not filed as rank 1's conflicting dump
    files = {(f.file.rsplit("/", 1)[-1], f.rank, f.role) for f in v.dump_files}
    assert files == {("nccl_trace_rank_0.1", 0, "superseded"), ("nccl_trace_rank_0", 0, "used")}


def test_the_stores_later_dumps_of_a_rank_are_read_too(tmp_path: Path) -> None:
    """frwatch's own layout: the agent uploads a rank's first dump to ``ranks/<rank>.<fmt>`` and a later,
    different one (a live dump first, the timeout dump after) to ``ranks-later/<rank>.<unix-ms>.<fmt>``."""
    late = STEPS.rank(2).stops_at(5).dumps()
    early = STEPS.dumps(upto=len(STEPS.program) // 3)
    (tmp_path / "ranks").mkdir()
    (tmp_path / "ranks-later").mkdir()
    for r in range(4):
        (tmp_path / "ranks" / f"{r}.pickle").write_bytes(pickle.dumps(early[r], 2))
        (tmp_path / "ranks-later" / f"{r}.1764201600123.pickle").write_bytes(pickle.dumps(late[r], 2))
    v = analyze(str(tmp_path))
    assert (v.category, v.culprit_ranks, v.culprit_kind) == (
        Category.missing_rank,
        [2],
        CulpritKind.cpu_stuck,
    )
    assert v.bad_files == [] and len(v.dump_files) == 8
    later = {f.rank for f in v.dump_files if f.role == "used" and "/ranks-later/" in f.file}
    assert later == {0, 1, 3}  # rank 2 stopped before its first dump: its later one holds the same records


def test_a_send_whose_peer_left_no_dump_says_so_and_with_too_few_dumps_names_no_one() -> None:
    dumps = world(4).repeat(6, lambda x: x.all_reduce().send(0, 1)).dumps()
    last = [e for e in dumps[1]["entries"] if e["is_p2p"]][-1]["p2p_seq_id"]
    for e in dumps[0]["entries"]:
        if e["is_p2p"] and e["p2p_seq_id"] == last:
            e.update(state="started", retired=False, time_discovered_completed_ns=None)
    three = analyze_dumps({r: dumps[r] for r in (0, 2, 3)}, world_size=4)
    assert (three.culprit_ranks, three.culprit_kind) == ([1], CulpritKind.crashed)
    assert three.headline.startswith("rank 1 left no dump while rank 0 waits in its send 0->1")
    one = analyze_dumps({0: dumps[0]}, world_size=4)
    assert (one.status, one.culprit_ranks) == (Status.inconclusive, [])
    assert "what rank 1 posted is unknown" in one.headline and "never posted" not in one.headline
