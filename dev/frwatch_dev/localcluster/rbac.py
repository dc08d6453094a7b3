"""RBAC as the API server's authorizer applies it, for checking an audit log against rendered rules.

Pure: manifests (dicts, e.g. the chart's rendered ClusterRole/Role and bindings) and
:class:`~frwatch_dev.localcluster.audit.AuditEntry` records in, a :class:`Coverage` out:

* ``denied``: calls no rule bound to the service account allows (the operator would get a 403);
* ``unused``: (rule, verb, group, resource) grants no call used (more than the code needs).

Only the rules bound to one service account count: a ClusterRoleBinding grants its ClusterRole in every
namespace; a RoleBinding grants its Role (or ClusterRole) in the binding's namespace only. Discovery URLs
(``/api``, ``/apis``, ``/version`` ...) are granted to every authenticated user by ``system:discovery``
and need no rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from frwatch_dev.localcluster.audit import AuditEntry

#: Non-resource URLs every authenticated user may GET (the system:discovery / system:public-info-viewer roles).
DISCOVERY_PREFIXES = ("/api", "/apis", "/version", "/healthz", "/livez", "/readyz", "/openapi")


@dataclass(frozen=True)
class Grant:
    """One PolicyRule as bound to the subject: where it applies (``namespace`` None: everywhere)."""

    source: str  #: e.g. "ClusterRole/frwatch rule 3"
    namespace: str | None
    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    resource_names: frozenset[str] = field(default_factory=frozenset)

    def allows(self, entry: AuditEntry) -> bool:
        if entry.non_resource_url:
            return False
        if self.namespace is not None and entry.namespace != self.namespace:
            return False
        return (
            _match(self.api_groups, entry.api_group)
            and _match(self.resources, entry.resource_path)
            and _match(self.verbs, entry.verb)
            and (not self.resource_names or entry.name in self.resource_names)
        )

    def triples(self) -> set[tuple[str, str, str]]:
        """(verb, group, resource) this grant names (for the unused report)."""
        return {(v, g, r) for v in self.verbs for g in self.api_groups for r in self.resources}


def _match(allowed: frozenset[str], value: str) -> bool:
    return "*" in allowed or value in allowed


@dataclass(frozen=True)
class Coverage:
    denied: list[AuditEntry]
    unused: list[tuple[str, str, str, str]]  #: (source, verb, group, resource)
    wildcards: list[str]  #: sources of rules with "*" anywhere

    @property
    def exact(self) -> bool:
        return not self.denied and not self.unused and not self.wildcards

    def explain(self) -> str:
        lines = []
        for e in self.denied:
            where = f"namespace {e.namespace}" if e.namespace else "cluster-wide"
            lines.append(
                f"DENIED: {e.verb} {e.api_group or 'core'}/{e.resource_path}"
                f"{' ' + e.name if e.name else ''} ({where}) by {e.user_agent or e.user}"
            )
        lines += [f"UNUSED: {src}: {verb} {grp or 'core'}/{res}" for src, verb, grp, res in self.unused]
        lines += [f"WILDCARD: {src}" for src in self.wildcards]
        return "\n".join(lines) or "exact: every call allowed, every grant used, no wildcards"


def _subject_matches(subjects: Iterable[Mapping[str, Any]], sa: str, sa_namespace: str) -> bool:
    return any(
        s.get("kind") == "ServiceAccount"
        and s.get("name") == sa
        and s.get("namespace", sa_namespace) == sa_namespace
        for s in subjects
    )


def grants_for(manifests: Sequence[Mapping[str, Any]], service_account: str, namespace: str) -> list[Grant]:
    """The rules of ``manifests`` bound to ``system:serviceaccount:<namespace>:<service_account>``."""
    roles: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for doc in manifests:
        if doc.get("kind") in ("ClusterRole", "Role"):
            meta = doc.get("metadata") or {}
            ns = meta.get("namespace", "") if doc["kind"] == "Role" else ""
            roles[(doc["kind"], ns, meta.get("name", ""))] = list(doc.get("rules") or [])
    grants: list[Grant] = []
    for doc in manifests:
        kind = doc.get("kind")
        if kind not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not _subject_matches(doc.get("subjects") or [], service_account, namespace):
            continue
        ref = doc.get("roleRef") or {}
        binding_ns = (doc.get("metadata") or {}).get("namespace", "") if kind == "RoleBinding" else ""
        role_ns = binding_ns if ref.get("kind") == "Role" else ""
        rules = roles.get((str(ref.get("kind")), role_ns, str(ref.get("name"))))
        if rules is None:
            raise ValueError(
                f"{kind} {doc.get('metadata', {}).get('name')}: {ref.get('kind')} {ref.get('name')} is not in the manifests"
            )
        for i, rule in enumerate(rules):
            grants.append(
                Grant(
                    source=f"{ref.get('kind')}/{ref.get('name')} rule {i}",
                    namespace=binding_ns or None,
                    api_groups=frozenset(rule.get("apiGroups") or []),
                    resources=frozenset(rule.get("resources") or []),
                    verbs=frozenset(rule.get("verbs") or []),
                    resource_names=frozenset(rule.get("resourceNames") or []),
                )
            )
    return grants


def check(entries: Iterable[AuditEntry], grants: Sequence[Grant]) -> Coverage:
    """Which calls the grants deny, which grants no call used, and which grants use wildcards."""
    denied: list[AuditEntry] = []
    used: set[tuple[str, str, str, str]] = set()
    seen_denied: set[tuple[str, str, str, str, str]] = set()
    for entry in entries:
        if entry.non_resource_url:
            if entry.non_resource_url.startswith(DISCOVERY_PREFIXES):
                continue
            key = (entry.verb, "", entry.non_resource_url, "", "")
        else:
            key = (entry.verb, entry.api_group, entry.resource_path, entry.namespace, entry.name)
        allowing = [g for g in grants if g.allows(entry)]
        if not allowing:
            if key not in seen_denied:
                seen_denied.add(key)
                denied.append(entry)
            continue
        for g in allowing:
            used.add((g.source, entry.verb, entry.api_group, entry.resource_path))
    unused = sorted(
        (g.source, v, grp, res)
        for g in grants
        for v, grp, res in g.triples()
        if (g.source, v, grp, res) not in used and "*" not in (v, grp, res)
    )
    wildcards = sorted({g.source for g in grants if "*" in g.verbs | g.api_groups | g.resources})
    return Coverage(denied, unused, wildcards)
