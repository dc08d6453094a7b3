"""The operator's memory of what it has seen: the rank layout of each opted-in job and the pods of each
job attempt (including pods deleted since). Pure data, no I/O; shared by the watch handlers (writers) and
the Incident driver (reader). Writers replace whole entries under a lock, readers get copies.

This memory is a cache, not the state: after a restart it is refilled by kopf's initial listing; what
must survive a restart lives in the Incident's status and in the store.
"""

from __future__ import annotations

import dataclasses
import threading

from frwatch_operator.detect.pod_failure import PodFacts
from frwatch_operator.kinds.job_kind import RankLayout

AttemptId = tuple[str, str, str]
#: Problems remembered per job (the first ones: an Incident's condition names them).
MAX_PROBLEMS = 32  #: (namespace, job, attempt)


#: Stripes of the Incident-opening locks (bounded however many Incidents a process opens).
OPENING_STRIPES = 64


class Observations:
    """Jobs' rank layouts and the pods seen per job attempt."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._layouts: dict[tuple[str, str], RankLayout] = {}
        self._pods: dict[AttemptId, dict[str, PodFacts]] = {}
        self._opened: set[tuple[str, str]] = set()
        #: one lock per stripe of Incident names: two pods of one attempt failing at once open its Incident
        #: one after the other (the second finds it opened), not both with a create (one answered 409)
        self._opening = tuple(threading.Lock() for _ in range(OPENING_STRIPES))
        self._said: set[str] = set()
        self._uncaptured: dict[tuple[str, str], frozenset[str]] = {}
        self._problems: dict[tuple[str, str], dict[str, str]] = {}

    # --- jobs -------------------------------------------------------------------------------------------
    def set_layout(self, namespace: str, job: str, layout: RankLayout) -> None:
        with self._lock:
            self._layouts[(namespace, job)] = layout

    def layout(self, namespace: str, job: str) -> RankLayout | None:
        with self._lock:
            return self._layouts.get((namespace, job))

    def forget_job(self, namespace: str, job: str) -> None:
        with self._lock:
            self._layouts.pop((namespace, job), None)
            for key in [k for k in self._pods if k[:2] == (namespace, job)]:
                del self._pods[key]
            self._uncaptured.pop((namespace, job), None)
            self._problems.pop((namespace, job), None)

    # --- pods running without capture (no frwatch agent), per job -------------------------------------
    def note_uncaptured(self, namespace: str, job: str, pod: str, present: bool) -> None:
        """Remember (``present``) or forget a live pod of the job that runs without capture."""
        with self._lock:
            pods = self._uncaptured.get((namespace, job), frozenset())
            pods = pods | {pod} if present else pods - {pod}
            if pods:
                self._uncaptured[(namespace, job)] = pods
            else:
                self._uncaptured.pop((namespace, job), None)

    def uncaptured(self, namespace: str, job: str) -> list[str]:
        """The job's live pods without capture, by name."""
        with self._lock:
            return sorted(self._uncaptured.get((namespace, job), ()))

    # --- bad input named once: (namespace, job) -> {what: why} (an Incident's conditions list them) ------
    def note_problem(self, namespace: str, job: str, what: str, why: str) -> None:
        """Remember one problem of the job's input (``what``: e.g. "pod x" or "spec"), latest wins."""
        with self._lock:
            known = self._problems.get((namespace, job), {})
            if what in known or len(known) < MAX_PROBLEMS:  # bounded: a job of many bad pods names the first
                self._problems[(namespace, job)] = {**known, what: why}

    def problems(self, namespace: str, job: str) -> dict[str, str]:
        with self._lock:
            return dict(self._problems.get((namespace, job), {}))

    # --- pods -------------------------------------------------------------------------------------------
    def record_pod(self, facts: PodFacts) -> None:
        """Remember the latest view of a pod (``facts.attempt`` must be known). A deletion is kept as a
        deleted pod with its last known status (its exit codes are evidence)."""
        if facts.attempt is None:
            return
        key = (facts.namespace, facts.job, facts.attempt)
        with self._lock:
            pods = dict(self._pods.get(key, {}))
            before = pods.get(facts.name)
            if facts.deleted and before is not None:
                facts = dataclasses.replace(
                    before, deleted=True, running_containers=frozenset(),
                    failure=before.failure or facts.failure, ended=before.ended or facts.ended,
                )  # fmt: skip
            pods[facts.name] = facts
            self._pods[key] = pods

    def pods(self, namespace: str, job: str, attempt: str) -> list[PodFacts]:
        with self._lock:
            return list(self._pods.get((namespace, job, attempt), {}).values())

    def forget_attempt(self, namespace: str, job: str, attempt: str) -> None:
        with self._lock:
            self._pods.pop((namespace, job, attempt), None)

    # --- incidents known to exist (saves an API call per duplicated failure event) -----------------------
    def opened(self, namespace: str, incident: str) -> bool:
        with self._lock:
            return (namespace, incident) in self._opened

    def opening(self, namespace: str, incident: str) -> threading.Lock:
        """The lock to hold while opening this Incident (check :meth:`opened`, create, :meth:`mark_opened`)."""
        return self._opening[hash((namespace, incident)) % OPENING_STRIPES]

    def mark_opened(self, namespace: str, incident: str) -> None:
        with self._lock:
            self._opened.add((namespace, incident))

    # --- notices already posted by this process (the API call is skipped for a repeat) -------------------
    def first_time(self, key: str) -> bool:
        """True the first time ``key`` is seen by this process."""
        with self._lock:
            if key in self._said:
                return False
            self._said.add(key)
            return True
