"""OpenAPI v3 as a real API server serves it, and the server-side field validation that relies on it.

    GET /openapi/v3                       {"paths": {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=..."}}}
    GET /openapi/v3/apis/frwatch.io/v1alpha1   one group-version's paths and component schemas

kubectl reads these for ``kubectl explain`` and for ``kubectl apply``/``create`` validation: when a
resource's PATCH operation declares the ``fieldValidation`` query parameter (as every real server's
does), kubectl sends ``fieldValidation=Strict`` and leaves the checking to the server, which refuses an
unknown field with the real wording (``CapturePolicy in version "v1alpha1" cannot be handled as a
CapturePolicy: strict decoding error: unknown field "spec.selector"``). ``Warn`` (the server's default)
answers with ``Warning`` headers instead; ``Ignore`` says nothing.

Where the schemas come from:

* custom resources: each served version's ``openAPIV3Schema`` from its CRD (component
  ``<reversed group>.<version>.<Kind>``, e.g. ``io.frwatch.v1alpha1.CapturePolicy``), with ``metadata``
  pointing at ObjectMeta as on a real server;
* built-in kinds: the Kubernetes release's own definitions, as ``kubernetes-validate`` ships them
  (``SCHEMA_RELEASE``), turned back from JSON Schema into OpenAPI 3 (nullable type lists to one type,
  int-or-string, ``$ref`` with siblings wrapped in ``allOf``). Without that package (it is a dev
  dependency), the built-in groups are left out of the index and only custom resources are described.

Not served: the OpenAPI v2 document (``/openapi/v2``), protobuf, and the request/response bodies of
operations beyond the object's own schema.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from frwatch_dev.localcluster.resources import ResourceType

Schema = dict[str, Any]
#: the Kubernetes release whose built-in schemas are served (kubernetes-validate's folder name)
SCHEMA_RELEASE = "v1.36.0"
_PREFIX = "#/components/schemas/"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_FIELD_VALIDATION = ("Strict", "Warn", "Ignore")


# -- built-in schemas ---------------------------------------------------------------------------------------


def _definitions_file() -> Path | None:
    try:
        import kubernetes_validate  # type: ignore[import-untyped]  # a dev dependency: the local cluster only runs where it is installed
    except ImportError:
        return None
    folder = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"{SCHEMA_RELEASE}-local"
    path = folder / "_definitions.json"
    return path if path.is_file() else None


def _to_openapi(node: Any) -> Any:
    """One JSON-Schema node of kubernetes-validate's definitions as the OpenAPI 3 schema Kubernetes serves."""
    if not isinstance(node, dict):
        return node
    out: Schema = {}
    for key, value in node.items():
        if key == "$ref":
            continue
        if key == "type" and isinstance(value, list):
            named = [v for v in value if v != "null"]
            out["type"] = named[0] if named else "object"
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _to_openapi(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = _to_openapi(value)
        elif key in ("allOf", "anyOf"):
            out[key] = [_to_openapi(sub) for sub in value]
        elif key == "oneOf":
            types = {k for sub in value for k in ([sub.get("type")] if isinstance(sub.get("type"), str)
                                                  else sub.get("type") or []) if k != "null"}  # fmt: skip
            if types == {"string", "integer"}:
                out.update(type="string", format="int-or-string")
            elif types == {"string", "number"}:
                out["type"] = "string"  # resource.Quantity
            else:
                out[key] = [_to_openapi(sub) for sub in value]
        else:
            out[key] = value
    if "$ref" in node:
        ref = _PREFIX + str(node["$ref"]).rsplit("/", 1)[-1]
        return {"allOf": [{"$ref": ref}], **out} if out else {"$ref": ref}
    return out


@functools.cache
def builtin_schemas() -> dict[str, Schema]:
    """Every built-in definition of ``SCHEMA_RELEASE`` by its name (``io.k8s.api.core.v1.Pod``); empty
    without kubernetes-validate."""
    path = _definitions_file()
    if path is None:
        return {}
    defs = json.loads(path.read_text())["$defs"]
    return {name: _to_openapi(schema) for name, schema in defs.items()}


@functools.cache
def _builtin_names() -> dict[tuple[str, str, str], str]:
    names: dict[tuple[str, str, str], str] = {}
    for name, schema in builtin_schemas().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            names.setdefault((gvk.get("group", ""), gvk["version"], gvk["kind"]), name)
    return names


# -- custom resources ---------------------------------------------------------------------------------------


def component_name(rt: ResourceType) -> str | None:
    """The component schema of ``rt``'s objects, as a real server names it; None when none is known."""
    if rt.custom:
        return ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])
    return _builtin_names().get((rt.group, rt.version, rt.kind))


def _crd_schema(rt: ResourceType) -> Schema:
    schema: Schema = (
        copy.deepcopy(rt.schema)
        if rt.schema
        else {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    )
    props: Schema = schema.setdefault("properties", {})
    props["apiVersion"] = {"type": "string", "description": "APIVersion defines the versioned schema of this "
                           "representation of an object."}  # fmt: skip
    props["kind"] = {"type": "string", "description": "Kind is a string value representing the REST resource "
                     "this object represents."}  # fmt: skip
    props["metadata"] = {"allOf": [{"$ref": _PREFIX + _OBJECT_META}],
                         "description": "Standard object's metadata."}  # fmt: skip
    schema["x-kubernetes-group-version-kind"] = [{"group": rt.group, "kind": rt.kind, "version": rt.version}]
    return schema


def _schema_of(rt: ResourceType) -> tuple[str, Schema] | None:
    name = component_name(rt)
    if name is None:
        return None
    if rt.custom:
        return name, _crd_schema(rt)
    schema = builtin_schemas().get(name)
    return None if schema is None else (name, schema)


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_PREFIX):
            found.add(ref[len(_PREFIX) :])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def _closure(roots: dict[str, Schema]) -> dict[str, Schema]:
    """``roots`` and every built-in schema they refer to, transitively."""
    out = dict(roots)
    todo = list(roots.values())
    builtins = builtin_schemas()
    while todo:
        found: set[str] = set()
        _refs(todo.pop(), found)
        for name in sorted(found - out.keys()):
            if name in builtins:
                out[name] = builtins[name]
                todo.append(builtins[name])
    return dict(sorted(out.items()))


# -- the documents ------------------------------------------------------------------------------------------


def gv_path(rt: ResourceType) -> str:
    """``api/v1`` or ``apis/<group>/<version>``: the key of ``rt``'s document in the index."""
    return f"apis/{rt.group}/{rt.version}" if rt.group else f"api/{rt.version}"


def _param(name: str, where: str, description: str, required: bool = False) -> Schema:
    return {"name": name, "in": where, "description": description, "required": required,
            "schema": {"type": "string", "uniqueItems": True}}  # fmt: skip


_WRITE_PARAMS = [
    _param("dryRun", "query", "When present, indicates that modifications should not be persisted."),
    _param("fieldManager", "query", "A name associated with the actor or entity that is making these changes."),
    _param("fieldValidation", "query", "How the server treats unknown or duplicate fields in the request body: "
           "Ignore, Warn (the default) or Strict."),
]  # fmt: skip


def _operations(rt: ResourceType, name: str | None) -> dict[str, Schema]:
    """The paths a real server declares for ``rt`` (collection, object, subresources)."""
    gvk = {"group": rt.group, "kind": rt.kind, "version": rt.version}
    prefix = "/" + gv_path(rt)
    ns = "/namespaces/{namespace}" if rt.namespaced else ""
    body = {"$ref": _PREFIX + name} if name else {"type": "object"}
    ok = {"200": {"description": "OK", "content": {"application/json": {"schema": body}}}}
    path_params = [_param("name", "path", f"name of the {rt.kind}", True)]
    if rt.namespaced:
        path_params.append(_param("namespace", "path", "object name and auth scope", True))

    def op(
        action: str, verb: str, params: list[Schema], with_body: bool = False, patch: bool = False
    ) -> Schema:
        operation: Schema = {
            "operationId": f"{verb}{rt.kind}", "parameters": params, "responses": ok,
            "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
        }  # fmt: skip
        if with_body:
            types = (["application/json-patch+json", "application/merge-patch+json",
                      "application/strategic-merge-patch+json", "application/apply-patch+yaml"]
                     if patch else ["application/json"])  # fmt: skip
            operation["requestBody"] = {"content": {t: {"schema": body} for t in types}, "required": True}
        return operation

    collection_params = path_params[1:]
    paths: dict[str, Schema] = {
        f"{prefix}{ns}/{rt.plural}": {
            "get": op("list", "list", collection_params),
            "post": op("post", "create", [*collection_params, *_WRITE_PARAMS], with_body=True),
            "delete": op("deletecollection", "deleteCollection", collection_params),
        },
        f"{prefix}{ns}/{rt.plural}/{{name}}": {
            "get": op("get", "read", path_params),
            "put": op("put", "replace", [*path_params, *_WRITE_PARAMS], with_body=True),
            "patch": op("patch", "patch", [*path_params, *_WRITE_PARAMS], with_body=True, patch=True),
            "delete": op("delete", "delete", path_params),
        },
    }
    if rt.namespaced:
        paths[f"{prefix}/{rt.plural}"] = {"get": op("list", "listForAllNamespaces", [])}
    for sub in rt.subresources:
        paths[f"{prefix}{ns}/{rt.plural}/{{name}}/{sub}"] = {
            "get": op("get", f"read{sub.title()}", path_params),
            "put": op("put", f"replace{sub.title()}", [*path_params, *_WRITE_PARAMS], with_body=True),
            "patch": op("patch", f"patch{sub.title()}", [*path_params, *_WRITE_PARAMS], with_body=True, patch=True),
        }  # fmt: skip
    return paths


def group_version_document(types: Iterable[ResourceType], path: str) -> Schema | None:
    """The OpenAPI v3 document of one group-version (``api/v1``, ``apis/G/V``); None when nothing is served
    there."""
    chosen = [rt for rt in types if gv_path(rt) == path]
    if not chosen:
        return None
    paths: dict[str, Schema] = {}
    roots: dict[str, Schema] = {}
    for rt in chosen:
        found = _schema_of(rt)
        if found is None and not rt.custom:
            continue  # a built-in kind without a known schema is left out, as if not described
        if found is not None:
            roots[found[0]] = found[1]
        paths.update(_operations(rt, found[0] if found else None))
    if not paths:
        return None
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SCHEMA_RELEASE},
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": _closure(roots)},
    }


def document_hash(doc: Schema) -> str:
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()


# -- server-side field validation ------------------------------------------------------------------------------


def field_validation(value: str | None) -> str:
    """The request's ``fieldValidation`` directive (default ``Warn``, as a real server); ValueError if unknown."""
    if not value:
        return "Warn"
    if value not in _FIELD_VALIDATION:
        raise ValueError(f"fieldValidation must be one of {', '.join(_FIELD_VALIDATION)}, not {value!r}")
    return value


def _resolve(schema: Schema) -> Schema:
    """A schema with its ``$ref``/``allOf`` references merged in (properties of all parts)."""
    parts = [schema]
    merged: Schema = {}
    seen = 0
    while parts and seen < 64:
        seen += 1
        part = parts.pop(0)
        ref = part.get("$ref")
        if isinstance(ref, str) and ref.startswith(_PREFIX):
            target = builtin_schemas().get(ref[len(_PREFIX) :])
            if target is not None:
                parts.append(target)
        parts.extend(p for p in part.get("allOf") or [] if isinstance(p, dict))
        for key, value in part.items():
            if key == "properties":
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key not in ("$ref", "allOf"):
                merged.setdefault(key, value)
    return merged


def _unknown(value: Any, schema: Schema, path: str, structural: bool, found: list[str]) -> None:
    if "$ref" in schema or any("$ref" in part for part in schema.get("allOf") or []):
        structural = False  # a built-in type (ObjectMeta in a custom resource): Go's rules, not pruning's
    schema = _resolve(schema)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _unknown(item, schema["items"], f"{path}[{index}]", structural, found)
        return
    if not isinstance(value, dict):
        return
    props = schema.get("properties")
    additional = schema.get("additionalProperties")
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or additional is True
    if props is None and not isinstance(additional, dict) and (preserve or not structural):
        return  # a free-form object (RawExtension, preserve-unknown-fields)
    for key, item in value.items():
        if key.startswith("$"):
            continue  # a strategic-merge-patch directive ($patch, $setElementOrder/..., $retainKeys)
        where = f"{path}.{key}" if path else key
        if props is not None and key in props:
            _unknown(item, props[key], where, structural, found)
        elif isinstance(additional, dict):
            _unknown(item, additional, where, structural, found)
        elif not preserve:
            found.append(where)


def unknown_fields(rt: ResourceType, body: Any) -> list[str]:
    """The fields of ``body`` (an object, or a merge/strategic patch of one) that ``rt``'s schema does not
    declare, as a real server names them (``spec.selector``, ``spec.containers[0].imagee``); empty when
    ``rt`` has no known schema."""
    found_schema = _schema_of(rt)
    if found_schema is None or not isinstance(body, dict):
        return []
    found: list[str] = []
    _unknown(body, found_schema[1], "", rt.custom, found)
    return found


def strict_decoding_message(rt: ResourceType, fields: list[str]) -> str:
    listed = ", ".join(f'unknown field "{f}"' for f in fields)
    return f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict decoding error: {listed}'
