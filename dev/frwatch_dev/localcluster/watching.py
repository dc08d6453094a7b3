"""Which watch event (if any) one watcher sees for one stored change.

As in the API server, a watch with a selector sees an object that starts matching as ADDED, one that
stops matching as DELETED, and changes of matching objects as MODIFIED.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from frwatch_dev.localcluster.resources import ResourceType
from frwatch_dev.localcluster.storage import Change, render

Obj = dict[str, Any]


@dataclass(frozen=True)
class WatchFilter:
    rt: ResourceType
    namespace: str | None  # None: every namespace
    predicate: Callable[[Obj], bool]

    def _matches(self, stored: Obj | None) -> tuple[bool, Obj | None]:
        if stored is None:
            return False, None
        obj = render(self.rt, stored)
        if (
            self.namespace is not None
            and self.rt.namespaced
            and obj["metadata"].get("namespace") != self.namespace
        ):
            return False, obj
        return self.predicate(obj), obj

    def event_for(self, change: Change) -> tuple[str, Obj] | None:
        if change.storage != self.rt.storage_name:
            return None
        new_ok, obj = self._matches(change.obj)
        assert obj is not None
        if change.type != "MODIFIED":
            return (change.type, obj) if new_ok else None
        old_ok, _ = self._matches(change.old)
        if new_ok and old_ok:
            return "MODIFIED", obj
        if new_ok:
            return "ADDED", obj
        if old_ok:
            return "DELETED", obj
        return None
