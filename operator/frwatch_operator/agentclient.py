"""The agent adapter: ask a pod's frwatch agent (its authenticated control endpoint) to make ranks dump.

``POST http://<pod IP>:<frwatch-ctl port>/dump`` with ``Authorization: Bearer <token>`` and
``{"ranks": [...]}``; the agent answers ``{"asked": [...], "failed": {rank: why}}`` (see
``frwatch_operator.agent.control``). The token is derived from the operator's key ring
(``frwatch_operator.agentkeys``): each kept key's token is tried, newest first, until the agent does not
answer 401 (a pod made before the last rotation holds the previous key's). Never raises: the answer says
what happened, in words for the manifest.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field

#: The most of an agent's answer read (it lists a pod's ranks).
MAX_ANSWER_BYTES = 64 * 1024


@dataclass(frozen=True)
class AskResult:
    """What asking one agent achieved."""

    asked: tuple[int, ...] = ()
    failed: dict[int, str] = field(default_factory=dict)
    error: str = ""  #: the agent could not be asked at all

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
    host: str, port: int, tokens: Sequence[str], ranks: tuple[int, ...], timeout: float, path: str = "/dump"
) -> AskResult:
    """Ask the agent at ``host:port`` to have ``ranks`` dump, with the first of ``tokens`` it accepts
    (``path`` ``/live-dump``: from the ranks' live buffers, live watch)."""
    if not tokens:
        return AskResult(error="no agent key available to the operator (its key ring is not loaded: see its log)")
    host_part = f"[{host}]" if ":" in host else host
    for token in tokens:
        request = urllib.request.Request(
            f"http://{host_part}:{port}{path}",
            # a live dump of a pod whose ranks are unknown: every rank with a socket
            data=json.dumps({"ranks": list(ranks)} if ranks or path == "/dump" else {}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http to a pod IP
                body = json.loads(response.read(MAX_ANSWER_BYTES) or b"{}")
            break
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                continue
            if exc.code == 404 and path != "/dump":
                return AskResult(error=f"HTTP 404 from {host}:{port}: live watch is off in this pod's agent")
            return AskResult(error=f"HTTP {exc.code} from {host}:{port}")
        except (OSError, ValueError, RecursionError) as exc:
            return AskResult(error=f"{host}:{port} unreachable or answered garbage ({exc})")
    else:
        return AskResult(
            error=f"HTTP 401 from {host}:{port} with every key the operator keeps: the pod's token was made "
            "with a key rotated out since (the pod is older than two rotations) or was altered"
        )
    if not isinstance(body, dict):
        return AskResult(error="unexpected answer")
    listed = body.get("asked")
    asked = tuple(r for r in listed if isinstance(r, int)) if isinstance(listed, list) else ()
    failed = body.get("failed")
    failed = failed if isinstance(failed, dict) else {}
    return AskResult(
        asked=asked, failed={int(r): str(w)[:200] for r, w in failed.items() if str(r).isdigit() and len(r) <= 7}
    )
