"""p2p chains get the collectives' state reasoning (issue 24, principle 3): a rank blocked in a recv cannot post
its next send, so the send it never posted is a consequence; the earliest open transfer is read by its states;
a changed shape is the side that departs from the pair's earlier transfers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from frwatch_analyzers.analyze import analyze_dumps
from frwatch_analyzers.verdict import Category, CulpritKind
from frwatch_dev.dumps.corpus_states import (
    PIPE,
    PIPE_AR,
    PIPE_AR_DP,
    PIPE_UNTIMED,
    _build,
    _chain,
    _p2p,
    _stall,
)
from frwatch_dev.dumps.program import World, world


def test_the_missing_sends_down_the_chain_are_consequences_of_the_receivers_gpu_hang() -> None:
    v = analyze_dumps(_build(PIPE, _chain("started", "scheduled"))(), world_size=4)
    assert (v.category, v.culprit_ranks, v.culprit_kind) == (Category.gpu_hang, [1], CulpritKind.gpu_hang)
    assert v.hardware_class and v.earliest_branch is not None and v.earliest_branch.p2p
    assert "rank 0 -> rank 1" in v.headline
    why = {tuple(c.ranks): c.explained_by for c in v.consequences}
    assert "rank 1 blocked in an earlier transfer (0->1" in why[(1,)]
    assert "rank 2 blocked in an earlier transfer (1->2" in why[(2,)]


def test_both_ends_started_none_completed_is_a_network_hang_with_no_culprit() -> None:
    v = analyze_dumps(_build(PIPE, _chain("started", "started"))(), world_size=4)
    assert (v.category, v.culprit_ranks, v.hardware_class) == (Category.network_hang, [], True)


def test_a_rank_idle_before_its_send_is_still_cpu_stuck() -> None:
    v = analyze_dumps(_build(PIPE, _chain(None, "scheduled"))(), world_size=4)
    assert (v.category, v.culprit_ranks, v.culprit_kind) == (
        Category.missing_rank,
        [0],
        CulpritKind.cpu_stuck,
    )


def test_a_p2p_batch_takes_its_closing_entrys_state() -> None:
    """batch_isend_irecv's sends and recvs stay 'scheduled'; the nccl:coalesced entry carries the state."""
    w = world(4).repeat(4, lambda x: x.all_reduce().batch_isend_irecv([(0, 1), (1, 0)]))
    dumps = w.dumps()
    assert _p2p(dumps[0], "send", "0->1")["state"] == "scheduled"
    v = analyze_dumps([(f"nccl_trace_rank_{r}", r, d) for r, d in sorted(dumps.items())], world_size=4)
    assert v.category == Category.healthy, v.headline


def test_a_shape_change_names_the_side_that_departs_from_the_pairs_history() -> None:
    def edit(dumps: dict) -> None:  # type: ignore[type-arg]
        e = _p2p(dumps[1], "send", "1->2")
        e["input_sizes"] = e["output_sizes"] = [[4, 4096, 1024]]

    v = analyze_dumps(_build(PIPE, edit)(), world_size=4)
    assert (v.category, v.culprit_ranks) == (Category.size_mismatch, [1])


def test_sent_and_never_received_is_the_receivers() -> None:
    timed = analyze_dumps(_build(PIPE, _chain("completed", "scheduled"))(), world_size=4)
    assert (timed.category, timed.culprit_ranks) == (Category.gpu_hang, [1])
    untimed = analyze_dumps(_build(PIPE_UNTIMED, _chain("completed", "scheduled"))(), world_size=4)
    assert (untimed.category, untimed.culprit_ranks, untimed.hardware_class) == (
        Category.transport_stall,
        [1],
        False,
    )


@pytest.mark.parametrize(
    "pipe", [PIPE_AR, PIPE_AR_DP], ids=["all_reduce in the p2p group", "all_reduce in its own group"]
)
def test_the_all_reduce_ranks_blocked_in_a_recv_never_enqueued_is_a_consequence(pipe: World) -> None:
    """all_reduce, recv from i-1 / send to i+1, all_reduce: ranks 2 and 3 wait in their recvs and never enqueue the
    all_reduce ranks 0 and 1 wait in; that is not theirs: the root is the open transfer 1->2, by its states."""
    v = analyze_dumps(_build(pipe, _stall("started", "scheduled"))(), world_size=4)
    assert (v.category, v.culprit_ranks, v.culprit_kind) == (Category.gpu_hang, [2], CulpritKind.gpu_hang), (
        v.headline
    )
    assert v.earliest_branch is not None and v.earliest_branch.p2p
    why = {c.op: c.explained_by for c in v.consequences}
    assert "rank 2 blocked in an earlier transfer (1->2" in why["nccl:all_reduce"]
    assert "rank 3 blocked in an earlier transfer (2->3" in why["nccl:all_reduce"]


def test_both_ends_of_the_chains_open_pair_started_with_the_all_reduce_behind_is_a_network_hang() -> None:
    v = analyze_dumps(_build(PIPE_AR, _stall("started", "started"))(), world_size=4)
    assert (v.category, v.culprit_ranks, v.hardware_class) == (Category.network_hang, [], True), v.headline
    assert v.earliest_branch is not None and v.earliest_branch.p2p


@pytest.mark.parametrize(
    "pipe", [PIPE_AR, PIPE_AR_DP], ids=["all_reduce in the p2p group", "all_reduce in its own group"]
)
def test_the_rank_that_never_posted_its_send_is_the_root_not_the_ones_down_the_chain(pipe: World) -> None:
    v = analyze_dumps(_build(pipe, _stall(None, "scheduled"))(), world_size=4)
    assert (v.category, v.culprit_ranks, v.culprit_kind) == (
        Category.missing_rank,
        [1],
        CulpritKind.cpu_stuck,
    ), v.headline
    assert v.earliest_branch is not None and v.earliest_branch.p2p


def test_a_changed_send_shape_with_the_all_reduce_behind_is_the_senders() -> None:
    v = analyze_dumps(_build(PIPE_AR, _stall("started", "started", resize=True))(), world_size=4)
    assert (v.category, v.culprit_ranks) == (Category.size_mismatch, [1]), v.headline


def test_a_p2p_finding_and_a_collective_one_are_ordered_on_a_ranks_own_record() -> None:
    """Two findings neither explains (the open pair 1->2; rank 3 idle, it never posted its recv nor enqueued the
    all_reduce): the earlier is the one first in the record of a rank that holds both (rank 1 posted its send
    before the all_reduce), not the one whose creation time on another rank's clock is earlier (rank 0, the
    pipeline's head, enqueued its all_reduce before rank 1 posted its send)."""

    def edit(dumps: dict) -> None:  # type: ignore[type-arg]
        _stall("started", "started")(dumps)
        dumps[3]["entries"].remove(_p2p(dumps[3], "recv", "3<-2"))

    v = analyze_dumps(_build(PIPE_AR, edit)(), world_size=4)
    assert (v.category, v.culprit_ranks) == (Category.network_hang, []), v.headline
    assert [c.ranks for c in v.consequences if c.op == "nccl:all_reduce"] == [[3]]


def test_frwatch_analyze_on_a_folder_names_the_head_of_the_chain(tmp_path: Path) -> None:
    """End to end: the chain's dumps as pickle files in a folder, ``frwatch analyze DIR --format json``."""
    from frwatch_dev.dumps.encode import pickle_bytes

    for name, _, dump in _build(PIPE, _chain("started", "scheduled"))():
        (tmp_path / name).write_bytes(pickle_bytes(dump))
    out = subprocess.run(
        [sys.executable, "-m", "frwatch_operator.cli", "analyze", str(tmp_path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    v = json.loads(out.stdout)
    assert (v["category"], v["culprit_ranks"], v["hardware_class"]) == ("gpu_hang", [1], True), v["headline"]
    assert v["earliest_branch"]["p2p"] is True
    assert {tuple(c["ranks"]) for c in v["consequences"]} >= {(1,), (2,)}
