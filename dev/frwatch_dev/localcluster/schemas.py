"""What the API server does with a CRD's structural schema (openAPIV3Schema) on every write of a
custom resource: default, prune unknown fields, validate. apiVersion, kind and metadata are left to
the metadata rules.

Validation covers the keywords CRDs commonly use: type (with int-or-string), nullable, enum,
required, properties/additionalProperties/items, minimum/maximum (+exclusive), minLength/maxLength,
pattern, minItems/maxItems, minProperties/maxProperties. CEL rules (x-kubernetes-validations) and
formats are not checked.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

Schema = dict[str, Any]
_TOP = ("apiVersion", "kind", "metadata")


def _default(value: Any, schema: Schema) -> Any:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        out = dict(value)
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
        for key, item in out.items():
            sub = props.get(key) if key in props else schema.get("additionalProperties")
            if isinstance(sub, dict):
                out[key] = _default(item, sub)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_default(item, schema["items"]) for item in value]
    return value


def _prune(value: Any, schema: Schema | None) -> Any:
    if schema is None:
        return value
    if isinstance(value, dict):
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") or additional is True
        if isinstance(additional, dict):
            return {k: _prune(v, additional) for k, v in value.items()}
        if props is None and (preserve or schema.get("type") != "object"):
            return value
        props = props or {}
        return {k: _prune(v, props.get(k)) for k, v in value.items() if k in props or preserve}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_prune(item, schema["items"]) for item in value]
    return value


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
}


def _type_ok(value: Any, schema: Schema) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, (int, str)) and not isinstance(value, bool)
    wanted = schema.get("type")
    if wanted is None:
        return True
    if isinstance(value, bool) and wanted in ("integer", "number"):
        return False
    return isinstance(value, _TYPES.get(wanted, (object,)))


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, (dict, list)) else f'"{type(value).__name__}"'


def _validate(value: Any, schema: Schema, path: str, causes: list[tuple[str, str]]) -> None:
    where = path or "<root>"
    if value is None:
        if not schema.get("nullable"):
            causes.append(
                (
                    where,
                    f'Invalid value: "null": {where} in body must be of type {schema.get("type")}: "null"',
                )
            )
        return
    if not _type_ok(value, schema):
        causes.append(
            (
                where,
                f"Invalid value: {_show(value)}: {where} in body must be of type "
                f"{schema.get('type', 'int-or-string')}: {_show(value)}",
            )
        )
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(v) for v in schema["enum"])
        causes.append((where, f"Unsupported value: {_show(value)}: supported values: {allowed}"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and (
            value < schema["minimum"] or (schema.get("exclusiveMinimum") and value == schema["minimum"])
        ):
            causes.append(
                (
                    where,
                    f"Invalid value: {value}: {where} in body should be greater than or equal to {schema['minimum']}",
                )
            )
        if "maximum" in schema and (
            value > schema["maximum"] or (schema.get("exclusiveMaximum") and value == schema["maximum"])
        ):
            causes.append(
                (
                    where,
                    f"Invalid value: {value}: {where} in body should be less than or equal to {schema['maximum']}",
                )
            )
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            causes.append(
                (
                    where,
                    f"Invalid value: {_show(value)}: {where} in body should be at least {schema['minLength']} chars long",
                )
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            causes.append((where, f"Too long: may not be more than {schema['maxLength']} bytes"))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            causes.append(
                (where, f"Invalid value: {_show(value)}: {where} in body should match '{schema['pattern']}'")
            )
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            causes.append(
                (
                    where,
                    f"Invalid value: {len(value)}: {where} in body should have at least {schema['minItems']} items",
                )
            )
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append((where, f"Too many: {len(value)}: must have at most {schema['maxItems']} items"))
        if isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                _validate(item, schema["items"], f"{path}[{index}]", causes)
    if isinstance(value, dict):
        for key in schema.get("required") or []:
            if key not in value:
                causes.append((f"{path}.{key}" if path else key, "Required value"))
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            causes.append(
                (
                    where,
                    f"Invalid value: {len(value)}: {where} in body should have at least {schema['minProperties']} properties",
                )
            )
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            causes.append(
                (where, f"Too many: {len(value)}: must have at most {schema['maxProperties']} items")
            )
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) if key in props else additional if isinstance(additional, dict) else None
            if sub is not None:
                _validate(item, sub, f"{path}.{key}" if path else key, causes)


def apply_schema(obj: dict[str, Any], schema: Schema | None) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """(defaulted and pruned object, validation causes) for a custom resource."""
    if schema is None:
        return obj, []
    top = {k: obj[k] for k in _TOP if k in obj}
    props = {k: v for k, v in (schema.get("properties") or {}).items() if k not in _TOP}
    body_schema = {
        **{k: v for k, v in schema.items() if k not in ("properties", "required")},
        "properties": props,
        "required": [r for r in schema.get("required") or [] if r not in _TOP],
    }
    body = {k: v for k, v in obj.items() if k not in _TOP}
    body = _prune(_default(body, body_schema), body_schema)
    causes: list[tuple[str, str]] = []
    _validate(body, body_schema, "", causes)
    return {**top, **body}, causes
