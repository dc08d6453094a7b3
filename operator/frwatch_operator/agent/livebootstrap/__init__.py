"""The live-watch bootstrap the agent places in the shared dump volume for the rank processes.

``install(dump_dir)`` copies :mod:`sitecustomize` and :mod:`frwatch_live_boot` (standard library only; they
run inside the user's training process, whose image has no frwatch) into ``<dump_dir>/.frwatch-python``
and makes ``<dump_dir>/.frwatch-live`` for the sockets. The webhook appends the first to the rank
container's ``PYTHONPATH`` (never replacing the user's entries) and sets ``FRWATCH_LIVE_DIR`` to the second.
Dot-folders: the agent's dump watcher ignores them.

A program that prefers no injection runs torch's own ``worker_main()`` with
``TORCH_WORKER_SERVER_SOCKET=$FRWATCH_LIVE_DIR/rank-<global rank>.sock``; the bootstrap then stays out.
"""

from __future__ import annotations

import os
from pathlib import Path

from frwatch_operator.constants import LIVE_BOOTSTRAP_SUBDIR, LIVE_SOCKET_SUBDIR

FILES = ("sitecustomize.py", "frwatch_live_boot.py")


def install(dump_dir: Path) -> tuple[Path, Path]:
    """Write the bootstrap (atomically, replacing an older copy) and make the socket folder.

    Returns (bootstrap folder, socket folder). Raises OSError when the volume cannot be written."""
    code_dir = dump_dir / LIVE_BOOTSTRAP_SUBDIR
    live_dir = dump_dir / LIVE_SOCKET_SUBDIR
    code_dir.mkdir(mode=0o755, exist_ok=True)
    live_dir.mkdir(mode=0o777, exist_ok=True)
    # the ranks may run as another user than the agent; sticky, as /tmp, so none removes another's socket
    os.chmod(live_dir, 0o1777)  # noqa: S103
    here = Path(__file__).parent
    for name in FILES:
        tmp = code_dir / f".{name}.tmp"
        tmp.write_bytes((here / name).read_bytes())
        os.chmod(tmp, 0o644)
        os.replace(tmp, code_dir / name)
    return code_dir, live_dir
