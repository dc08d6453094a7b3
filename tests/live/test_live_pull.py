"""Pulling an agent's ``/live`` (``frwatch_operator.live_pull``) over real HTTP: the key ring's tokens tried
newest first, and each fault (404, garbage, too large, not a LivePod, unreachable) a reason for that pod only."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fake_worker import fr_answer

from frwatch_analyzers.live_summary import LivePod, summarize_live
from frwatch_dev.ports import free_port
from frwatch_operator import live_pull
from frwatch_operator.live_pull import pull_all, pull_live

GOOD = LivePod(pod="p", ranks=[summarize_live(json.dumps(fr_answer(12)).encode(), 3, 1)]).model_dump_json(
    by_alias=True
)


@contextmanager
def agent(body: bytes, status: int = 200, token: str = "new") -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") != f"Bearer {token}":
                self.send_error(401)
                return
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_a_good_answer_with_the_second_token() -> None:
    with agent(GOOD.encode(), token="old") as port:
        got = pull_live("127.0.0.1", port, ["new", "old"], 5.0)
    assert isinstance(got, LivePod) and got.ranks[0].rank == 3 and got.ranks[0].groups[0].last_enqueued == 12


def test_each_fault_is_a_reason() -> None:
    with agent(b"live watch is off", status=404) as port:
        assert "live watch is off" in str(pull_live("127.0.0.1", port, ["new"], 5.0))
    with agent(b"{not json") as port:
        assert "answered garbage" in str(pull_live("127.0.0.1", port, ["new"], 5.0))
    with agent(b'{"schema": "frwatch.live/v1", "pod": "p", "ranks": [{"rank": "x"}]}') as port:
        assert "answered garbage" in str(pull_live("127.0.0.1", port, ["new"], 5.0))
    with agent(GOOD.encode()) as port:
        assert "HTTP 401" in str(pull_live("127.0.0.1", port, ["other"], 5.0))
        assert "no agent key" in str(pull_live("127.0.0.1", port, [], 5.0))


def test_a_too_large_answer_is_refused(monkeypatch: Any) -> None:
    monkeypatch.setattr(live_pull, "MAX_LIVE_BYTES", 100)
    with agent(GOOD.encode()) as port:
        assert "larger than 100 bytes" in str(pull_live("127.0.0.1", port, ["new"], 5.0))


def test_one_agent_failing_leaves_the_others_answers() -> None:
    dead = free_port()  # nothing listens there
    with agent(GOOD.encode()) as port:
        got = pull_all({"a": ("127.0.0.1", port), "b": ("127.0.0.1", dead)}, ["new"], 5.0)
    assert isinstance(got["a"], LivePod)
    assert isinstance(got["b"], str) and "unreachable" in got["b"]
