"""The agent's control endpoint: the operator asks the pod's ranks to dump, with a bearer token.

``GET /healthz``            no auth; 200 while the agent runs.
``GET /status``             auth; what was uploaded, what is pending.
``POST /dump``              auth; body ``{"ranks": [..]}`` optional (default: every rank with a pipe).
    Writes to each rank's NCCL pipe ``<dump_dir>/<prefix><rank>.pipe`` (``TORCH_NCCL_DEBUG_INFO_PIPE_FILE``):
    the rank's watchdog reads it and dumps. Answers ``{"asked": [ranks], "failed": {rank: why}}``; the
    dumps then arrive through the uploader like any other.

Auth: ``Authorization: Bearer <token>``, the token read from ``agent.token_path`` (a mounted Secret,
re-read when it changes). No token file: every authenticated call is refused (503), never allowed.
"""

from __future__ import annotations

import errno
import hmac
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

PIPE_SUFFIX = ".pipe"


class TokenFile:
    """The expected token, re-read when the file changes (Secret rotation)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._token: str | None = None

    def current(self) -> str | None:
        try:
            st = self.path.stat()
        except OSError:
            self._stamp, self._token = None, None
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            try:
                self._token = self.path.read_text().strip() or None
            except OSError:
                self._token = None
            self._stamp = stamp
        return self._token


def pipe_ranks(dump_dir: Path, file_prefix: str) -> dict[int, Path]:
    """rank -> pipe path, for every FIFO named ``<prefix><rank>.pipe`` in the dump folder."""
    pattern = re.compile(re.escape(file_prefix) + r"(\d+)" + re.escape(PIPE_SUFFIX))
    out: dict[int, Path] = {}
    try:
        entries = list(dump_dir.iterdir())
    except FileNotFoundError:
        return out
    for path in entries:
        m = pattern.fullmatch(path.name)
        if m:
            out[int(m.group(1))] = path
    return out


def ask_to_dump(pipe: Path) -> str | None:
    """Write to one rank's pipe without blocking. None on success, else why it could not be asked."""
    try:
        if not stat.S_ISFIFO(pipe.stat().st_mode):
            return "not a FIFO"
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return "no reader on the pipe (the rank's process is gone or not listening)"
        return f"cannot open the pipe: {exc.strerror}"
    try:
        os.write(fd, b"1\n")
    except OSError as exc:
        return f"cannot write to the pipe: {exc.strerror}"
    finally:
        os.close(fd)
    return None


def make_app(
    *, dump_dir: Path, file_prefix: str, token: TokenFile, status: Callable[[], dict[str, Any]]
) -> web.Application:
    """The control endpoint's aiohttp application."""

    def check_auth(request: web.Request) -> None:
        expected = token.current()
        if expected is None:
            raise web.HTTPServiceUnavailable(text="no control token configured on this agent: refused\n")
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {expected}".encode()):
            raise web.HTTPUnauthorized(text="missing or wrong bearer token\n")

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def get_status(request: web.Request) -> web.Response:
        check_auth(request)
        return web.json_response(status())

    async def post_dump(request: web.Request) -> web.Response:
        check_auth(request)
        wanted: set[int] | None = None
        if request.can_read_body:
            try:
                body = json.loads(await request.text() or "{}")
                ranks = body.get("ranks") if isinstance(body, dict) else None
                wanted = {int(r) for r in ranks} if ranks is not None else None
            except (ValueError, TypeError) as exc:
                raise web.HTTPBadRequest(text=f'body must be {{"ranks": [int, ...]}}: {exc}\n') from exc
        pipes = pipe_ranks(dump_dir, file_prefix)
        asked: list[int] = []
        failed: dict[str, str] = {}
        for rank in sorted(wanted if wanted is not None else pipes):
            pipe = pipes.get(rank)
            why = "no pipe file for this rank in this pod" if pipe is None else ask_to_dump(pipe)
            if why is None:
                asked.append(rank)
            else:
                failed[str(rank)] = why
        return web.json_response({"asked": asked, "failed": failed})

    app = web.Application()
    app.add_routes(
        [web.get("/healthz", healthz), web.get("/status", get_status), web.post("/dump", post_dump)]
    )
    return app
