"""The kubelet's stand-in for cluster DNS of pod host names: ``<hostname>.<subdomain>`` names resolve to loopback.

In a cluster, a pod with ``spec.hostname`` and ``spec.subdomain`` (a headless Service of that name, as JobSet
creates one per JobSet) is reachable as ``<hostname>.<subdomain>[.<namespace>[.svc[.cluster.local]]]``; torchrun
pods find their master that way (Trainer v2's ``PET_MASTER_ADDR=<job>-node-0-0.<job>``, a JobSet's own
``MASTER_ADDR``). Here every pod runs on the host's loopback and no resolver knows those names, so the kubelet
rewrites an env value that is exactly such a name under the pod's own subdomain (optionally ``:<port>``) to
``127.0.0.1`` before it starts a container. Nothing else is rewritten: a name under another subdomain, a
Service name, or text that merely contains such a name is left as it is.
"""

from __future__ import annotations

import re
from typing import Any

LOOPBACK = "127.0.0.1"
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"


def resolve(value: str, pod: dict[str, Any]) -> str:
    """``value``, or ``127.0.0.1`` (keeping a ``:port``) when it names a pod under ``pod``'s subdomain."""
    sub = str((pod.get("spec") or {}).get("subdomain") or "")
    if not sub:
        return value
    ns = re.escape(str((pod.get("metadata") or {}).get("namespace") or "default"))
    pattern = rf"{_LABEL}\.{re.escape(sub)}(\.{ns}(\.svc(\.cluster\.local)?)?)?(?P<port>:[0-9]{{1,5}})?"
    match = re.fullmatch(pattern, value)
    if match is None:
        return value
    return LOOPBACK + (match.group("port") or "")
