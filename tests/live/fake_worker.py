"""Stand-ins for a rank's torch worker server on a Unix socket: healthy, garbage, slow, huge, a GIL holder."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

T0 = 1_795_617_830_000_000_000


def fr_answer(
    last: int,
    ops: dict[int, str] | None = None,
    *,
    retired_upto: int | None = None,
    t0: int = T0,
    step_ns: int = 10**8,
) -> dict[str, Any]:
    """A gloo-style live answer: seqs 1..last on the default group, all_reduce of 64 floats unless ``ops``
    says otherwise (seq -> profiling name)."""
    ops = ops or {}
    done = last - 1 if retired_upto is None else retired_upto
    entries = [
        {
            "collective_seq_id": i,
            "input_dtypes": ["Float"],
            "input_sizes": [[64]],
            "is_p2p": False,
            "op_id": i,
            "output_dtypes": ["Float"],
            "output_sizes": [[64]],
            "p2p_seq_id": 0,
            "pg_id": 0,
            "process_group": ["0", "default_pg"],
            "profiling_name": ops.get(i, "gloo:all_reduce"),
            "record_id": i - 1,
            "retired": i <= done,
            "state": "scheduled",
            "thread_id": "1",
            "thread_name": "python",
            "time_created_ns": t0 + i * step_ns,
            "time_discovered_completed_ns": 0,
            "time_discovered_started_ns": 0,
            "timeout_ms": 300000,
        }
        for i in range(max(1, last - 40), last + 1)
    ]
    return {
        "comm_lib_version": "", "entries": entries, "nccl_comm_state": {},
        "pg_config": {"": {"desc": "", "name": "", "ranks": "[0, 1, 2, 3]"}},
        "pg_status": {"0": {"last_completed_collective": str(done), "last_enqueued_collective": str(last),
                            "last_started_collective": "-1"}},
        "version": "2.10",
    }  # fmt: skip


def http(status: int, body: bytes) -> bytes:
    return f"HTTP/1.1 {status} OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


Responder = Callable[[str, socket.socket], None]


def handler_for(answers: dict[str, Callable[[], bytes]]) -> Responder:
    def respond(name: str, conn: socket.socket) -> None:
        make = answers.get(name)
        conn.sendall(http(404, b"no such handler") if make is None else make())

    return respond


@contextmanager
def fake_worker(path: Path, respond: Responder) -> Iterator[list[str]]:
    """Serve ``respond(handler name, connection)`` on ``path``; yields the list of handler names asked."""
    asked: list[str] = []

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = self.request.recv(4096)
                if not chunk:
                    return
                data += chunk
            name = data.split(b" ", 2)[1].decode().rsplit("/", 1)[-1]
            asked.append(name)
            respond(name, self.request)

    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield asked
    finally:
        server.shutdown()
        server.server_close()


def json_body(obj: Any) -> Callable[[], bytes]:
    return lambda: http(200, json.dumps(obj).encode())


def never_answers(release: threading.Event) -> Responder:
    def respond(name: str, conn: socket.socket) -> None:
        release.wait(60)

    return respond


def drip(name: str, conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
    for _ in range(100):
        conn.sendall(b"x")
        time.sleep(0.1)
