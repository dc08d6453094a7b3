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
from frwatch_operator.remediation.nvsentinel import maintenance_request, request_name

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


class FakeKube:
    """The verdict loop's Kubernetes port, in memory: what the hand-off reads and writes."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = {n: {"metadata": {"name": n, "uid": f"uid-{n}", "resourceVersion": "1"}, "spec": {}} for n in nodes}
        self.configmaps: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self.patched: list[str] = []
        self.events: list[dict[str, Any]] = []

    def read_configmap(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.configmaps.get((namespace, name))

    def write_configmap(self, namespace: str, name: str, data: Any, *, resource_version: str | None) -> dict[str, Any]:
        self.configmaps[(namespace, name)] = {"metadata": {"resourceVersion": "2"}, "data": dict(data)}
        return self.configmaps[(namespace, name)]

    def get_node(self, name: str) -> dict[str, Any] | None:
        return self.nodes.get(name)

    def count_nodes(self) -> int:
        return len(self.nodes)

    def list_node_events(self, node: str, limit: int) -> list[dict[str, Any]]:
        return []

    def patch_node(self, name: str, patch: Any) -> dict[str, Any]:
        self.patched.append(name)
        return self.nodes[name]

    def create_maintenance_request(self, body: Any) -> dict[str, Any]:
        self.requests.append(dict(body))
        return dict(body)

    def create_event(self, event: Any) -> None:
        self.events.append(dict(event))


def test_a_corroborated_node_is_handed_to_nvsentinel_and_never_cordoned_by_frwatch() -> None:
    from datetime import UTC, datetime

    from vl_builders import hardware_verdict

    from frwatch_operator.incident.record import IncidentIdentity
    from frwatch_operator.remediation.apply import remediate
    from frwatch_operator.remediation.cordon_policy import SkipReason, effective_rules

    nodes = [f"gpu-{i}" for i in range(8)]
    kube = FakeKube(nodes)
    settings = RemediationSettings(enabled=True, dry_run=False, action="nvsentinel", breaker_namespace="frwatch-system")
    result = remediate(
        verdict=hardware_verdict("gpu-3", "gpu-5"), incident=IncidentIdentity("team-a", "llama-0", "uid-1"), job_nodes=nodes,
        rules=effective_rules(settings), settings=settings, kube=kube, evidence="s3://frwatch/x/report.txt",  # type: ignore[arg-type]
        now=datetime.now(UTC), job_object=None,
        uncorroborated={"gpu-5": (SkipReason.NOT_CORROBORATED, "nominated only")},
    )  # fmt: skip
    assert [r["spec"]["healthEvent"]["nodeName"] for r in kube.requests] == ["gpu-3"]  # the uncorroborated one: none
    jsonschema.validate(kube.requests[0], SCHEMA)
    assert kube.patched == [] and result.cordoned == ["gpu-3"]  # NVSentinel cordons; frwatch counts it (breaker)
    said = [e["message"] for e in kube.events if e["reason"] == "FrwatchCordoned"]
    assert len(said) == 1 and "Handed to NVSentinel" in said[0] and request_name("team-a/llama-0", "gpu-3") in said[0]
