"""kopf handlers of the operator: thin functions that decode an event, call the pure domain code and the
adapters. Each module has a ``register(registry, deps)``; :func:`register_all` wires every one of them.

``jobs``: training jobs of each enabled kind (PyTorchJob, TrainJob, JobSet: ``operator.job_kinds``) into
the job index (opt-in, Events for a malformed opt-in or a bad spec); ``policies``: CapturePolicies into
the same index; ``pods``: failures of opted-in jobs' pods (each kind's pod label) -> one Incident per job
attempt; ``incident_phases``: each Incident's one state machine, driven by phase from its persisted
status (``incidents``: its Collecting phase; ``frwatch_operator.verdictloop``: its Analyzing phase); plus the admission
webhook (``frwatch_operator.webhook``) fed by the same index.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kopf

from frwatch_operator.agentclient import Refusals
from frwatch_operator.agentkeys import AgentKeys
from frwatch_operator.config import Config
from frwatch_operator.errors import FatalError, RetryableError
from frwatch_operator.kube import Kube
from frwatch_operator.leader_election import Alone, Leadership
from frwatch_operator.metrics import Metrics
from frwatch_operator.observations import Observations
from frwatch_operator.s3store import S3Store
from frwatch_operator.webhook import JobIndex

F = TypeVar("F", bound=Callable[..., Any])
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deps:
    """What the handlers share: built once in ``frwatch_operator.main``."""

    config: Config
    index: JobIndex
    seen: Observations
    kube: Kube
    s3: S3Store
    #: The operator's Prometheus metrics: handlers make one call each where something happens.
    metrics: Metrics = field(default_factory=Metrics)
    #: The agents' key ring (``agentkeys_kube`` keeps it): tokens injected by the webhook, sent to agents.
    agent_keys: AgentKeys | None = None
    #: Whether this replica drives the Incidents (the timers ask; every replica watches and serves the webhook).
    leader: Leadership = field(default_factory=Alone)
    #: The pods whose agent answered without proof of its token: never called again (``handlers.agent_calls``).
    refusals: Refusals = field(default_factory=Refusals)


def translate_errors(fn: F) -> F:
    """frwatch's errors -> kopf's: RetryableError -> TemporaryError(delay), FatalError -> PermanentError."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RetryableError as exc:
            raise kopf.TemporaryError(str(exc), delay=exc.delay) from exc
        except FatalError as exc:
            raise kopf.PermanentError(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


#: How often one watch event is handled before giving up (kopf does not retry event handlers).
EVENT_TRIES = 3


def retrying(handle: Callable[[], object], what: str) -> None:
    """Run an event handler's work, again after a RetryableError (up to EVENT_TRIES times): kopf never
    retries event handlers, and a failure must not be lost to one API hiccup."""
    for attempt in range(EVENT_TRIES):
        try:
            handle()
            return
        except RetryableError as exc:
            if attempt == EVENT_TRIES - 1:
                raise
            logger.warning("%s: %s (try %d of %d)", what, exc, attempt + 1, EVENT_TRIES)
            time.sleep(min(exc.delay, 2.0))


def register_all(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    from frwatch_operator.handlers import (
        admission,
        incident_phases,
        jobs,
        live,
        notifications,
        pods,
        policies,
    )
    from frwatch_operator.verdictloop import handler as verdict_loop

    admission.register(registry, deps)
    jobs.register(registry, deps)
    policies.register(registry, deps)
    pods.register(registry, deps)
    incident_phases.register(registry, deps)
    verdict_loop.register(registry, deps)
    live.register(registry, deps)
    notifications.register(registry, deps)
