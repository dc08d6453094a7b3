"""The kopf wiring: one timer that takes over exactly the Incidents the core handed over."""

from __future__ import annotations

from typing import Any

import kopf
import pytest
from kubernetes import client

from frwatch_operator.config import Config
from frwatch_operator.handlers import Deps
from frwatch_operator.kube import Kube
from frwatch_operator.observations import Observations
from frwatch_operator.verdictloop import wiring
from frwatch_operator.verdictloop.handler import handed_over, register
from frwatch_operator.verdictloop.kube_actions import KubernetesActions
from frwatch_operator.webhook import JobIndex

HANDED = {"type": "AnalysisRequested", "status": "True"}


@pytest.mark.parametrize(
    ("status", "ours"),
    [
        ({"phase": "Analyzing", "conditions": [HANDED]}, True),
        ({"phase": "Analyzing", "conditions": [{**HANDED, "status": "False"}]}, False),  # not wired
        ({"phase": "Analyzing", "conditions": []}, False),  # collection's last write, hand-off pending
        ({"phase": "Collecting", "conditions": [HANDED]}, False),
        ({"phase": "Reported", "conditions": [HANDED]}, False),
        ({}, False),
    ],
)
def test_the_timer_takes_only_handed_over_incidents(status: dict[str, Any], ours: bool) -> None:
    assert handed_over(status=status) is ours


def test_register_adds_one_timer_and_wires_the_adapter() -> None:
    registry = kopf.OperatorRegistry()
    api = client.ApiClient()
    try:
        register(registry, Deps(Config(), JobIndex(), Observations(), Kube(api), None))  # type: ignore[arg-type]
        timers = [h for h in registry._spawning.get_all_handlers() if type(h).__name__ == "TimerHandler"]
        assert [h.id for h in timers] == ["frwatch-verdict-loop"]
        wired = wiring.actions()
        assert isinstance(wired, KubernetesActions) and wired.core.api_client is api
    finally:
        wiring.wire(None)
