"""How the local kubelet turns a container of a pod spec into a local process. Pure: no I/O.

Processes cannot mount volumes, so a pod's volumes are per-pod folders and every **path** a container
is given is rewritten to the folder behind it: an env value, a command or args item, or the part after
``=`` of one (``--out=/data/x``), that equals a ``volumeMounts[].mountPath`` or starts with it and
``/`` is rewritten to the host folder (longest mount first); so is the container's
``terminationMessagePath``. A program that builds such a path itself (not from its env or argv) is
not redirected: it writes where it says.

Images are not pulled or run: ``command`` (or the image's entrypoint from a map the kubelet is given)
runs with the local tools; ``python``/``python3``/``pythonX.Y`` (bare or absolute) is the kubelet's
Python, and other bare names are looked up on the node's ``PATH`` (the venv's ``bin`` first, so
``frwatch`` is the console script of this checkout).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

Obj = dict[str, Any]

DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log"
#: as the kubelet: at most this much of the termination message file (and of the log fallback)
TERMINATION_MESSAGE_LIMIT = 4096
FALLBACK_LOG_LINES = 80

_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")

#: (kind, namespace, name) -> the object's data as str -> str (decoded), or None when absent
ObjectData = Callable[[str, str], Mapping[str, str] | None]


class ContainerConfigError(ValueError):
    """The container cannot be started as specified (kubelet: CreateContainerConfigError)."""


class ExecutableNotFound(ContainerConfigError):
    """The command's executable is not in the "image" (the node's tools): a real kubelet's runtime fails the
    start, and the container is terminated with exit code 128, reason ``StartError`` (not retried as a
    config error)."""


@dataclass(frozen=True)
class Mount:
    """One volumeMount, resolved: the path the container asks for and the folder behind it."""

    mount_path: str
    host_path: str


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: known names are replaced, unknown ones kept, ``$$`` is ``$``."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _VAR_REF.sub(sub, value)


def rewrite_path(value: str, mounts: Sequence[Mount]) -> str:
    """``value`` with a mount path at its start (or after its first ``=``) replaced by the host folder."""
    head, sep, tail = "", "", value
    if not value.startswith("/") and "=" in value:
        head, sep, tail = value.partition("=")
    for mount in sorted(mounts, key=lambda m: len(m.mount_path), reverse=True):
        mp = mount.mount_path.rstrip("/") or "/"
        if tail == mp or tail.startswith(mp + "/"):
            return head + sep + mount.host_path.rstrip("/") + tail[len(mp) :]
    return value


def field_ref(pod: Mapping[str, Any], path: str, pod_ip: str, host_ip: str) -> str:
    """A downward-API ``fieldRef.fieldPath`` of ``pod``."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path in simple:
        return str(simple[path] or "")
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    raise ContainerConfigError(f"unsupported fieldRef.fieldPath {path!r}")


def _resource_ref(container: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    kind, _, name = str(ref.get("resource") or "").partition(".")
    value = ((container.get("resources") or {}).get(kind) or {}).get(name)
    if value is None:
        return "1" if name == "cpu" else "0"
    return str(value)


def container_env(
    pod: Mapping[str, Any], container: Mapping[str, Any], *, pod_ip: str, host_ip: str,
    lookup: Callable[[str, str], Mapping[str, str] | None],
) -> dict[str, str]:  # fmt: skip
    """The container's environment as the kubelet builds it: envFrom, then env (later wins, ``$(VAR)``
    expanded against what came before). ``lookup(kind, name)`` reads a Secret or ConfigMap of the pod's
    namespace (``kind`` "Secret" or "ConfigMap"; decoded data, None when absent). Raises
    :class:`ContainerConfigError` for a missing non-optional reference, as the kubelet refuses to start it."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            ref = source.get(key)
            if not ref:
                continue
            data = lookup(kind, str(ref.get("name") or ""))
            if data is None:
                if ref.get("optional"):
                    continue
                raise ContainerConfigError(f'{kind.lower()} "{ref.get("name")}" not found')
            env.update({prefix + k: v for k, v in data.items()})
    for item in container.get("env") or []:
        name = str(item.get("name") or "")
        if "value" in item or "valueFrom" not in item:
            env[name] = expand(str(item.get("value") or ""), env)
            continue
        source = item["valueFrom"] or {}
        if "fieldRef" in source:
            env[name] = field_ref(pod, str(source["fieldRef"].get("fieldPath") or ""), pod_ip, host_ip)
        elif "resourceFieldRef" in source:
            env[name] = _resource_ref(container, source["resourceFieldRef"])
        else:
            for kind, key in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                ref = source.get(key)
                if ref is None:
                    continue
                data = lookup(kind, str(ref.get("name") or ""))
                value = None if data is None else data.get(str(ref.get("key") or ""))
                if value is None:
                    if ref.get("optional"):
                        break
                    what = f'{kind.lower()} "{ref.get("name")}"'
                    raise ContainerConfigError(
                        f"{what} not found"
                        if data is None
                        else f"couldn't find key {ref.get('key')} in {what}"
                    )
                env[name] = value
                break
    return env


def decode_data(obj: Mapping[str, Any]) -> dict[str, str]:
    """A Secret's (base64 ``data`` + ``stringData``) or a ConfigMap's (``data``) entries as text."""
    if obj.get("kind") == "Secret" or "type" in obj:
        out = {k: base64.b64decode(v).decode(errors="replace") for k, v in (obj.get("data") or {}).items()}
        out.update({k: str(v) for k, v in (obj.get("stringData") or {}).items()})
        return out
    return {k: str(v) for k, v in (obj.get("data") or {}).items()}


def argv_for(
    container: Mapping[str, Any], env: Mapping[str, str], mounts: Sequence[Mount], *, python: str,
    which: Callable[[str], str | None], entrypoints: Mapping[str, Sequence[str]],
) -> list[str]:  # fmt: skip
    """The process's argv: command (or the image's entrypoint) + args, ``$(VAR)``-expanded and paths
    rewritten; the executable resolved to a local one."""
    command = [str(x) for x in container.get("command") or []]
    args = [str(x) for x in container.get("args") or []]
    if not command:
        image = str(container.get("image") or "")
        entry = entrypoint_of(image, entrypoints)
        if entry is None:
            raise ContainerConfigError(
                f"container {container.get('name')!r}: no command, and image {image!r} has no known entrypoint "
                "(the local kubelet runs no images: give the container a command, or map the image's "
                "entrypoint in Kubelet(entrypoints=...))"
            )
        command = list(entry)
    argv = [rewrite_path(expand(x, env), mounts) for x in command + args]
    exe = argv[0]
    name = PurePosixPath(exe).name
    if _PYTHON.fullmatch(name):
        argv[0] = python
    elif "/" not in exe or which(exe) is None:
        found = which(name)
        if found is None:
            raise ExecutableNotFound(
                f"failed to create containerd task: exec: {exe!r}: executable file not found in $PATH "
                "(the local kubelet runs commands with the node's tools)"
            )
        argv[0] = found
    return argv


def entrypoint_of(image: str, entrypoints: Mapping[str, Sequence[str]]) -> Sequence[str] | None:
    """The entrypoint for ``image``: an exact key, else its repository without tag or digest."""
    if image in entrypoints:
        return entrypoints[image]
    repo = image.split("@", 1)[0]
    if ":" in repo.rsplit("/", 1)[-1]:
        repo = repo.rsplit(":", 1)[0]
    return entrypoints.get(repo)


def exit_reason(code: int) -> tuple[int, str, int | None]:
    """(exitCode, reason, signal) of a process's ``returncode`` (negative: killed by that signal)."""
    if code < 0:
        return 128 - code, "Error", -code
    return code, "Completed" if code == 0 else "Error", None


def termination_message(file_text: str | None, log_tail: str | None, exit_code: int, policy: str) -> str:
    """The kubelet's message: the termination file, else (policy FallbackToLogsOnError, on error) the log."""
    if file_text:
        return file_text[:TERMINATION_MESSAGE_LIMIT]
    if policy == "FallbackToLogsOnError" and exit_code != 0 and log_tail:
        lines = log_tail.splitlines()[-FALLBACK_LOG_LINES:]
        return "\n".join(lines)[-TERMINATION_MESSAGE_LIMIT:]
    return ""


def is_sidecar(init_container: Mapping[str, Any]) -> bool:
    """A native sidecar: an init container with ``restartPolicy: Always``."""
    return init_container.get("restartPolicy") == "Always"


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists":
            if not tol.get("key") or tol.get("key") == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and str(tol.get("value") or "") == str(
            taint.get("value") or ""
        ):
            return True
    return False


def fits(pod: Mapping[str, Any], node: Mapping[str, Any]) -> str | None:
    """None when the scheduler may put ``pod`` on ``node``, else why not (as in FailedScheduling)."""
    spec = pod.get("spec") or {}
    if (node.get("spec") or {}).get("unschedulable"):
        return "node(s) were unschedulable"
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )
    if not ready:
        return "node(s) were not ready"
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return "node(s) didn't match Pod's node affinity/selector"
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(
            spec.get("tolerations") or [], taint
        ):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    return None
