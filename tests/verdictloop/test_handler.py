"""The kopf wiring: one timer drives each Incident through every phase, collection and analysis alike."""

from __future__ import annotations

from typing import Any

import kopf
import pytest
from kubernetes import client

from frwatch_operator.config import Config
from frwatch_operator.detect.observations import Observations
from frwatch_operator.handlers import Deps, register_all
from frwatch_operator.handlers.incident_phases import active, handed_over
from frwatch_operator.kube.adapter import Kube
from frwatch_operator.resources import IncidentStatus
from frwatch_operator.webhook import JobIndex

HANDED = {"type": "AnalysisRequested", "status": "True"}


@pytest.mark.parametrize(
    ("status", "driven"),
    [
        ({"phase": "Detected"}, True),
        ({"phase": "Collecting"}, True),
        ({"phase": "Analyzing", "conditions": []}, True),  # collection's last write, hand-off pending
        ({"phase": "Analyzing", "conditions": [HANDED]}, True),
        ({"phase": "Reported", "conditions": [HANDED]}, False),
        ({"phase": "Failed", "conditions": [HANDED]}, False),
    ],
)
def test_the_timer_drives_an_incident_until_reported_or_failed(status: dict[str, Any], driven: bool) -> None:
    assert active(status=status, meta={}) is driven


@pytest.mark.parametrize(
    ("conditions", "handed"),
    [([HANDED], True), ([{**HANDED, "status": "False"}], False), ([], False)],
)
def test_an_analyzing_pass_follows_the_hand_off(conditions: list[dict[str, str]], handed: bool) -> None:
    status = IncidentStatus.model_validate({"phase": "Analyzing", "conditions": conditions})
    assert handed_over(status) is handed


def test_one_timer_drives_incidents() -> None:
    registry = kopf.OperatorRegistry()
    register_all(registry, Deps(Config(), JobIndex(), Observations(), Kube(client.ApiClient()), None))  # type: ignore[arg-type]
    timers = [h for h in registry._spawning.get_all_handlers() if type(h).__name__ == "TimerHandler"]
    assert [h.id for h in timers] == ["frwatch-incident"]
