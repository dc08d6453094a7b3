"""The local cluster: a Kubernetes API emulator over real HTTP (and, later, the stand-ins around it).

``start_apiserver`` and friends are imported lazily, so that ``python -m
frwatch_dev.localcluster.apiserver`` runs the module once, as ``__main__`` only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frwatch_dev.localcluster.apiserver import ApiServerHandle, kubeconfig, start_apiserver

__all__ = ["ApiServerHandle", "kubeconfig", "start_apiserver"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("frwatch_dev.localcluster.apiserver"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
