"""torchcomms' Flight Recorder: the variables the webhook sets and the files the agent collects. Pure.

torchcomms records through its own ``FlightRecorderHook`` with its own variables (meta-pytorch/torchcomms
``comms/torchcomms/hooks/fr/FlightRecorder.hpp``, ``FlightRecorder.cpp`` @59426ba):

- ``TORCHCOMM_FR_BUFFER_SIZE`` (ring entries, default 2000; ``FlightRecorder::get``);
- ``TORCHCOMM_FR_DUMP_TEMP_FILE``: the file prefix; ``DebugInfoWriter(prefix, rank, ...)`` writes
  ``<prefix><rank>`` (``filename_ = c10::str(namePrefix, rank)``); the default is
  ``$XDG_CACHE_HOME|$HOME/.cache`` + ``/torch/comm_lib_trace_rank_`` (``DebugInfoWriter::getWriter``), outside
  any shared volume;
- ``TORCHCOMM_FR_DUMP_DYNAMIC_FILE_NAME``: when true, ``DebugInfoWriter::write`` re-reads
  ``TORCHCOMM_FR_DUMP_TEMP_FILE`` at each write and writes to exactly that name, **no rank appended**: two
  ranks of one pod then write one file. frwatch sets it to ``0`` unless the job set it, and collects a dynamic
  name that still starts with ``<prefix><rank>`` (``<prefix><rank>.<anything>``).

No torchcomms name was renamed, so none can print a deprecation warning; a torch without torchcomms reads none
of them. The prefix differs from torch's (``nccl_trace_rank_``) so a rank's two recorders never write one file.
The on-demand triggers: torch's ``TORCH_NCCL_DEBUG_INFO_PIPE_FILE`` pipe (ProcessGroupNCCL) and torchcomms'
worker-server handler ``torchcomms_fr_dump_file`` (torchcomms #2720), which writes ``<prefix><rank>``.
"""

from __future__ import annotations

import re
from typing import Final

ENV_TC_BUFFER_SIZE: Final = "TORCHCOMM_FR_BUFFER_SIZE"
ENV_TC_DUMP_TEMP_FILE: Final = "TORCHCOMM_FR_DUMP_TEMP_FILE"
ENV_TC_DYNAMIC_FILE_NAME: Final = "TORCHCOMM_FR_DUMP_DYNAMIC_FILE_NAME"
#: torchcomms' dump files in the shared folder: ``<dump_dir>/torchcomms_fr_trace_rank_<rank>``.
TC_FILE_PREFIX: Final = "torchcomms_fr_trace_rank_"
#: torchcomms' worker-server handlers: its ring as JSON, and "write your dump file now" (#2720).
TC_TRACE_HANDLER: Final = "torchcomms_fr_trace_json"
TC_DUMP_FILE_HANDLER: Final = "torchcomms_fr_dump_file"
_TRUE = {"1", "true", "yes", "on", "y", "t"}


def tc_prefix(dump_dir: str) -> str:
    return f"{dump_dir.rstrip('/')}/{TC_FILE_PREFIX}"


def torchcomms_pairs(buffer_size: int, dump_dir: str) -> list[tuple[tuple[str, ...], str]]:
    """(names, default) for torchcomms' recorder, the shape of ``injection._fr_pairs``."""
    return [
        ((ENV_TC_BUFFER_SIZE,), str(buffer_size)),
        ((ENV_TC_DUMP_TEMP_FILE,), tc_prefix(dump_dir)),
        ((ENV_TC_DYNAMIC_FILE_NAME,), "0"),
    ]


def torchcomms_warnings(container: str, user: dict[str, str | None], dump_dir: str) -> list[str]:
    """User values of torchcomms' variables that would lose or scramble its dumps."""
    out: list[str] = []
    size = user.get(ENV_TC_BUFFER_SIZE)
    if size is not None and size.strip() == "0":
        out.append(
            f"frwatch: container {container!r} sets {ENV_TC_BUFFER_SIZE}=0, which turns torchcomms' Flight "
            "Recorder off; remove it or set 2000"
        )
    path = user.get(ENV_TC_DUMP_TEMP_FILE)
    if path is not None and not path.startswith(dump_dir.rstrip("/") + "/"):
        out.append(
            f"frwatch: container {container!r} sets {ENV_TC_DUMP_TEMP_FILE}={path!r}, outside the shared dump "
            f"folder {dump_dir!r}: the frwatch agent cannot see torchcomms' dumps; remove it"
        )
    dynamic = user.get(ENV_TC_DYNAMIC_FILE_NAME)
    if dynamic is not None and dynamic.strip().lower() in _TRUE:
        out.append(
            f"frwatch: container {container!r} sets {ENV_TC_DYNAMIC_FILE_NAME}={dynamic}: torchcomms then writes "
            f"to the exact value of {ENV_TC_DUMP_TEMP_FILE} with no rank appended; the agent collects it only "
            f"when the name starts with {TC_FILE_PREFIX}<rank> in the dump folder"
        )
    return out


def dump_name(file_prefix: str) -> re.Pattern[str]:
    """Dump file names the agent collects: torch's ``<file_prefix><rank>``, torchcomms'
    ``torchcomms_fr_trace_rank_<rank>`` and a dynamic torchcomms name ``torchcomms_fr_trace_rank_<rank>.<tag>``
    (tag: letters, digits, ``._-``, at most 64). Group 1 is the rank's digits."""
    tc = re.escape(TC_FILE_PREFIX)
    return re.compile(rf"(?:{re.escape(file_prefix)}([0-9]+)|{tc}([0-9]+)(?:\.[A-Za-z0-9_.-]{{1,64}})?)")


def rank_digits(m: re.Match[str]) -> str:
    return m.group(1) if m.group(1) is not None else m.group(2)
