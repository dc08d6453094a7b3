"""The agent adapter: ask a pod's frwatch agent (its authenticated control endpoint) to make ranks dump.

``POST http://<pod IP>:<frwatch-ctl port>/dump`` with ``Authorization: Bearer <token>`` and
``{"ranks": [...]}``; the agent answers ``{"asked": [...], "failed": {rank: why}}`` (see
``frwatch_operator.agent.control``). Never raises: the answer says what happened, in words for the manifest.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field


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


def ask_to_dump(host: str, port: int, token: str | None, ranks: tuple[int, ...], timeout: float) -> AskResult:
    """Ask the agent at ``host:port`` to have ``ranks`` dump."""
    if not token:
        return AskResult(error="no agent token available to the operator (Secret missing)")
    host_part = f"[{host}]" if ":" in host else host
    request = urllib.request.Request(
        f"http://{host_part}:{port}/dump",
        data=json.dumps({"ranks": list(ranks)}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http to a pod IP
            body = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return AskResult(error=f"HTTP {exc.code} from {host}:{port}")
    except (OSError, ValueError) as exc:
        return AskResult(error=f"{host}:{port} unreachable ({exc})")
    if not isinstance(body, dict):
        return AskResult(error="unexpected answer")
    asked = tuple(int(r) for r in body.get("asked") or [] if isinstance(r, int))
    failed = {int(r): str(w) for r, w in (body.get("failed") or {}).items() if str(r).isdigit()}
    return AskResult(asked=asked, failed=failed)
