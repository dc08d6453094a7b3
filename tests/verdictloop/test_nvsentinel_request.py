"""The hand-off to NVSentinel: the MaintenanceRequest frwatch creates fits NVSentinel's documented schema
(``schemas/nvsentinel-maintenancerequest.yaml`` says where each rule comes from), and a corroborated node
gets one instead of a cordon when ``remediation.action`` is ``nvsentinel``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from frwatch_operator.config import RemediationSettings
from frwatch_operator.verdictloop.nvsentinel import maintenance_request, request_name

SCHEMA = yaml.safe_load((Path(__file__).parent / "schemas" / "nvsentinel-maintenancerequest.yaml").read_text())


def test_the_request_frwatch_creates_fits_nvsentinels_schema() -> None:
    body = maintenance_request(node="gpu-8", incident="team-a/llama-0", reason="gpu_hang: rank 1 never started",
                               evidence="s3://frwatch/frwatch/team-a/llama/uid/0/report.txt")  # fmt: skip
    jsonschema.validate(body, SCHEMA)
    event = body["spec"]["healthEvent"]
    assert event["nodeName"] == "gpu-8" and event["isHealthy"] is False and event["version"] == 1
    assert "team-a/llama-0" in event["message"]
    # one request per incident and node: a retry after a restart finds the first one (409)
    assert body["metadata"]["name"] == request_name("team-a/llama-0", "gpu-8")
    assert request_name("team-a/llama-0", "gpu-8") != request_name("team-b/llama-0", "gpu-8")


@pytest.mark.parametrize(
    "change",
    [
        {"isHealthy": True},  # NVSentinel's webhook refuses an opening event that says healthy
        {"nodeName": ""},
        {"version": 2},
        {"recommendedActionX": "NONE"},  # a field NVSentinel does not document
    ],
)
def test_the_schema_refuses_what_nvsentinel_refuses(change: dict[str, Any]) -> None:
    body = maintenance_request(node="gpu-8", incident="a/b", reason="r", evidence="e")
    body["spec"]["healthEvent"].update(change)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body, SCHEMA)


def test_the_action_is_a_setting_with_cordon_by_default() -> None:
    assert RemediationSettings().action == "cordon"
    assert RemediationSettings(action="nvsentinel").action == "nvsentinel"
    with pytest.raises(ValueError):
        RemediationSettings(action="drain")  # type: ignore[arg-type]
