"""Live watch sharded by job (``frwatch_operator.live.shards``): the shard of a job is a stable hash of its uid,
every job in exactly one shard; the shard Leases spread over the replicas within one of each other, a replica
stopped cleanly or killed hands its shards to the others, and no job is ever run by two replicas at once; a
finding reported by the old and the new holder of a shard opens one Incident with one Event."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter

import pytest
from fake_leases import Clock, FakeLeases
from live_round_fakes import KIND, FakeKube, deps_of

from frwatch_operator.config import OperatorSettings
from frwatch_operator.errors import RetryableError
from frwatch_operator.handlers import live as live_handler
from frwatch_operator.leader_election import Alone
from frwatch_operator.live.shards import AllOfLeader, LiveShards, live_shards_of, shard_of

LEASE, RENEW, RETRY = 15.0, 10.0, 2.0


def replica(api: FakeLeases, me: str, clock: Clock, shards: int = 10, replicas: int = 3) -> LiveShards:
    return LiveShards(api, identity=me, namespace="frwatch-system", prefix="frwatch-live", shards=shards,
                      replicas=replicas, lease_seconds=LEASE, renew_seconds=RENEW, retry_seconds=RETRY,
                      clock=clock)  # fmt: skip


def run(clock: Clock, replicas: list[LiveShards], seconds: float, uids: list[str],
        dead: tuple[LiveShards, ...] = ()) -> None:  # fmt: skip
    """Step every replica each RETRY for ``seconds``; after each step no job is run by two replicas (the
    ``dead`` ones, not stepped, included)."""
    for _ in range(round(seconds / RETRY)):
        clock.now += RETRY
        for r in replicas:
            r.step()
            assert all(sum(o.mine(u) for o in (*replicas, *dead)) <= 1 for u in uids)


UIDS = [str(uuid.UUID(int=i * 7919 + 13)) for i in range(1000)]


def test_the_shard_of_a_uid_is_sha256_modulo_stable_across_processes() -> None:
    assert shard_of("uid-0", 10) == 2  # sha256, not Python's per-process salted hash()
    assert shard_of("3f2b1c9e-0000-4000-8000-000000000001", 10) == 6
    code = "from frwatch_operator.live.shards import shard_of; print([shard_of(f'u{i}', 7) for i in range(50)])"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "12345"})  # fmt: skip
    assert other.stdout.strip() == str([shard_of(f"u{i}", 7) for i in range(50)])


def test_every_job_is_in_exactly_one_shard_and_1000_jobs_spread_evenly() -> None:
    counts = Counter(shard_of(u, 10) for u in UIDS)
    assert set(counts) == set(range(10)) and sum(counts.values()) == len(UIDS)
    # a hash spreads jobs evenly in expectation only (binomial: ~100 +- 10 each here), not within one
    assert max(counts.values()) - min(counts.values()) < 40, counts


def test_shards_spread_within_one_and_a_stopped_replica_hands_its_shards_over() -> None:
    api, clock = FakeLeases(), Clock()
    a, b, c = (replica(api, me, clock) for me in "abc")
    run(clock, [a, b, c], LEASE + 4 * RETRY, UIDS)
    held = [a.held(), b.held(), c.held()]
    assert sorted(len(h) for h in held) == [3, 3, 4], held  # 10 shards over 3 replicas
    assert sorted(i for h in held for i in h) == list(range(10))
    assert all(sum(r.mine(u) for r in (a, b, c)) == 1 for u in UIDS)  # every job run by exactly one
    c.stop()  # a clean stop releases its shards: a and b take them (beyond their share: after 2 leases)
    assert not c.held()
    run(clock, [a, b], 2 * LEASE + 2 * RETRY, UIDS)
    assert sorted(a.held() + b.held()) == list(range(10))
    assert abs(len(a.held()) - len(b.held())) <= 4  # nobody else is there to take a fair share
    assert all(a.mine(u) + b.mine(u) == 1 for u in UIDS)


def test_a_killed_replica_s_shards_are_taken_after_its_lease_and_never_run_twice() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = replica(api, "a", clock, replicas=2), replica(api, "b", clock, replicas=2)
    run(clock, [a, b], 4 * RETRY, UIDS)
    assert (len(a.held()), len(b.held())) == (5, 5)
    lost = b.held()
    # b is killed: it renews no more (not stepped). run() checks that a never runs a job b still thinks
    # it runs (b's leading() expires at RENEW, before its Leases can be taken at LEASE).
    run(clock, [a], 3 * LEASE + RETRY, UIDS, dead=(b,))
    assert not b.held() and a.held() == list(range(10)), lost


def test_a_lone_replica_takes_every_shard_but_first_leaves_others_time_to_start() -> None:
    api, clock = FakeLeases(), Clock()
    a = replica(api, "a", clock, replicas=2)
    run(clock, [a], RETRY, UIDS)
    assert len(a.held()) == 5  # its share at once
    run(clock, [a], 2 * LEASE, UIDS)
    assert a.held() == list(range(10))  # nobody came


@pytest.mark.parametrize("shards", [1, 4])
def test_one_shard_is_the_leader_running_every_job(shards: int) -> None:
    o = OperatorSettings(live_shards=shards)
    got = live_shards_of(o, FakeLeases(), Alone())
    assert isinstance(got, AllOfLeader) == (shards == 1)
    if isinstance(got, AllOfLeader):
        assert got.any() and all(got.mine(u) for u in UIDS[:10])


@pytest.mark.usefixtures("desync")
@pytest.mark.parametrize("old_holder_finished", [True, False])
def test_a_finding_reported_on_both_sides_of_a_handover_opens_one_incident(old_holder_finished: bool) -> None:
    """The old holder of a job's shard and the new one (a fresh judge) both see the desync: the Incident's
    name is deterministic, the second create answers 409. If the old holder had finished (status and Event),
    the new one leaves it; if it stopped between the create and its status write, the new one finishes."""
    kube = FakeKube(fail_status_writes=0 if old_holder_finished else 1)
    old, new = live_handler.LiveJobs(), live_handler.LiveJobs()  # each replica's own state
    if old_holder_finished:
        live_handler.live_round(deps_of(kube), old, "ns", "j", KIND, 0.0)  # type: ignore[arg-type]
    else:
        with pytest.raises(RetryableError):
            live_handler.live_round(deps_of(kube), old, "ns", "j", KIND, 0.0)  # type: ignore[arg-type]
    live_handler.live_round(deps_of(kube), new, "ns", "j", KIND, 15.0)  # type: ignore[arg-type]
    live_handler.live_round(deps_of(kube), new, "ns", "j", KIND, 30.0)  # type: ignore[arg-type]
    assert len(kube.created) == 1
    assert [s["phase"] for s in kube.statuses] == ["Early"] and len(kube.events) == 1
