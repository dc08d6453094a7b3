"""The agents' key ring in the operator's own namespace: created, rotated and read again by the operator.

:func:`start_agent_keys` runs one pass before the operator serves its webhook (pods admitted from then on
get a token), then a :class:`KeyKeeper` thread repeats it every ``agent.key_check_seconds``. A pass reads
the Secret ``agent.key_secret`` in ``agent.key_namespace``, keeps its ring or writes the next one
(:func:`frwatch_operator.capture.agent_keys.plan`: the first key, a replacement for an unusable Secret, a rotation),
conditionally on what it read, so two replicas never lose each other's key (the one that loses reads
again and keeps the winner's ring), and hands the ring to the shared :class:`AgentKeys`.

RBAC (the chart's Role in the release namespace): get/update of that Secret, create of Secrets there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from kubernetes import client

from frwatch_operator import constants as c
from frwatch_operator.capture.agent_keys import AgentKeys, Plan, plan, ring_of, secret_data
from frwatch_operator.config import AgentSettings
from frwatch_operator.errors import RetryableError
from frwatch_operator.store.own_secrets import Keeper, OwnSecret

logger = logging.getLogger(__name__)

#: What the key ring needs when a call is refused.
_RBAC = "the agents' key ring needs get/create/update on that Secret"
SECRET_TYPE = "Opaque"  # noqa: S105 - a Secret type, not a password


def key_secret(api_client: client.ApiClient, agent: AgentSettings) -> OwnSecret:
    labels = {c.LABEL_MANAGED_BY: c.EVENT_COMPONENT, c.LABEL_COMPONENT: "agent-keys"}
    return OwnSecret(
        api_client, agent.key_namespace, agent.key_secret, secret_type=SECRET_TYPE, labels=labels, rbac=_RBAC
    )


class KeyKeeper(Keeper[Plan]):
    """One pass over the key ring, now and every ``key_check_seconds`` in a thread."""

    def __init__(
        self, store: OwnSecret, keys: AgentKeys, agent: AgentSettings,
        clock: Callable[[], datetime] | None = None, attempts: int = 3,
    ) -> None:  # fmt: skip
        super().__init__("agent key ring", agent.key_check_seconds)
        self.store, self.keys, self.attempts = store, keys, attempts
        self.rotation = timedelta(days=agent.key_rotation_days) if agent.key_rotation_days else None
        self.clock = clock or (lambda: datetime.now(UTC))

    def run_once(self) -> Plan:
        for _ in range(self.attempts):
            stored = self.store.read()
            ring = ring_of(stored.data if stored is not None else None)
            step = plan(ring, self.clock(), self.rotation, unusable=stored is not None and ring is None)
            if not step.write or self.store.write(secret_data(step.ring), stored):
                break
        else:
            raise RetryableError(f"{self.store.ref} changed {self.attempts} times while its key ring was written")
        if step.write:
            logger.info("agent key ring: %s written (%s); keys %s", self.store.ref, step.reason,
                        ", ".join(k.id for k in step.ring.keys))  # fmt: skip
        self.keys.ring = step.ring
        return step


def start_agent_keys(agent: AgentSettings, api_client: client.ApiClient) -> tuple[AgentKeys, KeyKeeper]:
    """At start-up, before the webhook serves: the key ring read or made, and its keeper started."""
    keys = AgentKeys.of(agent)
    keeper = KeyKeeper(key_secret(api_client, agent), keys, agent)
    keeper.run_at_start()
    keeper.start()
    return keys, keeper
