"""The agents' key ring kept by the operator in its own namespace, against the API emulator: made at the
first start, kept, rotated, replaced when unusable, and never lost when two replicas write at once."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client
from kubernetes import config as kube_config

from frwatch_operator.capture.agent_keys import KEYS_FIELD, AgentKeys, ring_of
from frwatch_operator.capture.webhook_tls import StoredSecret
from frwatch_operator.config import AgentSettings
from frwatch_operator.store.agent_key_ring import KeyKeeper, key_secret, start_agent_keys
from frwatch_operator.store.own_secrets import OwnSecret

T0 = datetime(2026, 11, 1, tzinfo=UTC)
DAY = timedelta(days=1)


@pytest.fixture
def api(k8s_api: Any) -> Iterator[client.ApiClient]:
    api = kube_config.new_client_from_config()
    yield api
    api.close()


def settings(namespace: str, **more: Any) -> AgentSettings:
    return AgentSettings(key_namespace=namespace, key_secret="frwatch-agent-key", **more)


def keeper(api: client.ApiClient, agent: AgentSettings, at: datetime, keys: AgentKeys | None = None) -> KeyKeeper:
    return KeyKeeper(key_secret(api, agent), keys or AgentKeys.of(agent), agent, clock=lambda: at)


def stored_ids(api: client.ApiClient, agent: AgentSettings) -> list[str]:
    secret = client.CoreV1Api(api).read_namespaced_secret(agent.key_secret, agent.key_namespace)
    ring = ring_of(secret.data)
    assert ring is not None
    return [k.id for k in ring.keys]


def test_the_first_start_makes_the_ring_and_later_passes_keep_it(api: client.ApiClient, k8s_namespace: str) -> None:
    agent = settings(k8s_namespace)
    keys, started = start_agent_keys(agent, api)
    started.stop()
    assert keys.ring is not None and len(keys.ring.keys) == 1
    assert keys.issue("team", "llama") is not None
    secret = client.CoreV1Api(api).read_namespaced_secret(agent.key_secret, k8s_namespace)
    assert secret.type == "Opaque" and set(secret.data) == {KEYS_FIELD}
    assert secret.metadata.labels["app.kubernetes.io/managed-by"] == "frwatch"
    again = keeper(api, agent, datetime.now(UTC) + DAY).run_once()
    assert not again.write and stored_ids(api, agent) == [k.id for k in keys.ring.keys]


def test_rotation_keeps_the_previous_key_so_older_pods_are_still_accepted(
    api: client.ApiClient, k8s_namespace: str
) -> None:
    agent = settings(k8s_namespace, key_rotation_days=30)
    first = keeper(api, agent, T0).run_once().ring
    old = AgentKeys.of(agent, first).issue("team", "llama")
    assert old is not None
    keys = AgentKeys.of(agent)
    rotated = keeper(api, agent, T0 + 30 * DAY, keys).run_once()
    assert rotated.write and "rotation" in rotated.reason
    assert stored_ids(api, agent) == [rotated.ring.keys[0].id, first.keys[0].id]
    assert keys.token_of("team", "llama", old[0]) == old[1]  # a pod made before the rotation still works
    keeper(api, agent, T0 + 60 * DAY).run_once()
    later = ring_of(client.CoreV1Api(api).read_namespaced_secret(agent.key_secret, k8s_namespace).data)
    assert later is not None and first.keys[0] not in later.keys  # two rotations later: out


def test_an_unusable_secret_is_replaced(api: client.ApiClient, k8s_namespace: str) -> None:
    agent = settings(k8s_namespace)
    client.CoreV1Api(api).create_namespaced_secret(
        k8s_namespace,
        {"metadata": {"name": agent.key_secret}, "data": {KEYS_FIELD: base64.b64encode(b"[]").decode()}},
    )
    step = keeper(api, agent, T0).run_once()
    assert step.write and "no usable key ring" in step.reason
    assert stored_ids(api, agent) == [step.ring.keys[0].id]


class StaleFirstRead(OwnSecret):
    """A replica that read the Secret just before another replica replaced it."""

    def __init__(self, inner: OwnSecret, stale: StoredSecret) -> None:
        self.__dict__.update(inner.__dict__)
        self.stale: StoredSecret | None = stale

    def read(self) -> StoredSecret | None:
        if self.stale is not None:
            found, self.stale = self.stale, None
            return found
        return super().read()


def test_two_replicas_rotating_at_once_end_with_one_ring(api: client.ApiClient, k8s_namespace: str) -> None:
    agent = settings(k8s_namespace, key_rotation_days=30)
    keeper(api, agent, T0).run_once()
    store = key_secret(api, agent)
    before = store.read()
    assert before is not None
    winner = keeper(api, agent, T0 + 30 * DAY).run_once()  # replica A rotates first
    late_keys = AgentKeys.of(agent)
    late = KeyKeeper(StaleFirstRead(store, before), late_keys, agent, clock=lambda: T0 + 30 * DAY)
    outcome = late.run_once()  # replica B saw the old ring: its write conflicts, it reads again and keeps A's
    assert not outcome.write and outcome.ring == winner.ring == late_keys.ring
    assert stored_ids(api, agent) == [k.id for k in winner.ring.keys]
