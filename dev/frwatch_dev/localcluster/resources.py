"""The resource types the emulator serves: built-in ones, and those CRDs declare.

A ``ResourceType`` is one (group, version, plural). Several versions (and events in core/v1 and
events.k8s.io/v1) can share one storage, named by ``storage``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Field paths every resource supports in a field selector.
_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})

_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get``: a CRD's additionalPrinterColumns entry."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str = ""


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    #: subresources served besides the object itself ("status")
    subresources: tuple[str, ...] = ()
    #: a custom resource: no strategic merge, resourceVersion required on PUT
    custom: bool = False
    #: metadata.generation is kept and bumped on changes outside metadata (and status)
    has_generation: bool = False
    #: extra field-selector paths (besides metadata.name and metadata.namespace)
    field_paths: frozenset[str] = frozenset()
    #: columns for Table output (None: the default columns of this kind)
    printer_columns: tuple[PrinterColumn, ...] | None = None
    #: the CRD's openAPIV3Schema for this version (pruning of unknown fields), if any
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    #: storage name shared by every view of the same objects
    storage: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def storage_name(self) -> str:
        return self.storage or (f"{self.plural}.{self.group}" if self.group else self.plural)

    def supports_field(self, path: str) -> bool:
        return path in _COMMON_FIELDS or path in self.field_paths

    def discovery_entries(self) -> list[dict[str, Any]]:
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(_VERBS),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        entries = [entry]
        for sub in self.subresources:
            entries.append(
                {
                    "name": f"{self.plural}/{sub}",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        return entries


def _core(plural: str, kind: str, namespaced: bool = True, **kw: Any) -> ResourceType:
    return ResourceType(group="", version="v1", plural=plural, kind=kind, namespaced=namespaced, **kw)


_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)

BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _core(
        "namespaces",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        subresources=("status",),
        field_paths=frozenset({"status.phase"}),
    ),
    _core(
        "pods",
        "Pod",
        short_names=("po",),
        categories=("all",),
        subresources=("status",),
        has_generation=True,
        field_paths=frozenset(
            {
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            }
        ),
    ),
    _core(
        "nodes",
        "Node",
        namespaced=False,
        short_names=("no",),
        subresources=("status",),
        field_paths=frozenset({"spec.unschedulable"}),
    ),
    _core("events", "Event", short_names=("ev",), field_paths=_EVENT_FIELDS, storage="events"),
    _core("secrets", "Secret", field_paths=frozenset({"type"})),
    _core("configmaps", "ConfigMap", short_names=("cm",)),
    _core("services", "Service", short_names=("svc",), categories=("all",), subresources=("status",)),
    _core("serviceaccounts", "ServiceAccount", short_names=("sa",)),
    _core("endpoints", "Endpoints", short_names=("ep",)),
    _core("persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",), subresources=("status",)),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        namespaced=True,
        short_names=("ev",),
        field_paths=frozenset(
            {
                "regarding.kind",
                "regarding.namespace",
                "regarding.name",
                "regarding.uid",
                "reason",
                "type",
                "reportingController",
            }
        ),
        storage="events",
    ),
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "Job",
        namespaced=True,
        categories=("all",),
        subresources=("status",),
        has_generation=True,
        field_paths=frozenset({"status.successful"}),
    ),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        namespaced=True,
        short_names=("deploy",),
        categories=("all",),
        subresources=("status",),
        has_generation=True,
    ),
    ResourceType(
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        namespaced=True,
        short_names=("ds",),
        categories=("all",),
        subresources=("status",),
        has_generation=True,
    ),
    ResourceType(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        namespaced=True,
        short_names=("sts",),
        categories=("all",),
        subresources=("status",),
        has_generation=True,
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", namespaced=True),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
    ),
    ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        subresources=("status",),
        has_generation=True,
    ),
)

CRD_STORAGE = "customresourcedefinitions.apiextensions.k8s.io"


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The resource types a CRD serves (one per served version)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec["group"]
    plural = names["plural"]
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    result = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subresources = tuple(sorted((version.get("subresources") or {}).keys()))
        columns = version.get("additionalPrinterColumns")
        printer_columns = None
        if columns:
            printer_columns = tuple(
                PrinterColumn(
                    name=col["name"],
                    type=col.get("type", "string"),
                    json_path=col["jsonPath"],
                    description=col.get("description", ""),
                    priority=int(col.get("priority", 0)),
                    format=col.get("format", ""),
                )
                for col in columns
            )
        selectable = frozenset(
            sel["jsonPath"].lstrip(".") for sel in version.get("selectableFields") or [] if "jsonPath" in sel
        )
        result.append(
            ResourceType(
                group=group,
                version=version["name"],
                plural=plural,
                kind=names["kind"],
                namespaced=namespaced,
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=subresources,
                custom=True,
                has_generation=True,
                field_paths=selectable,
                printer_columns=printer_columns,
                schema=(version.get("schema") or {}).get("openAPIV3Schema"),
                storage=f"{plural}.{group}",
            )
        )
    return result


def validate_crd(crd: dict[str, Any]) -> list[tuple[str, str]]:
    """What the API server would reject in a CRD, as (field, message) pairs."""
    causes: list[tuple[str, str]] = []
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    for key in ("group",):
        if not spec.get(key):
            causes.append((f"spec.{key}", "Required value"))
    for key in ("plural", "kind"):
        if not names.get(key):
            causes.append((f"spec.names.{key}", "Required value"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(("spec.scope", "Unsupported value: must be Namespaced or Cluster"))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(("spec.versions", "Required value"))
    if versions and sum(1 for v in versions if v.get("storage")) != 1:
        causes.append(
            ("spec.versions", "Invalid value: must have exactly one version marked as storage version")
        )
    expected = f"{names.get('plural')}.{spec.get('group')}"
    name = (crd.get("metadata") or {}).get("name")
    if not causes and name != expected:
        causes.append(("metadata.name", f'Invalid value: {name!r}: must be spec.names.plural+"."+spec.group'))
    return causes
