"""Conformance cases for state reasoning, p2p chains and cross-group roots (issue 24, principles 2, 3, 4, 6).

Each case cites where its records come from:

- *Not retired is not in flight* (principle 2). Real torch 2.13.0+cpu gloo ranks
  (``frwatch_dev.workloads.overtaken_gloo``): a large async all_reduce overtaken by a tiny one stays
  ``retired=False`` while the tiny one retired and ``pg_status.last_completed_collective`` reached it, in a
  healthy job. torchcomms before its April 2026 fix (torchcomms #2013) never retired sync ops: NCCL-style
  rows ``completed`` with ``retired=False``.
- *p2p chains* (principle 3). ProcessGroupNCCL records a send as ``nccl:send <me>-><peer>`` and a recv as
  ``nccl:recv <me><-<peer>`` (group-local ranks) with its own ``p2p_seq_id``; fr_trace pairs the k-th send
  a->b with the k-th recv at b from a (``torch/distributed/flight_recorder/components/types.py``,
  ``Op.match``: a send matches a recv with the same src, dst and sizes). States follow the collectives':
  ``scheduled`` until the work's start event fires (``TORCH_NCCL_ENABLE_TIMING``), ``completed`` when its
  end event does.
- *Cross-group* (principle 4). gloo groups made by ``new_group`` without a description carry ``desc``
  ``undefined``, and a member's dump holds ``pg_config`` ``{'': {'ranks': '[]'}}`` (FACTS.md, real runs).
- *No culprit rank without evidence* (principle 6): every member started, none completed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from frwatch_analyzers.verdict import Category, CulpritKind, Status

from .corpus import Case, Truth
from .program import Dump, World, world

SIZE = 4
Files = list[tuple[str, int, Dump]]


def _files(dumps: dict[int, Dump]) -> Files:
    return [(f"nccl_trace_rank_{r}", r, d) for r, d in sorted(dumps.items())]


def _build(w: World, edit: Callable[[dict[int, Dump]], None] | None = None) -> Callable[[], Files]:
    def build() -> Files:
        dumps = w.dumps()
        if edit is not None:
            edit(dumps)
        return _files(dumps)

    return build


# --- principle 2 ---------------------------------------------------------------------------------------------
def _step(x: World) -> World:
    return x.all_reduce().all_gather().barrier()


def _unretire(rank: int, index: int) -> Callable[[dict[int, Dump]], None]:
    def edit(dumps: dict[int, Dump]) -> None:
        dumps[rank]["entries"][index]["retired"] = False

    return edit


def _every(
    edit: Callable[[int, int], Callable[[dict[int, Dump]], None]], index: int
) -> Callable[[dict[int, Dump]], None]:
    def each(dumps: dict[int, Dump]) -> None:
        for r in dumps:
            edit(r, index)(dumps)

    return each


def _never_retired(dumps: dict[int, Dump]) -> None:
    for d in dumps.values():
        for e in d["entries"]:
            e["retired"] = False  # torchcomms before #2013: sync ops completed, never retired


def _retired_cases() -> list[Case]:
    gloo = world(SIZE, backend="gloo").repeat(6, _step)
    stuck = gloo.rank(1).stops_at(13)
    nccl = world(SIZE).repeat(6, _step)
    healthy = Truth(Status.healthy, Category.healthy)
    return [
        Case("overtaken call/healthy [gloo, one group]", "all_reduce", "not retired, done",
             _build(gloo, _unretire(2, -3)), healthy),
        Case("overtaken call/healthy, every rank [gloo, one group]", "all_reduce", "not retired, done",
             _build(gloo, _every(_unretire, -3)), healthy),
        Case("overtaken call/cpu-stuck later [gloo, one group]", "all_reduce", "not retired, done",
             _build(stuck, _unretire(3, 3)),
             Truth(Status.problem, Category.missing_rank, (1,), CulpritKind.cpu_stuck, "0", 13)),
        Case("sync ops never retired/healthy [torchcomms, one group]", "all_reduce", "not retired, done",
             _build(nccl, _never_retired), healthy),
    ]  # fmt: skip


# --- principle 3 ---------------------------------------------------------------------------------------------
def _p2p(d: Dump, kind: str, name: str) -> dict[str, Any]:
    """A rank's last send or recv whose profiling name carries ``name`` (``0->1``, ``1<-0``)."""
    found: list[dict[str, Any]] = [
        e for e in d["entries"] if e["is_p2p"] and e["profiling_name"] == f"nccl:{kind} {name}"
    ]
    return found[-1]


def _open(e: dict[str, Any], state: str) -> None:
    e.update(state=state, retired=False, time_discovered_completed_ns=None)
    e.pop("duration_ms", None)
    if state == "scheduled":
        e["time_discovered_started_ns"] = None


def _pipeline(x: World) -> World:
    return x.send(0, 1).send(1, 2).send(2, 3).all_reduce()


PIPE = world(SIZE, timing=True).repeat(5, _pipeline).send(0, 1).send(1, 2).send(2, 3)
PIPE_UNTIMED = world(SIZE, timing=False).repeat(5, _pipeline).send(0, 1).send(1, 2).send(2, 3)


def _chain(head_send: str | None, head_recv: str) -> Callable[[dict[int, Dump]], None]:
    """The last round of a 0->1->2->3 pipeline stops at the transfer 0->1: rank 1 waits in its recv
    (``head_recv``) and so never posts its send to 2; rank 2 waits in its recv from 1 and never posts its
    send to 3; rank 3 waits in its recv from 2. ``head_send``: the state of rank 0's send (None: rank 0 never
    posted it)."""

    def edit(dumps: dict[int, Dump]) -> None:
        send = _p2p(dumps[0], "send", "0->1")
        if head_send is None:
            dumps[0]["entries"].remove(send)
        elif head_send != "completed":
            _open(send, head_send)
        _open(_p2p(dumps[1], "recv", "1<-0"), head_recv)
        dumps[1]["entries"].remove(_p2p(dumps[1], "send", "1->2"))
        _open(_p2p(dumps[2], "recv", "2<-1"), "scheduled")
        dumps[2]["entries"].remove(_p2p(dumps[2], "send", "2->3"))
        _open(_p2p(dumps[3], "recv", "3<-2"), "scheduled")

    return edit


# One group for all: all_reduce, then recv from i-1 / send to i+1, then all_reduce (a pipeline stage whose next
# step needs the activation it receives). ProcessGroupNCCL records p2p ops and collectives in the same ring
# (FlightRecorder::record from ProcessGroupNCCL::collective and ::pointToPoint), so record ids order them.
PIPE_AR = world(SIZE, timing=True).repeat(5, _pipeline).send(0, 1).send(1, 2).send(2, 3).all_reduce()
# the same with the all_reduce in a group of its own ("dp"): p2p in pg 0, the collective in pg 1
PIPE_AR_DP = (
    world(SIZE, timing=True)
    .group("dp", ranks=list(range(SIZE)))
    .repeat(5, lambda x: x.send(0, 1).send(1, 2).send(2, 3).all_reduce(group="dp"))
    .send(0, 1)
    .send(1, 2)
    .send(2, 3)
    .all_reduce(group="dp")
)


def _last_all_reduce(d: Dump) -> dict[str, Any]:
    found: list[dict[str, Any]] = [e for e in d["entries"] if e["profiling_name"] == "nccl:all_reduce"]
    return found[-1]


def _stall(
    send_state: str | None, recv_state: str, resize: bool = False
) -> Callable[[dict[int, Dump]], None]:
    """The last round stops at the transfer 1->2 of a PIPE_AR pipeline: rank 2 waits in its recv from 1
    (``recv_state``), so it never posts its send to 3 nor enqueues the all_reduce behind it; rank 3 waits in
    its recv from 2 and never enqueues the all_reduce either. ``send_state``: rank 1's send (None: rank 1,
    its recv from 0 done, never posted it nor the all_reduce). Ranks 0 and 1 wait in the all_reduce.
    ``resize``: rank 1 sends a shape it never sent before (NCCL hangs on the count mismatch)."""

    def edit(dumps: dict[int, Dump]) -> None:
        send = _p2p(dumps[1], "send", "1->2")
        if send_state is None:
            dumps[1]["entries"].remove(send)
            dumps[1]["entries"].remove(_last_all_reduce(dumps[1]))
        else:
            if send_state != "completed":
                _open(send, send_state)
            if resize:
                send["input_sizes"] = send["output_sizes"] = [[8, 4096, 512]]
            _open(_last_all_reduce(dumps[1]), "scheduled")
        head = _last_all_reduce(dumps[0])
        _open(head, "started")
        # the head's send is asynchronous (ProcessGroupNCCL::pointToPoint returns its work at enqueue): it
        # enqueues the all_reduce right behind it, before rank 1 even got its data and posted its own send
        head["time_created_ns"] = _p2p(dumps[0], "send", "0->1")["time_created_ns"] + 20_000_000
        _open(_p2p(dumps[2], "recv", "2<-1"), recv_state)
        dumps[2]["entries"].remove(_p2p(dumps[2], "send", "2->3"))
        _open(_p2p(dumps[3], "recv", "3<-2"), "scheduled")
        for r in (2, 3):
            dumps[r]["entries"].remove(_last_all_reduce(dumps[r]))
        for d in dumps.values():  # pg_status as ProcessGroupNCCL keeps it: the all_reduce's seq per state
            seq = _last_all_reduce(d)["collective_seq_id"]
            state = _last_all_reduce(d)["state"]
            st = d["pg_status"][_last_all_reduce(d)["process_group"][0]]
            st["last_enqueued_collective"] = seq
            st["last_started_collective"] = seq if state in ("started", "completed") else seq - 1
            st["last_completed_collective"] = seq if state == "completed" else seq - 1

    return edit


def _resized(rank: int, kind: str, name: str) -> Callable[[dict[int, Dump]], None]:
    def edit(dumps: dict[int, Dump]) -> None:
        e = _p2p(dumps[rank], kind, name)
        e["input_sizes"] = e["output_sizes"] = [[8, 4096, 512]]

    return edit


def _p2p_cases() -> list[Case]:
    p2p = "send/recv"
    return [
        Case("p2p chain/GPU hang on the receiver [nccl, timing on]", p2p, "p2p chain",
             _build(PIPE, _chain("started", "scheduled")),
             Truth(Status.problem, Category.gpu_hang, (1,), CulpritKind.gpu_hang, "0", hardware=True)),
        Case("p2p chain/network hang at its head [nccl, timing on]", p2p, "p2p chain",
             _build(PIPE, _chain("started", "started")),
             Truth(Status.problem, Category.network_hang, (), CulpritKind.network_hang, "0", hardware=True)),
        Case("p2p chain/sent, never received: GPU hang on the receiver [nccl, timing on]", p2p, "p2p chain",
             _build(PIPE, _chain("completed", "scheduled")),
             Truth(Status.problem, Category.gpu_hang, (1,), CulpritKind.gpu_hang, "0", hardware=True)),
        Case("p2p chain/sent, never received: the receiver stalled [nccl, timing off]", p2p, "p2p chain",
             _build(PIPE_UNTIMED, _chain("completed", "scheduled")),
             Truth(Status.problem, Category.transport_stall, (1,), CulpritKind.transport_stall, "0")),
        Case("p2p chain/both ends posted, no start times [nccl, timing off]", p2p, "p2p chain",
             _build(PIPE_UNTIMED, _chain("scheduled", "scheduled")),
             Truth(Status.inconclusive, Category.inconclusive, (), None, "0")),
        Case("p2p chain/its head never sent [nccl, timing on]", p2p, "p2p chain",
             _build(PIPE, _chain(None, "scheduled")),
             Truth(Status.problem, Category.missing_rank, (0,), CulpritKind.cpu_stuck, "0")),
        Case("p2p pair/the sender changed its shape [nccl]", p2p, "p2p chain",
             _build(PIPE, _resized(1, "send", "1->2")),
             Truth(Status.problem, Category.size_mismatch, (1,), CulpritKind.mismatched_call, "0")),
        Case("p2p pair/the receiver changed its shape [nccl]", p2p, "p2p chain",
             _build(PIPE, _resized(2, "recv", "2<-1")),
             Truth(Status.problem, Category.size_mismatch, (2,), CulpritKind.mismatched_call, "0")),
        Case("p2p chain, one group/GPU hang on the receiver, the all_reduce behind it [nccl, timing on]", p2p,
             "p2p chain", _build(PIPE_AR, _stall("started", "scheduled")),
             Truth(Status.problem, Category.gpu_hang, (2,), CulpritKind.gpu_hang, "0", hardware=True)),
        Case("p2p chain, one group/network hang, the all_reduce behind it [nccl, timing on]", p2p, "p2p chain",
             _build(PIPE_AR, _stall("started", "started")),
             Truth(Status.problem, Category.network_hang, (), CulpritKind.network_hang, "0", hardware=True)),
        Case("p2p chain, one group/the sender never posted, the all_reduce behind it [nccl, timing on]", p2p,
             "p2p chain", _build(PIPE_AR, _stall(None, "scheduled")),
             Truth(Status.problem, Category.missing_rank, (1,), CulpritKind.cpu_stuck, "0")),
        Case("p2p chain, one group/the sender changed its shape, the all_reduce behind it [nccl]", p2p,
             "p2p chain", _build(PIPE_AR, _stall("started", "started", resize=True)),
             Truth(Status.problem, Category.size_mismatch, (1,), CulpritKind.mismatched_call, "0")),
        Case("p2p chain, all_reduce in its own group/GPU hang on the receiver [nccl, timing on]", p2p,
             "p2p chain", _build(PIPE_AR_DP, _stall("started", "scheduled")),
             Truth(Status.problem, Category.gpu_hang, (2,), CulpritKind.gpu_hang, "0", hardware=True)),
        Case("p2p chain, all_reduce in its own group/the sender never posted [nccl, timing on]", p2p,
             "p2p chain", _build(PIPE_AR_DP, _stall(None, "scheduled")),
             Truth(Status.problem, Category.missing_rank, (1,), CulpritKind.cpu_stuck, "0")),
    ]  # fmt: skip


# --- principle 4 ---------------------------------------------------------------------------------------------
def _cross_group_cases() -> list[Case]:
    out = []
    for backend in ("gloo", "nccl"):
        w = world(SIZE, backend=backend).group("ep", ranks=[1, 2, 3], desc="undefined")
        w = w.repeat(6, lambda x: x.all_reduce().all_reduce(group="ep").barrier())
        pair = world(SIZE, backend=backend).group("a", ranks=[0, 1], desc="undefined")
        pair = pair.group("b", ranks=[2, 3], desc="undefined")
        pair = pair.repeat(6, lambda x: x.all_reduce(group="a").all_reduce(group="b").all_reduce())
        # a subgroup called once every 32 calls: the kept detail (the last 48 entries a group) holds too little
        # history to tell a skip from the waiters' order, so the ranks wait on each other in a cycle
        sparse = world(SIZE, backend=backend).group("a", ranks=[0, 1], desc="undefined")
        sparse = sparse.repeat(5, lambda x: x.all_reduce(steps=30).all_reduce(group="a").barrier())
        out += [
            Case(f"sparse subgroup/skipped, a wait cycle [{backend}, desc undefined]", "all_reduce",
                 "cross-group", _build(sparse.rank(1).skips(4, group="a")),
                 Truth(Status.problem, Category.missing_rank, (1,), CulpritKind.took_another_path, "1", 4)),
            Case(f"sparse subgroup/cpu-stuck [{backend}, desc undefined]", "all_reduce", "cross-group",
                 _build(sparse.rank(1).stops_at(4, group="a")),
                 Truth(Status.problem, Category.missing_rank, (1,), CulpritKind.cpu_stuck, "1", 4)),
            Case(f"subgroup/skipped while the world waits [{backend}, desc undefined]", "all_reduce",
                 "cross-group", _build(w.rank(3).skips(4, group="ep")),
                 Truth(Status.problem, Category.missing_rank, (3,), CulpritKind.took_another_path, "1", 4)),
            Case(f"subgroup/cpu-stuck before it [{backend}, desc undefined]", "all_reduce", "cross-group",
                 _build(w.rank(3).stops_at(4, group="ep")),
                 Truth(Status.problem, Category.missing_rank, (3,), CulpritKind.cpu_stuck, "1", 4)),
            Case(f"two subgroups/one skipped [{backend}, desc undefined]", "all_reduce", "cross-group",
                 _build(pair.rank(1).skips(4, group="a")),
                 Truth(Status.problem, Category.missing_rank, (1,), CulpritKind.took_another_path, "1", 4)),
        ]  # fmt: skip
    # a subgroup's first call: the member that never enqueued it holds no entry of it, and only its gloo
    # pg_config ('[]': "in a subgroup") says it belongs there
    first = world(SIZE, backend="gloo").group("sub", ranks=[0, 1], desc="undefined")
    first = first.repeat(4, lambda x: x.all_reduce().barrier()).all_reduce(group="sub")
    first = first.repeat(2, lambda x: x.all_reduce().barrier())
    out.append(
        Case("subgroup/cpu-stuck before its first call [gloo, pg_config '[]']", "all_reduce", "cross-group",
             _build(first.rank(1).stops_at(1, group="sub")),
             Truth(Status.problem, Category.missing_rank, (1,), CulpritKind.cpu_stuck, "1", 1)),
    )  # fmt: skip
    unused = world(SIZE, backend="gloo").group("a", ranks=[0, 1]).group("b", ranks=[2, 3])
    unused = unused.repeat(4, lambda x: x.all_reduce().all_reduce(group="a"))
    out.append(
        Case("subgroup/another created, never called [gloo, pg_config '[]']", "all_reduce", "cross-group",
             _build(unused), Truth(Status.healthy, Category.healthy)),
    )  # fmt: skip
    return out


# --- principle 6 ---------------------------------------------------------------------------------------------
def _no_culprit_cases() -> list[Case]:
    sub = world(SIZE, timing=True, queued=2).group("tp", ranks=[0, 1]).repeat(
        6, lambda x: x.all_reduce(group="tp").all_reduce()
    )
    return [
        Case("network hang/in a subgroup, the world queued behind [nccl, timing on]", "all_reduce",
             "no culprit", _build(sub.all_started_none_completed_at(5, group="tp", ranks=[0])),
             Truth(Status.problem, Category.network_hang, (), CulpritKind.network_hang, "1", 5, hardware=True)),
    ]  # fmt: skip


def cases() -> list[Case]:
    """The cases of this module, in a stable order."""
    return _retired_cases() + _p2p_cases() + _cross_group_cases() + _no_culprit_cases()
