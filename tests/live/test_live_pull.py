"""Pulling an agent's ``/live`` (``frwatch_operator.live.pull``) over real HTTP: the call signed with the pod's
token, the answer read only with the agent's proof, and each fault (404, garbage, too large, not a LivePod,
unreachable, no proof, too slow) a reason for that pod only."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fake_worker import fr_answer

from frwatch_analyzers.live.summary import LivePod, summarize_live
from frwatch_dev.ports import free_port
from frwatch_operator.agent.auth import PROOF_HEADER, CallChecker, answer_proof
from frwatch_operator.live import pull as live_pull
from frwatch_operator.live.pull import REFUSED, pull_all, pull_live

GOOD = LivePod(pod="p", ranks=[summarize_live(json.dumps(fr_answer(12)).encode(), 3, 1)]).model_dump_json(
    by_alias=True
)


@contextmanager
def agent(body: bytes, status: int = 200, token: str = "new") -> Iterator[int]:
    checker = CallChecker(token)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            nonce = checker.check(self.headers.get("Authorization", ""), "GET", self.path, b"")
            if nonce is None:
                self.send_error(401)
                return
            self.send_response(status)
            self.send_header(PROOF_HEADER, answer_proof(token, nonce, status))
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


def test_a_good_answer_with_the_pods_token() -> None:
    with agent(GOOD.encode(), token="old") as port:
        got = pull_live("127.0.0.1", port, "old", 5.0)
    assert isinstance(got, LivePod) and got.ranks[0].rank == 3 and got.ranks[0].groups[0].last_enqueued == 12


def test_each_fault_is_a_reason() -> None:
    with agent(b"live watch is off", status=404) as port:
        assert "live watch is off" in str(pull_live("127.0.0.1", port, "new", 5.0))
    with agent(b"{not json") as port:
        assert "answered garbage" in str(pull_live("127.0.0.1", port, "new", 5.0))
    with agent(b'{"schema": "frwatch.live/v1", "pod": "p", "ranks": [{"rank": "x"}]}') as port:
        assert "answered garbage" in str(pull_live("127.0.0.1", port, "new", 5.0))
    with agent(GOOD.encode()) as port:
        refused = str(pull_live("127.0.0.1", port, "other", 5.0))  # another pod's token: the agent says 401
        assert refused.startswith(REFUSED) and "HTTP 401 without proof" in refused
        assert "no token for this pod's agent" in str(pull_live("127.0.0.1", port, None, 5.0))


def test_a_too_large_answer_is_refused(monkeypatch: Any) -> None:
    monkeypatch.setattr(live_pull, "MAX_LIVE_BYTES", 100)
    with agent(GOOD.encode()) as port:
        assert "more than 100 bytes: not read further" in str(pull_live("127.0.0.1", port, "new", 5.0))


def test_one_agent_failing_leaves_the_others_answers() -> None:
    dead = free_port()  # nothing listens there
    with agent(GOOD.encode()) as port:
        got = pull_all({"a": ("127.0.0.1", port, "new"), "b": ("127.0.0.1", dead, "new")}, 5.0)
    assert isinstance(got["a"], LivePod)
    assert isinstance(got["b"], str) and "unreachable" in got["b"]


@contextmanager
def raw_server(serve: Any) -> Iterator[int]:
    """A TCP server whose every connection is handed to ``serve(conn)`` on its own thread."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        listener.close()


def test_a_look_alike_never_sees_the_token_and_its_answer_is_refused_unread() -> None:
    seen: list[bytes] = []

    def look_alike(conn: Any) -> None:
        seen.append(conn.recv(65536))
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(GOOD)).encode() + b"\r\n\r\n" + GOOD.encode())
        conn.close()

    token = "k1." + "ab" * 32
    with raw_server(look_alike) as port:
        got = pull_live("127.0.0.1", port, token, 5.0)
    assert isinstance(got, str) and got.startswith(REFUSED) and "without proof" in got
    assert seen and b"Authorization: Frwatch t=" in seen[0] and token.encode() not in seen[0]
    assert token.split(".")[1].encode() not in seen[0]


def test_an_agent_dripping_one_byte_at_a_time_is_cut_at_the_total_deadline() -> None:
    import time

    checker = CallChecker("new")

    def drip(conn: Any) -> None:
        request = conn.recv(65536).decode()
        header = next(line.split(": ", 1)[1] for line in request.split("\r\n") if line.startswith("Authorization"))
        nonce = checker.check(header, "GET", "/live", b"")
        assert nonce is not None
        proof = answer_proof("new", nonce, 200)
        try:  # the agent proves itself, then drips its body
            conn.sendall(f"HTTP/1.1 200 OK\r\n{PROOF_HEADER}: {proof}\r\nContent-Length: 100000\r\n\r\n".encode())
            for byte in b"x" * 100000:
                conn.sendall(bytes([byte]))
                time.sleep(0.2)  # every read gets its byte well inside any per-read timeout
        except OSError:
            pass
        finally:
            conn.close()

    with raw_server(drip) as port:
        started = time.monotonic()
        got = pull_live("127.0.0.1", port, "new", 1.5)
        took = time.monotonic() - started
    assert isinstance(got, str) and "did not answer whole within 1.5 s" in got, got
    assert took < 3.0, f"the call took {took:.1f} s with a total deadline of 1.5 s"
