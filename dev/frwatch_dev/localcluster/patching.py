"""The three patch formats of the Kubernetes API, applied to plain JSON documents.

- JSON merge patch (RFC 7386, ``application/merge-patch+json``): dicts merge, ``null`` deletes,
  everything else (lists included) replaces.
- Strategic merge patch (``application/strategic-merge-patch+json``): like a merge patch, but lists
  that Kubernetes declares ``patchStrategy: merge`` are merged element by element on their merge key
  (containers, env, volumes... by ``name``), primitive merge lists (finalizers) are unioned, and the
  ``$patch``, ``$retainKeys``, ``$deleteFromPrimitiveList/`` and ``$setElementOrder/`` directives work.
- JSON patch (RFC 6902, ``application/json-patch+json``): add, remove, replace, move, copy, test.

Every function is pure: inputs are never mutated.
"""

from __future__ import annotations

import copy
from typing import Any

from frwatch_dev.localcluster.errors import ApiError

# Field name -> merge key, for the lists Kubernetes' built-in types declare `patchStrategy: merge`
# (core/v1 PodSpec, Container, ObjectMeta, NodeStatus, PodStatus, ServiceSpec). ``None`` means a
# list of primitives merged as a set. "ports" depends on its owner: containerPort or port.
_MERGE_KEYS: dict[str, str | None] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "finalizers": None,
    "ports": "containerPort",
}

_MISSING = object()


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# -- strategic merge ------------------------------------------------------------------------


def _merge_key(field: str, *lists: list[Any]) -> tuple[bool, str | None]:
    """(is a merge list, its merge key or None for primitives)."""
    if field not in _MERGE_KEYS:
        return False, None
    key = _MERGE_KEYS[field]
    if field == "ports":
        items = [item for lst in lists for item in lst if isinstance(item, dict)]
        if items and not any("containerPort" in item for item in items):
            key = "port"
    return True, key


def strategic_merge_patch(original: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise ApiError.bad_request("strategic merge patch: the patch must be a JSON object")
    result = _smp_map(original if isinstance(original, dict) else {}, patch)
    return {} if result is _MISSING else result


def _smp_map(original: dict[str, Any], patch: dict[str, Any]) -> Any:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return _MISSING
    result = copy.deepcopy(original)
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [item for item in result[field] if item not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict):
            merged = _smp_map(current if isinstance(current, dict) else {}, value)
            if merged is _MISSING:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            is_merge, merge_key = _merge_key(key, value, current if isinstance(current, list) else [])
            if is_merge:
                result[key] = _smp_list(current if isinstance(current, list) else [], value, merge_key)
            else:
                result[key] = copy.deepcopy(value)
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _smp_list(original: list[Any], patch: list[Any], merge_key: str | None) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch if not (isinstance(item, dict) and "$patch" in item)]
    if merge_key is None:  # a set of primitives: union, original order first
        result = list(original)
        for item in patch:
            if item not in result:
                result.append(item)
        return result
    result = copy.deepcopy(original)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise ApiError.bad_request(
                f"strategic merge patch: list item {item!r} lacks its merge key {merge_key!r}"
            )
        index = next(
            (
                i
                for i, cur in enumerate(result)
                if isinstance(cur, dict) and cur.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
            continue
        if index is None:
            result.append({k: v for k, v in copy.deepcopy(item).items() if k != "$patch"})
        else:
            merged = _smp_map(result[index], item)
            if merged is _MISSING:
                del result[index]
            else:
                result[index] = merged
    return result


# -- JSON patch -----------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError.unprocessable(f"the JSON pointer {path!r} does not start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], part: str, allow_end: bool) -> int:
    if allow_end and part == "-":
        return len(container)
    if not part.isdigit():
        raise ApiError.unprocessable(f"the list index {part!r} is not a number")
    index = int(part)
    if index > len(container) or (index == len(container) and not allow_end):
        raise ApiError.unprocessable(f"the list index {index} is out of range (length {len(container)})")
    return index


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list):
            node = node[_index(node, part, allow_end=False)]
        else:
            raise ApiError.unprocessable(f"doc is missing path: {path!r}")
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise ApiError.unprocessable(f"doc is missing path: {path!r}")


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, allow_end=False))
    raise ApiError.unprocessable(f"unable to remove nonexistent key: {path!r}")


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise ApiError.unprocessable(f"doc is missing path: {path!r}")
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902; a failed ``test`` or a missing path is a 422 as in the API server."""
    if not isinstance(ops, list):
        raise ApiError.bad_request("json patch: the patch must be a JSON array of operations")
    result = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError.bad_request(f"json patch: malformed operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise ApiError.bad_request(f"json patch: operation {op!r} has no value")
        if kind == "add":
            result = _add(result, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(result, path)
        elif kind == "replace":
            _get(result, path)  # must exist
            if _pointer(path):
                _remove(result, path)
            result = _add(result, path, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            if "from" not in op:
                raise ApiError.bad_request(f"json patch: operation {op!r} has no 'from'")
            value = copy.deepcopy(_get(result, op["from"]))
            if kind == "move":
                _remove(result, op["from"])
            result = _add(result, path, value)
        elif kind == "test":
            actual = _get(result, path)
            if actual != op["value"]:
                raise ApiError.unprocessable(
                    f"the server rejected our request due to an error in our request: "
                    f"testing value {path} failed: {actual!r} != {op['value']!r}"
                )
        else:
            raise ApiError.bad_request(f"json patch: unknown operation {kind!r}")
    return result
