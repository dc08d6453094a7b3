"""Build Flight Recorder dumps of the real schema for tests and benchmarks, without torch.

A dump is what ``torch._C._distributed_c10d._dump_fr_trace()`` returns once unpickled (FR version
``2.10``, torch 2.13; FACTS.md "Dump format"): plain dicts, lists, tuples, str, int, float, bool and None.
The builder describes a training program once and the faults where they land; :meth:`World.dumps`
simulates every rank through the program and returns what each rank's recorder would hold::

    world(8).all_reduce(steps=40).rank(7).stops_at(41)          # rank 7 never enqueues seq 41
    world(8).all_reduce(steps=40).rank(3).op_at(12, "all_gather")
    world(8).group("tp", ranks=[0, 1]).repeat(10, lambda w: w.all_reduce(group="tp").all_gather())
    world(4).all_reduce(steps=5).rank(2).not_started_at(5)       # GPU hang on rank 2
    world(4).all_reduce(steps=5).all_started_none_completed_at(5)  # network hang

Semantics, chosen to match what the recorder shows on a real hang:

- Every program op runs in program order on the ranks it involves. It completes when every member
  enqueued it and no fault makes it hang. A member that enqueued an op that cannot complete is blocked
  there and enqueues nothing after it (NCCL: the op is ``started``, the kernel waits for its peers);
  the ranks it leaves waiting in later ops, in any group, block there in turn.
- Faults address an op by ``(group, collective_seq_id)``. A fault beyond the program's last collective
  of that group extends the program by repeating that group's last collective, so
  ``all_reduce(steps=40).rank(7).stops_at(41)`` means "40 good steps, the 41st waits for rank 7".
- A type, size or dtype fault hangs by default (``hangs=False``: the op completes, silently wrong); a
  call-site fault does not hang by default.
- ``backend="nccl"`` (default): states ``scheduled``/``started``/``completed``, discovery timestamps,
  ``duration_ms`` on retired completed ops, a sane ``pg_config``, p2p and coalesced ops.
  ``backend="gloo"``: the quirks of FACTS.md: state always ``scheduled``, ``None`` timestamps,
  ``last_started_collective`` -1, the broken ``pg_config``, ``p2p_seq_id`` 0, no p2p.
- ``pg_id`` is the rank's own counter of the groups it belongs to (as ``ProcessGroupNCCL::uid_``), so it
  can differ across ranks for the same group; the group's global name is ``process_group[0]``.
- The ring buffer keeps each rank's last ``buffer_size`` entries; record ids count every entry a rank
  recorded, so ranks that did more (another group, p2p) hold other windows.

Everything here is pure Python; nothing imports torch.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "DEFAULT_GROUP",
    "FR_VERSION",
    "Dump",
    "Frame",
    "RankFaults",
    "World",
    "json_bytes",
    "json_view",
    "pickle_bytes",
    "stack",
    "world",
]

#: The Flight Recorder format version torch 2.13 writes.
FR_VERSION = "2.10"
#: The label of the default process group (``process_group == ('0', 'default_pg')``).
DEFAULT_GROUP = "default"

Dump = dict[str, Any]
Frame = dict[str, Any]
Backend = Literal["nccl", "gloo"]
#: A user call site: ``(function, filename, line)``.
CallSite = tuple[str, str, int]

_TORCH = "/usr/local/lib/python3.11/site-packages/torch"
_C10D = f"{_TORCH}/distributed/distributed_c10d.py"
_TIMEOUT_MS = {"nccl": 600_000, "gloo": 1_800_000}
_COMM_LIB_VERSION = {"nccl": "2.27.5", "gloo": ""}
_BASE_NS = 1_795_310_584_000_000_000
_STEP_NS = 40_000_000  # one program op every 40 ms
_START_NS = 30_000  # launch -> start discovered
_DURATION_NS = 2_500_000  # start -> completion discovered
_THREAD_ID_BASE = 139_975_964_072_832

# The torch function the recorder's first frame names, and its line, per op kind.
_C10D_FUNCTION: dict[str, tuple[str, int]] = {
    "all_reduce": ("all_reduce", 3245),
    "all_gather": ("all_gather", 4280),
    "_allgather_base": ("all_gather_into_tensor", 4392),
    "reduce_scatter": ("reduce_scatter", 4810),
    "_reduce_scatter_base": ("reduce_scatter_tensor", 4903),
    "broadcast": ("broadcast", 3145),
    "reduce": ("reduce", 3378),
    "all_to_all": ("all_to_all", 5102),
    "all_to_all_single": ("all_to_all_single", 5001),
    "barrier": ("barrier", 5349),
    "all_reduce_barrier": ("barrier", 5349),
    "send": ("send", 2651),
    "recv": ("recv", 2712),
    "coalesced": ("_coalescing_manager", 2488),
    "gather": ("gather", 4621),
    "scatter": ("scatter", 4702),
}

# A distinct user call site per kind of collective (the code path that issues it).
_CALL_SITES: dict[str, CallSite] = {
    "all_reduce": ("_sync_gradients", "/workspace/model/ddp_utils.py", 57),
    "all_gather": ("_gather_params", "/workspace/model/fsdp_shard.py", 112),
    "_allgather_base": ("_unshard", "/workspace/model/fsdp_shard.py", 139),
    "reduce_scatter": ("_reduce_grads", "/workspace/model/fsdp_shard.py", 188),
    "_reduce_scatter_base": ("_reduce_grads_flat", "/workspace/model/fsdp_shard.py", 204),
    "broadcast": ("_broadcast_buffers", "/workspace/model/ddp_utils.py", 91),
    "reduce": ("_reduce_metrics", "/workspace/metrics.py", 44),
    "all_to_all": ("_dispatch_tokens", "/workspace/model/moe.py", 73),
    "all_to_all_single": ("_dispatch_tokens", "/workspace/model/moe.py", 81),
    "barrier": ("_checkpoint_barrier", "/workspace/checkpoint.py", 66),
    "send": ("_send_activations", "/workspace/model/pipeline.py", 120),
    "recv": ("_recv_activations", "/workspace/model/pipeline.py", 131),
    "coalesced": ("_sync_bucketed", "/workspace/model/ddp_utils.py", 77),
    "gather": ("_gather_logits", "/workspace/metrics.py", 58),
    "scatter": ("_scatter_batch", "/workspace/data.py", 39),
}

# The frames between the call site and the interpreter's top: same for every op of the program.
_OUTER_FRAMES: tuple[CallSite, ...] = (
    ("train_step", "/workspace/train.py", 142),
    ("run_epoch", "/workspace/train.py", 188),
    ("main", "/workspace/train.py", 231),
    ("wrapper", f"{_TORCH}/distributed/elastic/multiprocessing/errors/__init__.py", 355),
    ("<module>", "/workspace/train.py", 240),
)


def stack(call_site: CallSite, kind: str = "all_reduce", *, caller: CallSite | None = None) -> list[Frame]:
    """The 9 Python frames torch records for an op issued at ``call_site`` (innermost first)."""
    function, line = _C10D_FUNCTION.get(kind, (kind, 3000))
    name, filename, lineno = call_site
    caller = caller or ("forward_backward", filename.rsplit("/", 1)[0] + "/engine.py", 301)
    frames: list[CallSite] = [
        (function, _C10D, line),
        ("wrapper", f"{_TORCH}/distributed/c10d_logger.py", 83),
        (name, filename, lineno),
        caller,
        *_OUTER_FRAMES,
    ]
    return [{"name": n, "filename": f, "line": ln} for n, f, ln in frames]


def _default_sizes(kind: str, group_size: int) -> tuple[list[list[int]], list[list[int]]]:
    """Realistic input and output sizes per kind: 25 MB buckets, FSDP shards, a 1-element barrier."""
    if kind in ("all_reduce", "broadcast", "reduce", "all_to_all_single", "coalesced"):
        return [[6_553_600]], [[6_553_600]]
    if kind in ("all_gather", "_allgather_base", "gather"):
        return [[524_288]], [[group_size * 524_288]]
    if kind in ("reduce_scatter", "_reduce_scatter_base", "scatter"):
        return [[group_size * 524_288]], [[524_288]]
    if kind in ("all_reduce_barrier",):
        return [[1]], [[1]]
    if kind == "barrier":
        return [], []
    if kind == "all_to_all":
        return [[4096, 1024]] * group_size, [[4096, 1024]] * group_size
    return [[1_048_576]], [[1_048_576]]


@dataclass(frozen=True)
class _Group:
    label: str
    name: str  # process_group[0], the global name ('0', '1', ...)
    desc: str  # process_group[1]
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class _Op:
    """One step of the program: a collective, a coalesced batch, a p2p send/recv or a p2p batch."""

    kind: str  # collective kind, "coalesced", "p2p" or "batch_p2p"
    group: str
    input_sizes: tuple[tuple[int, ...], ...] = ()
    output_sizes: tuple[tuple[int, ...], ...] = ()
    dtype: str = "Float"
    call_site: CallSite | None = None
    parts: tuple[str, ...] = ()  # coalesced: the kinds inside
    pairs: tuple[tuple[int, int], ...] = ()  # p2p: (src, dst) global ranks

    @property
    def is_collective(self) -> bool:
        return self.kind not in ("p2p", "batch_p2p")


@dataclass(frozen=True)
class _Fault:
    rank: int | None  # None: every member (network hang)
    group: str
    seq: int
    what: Literal["stop", "op", "sizes", "dtype", "call_site", "not_started", "network"]
    hangs: bool = True
    kind: str = ""
    input_sizes: tuple[tuple[int, ...], ...] | None = None
    output_sizes: tuple[tuple[int, ...], ...] | None = None
    dtype: str = ""
    frames: tuple[tuple[str, str, int], ...] = ()


def _sizes(value: Iterable[Iterable[int]] | None) -> tuple[tuple[int, ...], ...] | None:
    return None if value is None else tuple(tuple(int(d) for d in s) for s in value)


@dataclass(frozen=True)
class World:
    """A training program on ``size`` ranks and the faults in it. Every method returns a new World."""

    size: int
    backend: Backend = "nccl"
    buffer_size: int = 2000
    groups: tuple[_Group, ...] = ()
    program: tuple[_Op, ...] = ()
    faults: tuple[_Fault, ...] = ()
    no_dump: frozenset[int] = field(default_factory=frozenset)

    # ----- process groups -----------------------------------------------------------------
    def group(self, label: str, *, ranks: Sequence[int], desc: str | None = None) -> World:
        """Declare a subgroup (``dist.new_group(ranks)``); ops name it by ``group=label``."""
        if any(g.label == label for g in self.groups) or label == DEFAULT_GROUP:
            raise ValueError(f"group {label!r} is declared twice")
        members = tuple(sorted(set(ranks)))
        if not members or members[0] < 0 or members[-1] >= self.size:
            raise ValueError(f"group {label!r}: ranks {list(ranks)} must lie in 0..{self.size - 1}")
        name = str(len(self.groups) + 1)
        return replace(self, groups=(*self.groups, _Group(label, name, desc or label, members)))

    def _group(self, label: str) -> _Group:
        if label == DEFAULT_GROUP:
            return _Group(DEFAULT_GROUP, "0", "default_pg", tuple(range(self.size)))
        for g in self.groups:
            if g.label == label:
                return g
        raise KeyError(f"no group {label!r}: declare it first with .group({label!r}, ranks=[...])")

    # ----- the program --------------------------------------------------------------------
    def collective(
        self,
        kind: str,
        steps: int = 1,
        *,
        group: str = DEFAULT_GROUP,
        input_sizes: Sequence[Sequence[int]] | None = None,
        output_sizes: Sequence[Sequence[int]] | None = None,
        dtype: str = "Float",
        call_site: CallSite | None = None,
    ) -> World:
        """Append ``steps`` collectives of ``kind`` (the profiling name without the backend prefix)."""
        g = self._group(group)
        if kind == "barrier" and self.backend == "nccl":
            kind = "all_reduce_barrier"
        default_in, default_out = _default_sizes(kind, len(g.ranks))
        in_sizes = _sizes(input_sizes) or tuple(tuple(s) for s in default_in)
        if output_sizes is not None:
            out_sizes = _sizes(output_sizes) or ()
        elif input_sizes is not None:
            out_sizes = in_sizes
        else:
            out_sizes = tuple(tuple(s) for s in default_out)
        op = _Op(kind, group, in_sizes, out_sizes, dtype, call_site)
        return replace(self, program=self.program + (op,) * steps)

    def all_reduce(self, steps: int = 1, **kw: Any) -> World:
        """Append ``steps`` all_reduce ops (keywords as :meth:`collective`)."""
        return self.collective("all_reduce", steps, **kw)

    def all_gather(self, steps: int = 1, **kw: Any) -> World:
        """Append ``steps`` all_gather ops."""
        return self.collective("all_gather", steps, **kw)

    def reduce_scatter(self, steps: int = 1, **kw: Any) -> World:
        """Append ``steps`` reduce_scatter ops."""
        return self.collective("reduce_scatter", steps, **kw)

    def broadcast(self, steps: int = 1, **kw: Any) -> World:
        """Append ``steps`` broadcast ops."""
        return self.collective("broadcast", steps, **kw)

    def barrier(self, steps: int = 1, **kw: Any) -> World:
        """Append ``steps`` barriers (NCCL records them as ``all_reduce_barrier`` of one element)."""
        return self.collective("barrier", steps, **kw)

    def coalesced(
        self,
        kinds: Sequence[str],
        steps: int = 1,
        *,
        group: str = DEFAULT_GROUP,
        call_site: CallSite | None = None,
        end: str = "coalesced",
    ) -> World:
        """Append coalesced collectives (``dist._coalescing_manager``): one entry per op, all sharing one
        ``collective_seq_id``, ``scheduled`` and never retired, then the ``nccl:<end>`` entry that
        carries the state (``end="allreduce_coalesced"`` etc. for the ``*_coalesced`` APIs)."""
        self._nccl_only("coalesced ops")
        self._group(group)
        op = _Op("coalesced", group, ((6_553_600,),), ((6_553_600,),), "Float", call_site, (*kinds, end))
        return replace(self, program=self.program + (op,) * steps)

    def send(
        self,
        src: int,
        dst: int,
        steps: int = 1,
        *,
        group: str = DEFAULT_GROUP,
        sizes: Sequence[Sequence[int]] = ((8, 4096, 1024),),
        dtype: str = "BFloat16",
        call_site: CallSite | None = None,
    ) -> World:
        """Append a send from global rank ``src`` and its matching recv on ``dst``
        (``nccl:send 1->2`` / ``nccl:recv 2<-1``, group-local ranks, each rank's own ``p2p_seq_id``)."""
        self._nccl_only("point-to-point ops")
        self._check_members(group, (src, dst))
        op = _Op("p2p", group, _sizes(sizes) or (), _sizes(sizes) or (), dtype, call_site, (), ((src, dst),))
        return replace(self, program=self.program + (op,) * steps)

    def batch_isend_irecv(
        self,
        pairs: Sequence[tuple[int, int]],
        steps: int = 1,
        *,
        group: str = DEFAULT_GROUP,
        sizes: Sequence[Sequence[int]] = ((8, 4096, 1024),),
        dtype: str = "BFloat16",
    ) -> World:
        """Append a p2p batch: each rank records its sends/recvs sharing one ``p2p_seq_id``, then a
        ``nccl:coalesced`` entry with ``is_p2p`` true."""
        self._nccl_only("point-to-point ops")
        self._check_members(group, tuple(r for p in pairs for r in p))
        s = _sizes(sizes) or ()
        op = _Op("batch_p2p", group, s, s, dtype, None, (), tuple((int(a), int(b)) for a, b in pairs))
        return replace(self, program=self.program + (op,) * steps)

    def repeat(self, steps: int, body: Callable[[World], World]) -> World:
        """Append ``steps`` iterations of ``body`` (a training step): ``repeat(3, lambda w: w.all_gather()
        .reduce_scatter())``."""
        w = self
        for _ in range(steps):
            w = body(w)
        return w

    # ----- faults -------------------------------------------------------------------------
    def rank(self, rank: int) -> RankFaults:
        """Faults of one rank: ``.rank(7).stops_at(41)``."""
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} is outside the world 0..{self.size - 1}")
        return RankFaults(self, rank)

    def all_started_none_completed_at(self, seq: int, *, group: str = DEFAULT_GROUP) -> World:
        """Network hang: every member started ``seq`` and none completed it."""
        return self._with_fault(_Fault(None, group, seq, "network"))

    def without_dump(self, *ranks: int) -> World:
        """These ranks leave no dump file (crashed, killed, evicted)."""
        return replace(self, no_dump=self.no_dump | frozenset(ranks))

    def _with_fault(self, fault: _Fault) -> World:
        g = self._group(fault.group)
        if fault.rank is not None and fault.rank not in g.ranks:
            raise ValueError(f"rank {fault.rank} is not a member of group {g.label!r} {list(g.ranks)}")
        if fault.seq < 1:
            raise ValueError(f"collective_seq_id starts at 1, not {fault.seq}")
        return replace(self, faults=(*self.faults, fault))

    def _nccl_only(self, what: str) -> None:
        if self.backend != "nccl":
            raise ValueError(f"gloo's Flight Recorder records no {what}; use world(..., backend='nccl')")

    def _check_members(self, group: str, ranks: Iterable[int]) -> None:
        g = self._group(group)
        outside = sorted(set(ranks) - set(g.ranks))
        if outside:
            raise ValueError(f"ranks {outside} are not members of group {group!r} {list(g.ranks)}")

    # ----- output -------------------------------------------------------------------------
    def dumps(self) -> dict[int, Dump]:
        """Every rank's dump (pickle shape, as ``pickle.loads(_dump_fr_trace())`` returns it)."""
        return _Simulation(self).run()

    def write(
        self,
        directory: str | Path,
        *,
        fmt: Literal["pickle", "json"] = "pickle",
        prefix: str = "nccl_trace_rank_",
        suffix: str = "",
    ) -> list[Path]:
        """Write ``<prefix><rank><suffix>`` per dumped rank, as torch writes them; returns the paths."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        encode = pickle_bytes if fmt == "pickle" else json_bytes
        paths = []
        for rank, dump in sorted(self.dumps().items()):
            path = directory / f"{prefix}{rank}{suffix}"
            path.write_bytes(encode(dump))
            paths.append(path)
        return paths


@dataclass(frozen=True)
class RankFaults:
    """The faults of one rank; every method returns the :class:`World` so chains go on."""

    world: World
    rank: int

    def stops_at(self, seq: int, *, group: str = DEFAULT_GROUP) -> World:
        """The rank never enqueues ``seq`` (nor anything after it): CPU-stuck, crashed or skipped."""
        return self.world._with_fault(_Fault(self.rank, group, seq, "stop"))

    def op_at(
        self,
        seq: int,
        kind: str,
        *,
        group: str = DEFAULT_GROUP,
        hangs: bool = True,
    ) -> World:
        """The rank issues ``kind`` where the others issue the program's collective (a desync)."""
        return self.world._with_fault(_Fault(self.rank, group, seq, "op", hangs, kind=kind))

    def sizes_at(
        self,
        seq: int,
        input_sizes: Sequence[Sequence[int]],
        output_sizes: Sequence[Sequence[int]] | None = None,
        *,
        group: str = DEFAULT_GROUP,
        hangs: bool = True,
    ) -> World:
        """The rank's tensors have other sizes at ``seq`` (output sizes default to the input sizes)."""
        fault = _Fault(
            self.rank,
            group,
            seq,
            "sizes",
            hangs,
            input_sizes=_sizes(input_sizes),
            output_sizes=_sizes(output_sizes if output_sizes is not None else input_sizes),
        )
        return self.world._with_fault(fault)

    def dtype_at(self, seq: int, dtype: str, *, group: str = DEFAULT_GROUP, hangs: bool = True) -> World:
        """The rank's tensors have another dtype (``'Double'``, ``'BFloat16'``...) at ``seq``."""
        return self.world._with_fault(_Fault(self.rank, group, seq, "dtype", hangs, dtype=dtype))

    def call_site_at(
        self,
        seq: int,
        frames: CallSite | Sequence[Frame],
        *,
        group: str = DEFAULT_GROUP,
        hangs: bool = False,
    ) -> World:
        """The rank issues ``seq`` from another code path: a ``(function, file, line)`` call site (the
        rest of the stack stays) or a whole list of frame dicts."""
        if isinstance(frames, tuple) and len(frames) == 3 and isinstance(frames[0], str):
            name, filename, line = frames
            stack_frames: tuple[tuple[str, str, int], ...] = (("", "", -1), (name, filename, int(line)))
        else:
            stack_frames = tuple((str(f["name"]), str(f["filename"]), int(f["line"])) for f in frames)
        return self.world._with_fault(_Fault(self.rank, group, seq, "call_site", hangs, frames=stack_frames))

    def not_started_at(self, seq: int, *, group: str = DEFAULT_GROUP) -> World:
        """GPU hang: the rank enqueued ``seq`` but it never started (a kernel before it never finished)
        while its peers started it."""
        return self.world._with_fault(_Fault(self.rank, group, seq, "not_started"))

    def without_dump(self) -> World:
        """The rank leaves no dump file."""
        return self.world.without_dump(self.rank)


def world(size: int, *, backend: Backend = "nccl", buffer_size: int = 2000) -> World:
    """A world of ``size`` ranks (``backend`` ``"nccl"`` or ``"gloo"``; ``buffer_size`` entries a ring)."""
    if size < 1:
        raise ValueError(f"a world needs at least one rank, not {size}")
    if backend not in ("nccl", "gloo"):
        raise ValueError(f"backend must be 'nccl' or 'gloo', not {backend!r}")
    if buffer_size < 1:
        raise ValueError(f"buffer_size counts entries and must be positive, not {buffer_size}")
    return World(size, backend, buffer_size)


# ----- the simulation -------------------------------------------------------------------------


@dataclass
class _RankState:
    rank: int
    entries: list[dict[str, Any]] = field(default_factory=list)
    record_id: int = 0
    pg_ids: dict[str, int] = field(default_factory=dict)  # group label -> local pg_id
    seq: dict[str, int] = field(default_factory=dict)
    p2p_seq: dict[str, int] = field(default_factory=dict)
    op_id: dict[str, int] = field(default_factory=dict)
    enqueued: dict[str, int] = field(default_factory=dict)
    started: dict[str, int] = field(default_factory=dict)
    completed: dict[str, int] = field(default_factory=dict)


class _Simulation:
    """Runs the program over every rank and records what each rank's Flight Recorder would hold."""

    def __init__(self, w: World) -> None:
        self.w = w
        self.nccl = w.backend == "nccl"
        self.prefix = f"{w.backend}:"
        self.groups = {DEFAULT_GROUP: w._group(DEFAULT_GROUP), **{g.label: g for g in w.groups}}
        self.program = self._extended_program()
        self.faults: dict[tuple[int | None, str, int], list[_Fault]] = {}
        for f in w.faults:
            self.faults.setdefault((f.rank, f.group, f.seq), []).append(f)
        self.states = [_RankState(r) for r in range(w.size)]
        for st in self.states:  # local pg ids, in creation order, for the groups the rank is in
            for label, g in self.groups.items():
                if st.rank in g.ranks:
                    st.pg_ids[label] = len(st.pg_ids)
        self.strings: dict[str, str] = {}
        self.frames: dict[tuple[str, str, int], Frame] = {}
        self.thread_ids = [self._s(str(_THREAD_ID_BASE + 4096 * r)) for r in range(w.size)]

    def _s(self, value: str) -> str:
        """One object per distinct string, so pickle memoizes repeats like torch's pickler does."""
        return self.strings.setdefault(value, value)

    def _extended_program(self) -> tuple[_Op, ...]:
        program = list(self.w.program)
        counts: dict[str, int] = {}
        last: dict[str, _Op] = {}
        for op in program:
            if op.is_collective:
                counts[op.group] = counts.get(op.group, 0) + 1
                last[op.group] = op
        for f in self.w.faults:
            missing = f.seq - counts.get(f.group, 0)
            if missing > 0:
                if f.group not in last:
                    raise ValueError(
                        f"a fault at seq {f.seq} of group {f.group!r}, which has no collective: "
                        f"add one (e.g. .all_reduce(steps={f.seq}, group={f.group!r}))"
                    )
                program.extend([last[f.group]] * missing)
                counts[f.group] = f.seq
        return tuple(program)

    def _stack(
        self, op_kind: str, call_site: CallSite | None, group: str, fault: _Fault | None
    ) -> list[Frame]:
        site = call_site or _CALL_SITES.get(op_kind, (f"_{op_kind}", "/workspace/model/comm.py", 10))
        if call_site is None and group != DEFAULT_GROUP:  # a distinct code path per group
            site = (site[0], site[1], site[2] + 1000 * int(self.groups[group].name))
        raw = [(str(f["name"]), str(f["filename"]), int(f["line"])) for f in stack(site, op_kind)]
        if fault is not None:
            if fault.frames and fault.frames[0] == ("", "", -1):
                raw[2] = fault.frames[1]
            else:
                raw = list(fault.frames)
        out = []
        for key in raw:
            frame = self.frames.get(key)
            if frame is None:
                frame = {"name": self._s(key[0]), "filename": self._s(key[1]), "line": key[2]}
                self.frames[key] = frame
            out.append(frame)
        return out

    def run(self) -> dict[int, Dump]:
        blocked: set[int] = set()
        group_seq: dict[str, int] = {}
        for index, op in enumerate(self.program):
            g = self.groups[op.group]
            seq = group_seq.get(op.group, 0) + (1 if op.is_collective else 0)
            group_seq[op.group] = seq
            members = g.ranks if op.is_collective else tuple(sorted({r for p in op.pairs for r in p}))
            if all(r in blocked for r in members):
                continue
            here = self._faults_at(op, seq, members)
            stopped = {r for r in members if any(f.what == "stop" for f in here.get(r, ()))}
            blocked |= stopped
            arrived = [r for r in members if r not in blocked]
            hang = len(arrived) < len(members) or any(
                f.hangs and f.what != "stop" for r in arrived for f in here.get(r, ())
            )
            hang = hang or any(f.what == "network" for f in here.get(None, ()))
            for r in arrived:
                not_started = any(f.what == "not_started" for f in here.get(r, ()))
                state = "completed" if not hang else ("scheduled" if not_started else "started")
                self._record(self.states[r], op, index, seq, g, state, here.get(r, ()))
            if hang:
                blocked |= set(arrived)
            if len(blocked) == self.w.size:
                break
        return {st.rank: self._dump(st) for st in self.states if st.rank not in self.w.no_dump}

    def _faults_at(self, op: _Op, seq: int, members: tuple[int, ...]) -> dict[int | None, list[_Fault]]:
        if not op.is_collective:
            return {}
        found: dict[int | None, list[_Fault]] = {}
        for r in (*members, None):
            faults = self.faults.get((r, op.group, seq))
            if faults:
                found[r] = faults
        return found

    def _record(
        self,
        st: _RankState,
        op: _Op,
        index: int,
        seq: int,
        g: _Group,
        state: str,
        faults: Sequence[_Fault],
    ) -> None:
        label = op.group
        if op.is_collective:
            st.seq[label] = seq
        else:
            st.p2p_seq[label] = st.p2p_seq.get(label, 0) + 1
        kind, in_sizes, out_sizes, dtype = op.kind, op.input_sizes, op.output_sizes, op.dtype
        frames_fault = None
        for f in faults:
            if f.what == "op":
                kind = f.kind
                if kind == "barrier" and self.nccl:
                    kind = "all_reduce_barrier"
                d_in, d_out = _default_sizes(kind, len(g.ranks))
                in_sizes, out_sizes = _sizes(d_in) or (), _sizes(d_out) or ()
            elif f.what == "sizes":
                in_sizes, out_sizes = f.input_sizes or (), f.output_sizes or ()
            elif f.what == "dtype":
                dtype = f.dtype
            elif f.what == "call_site":
                frames_fault = f
        created = _BASE_NS + index * _STEP_NS + 7_919 * st.rank
        local = {r: i for i, r in enumerate(g.ranks)}
        if op.kind == "coalesced":
            *parts, end = op.parts
            for part in parts:
                frames = self._stack(part, op.call_site or _CALL_SITES["coalesced"], label, frames_fault)
                self._entry(
                    st,
                    label,
                    g,
                    part,
                    in_sizes,
                    in_sizes,
                    dtype,
                    "scheduled",
                    created,
                    frames,
                    p2p=False,
                    retired=False,
                    timed=False,
                )
            frames = self._stack("coalesced", op.call_site, label, frames_fault)
            self._entry(st, label, g, end, (), (), dtype, state, created, frames, p2p=False)
        elif op.kind in ("p2p", "batch_p2p"):
            mine = [(s, d) for s, d in op.pairs if st.rank in (s, d)]
            batch = op.kind == "batch_p2p"
            for src, dst in mine:
                if st.rank == src:
                    name, part = f"send {local[src]}->{local[dst]}", "send"
                else:
                    name, part = f"recv {local[dst]}<-{local[src]}", "recv"
                frames = self._stack(part, op.call_site, label, None)
                self._entry(
                    st,
                    label,
                    g,
                    name,
                    in_sizes,
                    out_sizes,
                    dtype,
                    "scheduled" if batch else state,
                    created,
                    frames,
                    p2p=True,
                    retired=not batch and state == "completed",
                    timed=not batch,
                )
            if batch:
                frames = self._stack("coalesced", None, label, None)
                self._entry(st, label, g, "coalesced", (), (), dtype, state, created, frames, p2p=True)
        else:
            frames = self._stack(op.kind, op.call_site, label, frames_fault)
            self._entry(st, label, g, kind, in_sizes, out_sizes, dtype, state, created, frames, p2p=False)
        if op.is_collective:
            st.enqueued[label] = seq
            if state in ("started", "completed"):
                st.started[label] = seq
            if state == "completed":
                st.completed[label] = seq

    def _entry(
        self,
        st: _RankState,
        label: str,
        g: _Group,
        name: str,
        in_sizes: Sequence[Sequence[int]],
        out_sizes: Sequence[Sequence[int]],
        dtype: str,
        state: str,
        created: int,
        frames: list[Frame],
        *,
        p2p: bool,
        retired: bool | None = None,
        timed: bool = True,
    ) -> None:
        op_id = st.op_id.get(label, 0) + 1
        st.op_id[label] = op_id
        if retired is None:
            retired = state == "completed"
        if not self.nccl:
            state, timed = "scheduled", False
        started = created + _START_NS if timed and state in ("started", "completed") else None
        done = (
            started + _DURATION_NS + 1_000 * (st.record_id % 7) if started and state == "completed" else None
        )
        s = self._s
        entry: dict[str, Any] = {
            "frames": frames,
            "record_id": st.record_id,
            "pg_id": st.pg_ids[label],
            "process_group": (s(g.name), s(g.desc)),
            "thread_name": s("python"),
            "thread_id": self.thread_ids[st.rank],
            "collective_seq_id": st.seq.get(label, 0),
            "p2p_seq_id": st.p2p_seq.get(label, 0) if self.nccl else 0,
            "op_id": op_id,
            "profiling_name": s(self.prefix + name),
        }
        entry["time_created_ns"] = created
        if done is not None and started is not None and retired:
            entry["duration_ms"] = (done - started) / 1e6
        entry.update(
            input_sizes=[list(x) for x in in_sizes],
            input_dtypes=[s(dtype)] * len(in_sizes),
            output_sizes=[list(x) for x in out_sizes],
            output_dtypes=[s(dtype)] * len(out_sizes),
            state=s(state),
            time_discovered_started_ns=started,
            time_discovered_completed_ns=done,
            retired=retired,
            timeout_ms=_TIMEOUT_MS[self.w.backend],
            is_p2p=p2p,
        )
        st.entries.append(entry)
        st.record_id += 1

    def _dump(self, st: _RankState) -> Dump:
        pg_status = {}
        for label, pg_id in sorted(st.pg_ids.items(), key=lambda kv: kv[1]):
            if label not in st.enqueued and label not in st.p2p_seq:
                continue  # the recorder learns of a group at its first op
            pg_status[str(pg_id)] = {
                "last_enqueued_collective": st.enqueued.get(label, -1),
                "last_started_collective": st.started.get(label, -1) if self.nccl else -1,
                "last_completed_collective": st.completed.get(label, -1),
            }
        return {
            "version": FR_VERSION,
            "pg_config": self._pg_config(st),
            "comm_lib_version": _COMM_LIB_VERSION[self.w.backend],
            "pg_status": pg_status,
            "entries": st.entries[-self.w.buffer_size :],
        }

    def _pg_config(self, st: _RankState) -> dict[str, dict[str, str]]:
        if not self.nccl:  # FACTS.md: gloo's pg_config is broken
            in_subgroup = any(st.rank in g.ranks for g in self.w.groups)
            ranks = "[]" if in_subgroup else str(list(range(self.w.size)))
            return {"": {"name": "", "desc": "", "ranks": ranks}}
        return {
            g.name: {"name": g.name, "desc": g.desc, "ranks": str(list(g.ranks))}
            for label, g in self.groups.items()
            if label in st.pg_ids
        }


# ----- encodings ------------------------------------------------------------------------------


def pickle_bytes(dump: Dump) -> bytes:
    """The dump as torch writes it: pickle protocol 2 (no globals)."""
    return pickle.dumps(dump, protocol=2)


def json_view(dump: Dump) -> Dump:
    """The dump as ``_dump_fr_trace_json`` gives it: no ``frames``, ``0`` for missing timestamps, strings
    in ``pg_status``, lists for tuples, and ``nccl_comm_state``."""
    entries = []
    for e in dump["entries"]:
        j = {k: v for k, v in e.items() if k != "frames"}
        j["process_group"] = list(e["process_group"])
        for key in ("time_discovered_started_ns", "time_discovered_completed_ns"):
            if j[key] is None:
                j[key] = 0
        entries.append(j)
    return {
        "comm_lib_version": dump["comm_lib_version"],
        "entries": entries,
        "nccl_comm_state": {},
        "pg_config": dump["pg_config"],
        "pg_status": {pg: {k: str(v) for k, v in status.items()} for pg, status in dump["pg_status"].items()},
        "version": dump["version"],
    }


def json_bytes(dump: Dump) -> bytes:
    """The JSON encoding of ``_dump_fr_trace_json``: compact, keys sorted."""
    return json.dumps(json_view(dump), sort_keys=True, separators=(",", ":")).encode()
