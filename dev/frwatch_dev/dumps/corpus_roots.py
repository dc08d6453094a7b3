"""Conformance cases for rooted collectives and the all_to_all balance, each built from what torch records.

- A non-root member of NCCL's ``gather`` records one undefined tensor as its outputs, and of ``scatter``
  as its inputs: ``ProcessGroupNCCL::gather``/``::scatter`` (torch/csrc/distributed/c10d/
  ProcessGroupNCCL.cpp) pass ``collective()`` a placeholder made by ``emplace_back()`` "to fit the
  collective interface", and ``FlightRecorder<>::recordWithResetEnabled`` (FlightRecorderDetail.hpp) writes
  its ``sizes()`` and dtype: ``[[]]``, ``Undefined``. ``scatter`` passes ``collective(outputs, inputs, ...)``
  (its sides swapped, pytorch#66745), so the received tensor is recorded as input and the root's list or
  the placeholder as output. gloo records the API's order and ``[]`` for no tensor. torch's matcher
  (torch/distributed/flight_recorder/components/types.py, ``Op.match``) ignores gather outputs and scatter
  inputs, so such a member fully matches the root (test/distributed/flight_recorder/test_fr_analysis.py).
  That ``[[]]``/``Undefined`` form is the one torch's tests write; torch 2.13 itself records ``[[0]]`` and
  ``UNKNOWN_SCALAR``: ``FlightRecorder<>::record`` (torch/csrc/distributed/c10d/FlightRecorderDetail.hpp) reads
  ``sizes()`` and ``dtype().toScalarType()`` unguarded; ``UndefinedTensorImpl`` (c10/core/UndefinedTensorImpl.cpp)
  lets ``sizes()`` answer the default ``SizesAndStrides`` (one dimension of size 0,
  c10/core/impl/SizesAndStrides.h), and ``c10::toString(ScalarType::Undefined)`` (c10/core/ScalarType.h)
  falls to its ``"UNKNOWN_SCALAR"`` default. Measured with ``tests/blind/undefined_tensor_probe.cpp`` built
  against torch 2.13. :func:`as_recorded` rewrites the builder's placeholder into that form.
- FR 2.10 records no root: a rooted call whose root changes from call to call looks, on the non-roots,
  exactly like one whose root never changes; ``broadcast``/``reduce`` record the same tensors on every
  member whatever the root (``ProcessGroupNCCL::broadcast`` passes ``collective(tensor, tensor, ...)``).
  Who acts as root shows only as the member recording the gathered or scattered list.
- ``all_to_all_single`` is recorded with one tensor a side (``ProcessGroupNCCL::alltoall_base``:
  ``collective(inputTensor, outputTensor, ...)``): each member's totals, never its per-peer splits;
  ``all_to_all`` with lists records one tensor per peer (``ProcessGroupNCCL::alltoall``).

The gloo variants were checked against real gloo runs of torch 2.13 (``frwatch_dev.workloads``, scenario
``moe --rotate-root``: healthy; ``gather_root --rotate-root --fault-step 7``: rank 1 gathers to itself
while the rotation gives rank 2, every rank times out in that gather).
"""

from __future__ import annotations

from collections.abc import Callable

from frwatch_analyzers.verdict import Category, CulpritKind, Status

from .corpus import Case, Truth
from .kinds import HIDDEN, TOKENS
from .program import Dump, World, world

SIZE = 4
STEPS = 6
MISMATCH = CulpritKind.mismatched_call


def _files(w: World) -> Callable[[], list[tuple[str, int, Dump]]]:
    return lambda: [(f"nccl_trace_rank_{r}", r, d) for r, d in sorted(w.dumps().items())]


def _rotating(kind: str, backend: str, *, steps: int = STEPS) -> World:
    """``kind`` to root (step - 1) % N each step, then an all_reduce: seqs 1, 3, 5 ... are the rooted call."""
    w = world(SIZE, backend=backend)  # type: ignore[arg-type]
    for step in range(steps):
        w = w.collective(kind, root=step % SIZE).all_reduce()
    return w


def _case(name: str, collective: str, klass: str, w: World, truth: Truth) -> Case:
    return Case(name, collective, klass, _files(w), truth)


#: The forms an NCCL non-root's undefined placeholder is recorded in: (sizes, dtype) of its one tensor.
MEASURED = ([0], "UNKNOWN_SCALAR")  # torch 2.13, measured (see the module docstring)
MIXED = ([0], "Undefined")  # the measured sizes with the dtype torch's tests write


def as_recorded(dump: Dump, form: tuple[list[int], str]) -> Dump:
    """``dump`` with every undefined placeholder (the builder's ``[]``/``Undefined`` tensor) recorded in
    ``form`` instead; every other tensor as it was."""
    sizes, dtype = form
    entries = []
    for e in dump["entries"]:
        e = dict(e)
        for side in ("input", "output"):
            dts = e[f"{side}_dtypes"]
            if len(dts) == 1 and dts[0] == "Undefined" and e[f"{side}_sizes"] == [[]]:
                e[f"{side}_sizes"], e[f"{side}_dtypes"] = [list(sizes)], [dtype]
        entries.append(e)
    return {**dump, "entries": entries}


def _recorded_case(
    name: str, collective: str, klass: str, w: World, truth: Truth, form: tuple[list[int], str]
) -> Case:
    files = _files(w)
    return Case(name, collective, klass, lambda: [(f, r, as_recorded(d, form)) for f, r, d in files()], truth)


def _problem(cat: Category, culprits: tuple[int, ...], seq: int) -> Truth:
    return Truth(Status.problem, cat, culprits, MISMATCH, "0", seq)


def rooted_cases() -> list[Case]:
    healthy = Truth(Status.healthy, Category.healthy)
    out: list[Case] = []
    for kind in ("gather", "scatter", "broadcast", "reduce"):
        for backend in ("nccl", "gloo"):
            out.append(
                _case(
                    f"{kind}/rotating root [{backend}]",
                    kind,
                    "rotating root",
                    _rotating(kind, backend),
                    healthy,
                )
            )
    for backend in ("nccl", "gloo"):
        # step 5 (seq 9): the rotation gives rank 0 (roots 0, 1, 2, 3 before); rank 2 also acts as root
        w = _rotating("gather", backend).rank(2).root_at(9, 2)
        out.append(
            _case(
                f"gather/second root off the rotation [{backend}]",
                "gather",
                "second root",
                w,
                _problem(Category.desync, (2,), 9),
            )
        )
    # as NCCL can leave it: the non-roots' sends completed, both roots wait for a member that never sends
    stalled = _rotating("gather", "nccl").rank(2).root_at(9, 2, hangs=False).stalls_at(9, completed_on=[1, 3])
    out.append(
        _case(
            "gather/second root off the rotation, the non-roots completed [nccl]",
            "gather",
            "second root",
            stalled,
            _problem(Category.desync, (2,), 9),
        )
    )
    # scatter from rank 0 every step; at step 4 (seq 7) rank 2 also scatters, from itself
    fixed = world(SIZE).repeat(STEPS, lambda x: x.scatter(root=0).all_reduce())
    out.append(
        _case(
            "scatter/second root beside the usual one [nccl]",
            "scatter",
            "second root",
            fixed.rank(2).root_at(7, 2),
            _problem(Category.desync, (2,), 7),
        )
    )
    # gather to rank 1 every step; at step 4 rank 1 itself passes root 0: nobody acts as root
    to_one = world(SIZE).repeat(STEPS, lambda x: x.gather(root=1).all_reduce())
    out.append(
        _case(
            "gather/the usual root acts as a non-root [nccl]",
            "gather",
            "no root",
            to_one.rank(1).root_at(7, 0),
            _problem(Category.desync, (1,), 7),
        )
    )
    # two roots with no history to tell which is right (the first gather of the job): nobody is named
    first = world(SIZE).gather(root=0).all_reduce(steps=3).rank(3).root_at(1, 3)
    out.append(
        _case(
            "gather/two roots at the first call [nccl]",
            "gather",
            "second root",
            first,
            Truth(Status.problem, Category.desync, (), None, "0", 1),
        )
    )
    # the same rooted calls with the placeholder as torch 2.13 records it (and with the measured sizes beside
    # the tests' dtype): a matching non-root in every form
    for form, label in ((MEASURED, "[[0]], UNKNOWN_SCALAR"), (MIXED, "[[0]], Undefined")):
        for kind in ("gather", "scatter"):
            out.append(
                _recorded_case(
                    f"{kind}/rotating root, the placeholder recorded as {label} [nccl]",
                    kind,
                    "rotating root",
                    _rotating(kind, "nccl"),
                    healthy,
                    form,
                )
            )
    out.append(
        _recorded_case(
            "gather/second root off the rotation, the placeholder recorded as [[0]], UNKNOWN_SCALAR [nccl]",
            "gather",
            "second root",
            _rotating("gather", "nccl").rank(2).root_at(9, 2),
            _problem(Category.desync, (2,), 9),
            MEASURED,
        )
    )
    return out


def all_to_all_cases() -> list[Case]:
    """An even all_to_all (every member sends N x 1024 rows of 1024, 1024 to each peer) at every step; at
    step 4 (seq 7) rank 2 passes another tensor. Its peers' records say what they expect from it."""
    out: list[Case] = []
    even = world(SIZE).repeat(STEPS, lambda x: x.all_to_all_single().all_reduce())
    total = (TOKENS, HIDDEN)
    bigger = (TOKENS + TOKENS // SIZE, HIDDEN)
    for name, ins, outs in (
        ("sends more than its peers expect", [bigger], [total]),
        ("expects more than its peers send", [total], [bigger]),
    ):
        w = even.rank(2).sizes_at(7, ins, outs)
        out.append(
            _case(
                f"all_to_all_single/even split, rank 2 {name} [nccl]",
                "all_to_all_single",
                "split",
                w,
                _problem(Category.size_mismatch, (2,), 7),
            )
        )
    per_peer = [(TOKENS // SIZE, HIDDEN)] * SIZE
    one_wrong = [(TOKENS // SIZE + 8, HIDDEN), *per_peer[1:]]
    lists = world(SIZE).repeat(STEPS, lambda x: x.all_to_all().all_reduce())
    out.append(
        _case(
            "all_to_all/even split, rank 2 sends 8 rows more to rank 0 [nccl]",
            "all_to_all",
            "split",
            lists.rank(2).sizes_at(7, one_wrong, per_peer),
            _problem(Category.size_mismatch, (2,), 7),
        )
    )
    # uneven token routing (other splits every step); at step 4 rank 2 sends each peer's rows to the next
    # peer: its totals are right, every pair from it is wrong
    routed = world(SIZE).repeat(STEPS, lambda x: x.all_to_all(splits=_routing).all_reduce())
    rows = _routing(6)  # the program index of step 4's all_to_all
    mine = [(rows[2][(j + 1) % SIZE], HIDDEN) for j in range(SIZE)]
    expected = [(rows[j][2], HIDDEN) for j in range(SIZE)]
    out.append(
        _case(
            "all_to_all/uneven split, rank 2 sends its rows to the wrong peers [nccl]",
            "all_to_all",
            "split",
            routed.rank(2).sizes_at(7, mine, expected),
            _problem(Category.size_mismatch, (2,), 7),
        )
    )
    # the same routing; at step 4 rank 2's input split for rank 1 is one row more than rank 1's output split
    # expects from it (every other pair agrees): rank 2's input total disagrees with what its peers expect,
    # the one sender whose rows do (principle 7); no earlier exchange was even, so the totals alone cannot say
    more_rows = [(rows[2][j] + (1 if j == 1 else 0), HIDDEN) for j in range(SIZE)]
    out.append(
        _case(
            "all_to_all/uneven split, rank 2 sends rank 1 a row more than rank 1 expects [nccl]",
            "all_to_all",
            "split",
            routed.rank(2).sizes_at(7, more_rows, expected),
            _problem(Category.size_mismatch, (2,), 7),
        )
    )
    return out


def _routing(step: int) -> list[list[int]]:
    """Rows rank i sends to rank j at program index ``step``: uneven, other every step."""
    return [[(5 * i + 3 * j + step) % 13 + 1 for j in range(SIZE)] for i in range(SIZE)]
