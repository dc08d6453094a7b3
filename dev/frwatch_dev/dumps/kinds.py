"""What torch's Flight Recorder records for each collective, per backend (FR 2.10, torch 2.13).

Read from c10d (ProcessGroupNCCL.cpp, ProcessGroupGloo.cpp) and checked against real gloo runs here
(4 ranks, torch 2.13.0+cpu):

- gloo records ``all_gather`` (also for ``all_gather_into_tensor``) with the output stacked as one tensor
  ``[[N, *shape]]``; ``gather`` likewise on the root and ``[]`` on the others; ``scatter`` records its
  input list ``[[N, *shape]]`` on the root and ``[]`` elsewhere; ``all_to_all`` (list) one tensor per
  peer, and ``all_to_all_single`` as ``all_to_all`` with one tensor each side (uneven splits give each
  rank other totals); ``barrier`` with no tensors; ``reduce_scatter_tensor`` as an ``all_reduce`` of the
  whole input; ``all_reduce_coalesced`` as one ``all_reduce`` entry holding every tensor. gloo cannot
  run uneven ``all_gather`` nor an uneven ``all_to_all`` list, and records no point-to-point op.
- NCCL records ``_allgather_base``, ``_reduce_scatter_base``, ``allreduce_coalesced``,
  ``all_gather_into_tensor_coalesced`` and ``reduce_scatter_tensor_coalesced`` under those names, the
  barrier as a one-byte ``all_reduce_barrier``, ``all_to_all_single`` as ``all_to_all`` with one tensor;
  an uneven ``all_gather`` as a coalesced region of ``_broadcast_oop`` (one per member, the same sizes on
  every rank) closed by ``ALLGATHER_coalesced``, an uneven ``reduce_scatter`` likewise with ``_reduce_oop``
  and ``REDUCE_SCATTER_coalesced``; ``gather``/``scatter`` keep the list on the root only, and each other
  member records one undefined tensor in its place (sizes ``[]``, dtype ``Undefined``: the placeholder
  ``ProcessGroupNCCL::gather``/``scatter`` pass to ``collective()``). ``scatter`` passes ``collective()``
  its output first, so the record holds the received tensor as input and the list (or the placeholder)
  as output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

Shape = tuple[int, ...]
Shapes = tuple[Shape, ...]
#: ``splits[i][j]``: rows rank i sends to rank j (group-local) in an all_to_all.
Splits = tuple[tuple[int, ...], ...]
SplitsFn = Callable[[int], Sequence[Sequence[int]]]

#: Builder kinds that take the API name and record another one, per backend.
ALIASES = {"all_gather_into_tensor": "_allgather_base", "reduce_scatter_tensor": "_reduce_scatter_base"}

#: Kinds whose recorded sizes differ by rank by design (the analyzer's rules must allow it).
ROOTED = frozenset({"gather", "scatter", "broadcast", "reduce"})
UNEVEN_REGIONS = {
    "all_gather_uneven": ("_broadcast_oop", "ALLGATHER_coalesced"),
    "reduce_scatter_uneven": ("_reduce_oop", "REDUCE_SCATTER_coalesced"),
}

NCCL_ONLY = frozenset(
    {
        "all_gather_uneven",
        "reduce_scatter_uneven",
        "all_gather_into_tensor_coalesced",
        "reduce_scatter_tensor_coalesced",
        "reduce_scatter",
        "coalesced",
    }
)

#: The dtype c10 names an undefined tensor (``at::Tensor()``).
UNDEFINED = "Undefined"

SHARD = 524_288  # elements of an FSDP shard
BUCKET = 6_553_600  # elements of a 25 MB gradient bucket
TOKENS, HIDDEN = 4096, 1024  # all_to_all rows and row width


@dataclass(frozen=True)
class Rec:
    """One Flight Recorder entry's payload: its name (without the backend prefix) and tensors."""

    name: str
    input_sizes: Shapes
    output_sizes: Shapes
    input_dtypes: tuple[str, ...]
    output_dtypes: tuple[str, ...]
    part: bool = False  # an op inside a coalesced region: stays scheduled, never retired


def rec(
    name: str, ins: Sequence[Sequence[int]], outs: Sequence[Sequence[int]], dtype: str, *, part: bool = False
) -> Rec:
    i = tuple(tuple(s) for s in ins)
    o = tuple(tuple(s) for s in outs)
    return Rec(name, i, o, (dtype,) * len(i), (dtype,) * len(o), part)


def default_tensor(kind: str) -> Shape:
    """The tensor a kind moves by default: a gradient bucket, a shard, a barrier's byte."""
    if kind in (
        "all_gather",
        "_allgather_base",
        "all_gather_into_tensor",
        "gather",
        "scatter",
        "reduce_scatter",
        "_reduce_scatter_base",
        "reduce_scatter_tensor",
        "all_gather_into_tensor_coalesced",
        "reduce_scatter_tensor_coalesced",
    ):
        return (SHARD,)
    return (BUCKET,)


def even_splits(n: int) -> Splits:
    return tuple(tuple(TOKENS // n for _ in range(n)) for _ in range(n))


@dataclass(frozen=True)
class Payload:
    """What one rank passes to one collective call (before torch turns it into an entry)."""

    kind: str
    tensors: Shapes  # the tensors of the call (all_reduce_coalesced: several)
    dtype: str
    root: int = 0  # group-local root of rooted kinds
    splits: Splits | None = None  # all_to_all: the whole group's split matrix
    uneven: Shapes | None = None  # uneven all_gather / reduce_scatter: one shape per member
    explicit: tuple[Shapes, Shapes] | None = None  # record exactly these input/output sizes
    parts: tuple[str, ...] = ()  # a coalescing region (``_coalescing_manager``): the kinds inside
    end: str = "coalesced"  # the region's closing entry
    count: int = 0  # a fault: this many tensors (ops, in a region) instead of the program's


def records(p: Payload, *, backend: str, n: int, me: int) -> list[Rec]:
    """The entries rank ``me`` (group-local) of a group of ``n`` records for payload ``p``; the last
    entry carries the state, the others are parts of a coalesced region."""
    out = _records(p, backend=backend, n=n, me=me)
    if not p.count:
        return out
    if len(out) > 1:  # a region: another number of ops inside it
        parts = out[:-1]
        return [*(parts * p.count)[: p.count], out[-1]]
    r = out[0]
    ins, outs = (r.input_sizes * p.count)[: p.count], (r.output_sizes * p.count)[: p.count]
    idt, odt = (r.input_dtypes * p.count)[: p.count], (r.output_dtypes * p.count)[: p.count]
    return [Rec(r.name, ins, outs, idt or (p.dtype,) * len(ins), odt or (p.dtype,) * len(outs))]


def _records(p: Payload, *, backend: str, n: int, me: int) -> list[Rec]:
    kind, dt = ALIASES.get(p.kind, p.kind) if backend == "nccl" else p.kind, p.dtype
    t = list(p.tensors)
    gloo = backend == "gloo"
    if kind == "coalesced" or kind in UNEVEN_REGIONS:
        if kind == "coalesced":
            parts = [rec(k, t, t, dt, part=True) for k in p.parts]
            end = rec(p.end, (), (), dt)
        else:
            part, end_name = UNEVEN_REGIONS[kind]
            shapes = p.uneven or tuple(t[0] for _ in range(n))
            parts = [rec(part, [s], [s], dt, part=True) for s in shapes]
            end = rec(end_name, [], [], dt)
        if p.explicit is not None and parts:  # a fault on a region: its first op has other sizes
            first = parts[0]
            parts[0] = rec(first.name, p.explicit[0], p.explicit[1], dt, part=True)
        return [*parts, end]
    if p.explicit is not None:
        ins, outs = p.explicit
        idt = (dt,) * len(ins)
        odt = _placeholder(kind, outs, dt, gloo)
        return [Rec(_recorded_name(kind, backend), ins, outs, idt, odt)]
    if kind in ("all_reduce", "broadcast", "reduce"):
        return [rec(kind, t, t, dt)]
    if kind == "all_reduce_coalesced":
        return [rec("all_reduce" if gloo else "allreduce_coalesced", t, t, dt)]
    if kind == "barrier":
        return [rec("barrier", [], [], dt)] if gloo else [rec("all_reduce_barrier", [[1]], [[1]], "Byte")]
    if kind in ("all_gather", "_allgather_base", "all_gather_into_tensor"):
        out = [(n, *s) for s in t] if gloo else [(n * _numel(s),) for s in t]
        return [rec("all_gather" if gloo else kind, t, out, dt)]
    if kind == "all_gather_into_tensor_coalesced":
        return [rec(kind, t, [(n * _numel(s),) for s in t], dt)]
    if kind in ("reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor"):
        full = [(n * _numel(s),) for s in t]
        return [rec("all_reduce", full, full, dt)] if gloo else [rec(kind, full, t, dt)]
    if kind == "reduce_scatter_tensor_coalesced":
        return [rec(kind, [(n * _numel(s),) for s in t], t, dt)]
    if kind == "gather":
        root_out = [(n, *s) for s in t] if gloo else [s for s in t for _ in range(n)]
        if me != p.root and not gloo:  # NCCL: one undefined placeholder (see _placeholder)
            return [Rec("gather", tuple(map(tuple, t)), ((),), (dt,) * len(t), (UNDEFINED,))]
        return [rec("gather", t, root_out if me == p.root else [], dt)]
    if kind == "scatter":
        root_in = [(n, *s) for s in t] if gloo else [s for s in t for _ in range(n)]
        if not gloo:  # NCCL: collective(outputs, inputs): the received tensor first, the list as output
            if me != p.root:
                return [Rec("scatter", tuple(map(tuple, t)), ((),), (dt,) * len(t), (UNDEFINED,))]
            return [rec("scatter", t, root_in, dt)]
        return [rec("scatter", root_in if me == p.root else [], t, dt)]
    if kind in ("all_to_all", "all_to_all_single"):
        m = p.splits or even_splits(n)
        row = t[0][1:] if t and len(t[0]) > 1 else (HIDDEN,)
        send = [(m[me][j], *row) for j in range(n)]
        recv = [(m[j][me], *row) for j in range(n)]
        if kind == "all_to_all_single":
            return [
                rec("all_to_all", [(sum(s[0] for s in send), *row)], [(sum(s[0] for s in recv), *row)], dt)
            ]
        return [rec("all_to_all", send, recv, dt)]
    return [rec(kind, t, t, dt)]


def _placeholder(kind: str, sizes: Shapes, dt: str, gloo: bool) -> tuple[str, ...]:
    """The dtypes of output ``sizes``: NCCL's non-root ``gather`` passes the recorder one undefined tensor
    as its outputs (``ProcessGroupNCCL::gather``: ``outputs.emplace_back()``), and so does ``scatter``, whose
    placeholder list it passes ``collective()`` as outputs; the recorder writes it as sizes ``[]`` and dtype
    ``Undefined``. gloo records no tensor there (``[]``)."""
    if kind in ("gather", "scatter") and not gloo and sizes == ((),):
        return (UNDEFINED,)
    return (dt,) * len(sizes)


def _recorded_name(kind: str, backend: str) -> str:
    if backend == "gloo":
        return {
            "_allgather_base": "all_gather",
            "all_gather_into_tensor": "all_gather",
            "all_to_all_single": "all_to_all",
            "all_reduce_coalesced": "all_reduce",
            "reduce_scatter_tensor": "all_reduce",
            "_reduce_scatter_base": "all_reduce",
        }.get(kind, kind)
    return {"all_to_all_single": "all_to_all", "all_reduce_coalesced": "allreduce_coalesced"}.get(kind, kind)


def _numel(shape: Sequence[int]) -> int:
    total = 1
    for d in shape:
        total *= d
    return total
