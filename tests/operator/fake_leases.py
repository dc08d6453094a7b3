"""In-memory Leases and a hand-moved clock for the leader election and live shard tests."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from frwatch_operator.errors import RetryableError


class FakeLeases:
    """Leases by name that refuse a write at a stale resourceVersion (409 -> False), as the API does;
    ``down``: reads fail as an unreachable API server's do."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.versions = itertools.count(1)
        self.down = False

    @property
    def lease(self) -> dict[str, Any] | None:
        """The one Lease of a test that uses one (the leader election's)."""
        assert len(self.leases) <= 1, sorted(self.leases)
        return next(iter(self.leases.values()), None)

    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self.down:
            raise RetryableError("read Lease: API server unreachable")
        return copy.deepcopy(self.leases.get(name))

    def _put(self, name: str, body: Any) -> None:
        self.leases[name] = {**copy.deepcopy(dict(body)),
                             "metadata": {**body["metadata"], "resourceVersion": str(next(self.versions))}}  # fmt: skip

    def create_lease(self, namespace: str, body: Any) -> bool:
        name = body["metadata"]["name"]
        if name in self.leases:
            return False
        self._put(name, body)
        return True

    def replace_lease(self, namespace: str, name: str, body: Any) -> bool:
        if body["metadata"].get("resourceVersion") != self.leases[name]["metadata"]["resourceVersion"]:
            return False
        self._put(name, body)
        return True


class Clock:
    """A monotonic clock the test moves (``clock.now += 5``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
