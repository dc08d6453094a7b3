"""Rooted collectives and the all_to_all balance as torch records them, and the words of a mismatch.

What the dumps hold is read from torch's source (cited in ``frwatch_dev.dumps.corpus_roots``): NCCL's
non-root gather/scatter member records one undefined tensor (``[[0]]``, ``UNKNOWN_SCALAR`` on torch 2.13;
``[[]]``, ``Undefined`` in torch's tests), gloo's records ``[]``; FR records no root; all_to_all_single records
one total a side; all_to_all with lists records what each rank sends and expects peer by peer.
"""

from __future__ import annotations

from frwatch_analyzers.analyze import analyze_dumps
from frwatch_analyzers.trace.rules import (
    Balance,
    api_order,
    check_balance,
    elements,
    placeholder,
    predict_root,
)
from frwatch_analyzers.verdict import Category, CulpritKind, Status
from frwatch_dev.dumps import world
from frwatch_dev.dumps.corpus_roots import MEASURED, MIXED, as_recorded

MEMBERS = [0, 1, 2, 3]


def test_an_undefined_placeholder_holds_no_element_and_a_scalar_holds_one() -> None:
    assert elements([[]], ["Undefined"]) == 0  # NCCL's non-root gather output
    assert elements([], []) == 0  # gloo's
    assert elements([[]], ["Float"]) == 1  # a real scalar tensor
    assert elements([[4, 2], [8]], ["Float", "Float"]) == 16


def test_the_placeholder_as_torch_2_13_records_it_holds_no_element_and_is_no_tensor() -> None:
    # FlightRecorder<>::record writes an undefined tensor's sizes() ([0]) and c10::toString of its
    # ScalarType::Undefined ("UNKNOWN_SCALAR"): measured with tests/blind/undefined_tensor_probe.cpp
    for shape, dtype in (
        ([], "Undefined"),
        ([0], "UNKNOWN_SCALAR"),
        ([0], "Undefined"),
        ([], "UNKNOWN_SCALAR"),
    ):
        assert placeholder(shape, dtype)
        assert elements([shape], [dtype]) == 0
    assert not placeholder([0], "Float")  # an empty defined tensor is a tensor
    assert not placeholder([4], "UNKNOWN_SCALAR")  # a tensor holding elements is never the placeholder
    one, f = ((8,),), ("Float",)
    for form in ((((0,),), ("UNKNOWN_SCALAR",)), (((0,),), ("Undefined",))):
        # the placeholder stays on the list's side: gather's outputs, NCCL scatter's recorded outputs
        assert api_order(Balance.GATHER, one, f, *form) == (one, f, *form)
        assert api_order(Balance.SCATTER, one, f, *form) == (*form, one, f)


def test_a_rotating_nccl_gather_and_scatter_are_healthy_in_every_form_of_the_placeholder() -> None:
    w = world(4)
    for step in range(4):
        w = w.gather(root=step).scatter(root=step).all_reduce()
    for form in (MEASURED, MIXED):
        dumps = {r: as_recorded(d, form) for r, d in w.dumps().items()}
        e = next(e for e in dumps[1]["entries"] if e["profiling_name"] == "nccl:gather")
        assert (e["output_sizes"], e["output_dtypes"]) == ([form[0]], [form[1]])
        v = analyze_dumps(dumps)
        assert v.status == Status.healthy and v.category == Category.healthy, v.headline
    # and a second root at one seq is still that rank's desync, not a dtype mismatch of the non-roots
    bad = w.rank(1).root_at(10, 1)  # the 4th gather (seq 10): roots 0, 1, 2 before give rank 3; rank 1 too
    v = analyze_dumps({r: as_recorded(d, MEASURED) for r, d in bad.dumps().items()})
    assert v.category == Category.desync and v.culprit_ranks == [1], v.headline
    assert v.earliest_branch is not None and v.earliest_branch.seq == 10


def test_nccl_non_root_members_record_the_placeholder_and_a_healthy_gather_is_healthy() -> None:
    dumps = world(4).repeat(4, lambda x: x.gather(root=0).scatter(root=0)).dumps()
    e = next(e for e in dumps[1]["entries"] if e["profiling_name"] == "nccl:gather")
    assert (e["output_sizes"], e["output_dtypes"]) == ([[]], ["Undefined"])
    e = next(e for e in dumps[2]["entries"] if e["profiling_name"] == "nccl:scatter")
    # ProcessGroupNCCL::scatter calls collective(outputs, inputs): the placeholder is recorded as output
    assert (e["input_sizes"], e["output_sizes"], e["output_dtypes"]) == ([[524288]], [[]], ["Undefined"])
    v = analyze_dumps(dumps)
    assert v.status == Status.healthy, v.headline


def test_gather_and_scatter_sides_are_read_as_the_api_has_them_whatever_the_backend_s_order() -> None:
    one, four, f = ((8,),), ((8,),) * 4, ("Float",)
    nothing, undefined = ((), ()), (((),), ("Undefined",))
    # NCCL's scatter record: the received tensor as input, the root's list (or the placeholder) as output
    assert api_order(Balance.SCATTER, one, f, four, f * 4) == (four, f * 4, one, f)
    assert api_order(Balance.SCATTER, one, f, *undefined) == (*undefined, one, f)
    # gloo's: the API's order (the root's list stacked as one tensor of N times the elements)
    assert api_order(Balance.SCATTER, ((4, 8),), f, one, f) == (((4, 8),), f, one, f)
    assert api_order(Balance.SCATTER, *nothing, one, f) == (*nothing, one, f)
    # gather: NCCL and gloo both record the API's order
    assert api_order(Balance.GATHER, one, f, *undefined) == (one, f, *undefined)
    assert api_order(Balance.GATHER, one, f, four, f * 4) == (one, f, four, f * 4)


def test_the_root_the_history_expects() -> None:
    assert predict_root([1, 1, 1], MEMBERS)[0] == 1
    assert predict_root([0, 1, 2, 3], MEMBERS)[0] == 0  # a rotation wraps
    assert predict_root([3, 1, 3], MEMBERS)[0] == 1  # a rotation by two
    assert predict_root([0, 2, 0, 2], MEMBERS)[0] == 0
    assert predict_root([0, 0, 1, 1, 0, 0, 1, 1], MEMBERS)[0] == 0  # a pattern of period 4, seen twice
    assert predict_root([0, 1], MEMBERS) == (None, "")  # two calls are no rotation yet
    assert predict_root([0, 3, 1, 1, 2], MEMBERS) == (None, "")
    assert predict_root([], MEMBERS) == (None, "")


def test_two_roots_name_the_one_off_the_rotation_and_show_each_ones_root() -> None:
    counts = {0: (2, 8), 1: (2, 0), 2: (2, 8), 3: (2, 0)}  # ranks 0 and 2 each gather 4 x 2 elements
    found = check_balance(Balance.GATHER, MEMBERS, counts, roots_before=[1, 2, 3])
    assert found is not None and found.root
    assert found.ranks == [2]
    assert "rank 0's root is rank 0; rank 2's root is rank 2" in found.text
    assert "it is rank 0, next in the rotation" in found.text
    undecided = check_balance(Balance.GATHER, MEMBERS, counts, roots_before=[])
    assert undecided is not None and undecided.ranks == [] and "no rank is named" in undecided.text


def test_no_member_acting_as_root_names_the_root_the_history_expects() -> None:
    counts = {r: (0, 2) for r in MEMBERS}  # a scatter nobody scatters from
    found = check_balance(Balance.SCATTER, MEMBERS, counts, roots_before=[3, 3])
    assert found is not None and found.ranks == [3] and "acts as a non-root" in found.text


def test_all_to_all_single_totals_name_a_rank_only_when_the_split_is_even() -> None:
    even = {0: (8, 8), 1: (8, 8), 2: (10, 8), 3: (8, 8)}
    found = check_balance(Balance.ALL_TO_ALL, MEMBERS, even, even_before=True)
    assert found is not None and found.ranks == [2]
    assert "rank 2 sends 10 elements in all where its peers' output splits expect 8 from it" in found.text
    uneven = check_balance(Balance.ALL_TO_ALL, MEMBERS, even, even_before=False)
    assert uneven is not None and uneven.ranks == [] and "uneven splits" in uneven.text
    moe = {0: (7, 9), 1: (11, 6), 2: (5, 8), 3: (9, 12)}  # sends 32, expects 35
    found = check_balance(Balance.ALL_TO_ALL, MEMBERS, moe)
    assert found is not None and found.ranks == [] and "not in the dumps" in found.text
    two = check_balance(Balance.ALL_TO_ALL, [0, 1], {0: (8, 8), 1: (10, 8)}, even_before=True)
    assert two is not None and two.ranks == [] and "with two members" in two.text


def test_a_single_wrong_pair_names_the_sender_when_the_split_is_even() -> None:
    base = ((2, 2, 2, 2), (2, 2, 2, 2))
    splits = {r: base for r in MEMBERS} | {2: ((3, 2, 2, 2), (2, 2, 2, 2))}  # rank 2 sends rank 0 one more
    counts = {r: (8, 8) for r in MEMBERS} | {2: (9, 8)}
    found = check_balance(Balance.ALL_TO_ALL, MEMBERS, counts, splits, even_before=True)
    assert found is not None and found.ranks == [2]
    assert "as every member did at every earlier exchange of this call" in found.text  # its own history too
    # no history: the sender is still the one rank whose sends disagree with what its peers expect
    alone = check_balance(Balance.ALL_TO_ALL, MEMBERS, counts, splits, even_before=None)
    assert alone is not None and alone.ranks == [2]
    assert (
        "rank 2's input splits sum to 9 elements where its peers' output splits expect 8 from it"
        in alone.text
    )


def test_the_totals_of_an_even_history_name_the_receiver_whose_splits_depart_from_it() -> None:
    base = ((2, 2, 2, 2), (2, 2, 2, 2))
    splits = {r: base for r in MEMBERS} | {0: ((2, 2, 2, 2), (2, 2, 3, 2))}  # rank 0 expects one more from 2
    counts = {r: (8, 8) for r in MEMBERS} | {0: (8, 9)}
    found = check_balance(Balance.ALL_TO_ALL, MEMBERS, counts, splits, even_before=True)
    assert found is not None and found.ranks == [0] and "rank 0 expects 9 elements in all" in found.text
    uneven = check_balance(Balance.ALL_TO_ALL, MEMBERS, counts, splits, even_before=False)
    assert uneven is not None and uneven.ranks == [2]  # no even history: the sender, by the convention


def _uneven(rows: list[list[int]]) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    """Per-peer lists from a table ``rows[i][j]`` (what i sends j, what j expects from i)."""
    return {i: (tuple(rows[i]), tuple(rows[j][i] for j in MEMBERS)) for i in MEMBERS}


def _totals(splits: dict[int, tuple[tuple[int, ...], tuple[int, ...]]]) -> dict[int, tuple[int, int]]:
    return {r: (sum(i), sum(o)) for r, (i, o) in splits.items()}


ROWS = [[3, 2, 1, 4], [2, 6, 0, 3], [5, 6, 2, 4], [1, 1, 4, 4]]  # uneven: what rank i sends rank j


def test_one_sender_whose_rows_disagree_with_its_peers_is_named_in_an_uneven_exchange() -> None:
    splits = _uneven(ROWS)
    splits[2] = ((5, 7, 2, 4), splits[2][1])  # rank 2 sends rank 1 seven rows; rank 1 expects six
    found = check_balance(Balance.ALL_TO_ALL, MEMBERS, _totals(splits), splits, even_before=False)
    assert found is not None and found.ranks == [2]
    assert "rank 2 sends 7 to rank 1, which expects 6" in found.text
    assert "rank 2's input splits sum to 18 elements where its peers' output splits expect 17" in found.text
    # the same rows sent to the wrong peers: the total is right, the pairs are not
    splits = _uneven(ROWS)
    splits[2] = ((4, 5, 6, 2), splits[2][1])
    found = check_balance(Balance.ALL_TO_ALL, MEMBERS, _totals(splits), splits, even_before=False)
    assert found is not None and found.ranks == [2] and "but not peer by peer" in found.text


def test_a_receiver_whose_splits_misjudge_several_peers_is_named() -> None:
    splits = _uneven(ROWS)
    splits[1] = (splits[1][0], (3, 6, 5, 1))  # rank 1 expects 3 from 0 (2 sent) and 5 from 2 (6 sent)
    found = check_balance(Balance.ALL_TO_ALL, MEMBERS, _totals(splits), splits, even_before=False)
    assert found is not None and found.ranks == [1]
    assert "rank 1 is in every pair that disagrees" in found.text


def test_symmetric_or_scattered_pairs_name_nobody_and_say_why() -> None:
    splits = _uneven(ROWS)
    splits[0] = ((3, 3, 1, 4), splits[0][1])  # rank 0 sends rank 1 one more than it expects ...
    splits[1] = ((3, 6, 0, 3), splits[1][1])  # ... and rank 1 sends rank 0 one more: either list fits
    found = check_balance(Balance.ALL_TO_ALL, MEMBERS, _totals(splits), splits, even_before=False)
    assert found is not None and found.ranks == []
    assert "which of ranks 0 and 1 is wrong is not in the dumps" in found.text
    splits = _uneven(ROWS)
    splits[0] = ((3, 3, 1, 4), splits[0][1])  # rank 0 -> 1 and rank 2 -> 3: two rows, nobody in both pairs
    splits[2] = ((5, 6, 2, 5), splits[2][1])
    found = check_balance(Balance.ALL_TO_ALL, MEMBERS, _totals(splits), splits, even_before=False)
    assert found is not None and found.ranks == []
    assert (
        "ranks 0, 2 each send a peer what it does not expect and no one rank is in every such" in found.text
    )


def test_the_one_line_verdict_names_the_op_the_culprit_issued() -> None:
    v = analyze_dumps(world(4).all_reduce(steps=6).rank(2).op_at(4, "broadcast").dumps())
    assert v.category == Category.desync and v.culprit_ranks == [2]
    assert "rank 2 issued broadcast where the others issued all_reduce" in v.short, v.short
    assert "collective #4 of pg 0" in v.short


def test_a_same_numel_reshape_is_worded_as_a_shape_mismatch() -> None:
    w = world(4).all_reduce(steps=6, tensors=[[1024]]).rank(1).sizes_at(3, [[32, 32]], hangs=False)
    v = analyze_dumps(w.dumps())
    assert v.category == Category.size_mismatch and v.culprit_ranks == [1]
    assert v.headline.startswith("shape mismatch"), v.headline
    assert v.short.startswith("shape mismatch: rank 1"), v.short


def test_a_crashed_rank_s_next_steps_do_not_deny_what_its_log_says() -> None:
    v = analyze_dumps(world(4).all_reduce(steps=6).rank(2).stops_at(5).without_dump(2).dumps())
    assert v.culprit_kind == CulpritKind.crashed
    assert not any("cannot see why" in s for s in v.next_steps), v.next_steps


def test_a_second_root_is_a_desync_at_that_call_with_next_steps_about_the_root() -> None:
    w = world(4)
    for step in range(6):
        w = w.gather(root=step % 4).all_reduce()
    v = analyze_dumps(w.rank(3).root_at(9, 3).dumps())  # the rotation gives rank 0 at seq 9
    assert (v.category, v.culprit_ranks) == (Category.desync, [3])
    assert v.earliest_branch is not None and v.earliest_branch.seq == 9
    assert "the dst each rank passes to gather" in v.next_steps[0], v.next_steps
    assert "rank 3 acted as root" in v.next_steps[0]


def test_a_wrong_uneven_split_that_left_one_rank_waiting_says_so_and_still_names_no_rank() -> None:
    """NCCL: the exchange completed on three members and stayed open on rank 1. Rank 1 is short of what a
    peer sent, but its own stale split and the peer's fit alike: the states place the fault, no closer."""

    def routing(step: int) -> list[list[int]]:
        return [[(5 * i + 3 * j + step) % 13 + 1 for j in range(4)] for i in range(4)]

    w = world(4).repeat(6, lambda x: x.all_to_all_single(splits=routing).all_reduce())
    rows = routing(6)
    recv = sum(rows[j][1] for j in range(4)) + 3  # rank 1 expects 3 rows more than it is sent
    w = (
        w.rank(1)
        .sizes_at(7, [(sum(rows[1]), 1024)], [(recv, 1024)], hangs=False)
        .stalls_at(7, completed_on=[0, 2, 3])
    )
    v = analyze_dumps(w.dumps())
    assert (v.category, v.culprit_ranks) == (Category.size_mismatch, []), v.headline
    assert "rank 1 did not complete it while the others did" in v.headline, v.headline
    assert "not in the dumps" in v.headline
