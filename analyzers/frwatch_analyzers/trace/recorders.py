"""Which recorder wrote a dump, and what its fields then mean: one table of ``profiling_name`` prefixes.

Three kinds of recorder write the same dump schema (``version`` "2.10") with different meanings:

- **built-in** (torch <= 2.14 ``ProcessGroupNCCL`` / ``ProcessGroupGloo``, XPU's ``xccl``): ``nccl:`` entries
  carry CUDA events (``completed``; ``started`` with ``TORCH_NCCL_ENABLE_TIMING``); ``gloo:`` entries stay
  ``scheduled`` and are retired when the collective completed (FACTS.md section 1, observed on 2.13).
- **c10d hook** (torch 2.15 ``c10d::FlightRecorderHook``, pytorch #189363 / #190738; one recorder per
  backend; ``nccl`` resolves to ``nccl2``, #192281): ``FlightRecorderHook.cpp`` records with null start and
  end events (every entry stays ``scheduled``); its post-hook fires "after an operation is issued"
  (``Hooks`` header), so ``retired`` means the call returned, not that the collective completed; its
  ``pg_status`` counts ``op_id`` (``lastEnqueuedSeq = args.op_id``), not ``collective_seq_id``; its early op
  names are ``allreduce``, ``allgather``, ``alltoall`` (``hookOpName``).
- **torchcomms** (meta-pytorch/torchcomms ``comms/torchcomms/hooks/fr/FlightRecorder.cpp``): the group's desc
  is the backend and the name's prefix (``pg_desc + ":" + opToString``); ``collective_seq_id`` is one
  counter for every communicator of the process; ``pg_status`` is empty; ``send``/``recv`` carry no peer
  and ``is_p2p`` is false; CUDA communicators record events (states are real); before torchcomms #2013
  synchronous ops were not retired (their post-hook waited for the watchdog); since, they are retired when
  the call returns.

:func:`normalize` turns a dump into the built-in meaning where the fields allow it (op spelling, a group
status that counts op ids, torchcomms' counters and retirement); :func:`issue_only` names the ranks whose
recorder cannot show completion, so a verdict never calls them healthy or names a GPU hang from them.
Pure: no I/O; hostile fields are left for the summarizer to name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..base.safe_text import printable
from ..verdict import Status, Verdict

Kind = Literal["built-in", "hook", "torchcomms"]


@dataclass(frozen=True)
class Recorder:
    prefix: str
    kind: Kind  # what an entry of this prefix is when not written by torchcomms
    frtrace: str  # what torch's fr_trace does with the prefix (its Op allowlist; #180268, #179753)
    source: str


_NEW = "accepted (#180268, #179753; torch 2.13.0's fr_trace already has it)"
_NEVER = "not in fr_trace's allowlist (nccl, xccl, ncclx, gloo, rccl, rcclx, mccl, hccl): it asserts"
PREFIXES: dict[str, Recorder] = {
    r.prefix: r
    for r in (
        Recorder(
            "nccl",
            "built-in",
            "accepted",
            "ProcessGroupNCCL (torch <= 2.14; 2.15 with TORCH_DIST_USE_NCCL2=0)",
        ),
        Recorder("xccl", "built-in", "accepted", "ProcessGroupXCCL (XPU)"),
        Recorder("gloo", "built-in", _NEW, "ProcessGroupGloo (2.15: the c10d hook, #190738)"),
        Recorder("nccl-legacy", "built-in", _NEVER, "backend 'nccl-legacy' (torch 2.15, #191272)"),
        Recorder("nccl2", "hook", _NEVER, "torch 2.15 default 'nccl' (#192281) through FlightRecorderHook"),
        Recorder("ncclx", "hook", _NEW, "NCCLX backend (c10d hook or torchcomms)"),
        Recorder("rccl", "hook", _NEW, "ROCm RCCL (c10d hook or torchcomms)"),
        Recorder("rcclx", "hook", _NEW, "ROCm RCCLX (c10d hook or torchcomms)"),
        Recorder("mccl", "hook", _NEW, "MTIA MCCL (c10d hook or torchcomms)"),
        Recorder("hccl", "hook", _NEW, "Ascend HCCL (c10d hook or torchcomms)"),
        Recorder("c10d", "hook", _NEVER, "FlightRecorderHook's early name 'c10d:<op>' (43f4dc0)"),
    )
}

# the hook's early spelling (hookOpName) -> the built-in recorders' names, which the analyzer's rules use
_OP_ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "alltoall": "all_to_all",
    "allreduce_coalesced": "allreduce_coalesced",
    "allgather_base": "_allgather_base",
    "reduce_scatter_base": "_reduce_scatter_base",
    "alltoall_base": "all_to_all_single",
}
_P2P = ("send", "recv")


def prefix_of(profiling_name: object) -> str:
    return (
        profiling_name.split(":", 1)[0] if isinstance(profiling_name, str) and ":" in profiling_name else ""
    )


def kind_of(dump: Mapping[str, Any]) -> Kind:
    """torchcomms when every group's desc is the prefix its entries carry; else the prefix table's kind
    (an unknown prefix: built-in, whose fields are read as written)."""
    entries = dump.get("entries")
    if not isinstance(entries, list) or not entries or not isinstance(entries[0], dict):
        return "built-in"
    first = entries[0]
    prefix = prefix_of(first.get("profiling_name"))
    pg = first.get("process_group")
    if (
        prefix
        and isinstance(pg, (list, tuple))
        and len(pg) == 2
        and pg[1] == prefix
        and not dump.get("pg_status")
    ):
        return "torchcomms"
    rec = PREFIXES.get(prefix)
    return rec.kind if rec is not None else "built-in"


def normalize(dump: dict[str, Any]) -> dict[str, Any]:
    """The dump with built-in meanings (a new dict where anything changes; the input is not mutated)."""
    entries = dump.get("entries")
    if not isinstance(entries, list) or not entries:
        return dump
    kind = kind_of(dump)
    if kind == "built-in":
        return dump
    out = dict(dump)
    new = [dict(e) if isinstance(e, dict) else e for e in entries]
    for e in new:
        if isinstance(e, dict):
            name = e.get("profiling_name")
            if isinstance(name, str) and ":" in name:
                p, op = name.split(":", 1)
                head, sep, tail = op.partition(" ")
                if head in _OP_ALIASES:
                    e["profiling_name"] = f"{p}:{_OP_ALIASES[head]}{sep}{tail}"
    if kind == "hook":
        out["pg_status"] = _status_counting_seqs(dump.get("pg_status"), new)
    else:
        new = _torchcomms(new)
        out["pg_status"] = {}
    out["entries"] = new
    return out


def _status_counting_seqs(status: Any, entries: list[Any]) -> Any:
    """Keep a group's status only where it counts collective sequence numbers (its last enqueued is the
    newest collective the ring holds of that group); the hook's op-id counters are dropped."""
    if not isinstance(status, dict):
        return status
    newest: dict[str, int] = {}
    for e in entries:
        if isinstance(e, dict) and not e.get("is_p2p") and type(e.get("collective_seq_id")) is int:
            key = str(e.get("pg_id"))
            newest[key] = max(newest.get(key, -1), e["collective_seq_id"])
    return {
        k: v
        for k, v in status.items()
        if isinstance(v, dict) and str(v.get("last_enqueued_collective")) == str(newest.get(str(k), "absent"))
    }


def _torchcomms(entries: list[Any]) -> list[Any]:
    """Per-communicator sequence numbers, peerless p2p left out of the collective alignment, and ``retired``
    meaning completed (torchcomms #2013, pytorch #179842: "Invoke post-hooks synchronously for sync ops")."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    kept: list[Any] = []
    for e in entries:
        if not isinstance(e, dict):
            kept.append(e)
            continue
        name = e.get("profiling_name")
        op = name.split(":", 1)[1].split(" ", 1)[0] if isinstance(name, str) and ":" in name else ""
        if op in _P2P:
            continue  # no peer is recorded: a send and a recv cannot be paired, only counted
        kept.append(e)
        groups.setdefault(e.get("pg_id"), []).append(e)
    wrapped = any(isinstance(e, dict) and e.get("record_id") not in (None, 0) for e in entries[:1])
    for members in groups.values():
        if len(groups) > 1 and not wrapped:
            for i, e in enumerate(members):
                e["collective_seq_id"] = i  # the k-th call of this communicator on every member
    if any(isinstance(e, dict) and e.get("state") in ("started", "completed") for e in kept):
        # CUDA communicators record events: the state says completion. Since #2013 a synchronous op is retired
        # when its call returns (not when the GPU finished), before it when the watchdog got to it: neither
        # is completion, so an entry is retired exactly when it completed, as the built-in NCCL recorder does
        for e in kept:
            if isinstance(e, dict):
                e["retired"] = e.get("state") == "completed"
        return kept
    if not any(isinstance(e, dict) and e.get("retired") is True for e in kept):
        # nothing retired and nothing completed: torchcomms before #2013, whose synchronous ops were never
        # retired; a synchronous call returned before its thread issued the next, so every call but the last
        # of each communicator is done (the last one's state is unknown and stays unretired)
        for members in groups.values():
            for e in members[:-1]:
                e["retired"] = True
    return kept


def issue_only(traces: Mapping[int, Any]) -> list[int]:
    """The ranks whose every group was recorded by a c10d hook recorder: their entries say what was issued,
    never what completed (``backend`` is the prefix, ``desc`` equal to it means torchcomms)."""
    out = []
    for rank, t in traces.items():
        pgs = list(getattr(t, "pgs", {}).values())
        if pgs and all(
            PREFIXES.get(pg.backend) is not None
            and PREFIXES[pg.backend].kind == "hook"
            and pg.desc != pg.backend
            for pg in pgs
        ):
            out.append(rank)
    return sorted(out)


def issue_only_limits(verdict: Verdict, traces: Mapping[int, Any]) -> Verdict:
    """A healthy-looking verdict from ranks whose recorder shows only what was issued is inconclusive: the
    c10d hook (torch 2.15's nccl2 and every hook backend) records no start or end, and retires an op when
    the call returns, so a collective that hangs after issue (a GPU or the network) looks like one that
    completed. What the dumps still show (who issued what, in which order, with which sizes) is kept."""
    hooked = issue_only(traces)
    if verdict.status != Status.healthy or not hooked:
        return verdict
    prefixes = sorted({pg.backend for r in hooked for pg in traces[r].pgs.values()})
    names = ", ".join(f"{p}:" for p in prefixes)
    headline = (
        f"inconclusive: {len(verdict.ranks_seen)} ranks agree on every collective they issued, but {names} "
        "(c10d hook recorder) records no completion: a collective that hangs after issue looks the same"
    )
    summary = (
        f"{verdict.summary} The {names} recorder writes no start or end and retires an op when the call "
        "returns (FlightRecorderHook): these dumps can show a rank that never issued a collective or issued "
        "a different one, never a GPU or network hang. If the job timed out, read the watchdog and abort "
        "messages (nccl2 dumps from its abort hook on TIMEDOUT/ERROR)."
    ).strip()
    return verdict.made_inconclusive(headline, summary, printable(f"inconclusive: ranks agree; {names} records no completion", 120))
