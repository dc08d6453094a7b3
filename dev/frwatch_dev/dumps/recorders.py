"""Rewrite builder dumps (legacy ProcessGroupNCCL, ``nccl:``) into what each newer recorder writes.

torch 2.15 and torchcomms cannot be installed here (FACTS.md section 6), so their dumps are built from
their source. Every rule below names the lines it rests on; nothing here is a real dump of those recorders.

**c10d hook recorder** (``c10d::FlightRecorderHook``, pytorch #189363 / #190738; read at
pytorch/pytorch ``torch/csrc/distributed/c10d/FlightRecorderHook.cpp`` @43f4dc0):

- ``onPre``: ``recordWithResetEnabled(... /*start=*/nullptr, /*end=*/nullptr ...)`` with the comment "Null
  start/end events: no GPU duration (same as ProcessGroupGloo's built-in FR recording)": every entry stays
  ``scheduled``, both discovery times are null, no ``duration_ms``.
- ``onPre``: ``collective_seq = is_p2p ? collective_seq_ : ++collective_seq_`` (a per-group counter);
  ``pg_status_->lastEnqueuedSeq = args.op_id``; ``onPost``: ``lastCompletedSeq = args.op_id`` and
  ``retire_id(...)``: the group status counts op ids, not collective sequence numbers, and nothing sets
  ``lastStartedSeq`` (-1).
- ``hookOpName``: ``allreduce``, ``allgather``, ``alltoall``, ``reduce_scatter``, ``broadcast`` ... and the
  name ``c10d:<op>`` in that version; FACTS.md section 6 (#192233) says later versions write the backend
  (``nccl2:all_reduce``). Both spellings are built (``hook_spelling``).
- the hook's ``Hooks`` header says the post-hook fires "after an operation is issued": ``retired`` is set
  when the call returned, not when the GPU finished. An async NCCL-class op (every nccl2 op) is retired
  at issue, so a GPU hang leaves every issued entry retired on every rank.
- the constructor records ``pg_config`` from ``global_ranks_in_group`` (``record_pg_ranks``): a sane
  ``pg_config`` also for gloo (unlike 2.13's gloo).

**torchcomms recorder** (meta-pytorch/torchcomms ``comms/torchcomms/hooks/fr/FlightRecorder.cpp`` @59426ba):

- ``FlightRecorderHook::onPreHook``: ``profiling_name = pg_desc + ":" + opToString(name)`` with
  ``pg_desc = comm->getBackend()`` and ``pg_name = (comm_name, pg_desc)``: the group's desc is the backend;
  ``opToString`` (``TorchCommHooks.hpp``) spells ``all_reduce``, ``all_gather_single``, ``send`` ...
- ``FlightRecorder::record``: ``collective_seq_id = collective_seq_id_++``: **one counter for every
  communicator of the process**, from 0; ``pg_status`` is ``nullptr`` (``getPgStatus`` skips it: ``{}``);
  ``pg_id`` is the registration count.
- the dict writer: ``p2p_seq_id`` is always 0 and ``is_p2p`` always false, also for ``send``/``recv``,
  which carry no peer in their name.
- CUDA communicators record start/end events (``onPreHook``), so states ``started``/``completed`` exist;
  ``retire_id`` runs from the post-hook (``onPostHook``); before torchcomms #2013 (pytorch #179842, April 2026)
  a synchronous op's post-hook waited for the watchdog, so sync ops were not retired at dump time; since, the
  post-hook of a sync op runs when the call returns ("complete from the user's perspective"), so a sync op
  on a CUDA stream is retired whether or not the GPU finished it.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from .program import Dump

Style = Literal["legacy", "hook", "torchcomms"]

HOOK_SPELLING = {  # FlightRecorderHook.cpp hookOpName (43f4dc0)
    "all_reduce": "allreduce",
    "all_gather": "allgather",
    "all_to_all": "alltoall",
    "all_to_all_single": "alltoall",
    "_allgather_base": "allgather",
    "_reduce_scatter_base": "reduce_scatter",
}


def as_recorder(
    dumps: dict[int, Dump],
    prefix: str,
    style: Style,
    *,
    hook_spelling: bool = False,
    retired_sync_ops: bool = True,
) -> dict[int, Dump]:
    """``dumps`` (the builder's, ``nccl:`` with states) as the ``style`` recorder with ``prefix`` writes them.

    ``hook_spelling``: the hook's early op names (``c10d:allreduce``); ``retired_sync_ops=False``: torchcomms
    before #2013 (no entry is ever retired: every op of the scenarios is a synchronous call)."""
    if style == "legacy":
        return {r: _relabel(d, prefix) for r, d in dumps.items()}
    if style == "hook":
        return {r: _hook(d, prefix, hook_spelling) for r, d in dumps.items()}
    return {r: _torchcomms(d, prefix, retired_sync_ops) for r, d in dumps.items()}


def _op(entry: dict[str, Any]) -> str:
    return str(entry["profiling_name"]).split(":", 1)[1]


def _relabel(d: Dump, prefix: str) -> Dump:
    out = copy.deepcopy(d)
    for e in out["entries"]:
        e["profiling_name"] = f"{prefix}:{_op(e)}"
    return out


def _hook(d: Dump, prefix: str, spelling: bool) -> Dump:
    out = copy.deepcopy(d)
    last_op: dict[int, int] = {}
    for e in out["entries"]:
        op = _op(e)
        if spelling:
            head = op.partition(" ")[0]  # p2p names keep no peer in the hook: "send"
            op = HOOK_SPELLING.get(head, head)
        e["profiling_name"] = f"{prefix}:{op}"
        e["state"] = "scheduled"
        e["time_discovered_started_ns"] = None
        e["time_discovered_completed_ns"] = None
        e.pop("duration_ms", None)
        e["retired"] = True  # post-hook "after an operation is issued": every recorded op was issued
        e["op_id"] = int(e["record_id"]) + 1000  # op ids are not collective sequence numbers
        last_op[int(e["pg_id"])] = e["op_id"]
    out["pg_status"] = {
        str(pg): {
            "last_enqueued_collective": op,
            "last_started_collective": -1,
            "last_completed_collective": op,
        }
        for pg, op in last_op.items()
    }
    out["comm_lib_version"] = ""
    return out


def _torchcomms(d: Dump, backend: str, retired_sync_ops: bool) -> Dump:
    out = copy.deepcopy(d)
    pg_ids: dict[str, int] = {}
    entries = []
    for seq, e in enumerate(out["entries"]):
        op = _op(e).split(" ", 1)[0]
        name = str(e["process_group"][0])
        e["process_group"] = (name, backend)
        e["profiling_name"] = f"{backend}:{op}"
        e["pg_id"] = pg_ids.setdefault(name, len(pg_ids))
        e["collective_seq_id"] = seq  # one counter for every communicator, from 0
        e["p2p_seq_id"] = 0
        e["is_p2p"] = False
        e["timeout_ms"] = 600000
        if backend == "gloo":  # a CPU communicator: onPreHook creates events for CUDA devices only
            e["state"] = "scheduled"
            e["time_discovered_started_ns"] = None
            e["time_discovered_completed_ns"] = None
            e.pop("duration_ms", None)
        if not retired_sync_ops:
            e["retired"] = False  # before #2013: a sync op's post-hook waited for the watchdog
        elif backend != "gloo":
            e["retired"] = True  # since #2013 a sync op is retired when its call returns, done on the GPU or not
        entries.append(e)
    out["entries"] = entries
    out["pg_status"] = {}
    out["pg_config"] = {
        k: {"name": v["name"], "desc": backend, "ranks": v["ranks"]} for k, v in out["pg_config"].items()
    }
    return out
