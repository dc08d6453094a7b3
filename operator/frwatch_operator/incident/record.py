"""An Incident as typed data: :class:`Incident` is the one view of an Incident object that the phases
(:mod:`frwatch_operator.handlers.incident_phases`) and the verdict loop read; :class:`IncidentIdentity` is
how other objects point at it (owner reference, Event's involvedObject, ``namespace/name``). Pure.

:meth:`Incident.of` parses what every reader needs (identity, spec, status; status fields this version does
not know are ignored, a newer operator may have written them). What only driving it needs (its job kind,
its bucket and attempt key, which must be this attempt's) is checked when first read, or all at once by
:meth:`Incident.checked`: a FatalError that says what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from frwatch_analyzers.store.layout import AttemptKey, RootUrl
from frwatch_operator import constants as c
from frwatch_operator.errors import FatalError
from frwatch_operator.incident.naming import valid_attempt
from frwatch_operator.kinds.job_kind import JobKind, kind_of
from frwatch_operator.notices import ObjectRef
from frwatch_operator.resources import IncidentSpec, IncidentStatus

#: The status fields (and their wire aliases) this version reads.
_KNOWN_STATUS = set(IncidentStatus.model_fields) | {
    f.alias for f in IncidentStatus.model_fields.values() if f.alias
}


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
class Incident:
    """One Incident object, typed."""

    identity: IncidentIdentity
    created: str  #: metadata.creationTimestamp, as written
    spec: IncidentSpec
    status: IncidentStatus

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> Incident:
        """Parse an Incident object (as the API or kopf's ``body`` gives it). FatalError when malformed."""
        meta = body.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        try:
            spec = IncidentSpec.model_validate(body.get("spec") or {})
            status = IncidentStatus.model_validate(
                {k: v for k, v in (body.get("status") or {}).items() if k in _KNOWN_STATUS}
            )
        except ValidationError as exc:
            raise FatalError(f"Incident {ns}/{name} is malformed: {exc.errors()[0]['msg']}") from exc
        identity = IncidentIdentity(ns, name, str(meta.get("uid") or ""))
        return cls(identity, str(meta.get("creationTimestamp") or ""), spec, status)

    def checked(self) -> Incident:
        """This Incident, once everything driving it needs is checked (FatalError: what is wrong)."""
        _ = self.kind, self.attempt_key
        return self

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
        """``namespace/name``."""
        return self.identity.key

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(f"{c.GROUP}/{c.VERSION}", c.INCIDENT_KIND, self.namespace, self.name, self.uid)

    @property
    def job_ref(self) -> ObjectRef:
        j = self.spec.job_ref
        return ObjectRef(j.api_version, j.kind, self.namespace, j.name, j.uid)

    @cached_property
    def kind(self) -> JobKind:
        """The job's kind: it decides every job-specific call."""
        kind = kind_of(self.spec.job_ref.kind)
        if kind is None:
            raise FatalError(f"Incident {self.key}: job kind {self.spec.job_ref.kind!r} is not supported")
        return kind

    @cached_property
    def _root(self) -> RootUrl:
        try:
            return RootUrl.parse(self.spec.storage_url)
        except ValueError as exc:
            raise FatalError(f"Incident {self.key}: spec.storageUrl: {exc}") from exc

    @property
    def bucket(self) -> str:
        return self._root.bucket

    @cached_property
    def attempt_key(self) -> AttemptKey:
        """Where this attempt's evidence is (its storage URL, checked to be this attempt's own root)."""
        spec = self.spec
        if not valid_attempt(spec.attempt):
            raise FatalError(f"Incident {self.key}: spec.attempt {spec.attempt[:32]!r} is not a decimal number")
        try:
            key = self._root.attempt()
        except ValueError as exc:
            raise FatalError(f"Incident {self.key}: spec.storageUrl: {exc}") from exc
        if key != AttemptKey(key.prefix, self.namespace, spec.job_ref.name, spec.job_ref.uid, spec.attempt):
            raise FatalError(f"Incident {self.key}: spec.storageUrl {spec.storage_url} is not this attempt's root")
        return key


def evidence_url(storage_url: str, what: str) -> str:
    """The attempt's evidence root ``s3://bucket/root`` (no trailing slash); FatalError naming ``what``
    (the object it came from) when it is not an s3:// URL."""
    try:
        return str(RootUrl.parse(storage_url))
    except ValueError as exc:
        raise FatalError(f"{what}: spec.storageUrl: {exc}") from exc
