"""Live watch's rounds sharded by job over the operator's replicas (issue 15: one Python process cannot pull
and judge 10,000 pods every 15 s).

``operator.live_shards`` = N > 1: N ``coordination.k8s.io`` Leases ``<live_lease_prefix>-<i>`` in the
operator's namespace, each held by one replica through the leader election's own code
(:class:`~frwatch_operator.leader_election.LeaderElector`, one per shard, all stepped by one thread). A
replica runs the live rounds of the jobs whose uid hashes to a shard it holds (:func:`shard_of`: sha256 of
the uid, stable across processes and restarts). N = 1 (the default): no shard Lease, the leader runs every
job, as before.

Spread, with R = ``replicas`` (the chart's ``replicaCount``): a replica takes a free shard (absent, released,
or unrenewed for ``lease_seconds``) at once while it holds fewer than floor(N / R); up to ceil(N / R) a shard
that has stayed free for ``lease_seconds`` as it observed; beyond that only one free for ``2 * lease_seconds``
(no other replica took it: they are gone or full). So R replicas end within one shard of each other, a
replica stopped cleanly hands its shards over within ``2 * lease_seconds``, one killed within
``3 * lease_seconds`` (its renewals stop first). There is no hand-back: a replica that starts when every
shard is held waits until one is freed (the next restart or stop of another replica).

A job's judge lives with its shard's holder; a new holder starts a fresh judge (a stall needs
``live_stall_after_seconds`` of its own observation again, a desync is seen at its next round). The
Incident's name is deterministic, so a finding reported on both sides of a handover opens it once (the
second create answers 409).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import socket
import time
from collections.abc import Callable

from frwatch_operator.config import OperatorSettings
from frwatch_operator.leader_election import LeaderElector, Leadership, LeaseApi
from frwatch_operator.repeating import Repeating

logger = logging.getLogger(__name__)


def shard_of(uid: str, shards: int) -> int:
    """The live shard of the job ``uid`` among ``shards``: the first 8 bytes of its sha256, modulo."""
    return int.from_bytes(hashlib.sha256(uid.encode()).digest()[:8], "big") % shards


def identity_of(o: OperatorSettings) -> str:
    """This replica's name in the Leases: ``operator.identity``, else host name and pid."""
    return o.identity or f"{socket.gethostname()}-{os.getpid()}"


class LiveShards:
    """The N shard Leases of one replica; :meth:`mine` says whether this replica runs a job's rounds now."""

    def __init__(
        self,
        api: LeaseApi,
        *,
        identity: str,
        namespace: str,
        prefix: str,
        shards: int,
        replicas: int,
        lease_seconds: float,
        renew_seconds: float,
        retry_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.shards, self.replicas, self.retry_seconds = shards, max(1, replicas), retry_seconds
        self.lease_seconds = lease_seconds
        self.electors: list[LeaderElector] = []
        for i in range(shards):
            self.electors.append(LeaderElector(
                api, identity=identity, namespace=namespace, name=f"{prefix}-{i}", lease_seconds=lease_seconds,
                renew_seconds=renew_seconds, retry_seconds=retry_seconds, clock=clock, may_take=self._may_take,
                role=f"the live rounds of shard {i}/{shards}",
            ))  # fmt: skip
        self._repeating = Repeating(self.step, retry_seconds, "frwatch-live-shards")

    @property
    def cap(self) -> int:
        """How many shards this replica takes while the others take theirs (more only when nobody does)."""
        return math.ceil(self.shards / self.replicas)

    def held(self) -> list[int]:
        return [i for i, e in enumerate(self.electors) if e.leading()]

    def _may_take(self, free_for: float) -> bool:
        held = len(self.held())
        if held < self.shards // self.replicas:
            return True
        if held < self.cap:
            return free_for >= self.lease_seconds
        return free_for >= 2 * self.lease_seconds

    def mine(self, uid: str) -> bool:
        return self.electors[shard_of(uid, self.shards)].leading()

    def any(self) -> bool:
        return any(e.leading() for e in self.electors)

    def step(self) -> None:
        """One round over every shard Lease (renew ours, take free ones as :meth:`_may_take` allows)."""
        for elector in self.electors:
            elector.step()

    def start(self) -> LiveShards:
        """Step every ``retry_seconds`` in a background thread until :meth:`stop`."""
        self._repeating.start()
        return self

    def stop(self) -> None:
        """Stop and release the shards held (the other replicas take them without waiting for expiry)."""
        self._repeating.stop()
        for elector in self.electors:
            elector.release()


class AllOfLeader:
    """``live_shards`` = 1: the leader runs every job's rounds (the behaviour before sharding)."""

    def __init__(self, leader: Leadership) -> None:
        self.leader = leader

    def mine(self, uid: str) -> bool:
        return self.leader.leading()

    def any(self) -> bool:
        return self.leader.leading()

    def start(self) -> AllOfLeader:
        return self

    def stop(self) -> None:
        pass


def live_shards_of(o: OperatorSettings, api: LeaseApi, leader: Leadership) -> LiveShards | AllOfLeader:
    """This replica's share of the live rounds, by ``operator.live_shards``."""
    if o.live_shards <= 1:
        return AllOfLeader(leader)
    return LiveShards(
        api, identity=identity_of(o), namespace=o.lease_namespace, prefix=o.live_lease_prefix, shards=o.live_shards,
        replicas=o.replicas, lease_seconds=o.lease_seconds, renew_seconds=o.renew_seconds,
        retry_seconds=o.retry_seconds,
    )  # fmt: skip
