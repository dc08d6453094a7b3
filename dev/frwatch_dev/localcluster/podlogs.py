"""Container logs as the kubelet keeps them, and ``GET pods/{name}/log`` as the API server answers it.

The stand-in kubelet writes each container instance's output to
``<logs_dir>/<namespace>_<pod>_<uid>/<container>/<restartCount>.log`` (the real kubelet's
``/var/log/pods`` layout). The emulator reads the same folder for ``kubectl logs``: the current (or last)
instance, or with ``previous`` the one before it; ``tailLines``, ``limitBytes`` and ``follow`` as the
real server applies them. Not done: ``timestamps``, ``sinceSeconds``/``sinceTime``, ``insecureSkipTLSVerifyBackend``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frwatch_dev.localcluster.errors import ApiError

Obj = dict[str, Any]


def container_dir(logs_dir: Path, namespace: str, pod: str, uid: str, container: str) -> Path:
    return logs_dir / f"{namespace}_{pod}_{uid}" / container


def instances(folder: Path) -> list[Path]:
    """A container's instance logs, oldest first."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.glob("*.log") if p.stem.isdigit()), key=lambda p: int(p.stem))


def _names(spec: Obj, key: str) -> list[str]:
    return [str(c.get("name")) for c in spec.get(key) or []]


def choose_container(pod: Obj, wanted: str | None) -> str:
    """The container a log request is for, with the real server's refusals."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    mains, inits = _names(spec, "containers"), _names(spec, "initContainers")
    if not wanted:
        if len(mains) == 1:
            return mains[0]
        text = (
            f"a container name must be specified for pod {meta['name']}, choose one of: [{' '.join(mains)}]"
        )
        if inits:
            text += f" or one of the init containers: [{' '.join(inits)}]"
        raise ApiError.bad_request(text)
    if wanted not in mains and wanted not in inits:
        raise ApiError.bad_request(f"container {wanted} is not valid for pod {meta['name']}")
    return wanted


def _waiting_reason(pod: Obj, container: str) -> str:
    status = pod.get("status") or {}
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if cs.get("name") == container:
            return str(((cs.get("state") or {}).get("waiting") or {}).get("reason") or "ContainerCreating")
    return "ContainerCreating"


def log_file(logs_dir: Path, pod: Obj, container: str, previous: bool) -> Path:
    """The file holding the requested instance's output; ApiError as the real server words it."""
    meta = pod["metadata"]
    found = instances(container_dir(logs_dir, meta["namespace"], meta["name"], meta["uid"], container))
    if previous:
        if len(found) < 2:
            raise ApiError.bad_request(
                f'previous terminated container "{container}" in pod "{meta["name"]}" not found'
            )
        return found[-2]
    if not found:
        raise ApiError.bad_request(
            f'container "{container}" in pod "{meta["name"]}" is waiting to start: {_waiting_reason(pod, container)}'
        )
    return found[-1]


def _int(query: Mapping[str, str], key: str) -> int | None:
    text = query.get(key)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError as exc:
        raise ApiError.bad_request(f"{key}: invalid value {text!r}: must be an integer") from exc
    if value < 0 or (key == "limitBytes" and value == 0):
        raise ApiError.bad_request(
            f"{key}: Invalid value: {value}: must be greater than {'0' if key == 'limitBytes' else 'or equal to 0'}"
        )
    return value


def read(path: Path, query: Mapping[str, str]) -> bytes:
    """The part of ``path`` a request asks for: its last ``tailLines`` lines, at most ``limitBytes`` bytes."""
    return read_bytes(path.read_bytes(), query)


def read_bytes(data: bytes, query: Mapping[str, str]) -> bytes:
    """The part of a log a request asks for: the first ``limitBytes`` bytes of its last ``tailLines`` lines."""
    tail = _int(query, "tailLines")
    if tail is not None:
        lines = data.splitlines(keepends=True)
        data = b"".join(lines[len(lines) - tail :]) if tail else b""
    limit = _int(query, "limitBytes")
    return data[:limit] if limit is not None else data


def limit_of(query: Mapping[str, str]) -> int | None:
    return _int(query, "limitBytes")


def instance_ended(pod: Obj, container: str, path: Path) -> bool:
    """Whether the instance writing ``path`` is over (terminated, or a newer instance took over): a
    followed log ends there."""
    status = pod.get("status") or {}
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if cs.get("name") == container:
            if int(cs.get("restartCount") or 0) != int(path.stem):
                return True
            return "running" not in (cs.get("state") or {})
    return True
