"""Ask each rank's torchcomms recorder to write its dump file now (torchcomms #2720), beside torch's live dump.

torchcomms registers the worker-server handler ``torchcomms_fr_dump_file`` (meta-pytorch/torchcomms
``comms/torchcomms/hooks/fr/FlightRecorder.cpp``, ``torchcommsFrDumpFileRegistration``): it answers 200 at once
and writes the whole ring (pickle, no stacks) to ``<TORCHCOMM_FR_DUMP_TEMP_FILE><rank>`` on a worker thread, one
dump at a time ("already in progress" coalesces); 503 before any communicator registered. The webhook points
that prefix into the dump folder (:mod:`frwatch_operator.capture.recorder_env`), so the agent's watcher collects the
file like any other. A rank without torchcomms has no such handler (404): nothing to ask, nothing failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from frwatch_operator.agent.worker_client import WorkerCallError, call
from frwatch_operator.capture.recorder_env import TC_DUMP_FILE_HANDLER

#: the handler answers before it writes: a short call, a small answer
TIMEOUT_S = 5.0
MAX_ANSWER_BYTES = 4096


def ask_torchcomms_dump(
    sockets: Mapping[int, Path], wanted: Iterable[int] | None
) -> tuple[list[int], dict[str, str]]:
    """``(ranks whose torchcomms recorder started writing its file, {rank: why not})``; ranks without
    torchcomms (404) are in neither."""
    asked: list[int] = []
    failed: dict[str, str] = {}
    for rank in sorted(set(wanted) if wanted is not None else set(sockets)):
        path = sockets.get(rank)
        if path is None:
            continue
        try:
            answer = call(str(path), TC_DUMP_FILE_HANDLER, timeout_s=TIMEOUT_S, max_bytes=MAX_ANSWER_BYTES)
        except WorkerCallError as exc:
            failed[str(rank)] = f"{TC_DUMP_FILE_HANDLER}: {exc}"
            continue
        if answer.status == 404:
            continue  # no torchcomms in this rank
        if answer.status != 200:
            failed[str(rank)] = f"{TC_DUMP_FILE_HANDLER} answered HTTP {answer.status}"
            continue
        asked.append(rank)
    return asked, failed
