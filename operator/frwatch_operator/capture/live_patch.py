"""Live watch's part of the pod patch (issue 15): opt-in ``frwatch.io/live: "enabled"`` on the job.

Pure, computed on the pod as capture injection (:mod:`.injection`) left it, and appended to that patch:

- every rank container (not frwatch's agent) gets ``FRWATCH_LIVE_DIR=<dump dir>/.frwatch-live`` unless it
  sets it, and ``<dump dir>/.frwatch-python`` (the bootstrap the agent places there) appended to the
  ``PYTHONPATH`` its spec sets: the user's entries stay first and unchanged.
- A container whose spec does not set ``PYTHONPATH`` (or sets it from a Secret or ConfigMap) is left without
  the bootstrap, with a warning: setting it would shadow a ``PYTHONPATH`` its image may set (the webhook
  cannot see image env). Such a program can run torch's ``worker_main()`` with
  ``TORCH_WORKER_SERVER_SOCKET=$FRWATCH_LIVE_DIR/rank-<global rank>.sock``, or set ``PYTHONPATH`` in its env.
- the agent gets ``FRWATCH_AGENT_LIVE=true``: it places the bootstrap and samples the sockets; and a
  ``startupProbe`` on its control port, so the rank containers start only once the bootstrap is in place.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from frwatch_operator import constants as c
from frwatch_operator.capture.sidecar import is_ours
from frwatch_operator.config import Config, env_name

ENV_PYTHONPATH = "PYTHONPATH"
#: The agent (a native sidecar) counts as started once it listens, after it placed the bootstrap: Kubernetes
#: starts the rank containers only then. Without it a rank's Python could start before the bootstrap's
#: ``sitecustomize`` exists and run without live watch, silently (seen on the local cluster, issue 15's e2e).
STARTUP_PROBE: dict[str, Any] = {
    "tcpSocket": {"port": c.AGENT_CONTROL_PORT_NAME}, "periodSeconds": 1, "failureThreshold": 120,
}  # fmt: skip


def _ptr(*parts: str | int) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _rank_span(containers: list[Any]) -> str:
    """``"first-last"`` global ranks of the pod from a rank container's literal ``PET_NODE_RANK`` and
    ``PET_NPROC_PER_NODE`` (Kubeflow sets both on the pod it creates); "" when they are not plain numbers
    (``nproc_per_node: auto``) or containers disagree."""
    spans = set()
    for container in containers:
        if (
            not isinstance(container, Mapping)
            or is_ours(container)
            or not isinstance(container.get("env"), list)
        ):
            continue
        env = {e.get("name"): e.get("value") for e in container["env"] if isinstance(e, Mapping)}
        node, nproc = env.get(c.ENV_PET_NODE_RANK), env.get(c.ENV_PET_NPROC_PER_NODE)
        if isinstance(node, str) and isinstance(nproc, str) and node.isdigit() and nproc.isdigit():
            n, p = int(node), int(nproc)
            if 0 < p <= 1024 and n < 1_000_000:
                spans.add(f"{n * p}-{n * p + p - 1}")
    return spans.pop() if len(spans) == 1 else ""


def live_ops(pod: Mapping[str, Any], config: Config) -> tuple[list[dict[str, Any]], list[str]]:
    """The ops (RFC 6902 ``add``) and warnings that turn live watch on for a pod capture already injected."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return [], []
    live_dir = posixpath.join(config.fr.dump_dir, c.LIVE_SOCKET_SUBDIR)
    code_dir = posixpath.join(config.fr.dump_dir, c.LIVE_BOOTSTRAP_SUBDIR)
    ops: list[dict[str, Any]] = []
    warnings: list[str] = []
    for i, container in enumerate(spec.get("containers") or []):
        if not isinstance(container, Mapping) or is_ours(container):
            continue
        name = str(container.get("name", f"#{i}"))
        env = container.get("env")
        env = env if isinstance(env, list) else []
        names = {e.get("name"): j for j, e in enumerate(env) if isinstance(e, Mapping)}
        if c.ENV_LIVE_DIR not in names:
            ops.append({"op": "add", "path": _ptr("spec", "containers", i, "env", "-"),
                        "value": {"name": c.ENV_LIVE_DIR, "value": live_dir}})  # fmt: skip
        j = names.get(ENV_PYTHONPATH, -1)
        current = env[j] if j >= 0 else None
        if current is None or not isinstance(current.get("value"), str) or current.get("valueFrom"):
            warnings.append(
                f"frwatch: live watch cannot reach container {name!r} without changes: its spec sets no "
                f"literal {ENV_PYTHONPATH} (frwatch appends its bootstrap to one, never replaces an image's). "
                f"Set {ENV_PYTHONPATH} in its env, or run torch's worker_main() with "
                f"{c.ENV_TORCH_WORKER_SERVER_SOCKET}=${c.ENV_LIVE_DIR}/rank-<global rank>.sock"
            )
            continue
        parts = [p for p in current["value"].split(":") if p]
        if code_dir not in parts:
            ops.append({"op": "add", "path": _ptr("spec", "containers", i, "env", j, "value"),
                        "value": ":".join([*parts, code_dir])})  # fmt: skip
    wanted = {
        env_name("agent", "live"): "true",
        env_name("agent", "live_period_seconds"): str(config.agent.live_period_seconds),
    }
    span = _rank_span(spec.get("containers") or [])
    if span:
        wanted[env_name("agent", "live_ranks")] = span
    for i, container in enumerate(spec.get("initContainers") or []):
        if is_ours(container) and isinstance(container, Mapping) and "startupProbe" not in container:
            ops.append({"op": "add", "path": _ptr("spec", "initContainers", i, "startupProbe"), "value": STARTUP_PROBE})
        if is_ours(container) and isinstance(container.get("env"), list):
            have = {e.get("name") for e in container["env"] if isinstance(e, Mapping)}
            ops += [
                {
                    "op": "add",
                    "path": _ptr("spec", "initContainers", i, "env", "-"),
                    "value": {"name": k, "value": v},
                }
                for k, v in wanted.items()
                if k not in have
            ]
    return ops, warnings
