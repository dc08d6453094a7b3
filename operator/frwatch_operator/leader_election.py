"""Which operator replica drives the Incidents: leader election over a ``coordination.k8s.io`` Lease.

Several replicas run the operator (the chart's ``replicaCount``). Every replica watches jobs, pods and
CapturePolicies, so every replica's job index is current and every replica serves the admission webhook
(the Service spreads AdmissionReviews over them; one replica down does not stop injection). What the
watch handlers write is idempotent and conditional (deterministic Incident and Event names, 409 is
success; job annotations written against the resourceVersion read), so any replica may write it. The
Incident drivers (collection, the verdict loop) are stateful passes: only the **leader** runs them.

Why not kopf's peering: it pauses *every* watch of a replica that is not the highest-priority one (the job
index of that replica goes stale: it would admit new jobs' pods without capture, although its webhook
server keeps answering), replicas of equal priority all pause, and a replica killed without goodbye counts
as alive for its whole ``lifetime``. So kopf runs standalone in each replica and this module elects.

The rules are client-go's (``tools/leaderelection``): a candidate takes the Lease when it is absent,
released (no holder), or unchanged for ``lease_seconds`` as this replica observed it (its own clock, never
the holder's timestamps); the leader renews it every ``retry_seconds`` and counts as leading only until
``renew_seconds`` after its last successful renewal, which is shorter than ``lease_seconds``: a leader that
cannot renew stops driving before anyone else may start. Every write is conditional on the
resourceVersion read (a race is a 409: someone else won). A clean stop releases the Lease at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from frwatch_operator.errors import FrwatchError
from frwatch_operator.repeating import Repeating
from frwatch_operator.times import now_rfc3339

logger = logging.getLogger(__name__)


class LeaseApi(Protocol):
    """The Lease calls (the adapter is ``frwatch_operator.kube.adapter.Kube``). ``create``/``replace`` return False
    on a 409 (another replica wrote first)."""

    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> bool: ...
    def replace_lease(self, namespace: str, name: str, body: Mapping[str, Any]) -> bool: ...


class Leadership(Protocol):
    def leading(self) -> bool:
        """Whether this replica may drive Incidents now."""
        ...


class Alone:
    """One replica, no election: it always leads."""

    def leading(self) -> bool:
        return True


class Step(StrEnum):
    """What a candidate does with the Lease as it reads it."""

    CREATE = "create"  #: no Lease yet
    RENEW = "renew"  #: ours: renew it
    TAKE = "take"  #: released, or its holder stopped renewing it: take it over
    WAIT = "wait"  #: held by another replica that renews it


@dataclass(frozen=True)
class Record:
    """The Lease's spec as the election reads it."""

    holder: str
    renew_time: str
    transitions: int
    resource_version: str

    @classmethod
    def of(cls, lease: Mapping[str, Any]) -> Record:
        spec = lease.get("spec") or {}
        meta = lease.get("metadata") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    def same_as(self, other: Record | None) -> bool:
        return other is not None and (self.holder, self.renew_time, self.resource_version) == (
            other.holder, other.renew_time, other.resource_version
        )  # fmt: skip


def decide(record: Record | None, me: str, unchanged_for: float, lease_seconds: float) -> Step:
    """The step for a candidate ``me`` that has seen ``record`` unchanged for ``unchanged_for`` seconds."""
    if record is None:
        return Step.CREATE
    if record.holder == me:
        return Step.RENEW
    if not record.holder or unchanged_for >= lease_seconds:
        return Step.TAKE
    return Step.WAIT


class LeaderElector:
    """Runs the election in a thread (:meth:`start`); :meth:`leading` is what the drivers ask."""

    def __init__(
        self,
        api: LeaseApi,
        *,
        identity: str,
        namespace: str,
        name: str,
        lease_seconds: float,
        renew_seconds: float,
        retry_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[bool], None] | None = None,
        may_take: Callable[[float], bool] | None = None,
        role: str = "the Incident drivers",
    ) -> None:
        if not 0 < retry_seconds < renew_seconds < lease_seconds:
            raise ValueError("leader election needs retry_seconds < renew_seconds < lease_seconds")
        self.api, self.identity, self.namespace, self.name = api, identity, namespace, name
        self.lease_seconds, self.renew_seconds, self.retry_seconds = lease_seconds, renew_seconds, retry_seconds
        self._clock = clock
        self._on_change = on_change
        #: asked before creating or taking the Lease, with how long it has been seen free or unrenewed
        #: (seconds); False: wait (the live shards' spread, ``frwatch_operator.live.shards``)
        self._may_take = may_take
        self.role = role
        self._renewed_at: float | None = None  # our clock, at the start of the last renewal that went through
        self._seen: Record | None = None
        self._seen_at = clock()  # an absent Lease counts as unchanged since this elector began
        self._was_leading = False
        self._repeating = Repeating(self.step, retry_seconds, "frwatch-leader-election")

    def leading(self) -> bool:
        renewed = self._renewed_at
        return renewed is not None and self._clock() - renewed < self.renew_seconds

    def step(self) -> Step:
        """One round: read the Lease, create, renew, take or wait. API trouble is logged: a leader that
        keeps failing stops leading when its renewal is ``renew_seconds`` old."""
        started = self._clock()
        try:
            lease = self.api.read_lease(self.namespace, self.name)
            record = Record.of(lease) if lease is not None else None
            if (record is None) != (self._seen is None) or (record and not record.same_as(self._seen)):
                self._seen, self._seen_at = record, started
            what = decide(record, self.identity, started - self._seen_at, self.lease_seconds)
            if what in (Step.CREATE, Step.TAKE) and self._may_take and not self._may_take(started - self._seen_at):
                what = Step.WAIT
            if what is not Step.WAIT and self._write(what, lease, record):
                self._renewed_at = started
            elif what is not Step.RENEW:  # another replica holds it (or just won it): not leading
                self._renewed_at = None
            # a renewal refused (409) or not answered keeps the last one: leading() expires with it
        except FrwatchError as exc:
            logger.warning("leader election: Lease %s/%s: %s", self.namespace, self.name, exc)
            what = Step.WAIT
        self._tell()
        return what

    def _write(self, what: Step, lease: Mapping[str, Any] | None, record: Record | None) -> bool:
        now = now_rfc3339("microseconds")  # a Lease holds MicroTimes
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, round(self.lease_seconds)),
                "renewTime": now}  # fmt: skip
        if what is Step.CREATE:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {**spec, "acquireTime": now, "leaseTransitions": 0}}  # fmt: skip
            return self.api.create_lease(self.namespace, body)
        assert lease is not None and record is not None
        old = dict(lease.get("spec") or {})
        if what is Step.TAKE:
            spec |= {"acquireTime": now, "leaseTransitions": record.transitions + 1}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "resourceVersion": record.resource_version},
                "spec": {**old, **spec}}  # fmt: skip
        return self.api.replace_lease(self.namespace, self.name, body)

    def _tell(self) -> None:
        now = self.leading()
        if now != self._was_leading:
            self._was_leading = now
            logger.warning(
                "leader election: %s %s %s (Lease %s/%s)",
                self.identity, "now runs" if now else "no longer runs", self.role, self.namespace, self.name,
            )  # fmt: skip
            if self._on_change is not None:
                self._on_change(now)

    def start(self) -> LeaderElector:
        """Step every ``retry_seconds`` in a background thread until :meth:`stop`."""
        self._repeating.start()
        return self

    def stop(self) -> None:
        """Stop electing and release the Lease if this replica holds it (the next leader need not wait)."""
        self._repeating.stop()
        self.release()

    def release(self) -> None:
        """Release the Lease if this replica holds it (another replica may take it at once)."""
        if self._renewed_at is None:
            return
        self._renewed_at = None
        try:
            lease = self.api.read_lease(self.namespace, self.name)
            record = Record.of(lease) if lease is not None else None
            if lease is not None and record is not None and record.holder == self.identity:
                body = {**lease, "spec": {**(lease.get("spec") or {}), "holderIdentity": "",
                                          "leaseDurationSeconds": 1}}  # fmt: skip
                self.api.replace_lease(self.namespace, self.name, body)
                logger.warning("leader election: %s released Lease %s/%s", self.identity, self.namespace, self.name)
        except FrwatchError as exc:
            logger.warning("leader election: Lease %s/%s not released: %s", self.namespace, self.name, exc)
