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
    world(4, queued=3, timing=False)...                          # a queue behind the hang; no start times
    world(4).all_to_all_single(splits=[[1, 2], ...]).gather(root=2).split("tp", [[0, 1], [2, 3]])

Semantics, chosen to match what the recorder shows on a real hang (:mod:`.simulate` says more):

- Each rank issues the program ops it takes part in, with its faults applied. NCCL pairs the k-th
  collective of each member of a group; a call completes when every member issued it, they are
  compatible and no fault holds it. A rank waits in each call until it completes; a blocked rank still
  enqueues ``queued`` more ops (``scheduled``), and the ranks it leaves waiting block in turn.
- Faults address an op by ``(group, collective_seq_id)`` of the program. A fault beyond the program's last
  collective of that group extends the program by repeating that group's last collective, so
  ``all_reduce(steps=40).rank(7).stops_at(41)`` means "40 good steps, the 41st waits for rank 7".
- A type, size, dtype or tensor-count fault hangs by default (``hangs=False``: the op completes, silently
  wrong); a call-site fault does not hang by default; a skip or an extra call hangs when the calls it
  pairs differ.
- ``backend="nccl"`` (default): states ``scheduled``/``started``/``completed``, discovery timestamps,
  ``duration_ms`` on retired completed ops, a sane ``pg_config``, p2p and coalesced ops.
  ``backend="gloo"``: the quirks of FACTS.md: state always ``scheduled``, ``None`` timestamps,
  ``last_started_collective`` -1, the broken ``pg_config``, ``p2p_seq_id`` 0, no p2p.
  What each collective records, per backend, is in :mod:`.kinds`.
- ``pg_id`` is the rank's own counter of the groups it belongs to (as ``ProcessGroupNCCL::uid_``), so it
  can differ across ranks for the same group; the group's global name is ``process_group[0]``.
- The ring buffer keeps each rank's last ``buffer_size`` entries; record ids count every entry a rank
  recorded, so ranks that did more (another group, p2p) hold other windows.

Everything here is pure Python; nothing imports torch.
"""

from __future__ import annotations

from .encode import json_bytes, json_view, pickle_bytes
from .frames import stack
from .program import DEFAULT_GROUP, CallSite, Dump, Frame, RankFaults, World, world
from .simulate import FR_VERSION

__all__ = [
    "DEFAULT_GROUP",
    "FR_VERSION",
    "CallSite",
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
