"""kopf handlers of the operator: thin functions that decode an event, call the pure domain code and the
adapters. Each module has a ``register(registry, deps)``; :func:`register_all` wires every one of them.

``jobs``: training jobs of each enabled kind (PyTorchJob, TrainJob, JobSet: ``operator.job_kinds``) into
the job index (opt-in, Events for a malformed opt-in or a bad spec); ``policies``: CapturePolicies into
the same index; ``pods``: failures of opted-in jobs' pods (each kind's pod label) -> one Incident per job
attempt; ``incident_phases``: each Incident's one state machine, driven by phase from its persisted
status (``incidents``: its Collecting phase; ``frwatch_operator.analysis``: its Analyzing phase); plus the admission
webhook (``frwatch_operator.webhook``) fed by the same index.
"""

from __future__ import annotations

import kopf

from frwatch_operator.handlers import (
    admission,
    incident_phases,
    jobs,
    live,
    notifications,
    pods,
    policies,
    verdict_loop,
)
from frwatch_operator.handlers.deps import Deps, retrying, translate_errors

__all__ = ["Deps", "register_all", "retrying", "translate_errors"]


def register_all(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    admission.register(registry, deps)
    jobs.register(registry, deps)
    policies.register(registry, deps)
    pods.register(registry, deps)
    incident_phases.register(registry, deps)
    verdict_loop.register(registry, deps)
    live.register(registry, deps)
    notifications.register(registry, deps)
