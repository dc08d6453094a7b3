"""Pod Security admission for the API emulator: the Pod Security Standards, enforced per namespace label.

    install_pod_security(handle)     # every Pod CREATE is now checked, after the mutating webhooks

As the real API server's PodSecurity admission plugin does: a namespace labelled
``pod-security.kubernetes.io/enforce: baseline|restricted`` refuses a pod that violates that level
(403 Forbidden, ``pods "<name>" is forbidden: violates PodSecurity "restricted:latest": <reason>
(<detail>), ...``); ``pod-security.kubernetes.io/warn`` admits it with one warning saying the same.
It runs after the mutating webhooks, on the pod as it will be stored, so an injected container is judged
with the rest.

The checks (:func:`violations`), written from the Pod Security Standards documentation and the
reasons and details the upstream ``k8s.io/pod-security-admission`` policy package reports, "latest"
version; containers are the regular, init and ephemeral ones:

* baseline: host namespaces, privileged containers, capabilities added beyond the default set, hostPath
  volumes, host ports, an ``Unconfined`` seccomp profile;
* restricted, in addition: volume types other than configMap, csi, downwardAPI, emptyDir, ephemeral,
  image, persistentVolumeClaim, projected and secret; ``allowPrivilegeEscalation`` not false;
  ``runAsNonRoot`` not true (pod or every container); ``runAsUser: 0``; no ``RuntimeDefault`` or
  ``Localhost`` seccomp profile (pod or every container); capabilities without ``drop: [ALL]`` or adding
  anything but ``NET_BIND_SERVICE``. ``hostUsers: false`` relaxes the two user checks, as upstream.

Not done (the emulator's pods never set them): AppArmor, SELinux options, /proc mount, sysctls, Windows
HostProcess, host probes and lifecycle handlers, the ``audit`` mode, version pinning (``*-version``
labels: always "latest"), exemptions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from frwatch_dev.localcluster.errors import ApiError
from frwatch_dev.localcluster.resources import ResourceType
from frwatch_dev.localcluster.storage import Store

if TYPE_CHECKING:
    from frwatch_dev.localcluster.apiserver import ApiServerHandle

Obj = dict[str, Any]
LABEL_ENFORCE = "pod-security.kubernetes.io/enforce"
LABEL_WARN = "pod-security.kubernetes.io/warn"
LEVELS = ("privileged", "baseline", "restricted")
_DEFAULT_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}  # fmt: skip
_RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                       "persistentVolumeClaim", "projected", "secret"}  # fmt: skip


def _containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, Mapping):
                yield container


def _sc(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    sc = obj.get("securityContext")
    return sc if isinstance(sc, Mapping) else {}


def _names(what: str, names: list[str]) -> str:
    return (
        f"{what}{'s' if len(names) > 1 else ''} {', '.join(repr(n).replace(chr(39), chr(34)) for n in names)}"
    )


def _check(bad: list[str], reason: str, detail: Callable[[list[str]], str]) -> list[tuple[str, str]]:
    return [(reason, detail(bad))] if bad else []


def _baseline(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    hosts = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k) is True]
    out += [("host namespaces", ", ".join(hosts))] if hosts else []
    conts = list(_containers(spec))
    privileged = [str(x.get("name")) for x in conts if _sc(x).get("privileged") is True]
    out += _check(
        privileged,
        "privileged",
        lambda b: f"{_names('container', b)} must not set securityContext.privileged=true",
    )
    added = [str(x.get("name")) for x in conts
             if set((_sc(x).get("capabilities") or {}).get("add") or []) - _DEFAULT_CAPABILITIES]  # fmt: skip
    out += _check(added, "non-default capabilities",
                  lambda b: f"{_names('container', b)} must not include capabilities beyond the default set")  # fmt: skip
    host_path = [
        str(v.get("name")) for v in spec.get("volumes") or [] if isinstance(v, Mapping) and "hostPath" in v
    ]
    out += _check(host_path, "hostPath volumes", lambda b: f"{_names('volume', b)} must not use hostPath")
    ports = [
        str(x.get("name"))
        for x in conts
        if any(isinstance(p, Mapping) and p.get("hostPort") for p in x.get("ports") or [])
    ]
    out += _check(ports, "hostPort", lambda b: f"{_names('container', b)} must not use hostPort")
    unconfined = (["pod"] if (_sc(spec).get("seccompProfile") or {}).get("type") == "Unconfined" else []) + [
        str(x.get("name")) for x in conts if (_sc(x).get("seccompProfile") or {}).get("type") == "Unconfined"
    ]
    out += _check(
        unconfined,
        "seccompProfile",
        lambda b: f'{", ".join(b)} must not set securityContext.seccompProfile.type to "Unconfined"',
    )
    return out


def _restricted(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    conts = list(_containers(spec))
    pod = _sc(spec)
    bad_volumes = [str(v.get("name")) for v in spec.get("volumes") or []
                   if isinstance(v, Mapping) and not (set(v) - {"name"}) & _RESTRICTED_VOLUMES]  # fmt: skip
    out += _check(
        bad_volumes,
        "restricted volume types",
        lambda b: f"{_names('volume', b)} must use an allowed volume type",
    )
    escalate = [str(x.get("name")) for x in conts if _sc(x).get("allowPrivilegeEscalation") is not False]
    out += _check(escalate, "allowPrivilegeEscalation != false",
                  lambda b: f"{_names('container', b)} must set securityContext.allowPrivilegeEscalation=false")  # fmt: skip
    user_ns = spec.get("hostUsers") is False
    pod_non_root = pod.get("runAsNonRoot") is True
    root = ["pod"] if pod.get("runAsNonRoot") is False else []
    root += [str(x.get("name")) for x in conts
             if _sc(x).get("runAsNonRoot") is False or ("runAsNonRoot" not in _sc(x) and not pod_non_root)]  # fmt: skip
    if not user_ns:
        out += _check(
            root,
            "runAsNonRoot != true",
            lambda b: f"{', '.join(b)} must set securityContext.runAsNonRoot=true",
        )
        uid0 = (["pod"] if pod.get("runAsUser") == 0 else []) + [
            str(x.get("name")) for x in conts if _sc(x).get("runAsUser") == 0
        ]
        out += _check(uid0, "runAsUser=0", lambda b: f"{', '.join(b)} must not set runAsUser=0")
    ok = ("RuntimeDefault", "Localhost")
    pod_seccomp = (pod.get("seccompProfile") or {}).get("type")
    seccomp = ["pod"] if pod_seccomp is not None and pod_seccomp not in ok else []
    seccomp += [str(x.get("name")) for x in conts
                if (t := (_sc(x).get("seccompProfile") or {}).get("type")) not in ok and (t is not None or pod_seccomp not in ok)]  # fmt: skip
    out += _check(seccomp, "seccompProfile",
                  lambda b: f"{', '.join(b)} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"")  # fmt: skip
    caps = [str(x.get("name")) for x in conts
            if "ALL" not in ((_sc(x).get("capabilities") or {}).get("drop") or [])
            or set((_sc(x).get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}]  # fmt: skip
    out += _check(caps, "unrestricted capabilities",
                  lambda b: f'{_names("container", b)} must set securityContext.capabilities.drop=["ALL"] and add nothing but NET_BIND_SERVICE')  # fmt: skip
    return out


def violations(pod: Mapping[str, Any], level: str) -> list[tuple[str, str]]:
    """(reason, detail) of each check of ``level`` the pod fails (empty: it passes)."""
    spec = pod.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if level == "privileged":
        return []
    found = _baseline(spec)
    return found + _restricted(spec) if level == "restricted" else found


def describe(level: str, found: list[tuple[str, str]]) -> str:
    """``violates PodSecurity "<level>:latest": reason (detail), ...`` as the API server says it."""
    return f'violates PodSecurity "{level}:latest": ' + ", ".join(f"{r} ({d})" for r, d in found)


class PodSecurityAdmission:
    """The admission hook (``ApiServer.admission_hooks``): checks pods against their namespace's level."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _labels(self, namespace: str) -> Mapping[str, str]:
        ns_type = self.store.type_for("", "v1", "namespaces")
        if ns_type is None or not namespace:
            return {}
        try:
            return self.store.get(ns_type, "", namespace)["metadata"].get("labels") or {}
        except ApiError:
            return {}

    async def __call__(
        self, rt: ResourceType, namespace: str, body: Obj, dry_run: bool
    ) -> tuple[Obj, list[str]]:
        if (rt.group, rt.plural) != ("", "pods"):
            return body, []
        labels = self._labels(namespace)
        enforce, warn = labels.get(LABEL_ENFORCE, "privileged"), labels.get(LABEL_WARN, "privileged")
        name = str(
            (body.get("metadata") or {}).get("name") or (body.get("metadata") or {}).get("generateName") or ""
        )
        if enforce in LEVELS and (found := violations(body, enforce)):
            raise ApiError(403, "Forbidden", f'pods "{name}" is forbidden: {describe(enforce, found)}')
        if warn in LEVELS and (found := violations(body, warn)):
            return body, [f"would {describe(warn, found)}"]
        return body, []


def install_pod_security(handle: ApiServerHandle) -> PodSecurityAdmission:
    """Make the emulator check every Pod CREATE against its namespace's Pod Security level, after the
    admission hooks already installed (the mutating webhooks). Idempotent per handle."""
    for hook in handle.server.admission_hooks:
        if isinstance(hook, PodSecurityAdmission):
            return hook
    admission = PodSecurityAdmission(handle.server.store)

    async def install() -> None:
        handle.server.admission_hooks.append(admission)

    asyncio.run_coroutine_threadsafe(install(), handle.loop).result(timeout=10)
    return admission
