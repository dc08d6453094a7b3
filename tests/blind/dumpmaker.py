"""A small writer of Flight Recorder dumps in torch 2.13's format (version "2.10"), for the blind cases.

Built from torch's source and a real torch 2.13 gloo dump only (never from frwatch's own dump builder):
- entry keys and their order: `FlightRecorder<EventType>::dump_entries` (torch/csrc/distributed/c10d/
  FlightRecorder.cpp, c10d): frames, record_id, pg_id, process_group (uid, desc), thread_name, thread_id,
  collective_seq_id, p2p_seq_id, op_id, profiling_name, time_created_ns, duration_ms (only when the entry
  has a duration: NCCL with TORCH_NCCL_ENABLE_TIMING=1, once completed), input_sizes, input_dtypes,
  output_sizes, output_dtypes, state, time_discovered_started_ns, time_discovered_completed_ns, retired,
  timeout_ms, is_p2p.
- state: "completed" once the end event is seen, "started" once the start event is seen (a start event
  exists only with timing on), else "scheduled". Gloo entries are always "scheduled" with null times.
- record_id counts every record of the process (all groups); op_id and collective_seq_id count per group;
  a p2p op bumps p2p_seq_id and leaves collective_seq_id where it was (test_c10d_nccl's "we don't increment
  collective_seq_id for p2p ops"); ops inside a coalescing region share one collective_seq_id, are
  recorded with no events (so they stay "scheduled" and are never retired) and the region ends with a
  "nccl:coalesced" entry that carries the state (ProcessGroupNCCL::startCoalescing / endCoalescing).
- p2p names: "nccl:send {rank}->{dst}", "nccl:recv {rank}<-{src}"; inputs and outputs both the tensor.
- NCCL gather on a non-root: one undefined tensor as output (sizes [], dtype "Undefined");
  scatter mirrors it on inputs (ProcessGroupNCCL::gather / scatter: `outputs.emplace_back()`).
Pickles are written with protocol 2 from plain dicts, lists, tuples, str, int, float, bool and None.
"""

from __future__ import annotations

import functools
import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

T0 = 1_795_800_000_000_000_000  # ns; a fixed epoch so the files are byte-identical on every run
TORCH_DIR = "/usr/local/lib/python3.11/site-packages/torch/distributed"
SCRIPT = "/workspace/train.py"


@functools.cache
def frames(op: str, line: int) -> list[dict[str, Any]]:
    """The Python frames torch records for a collective called from the training script at `line`: one shared
    list per call site, as torch's dump shares symbolized frames (so the pickle memoizes them)."""
    api = {"all_reduce": 3245, "all_gather": 3926, "broadcast": 3145, "gather": 4290, "scatter": 4410,
           "all_to_all": 5023, "send": 2470, "recv": 2540, "coalesced": 2740, "reduce_scatter": 4700}
    return [
        {"name": op, "filename": f"{TORCH_DIR}/distributed_c10d.py", "line": api.get(op, 3000)},
        {"name": "wrapper", "filename": f"{TORCH_DIR}/c10d_logger.py", "line": 83},
        {"name": "train_step", "filename": SCRIPT, "line": line},
        {"name": "main", "filename": SCRIPT, "line": 211},
        {"name": "<module>", "filename": SCRIPT, "line": 240},
    ]


@dataclass
class Group:
    uid: str
    desc: str
    ranks: list[int]


@dataclass
class Rank:
    """One rank's recorder. Ops are appended in the order the rank issued them."""

    rank: int
    groups: list[Group]
    backend: str = "nccl"
    timing: bool = False
    buffer: int = 2000
    timeout_ms: int = 600000
    comm_lib_version: str = "2.21.5"
    entries: list[dict[str, Any]] = field(default_factory=list)
    _record: int = 0
    _seq: dict[str, int] = field(default_factory=dict)
    _p2p: dict[str, int] = field(default_factory=dict)
    _op: dict[str, int] = field(default_factory=dict)
    _status: dict[str, dict[str, int]] = field(default_factory=dict)

    def group(self, uid: str) -> Group:
        return next(g for g in self.groups if g.uid == uid)

    def _times(self, state: str) -> tuple[int, int | None, int | None, float | None]:
        created = T0 + self._record * 7_000_000 + self.rank * 13_000
        if self.backend == "gloo":
            return created, None, None, None
        started = created + 900_000 if self.timing and state in ("started", "completed") else None
        completed = created + 2_900_000 if state == "completed" else None
        duration = 2.0 + (self._record % 5) * 0.125 if self.timing and state == "completed" else None
        return created, started, completed, duration

    def _entry(self, *, pg: str, name: str, ins: list[list[int]], outs: list[list[int]],
               in_dtypes: list[str], out_dtypes: list[str], state: str, retired: bool | None, p2p: bool,
               line: int, op_for_frames: str, events: bool = True) -> dict[str, Any]:
        shown = "scheduled" if self.backend == "gloo" else state if events else "scheduled"
        created, started, completed, duration = self._times(shown)
        if retired is None:
            retired = shown == "completed" if self.backend != "gloo" else state == "completed"
        g = self.group(pg)
        e: dict[str, Any] = {
            "frames": frames(op_for_frames, line),
            "record_id": self._record,
            "pg_id": [x.uid for x in self.groups].index(pg),
            "process_group": (g.uid, g.desc),
            "thread_name": "pt_main_thread" if self.backend != "gloo" else "python",
            "thread_id": str(140_230_000_000_000 + self.rank),
            "collective_seq_id": self._seq.get(pg, 0),
            "p2p_seq_id": self._p2p.get(pg, 0),
            "op_id": self._op.get(pg, 0),
            "profiling_name": name,
            "time_created_ns": created,
        }
        if duration is not None:
            e["duration_ms"] = duration
        e.update({
            "input_sizes": ins, "input_dtypes": in_dtypes, "output_sizes": outs, "output_dtypes": out_dtypes,
            "state": shown, "time_discovered_started_ns": started, "time_discovered_completed_ns": completed,
            "retired": retired, "timeout_ms": self.timeout_ms, "is_p2p": p2p,
        })
        self._record += 1
        self.entries.append(e)
        return e

    def _note_status(self, pg: str, seq: int, state: str) -> None:
        st = self._status.setdefault(pg, {"last_enqueued_collective": -1, "last_started_collective": -1,
                                          "last_completed_collective": -1})
        st["last_enqueued_collective"] = max(st["last_enqueued_collective"], seq)
        if self.backend != "gloo" and self.timing and state in ("started", "completed"):
            st["last_started_collective"] = max(st["last_started_collective"], seq)
        if state == "completed":
            st["last_completed_collective"] = max(st["last_completed_collective"], seq)

    def coll(self, op: str, ins: list[list[int]], outs: list[list[int]] | None = None, *, pg: str = "0",
             state: str = "completed", dtype: str = "Float", in_dtypes: list[str] | None = None,
             out_dtypes: list[str] | None = None, line: int = 100, retired: bool | None = None) -> None:
        """A collective: bumps the group's collective_seq_id and op_id."""
        outs = ins if outs is None else outs
        self._seq[pg] = self._seq.get(pg, 0) + 1
        self._op[pg] = self._op.get(pg, 0) + 1
        self._entry(pg=pg, name=f"{self.backend}:{op}", ins=ins, outs=outs,
                    in_dtypes=in_dtypes if in_dtypes is not None else [dtype] * len(ins),
                    out_dtypes=out_dtypes if out_dtypes is not None else [dtype] * len(outs),
                    state=state, retired=retired, p2p=False, line=line, op_for_frames=op)
        self._note_status(pg, self._seq[pg], state)

    def p2p(self, kind: str, peer: int, size: list[int], *, pg: str = "0", state: str = "completed",
            dtype: str = "Float", line: int = 150) -> None:
        """A send or recv outside a coalescing region: bumps p2p_seq_id and op_id, not collective_seq_id."""
        self._p2p[pg] = self._p2p.get(pg, 0) + 1
        self._op[pg] = self._op.get(pg, 0) + 1
        name = f"nccl:send {self.rank}->{peer}" if kind == "send" else f"nccl:recv {self.rank}<-{peer}"
        self._entry(pg=pg, name=name, ins=[size], outs=[size], in_dtypes=[dtype], out_dtypes=[dtype],
                    state=state, retired=None, p2p=True, line=line, op_for_frames=kind)

    def coalesced(self, ops: list[tuple[str, list[list[int]]]], *, pg: str = "0", state: str = "completed",
                  dtype: str = "Float", line: int = 180) -> None:
        """A `_coalescing_manager` region of collectives: one seq for the region, no events on its ops."""
        self._seq[pg] = self._seq.get(pg, 0) + 1
        for i, (op, sizes) in enumerate(ops):
            self._op[pg] = self._op.get(pg, 0) + 1
            self._entry(pg=pg, name=f"nccl:{op}", ins=sizes, outs=sizes, in_dtypes=[dtype] * len(sizes),
                        out_dtypes=[dtype] * len(sizes), state="scheduled", retired=False, p2p=False,
                        line=line + 1 + i, op_for_frames=op, events=False)
        self._entry(pg=pg, name="nccl:coalesced", ins=[], outs=[], in_dtypes=[], out_dtypes=[], state=state,
                    retired=None, p2p=False, line=line, op_for_frames="coalesced")
        self._note_status(pg, self._seq[pg], state)

    def pg_config(self) -> dict[str, dict[str, str]]:
        if self.backend == "gloo":  # torch 2.13 gloo: one '' key; '[]' once a subgroup exists (FACTS.md 1)
            ranks = "[]" if len(self.groups) > 1 else str(self.groups[0].ranks)
            return {"": {"name": "", "desc": "", "ranks": ranks}}
        return {g.uid: {"name": g.uid, "desc": g.desc, "ranks": str(g.ranks)} for g in self.groups}

    def dump(self) -> dict[str, Any]:
        kept = self.entries[-self.buffer:]
        return {
            "version": "2.10",
            "pg_config": self.pg_config(),
            "comm_lib_version": self.comm_lib_version if self.backend != "gloo" else "",
            "pg_status": {pg: dict(st) for pg, st in self._status.items()},
            "entries": kept,
        }


def write_pickle(path: Path, dump: dict[str, Any]) -> None:
    path.write_bytes(pickle.dumps(dump, protocol=2))


def write_json(path: Path, dump: dict[str, Any]) -> None:
    """As `_dump_fr_trace_json` writes it: no frames, 0 for a missing time, pg_status values as strings,
    process_group as a list, an (empty) nccl_comm_state, keys sorted."""
    entries = []
    for e in dump["entries"]:
        j = {k: v for k, v in e.items() if k != "frames"}
        j["process_group"] = list(e["process_group"])
        for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
            j[k] = j[k] or 0
        entries.append(j)
    out = {
        "comm_lib_version": dump["comm_lib_version"],
        "entries": entries,
        "nccl_comm_state": {},
        "pg_config": dump["pg_config"],
        "pg_status": {pg: {k: str(v) for k, v in st.items()} for pg, st in dump["pg_status"].items()},
        "version": dump["version"],
    }
    path.write_text(json.dumps(out, sort_keys=True, separators=(",", ":")))
