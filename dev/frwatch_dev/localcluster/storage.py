"""The emulator's state: objects, the global resourceVersion, the change history that watches replay.

Pure of I/O: the HTTP layer calls these methods from one event loop (no locking needed) and
subscribes to changes with ``add_listener``. Stored objects are never mutated in place: every write
stores a new dict, so history entries and rendered objects can share them safely.

What it does as the API server does: uid, resourceVersion (one counter for everything; unchanged by
a no-op write), generation (bumped on changes outside metadata and status), creationTimestamp,
generateName, deletionTimestamp + finalizers, 409 AlreadyExists/Conflict, status subresource
semantics, namespace lifecycle (404 for a missing one, 403 while terminating, contents deleted with
it), garbage collection of dependents through ownerReferences, CRDs registering their resources, and
pruning of fields a CRD's structural schema does not declare.

Over 400 lines by choice: the API server's write semantics (resourceVersion, generation, finalizers, namespace
lifecycle, garbage collection, the status subresource, pruning) act together on every write and are read
together; the HTTP layer is ``apiserver.py``.
"""

from __future__ import annotations

import bisect
import copy
import datetime
import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from frwatch_dev.localcluster import patching, resources, schemas
from frwatch_dev.localcluster.errors import ApiError
from frwatch_dev.localcluster.resources import ResourceType
from frwatch_dev.localcluster.validation import validate_metadata

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: kinds whose DELETE answers with the object rather than a Status (as their real registries do)
_RETURNS_DELETED_OBJECT = frozenset({"pods", "namespaces"})

PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
}


@dataclass(frozen=True)
class Change:
    """One entry of the history: what a watch sends, plus the object before (for selector moves)."""

    rv: int
    storage: str
    type: str  # ADDED, MODIFIED, DELETED
    obj: Obj
    old: Obj | None


def now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _without(obj: Obj, *keys: str) -> Obj:
    return {k: v for k, v in obj.items() if k not in keys}


# -- events are stored once, as core/v1, and shown through events.k8s.io/v1 too --------------

_EVENT_RENAMES = (  # (core/v1, events.k8s.io/v1)
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
)


def _rename(obj: Obj, pairs: Iterable[tuple[str, str]]) -> Obj:
    out = dict(obj)
    for old, new in pairs:
        if old in out:
            out[new] = out.pop(old)
    return out


def to_storage(rt: ResourceType, obj: Obj) -> Obj:
    if rt.storage == "events" and rt.group == "events.k8s.io":
        return _rename(obj, [(new, old) for old, new in _EVENT_RENAMES])
    return obj


def render(rt: ResourceType, stored: Obj) -> Obj:
    """The stored object as ``rt`` shows it (apiVersion, kind, and the events.k8s.io field names)."""
    obj = (
        _rename(stored, _EVENT_RENAMES) if rt.storage == "events" and rt.group == "events.k8s.io" else stored
    )
    return {"apiVersion": rt.api_version, "kind": rt.kind, **_without(obj, "apiVersion", "kind")}


def _spec_part(rt: ResourceType, obj: Obj) -> Obj:
    skip = (
        ("metadata", "status", "apiVersion", "kind")
        if "status" in rt.subresources
        else ("metadata", "apiVersion", "kind")
    )
    return _without(obj, *skip)


class Store:
    def __init__(self, history_limit: int = 20_000) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        self._by_storage: dict[str, ResourceType] = {}
        self._objects: dict[str, dict[Key, Obj]] = {}
        self._uids: dict[str, tuple[str, Key]] = {}
        self._rv = 1000
        self._history: list[Change] = []
        self._history_rvs: list[int] = []
        self._history_limit = history_limit
        self._compacted_rv = 0  # the history no longer holds changes up to this resourceVersion
        self._listeners: list[Callable[[], None]] = []
        for rt in resources.BUILTIN_TYPES:
            self._register(rt)
        ns_type = self.type_for("", "v1", "namespaces")
        assert ns_type is not None
        for name in _SYSTEM_NAMESPACES:
            self.create(ns_type, "", {"metadata": {"name": name}})

    # -- types --------------------------------------------------------------------------------

    def _register(self, rt: ResourceType) -> None:
        self._types[(rt.group, rt.version, rt.plural)] = rt
        self._by_storage.setdefault(rt.storage_name, rt)
        self._objects.setdefault(rt.storage_name, {})

    def type_for(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def types(self) -> list[ResourceType]:
        return list(self._types.values())

    @property
    def resource_version(self) -> int:
        return self._rv

    def add_listener(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    # -- reading ------------------------------------------------------------------------------

    def _key(self, rt: ResourceType, namespace: str, name: str) -> Key:
        return (namespace if rt.namespaced else "", name)

    def _stored(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self._objects[rt.storage_name].get(self._key(rt, namespace, name))
        if obj is None:
            raise ApiError.not_found(rt.plural, name, rt.group)
        return obj

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        return render(rt, self._stored(rt, namespace, name))

    def list_objects(
        self,
        rt: ResourceType,
        namespace: str | None,
        predicate: Callable[[Obj], bool] | None = None,
    ) -> tuple[list[Obj], int]:
        """Objects of ``rt`` (in ``namespace``, or everywhere when None), sorted by namespace and name."""
        items = []
        for (ns, _), stored in sorted(self._objects[rt.storage_name].items()):
            if namespace is not None and rt.namespaced and ns != namespace:
                continue
            obj = render(rt, stored)
            if predicate is None or predicate(obj):
                items.append(obj)
        return items, self._rv

    def changes_since(self, rv: int) -> list[Change]:
        """Every change after ``rv``; 410 Gone when the history no longer reaches back that far."""
        if rv > self._rv:
            return []
        if rv < self._compacted_rv:
            raise ApiError.gone(f"too old resource version: {rv} ({self._compacted_rv})")
        index = bisect.bisect_right(self._history_rvs, rv)
        return self._history[index:]

    # -- the write path -------------------------------------------------------------------------

    def _commit(self, storage: str, key: Key, obj: Obj, kind: str, old: Obj | None) -> Obj:
        self._rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self._rv)}}
        if kind == "DELETED":
            self._objects[storage].pop(key, None)
            self._uids.pop(obj["metadata"].get("uid", ""), None)
        else:
            self._objects[storage][key] = obj
            self._uids[obj["metadata"]["uid"]] = (storage, key)
        self._history.append(Change(self._rv, storage, kind, obj, old))
        self._history_rvs.append(self._rv)
        if len(self._history) > self._history_limit * 1.2:
            drop = len(self._history) - self._history_limit
            self._compacted_rv = self._history[drop - 1].rv
            del self._history[:drop]
            del self._history_rvs[:drop]
        for listener in self._listeners:
            listener()
        return obj

    def create(self, rt: ResourceType, namespace: str, body: Any, dry_run: bool = False) -> Obj:
        if not isinstance(body, dict):
            raise ApiError.bad_request("the request body must be a JSON object")
        obj = to_storage(rt, copy.deepcopy(body))
        self._check_type(rt, obj)
        meta = _meta(obj)
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise ApiError.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            namespace = namespace or body_ns or ""
            if not namespace:
                raise ApiError.bad_request("the namespace of the object must be given in the URL")
            self._check_namespace_open(namespace)
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise ApiError(500, "InternalError", "resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generate_name(rt, namespace, str(meta["generateName"]))
        causes = validate_metadata(meta, rt.plural)
        if causes:
            raise ApiError.invalid(rt.kind, str(meta.get("name") or ""), causes, rt.group)
        key = self._key(rt, namespace, meta["name"])
        if key in self._objects[rt.storage_name]:
            raise ApiError.already_exists(rt.plural, meta["name"], rt.group)
        for field in ("uid", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "selfLink"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now()
        if rt.has_generation:
            meta["generation"] = 1
        obj = self._prepare_for_create(rt, obj)
        if dry_run:
            return render(rt, obj)
        if rt.storage_name == resources.CRD_STORAGE:
            self._install_crd(obj)
        stored = self._commit(
            rt.storage_name, key, {**obj, "apiVersion": rt.api_version, "kind": rt.kind}, "ADDED", None
        )
        return render(rt, stored)

    def _check_type(self, rt: ResourceType, obj: Obj) -> None:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if (
            api_version
            and api_version != rt.api_version
            and not (rt.storage == "events" and api_version in ("v1", "events.k8s.io/v1"))
        ):
            raise ApiError.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version})"
            )
        if kind and kind != rt.kind:
            raise ApiError.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )

    def _generate_name(self, rt: ResourceType, namespace: str, prefix: str) -> str:
        for _ in range(100):
            name = prefix[:58] + "".join(random.choice(_GENERATE_ALPHABET) for _ in range(5))  # noqa: S311
            if self._key(rt, namespace, name) not in self._objects[rt.storage_name]:
                return name
        raise ApiError(500, "InternalError", f"could not generate a free name from {prefix!r}")

    def _prepare_for_create(self, rt: ResourceType, obj: Obj) -> Obj:
        if rt.plural == "namespaces" and not rt.group:
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        elif rt.plural == "pods" and not rt.group:
            obj["status"] = {"phase": "Pending"}
        elif rt.plural == "nodes" and not rt.group:
            pass  # a node registers itself with its status
        elif "status" in rt.subresources:
            obj.pop("status", None)
        if rt.custom:
            obj = self._apply_schema(rt, obj)
        if rt.storage_name == resources.CRD_STORAGE:
            causes = resources.validate_crd(obj)
            if causes:
                raise ApiError.invalid(rt.kind, _meta(obj).get("name", ""), causes, rt.group)
            names = obj["spec"]["names"]
            accepted = {
                **names,
                "singular": names.get("singular") or names["kind"].lower(),
                "listKind": names.get("listKind") or names["kind"] + "List",
            }
            obj["status"] = {
                "acceptedNames": accepted,
                "storedVersions": [v["name"] for v in obj["spec"]["versions"] if v.get("storage")],
                "conditions": [
                    {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now()}
                    for t, r, m in (
                        ("NamesAccepted", "NoConflicts", "no conflicts found"),
                        ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                    )
                ],
            }
        return obj

    def _apply_schema(self, rt: ResourceType, obj: Obj) -> Obj:
        obj, causes = schemas.apply_schema(obj, rt.schema)
        if causes:
            raise ApiError.invalid(rt.kind, _meta(obj).get("name", ""), causes, rt.group)
        return obj

    def replace(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Obj:
        if not isinstance(body, dict):
            raise ApiError.bad_request("the request body must be a JSON object")
        self._check_type(rt, body)
        meta = body.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise ApiError.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        if rt.custom and not meta.get("resourceVersion") and not subresource:
            raise ApiError.invalid(
                rt.kind,
                name,
                [("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")],
                rt.group,
            )
        return self._update(rt, namespace, name, lambda _current: copy.deepcopy(body), subresource, dry_run)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        patch: Any,
        subresource: str = "",
        dry_run: bool = False,
    ) -> Obj:
        kind = PATCH_TYPES.get(content_type)
        if kind is None:
            raise ApiError.unsupported_media_type(
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(PATCH_TYPES)}"
            )
        if kind == "strategic" and rt.custom:
            raise ApiError.unsupported_media_type(
                "strategic merge patch is not supported for custom resources"
            )
        if kind == "json":
            if not isinstance(patch, list):
                raise ApiError.bad_request(
                    "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
                )
            return self._update(
                rt, namespace, name, lambda cur: patching.json_patch(cur, patch), subresource, dry_run
            )
        if not isinstance(patch, dict):
            raise ApiError.bad_request("the patch must be a JSON object")
        apply = patching.strategic_merge_patch if kind == "strategic" else patching.merge_patch
        return self._update(rt, namespace, name, lambda cur: apply(cur, patch), subresource, dry_run)

    def _update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        compute: Callable[[Obj], Any],
        subresource: str,
        dry_run: bool,
    ) -> Obj:
        if subresource and subresource not in rt.subresources:
            raise ApiError.no_route()
        current = self._stored(rt, namespace, name)
        new = compute(render(rt, current))
        if not isinstance(new, dict):
            raise ApiError.unprocessable("the patched object is not a JSON object")
        new = to_storage(rt, new)
        self._check_type(rt, new)
        if subresource == "status":
            status = new.get("status")
            new_meta = _meta(new)
            new = _without(current, "status")
            new["metadata"] = {**current["metadata"], "resourceVersion": new_meta.get("resourceVersion")}
            if status is not None:
                new["status"] = status
        elif "status" in rt.subresources:
            new = _without(new, "status")
            if "status" in current:
                new["status"] = current["status"]
        meta = _meta(new)
        cur_meta = current["metadata"]
        if meta.get("name", name) != name:
            raise ApiError.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and meta.get("namespace", cur_meta.get("namespace")) != cur_meta.get("namespace"):
            raise ApiError.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        if meta.get("resourceVersion") and meta["resourceVersion"] != cur_meta["resourceVersion"]:
            raise ApiError.conflict(rt.plural, name, rt.group)
        for field in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "name",
        ):
            if field in cur_meta:
                meta[field] = cur_meta[field]
            else:
                meta.pop(field, None)
        if cur_meta.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(cur_meta.get("finalizers") or [])
            if added:
                raise ApiError.invalid(
                    rt.kind,
                    name,
                    [
                        (
                            "metadata.finalizers",
                            f"Forbidden: no new finalizers can be added if the object is being deleted, found new "
                            f"finalizers {sorted(added)!r}",
                        )
                    ],
                    rt.group,
                )
        if not meta.get("finalizers"):
            meta.pop("finalizers", None)
        causes = validate_metadata(meta, rt.plural)
        if causes:
            raise ApiError.invalid(rt.kind, name, causes, rt.group)
        if rt.custom:
            new = self._apply_schema(rt, new)
        new = {**new, "apiVersion": current["apiVersion"], "kind": current["kind"]}
        meta = new["metadata"]
        if rt.has_generation and _spec_part(rt, new) != _spec_part(rt, current):
            meta["generation"] = int(cur_meta.get("generation", 1)) + 1
        meta["resourceVersion"] = cur_meta["resourceVersion"]
        if new == current:
            return render(rt, current)  # a no-op write changes nothing, not even the resourceVersion
        if dry_run:
            return render(rt, new)
        if rt.storage_name == resources.CRD_STORAGE:
            self._install_crd(new)
        key = self._key(rt, namespace, name)
        stored = self._commit(rt.storage_name, key, new, "MODIFIED", current)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(rt.storage_name, key)
        return render(rt, stored)

    # -- deletion -------------------------------------------------------------------------------

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        options: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """Delete (or mark for deletion while finalizers remain). Returns (object, removed now)."""
        options = options or {}
        current = self._stored(rt, namespace, name)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"].get("uid"):
            raise ApiError.conflict(
                rt.plural,
                name,
                rt.group,
                "Precondition failed: UID in precondition: "
                f"{pre['uid']}, UID in object meta: {current['metadata'].get('uid')}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"].get(
            "resourceVersion"
        ):
            raise ApiError.conflict(
                rt.plural,
                name,
                rt.group,
                "Precondition failed: ResourceVersion in "
                f"precondition: {pre['resourceVersion']}, ResourceVersion in object meta: "
                f"{current['metadata'].get('resourceVersion')}",
            )
        if dry_run:
            return render(rt, current), not current["metadata"].get("finalizers")
        orphan = options.get("propagationPolicy") == "Orphan" or options.get("orphanDependents") is True
        obj, removed = self._delete(rt.storage_name, self._key(rt, namespace, name), orphan=orphan)
        return render(rt, obj), removed

    def _delete(self, storage: str, key: Key, orphan: bool = False) -> tuple[Obj, bool]:
        current = self._objects[storage][key]
        meta = current["metadata"]
        rt = self._by_storage[storage]
        is_namespace = storage == "namespaces"
        if meta.get("finalizers") or is_namespace:
            if meta.get("deletionTimestamp"):
                return current, False
            new = copy.deepcopy(current)
            new["metadata"]["deletionTimestamp"] = now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            if rt.has_generation:
                new["metadata"]["generation"] = int(meta.get("generation", 1)) + 1
            if is_namespace:
                new["status"] = {"phase": "Terminating"}
            stored = self._commit(storage, key, new, "MODIFIED", current)
            if is_namespace:
                self._empty_namespace(key[1])
                return self._objects[storage].get(key, stored), key not in self._objects[storage]
            return stored, False
        return self._remove(storage, key, orphan=orphan), True

    def _remove(self, storage: str, key: Key, orphan: bool = False) -> Obj:
        current = self._objects[storage][key]
        removed = self._commit(storage, key, current, "DELETED", current)
        if storage == resources.CRD_STORAGE:
            self._uninstall_crd(current)
        uid = current["metadata"].get("uid", "")
        if not orphan:
            self._collect_dependents_of(uid)
        namespace = key[0]
        if namespace and self._namespace_terminating(namespace):
            self._finish_namespace(namespace)
        return removed

    def delete_collection(
        self, rt: ResourceType, namespace: str | None, predicate: Callable[[Obj], bool], dry_run: bool = False
    ) -> list[Obj]:
        items, _ = self.list_objects(rt, namespace, predicate)
        if dry_run:
            return items
        out = []
        for item in items:
            key = self._key(rt, item["metadata"].get("namespace", ""), item["metadata"]["name"])
            if key in self._objects[rt.storage_name]:
                obj, _ = self._delete(rt.storage_name, key)
                out.append(render(rt, obj))
        return out

    def returns_deleted_object(self, rt: ResourceType) -> bool:
        return rt.custom or (not rt.group and rt.plural in _RETURNS_DELETED_OBJECT)

    # -- garbage collection and namespaces ----------------------------------------------------

    def _collect_dependents_of(self, uid: str) -> None:
        if not uid:
            return
        doomed = []
        for storage, objects in self._objects.items():
            for key, obj in objects.items():
                refs = obj["metadata"].get("ownerReferences") or []
                if any(ref.get("uid") == uid for ref in refs) and not any(
                    ref.get("uid") in self._uids for ref in refs
                ):
                    doomed.append((storage, key))
        for storage, key in doomed:
            if key in self._objects[storage]:
                self._delete(storage, key)

    def _check_namespace_open(self, namespace: str) -> None:
        ns = self._objects["namespaces"].get(("", namespace))
        if ns is None:
            raise ApiError.not_found("namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError.forbidden(
                f"unable to create new content in namespace {namespace} because it is being terminated"
            )

    def _namespace_terminating(self, namespace: str) -> bool:
        ns = self._objects["namespaces"].get(("", namespace))
        return bool(ns and ns["metadata"].get("deletionTimestamp"))

    def _empty_namespace(self, namespace: str) -> None:
        for storage, objects in list(self._objects.items()):
            for key in [k for k in objects if k[0] == namespace]:
                if key in self._objects[storage]:
                    self._delete(storage, key)
        self._finish_namespace(namespace)

    def _finish_namespace(self, namespace: str) -> None:
        key = ("", namespace)
        if key not in self._objects["namespaces"]:
            return
        if any(k[0] == namespace for objects in self._objects.values() for k in objects):
            return
        self._commit(
            "namespaces", key, self._objects["namespaces"][key], "DELETED", self._objects["namespaces"][key]
        )

    # -- CRDs ---------------------------------------------------------------------------------

    def _install_crd(self, crd: Obj) -> None:
        new_types = resources.types_from_crd(crd)
        for rt in new_types:
            existing = self._types.get((rt.group, rt.version, rt.plural))
            if existing is not None and not existing.custom:
                raise ApiError.invalid(
                    "CustomResourceDefinition",
                    crd["metadata"]["name"],
                    [
                        (
                            "spec.group",
                            f"Invalid value: {rt.group!r}: the group is served by the API server itself",
                        )
                    ],
                    "apiextensions.k8s.io",
                )
        storage = f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"
        for type_key in [k for k, rt in self._types.items() if rt.custom and rt.storage_name == storage]:
            del self._types[type_key]
        self._by_storage.pop(storage, None)
        for rt in new_types:
            self._register(rt)

    def _uninstall_crd(self, crd: Obj) -> None:
        storage = f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"
        for key in list(self._objects.get(storage, {})):
            self._commit(storage, key, self._objects[storage][key], "DELETED", self._objects[storage][key])
        for type_key in [k for k, rt in self._types.items() if rt.custom and rt.storage_name == storage]:
            del self._types[type_key]
        self._by_storage.pop(storage, None)
