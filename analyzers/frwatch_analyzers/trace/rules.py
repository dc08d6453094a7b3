"""One rule per collective type: what must agree across the members of a group at one sequence number for
the call to be compatible, and what may differ by design.

Learnt from torch's own matcher (``torch/distributed/flight_recorder/components/types.py``, ``Op.match``;
``utils.py``, ``check_size_alltoall``; ``test/distributed/flight_recorder/test_fr_analysis.py``), from
c10d's recording (ProcessGroupNCCL.cpp, ProcessGroupGloo.cpp) and from real gloo runs here (what each
backend records is in ``testing/kinds.py``). frwatch is stricter than torch only where the collective
itself would fail or corrupt data: the all_to_all balance (what rank i sends to j is what j expects from
i, where the dumps record it; otherwise the sums over the group), the root of gather and scatter, the
sums of uneven all_gather and reduce_scatter. Who broke a balance is decided here too: the root a call's
history expects (:func:`predict_root`), the one sender whose all_to_all rows disagree with what its peers
expect (:func:`_pairs_named`), the one member whose totals stand apart from an even split; where the
records cannot say, the text says why and no rank is named. Backends record gather and
scatter in different orders and with placeholders; :func:`api_order` and :func:`elements` read them alike.

The summary of an entry (its *signature*) keeps only the fields that must agree, so ranks that differ
by design still cluster together and cost nothing; the fields that may differ travel as per-rank element
counts (``VarRecord``) and are checked across the group by :func:`check_balance`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class Balance(Enum):
    """A cross-member check on the per-rank element counts of a call whose sizes differ by design."""

    NONE = "none"
    ALL_TO_ALL = "all_to_all"  # sum of inputs == sum of outputs; per pair where lists are recorded
    GATHER = "gather"  # exactly one root records outputs: N x the input
    SCATTER = "scatter"  # exactly one root records inputs: N x the output
    GATHER_V = "gather_v"  # outputs agree; the inputs of the members sum to the output
    SCATTER_V = "scatter_v"  # inputs agree; the outputs of the members sum to the input


@dataclass(frozen=True)
class Rule:
    """What the members' entries must share at one sequence number."""

    name: str
    agree: str  # the written rule: what must agree
    may_differ: str  # what may differ by design
    inputs: bool = True  # input sizes must agree
    outputs: bool = True  # output sizes must agree
    input_dtypes: bool = True
    output_dtypes: bool = True
    input_count: bool = True  # the number of input tensors must agree
    output_count: bool = True
    balance: Balance = Balance.NONE
    syntax: str = ""  # a rank-local relation of its own sizes: "same", "gather", "scatter", "numel"

    @property
    def varying(self) -> bool:
        """Sizes may differ by rank: they are not in the signature, per-rank counts travel instead."""
        return not (self.inputs and self.outputs)


_ELEMENTWISE = Rule(
    "elementwise",
    agree="the op, the number of tensors, every tensor's sizes and dtype; inputs and outputs are the same",
    may_differ="nothing",
    syntax="same",
)
_ROOTED_INPLACE = Rule(
    "rooted in place",
    agree="the op, the number of tensors, every tensor's sizes and dtype",
    may_differ="the root, which FR 2.10 does not record (a disagreement on the root cannot be seen)",
    syntax="numel",
)
_ALL_GATHER = Rule(
    "all_gather",
    agree="the op, the input and output sizes and dtypes; the output holds N times the input (N members)",
    may_differ="nothing (gloo stacks the output as [N, *shape], NCCL records it flat: both hold N x input)",
    syntax="gather",
)
_REDUCE_SCATTER = Rule(
    "reduce_scatter",
    agree="the op, the input and output sizes and dtypes; the input holds N times the output",
    may_differ="nothing",
    syntax="scatter",
)
_ALL_TO_ALL = Rule(
    "all_to_all",
    agree="the op, the dtypes, the number of tensors (one per peer, or one each side for all_to_all_single)",
    may_differ="every size: splits are uneven by design (MoE, recommendation); what rank i sends to j must be "
    "what j expects from i where the lists are recorded, and over the group the inputs sum to the outputs",
    inputs=False,
    outputs=False,
    balance=Balance.ALL_TO_ALL,
)
_GATHER = Rule(
    "gather",
    agree="the op, the input sizes and dtypes",
    may_differ="the outputs: the root records the gathered list (N x the input), the others nothing; "
    "exactly one member is the root",
    outputs=False,
    output_dtypes=False,
    output_count=False,
    balance=Balance.GATHER,
)
_SCATTER = Rule(
    "scatter",
    agree="the op, the output sizes and dtypes",
    may_differ="the inputs: the root records the list to scatter (N x the output), the others nothing; "
    "exactly one member is the root",
    inputs=False,
    input_dtypes=False,
    input_count=False,
    balance=Balance.SCATTER,
)
_ALL_GATHER_V = Rule(
    "all_gather_v",
    agree="the op, the dtypes, the output sizes",
    may_differ="the input sizes (uneven by design); the members' inputs sum to the output",
    inputs=False,
    balance=Balance.GATHER_V,
)
_REDUCE_SCATTER_V = Rule(
    "reduce_scatter_v",
    agree="the op, the dtypes, the input sizes",
    may_differ="the output sizes (uneven by design); the members' outputs sum to the input",
    outputs=False,
    balance=Balance.SCATTER_V,
)
_BARRIER = Rule("barrier", agree="the op", may_differ="nothing is moved", syntax="")
_REGION_END = Rule(
    "coalesced region",
    agree="the end's name, and the number, order and compatibility of the ops inside the region (each by its "
    "own rule); the end entry carries the region's state",
    may_differ="what each op inside may differ by its own rule",
)
_P2P = Rule(
    "send/recv",
    agree="the k-th send a->b and the k-th recv at b from a: sizes and dtypes (batched p2p: each pair, in any "
    "order inside the batch, then the batch's coalesced end)",
    may_differ="the p2p_seq_id (each rank numbers its own p2p ops)",
)
_UNKNOWN = Rule("other", agree="everything recorded", may_differ="nothing (an op frwatch has no rule for)")

#: Op name (the profiling name without its backend prefix) -> its rule.
RULES: dict[str, Rule] = {
    "all_reduce": _ELEMENTWISE,
    "allreduce_coalesced": _ELEMENTWISE,
    "broadcast": _ROOTED_INPLACE,
    "_broadcast_oop": _ROOTED_INPLACE,
    "reduce": _ROOTED_INPLACE,
    "_reduce_oop": _ROOTED_INPLACE,
    "all_gather": _ALL_GATHER,
    "_allgather_base": _ALL_GATHER,
    "_all_gather_base": _ALL_GATHER,
    "all_gather_single": _ALL_GATHER,
    "all_gather_into_tensor_coalesced": _ALL_GATHER,
    "reduce_scatter": _REDUCE_SCATTER,
    "_reduce_scatter_base": _REDUCE_SCATTER,
    "reduce_scatter_single": _REDUCE_SCATTER,
    "reduce_scatter_tensor_coalesced": _REDUCE_SCATTER,
    "all_gather_v": _ALL_GATHER_V,
    "reduce_scatter_v": _REDUCE_SCATTER_V,
    "all_to_all": _ALL_TO_ALL,
    "all_to_all_single": _ALL_TO_ALL,
    "all_to_all_v_single": _ALL_TO_ALL,
    "gather": _GATHER,
    "scatter": _SCATTER,
    "barrier": _BARRIER,
    "all_reduce_barrier": _BARRIER,
    "coalesced": _REGION_END,
    "ALLGATHER_coalesced": _REGION_END,
    "REDUCE_SCATTER_coalesced": _REGION_END,
    "send": _P2P,
    "recv": _P2P,
}


def op_name(profiling_name: str) -> str:
    """``'nccl:send 1->2'`` -> ``'send'``; ``'gloo:all_reduce'`` -> ``'all_reduce'``; any backend prefix."""
    return profiling_name.rsplit(":", 1)[-1].strip().split(" ", 1)[0]


def rule_for(profiling_name: str) -> Rule:
    return RULES.get(op_name(profiling_name), _UNKNOWN)


def numel(sizes: Sequence[Sequence[int]]) -> int:
    """Elements in a list of shapes (0 for an empty list)."""
    total = 0
    for shape in sizes:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


#: The dtype c10 names an undefined tensor (``at::Tensor()``) in torch's own test data and the issue's text.
UNDEFINED = "Undefined"
#: Every name an undefined tensor's dtype is recorded under. An undefined tensor's ``dtype()`` is
#: ``ScalarType::Undefined`` (``UndefinedTensorImpl`` is built with a default ``caffe2::TypeMeta()``), and the
#: recorder writes it with ``c10::toString(ScalarType)``, whose switch names only the defined scalar types and
#: answers ``"UNKNOWN_SCALAR"`` for any other: torch 2.13 records ``UNKNOWN_SCALAR`` (measured,
#: ``tests/blind/undefined_tensor_probe.cpp``). No defined tensor is recorded under either name.
UNDEFINED_DTYPES = frozenset({UNDEFINED, "UNKNOWN_SCALAR"})


def placeholder(shape: Sequence[int], dtype: str) -> bool:
    """Is this recorded tensor the undefined placeholder NCCL's non-root gather/scatter member passes?

    Its dtype is an undefined one (:data:`UNDEFINED_DTYPES`) and it holds no element. The sizes come in two
    forms: ``[]`` (torch's ``test_fr_analysis.py``, the issue's text) and ``[0]``, what torch 2.13 really
    records: ``UndefinedTensorImpl`` does not make ``sizes()`` throw ("empirically it does not!", its
    constructor says) and answers the default ``SizesAndStrides``, one dimension of size 0 (measured with
    the probe above). A tensor holding elements is never taken for the placeholder, whatever its dtype."""
    return dtype in UNDEFINED_DTYPES and (not shape or 0 in shape)


def elements(sizes: Sequence[Sequence[int]], dtypes: Sequence[str]) -> int:
    """Elements a rank passes in a list of tensors, an undefined tensor holding none.

    NCCL's non-root members of ``gather`` (outputs) and ``scatter`` (inputs) hand the recorder one
    undefined placeholder tensor: ``ProcessGroupNCCL::gather`` does ``outputs.emplace_back()`` "to fit the
    collective interface", and the recorder (``FlightRecorder<>::record``) writes its ``sizes()`` and
    ``dtype`` unguarded: ``[0]`` and ``UNKNOWN_SCALAR`` on torch 2.13, ``[]`` and ``Undefined`` in torch's
    tests (:func:`placeholder`). Read as a shape, ``[]`` is a scalar of one element; it is no tensor at all,
    so such a member records nothing on the root's side, as gloo's ``[]`` says. torch's own matcher
    (``types.py``, ``Op.match``) ignores gather outputs and scatter inputs likewise."""
    if len(dtypes) != len(sizes) or not any(d in UNDEFINED_DTYPES for d in dtypes):
        return numel(sizes)
    return numel([s for s, d in zip(sizes, dtypes, strict=True) if not placeholder(s, d)])


def syntax_problem(rule: Rule, n: int, ins: Sequence[Sequence[int]], outs: Sequence[Sequence[int]]) -> str:
    """A rank's own sizes that cannot be right for a group of ``n`` members ("" when they can)."""
    if n < 1 or not rule.syntax or not ins or not outs:
        return ""
    nin, nout = numel(ins), numel(outs)
    if rule.syntax == "same" and [tuple(s) for s in ins] != [tuple(s) for s in outs]:
        return f"its input sizes {list(map(list, ins))} differ from its output sizes {list(map(list, outs))}"
    if rule.syntax == "numel" and nin != nout:
        return f"its input holds {nin} elements and its output {nout}"
    if rule.syntax == "gather" and nout != n * nin:
        return f"its output holds {nout} elements, not {n} x its input of {nin}"
    if rule.syntax == "scatter" and nin != n * nout:
        return f"its input holds {nin} elements, not {n} x its output of {nout}"
    return ""


Sides = tuple[tuple[tuple[int, ...], ...], tuple[str, ...], tuple[tuple[int, ...], ...], tuple[str, ...]]


def api_order(
    balance: Balance,
    isz: tuple[tuple[int, ...], ...],
    idt: tuple[str, ...],
    osz: tuple[tuple[int, ...], ...],
    odt: tuple[str, ...],
) -> Sides:
    """A gather or scatter entry with its sides as the API has them: a gather's list (the root's, or nothing)
    on the outputs, a scatter's on the inputs; the one tensor every member sends or receives on the other.

    Backends record them in different orders. gloo records the API's order. NCCL's ``scatter`` hands
    ``collective()`` its output first (``ProcessGroupNCCL::scatter``: ``collective(outputs, inputs, ...)``,
    "just to fit the collective interface"; pytorch#66745 calls the two swapped), so its record holds the
    received tensor as input and the root's list (or the undefined placeholder) as output. The side that
    is the list is read from the content: the one that is empty or undefined on a non-root member, the
    one holding N tensors (or N times the elements) on the root."""
    gather = balance is Balance.GATHER
    list_s, list_d, one_s, one_d = (osz, odt, isz, idt) if gather else (isz, idt, osz, odt)
    swap = False
    if _nothing(one_s, one_d) != _nothing(list_s, list_d):
        swap = _nothing(one_s, one_d)
    elif not _nothing(one_s, one_d):
        swap = len(one_s) > len(list_s) if len(one_s) != len(list_s) else numel(one_s) > numel(list_s)
    if not swap:
        return isz, idt, osz, odt
    return osz, odt, isz, idt


def _nothing(sizes: Sequence[Sequence[int]], dtypes: Sequence[str]) -> bool:
    """No tensor (gloo's ``[]``) or only undefined placeholders in any of their recorded forms (NCCL's
    ``[[0]]``/``UNKNOWN_SCALAR`` on torch 2.13, ``[[]]``/``Undefined`` in torch's tests, see
    :func:`placeholder`). Read as tensors, ``[[0]]`` would be a list of one empty tensor, fewer elements than
    the one tensor each member sends: the sides would be swapped and the placeholder's dtype compared with
    the others' as if it were the tensor sent, a dtype mismatch on every healthy NCCL gather."""
    return not sizes or (
        len(dtypes) == len(sizes) and all(placeholder(s, d) for s, d in zip(sizes, dtypes, strict=True))
    )


@dataclass(frozen=True)
class Imbalance:
    """A balance rule broken at one sequence number: who, and the figures that prove it."""

    ranks: list[int]  # the members whose record breaks it ([] when the records cannot say who)
    text: str
    root: bool = False  # the members disagree on the root: another call, not other sizes (a desync)


def check_balance(
    balance: Balance,
    members: Sequence[int],
    counts: dict[int, tuple[int, int]],
    splits: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] | None = None,
    *,
    roots_before: Sequence[int] = (),
    even_before: bool | None = None,
) -> Imbalance | None:
    """Check one call across the group. ``counts``: member -> (input elements, output elements), for every
    member (the caller checks only seqs that every member holds); ``splits``: member -> per-peer input and
    output elements, when every member recorded one tensor per peer. The group's history of the same call:
    ``roots_before``, the root of each earlier gather/scatter from this call (oldest first);
    ``even_before``, whether every earlier exchange of this all_to_all was even (every member sent and
    received the same total; None: no earlier one held by every member)."""
    if balance is Balance.ALL_TO_ALL:
        return _all_to_all(members, counts, splits, even_before)
    if balance in (Balance.GATHER, Balance.SCATTER):
        return _rooted(balance, members, counts, roots_before)
    if balance in (Balance.GATHER_V, Balance.SCATTER_V):
        varying, fixed = (0, 1) if balance is Balance.GATHER_V else (1, 0)
        total = sum(c[varying] for c in counts.values())
        whole = {c[fixed] for c in counts.values()}
        if len(whole) == 1 and total != next(iter(whole)):
            return Imbalance(
                [], f"the members' parts sum to {total} elements, the whole holds {next(iter(whole))}"
            )
    return None


# --- all_to_all: what i sends to j is what j expects from i ---------------------------------------------------
def _all_to_all(
    members: Sequence[int],
    counts: dict[int, tuple[int, int]],
    splits: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] | None,
    even_before: bool | None,
) -> Imbalance | None:
    """Per pair where every member recorded one tensor per peer (:func:`_pairs_named`); with totals only
    (``all_to_all_single`` records one tensor a side), a rank can be named only when the call splits evenly:
    every other member then sends and receives the same total T, so each of them expects T/N from every
    member, and the one rank whose input total is not T sends what its peers' output splits do not expect
    (or its output total is not T: it expects what they do not send)."""
    n = len(members)
    if (
        splits is not None
        and len(splits) == n
        and all(len(i) == n == len(o) for i, o in splits.values())
        and not _pairs_agree(members, splits)
    ):
        found = _pairs_named(members, counts, splits, even_before)
        if found is not None:
            return found
    sent = sum(i for i, _ in counts.values())
    got = sum(o for _, o in counts.values())
    if sent == got:
        return None
    odd = _odd_totals(members, counts) if even_before is not False else None
    figures = f"the members send {sent} elements in all and expect {got}"
    if odd is not None:
        return Imbalance([odd[0]], f"{figures}: {_odd_text(odd, counts, bool(even_before))}")
    if even_before is False:
        why = "the totals differ by rank by design (uneven splits, as in earlier exchanges of this call)"
    elif n < 3:
        why = "with two members neither rank's totals stand apart from the other's"
    else:
        why = "no single member's totals stand apart from the others'"
    each = (
        " (sent/expected: " + ", ".join(f"rank {r} {counts[r][0]}/{counts[r][1]}" for r in members) + ")"
        if n <= 8
        else ""
    )
    return Imbalance(
        [],
        f"{figures}{each}; all_to_all_single records one total a rank, not its per-peer splits, and {why}: a "
        "wrong split on any member fits these figures, so which rank's split is wrong is not in the dumps",
    )


def _pairs_agree(members: Sequence[int], splits: dict[int, tuple[tuple[int, ...], tuple[int, ...]]]) -> bool:
    """Does every rank send each peer what that peer expects from it? (Transposed and compared in C: a large
    group's healthy exchanges cost no Python loop over its N x N pairs.)"""
    # expected_from[i]: what each member j expects from member i
    expected_from = list(zip(*(splits[j][1] for j in members), strict=True))
    return all(splits[i][0] == expected_from[k] for k, i in enumerate(members))


def _pairs_named(
    members: Sequence[int],
    counts: dict[int, tuple[int, int]],
    splits: dict[int, tuple[tuple[int, ...], tuple[int, ...]]],
    even_before: bool | None,
) -> Imbalance | None:
    """The pairs whose two records disagree (what i sends j is not what j expects from i), and who is wrong.

    A rank's row is what it sends each peer (its input splits); its peers' output splits say what they
    expect from it. When exactly one rank's row disagrees with its peers' expectations, that sender is
    named: its input total (or, when the total is right, its rows peer by peer) is not what its peers' output
    splits expect from it, and every other rank sends what is expected. One wrong pair has two records, the
    sender's and the receiver's; the issue's convention (principle 7) reads the sender's input as the split
    that is wrong. The totals override the convention only when they say more: in a call that split evenly
    at every earlier exchange (``even_before``), the one member whose totals stand apart departs from its
    own earlier calls and is named, sender or receiver. When several rows disagree but one rank is in every
    pair that does (one receiver's output splits misjudge several peers), that rank's own lists explain
    them all and it is named. When two ranks each send the other what it does not expect, the records are
    symmetric and the totals cannot break it; with more disagreeing rows than one rank explains, neither do
    they: no rank is named, and the text says why."""
    pos = {r: k for k, r in enumerate(members)}
    pairs: list[tuple[int, int, int, int]] = []  # (sender, receiver, sent, expected)
    for i in members:
        for j in members:
            sent, expected = splits[i][0][pos[j]], splits[j][1][pos[i]]
            if sent != expected:
                pairs.append((i, j, sent, expected))
    if not pairs:
        return None
    said = [f"rank {i} sends {s} to rank {j}, which expects {e}" for i, j, s, e in pairs]
    more = f" (and {len(pairs) - 2} more pairs)" if len(pairs) > 2 else ""
    text = "; ".join(said[:2]) + more
    rows = sorted({p[0] for p in pairs})
    cover = [r for r in members if all(r in p[:2] for p in pairs)]  # ranks on one side of every such pair
    odd = _odd_totals(members, counts) if even_before else None
    if odd is not None and odd[0] in cover:  # the totals say who departs from the even split
        return Imbalance([odd[0]], f"{text}; {_odd_text(odd, counts, True)}")
    if len(rows) == 1:
        return Imbalance([rows[0]], f"{text}; {_row_text(rows[0], members, splits)}")
    if len(cover) == 1:
        r = cover[0]
        got = sum(splits[i][0][pos[r]] for i in members)
        also = (
            f"rank {r}'s output splits expect {counts[r][1]} elements in all where its peers send it {got}; "
            if got != counts[r][1]
            else ""
        )
        return Imbalance(
            [r], f"{text}; {also}rank {r} is in every pair that disagrees: its own splits explain them all"
        )
    if len(cover) == 2:  # each of two ranks sends the other what it does not expect
        a, b = cover
        return Imbalance(
            [],
            f"{text}; the two records of each pair disagree and neither rank's totals stand apart, "
            f"so which of ranks {a} and {b} is wrong is not in the dumps",
        )
    return Imbalance(
        [],
        f"{text}; {_ranks(rows)} each send a peer what it does not expect and no one rank is in every such "
        "pair, so which rank's split is wrong is not in the dumps",
    )


def _row_text(
    i: int, members: Sequence[int], splits: dict[int, tuple[tuple[int, ...], tuple[int, ...]]]
) -> str:
    """Why the one sender whose row disagrees is named: its input total against what its peers expect."""
    k = list(members).index(i)
    sent = sum(splits[i][0])
    expected = sum(splits[j][1][k] for j in members)
    if sent != expected:
        how = (
            f"rank {i}'s input splits sum to {sent} elements where its peers' output splits expect {expected} "
            "from it"
        )
    else:
        how = (
            f"rank {i}'s input splits sum to the {sent} elements its peers expect from it, but not peer by peer "
            "(its rows go to other peers than their splits say)"
        )
    return f"{how}; every other rank sends each peer what that peer expects"


def _odd_totals(members: Sequence[int], counts: dict[int, tuple[int, int]]) -> tuple[int, int] | None:
    """(rank, T) when every member but that one sends and receives the same T elements (n >= 3)."""
    if len(members) < 3:
        return None
    alike: dict[tuple[int, int], list[int]] = {}
    for r in members:
        alike.setdefault(counts[r], []).append(r)
    if len(alike) != 2:
        return None
    (_, lone), (common, _) = sorted(alike.items(), key=lambda kv: len(kv[1]))
    if len(lone) != 1 or common[0] != common[1]:
        return None
    return lone[0], common[0]


def _odd_text(odd: tuple[int, int], counts: dict[int, tuple[int, int]], before: bool) -> str:
    r, t = odd
    i, o = counts[r]
    also = ", as every member did at every earlier exchange of this call" if before else ""
    even = f"every other member sends and receives {t} elements{also} (an even split)"
    if i != t and o == t:
        return f"rank {r} sends {i} elements in all where its peers' output splits expect {t} from it; {even}"
    if o != t and i == t:
        return f"rank {r} expects {o} elements in all where its peers send it {t}; {even}"
    return f"rank {r} sends {i} and expects {o} elements in all; {even}"


# --- gather and scatter: one root --------------------------------------------------------------------------
def _rooted(
    balance: Balance, members: Sequence[int], counts: dict[int, tuple[int, int]], roots_before: Sequence[int]
) -> Imbalance | None:
    """Exactly one member records the root's side (the list gathered or scattered); the root may change from
    call to call (a rotating root is healthy). Non-root members record no root (FR 2.10 keeps no ``root``
    field), so when several members act as root the one that departs is found from the history of this
    call: the root the group used every time, or the next in its rotation or repeating pattern; the other
    roots are the culprits. No member acting as root names the root the history expects. A history that
    predicts no root names no rank."""
    n = len(members)
    side = 1 if balance is Balance.GATHER else 0
    other = 1 - side
    what = "gathered outputs" if balance is Balance.GATHER else "inputs to scatter"
    roots = [r for r in members if counts[r][side] > 0]
    if len(roots) == 1:
        root = roots[0]
        each = {counts[r][other] for r in members}
        if len(each) == 1 and counts[root][side] != n * next(iter(each)):
            return Imbalance(
                [root],
                f"the root (rank {root}) records {counts[root][side]} elements of {what}, not {n} x "
                f"{next(iter(each))}",
            )
        return None
    expected, how = predict_root(roots_before, members)
    if roots:
        acting = "; ".join(f"rank {r}'s root is rank {r}" for r in roots)
        head = f"{_ranks(roots)} each record the {what} (each acts as the root: {acting})"
        if expected in roots:
            wrong = [r for r in roots if r != expected]
            return Imbalance(
                wrong,
                f"{head}; the members disagree on the root: it is rank {expected}, {how}, so "
                f"{_ranks(wrong)} {'departs' if len(wrong) == 1 else 'depart'} from it",
                root=True,
            )
        why = (
            f"rank {expected}, {how}, is not among them"
            if expected is not None
            else _no_prediction(roots_before)
        )
        return Imbalance([], f"{head}; the members disagree on the root, and {why}", root=True)
    if expected is not None:
        return Imbalance(
            [expected],
            f"no member records the {what}: the members disagree on the root; rank {expected} is the root, {how}, "
            "and it acts as a non-root",
            root=True,
        )
    return Imbalance(
        [],
        f"no member records the {what}: the members disagree on the root; {_no_prediction(roots_before)}",
        root=True,
    )


def predict_root(history: Sequence[int], members: Sequence[int]) -> tuple[int | None, str]:
    """The root the group's history of one call expects next, and why ("" when it expects none): the same
    root every time; a rotation (each root a fixed step after the last, over at least three calls); or a
    repeating pattern (the last period seen at least twice)."""
    pos = {r: k for k, r in enumerate(members)}
    idx = [pos[r] for r in history if r in pos]
    n = len(members)
    if not idx:
        return None, ""
    seen = ", ".join(map(str, history[-6:]))
    if len(set(idx)) == 1:
        return history[-1], f"the root of {'every' if len(idx) > 1 else 'the'} earlier call here ({seen})"
    steps = {(b - a) % n for a, b in itertools.pairwise(idx)}
    if len(idx) >= 3 and len(steps) == 1:
        nxt = members[(idx[-1] + steps.pop()) % n]
        return nxt, f"next in the rotation of roots of the earlier calls here ({seen} -> {nxt})"
    for p in range(2, len(idx) // 2 + 1):
        if all(idx[k] == idx[k - p] for k in range(p, len(idx))):
            nxt = members[idx[-p]]
            return nxt, f"next in the repeating pattern of roots of the earlier calls here ({seen} -> {nxt})"
    return None, ""


def _no_prediction(history: Sequence[int]) -> str:
    if not history:
        return "no earlier call here says which root the group uses, so no rank is named"
    return (
        f"the roots of the earlier calls here ({', '.join(map(str, history[-6:]))}) follow no pattern that "
        "says which one is right, so no rank is named"
    )


def _ranks(ranks: Sequence[int]) -> str:
    rs = sorted(ranks)
    return f"rank {rs[0]}" if len(rs) == 1 else "ranks " + ", ".join(map(str, rs))
