"""Pull ``GET /live`` from each agent of a job attempt (live watch, issue 15): bounded and fault-local.

Each agent is asked with the first of the key ring's tokens it accepts (as ``agentclient`` does for
``/dump``), ``timeout`` for each socket operation (connect, each read: an agent that drips bytes can hold
its pull longer), reading at most :data:`MAX_LIVE_BYTES`; at most
``workers`` agents at once. An agent that fails (unreachable, 401 with every key, 404: live watch off
for that pod, too large, garbage, not a ``LivePod``) gives the reason in words for its pod only: the
other pods' answers are unaffected. Never raises.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from pydantic import ValidationError

from frwatch_analyzers.live_summary import LivePod
from frwatch_operator.agentclient import AskResult, ask_to_dump

#: The most of one agent's /live answer read: a pod of 8 ranks with one group is about 16 KB; 64 groups
#: of 8 ranks with their stacks stay well inside.
MAX_LIVE_BYTES = 4 * 1024 * 1024
#: Agents asked at once.
WORKERS = 16
#: How long an agent may take to dump its ranks from their live buffers (each rank's whole ring: 0.7 s at
#: worst for 2000 entries on a loaded node, a pod of 8 ranks well inside).
LIVE_DUMP_TIMEOUT_S = 60.0


def pull_live(host: str, port: int, tokens: Sequence[str], timeout: float) -> LivePod | str:
    """One agent's ``/live``: the pod's summaries, or why they could not be read (one line)."""
    if not tokens:
        return "no agent key available to the operator (its key ring is not loaded: see its log)"
    host_part = f"[{host}]" if ":" in host else host
    for token in tokens:
        request = urllib.request.Request(
            f"http://{host_part}:{port}/live", headers={"Authorization": f"Bearer {token}"}, method="GET"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http to a pod IP
                raw = response.read(MAX_LIVE_BYTES + 1)
            break
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                continue
            if exc.code == 404:
                return f"{host}:{port}: live watch is off in this pod's agent (HTTP 404)"
            return f"HTTP {exc.code} from {host}:{port}"
        except (OSError, ValueError) as exc:
            return f"{host}:{port} unreachable ({exc})"
    else:
        return f"HTTP 401 from {host}:{port} with every key the operator keeps"
    if len(raw) > MAX_LIVE_BYTES:
        return f"{host}:{port}: /live answer larger than {MAX_LIVE_BYTES} bytes"
    try:
        return LivePod.model_validate(json.loads(raw))
    except (ValueError, RecursionError, ValidationError) as exc:
        return f"{host}:{port}: /live answered garbage ({str(exc).splitlines()[0][:200]})"


def pull_all(
    agents: Mapping[str, tuple[str, int]], tokens: Sequence[str], timeout: float, workers: int = WORKERS
) -> dict[str, LivePod | str]:
    """Every agent's ``/live`` (pod name -> answer or why not), at most ``workers`` at once."""
    if not agents:
        return {}
    names = sorted(agents)
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(names)))) as pool:
        answers = pool.map(lambda n: pull_live(agents[n][0], agents[n][1], tokens, timeout), names)
        return dict(zip(names, answers, strict=True))


def ask_live_dumps(
    agents: Mapping[str, tuple[str, int, tuple[int, ...]]], tokens: Sequence[str], workers: int = WORKERS
) -> dict[str, AskResult]:
    """Ask every agent (pod -> host, port, its ranks) to dump its ranks from their live buffers
    (``POST /live-dump``), at most ``workers`` at once; pod -> what asking it achieved. Never raises."""
    if not agents:
        return {}
    names = sorted(agents)

    def ask(pod: str) -> AskResult:
        host, port, ranks = agents[pod]
        return ask_to_dump(host, port, tokens, ranks, LIVE_DUMP_TIMEOUT_S, path="/live-dump")

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(names)))) as pool:
        return dict(zip(names, pool.map(ask, names), strict=True))
