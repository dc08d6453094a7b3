"""A gloo rank's live Flight Recorder answer (torch 2.13's ``fr_trace_json``), for the live watch tests."""

from __future__ import annotations

import json

T0 = 1_795_617_830_000_000_000


def fr_answer(last: int, odd: dict[int, str] | None = None) -> bytes:
    """What torch 2.13's ``fr_trace_json`` answers for a gloo rank that enqueued seqs 1..last of the default
    group (all_reduce of 64 floats unless ``odd`` says otherwise: seq -> profiling name)."""
    odd = odd or {}
    entries = [
        {"collective_seq_id": i, "input_dtypes": ["Float"], "input_sizes": [[64]], "is_p2p": False, "op_id": i,
         "output_dtypes": ["Float"], "output_sizes": [[64]], "p2p_seq_id": 0, "pg_id": 0,
         "process_group": ["0", "default_pg"], "profiling_name": odd.get(i, "gloo:all_reduce"), "record_id": i - 1,
         "retired": i < last, "state": "scheduled", "thread_id": "1", "thread_name": "python",
         "time_created_ns": T0 + i * 10**8, "time_discovered_completed_ns": 0, "time_discovered_started_ns": 0,
         "timeout_ms": 300000}
        for i in range(1, last + 1)
    ]  # fmt: skip
    return json.dumps({
        "comm_lib_version": "", "entries": entries, "nccl_comm_state": {},
        "pg_config": {"": {"desc": "", "name": "", "ranks": "[0, 1, 2, 3]"}},
        "pg_status": {"0": {"last_completed_collective": str(last - 1), "last_enqueued_collective": str(last),
                            "last_started_collective": "-1"}},
        "version": "2.10",
    }).encode()  # fmt: skip
