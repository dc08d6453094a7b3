"""Two pods of one attempt failing at once open its Incident once: the second waits for the first and finds
it opened, instead of creating it again (a 409) and reading it back (the race that made the full-incident
RBAC test see an unexpected ``get incidents`` under load)."""

from __future__ import annotations

import threading
import time
from typing import Any

from frwatch_operator.capture.optin import defaults
from frwatch_operator.config import load_config
from frwatch_operator.detect.observations import Observations
from frwatch_operator.handlers.deps import Deps
from frwatch_operator.handlers.pods import open_incident
from frwatch_operator.kinds.job_kind import PYTORCHJOB
from frwatch_operator.webhook import JobEntry, JobIndex


class SlowKube:
    """The calls open_incident makes; the create takes a while, as under load."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def _note(self, call: str) -> None:
        with self._lock:
            self.calls.append(call)

    def create_incident(self, body: dict[str, Any]) -> bool:
        self._note("create")
        time.sleep(0.3)
        return sum(1 for c in self.calls if c == "create") == 1  # a second create answers 409 (False)

    def get_incident(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._note("get")
        return None

    def patch_incident_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self._note("patch status")

    def bump_attempt(self, *args: Any) -> None:
        self._note("bump")


def test_two_failures_of_one_attempt_at_once_create_its_incident_once() -> None:
    kube = SlowKube()
    config = load_config({})
    deps = Deps(config, JobIndex(), Observations(), kube, None)  # type: ignore[arg-type]
    entry = JobEntry(PYTORCHJOB.kind, "team-a", "job-a", "uid-1", {}, {})
    names: list[str] = []

    def fail(pod: int) -> None:
        names.append(open_incident(deps, PYTORCHJOB, entry, defaults(config), "0", f"pod {pod} exited 1"))

    threads = [threading.Thread(target=fail, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(set(names)) == 1 and len(names) == 3
    assert kube.calls.count("create") == 1 and "get" not in kube.calls, kube.calls
