"""The agent's control endpoint: the operator asks the pod's ranks to dump, with a bearer token.

``GET /healthz``            no auth; 200 while the agent runs.
``GET /status``             auth; what was uploaded, what is pending, what was skipped in the dump folder.
``GET /live``               auth; live watch: the latest summary of each rank of this pod
    (``frwatch_analyzers.live.summary.LivePod``); 404 when live watch is off for this pod.
``POST /live-dump``         auth; live watch: body as ``/dump``; each rank asked (default: every rank with a
    live socket) is dumped from its worker server's live Flight Recorder buffer
    (``frwatch_operator.agent.live_dump``); answers ``{"asked": [ranks dumped], "failed": {rank: why}}``; 404
    when live watch is off for this pod.
``POST /dump``              auth; body ``{"ranks": [..]}`` optional (default: every rank with a pipe).
    Writes to each rank's NCCL pipe ``<dump_dir>/<prefix><rank>.pipe`` (``TORCH_NCCL_DEBUG_INFO_PIPE_FILE``):
    the rank's watchdog reads it and dumps. Answers ``{"asked": [ranks], "failed": {rank: why}}``; the
    dumps then arrive through the uploader like any other.

Auth (:mod:`frwatch_operator.agent.auth`): the token the webhook injected into this pod's agent only
(``agent.token``, made from the operator's agent key and the pod's ``frwatch.io/agent-id``:
``frwatch_operator.capture.agent_keys``) is never sent: each call carries ``Authorization: Frwatch t=..,n=..,mac=..``,
a MAC of the call with the token, accepted once and only within minutes of its time (401 otherwise), and
every answer to a call that passed carries ``Frwatch-Agent-Proof``, the agent's proof that it holds the
token, which the operator checks before it reads the answer. No token: every authenticated call is
refused (503), never allowed.

Bad input gets a 4xx with the reason, never a 500: a body above :data:`MAX_BODY_BYTES` is refused (413)
before it is read whole; a body that is not ``{"ranks": [int, ...]}`` (not JSON, nested too deep,
``NaN``/``Infinity``, a rank that is not an integer below ``MAX_WORLD_SIZE``, more than
:data:`MAX_RANKS_ASKED` ranks, another field) is refused with 400.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_operator.agent.auth import PROOF_HEADER, CallChecker, answer_proof
from frwatch_operator.agent.dumpfiles import PIPE_SUFFIX

#: The largest control request body read (bytes): a list of a pod's ranks fits many times over.
MAX_BODY_BYTES = 16 * 1024
#: The most ranks one request may name.
MAX_RANKS_ASKED = 1024


class BadRequest(ValueError):
    """A control request body that is not ``{"ranks": [int, ...]}``; the message says what is wrong."""


def _no_constant(name: str) -> Any:
    raise BadRequest(f"{name} is not a number JSON allows")


def parse_ranks(text: str) -> set[int] | None:
    """The ranks a ``POST /dump`` body names (None: every rank with a pipe). Raises :class:`BadRequest`."""
    if not text.strip():
        return None
    try:
        body = json.loads(text, parse_constant=_no_constant)
    except RecursionError as exc:
        raise BadRequest("nested too deep") from exc
    except BadRequest:
        raise
    except ValueError as exc:
        raise BadRequest(f"not JSON ({exc})") from exc
    if not isinstance(body, dict):
        raise BadRequest(f"a JSON object is expected, not {type(body).__name__}")
    extra = sorted(set(body) - {"ranks"})
    if extra:
        raise BadRequest(f"unknown field {extra[0][:40]!r}")
    ranks = body.get("ranks")
    if ranks is None:
        return None
    if not isinstance(ranks, list) or len(ranks) > MAX_RANKS_ASKED:
        raise BadRequest(f"'ranks' must be a list of at most {MAX_RANKS_ASKED} ranks")
    for r in ranks:
        if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < MAX_WORLD_SIZE:
            raise BadRequest(
                f"'ranks' holds {str(r)[:40]!r}, not a rank (an integer from 0 to {MAX_WORLD_SIZE - 1})"
            )
    return set(ranks)


def pipe_ranks(dump_dir: Path, file_prefix: str) -> dict[int, Path]:
    """rank -> pipe path, for every name ``<prefix><rank>.pipe`` in the dump folder (a rank torch would
    write: no leading zero, below ``MAX_WORLD_SIZE``); whether it is a FIFO is checked when it is opened."""
    pattern = re.compile(re.escape(file_prefix) + r"(0|[1-9][0-9]{0,6})" + re.escape(PIPE_SUFFIX))
    out: dict[int, Path] = {}
    try:
        names = os.listdir(dump_dir)
    except FileNotFoundError:
        return out
    for name in names:
        m = pattern.fullmatch(name)
        if m and int(m.group(1)) < MAX_WORLD_SIZE:
            out[int(m.group(1))] = dump_dir / name
    return out


def ask_to_dump(pipe: Path) -> str | None:
    """Write to one rank's pipe without blocking and without following a link. None on success, else why
    it could not be asked."""
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return "no reader on the pipe (the rank's process is gone or not listening)"
        if exc.errno == errno.ELOOP:
            return "a symbolic link, not a FIFO (never followed)"
        return f"cannot open the pipe: {exc.strerror}"
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return "not a FIFO"
        os.write(fd, b"1\n")
    except OSError as exc:
        return f"cannot write to the pipe: {exc.strerror}"
    finally:
        os.close(fd)
    return None


def make_app(
    *,
    dump_dir: Path,
    file_prefix: str,
    token: str | None,
    status: Callable[[], dict[str, Any]],
    live: Callable[[], str] | None = None,
    live_dump: Callable[[set[int] | None], tuple[list[int], dict[str, str]]] | None = None,
) -> web.Application:
    """The control endpoint's aiohttp application."""
    checker = CallChecker(token) if token else None

    @web.middleware
    async def authenticated(request: web.Request, handler: Any) -> web.StreamResponse:
        """Every route but /healthz: the call's MAC checked, the answer proven (agentauth)."""
        if request.path == "/healthz":
            return await handler(request)  # type: ignore[no-any-return]
        if checker is None or token is None:
            raise web.HTTPServiceUnavailable(text="no control token configured on this agent: refused\n")
        body = await request.read()  # at most client_max_size (413 beyond)
        nonce = checker.check(request.headers.get("Authorization", ""), request.method, request.raw_path, body)
        if nonce is None:
            raise web.HTTPUnauthorized(text="missing, wrong, stale or replayed call signature\n")
        try:
            response: web.StreamResponse = await handler(request)
        except web.HTTPException as exc:
            response = web.Response(status=exc.status, text=exc.text, content_type="text/plain")
        response.headers[PROOF_HEADER] = answer_proof(token, nonce, response.status)
        return response

    def check_auth(request: web.Request) -> None:
        """Done by the middleware before any handler runs (kept as the handlers' explicit marker)."""

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def get_status(request: web.Request) -> web.Response:
        check_auth(request)
        return web.json_response(status())

    async def get_live(request: web.Request) -> web.Response:
        check_auth(request)
        if live is None:
            raise web.HTTPNotFound(text="live watch is off for this pod\n")
        return web.Response(text=live(), content_type="application/json")

    async def post_dump(request: web.Request) -> web.Response:
        check_auth(request)
        wanted: set[int] | None = None
        raw = await request.read()  # read whole by the middleware (at most MAX_BODY_BYTES): cached
        if raw:
            try:
                wanted = parse_ranks(raw.decode())
            except (BadRequest, UnicodeDecodeError) as exc:
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

    async def post_live_dump(request: web.Request) -> web.Response:
        check_auth(request)
        if live_dump is None:
            raise web.HTTPNotFound(text="live watch is off for this pod\n")
        wanted: set[int] | None = None
        raw = await request.read()  # read whole by the middleware (at most MAX_BODY_BYTES): cached
        if raw:
            try:
                wanted = parse_ranks(raw.decode())
            except (BadRequest, UnicodeDecodeError) as exc:
                raise web.HTTPBadRequest(text=f'body must be {{"ranks": [int, ...]}}: {exc}\n') from exc
        # each rank's answer takes up to seconds: off the event loop (/healthz and /live keep answering)
        dumped, failed = await asyncio.to_thread(live_dump, wanted)
        return web.json_response({"asked": dumped, "failed": failed})

    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[authenticated])
    app.add_routes(
        [
            web.get("/healthz", healthz),
            web.get("/status", get_status),
            web.get("/live", get_live),
            web.post("/dump", post_dump),
            web.post("/live-dump", post_live_dump),
        ]
    )
    return app
