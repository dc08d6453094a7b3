"""Dump running ranks from their live Flight Recorder buffer (live watch, policy ``dumpAndAnalyze``, issue 15).

The operator asks ``POST /live-dump`` (``{"ranks": [...]}`` as ``/dump``) when live watch found a desync or a
stall while every rank still runs. For each rank asked, the agent calls its worker server's ``fr_trace_json``
(the whole ring, as JSON: ``docs/live-watch.md``) and writes the answer as that rank's dump,
``<dump dir>/<prefix><rank>``, through a dot-file in the same folder and ``os.rename`` (the dump watcher never
sees half a file). The uploader then stores it as any dump. No NCCL pipe, no change to the program: what a
running gloo or NCCL rank can give from outside.

The rank's Python stack goes with it, under the dump's top-level key ``frwatch_live`` (``{"stack": ...,
"taken_ns": ...}``: the analyzer ignores keys it does not know): the sampler's latest when it has one, else one
``dump_traceback`` (2 s) unless the sampler says one may still be waiting for the GIL (a second would only
add to the server's queue: ``docs/live-watch.md``). A stack that cannot be had is said in ``stack_error``.

The answer is checked for its frame only (``{`` ... ``}`` and an ``entries`` key: torch answers without one
before ``init_process_group``); the agent never decodes a dump (the analyzer does, bounded). A rank that
cannot be dumped so is named with why, as ``/dump`` does; the others are dumped.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from frwatch_analyzers.live.summary import cut_stack
from frwatch_operator.agent.worker_client import WorkerCallError, call

#: The most of one rank's fr_trace_json read (about 475 B an entry: a 100,000-entry ring).
MAX_DUMP_BYTES = 64 << 20
#: A 2000-entry answer took 0.7 s at worst on a loaded 2-core node.
FR_TIMEOUT_S = 20.0
STACK_TIMEOUT_S = 2.0
MAX_STACK_BYTES = 256 << 10


@dataclass(frozen=True)
class KnownStack:
    """What the sampler knows of a rank's stack: its latest one, or that a dump_traceback may still wait."""

    stack: str | None = None
    pending: bool = False


def _stack(path: Path, known: KnownStack) -> tuple[str | None, str | None]:
    if known.stack:
        return known.stack, None
    if known.pending:
        return None, "a dump_traceback of the sampler may still wait for the GIL: not asked again"
    try:
        answer = call(str(path), "dump_traceback", timeout_s=STACK_TIMEOUT_S, max_bytes=MAX_STACK_BYTES)
    except WorkerCallError as exc:
        return None, f"dump_traceback: {exc}"
    if answer.status != 200:
        return None, f"dump_traceback answered HTTP {answer.status}"
    return cut_stack(answer.body.decode("utf-8", errors="replace")), None


def _framed(body: bytes) -> bytes | None:
    """The answer without trailing blanks when it is a JSON object with an ``entries`` key, else None."""
    text = body.strip()
    if not (text.startswith(b"{") and text.endswith(b"}")) or b'"entries"' not in text:
        return None
    return text


def dump_one(
    rank: int, path: Path, dump_dir: Path, prefix: str, known: KnownStack, wall_ns: int
) -> str | None:
    """Write rank ``rank``'s live buffer as its dump; None on success, else why not (one line)."""
    try:
        answer = call(str(path), "fr_trace_json", timeout_s=FR_TIMEOUT_S, max_bytes=MAX_DUMP_BYTES)
    except WorkerCallError as exc:
        return f"fr_trace_json: {exc}"
    if answer.status != 200:
        return f"fr_trace_json answered HTTP {answer.status}"
    framed = _framed(answer.body)
    if framed is None:
        return "fr_trace_json answered no Flight Recorder ring (torch.distributed not initialised yet?)"
    stack, stack_error = _stack(path, known)
    extra = {"source": "fr_trace_json", "taken_ns": wall_ns, "stack": stack, "stack_error": stack_error}
    tail = b"," if framed[1:-1].strip() else b""
    data = framed[:-1] + tail + b'"frwatch_live":' + json.dumps(extra).encode() + b"}"
    temp = dump_dir / f".frwatch_live_{rank}.{os.getpid()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.rename(temp, dump_dir / f"{prefix}{rank}")
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink()
        return f"cannot write the dump: {exc.strerror or exc}"
    return None


def dump_live(
    sockets: Mapping[int, Path],
    wanted: Iterable[int] | None,
    dump_dir: Path,
    prefix: str,
    known: Callable[[int], KnownStack],
    wall_ns: Callable[[], int] = time.time_ns,
) -> tuple[list[int], dict[str, str]]:
    """Dump each rank of ``wanted`` (None: every rank with a socket); ``(dumped ranks, {rank: why not})``."""
    dumped: list[int] = []
    failed: dict[str, str] = {}
    for rank in sorted(set(wanted) if wanted is not None else set(sockets)):
        path = sockets.get(rank)
        why = "no live socket for this rank in this pod" if path is None else dump_one(
            rank, path, dump_dir, prefix, known(rank), wall_ns()
        )  # fmt: skip
        if why is None:
            dumped.append(rank)
        else:
            failed[str(rank)] = why
    return dumped, failed
