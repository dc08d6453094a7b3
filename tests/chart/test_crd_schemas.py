"""The CRDs: generated from the pydantic models, the same in crds/ and the chart, and they agree with the
models on what is valid (sample objects accepted and refused by both)."""

from __future__ import annotations

import copy
import enum
import types
import typing
from typing import Any

import pydantic
import pytest
from chart_helpers import CHART, CRDS, crd, crd_errors, crd_schema, gen_crds

from frwatch_operator import constants as c
from frwatch_operator.resources import CapturePolicySpec, IncidentSpec, IncidentStatus


def test_crd_files_are_what_the_models_generate() -> None:
    generated = gen_crds().generated()
    for name, text in generated.items():
        assert (CRDS / name).read_text() == text, (
            f"crds/{name} is stale: run .venv/bin/python scripts/gen_crds.py"
        )


def test_chart_crds_are_byte_identical_to_top_level_crds() -> None:
    top = sorted(p.name for p in CRDS.glob("*.yaml"))
    chart = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert top == chart == ["capturepolicy.yaml", "incident.yaml"]
    for name in top:
        assert (CRDS / name).read_bytes() == (CHART / "crds" / name).read_bytes(), name


def test_helm_sees_the_chart_crds() -> None:
    import helm_python as helm

    with helm.Chart.load(CHART) as chart:
        files = {c_["filename"]: c_["data"] for c_ in chart.crds}
    assert {name.rsplit("/", 1)[-1] for name in files} == {"capturepolicy.yaml", "incident.yaml"}


def _walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, schema)]
    for key, child in (schema.get("properties") or {}).items():
        out += _walk(child, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        out += _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        out += _walk(schema["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("name", ["incident", "capturepolicy"])
def test_schema_is_structural_and_documented(name: str) -> None:
    for path, node in _walk(crd_schema(name)):
        assert node.get("type"), f"{name}{path}: no type (structural schemas need one everywhere)"
        for forbidden in ("anyOf", "oneOf", "allOf", "$ref", "title", "nullable"):
            assert forbidden not in node, f"{name}{path}: {forbidden}"
        if node.get("additionalProperties") is False:
            pytest.fail(f"{name}{path}: additionalProperties false is not allowed in a CRD")
        is_field = path and not path.endswith(("[]", "{}"))
        if is_field:
            assert node.get("description"), f"{name}{path}: every field needs a description (kubectl explain)"


def _fields(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """alias -> (annotation, field info) of a model."""
    return {info.alias or key: info for key, info in model.model_fields.items()}


def _compare(model: type[pydantic.BaseModel], schema: dict[str, Any], path: str) -> None:
    """Every model field is in the schema (same name, description, required-ness), and nothing else is."""
    fields = _fields(model)
    props = schema.get("properties") or {}
    assert set(props) == set(fields), f"{path}: CRD {sorted(props)} vs model {sorted(fields)}"
    required = set(schema.get("required") or [])
    for alias, info in fields.items():
        assert (alias in required) == info.is_required(), f"{path}.{alias}: required differs"
        assert props[alias]["description"] == " ".join((info.description or "").split()), f"{path}.{alias}"
        _compare_type(info.annotation, props[alias], f"{path}.{alias}")


def _compare_type(annotation: Any, schema: dict[str, Any], path: str) -> None:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if arg is not type(None):
                _compare_type(arg, schema, path)
    elif origin is list:
        assert schema["type"] == "array", path
        _compare_type(args[0], schema["items"], f"{path}[]")
    elif origin is dict:
        assert schema["type"] == "object" and schema["additionalProperties"]["type"] == "string", path
    elif isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        assert schema["type"] == "object", path
        _compare(annotation, schema, path)
    elif isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        assert schema.get("enum") == [m.value for m in annotation], path
    else:
        expected = {str: "string", int: "integer", bool: "boolean", float: "number"}.get(annotation)
        if origin is typing.Literal:
            assert schema.get("enum") == list(args), path
            expected = "string"
        assert schema["type"] == expected, f"{path}: CRD type {schema['type']} vs model {annotation}"


def test_schema_fields_match_the_models_field_by_field() -> None:
    _compare(IncidentSpec, crd_schema("incident")["properties"]["spec"], "Incident.spec")
    _compare(IncidentStatus, crd_schema("incident")["properties"]["status"], "Incident.status")
    _compare(CapturePolicySpec, crd_schema("capturepolicy")["properties"]["spec"], "CapturePolicy.spec")


def test_crd_names_printer_columns_and_subresources() -> None:
    inc, pol = crd("incident"), crd("capturepolicy")
    assert inc["metadata"]["name"] == f"{c.INCIDENT_PLURAL}.{c.GROUP}"
    assert pol["metadata"]["name"] == f"{c.POLICY_PLURAL}.{c.GROUP}"
    for doc in (inc, pol):
        assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
        assert doc["spec"]["scope"] == "Namespaced"
        assert doc["spec"]["names"]["shortNames"]
        assert [v["name"] for v in doc["spec"]["versions"]] == [c.VERSION]
    version = inc["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    cols = [col["name"] for col in version["additionalPrinterColumns"] if not col.get("priority")]
    assert cols == ["Job", "Phase", "Category", "Kind", "Culprits", "Suspects", "Age"]
    by_name = {col["name"]: col for col in version["additionalPrinterColumns"]}
    # the verdict in words outlives the Events: its kind by default, its short line with -o wide (in Message,
    # which begins with it: no Verdict column to say it twice, test_incident_columns)
    assert by_name["Kind"]["jsonPath"] == ".status.verdict.kindText"
    assert (by_name["Message"]["jsonPath"], by_name["Message"]["priority"]) == (".status.message", 1)
    assert "Verdict" not in by_name
    # a short string, not the suspectRanks list (kubectl would print it as JSON: [1])
    assert by_name["Suspects"]["jsonPath"] == ".status.suspects"
    assert crd_schema("incident")["properties"]["status"]["properties"]["suspects"]["type"] == "string"
    pcols = [
        col["name"]
        for col in pol["spec"]["versions"][0]["additionalPrinterColumns"]
        if not col.get("priority")
    ]
    assert pcols == ["Selector", "Age"]


# --- samples: what the API server and the models each accept -----------------------------------------------

GOOD_POLICY: dict[str, Any] = {
    "apiVersion": "frwatch.io/v1alpha1",
    "kind": "CapturePolicy",
    "metadata": {"name": "llm-training", "namespace": "team-a"},
    "spec": {
        "jobSelector": {
            "matchLabels": {"team": "llm"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["prod"]},
                {"key": "debug", "operator": "DoesNotExist"},
            ],
        },
        "bufferSize": 4000,
        "bucket": "fr-dumps",
        "prefix": "frwatch",
        "collectionDeadlineSeconds": 300,
        "analyzer": {"image": "ghcr.io/frwatch/frwatch:0.1.0", "resources": {"limits": {"memory": "8Gi"}}},
        "agentResources": {"requests": {"cpu": "20m"}},
        "remediation": {"enabled": True, "dryRun": True, "maxNodesPerIncident": 1},
    },
}

GOOD_INCIDENT: dict[str, Any] = {
    "apiVersion": "frwatch.io/v1alpha1",
    "kind": "Incident",
    "metadata": {"name": "llama-0-abc", "namespace": "team-a"},
    "spec": {
        "jobRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "llama", "uid": "u-1"},
        "attempt": "0",
        "trigger": "pod llama-worker-3 exited 1",
        "storageUrl": "s3://fr-dumps/frwatch/team-a/llama/u-1/0/",
    },
    "status": {
        "phase": "Reported",
        "counts": {"expectedRanks": 8, "dumpedRanks": 7, "missingRanks": 1},
        "category": "gpu_hang",
        "hardwareClass": True,
        "suspectRanks": [3],
        "suspectNodes": ["node-7"],
        "suspects": "rank 3 on node-7",
        "conditions": [{"type": "Analyzed", "status": "True", "reason": "VerdictStored"}],
        "message": "rank 3 never started all_reduce seq 41",
    },
}


def _set(obj: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node = out
    *parents, last = dotted.split(".")
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


BAD_POLICIES = {
    "unknown field (a typo)": _set(GOOD_POLICY, "spec.buferSize", 10),
    "bufferSize zero": _set(GOOD_POLICY, "spec.bufferSize", 0),
    "bufferSize not an integer": _set(GOOD_POLICY, "spec.bufferSize", "big"),
    "deadline below 5 s": _set(GOOD_POLICY, "spec.collectionDeadlineSeconds", 1),
    "bucket too short": _set(GOOD_POLICY, "spec.bucket", "ab"),
    "unknown operator": _set(GOOD_POLICY, "spec.jobSelector.matchExpressions.0.operator", "Has"),
    "In without values (CEL)": _set(GOOD_POLICY, "spec.jobSelector.matchExpressions.0.values", []),
    "Exists with values (CEL)": _set(
        GOOD_POLICY,
        "spec.jobSelector.matchExpressions.1",
        {"key": "x", "operator": "Exists", "values": ["y"]},
    ),
    "analyzer deadline too short": _set(GOOD_POLICY, "spec.analyzer.deadlineSeconds", 1),
    "negative node cap": _set(GOOD_POLICY, "spec.remediation.maxNodesPerIncident", -1),
    "label value not a string": _set(GOOD_POLICY, "spec.jobSelector.matchLabels.team", 3),
}

BAD_INCIDENTS = {
    "no spec": {k: v for k, v in GOOD_INCIDENT.items() if k != "spec"},
    "jobRef without uid": _set(GOOD_INCIDENT, "spec.jobRef", {"name": "llama"}),
    "no attempt": _set(GOOD_INCIDENT, "spec", {"jobRef": GOOD_INCIDENT["spec"]["jobRef"]}),
    "unknown phase": _set(GOOD_INCIDENT, "status.phase", "Exploded"),
    "negative count": _set(GOOD_INCIDENT, "status.counts.dumpedRanks", -1),
    "rank not an integer": _set(GOOD_INCIDENT, "status.suspectRanks", ["three"]),
    "condition status not True/False/Unknown": _set(GOOD_INCIDENT, "status.conditions.0.status", "Yes"),
    "unknown status field": _set(GOOD_INCIDENT, "status.verdict", "x"),
}


def _model_accepts(kind: str, obj: dict[str, Any]) -> bool:
    try:
        if kind == "capturepolicy":
            CapturePolicySpec.model_validate(obj.get("spec", {}))
        else:
            IncidentSpec.model_validate(obj["spec"])
            IncidentStatus.model_validate(obj.get("status", {}))
    except (pydantic.ValidationError, KeyError):
        return False
    return True


def test_good_samples_pass_the_crd_and_the_model() -> None:
    assert crd_errors("capturepolicy", GOOD_POLICY) == []
    assert crd_errors("incident", GOOD_INCIDENT) == []
    assert _model_accepts("capturepolicy", GOOD_POLICY)
    assert _model_accepts("incident", GOOD_INCIDENT)
    assert crd_errors("capturepolicy", {"apiVersion": "frwatch.io/v1alpha1", "kind": "CapturePolicy",
                                        "metadata": {"name": "all"}}) == []  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_POLICIES))
def test_bad_policies_are_refused_by_the_crd_and_the_model(case: str) -> None:
    obj = BAD_POLICIES[case]
    assert crd_errors("capturepolicy", obj), f"the CRD accepted: {case}"
    assert not _model_accepts("capturepolicy", obj), f"the model accepted: {case}"


@pytest.mark.parametrize("case", sorted(BAD_INCIDENTS))
def test_bad_incidents_are_refused_by_the_crd_and_the_model(case: str) -> None:
    obj = BAD_INCIDENTS[case]
    assert crd_errors("incident", obj), f"the CRD accepted: {case}"
    assert not _model_accepts("incident", obj), f"the model accepted: {case}"


def test_incident_spec_is_immutable_but_status_moves() -> None:
    moved = _set(GOOD_INCIDENT, "status.phase", "Failed")
    assert crd_errors("incident", moved, old=GOOD_INCIDENT) == []
    retargeted = _set(GOOD_INCIDENT, "spec.attempt", "1")
    assert any("immutable" in e for e in crd_errors("incident", retargeted, old=GOOD_INCIDENT))


def test_model_wire_output_validates_against_the_crd() -> None:
    """What the operator writes (model.wire()) is what the CRD accepts."""
    spec = IncidentSpec.model_validate(GOOD_INCIDENT["spec"]).wire()
    status = IncidentStatus.model_validate(GOOD_INCIDENT["status"]).wire()
    policy = CapturePolicySpec.model_validate(GOOD_POLICY["spec"]).wire()
    assert crd_errors("incident", {**GOOD_INCIDENT, "spec": spec, "status": status}) == []
    assert crd_errors("capturepolicy", {**GOOD_POLICY, "spec": policy}) == []
    assert crd_errors("incident", {**GOOD_INCIDENT, "status": IncidentStatus().wire()}) == []
