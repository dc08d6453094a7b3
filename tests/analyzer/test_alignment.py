"""Alignment: by (group, sequence number), whatever the file order, ring windows or group layout."""

from __future__ import annotations

import shutil
from pathlib import Path

from frwatch_analyzers.analyze import analyze, analyze_dumps
from frwatch_analyzers.verdict import Category
from frwatch_dev.dumps import world


def test_the_culprit_does_not_depend_on_which_file_comes_first(tmp_path: Path) -> None:
    # fr_trace compares everyone with the first file listed: with rank 0 odd it blames every innocent rank
    w = world(6).all_reduce(steps=10).rank(0).op_at(6, "broadcast")
    w.write(tmp_path / "a")
    v1 = analyze(str(tmp_path / "a"))
    renamed = tmp_path / "b"
    renamed.mkdir()
    for f in (tmp_path / "a").iterdir():
        rank = int(f.name.rsplit("_", 1)[-1])
        shutil.copy(f, renamed / f"z{5 - rank:02d}_rank_{rank}")
    v2 = analyze(str(renamed))
    assert v1.culprit_ranks == v2.culprit_ranks == [0]
    assert v1.category == v2.category == Category.desync


def test_ring_buffer_wrap_ranks_holding_other_windows_still_align() -> None:
    # rank 3 also used a subgroup: its 50-entry ring holds fewer default-group entries than the others
    w = (
        world(4, buffer_size=50)
        .group("extra", ranks=[2, 3])
        .repeat(60, lambda w: w.all_reduce())
        .repeat(20, lambda w: w.all_reduce(group="extra"))
        .all_reduce(steps=5)
        .rank(1)
        .stops_at(66)
    )
    dumps = w.dumps()
    firsts = {
        r: min(e["collective_seq_id"] for e in d["entries"] if e["process_group"][0] == "0")
        for r, d in dumps.items()
    }
    assert len(set(firsts.values())) > 1, "the windows must differ for this test to mean something"
    v = analyze_dumps(dumps)
    assert v.category == Category.missing_rank
    assert v.culprit_ranks == [1]
    assert v.earliest_branch is not None and v.earliest_branch.seq == 66


def test_a_rank_stuck_in_one_group_explains_the_hang_in_another() -> None:
    # tensor-parallel group {0,1}: rank 1 never enqueues tp #6; so rank 1 never reaches dp #11 either
    w = (
        world(4)
        .group("tp", ranks=[0, 1])
        .repeat(10, lambda w: w.all_reduce(group="tp").all_reduce())
        .rank(1)
        .stops_at(11, group="tp")
    )
    v = analyze_dumps(w.dumps())
    assert v.category == Category.missing_rank
    assert v.culprit_ranks == [1]
    b = v.earliest_branch
    assert b is not None and b.process_group.desc == "tp" and b.seq == 11
    assert b.process_group.ranks == [0, 1]


def test_coalesced_ops_compare_as_one_sequence_number() -> None:
    healthy = world(4).coalesced(["all_reduce", "all_reduce"], steps=5).all_reduce(steps=3)
    assert analyze_dumps(healthy.dumps()).category == Category.healthy
    broken = world(4).coalesced(["all_reduce", "all_reduce"], steps=5).rank(2).stops_at(5)
    v = analyze_dumps(broken.dumps())
    assert v.category == Category.missing_rank and v.culprit_ranks == [2]


def test_isolated_rank_dependent_call_site_is_not_a_problem() -> None:
    w = world(4).all_reduce(steps=12).rank(3).call_site_at(4, ("_log_metrics", "/workspace/metrics.py", 12))
    v = analyze_dumps(w.dumps())
    assert v.category == Category.healthy
    assert "Rank-dependent call sites" in v.summary


def test_call_site_desync_that_hangs_is_the_branch_even_when_op_sizes_dtypes_agree() -> None:
    w = (
        world(4)
        .all_reduce(steps=12)
        .rank(3)
        .call_site_at(4, ("_log_metrics", "/workspace/metrics.py", 12), hangs=True)
    )
    v = analyze_dumps(w.dumps())
    assert v.category == Category.desync
    assert v.culprit_ranks == [3]
    assert v.earliest_branch is not None and v.earliest_branch.seq == 4
    assert "call-site desync" in v.headline and "metrics.py:12" in v.headline


def test_p2p_unmatched_send_names_the_rank_that_never_posted_the_recv() -> None:
    w = world(4).all_reduce(steps=3).send(1, 2, steps=3)
    dumps = w.dumps()
    # rank 2 never posted its third recv: drop it and make rank 1's last send hang
    d2 = dumps[2]
    recvs = [e for e in d2["entries"] if e["is_p2p"]]
    d2["entries"].remove(recvs[-1])
    last_send = [e for e in dumps[1]["entries"] if e["is_p2p"]][-1]
    last_send["state"] = "started"
    v = analyze_dumps(dumps)
    assert v.category == Category.missing_rank
    assert v.culprit_ranks == [2]
    assert v.earliest_branch is not None and v.earliest_branch.p2p
    assert "never posted the recv" in v.headline


def test_p2p_size_mismatch() -> None:
    dumps = world(4).send(0, 3, steps=2).dumps()
    recv = [e for e in dumps[3]["entries"] if e["is_p2p"]][-1]
    recv["input_sizes"] = [[8, 4096, 512]]
    v = analyze_dumps(dumps)
    assert v.category == Category.size_mismatch
    assert v.culprit_ranks == [3]  # its recv departs from the pair's earlier transfer; the send does not


def test_p2p_size_mismatch_without_history_names_both_ends() -> None:
    dumps = world(4).send(0, 3, steps=1).dumps()
    recv = [e for e in dumps[3]["entries"] if e["is_p2p"]][-1]
    recv["input_sizes"] = [[8, 4096, 512]]
    v = analyze_dumps(dumps)
    assert v.category == Category.size_mismatch
    assert sorted(v.culprit_ranks) == [0, 3]


def test_dumpless_rank_among_waiters_is_the_culprit() -> None:
    w = world(4).all_reduce(steps=10).rank(3).stops_at(11).without_dump(3)
    v = analyze_dumps(w.dumps(), world_size=4)
    assert v.category == Category.missing_rank
    assert v.missing_dumps == [3]
    assert v.culprit_ranks == [3]
    assert "left no dump" in v.culprit_detail


def test_a_gloo_completed_counter_one_behind_a_retired_entry_keeps_the_rank_in_its_group() -> None:
    """gloo retires an entry and releases wait() before it moves pg_status's completed counter (seen in a real
    healthy run under load: 12 read with entry 13 retired). That rank did what its peers did: one group."""
    dumps = world(4, backend="gloo").all_reduce(steps=13).dumps()
    dumps[2]["pg_status"]["0"]["last_completed_collective"] = 12
    v = analyze_dumps(dumps)
    assert v.category == Category.healthy
    assert [(g.ranks, g.last_completed) for g in v.groups] == [([0, 1, 2, 3], {"0": 13})]
    dumps[2]["entries"][-1]["retired"] = False  # now the counter is right: rank 2 is still inside #13
    v = analyze_dumps(dumps)
    assert [(g.ranks, g.last_completed) for g in v.groups] == [([0, 1, 3], {"0": 13}), ([2], {"0": 12})]
