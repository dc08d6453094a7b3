"""An Incident as the verdict loop reads it: identity, spec, status, and where its evidence is. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from frwatch_analyzers.layout import RootUrl
from frwatch_operator import constants as c
from frwatch_operator.errors import FatalError
from frwatch_operator.resources import IncidentSpec, IncidentStatus


@dataclass(frozen=True)
class IncidentIdentity:
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        """``namespace/name``: how nodes and the breaker name this incident."""
        return f"{self.namespace}/{self.name}"

    def owner_reference(self) -> dict[str, Any]:
        """Makes an object a dependent of this Incident (deleted with it)."""
        return {
            "apiVersion": f"{c.GROUP}/{c.VERSION}",
            "kind": c.INCIDENT_KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def reference(self) -> dict[str, str]:
        """The Incident as an Event's involvedObject."""
        return {
            "apiVersion": f"{c.GROUP}/{c.VERSION}",
            "kind": c.INCIDENT_KIND,
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
        }


@dataclass(frozen=True)
class IncidentView:
    identity: IncidentIdentity
    spec: IncidentSpec
    status: IncidentStatus

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> IncidentView:
        """Parse an Incident object (as the API or kopf's ``body`` gives it). FatalError when malformed.
        Status fields this version does not know are ignored (a newer operator may have written them)."""
        meta = body.get("metadata") or {}
        name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
        known = set(IncidentStatus.model_fields) | {
            f.alias for f in IncidentStatus.model_fields.values() if f.alias
        }
        try:
            spec = IncidentSpec.model_validate(body.get("spec") or {})
            status = IncidentStatus.model_validate(
                {k: v for k, v in (body.get("status") or {}).items() if k in known}
            )
        except ValidationError as exc:
            raise FatalError(f"Incident {namespace}/{name}: malformed: {exc}") from exc
        return cls(IncidentIdentity(namespace, name, str(meta.get("uid", ""))), spec, status)

    @property
    def namespace(self) -> str:
        return self.identity.namespace

    @property
    def name(self) -> str:
        return self.identity.name

    @property
    def uid(self) -> str:
        return self.identity.uid

    @property
    def key(self) -> str:
        return self.identity.key


def evidence_url(storage_url: str, what: str) -> str:
    """The attempt's evidence root ``s3://bucket/root`` (no trailing slash); FatalError naming ``what``
    (the object it came from) when it is not an s3:// URL."""
    try:
        return str(RootUrl.parse(storage_url))
    except ValueError as exc:
        raise FatalError(f"{what}: spec.storageUrl: {exc}") from exc
