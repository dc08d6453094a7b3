"""The agents' control tokens, derived from a key the operator keeps: no Secret in any training namespace.

The operator keeps a small ring of random keys in one Secret of its own namespace
(``agent.key_namespace``/``agent.key_secret``, created and rotated by ``agentkeys_kube``). The webhook
gives each pod it injects an agent id of its own, ``frwatch.io/agent-id: "<key id>.<24 random hex>"``
(any such annotation the pod arrived with is stripped first: ``injection.strip_lookalikes``), and gives
that pod's agent, and only it, the pod's token, made with the ring's signing key::

    token = "<key id>.<hex HMAC-SHA256(key, JSON ["frwatch-agent-token/v2", namespace, job, agent id])>"

The operator reads the agent id back from the pod and computes the same token with the key it names
(:meth:`AgentKeys.token_of`). Nothing else is needed per namespace: no Secret to create, no RBAC on
Secrets outside the operator's namespace. The pod's own name is not known at admission
(``generateName``), the random agent id is. What a tenant who reads its pod specs learns (the agent ids
and the tokens of its own pods' agents) opens no other pod's agent: another pod's token needs the key.
A container the webhook did not inject holds no token, and the token never crosses the network
(:mod:`frwatch_operator.agent.auth`: the operator and the agent each prove they hold it).

Rotation (:func:`plan`): a new key every ``key_rotation_days``; the ring keeps the new key and the
previous one, so a pod's token is accepted for at least one rotation period after the pod was made. A
new key signs tokens only once it is ``settle`` old (twice ``key_check_seconds``), so every replica of
the operator has read it before any pod carries a token made with it. Pure: no Kubernetes; the clock
is read by :class:`AgentKeys` only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from frwatch_operator.config import AgentSettings

#: The Secret's one data key: a JSON list of {"id", "key" (base64), "created" (RFC 3339)}, newest first.
KEYS_FIELD = "keys.json"
KEY_BYTES = 32
#: Keys kept in the ring: the signing key and the one before it.
KEPT = 2
_DOMAIN = "frwatch-agent-token/v2"


@dataclass(frozen=True)
class AgentKey:
    """One key of the ring."""

    id: str
    secret: bytes
    created: datetime


@dataclass(frozen=True)
class KeyRing:
    """The keys the operator keeps, newest first."""

    keys: tuple[AgentKey, ...]

    def signing_key(self, now: datetime, settle: timedelta) -> AgentKey:
        """The key new pods get: the newest that is at least ``settle`` old (the oldest while none is)."""
        for key in self.keys:
            if now - key.created >= settle:
                return key
        return self.keys[-1]

    def issue(self, namespace: str, job: str, now: datetime, settle: timedelta) -> tuple[str, str]:
        """A new pod's agent id and its agent's token (the webhook, at admission)."""
        key = self.signing_key(now, settle)
        agent_id = f"{key.id}.{secrets.token_hex(12)}"
        return agent_id, derive(key, namespace, job, agent_id)

    def token_of(self, namespace: str, job: str, agent_id: str) -> str | None:
        """The token of the agent of the pod with ``agent_id`` (the operator's calls); None when the id
        names no key the ring keeps (rotated out, or not an id the webhook gave)."""
        key_id = agent_id.split(".", 1)[0]
        key = next((k for k in self.keys if k.id == key_id), None)
        return derive(key, namespace, job, agent_id) if key is not None and "." in agent_id else None


def derive(key: AgentKey, namespace: str, job: str, agent_id: str) -> str:
    """The token of ``key`` for the agent with ``agent_id`` of ``job`` in ``namespace``."""
    message = json.dumps([_DOMAIN, namespace, job, agent_id]).encode()  # unambiguous, whatever the names hold
    return f"{key.id}.{hmac.new(key.secret, message, hashlib.sha256).hexdigest()}"


def new_key(now: datetime) -> AgentKey:
    return AgentKey(secrets.token_hex(4), secrets.token_bytes(KEY_BYTES), now)


def ring_of(data: Mapping[str, str] | None) -> KeyRing | None:
    """The ring held in a Secret's ``data`` (base64 values, as the API returns them); None when there is
    none or it cannot be used (then a new one replaces it)."""
    if not data or KEYS_FIELD not in data:
        return None
    try:
        entries = json.loads(base64.b64decode(data[KEYS_FIELD], validate=True))
        keys = tuple(
            AgentKey(str(e["id"]), base64.b64decode(e["key"], validate=True), datetime.fromisoformat(e["created"]))
            for e in entries
        )
    except (ValueError, TypeError, KeyError, binascii.Error):
        return None
    if not keys or any(len(k.secret) < KEY_BYTES or k.created.tzinfo is None for k in keys):
        return None
    return KeyRing(tuple(sorted(keys, key=lambda k: k.created, reverse=True)))


def secret_data(ring: KeyRing) -> dict[str, str]:
    """``ring`` as a Secret's ``data`` (base64 values)."""
    entries = [
        {"id": k.id, "key": base64.b64encode(k.secret).decode(), "created": k.created.isoformat()}
        for k in ring.keys
    ]
    return {KEYS_FIELD: base64.b64encode(json.dumps(entries).encode()).decode()}


@dataclass(frozen=True)
class Plan:
    """What one pass does with the stored ring: keep it, or write ``ring`` (and why, for the log)."""

    ring: KeyRing
    write: bool
    reason: str


def plan(stored: KeyRing | None, now: datetime, rotation: timedelta | None, *, unusable: bool = False) -> Plan:
    """Keep the stored ring, or make the next one: a first key, a replacement for an unusable Secret, or a
    rotation once the newest key is ``rotation`` old (None: never), keeping the previous key."""
    if stored is None:
        why = "the Secret holds no usable key ring: a new one replaces it" if unusable else "first key"
        return Plan(KeyRing((new_key(now),)), True, why)
    newest = stored.keys[0]
    if rotation is not None and now - newest.created >= rotation:
        return Plan(KeyRing((new_key(now), *stored.keys[: KEPT - 1])), True, f"key {newest.id} is due for rotation")
    return Plan(stored, False, "kept")


class AgentKeys:
    """The ring the webhook and the operator share, replaced whole by the keeper (``agentkeys_kube``) and
    read without a lock. Empty until the keeper's first pass: then no token is injected or sent."""

    def __init__(
        self, settle: timedelta, ring: KeyRing | None = None, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.settle = settle
        self.ring = ring
        self.clock = clock or (lambda: datetime.now(UTC))

    @classmethod
    def of(cls, agent: AgentSettings, ring: KeyRing | None = None) -> AgentKeys:
        return cls(timedelta(seconds=2 * agent.key_check_seconds), ring)

    def issue(self, namespace: str, job: str) -> tuple[str, str] | None:
        """A new pod's agent id and token, for a pod of ``job`` in ``namespace`` (None: no key yet)."""
        ring = self.ring
        return ring.issue(namespace, job, self.clock(), self.settle) if ring is not None else None

    def token_of(self, namespace: str, job: str, agent_id: str) -> str | None:
        """The token of the agent with ``agent_id`` (None: no key yet, or none the id names)."""
        ring = self.ring
        return ring.token_of(namespace, job, agent_id) if ring is not None and agent_id else None
