"""How the operator and an agent prove to each other that they hold the pod's token, without sending it. Pure.

Each injected agent holds the token of its own pod (:mod:`frwatch_operator.capture.agent_keys`: an HMAC, with a key
only the operator holds, of the pod's namespace, job and the ``frwatch.io/agent-id`` the webhook gave
it). The token never travels over the network: whoever listens on a pod's control port learns nothing
from the operator's calls that lets it answer the next one, and an agent that cannot prove it holds the
token is refused before its answer is read.

A call (:func:`sign_call`) carries ``Authorization: Frwatch t=<unix s>,n=<32 hex>,mac=<64 hex>`` where
``mac = HMAC-SHA256(token, JSON ["frwatch-agent-call/v1", method, path, t, n, sha256(body)])``. The agent
(:class:`CallChecker`) accepts it only when the MAC matches its own token, ``t`` is within
:data:`MAX_SKEW_S` of its clock and ``n`` was not seen before (a replay of a captured call is refused).

Its answer carries ``Frwatch-Agent-Proof: HMAC-SHA256(token, JSON ["frwatch-agent-answer/v1", n,
status])`` (:func:`answer_proof`), checked by the operator (:func:`answer_proven`) from the headers alone,
before any of the body is read. A look-alike (a container the webhook did not inject, or a process that
took the control port) has no token: it can neither produce the proof nor learn the token from the call.
The body is not covered: the proof binds the answer's connection to the agent, and the pod network
between the operator and the pod is outside what a tenant controls here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

SCHEME = "Frwatch"
#: The answer's header carrying the agent's proof.
PROOF_HEADER = "Frwatch-Agent-Proof"
#: The most a call's timestamp may differ from the agent's clock (seconds).
MAX_SKEW_S = 300.0
#: Nonces an agent remembers (a replay within MAX_SKEW_S of a nonce forgotten since would need this many
#: calls in between).
REMEMBERED = 4096
_CALL = "frwatch-agent-call/v1"
_ANSWER = "frwatch-agent-answer/v1"
_HEADER = re.compile(r"Frwatch t=(\d{1,12}),n=([0-9a-f]{32}),mac=([0-9a-f]{64})")


def _mac(token: str, parts: list[object]) -> str:
    return hmac.new(token.encode(), json.dumps(parts).encode(), hashlib.sha256).hexdigest()


def _call_mac(token: str, method: str, path: str, t: int, nonce: str, body: bytes) -> str:
    return _mac(token, [_CALL, method.upper(), path, t, nonce, hashlib.sha256(body).hexdigest()])


def sign_call(token: str, method: str, path: str, body: bytes, now: float | None = None) -> tuple[str, str]:
    """The ``Authorization`` header of one call, and its nonce (the proof of the answer names it)."""
    t = int(time.time() if now is None else now)
    nonce = secrets.token_hex(16)
    return f"{SCHEME} t={t},n={nonce},mac={_call_mac(token, method, path, t, nonce, body)}", nonce


def answer_proof(token: str, nonce: str, status: int) -> str:
    """The agent's proof for its answer (``status``) to the call of ``nonce``."""
    return _mac(token, [_ANSWER, nonce, status])


def answer_proven(token: str, nonce: str, status: int, header: str | None) -> bool:
    """Whether the answer's proof header shows the agent holds ``token``."""
    return bool(header) and hmac.compare_digest(
        str(header).encode(), answer_proof(token, nonce, status).encode()
    )


class CallChecker:
    """The agent's side: which calls carry a valid MAC of its token, each nonce accepted once."""

    def __init__(self, token: str, clock: Callable[[], float] = time.time) -> None:
        self.token = token
        self.clock = clock
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, header: str, method: str, path: str, body: bytes) -> str | None:
        """The call's nonce when it is valid; None otherwise (a reason is never given to the caller)."""
        m = _HEADER.fullmatch(header.strip())
        if m is None:
            return None
        t, nonce, mac = int(m.group(1)), m.group(2), m.group(3)
        if abs(self.clock() - t) > MAX_SKEW_S:
            return None
        if not hmac.compare_digest(
            mac.encode(), _call_mac(self.token, method, path, t, nonce, body).encode()
        ):
            return None
        with self._lock:
            if nonce in self._seen:
                return None
            self._seen[nonce] = None
            while len(self._seen) > REMEMBERED:
                self._seen.popitem(last=False)
        return nonce
