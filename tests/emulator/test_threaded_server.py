"""An aiohttp app served from a thread of its own (``frwatch_dev.localcluster.threaded_server``), as the API
emulator and the audit proxy are: it answers on the port it reports, stops cleanly, and a port taken is a clear
error naming the server."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from aiohttp import web

from frwatch_dev.localcluster.threaded_server import serve_in_thread


def hello_app() -> web.Application:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    return app


def test_it_answers_on_the_port_it_reports_and_stops() -> None:
    served = serve_in_thread(hello_app, "127.0.0.1", 0, name="test-threaded-server", what="the test server")
    try:
        assert served.port > 0 and served.thread.name == "test-threaded-server"
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
        with direct.open(f"http://127.0.0.1:{served.port}/", timeout=30) as answer:
            assert answer.read() == b"hello"
    finally:
        served.loop.call_soon_threadsafe(served.loop.stop)
        served.thread.join(timeout=30)
    assert not served.thread.is_alive()


def test_a_port_taken_is_an_error_naming_the_server() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match=rf"the test server could not listen on 127.0.0.1:{port}: "):
            serve_in_thread(hello_app, "127.0.0.1", port, name="test-threaded-server", what="the test server")
