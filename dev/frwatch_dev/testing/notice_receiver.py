"""A local chat-webhook receiver for tests: records each POSTed JSON body and answers with the next status of
a list (the last repeats), as a Slack-compatible incoming webhook would."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class NoticeReceiver:
    """Listens on 127.0.0.1 (a free port) until :meth:`close`; ``url`` ends in a secret-looking path."""

    def __init__(self, answers: tuple[int, ...] = (200,)) -> None:
        self.bodies: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with outer._lock:
                    outer.bodies.append(body)
                    status = answers[min(len(outer.bodies), len(answers)) - 1]
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/services/T0/B0/SECRET"
        threading.Thread(target=self._server.serve_forever, name="notice-receiver", daemon=True).start()

    def texts(self) -> list[str]:
        """The ``text`` of every body received so far."""
        with self._lock:
            return [str(b.get("text", "")) for b in self.bodies]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
