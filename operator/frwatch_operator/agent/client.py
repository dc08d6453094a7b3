"""The agent adapter: calls to a pod's frwatch agent, each bounded whole and authenticated both ways.

:func:`call_agent` makes one HTTP call to ``http://<pod IP>:<frwatch-ctl port><path>``:

* **a total deadline** (``deadline_s``: connect, send, the answer's headers and body together): a timer
  shuts the socket down when it passes, so an agent that drips one byte a second (each read well inside
  any per-read timeout) is cut off at the deadline all the same;
* **a size cap** (``max_bytes``): a longer answer is refused, never read further;
* **authentication** (:mod:`frwatch_operator.agent.auth`): the call carries a MAC of the pod's token, never
  the token; the answer must carry the agent's proof that it holds that token, checked from its headers
  before any of the body is read. An answer without it is refused (:attr:`CallResult.refused`): the caller
  stops calling that pod's agent (:class:`Refusals`) and says so on the job.

:func:`ask_to_dump` asks an agent to have ranks dump (``POST /dump``, or ``/live-dump``: from their live
buffers); the agent answers ``{"asked": [...], "failed": {rank: why}}`` (``frwatch_operator.agent.control``).
Nothing here raises: the answer says what happened, in words for the manifest.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from dataclasses import dataclass, field

from frwatch_operator.agent.auth import PROOF_HEADER, answer_proven, sign_call

#: The most of an agent's /dump answer read (it lists a pod's ranks).
MAX_ANSWER_BYTES = 64 * 1024


@dataclass(frozen=True)
class CallResult:
    """One call's outcome: the status and body of an authenticated answer, or why there is none."""

    status: int = 0
    body: bytes = b""
    error: str = ""
    #: The answer came without a valid proof of the pod's token: not the agent frwatch injected.
    refused: bool = False


def call_agent(
    host: str,
    port: int,
    token: str | None,
    method: str,
    path: str,
    body: bytes,
    deadline_s: float,
    max_bytes: int,
) -> CallResult:
    """One call to the agent at ``host:port``, bounded by ``deadline_s`` in all and ``max_bytes`` of answer."""
    where = f"{host}:{port}"
    if not token:
        return CallResult(error="no token for this pod's agent (the operator has no key that made it: see its log, "
                          "or the pod's frwatch.io/agent-id was not given by the webhook)")  # fmt: skip
    conn = http.client.HTTPConnection(host, port, timeout=deadline_s)
    cut = threading.Event()

    def shut() -> None:
        cut.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(deadline_s, shut)
    timer.daemon = True
    timer.start()
    try:
        authorization, nonce = sign_call(token, method, path, body)
        headers = {"Authorization": authorization, "Content-Type": "application/json"}
        conn.request(method, path, body=body or None, headers=headers)
        response = conn.getresponse()
        if not answer_proven(token, nonce, response.status, response.getheader(PROOF_HEADER)):
            return CallResult(
                status=response.status, refused=True,
                error=f"{where} answered HTTP {response.status} without proof of this pod's agent token: not the "
                "agent frwatch injected (or its token was made with a key rotated out since); refused, not read",
            )  # fmt: skip
        raw = response.read(max_bytes + 1)
        if cut.is_set():
            return CallResult(error=f"{where} did not answer whole within {deadline_s:g} s")
        if len(raw) > max_bytes:
            return CallResult(error=f"{where} answered more than {max_bytes} bytes: not read further")
        return CallResult(status=response.status, body=raw)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if cut.is_set():
            return CallResult(error=f"{where} did not answer whole within {deadline_s:g} s")
        return CallResult(error=f"{where} unreachable or answered garbage ({exc})")
    finally:
        timer.cancel()
        conn.close()


class Refusals:
    """The pods whose agent was refused (no proof of its token): never called again by this process.
    Keyed by pod uid (a new pod of the same name is another pod). Thread-safe; bounded."""

    LIMIT = 100_000

    def __init__(self) -> None:
        self._why: dict[str, str] = {}
        self._lock = threading.Lock()

    def refused(self, pod_uid: str) -> str | None:
        """Why this pod's agent was refused (None: it was not)."""
        with self._lock:
            return self._why.get(pod_uid)

    def add(self, pod_uid: str, why: str) -> bool:
        """Record a refusal; True the first time for this pod (then say so on the job)."""
        with self._lock:
            if pod_uid in self._why or not pod_uid:
                return False
            if len(self._why) >= self.LIMIT:
                self._why.pop(next(iter(self._why)))
            self._why[pod_uid] = why
            return True


@dataclass(frozen=True)
class AskResult:
    """What asking one agent achieved."""

    asked: tuple[int, ...] = ()
    failed: dict[int, str] = field(default_factory=dict)
    error: str = ""  #: the agent could not be asked at all
    refused: bool = False  #: the answer did not prove it came from the pod's agent

    def summary(self) -> str:
        """For the manifest's why_missing: what became of the request."""
        if self.error:
            return f"its agent could not be asked to dump: {self.error}"
        parts = []
        if self.asked:
            parts.append(f"its agent asked rank(s) {', '.join(map(str, self.asked))} to dump")
        parts += [f"rank {r} could not be asked ({why})" for r, why in sorted(self.failed.items())]
        return "; ".join(parts)


def ask_to_dump(
    host: str, port: int, token: str | None, ranks: tuple[int, ...], deadline_s: float, path: str = "/dump"
) -> AskResult:
    """Ask the agent at ``host:port`` (holding ``token``) to have ``ranks`` dump (``path`` ``/live-dump``:
    from the ranks' live buffers, live watch)."""
    # a live dump of a pod whose ranks are unknown: every rank with a socket
    data = json.dumps({"ranks": list(ranks)} if ranks or path == "/dump" else {}).encode()
    result = call_agent(host, port, token, "POST", path, data, deadline_s, MAX_ANSWER_BYTES)
    if result.error:
        return AskResult(error=result.error, refused=result.refused)
    if result.status == 404 and path != "/dump":
        return AskResult(error=f"HTTP 404 from {host}:{port}: live watch is off in this pod's agent")
    if result.status != 200:
        return AskResult(error=f"HTTP {result.status} from {host}:{port}")
    try:
        body = json.loads(result.body or b"{}")
    except (ValueError, RecursionError) as exc:
        return AskResult(error=f"{host}:{port} answered garbage ({exc})")
    if not isinstance(body, dict):
        return AskResult(error="unexpected answer")
    listed = body.get("asked")
    asked = tuple(r for r in listed if isinstance(r, int)) if isinstance(listed, list) else ()
    failed = body.get("failed")
    failed = failed if isinstance(failed, dict) else {}
    return AskResult(
        asked=asked,
        failed={int(r): str(w)[:200] for r, w in failed.items() if str(r).isdigit() and len(r) <= 7},
    )
