"""The agents' control tokens, derived from the operator's key ring: what a token opens, what rotation keeps."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from frwatch_operator.capture.agent_keys import (
    KEYS_FIELD,
    AgentKey,
    AgentKeys,
    KeyRing,
    derive,
    new_key,
    plan,
    ring_of,
    secret_data,
)

T0 = datetime(2026, 11, 1, tzinfo=UTC)
DAY = timedelta(days=1)
SETTLE = timedelta(minutes=10)


def test_a_token_opens_the_agent_of_one_pod_of_one_job_in_one_namespace_only() -> None:
    key = new_key(T0)
    token = derive(key, "team-a", "llama", "k.1")
    assert token == derive(AgentKey(key.id, key.secret, T0 + DAY), "team-a", "llama", "k.1")  # deterministic
    others = {derive(key, "team-b", "llama", "k.1"), derive(key, "team-a", "llama2", "k.1"),
              derive(new_key(T0), "team-a", "llama", "k.1"), derive(key, "team-a", "llama", "k.2")}  # fmt: skip
    assert token not in others and len(others) == 4
    assert derive(key, "a", "b\0c", "i") != derive(key, "a\0b", "c", "i")  # the fields cannot shift into each other
    assert token.startswith(f"{key.id}.")


def test_the_ring_round_trips_through_the_secret_newest_first() -> None:
    ring = KeyRing((new_key(T0 + DAY), new_key(T0)))
    back = ring_of(secret_data(ring))
    assert back == ring
    shuffled = KeyRing(tuple(reversed(ring.keys)))
    assert ring_of(secret_data(shuffled)) == ring


def _data(entries: object) -> dict[str, str]:
    return {KEYS_FIELD: base64.b64encode(json.dumps(entries).encode()).decode()}


GOOD = {"id": "k1", "key": base64.b64encode(b"x" * 32).decode(), "created": T0.isoformat()}


@pytest.mark.parametrize(
    "data",
    [
        None,
        {},
        {"other": "eA=="},
        {KEYS_FIELD: "not base64!"},
        {KEYS_FIELD: base64.b64encode(b"not json").decode()},
        _data([]),
        _data({"id": "k1"}),
        _data([{**GOOD, "key": base64.b64encode(b"short").decode()}]),
        _data([{**GOOD, "created": "2026-11-01T00:00:00"}]),  # no time zone
        _data([{**GOOD, "created": "yesterday"}]),
        _data([{"id": "k1"}]),
    ],
)
def test_a_secret_without_a_usable_ring_is_none(data: dict[str, str] | None) -> None:
    assert ring_of(data) is None


def test_plan_makes_the_first_key_replaces_an_unusable_secret_and_keeps_a_fresh_ring() -> None:
    first = plan(None, T0, 30 * DAY)
    assert first.write and first.reason == "first key" and len(first.ring.keys) == 1
    replaced = plan(None, T0, 30 * DAY, unusable=True)
    assert replaced.write and "no usable key ring" in replaced.reason
    kept = plan(first.ring, T0 + 29 * DAY, 30 * DAY)
    assert not kept.write and kept.ring == first.ring
    assert not plan(first.ring, T0 + 3650 * DAY, None).write  # rotation off


def test_rotation_keeps_the_previous_key_and_drops_the_one_before() -> None:
    ring = plan(None, T0, 30 * DAY).ring
    second = plan(ring, T0 + 30 * DAY, 30 * DAY)
    assert second.write and second.ring.keys[1:] == ring.keys and len(second.ring.keys) == 2
    third = plan(second.ring, T0 + 60 * DAY, 30 * DAY).ring
    assert third.keys[1] == second.ring.keys[0] and ring.keys[0] not in third.keys


def test_a_new_key_signs_only_once_every_replica_can_have_read_it() -> None:
    old = new_key(T0)
    fresh = new_key(T0 + 30 * DAY)
    ring = KeyRing((fresh, old))
    assert ring.signing_key(T0 + 30 * DAY + SETTLE / 2, SETTLE) == old
    assert ring.signing_key(T0 + 30 * DAY + SETTLE, SETTLE) == fresh
    only = KeyRing((fresh,))
    assert only.signing_key(fresh.created, SETTLE) == fresh  # the very first key signs at once


def test_each_pod_gets_its_own_token_and_the_operator_finds_it_with_the_key_its_id_names() -> None:
    old, fresh = new_key(T0), new_key(T0 + 30 * DAY)
    before = AgentKeys(SETTLE, KeyRing((old,)), clock=lambda: T0 + DAY)
    keys = AgentKeys(SETTLE, KeyRing((fresh, old)), clock=lambda: T0 + 31 * DAY)
    issued = keys.issue("ns", "job")
    assert issued is not None
    agent_id, token = issued
    assert agent_id.startswith(fresh.id + ".") and token == derive(fresh, "ns", "job", agent_id)
    other = keys.issue("ns", "job")
    assert other is not None and other[0] != agent_id and other[1] != token  # another pod, another token
    assert keys.token_of("ns", "job", agent_id) == token
    older = before.issue("ns", "job")  # a pod made before the rotation: its id names the old key
    assert older is not None and keys.token_of("ns", "job", older[0]) == older[1]
    assert keys.token_of("ns", "other-job", agent_id) != token  # the token is bound to the namespace and job
    assert keys.token_of("ns", "job", "nokey.abc") is None and keys.token_of("ns", "job", "") is None
    empty = AgentKeys(SETTLE)
    assert empty.issue("ns", "job") is None and empty.token_of("ns", "job", agent_id) is None
