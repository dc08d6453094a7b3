"""An aiohttp app served on loopback from a thread of this process with its own event loop: how the API
emulator (:mod:`.apiserver`) and the audit proxy (:mod:`.audit`) run beside the tests that call them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

#: How long to wait for the server to listen (seconds).
START_SECONDS = 30


@dataclass(frozen=True)
class Served:
    """A running server: its loop (stop it with ``loop.call_soon_threadsafe(loop.stop)``), thread, runner and port."""

    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    runner: web.AppRunner
    port: int


async def _listen(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner, int(runner.addresses[0][1])


def serve_in_thread(make_app: Callable[[], web.Application], host: str, port: int, *, name: str, what: str) -> Served:
    """Serve the app ``make_app`` builds (called in the new thread, its loop current) on ``host:port``
    (0: a free port) from a daemon thread ``name``; raises RuntimeError naming ``what`` if it cannot listen."""
    loop = asyncio.new_event_loop()
    ready: dict[str, Any] = {}
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            ready["runner"], ready["port"] = loop.run_until_complete(_listen(make_app(), host, port))
        except BaseException as exc:
            ready["error"] = exc
            started.set()
            return
        started.set()
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    started.wait(timeout=START_SECONDS)
    if "error" in ready:
        raise RuntimeError(f"{what} could not listen on {host}:{port}: {ready['error']}") from ready["error"]
    if "port" not in ready:
        raise RuntimeError(f"{what} did not start on {host}:{port} within {START_SECONDS} s")
    return Served(loop, thread, ready["runner"], ready["port"])
