"""The encodings torch writes: pickle protocol 2 (``_dump_fr_trace``) and JSON (``_dump_fr_trace_json``)."""

from __future__ import annotations

import json
import pickle

from .program import Dump


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
