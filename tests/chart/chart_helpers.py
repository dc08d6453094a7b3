"""Render the chart offline (helm-python-sdk) and validate objects against the CRDs' schemas (+ CEL)."""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import helm_python as helm
import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "frwatch"
CRDS = ROOT / "crds"
RELEASE = "frwatch"
NAMESPACE = "frwatch-system"
KUBE_VERSION = "1.32.0"  # kubectl's version here; kubernetes-validate ships its schemas


def gen_crds() -> Any:
    """scripts/gen_crds.py as a module."""
    spec = importlib.util.spec_from_file_location("gen_crds", ROOT / "scripts" / "gen_crds.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render(values: dict[str, Any] | None = None, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Every object the chart renders with ``values`` (NOTES.txt left out)."""
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(values or {})
        out = chart.render(values or {}, name=RELEASE, namespace=namespace, is_install=True)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def one(docs: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"expected one {kind}*{name_suffix}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def crd(name: str) -> dict[str, Any]:
    """A CRD file of crds/ (``incident`` or ``capturepolicy``)."""
    text = (CRDS / f"{name}.yaml").read_text()
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def crd_schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = crd(name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """Unknown fields rejected, as `kubectl apply` (server-side field validation Strict) does."""
    out = copy.deepcopy(schema)

    def walk(node: dict[str, Any]) -> None:
        if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for child in (node.get("properties") or {}).values():
            walk(child)
        if isinstance(node.get("items"), dict):
            walk(node["items"])
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"])

    walk(out)
    out["properties"]["metadata"] = {"type": "object"}
    return out


def _rules(node: dict[str, Any], value: Any, path: str) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """(path, rule, value) for every x-kubernetes-validations rule that applies to a value in the object."""
    for rule in node.get("x-kubernetes-validations") or []:
        yield path, rule, value
    if isinstance(value, dict):
        for key, child in (node.get("properties") or {}).items():
            if key in value:
                yield from _rules(child, value[key], f"{path}.{key}")
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            yield from _rules(node["items"], item, f"{path}[{i}]")


def crd_errors(name: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """What the API server would refuse in ``obj`` (schema, unknown fields, CEL rules); [] when valid.

    ``old``: the stored object for an update (transition rules such as ``self == oldSelf`` then run)."""
    schema = crd_schema(name)
    validator = jsonschema.Draft4Validator(_strict(schema))
    errors = [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(obj)]
    env = celpy.Environment()
    old_values = {p: v for p, _, v in _rules(schema, old, "")} if old is not None else {}
    for path, rule, value in _rules(schema, obj, ""):
        uses_old = "oldSelf" in rule["rule"]
        if uses_old and path not in old_values:
            continue  # transition rules run on updates only
        program = env.program(env.compile(rule["rule"]))
        activation = {"self": celpy.json_to_cel(value)}
        if uses_old:
            activation["oldSelf"] = celpy.json_to_cel(old_values[path])
        result = program.evaluate(activation)
        if result is not True and not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            errors.append(f"{path or '.'}: {rule['message']}")
    return errors
