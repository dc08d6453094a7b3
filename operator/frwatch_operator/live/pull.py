"""Pull ``GET /live`` from each agent of a job attempt (live watch, issue 15): bounded and fault-local.

Each agent is called through :func:`frwatch_operator.agent.client.call_agent` with its own pod's token: a
total deadline of ``timeout`` for the whole call (an agent that drips bytes is cut off all the same),
at most :data:`MAX_LIVE_BYTES` read, an answer without proof of the pod's token refused unread; at most
``workers`` agents at once. An agent that fails (unreachable, too slow, refused, 404: live watch off for
that pod, too large, garbage, not a ``LivePod``) gives the reason in words for its pod only: the other
pods' answers are unaffected. Never raises.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from pydantic import ValidationError

from frwatch_analyzers.live.summary import LivePod
from frwatch_operator.agent.client import AskResult, ask_to_dump, call_agent

#: The most of one agent's /live answer read: a pod of 8 ranks with one group is about 16 KB; 64 groups
#: of 8 ranks with their stacks stay well inside.
MAX_LIVE_BYTES = 4 * 1024 * 1024
#: Agents asked at once.
WORKERS = 16
#: How long an agent may take to dump its ranks from their live buffers (each rank's whole ring: 0.7 s at
#: worst for 2000 entries on a loaded node, a pod of 8 ranks well inside).
LIVE_DUMP_TIMEOUT_S = 60.0


#: What a refused agent's answer begins with (the caller stops calling it: ``agentclient.Refusals``).
REFUSED = "refused: "


def pull_live(host: str, port: int, token: str | None, timeout: float) -> LivePod | str:
    """One agent's ``/live``: the pod's summaries, or why they could not be read (one line; it begins with
    :data:`REFUSED` when the answer did not prove it came from the pod's agent)."""
    result = call_agent(host, port, token, "GET", "/live", b"", timeout, MAX_LIVE_BYTES)
    if result.refused:
        return REFUSED + result.error
    if result.error:
        return result.error
    if result.status == 404:
        return f"{host}:{port}: live watch is off in this pod's agent (HTTP 404)"
    if result.status != 200:
        return f"HTTP {result.status} from {host}:{port}"
    try:
        return LivePod.model_validate(json.loads(result.body))
    except (ValueError, RecursionError, ValidationError) as exc:
        return f"{host}:{port}: /live answered garbage ({str(exc).splitlines()[0][:200]})"


def pull_all(
    agents: Mapping[str, tuple[str, int, str | None]], timeout: float, workers: int = WORKERS
) -> dict[str, LivePod | str]:
    """Every agent's ``/live`` (pod name -> host, port, its token; -> answer or why not), at most
    ``workers`` at once."""
    if not agents:
        return {}
    names = sorted(agents)
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(names)))) as pool:
        answers = pool.map(lambda n: pull_live(*agents[n], timeout), names)
        return dict(zip(names, answers, strict=True))


def ask_live_dumps(
    agents: Mapping[str, tuple[str, int, tuple[int, ...], str | None]], workers: int = WORKERS
) -> dict[str, AskResult]:
    """Ask every agent (pod -> host, port, its ranks, its token) to dump its ranks from their live buffers
    (``POST /live-dump``), at most ``workers`` at once; pod -> what asking it achieved. Never raises."""
    if not agents:
        return {}
    names = sorted(agents)

    def ask(pod: str) -> AskResult:
        host, port, ranks, token = agents[pod]
        return ask_to_dump(host, port, token, ranks, LIVE_DUMP_TIMEOUT_S, path="/live-dump")

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(names)))) as pool:
        return dict(zip(names, pool.map(ask, names), strict=True))
