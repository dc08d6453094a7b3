"""Ask torch's worker server (``_WorkerServer``) of one rank, over its Unix socket, with hard bounds.

``call(path, handler, timeout_s, max_bytes)`` sends ``POST /handler/<name>`` (HTTP/1.1,
``Connection: close``) and reads the answer within one deadline for the whole exchange (a server that
drips bytes cannot stretch it) and at most ``max_bytes`` of body (refused past it, never read whole).
Anything else than a ``200`` with a ``Content-Length`` body is a :class:`WorkerCallError` whose message
says what happened, ready for one log line. See ``docs/live-watch.md`` for what torch answers.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

#: Headers larger than this are not a worker server's.
MAX_HEAD_BYTES = 16 * 1024


class WorkerCallError(Exception):
    """One call to a rank's worker server failed; ``kind`` is one word for metrics and back-off."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class WorkerAnswer:
    status: int
    body: bytes
    seconds: float
    #: Bytes of the caller's :class:`ByteBudget` this answer holds: the caller gives them back when done.
    held: int = 0


class ByteBudget:
    """Answer bytes a set of concurrent calls may hold at once (the live sampler's round reads every rank of
    its pod together: without a bound, 16 ranks of 16 MiB rings would be 256 MiB in an agent limited to 256).
    A call takes its answer's Content-Length before reading the body and waits, within its own deadline, while
    others hold too much; an answer larger than the whole budget is read when nothing else is held."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held = 0
        self.peak = 0  #: the most held at once (for tests and benchmarks)
        self._cond = threading.Condition()

    def take(self, n: int, deadline: float) -> bool:
        with self._cond:
            while self.held and self.held + n > self.capacity:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            self.held += n
            self.peak = max(self.peak, self.held)
            return True

    def give(self, n: int) -> None:
        with self._cond:
            self.held -= n
            self._cond.notify_all()


def _recv_until(sock: socket.socket, deadline: float, buf: bytearray, want: int, limit: int) -> None:
    """Read into ``buf`` until it holds ``want`` bytes (or EOF when ``want`` < 0), never past ``limit``."""
    while want < 0 or len(buf) < want:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WorkerCallError("timeout", "no complete answer before the deadline")
        sock.settimeout(left)
        try:
            chunk = sock.recv(min(1 << 16, limit + 1 - len(buf)))
        except TimeoutError as exc:
            raise WorkerCallError("timeout", "no complete answer before the deadline") from exc
        if not chunk:
            if want < 0:
                return
            raise WorkerCallError("garbage", f"connection closed after {len(buf)} of {want} bytes")
        buf += chunk
        if len(buf) > limit:
            raise WorkerCallError("too_large", f"answer larger than {limit} bytes: not read further")


def _parse_head(head: bytes) -> tuple[int, int]:
    """(status, content length) of an HTTP/1.x response head."""
    try:
        lines = head.decode("latin-1").split("\r\n")
        version, code, *_ = lines[0].split(" ", 2)
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise ValueError(lines[0][:80])
        length = -1
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
            elif name.strip().lower() == "transfer-encoding":
                raise ValueError("a chunked answer, not torch's worker server")
        if length < 0:
            raise ValueError("no Content-Length")
        return int(code), length
    except ValueError as exc:
        raise WorkerCallError("garbage", f"not an HTTP answer from torch's worker server: {exc}") from exc


def call(
    path: str, handler: str, *, timeout_s: float, max_bytes: int, budget: ByteBudget | None = None
) -> WorkerAnswer:
    """POST /handler/<handler> on the Unix socket ``path``; raises :class:`WorkerCallError`. With ``budget``,
    the body is read only once its length is taken from it (the answer's ``held``: the caller gives it back)."""
    start = time.monotonic()
    deadline = start + timeout_s
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        try:
            sock.connect(path)
        except FileNotFoundError as exc:
            raise WorkerCallError("no_socket", "no socket (the rank has not opened one)") from exc
        except ConnectionRefusedError as exc:
            raise WorkerCallError("refused", "connection refused (the rank's process is gone)") from exc
        except TimeoutError as exc:
            raise WorkerCallError("timeout", "connect timed out") from exc
        except OSError as exc:
            raise WorkerCallError("unreachable", f"cannot connect: {exc.strerror or exc}") from exc
        request = (
            f"POST /handler/{handler} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        try:
            sock.sendall(request)
            buf = bytearray()
            while b"\r\n\r\n" not in buf:
                before = len(buf)
                _recv_until(sock, deadline, buf, before + 1, MAX_HEAD_BYTES + max_bytes)
                if len(buf) > MAX_HEAD_BYTES and b"\r\n\r\n" not in buf[:MAX_HEAD_BYTES]:
                    raise WorkerCallError("garbage", "no HTTP head in the first 16 KiB")
            head, _, rest = bytes(buf).partition(b"\r\n\r\n")
            status, length = _parse_head(head)
            if length > max_bytes:
                raise WorkerCallError("too_large", f"answer of {length} bytes, above the {max_bytes} allowed")
            if budget is not None and not budget.take(length, deadline):
                raise WorkerCallError("timeout", "no complete answer before the deadline (waited for memory)")
            held = length if budget is not None else 0
            try:
                body = bytearray(rest)
                _recv_until(sock, deadline, body, length, length)
                data = bytes(memoryview(body)[:length])
            except BaseException:
                if budget is not None:
                    budget.give(held)
                raise
        except OSError as exc:
            raise WorkerCallError("unreachable", f"connection failed: {exc.strerror or exc}") from exc
        return WorkerAnswer(status=status, body=data, seconds=time.monotonic() - start, held=held)
    finally:
        sock.close()
