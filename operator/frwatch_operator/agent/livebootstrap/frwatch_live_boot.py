"""frwatch live watch, inside a rank's process: serve torch's worker server on a Unix socket, keyed by rank.

This file runs in the user's training process (the agent copies it into the shared dump volume; the
``sitecustomize`` beside it imports it). It imports nothing but the standard library, and torch only once
the program itself has imported ``torch.distributed``. It must never make training fail or slow down:

- :func:`start` only starts a daemon thread, and only when ``FRWATCH_LIVE_DIR`` is set and
  ``TORCH_WORKER_SERVER_SOCKET`` is not (a program that runs torch's ``worker_main()`` serves itself).
- The thread polls, with back-off (0.5 s doubling to 5 s), for ``torch.distributed`` being initialised
  (only once the module is fully imported: it sits in ``sys.modules`` while its own import still runs).
  Polling was chosen over wrapping ``init_process_group``: ``torch.distributed`` re-exports the function
  by value (``from .distributed_c10d import *``), so a wrapper would have to patch several names at import
  time and could miss a program that imported it first; a poll sees every way the default group comes
  up (``init_process_group``, ``init_device_mesh``, torchrun) and never touches the program's call path.
  A process that never initialises torch.distributed (a data-loader worker, pip) only wakes every 5 s
  to read one dict entry. A forked child does not inherit the thread (so forked loader workers do nothing).
- It then binds ``$FRWATCH_LIVE_DIR/rank-<global rank>.sock`` with
  ``torch._C._distributed_c10d._WorkerServer`` (Unix socket only: no network listener). A socket file a
  dead process left behind (connect refused) is removed first; a live one is left alone. The socket is then
  given the folder's group (the agent's) and mode 0770, so the agent, another user, can connect
  (:func:`_share_with_agent`).
- Every failure is caught and logged once on stderr (``frwatch-live: ...``); the thread then ends.
- The server is never shut down: ``shutdown()`` joins the server's threads, and a ``dump_traceback``
  waiting for the GIL would deadlock an exit that holds it. The process's end closes the socket; an
  ``atexit`` hook removes the socket file so the agent sees the rank is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

#: The folder the sockets go in (set by frwatch's webhook: a folder of the shared dump volume).
ENV_LIVE_DIR = "FRWATCH_LIVE_DIR"
#: torch's own variable for worker_main(): when set, the program serves itself and this bootstrap stays out.
ENV_TORCH_SOCKET = "TORCH_WORKER_SERVER_SOCKET"
#: The socket of global rank N in the live folder.
SOCKET_NAME = "rank-{rank}.sock"
LOG_PREFIX = "frwatch-live:"
FIRST_DELAY_S = 0.5
MAX_DELAY_S = 5.0

_state: dict[str, Any] = {"logged": False, "server": None, "thread": None}


def _log_once(message: str) -> None:
    """One line on stderr for the whole process, whatever happens after."""
    if _state["logged"]:
        return
    _state["logged"] = True
    with contextlib.suppress(Exception):
        sys.stderr.write(f"{LOG_PREFIX} {message}\n")
        sys.stderr.flush()


def socket_path(live_dir: str, rank: int) -> str:
    return os.path.join(live_dir, SOCKET_NAME.format(rank=rank))


def _clear_dead_socket(path: str) -> bool:
    """True when ``path`` is free to bind: absent, or a socket nobody answers on (then removed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    if not stat.S_ISSOCK(st.st_mode):
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()
    return False


def _remove_at_exit(path: str, inode: int) -> None:
    with contextlib.suppress(Exception):
        if os.lstat(path).st_ino == inode:
            os.unlink(path)


def _serve(live_dir: str, rank: int) -> None:
    from torch._C._distributed_c10d import _WorkerServer

    path = socket_path(live_dir, rank)
    if not _clear_dead_socket(path):
        _log_once(f"rank {rank}: {path} is taken by something alive or not a socket; live watch is off")
        return
    server = _WorkerServer(path)
    _state["server"] = server  # kept for the process's life, never shut down (see the module docstring)
    with contextlib.suppress(OSError):
        atexit.register(_remove_at_exit, path, os.lstat(path).st_ino)
    _log_once(f"rank {rank}: torch's worker server answers on {path} ({_share_with_agent(path, live_dir)})")


def _share_with_agent(path: str, live_dir: str) -> str:
    """Let the agent connect; returns what was done, in words. Connecting to a Unix socket needs write
    permission on its file, and torch binds it 0777 minus the umask: 0755 with the usual 022, so only its
    owner could connect, and the agent runs as its own non-root user without capabilities. The agent made the
    socket folder, so the folder's group is the agent's (or the pod's fsGroup, which the agent has too): the
    socket gets that group and mode 0770. A rank that cannot give it that group (not root, not a member)
    opens it to every user of the pod (0777): the file is in the pod's own volume, reachable only inside it."""
    try:
        group = os.stat(live_dir).st_gid
        try:
            if os.lstat(path).st_gid != group:
                os.chown(path, -1, group)
            os.chmod(path, 0o770)  # noqa: S103 - the owner and the agent's group: connecting needs write
            return f"mode 0770, group {group}"
        except PermissionError:
            os.chmod(path, 0o777)  # noqa: S103 - a socket in the pod's own volume, no network
            return "mode 0777: the folder's group could not be given"
    except OSError as exc:
        return f"left as torch made it: {type(exc).__name__}: {str(exc)[:200]}"


def _initialised_rank(modules: Mapping[str, Any]) -> int | None:
    """The process's global rank once torch.distributed's default group is up; None before."""
    dist = modules.get("torch.distributed")
    if dist is None or getattr(getattr(dist, "__spec__", None), "_initializing", False):
        return None  # not imported, or still being imported (it is in sys.modules while it runs)
    try:
        if not dist.is_available() or not dist.is_initialized():
            return None
    except AttributeError:  # a module of that name without the functions yet: look again later
        return None
    return int(dist.get_rank())


def _watch(live_dir: str, sleep: Callable[[float], None]) -> None:
    try:
        delay = FIRST_DELAY_S
        while True:
            rank = _initialised_rank(sys.modules)
            if rank is not None:
                _serve(live_dir, rank)
                return
            sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)
    except Exception as exc:
        _log_once(f"live watch is off for this process: {type(exc).__name__}: {str(exc)[:300]}")


def start(environ: Mapping[str, str] = os.environ, sleep: Callable[[float], None] = time.sleep) -> None:
    """Start the watching thread when live watch is asked for; never raises."""
    try:
        live_dir = environ.get(ENV_LIVE_DIR)
        if not live_dir or environ.get(ENV_TORCH_SOCKET) or _state["thread"] is not None:
            return
        thread = threading.Thread(target=_watch, args=(live_dir, sleep), name="frwatch-live", daemon=True)
        _state["thread"] = thread
        thread.start()
    except Exception as exc:
        _log_once(f"live watch is off for this process: {type(exc).__name__}: {str(exc)[:300]}")
