"""One rule per collective type: what must agree across the members of a group at one sequence number for
the call to be compatible, and what may differ by design.

Learnt from torch's own matcher (``torch/distributed/flight_recorder/components/types.py``, ``Op.match``;
``utils.py``, ``check_size_alltoall``; ``test/distributed/flight_recorder/test_fr_analysis.py``), from
c10d's recording (ProcessGroupNCCL.cpp, ProcessGroupGloo.cpp) and from real gloo runs here (what each
backend records is in ``testing/kinds.py``). frwatch is stricter than torch only where the collective
itself would fail or corrupt data: the all_to_all balance (what rank i sends to j is what j expects from
i, where the dumps record it; otherwise the sums over the group), the root of gather and scatter, the
sums of uneven all_gather and reduce_scatter.

The summary of an entry (its *signature*) keeps only the fields that must agree, so ranks that differ
by design still cluster together and cost nothing; the fields that may differ travel as per-rank element
counts (``VarRecord``) and are checked across the group by :func:`check_balance`.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class Imbalance:
    """A balance rule broken at one sequence number: who, and the figures that prove it."""

    ranks: list[int]  # the members whose record breaks it ([] when the records cannot say who)
    text: str


def check_balance(
    balance: Balance,
    members: Sequence[int],
    counts: dict[int, tuple[int, int]],
    splits: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] | None = None,
) -> Imbalance | None:
    """Check one call across the group. ``counts``: member -> (input elements, output elements), for every
    member (the caller checks only seqs that every member holds); ``splits``: member -> per-peer input and
    output elements, when every member recorded one tensor per peer."""
    n = len(members)
    if balance is Balance.ALL_TO_ALL:
        if splits is not None and len(splits) == n and all(len(i) == n == len(o) for i, o in splits.values()):
            pos = {r: k for k, r in enumerate(members)}
            wrong: dict[int, int] = {}
            pairs = []
            for i in members:
                for j in members:
                    sent, expected = splits[i][0][pos[j]], splits[j][1][pos[i]]
                    if sent != expected:
                        pairs.append(f"rank {i} sends {sent} to rank {j}, which expects {expected}")
                        wrong[i] = wrong.get(i, 0) + 1
                        wrong[j] = wrong.get(j, 0) + 1
            if pairs:
                top = max(wrong.values())
                culprits = sorted(r for r, c in wrong.items() if c == top)
                if len(culprits) > 2:
                    culprits = []
                more = f" (and {len(pairs) - 2} more pairs)" if len(pairs) > 2 else ""
                return Imbalance(culprits, "; ".join(pairs[:2]) + more)
        sent = sum(i for i, _ in counts.values())
        got = sum(o for _, o in counts.values())
        if sent != got:
            return Imbalance(
                [],
                f"the members send {sent} elements in all and expect {got}; all_to_all_single records no "
                "per-peer splits, so which rank's split is wrong is not in the dumps",
            )
        return None
    if balance in (Balance.GATHER, Balance.SCATTER):
        side = 1 if balance is Balance.GATHER else 0
        other = 1 - side
        roots = [r for r in members if counts[r][side] > 0]
        what = "outputs" if balance is Balance.GATHER else "inputs"
        if len(roots) != 1:
            return Imbalance(
                roots,
                f"{len(roots)} members record the root's {what} ({', '.join(map(str, roots)) or 'none'}): "
                "the members disagree on the root",
            )
        root = roots[0]
        each = {counts[r][other] for r in members}
        if len(each) == 1 and counts[root][side] != n * next(iter(each)):
            return Imbalance(
                [root],
                f"the root (rank {root}) records {counts[root][side]} elements of {what}, not {n} x "
                f"{next(iter(each))}",
            )
        return None
    if balance in (Balance.GATHER_V, Balance.SCATTER_V):
        varying, fixed = (0, 1) if balance is Balance.GATHER_V else (1, 0)
        total = sum(c[varying] for c in counts.values())
        whole = {c[fixed] for c in counts.values()}
        if len(whole) == 1 and total != next(iter(whole)):
            return Imbalance(
                [], f"the members' parts sum to {total} elements, the whole holds {next(iter(whole))}"
            )
    return None
