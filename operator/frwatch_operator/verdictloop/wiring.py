"""Which Kubernetes adapter :func:`~frwatch_operator.verdictloop.start_analysis` uses when the caller
passes none: the one :func:`frwatch_operator.verdictloop.handler.register` wired (the operator's own
ApiClient), else one over the ``kubernetes`` client's default configuration (which the operator's login
loads at start)."""

from __future__ import annotations

import threading

from frwatch_operator.verdictloop.ports import KubeActions

_lock = threading.Lock()
_wired: KubeActions | None = None


def wire(actions: KubeActions | None) -> None:
    """Use ``actions`` from now on (None: forget it)."""
    global _wired
    with _lock:
        _wired = actions


def actions() -> KubeActions:
    global _wired
    with _lock:
        if _wired is None:
            from kubernetes import client

            from frwatch_operator.verdictloop.kube_actions import KubernetesActions

            _wired = KubernetesActions(client.ApiClient())
        return _wired
