"""The builder's vocabulary: a training program on N ranks and the faults in it (values, no I/O).

Every method returns a new :class:`World`; :meth:`World.dumps` hands the program to
:mod:`.simulate`, which runs it and returns what each rank's recorder holds.

Over 400 lines by choice: the builder's whole vocabulary (a method per collective and per fault) is
read as one API, so it stays in one module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from .kinds import NCCL_ONLY, Payload, Shapes, Splits, SplitsFn, default_tensor, even_splits

Dump = dict[str, Any]
Frame = dict[str, Any]
Backend = Literal["nccl", "gloo"]
#: A user call site: ``(function, filename, line)``.
CallSite = tuple[str, str, int]
#: The label of the default process group (``process_group == ('0', 'default_pg')``).
DEFAULT_GROUP = "default"

FaultKind = Literal[
    "stop", "skip", "extra", "op", "sizes", "dtype", "count", "call_site", "not_started", "network", "stall"
] | Literal["root"]


@dataclass(frozen=True)
class Group:
    label: str
    name: str  # process_group[0], the global name ('0', '1', ...); split groups share one
    desc: str  # process_group[1]
    parts: tuple[tuple[int, ...], ...]  # disjoint member sets (one unless made by ``split``)

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted(r for p in self.parts for r in p))

    def part_of(self, rank: int) -> tuple[int, ...]:
        for p in self.parts:
            if rank in p:
                return p
        raise ValueError(f"rank {rank} is not a member of group {self.label!r}")


@dataclass(frozen=True)
class Op:
    """One step of the program: a collective, a coalesced region, a p2p send/recv or a p2p batch."""

    kind: str  # collective kind, "coalesced", "p2p" or "batch_p2p"
    group: str
    tensors: Shapes = ()
    dtype: str = "Float"
    call_site: CallSite | None = None
    root: int = 0
    splits: Splits | SplitsFn | None = None
    uneven: Shapes | None = None
    explicit: tuple[Shapes, Shapes] | None = None
    parts: tuple[str, ...] = ()
    end: str = "coalesced"
    pairs: tuple[tuple[int, int], ...] = ()  # p2p: (src, dst) global ranks
    p2p_sizes: Shapes = ()

    @property
    def is_collective(self) -> bool:
        return self.kind not in ("p2p", "batch_p2p")

    def payload(self, index: int) -> Payload:
        splits = self.splits(index) if callable(self.splits) else self.splits
        return Payload(
            kind=self.kind,
            tensors=self.tensors,
            dtype=self.dtype,
            root=self.root,
            splits=tuple(tuple(int(x) for x in row) for row in splits) if splits is not None else None,
            uneven=self.uneven,
            explicit=self.explicit,
            parts=self.parts,
            end=self.end,
        )


@dataclass(frozen=True)
class Fault:
    rank: int | None  # None: every member (network hang, partial stall)
    group: str
    seq: int  # the program's collective_seq_id in the group
    what: FaultKind
    hangs: bool = True
    kind: str = ""
    explicit: tuple[Shapes, Shapes] | None = None
    dtype: str = ""
    count: int = 0
    frames: tuple[tuple[str, str, int], ...] = ()
    completed_on: frozenset[int] = frozenset()  # stall: the members that completed it; network: whose part
    root: int = -1  # root: the group-local root this rank passes instead of the program's


def shapes(value: Iterable[Iterable[int]] | None) -> Shapes | None:
    return None if value is None else tuple(tuple(int(d) for d in s) for s in value)


@dataclass(frozen=True)
class World:
    """A training program on ``size`` ranks and the faults in it. Every method returns a new World."""

    size: int
    backend: Backend = "nccl"
    buffer_size: int = 2000
    timing: bool = True  # TORCH_NCCL_ENABLE_TIMING: without it no entry is ever 'started'
    queued: int = 0  # after it blocks, a rank still enqueues this many collectives (they stay scheduled)
    groups: tuple[Group, ...] = ()
    program: tuple[Op, ...] = ()
    faults: tuple[Fault, ...] = ()
    no_dump: frozenset[int] = field(default_factory=frozenset)
    delays: tuple[tuple[int, int, int], ...] = ()  # (rank, enqueue delay ns, start delay ns)

    # ----- process groups -----------------------------------------------------------------
    def group(self, label: str, *, ranks: Sequence[int], desc: str | None = None) -> World:
        """Declare a subgroup (``dist.new_group(ranks)``); ops name it by ``group=label``."""
        return self._declare(label, [ranks], desc)

    def split(self, label: str, parts: Sequence[Sequence[int]], *, desc: str | None = None) -> World:
        """Declare split groups (``dist.split_group``): one group name shared by disjoint member sets;
        an op on ``label`` runs in every part on its own."""
        return self._declare(label, parts, desc)

    def _declare(self, label: str, parts: Sequence[Sequence[int]], desc: str | None) -> World:
        if any(g.label == label for g in self.groups) or label == DEFAULT_GROUP:
            raise ValueError(f"group {label!r} is declared twice")
        members = [tuple(sorted(set(p))) for p in parts]
        flat = [r for p in members for r in p]
        if not flat or min(flat) < 0 or max(flat) >= self.size or len(flat) != len(set(flat)):
            raise ValueError(
                f"group {label!r}: ranks {list(parts)} must be disjoint and lie in 0..{self.size - 1}"
            )
        name = str(len(self.groups) + 1)
        return replace(self, groups=(*self.groups, Group(label, name, desc or label, tuple(members))))

    def group_named(self, label: str) -> Group:
        if label == DEFAULT_GROUP:
            return Group(DEFAULT_GROUP, "0", "default_pg", (tuple(range(self.size)),))
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
        tensors: Sequence[Sequence[int]] | None = None,
        root: int = 0,
        splits: Sequence[Sequence[int]] | SplitsFn | None = None,
        uneven: Sequence[Sequence[int]] | None = None,
    ) -> World:
        """Append ``steps`` collectives of ``kind`` (a torch API name: ``all_reduce``, ``gather``,
        ``all_to_all_single``, ``all_gather_into_tensor`` ...). ``input_sizes``/``output_sizes`` are
        recorded exactly as given on every rank; otherwise the sizes follow from ``tensors`` (the
        tensors passed), ``root``, ``splits`` (all_to_all) or ``uneven`` as torch records them."""
        g = self.group_named(group)
        if kind in NCCL_ONLY:
            self._nccl_only(kind)
        explicit = None
        if input_sizes is not None:
            ins = shapes(input_sizes) or ()
            outs = shapes(output_sizes) if output_sizes is not None else ins
            explicit = (ins, outs or ())
        elif output_sizes is not None:
            explicit = ((), shapes(output_sizes) or ())
        base = shapes(tensors) or (default_tensor(kind),)
        if splits is not None and not callable(splits):
            splits = tuple(tuple(int(x) for x in row) for row in splits)
        if kind in ("all_to_all", "all_to_all_single") and splits is None:
            splits = even_splits(max(len(p) for p in g.parts))
        op = Op(kind, group, base, dtype, call_site, root, splits, shapes(uneven), explicit)
        return replace(self, program=self.program + (op,) * steps)

    def all_reduce(self, steps: int = 1, **kw: Any) -> World:
        """Append ``steps`` all_reduce ops (keywords as :meth:`collective`)."""
        return self.collective("all_reduce", steps, **kw)

    def all_gather(self, steps: int = 1, **kw: Any) -> World:
        return self.collective("all_gather", steps, **kw)

    def reduce_scatter(self, steps: int = 1, **kw: Any) -> World:
        return self.collective("reduce_scatter", steps, **kw)

    def all_gather_into_tensor(self, steps: int = 1, **kw: Any) -> World:
        return self.collective("all_gather_into_tensor", steps, **kw)

    def reduce_scatter_tensor(self, steps: int = 1, **kw: Any) -> World:
        return self.collective("reduce_scatter_tensor", steps, **kw)

    def all_reduce_coalesced(self, steps: int = 1, **kw: Any) -> World:
        """Append ``all_reduce_coalesced`` calls of ``tensors`` (default: two buckets)."""
        kw.setdefault("tensors", [[6_553_600], [1_048_576]])
        return self.collective("all_reduce_coalesced", steps, **kw)

    def broadcast(self, steps: int = 1, **kw: Any) -> World:
        return self.collective("broadcast", steps, **kw)

    def reduce(self, steps: int = 1, **kw: Any) -> World:
        return self.collective("reduce", steps, **kw)

    def gather(self, steps: int = 1, **kw: Any) -> World:
        """Append gathers to ``root`` (group-local): the root records the list, the others nothing."""
        return self.collective("gather", steps, **kw)

    def scatter(self, steps: int = 1, **kw: Any) -> World:
        return self.collective("scatter", steps, **kw)

    def all_to_all(self, steps: int = 1, **kw: Any) -> World:
        """Append list all_to_all ops; ``splits[i][j]`` rows from rank i to rank j (group-local; a
        callable of the program index gives other splits each step)."""
        return self.collective("all_to_all", steps, **kw)

    def all_to_all_single(self, steps: int = 1, **kw: Any) -> World:
        return self.collective("all_to_all_single", steps, **kw)

    def barrier(self, steps: int = 1, **kw: Any) -> World:
        """Append ``steps`` barriers (NCCL records them as ``all_reduce_barrier`` of one byte)."""
        return self.collective("barrier", steps, **kw)

    def coalesced(
        self,
        kinds: Sequence[str],
        steps: int = 1,
        *,
        group: str = DEFAULT_GROUP,
        call_site: CallSite | None = None,
        end: str = "coalesced",
        tensors: Sequence[Sequence[int]] | None = None,
        dtype: str = "Float",
    ) -> World:
        """Append coalesced collectives (``dist._coalescing_manager``): one entry per op, all sharing one
        ``collective_seq_id``, ``scheduled`` and never retired, then the ``nccl:<end>`` entry that
        carries the state (``end="allreduce_coalesced"`` etc. for the ``*_coalesced`` APIs)."""
        self._nccl_only("coalesced ops")
        self.group_named(group)
        base = shapes(tensors) or ((6_553_600,),)
        op = Op("coalesced", group, base, dtype, call_site, parts=tuple(kinds), end=end)
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
        op = Op(
            "p2p", group, dtype=dtype, call_site=call_site, pairs=((src, dst),), p2p_sizes=shapes(sizes) or ()
        )
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
        op = Op(
            "batch_p2p",
            group,
            dtype=dtype,
            pairs=tuple((int(a), int(b)) for a, b in pairs),
            p2p_sizes=shapes(sizes) or (),
        )
        return replace(self, program=self.program + (op,) * steps)

    def repeat(self, steps: int, body: Callable[[World], World]) -> World:
        """Append ``steps`` iterations of ``body`` (a training step): ``repeat(3, lambda w: w.all_gather()
        .reduce_scatter())``."""
        w = self
        for _ in range(steps):
            w = body(w)
        return w

    def with_queued(self, n: int) -> World:
        """After it blocks, each rank still enqueues ``n`` more ops (NCCL is asynchronous: a real hang
        leaves a queue of ``scheduled`` entries behind the stuck one)."""
        return replace(self, queued=n)

    # ----- faults -------------------------------------------------------------------------
    def rank(self, rank: int) -> RankFaults:
        """Faults of one rank: ``.rank(7).stops_at(41)``."""
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} is outside the world 0..{self.size - 1}")
        return RankFaults(self, rank)

    def all_started_none_completed_at(
        self, seq: int, *, group: str = DEFAULT_GROUP, ranks: Sequence[int] = ()
    ) -> World:
        """Network hang: every member started ``seq`` and none completed it (of split groups: the parts
        holding ``ranks``, every part when none are given)."""
        return self.with_fault(Fault(None, group, seq, "network", completed_on=frozenset(ranks)))

    def stalls_at(self, seq: int, *, completed_on: Sequence[int], group: str = DEFAULT_GROUP) -> World:
        """A partial transport stall: ``seq`` completes on ``completed_on`` and stays started on the
        other members."""
        return self.with_fault(Fault(None, group, seq, "stall", completed_on=frozenset(completed_on)))

    def without_dump(self, *ranks: int) -> World:
        """These ranks leave no dump file (crashed, killed, evicted)."""
        return replace(self, no_dump=self.no_dump | frozenset(ranks))

    def with_fault(self, fault: Fault) -> World:
        g = self.group_named(fault.group)
        if fault.rank is not None and fault.rank not in g.ranks:
            raise ValueError(f"rank {fault.rank} is not a member of group {g.label!r} {list(g.ranks)}")
        if fault.seq < 1:
            raise ValueError(f"collective_seq_id starts at 1, not {fault.seq}")
        return replace(self, faults=(*self.faults, fault))

    def _nccl_only(self, what: str) -> None:
        if self.backend != "nccl":
            raise ValueError(f"gloo's Flight Recorder records no {what}; use world(..., backend='nccl')")

    def _check_members(self, group: str, ranks: Iterable[int]) -> None:
        g = self.group_named(group)
        outside = sorted(set(ranks) - set(g.ranks))
        if outside:
            raise ValueError(f"ranks {outside} are not members of group {group!r} {list(g.ranks)}")

    # ----- output -------------------------------------------------------------------------
    def dumps(self, *, upto: int | None = None) -> dict[int, Dump]:
        """Every rank's dump (pickle shape, as ``pickle.loads(_dump_fr_trace())`` returns it).
        ``upto``: only the first ``upto`` program ops ran (an earlier, on-demand dump of the same run)."""
        from .simulate import simulate

        return simulate(self, upto)

    def write(
        self,
        directory: str | Path,
        *,
        fmt: Literal["pickle", "json"] = "pickle",
        prefix: str = "nccl_trace_rank_",
        suffix: str = "",
    ) -> list[Path]:
        """Write ``<prefix><rank><suffix>`` per dumped rank, as torch writes them; returns the paths."""
        from .encode import json_bytes, pickle_bytes

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

    def _add(self, seq: int, what: FaultKind, group: str, **kw: Any) -> World:
        return self.world.with_fault(Fault(self.rank, group, seq, what, **kw))

    def stops_at(self, seq: int, *, group: str = DEFAULT_GROUP) -> World:
        """The rank never enqueues ``seq`` (nor anything after it): CPU-stuck, crashed or exited."""
        return self._add(seq, "stop", group)

    def skips(self, seq: int, *, group: str = DEFAULT_GROUP) -> World:
        """The rank never issues the program's ``seq`` and goes on with the rest: its own numbering
        shifts by one from there (its ``seq`` is the others' ``seq + 1``)."""
        return self._add(seq, "skip", group)

    def extra_at(self, seq: int, kind: str, *, group: str = DEFAULT_GROUP, hangs: bool = True) -> World:
        """The rank issues an extra ``kind`` right before the program's ``seq``: its ``seq + 1`` is the
        others' ``seq``."""
        return self._add(seq, "extra", group, kind=kind, hangs=hangs)

    def op_at(self, seq: int, kind: str, *, group: str = DEFAULT_GROUP, hangs: bool = True) -> World:
        """The rank issues ``kind`` where the others issue the program's collective (a desync)."""
        return self._add(seq, "op", group, kind=kind, hangs=hangs)

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
        ins = shapes(input_sizes) or ()
        outs = shapes(output_sizes) if output_sizes is not None else ins
        return self._add(seq, "sizes", group, hangs=hangs, explicit=(ins, outs or ()))

    def root_at(self, seq: int, root: int, *, group: str = DEFAULT_GROUP, hangs: bool = True) -> World:
        """The rank passes another (group-local) ``root`` to the rooted collective at ``seq``: as the root
        of a gather or scatter it records the root's list, elsewhere the non-root's placeholder."""
        return self._add(seq, "root", group, hangs=hangs, root=root)

    def dtype_at(self, seq: int, dtype: str, *, group: str = DEFAULT_GROUP, hangs: bool = True) -> World:
        """The rank's tensors have another dtype (``'Double'``, ``'BFloat16'``...) at ``seq``."""
        return self._add(seq, "dtype", group, hangs=hangs, dtype=dtype)

    def count_at(self, seq: int, count: int, *, group: str = DEFAULT_GROUP, hangs: bool = True) -> World:
        """The rank passes ``count`` tensors (or ops, in a coalesced region) where the others pass the
        program's number."""
        return self._add(seq, "count", group, hangs=hangs, count=count)

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
        return self._add(seq, "call_site", group, hangs=hangs, frames=stack_frames)

    def not_started_at(self, seq: int, *, group: str = DEFAULT_GROUP) -> World:
        """GPU hang: the rank enqueued ``seq`` but it never started (a kernel before it never finished)
        while its peers started it."""
        return self._add(seq, "not_started", group)

    def late_by(self, ms: float) -> World:
        """The rank enqueues every collective ``ms`` after its peers (a CPU-side straggler)."""
        return replace(self.world, delays=(*self.world.delays, (self.rank, int(ms * 1e6), 0)))

    def slow_by(self, ms: float) -> World:
        """The rank starts every collective ``ms`` after it was enqueued (a slow GPU or stream): its
        peers wait for it inside each collective."""
        return replace(self.world, delays=(*self.world.delays, (self.rank, 0, int(ms * 1e6))))

    def without_dump(self) -> World:
        """The rank leaves no dump file."""
        return self.world.without_dump(self.rank)


def world(
    size: int, *, backend: Backend = "nccl", buffer_size: int = 2000, timing: bool = True, queued: int = 0
) -> World:
    """A world of ``size`` ranks (``backend`` ``"nccl"`` or ``"gloo"``; ``buffer_size`` entries a ring;
    ``timing``: TORCH_NCCL_ENABLE_TIMING; ``queued``: ops a blocked rank still enqueues)."""
    if size < 1:
        raise ValueError(f"a world needs at least one rank, not {size}")
    if backend not in ("nccl", "gloo"):
        raise ValueError(f"backend must be 'nccl' or 'gloo', not {backend!r}")
    if buffer_size < 1:
        raise ValueError(f"buffer_size counts entries and must be positive, not {buffer_size}")
    return World(size, backend, buffer_size, timing, queued)
