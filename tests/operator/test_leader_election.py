"""One replica drives the Incidents at a time: the Lease's rules (client-go's), replicas racing for it, a
leader that stops renewing, a clean stop that hands over at once; and the same against the API emulator."""

from __future__ import annotations

import pytest
from fake_leases import Clock, FakeLeases
from kubernetes import client

from frwatch_operator.kube.adapter import Kube
from frwatch_operator.leader_election import LeaderElector, Record, Step, decide

LEASE, RENEW, RETRY = 15.0, 10.0, 2.0


def elector(api: FakeLeases, me: str, clock: Clock) -> LeaderElector:
    return LeaderElector(api, identity=me, namespace="frwatch-system", name="frwatch-leader",
                         lease_seconds=LEASE, renew_seconds=RENEW, retry_seconds=RETRY, clock=clock)  # fmt: skip


def test_the_rules() -> None:
    mine = Record("a", "t", 0, "7")
    theirs = Record("b", "t", 0, "7")
    assert decide(None, "a", 0, LEASE) is Step.CREATE
    assert decide(mine, "a", 100, LEASE) is Step.RENEW
    assert decide(theirs, "a", LEASE - 0.1, LEASE) is Step.WAIT
    assert decide(theirs, "a", LEASE, LEASE) is Step.TAKE  # unchanged for a whole lease, as a observed it
    assert decide(Record("", "t", 3, "9"), "a", 0, LEASE) is Step.TAKE  # released


def test_one_of_two_replicas_leads_and_the_other_takes_over_when_it_stops_renewing() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.step() is Step.CREATE and a.leading()
    assert b.step() is Step.WAIT and not b.leading()
    for _ in range(10):  # a renews every retry; b keeps waiting
        clock.now += RETRY
        a.step(), b.step()
        assert a.leading() and not b.leading()
    api.down = True  # a cannot renew any more (say its API connection broke)
    clock.now += RENEW - RETRY
    a.step()
    assert a.leading()  # its last renewal is younger than renew_seconds
    clock.now += RETRY + 0.01
    assert not a.leading()  # ...and now it is not: a stops driving before anyone may start
    api.down = False
    b.step()
    assert not b.leading()  # the lease changed RENEW-RETRY ago: not unchanged for a whole lease yet
    clock.now += LEASE
    assert b.step() is Step.TAKE and b.leading()
    assert api.lease is not None and api.lease["spec"]["holderIdentity"] == "b"
    assert api.lease["spec"]["leaseTransitions"] == 1
    assert a.step() is Step.WAIT and not a.leading()  # a is back: it follows


def test_a_race_for_the_lease_has_one_winner() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    lease_before = api.read_lease("", "")
    assert lease_before is None
    a.step()
    # b read "no Lease" at the same time as a: its create is refused (409)
    assert b._write(Step.CREATE, None, None) is False
    b.step()
    assert [a.leading(), b.leading()] == [True, False]


def test_a_clean_stop_releases_the_lease_and_the_next_replica_leads_at_once() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    a.step(), b.step()
    a.stop()
    assert not a.leading() and api.lease is not None and api.lease["spec"]["holderIdentity"] == ""
    clock.now += RETRY
    assert b.step() is Step.TAKE and b.leading()


def test_the_timings_must_nest() -> None:
    with pytest.raises(ValueError, match="retry_seconds < renew_seconds < lease_seconds"):
        LeaderElector(FakeLeases(), identity="a", namespace="n", name="l", lease_seconds=10, renew_seconds=10,
                      retry_seconds=2)  # fmt: skip


def test_two_electors_against_the_api_emulator(op_api: client.ApiClient, k8s_namespace: str) -> None:
    """The Kube adapter's Lease calls on the emulator: create, conditional replace (409 on a stale
    resourceVersion), take-over and release."""
    kube, clock = Kube(op_api), Clock()

    def real(me: str) -> LeaderElector:
        return LeaderElector(kube, identity=me, namespace=k8s_namespace, name="frwatch-leader",
                             lease_seconds=LEASE, renew_seconds=RENEW, retry_seconds=RETRY, clock=clock)  # fmt: skip

    a, b = real("a"), real("b")
    assert a.step() is Step.CREATE and b.step() is Step.WAIT
    stale = kube.read_lease(k8s_namespace, "frwatch-leader")
    assert stale is not None
    clock.now += RETRY
    assert a.step() is Step.RENEW and a.leading()
    assert kube.replace_lease(k8s_namespace, "frwatch-leader", stale) is False  # stale: refused
    a.stop()
    assert b.step() is Step.TAKE and b.leading()
    lease = kube.read_lease(k8s_namespace, "frwatch-leader")
    assert lease is not None and lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
