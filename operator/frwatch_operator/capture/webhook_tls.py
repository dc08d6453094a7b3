"""The webhook's own CA and serving certificate (``webhook.tls.mode=operator``): what to keep, what to make.

Pure apart from key generation (``cryptography``): no Kubernetes, no files. The adapter
(:mod:`frwatch_operator.store.webhook_cert_secret`) reads and writes the Secret, patches the
MutatingWebhookConfiguration's ``caBundle`` and writes the file the webhook server loads; this module
decides.

Lifetimes and rotation (:class:`TlsPolicy`, from ``config.webhook``):

* the CA lives ``ca_validity_days`` (10 years); the serving certificate ``cert_validity_days`` (1 year),
  both ECDSA P-256, both valid from one hour before they are made (clock skew);
* the serving certificate is re-issued by the same CA once less than ``cert_renew_before_days`` (30) of
  it is left, or when its DNS names are not exactly the Service's (``<svc>.<ns>.svc``,
  ``<svc>.<ns>.svc.cluster.local``): the ``caBundle`` does not change, so no request ever fails;
* the CA is replaced once it would expire before a certificate issued now reaches its own renewal
  (less than ``cert_validity_days + cert_renew_before_days`` left): the old CA stays in the bundle
  (``ca-previous.crt``) while it is valid, so replicas still serving the old certificate are trusted
  until they load the new one;
* a Secret that cannot be used (a key missing, not base64, not PEM, a key that does not match its
  certificate, a certificate its CA did not sign, a CA that is no CA) is replaced, CA and all.

Making the keys and certificates is :mod:`frwatch_operator.capture.webhook_certs`.

The Secret (type ``kubernetes.io/tls``) holds ``tls.crt``, ``tls.key``, ``ca.crt``, ``ca.key`` and,
after a CA rotation, ``ca-previous.crt``.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from frwatch_operator import constants as c
from frwatch_operator.capture.webhook_certs import issue_ca, issue_certificate
from frwatch_operator.config import WebhookSettings
from frwatch_operator.errors import RetryableError
from frwatch_operator.times import rfc3339

#: Keys of the Secret's data.
TLS_CRT, TLS_KEY, CA_CRT, CA_KEY, CA_PREVIOUS = "tls.crt", "tls.key", "ca.crt", "ca.key", "ca-previous.crt"
REQUIRED_KEYS = (CA_CRT, CA_KEY, TLS_CRT, TLS_KEY)
SECRET_TYPE = "kubernetes.io/tls"  # noqa: S105 - a Secret type, not a password


@dataclass(frozen=True)
class TlsPolicy:
    """How long the CA and the serving certificate live and when they are renewed."""

    ca_validity: timedelta
    cert_validity: timedelta
    renew_before: timedelta

    @classmethod
    def of(cls, w: WebhookSettings) -> TlsPolicy:
        return cls(
            timedelta(days=w.ca_validity_days),
            timedelta(days=w.cert_validity_days),
            timedelta(days=w.cert_renew_before_days),
        )

    @property
    def ca_rotate_before(self) -> timedelta:
        """A CA with less than this left is replaced: a certificate issued now must reach its own renewal."""
        return self.cert_validity + self.renew_before


def dns_names(service: str, namespace: str) -> tuple[str, ...]:
    """The names the API server may use for the webhook Service (it verifies ``<svc>.<ns>.svc``)."""
    return (f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")


class Unusable(Exception):
    """The stored Secret cannot be used as it is; the message says which key and why."""


@dataclass(frozen=True)
class Material:
    """The CA and the serving certificate, PEM."""

    ca_crt: bytes
    ca_key: bytes
    tls_crt: bytes
    tls_key: bytes
    previous_ca_crt: bytes = b""

    def secret_data(self) -> dict[str, str]:
        """The Secret's ``data`` (base64 values)."""
        data = {CA_CRT: self.ca_crt, CA_KEY: self.ca_key, TLS_CRT: self.tls_crt, TLS_KEY: self.tls_key}
        if self.previous_ca_crt:
            data[CA_PREVIOUS] = self.previous_ca_crt
        return {k: base64.b64encode(v).decode("ascii") for k, v in data.items()}

    def ca_bundle(self, now: datetime) -> bytes:
        """What the API server must trust: the CA, and the previous CA while it is still valid."""
        bundle = self.ca_crt
        if self.previous_ca_crt:
            try:
                previous = x509.load_pem_x509_certificate(self.previous_ca_crt)
            except ValueError:
                return bundle
            if previous.not_valid_after_utc > now:
                bundle += self.previous_ca_crt
        return bundle

    def server_pem(self) -> bytes:
        """Certificate then key, one file: the webhook server loads both from it (``ssl.load_cert_chain``),
        so a rotation replaces them together."""
        return self.tls_crt + self.tls_key

    def fingerprint(self) -> str:
        """A short digest of the serving certificate (for logs)."""
        return hashlib.sha256(self.tls_crt).hexdigest()[:12]


# --- reading what is stored --------------------------------------------------------------------------------


def material_of(data: Mapping[str, str] | None) -> Material:
    """The Secret's ``data`` decoded and checked for consistency (not for expiry or names).

    Raises :class:`Unusable` naming the key and what is wrong with it."""
    data = data or {}
    raw: dict[str, bytes] = {}
    for key in (*REQUIRED_KEYS, CA_PREVIOUS):
        value = data.get(key)
        if not value:
            if key in REQUIRED_KEYS:
                raise Unusable(f"{key} is missing")
            continue
        try:
            raw[key] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise Unusable(f"{key} is not base64 ({exc})") from exc
    material = Material(raw[CA_CRT], raw[CA_KEY], raw[TLS_CRT], raw[TLS_KEY], raw.get(CA_PREVIOUS, b""))
    ca, ca_key = _certificate(material.ca_crt, CA_CRT), _key(material.ca_key, CA_KEY)
    cert, cert_key = _certificate(material.tls_crt, TLS_CRT), _key(material.tls_key, TLS_KEY)
    if not _is_ca(ca):
        raise Unusable(f"{CA_CRT} is not a CA certificate (basicConstraints ca=false)")
    if not _same_key(ca, ca_key):
        raise Unusable(f"{CA_KEY} does not belong to {CA_CRT}")
    if not _same_key(cert, cert_key):
        raise Unusable(f"{TLS_KEY} does not belong to {TLS_CRT}")
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as exc:
        raise Unusable(f"{TLS_CRT} was not issued by {CA_CRT} ({type(exc).__name__})") from exc
    return material


def _certificate(pem: bytes, key: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise Unusable(f"{key} is not a PEM certificate ({exc})") from exc


def _key(pem: bytes, key: str) -> ec.EllipticCurvePrivateKey:
    try:
        loaded = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise Unusable(f"{key} is not an unencrypted PEM private key ({exc})") from exc
    if not isinstance(loaded, ec.EllipticCurvePrivateKey):
        raise Unusable(f"{key} is a {type(loaded).__name__}, not an ECDSA key")
    return loaded


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _same_key(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bool:
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt)


def certificate_names(pem: bytes) -> set[str]:
    """The DNS names (subjectAltName) of a PEM certificate."""
    cert = x509.load_pem_x509_certificate(pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return set(san.get_values_for_type(x509.DNSName))


# --- deciding -------------------------------------------------------------------------------------------


class Action(enum.Enum):
    KEEP = "keep"  #: the stored certificate serves as it is
    CREATE = "create"  #: no Secret yet: a new CA and certificate
    REISSUE = "reissue"  #: a new serving certificate from the stored CA (the caBundle stays)
    REPLACE = "replace"  #: a new CA and certificate (the stored ones are unusable or the CA is ending)


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str


def assess(
    data: Mapping[str, str] | None, names: tuple[str, ...], now: datetime, policy: TlsPolicy
) -> Decision:
    """Whether the stored Secret's ``data`` (None: no Secret) serves ``names`` at ``now``, and if not,
    what to make instead. Never raises."""
    if data is None:
        return Decision(Action.CREATE, "no Secret yet")
    try:
        material = material_of(data)
    except Unusable as exc:
        return Decision(Action.REPLACE, f"the stored Secret is unusable: {exc}")
    ca = x509.load_pem_x509_certificate(material.ca_crt)
    cert = x509.load_pem_x509_certificate(material.tls_crt)
    if ca.not_valid_before_utc > now:
        return Decision(Action.REPLACE, f"the CA is not valid before {_at(ca.not_valid_before_utc)}")
    if ca.not_valid_after_utc - now < policy.ca_rotate_before:
        return Decision(
            Action.REPLACE,
            f"the CA expires at {_at(ca.not_valid_after_utc)}, less than {policy.ca_rotate_before.days} days "
            "from now (a new CA; the old one stays in the caBundle while it is valid)",
        )
    have, want = certificate_names(material.tls_crt), set(names)
    if have != want:
        return Decision(
            Action.REISSUE, f"the certificate names {sorted(have)}, the webhook Service is {sorted(want)}"
        )
    if cert.not_valid_before_utc > now:
        return Decision(
            Action.REISSUE, f"the certificate is not valid before {_at(cert.not_valid_before_utc)}"
        )
    if cert.not_valid_after_utc - now < policy.renew_before:
        return Decision(
            Action.REISSUE,
            f"the certificate expires at {_at(cert.not_valid_after_utc)}, within {policy.renew_before.days} "
            "days (renewal window)",
        )
    return Decision(Action.KEEP, f"the certificate is valid until {_at(cert.not_valid_after_utc)}")


def _at(when: datetime) -> str:
    return rfc3339(when)


def carry_out(
    decision: Decision,
    data: Mapping[str, str] | None,
    names: tuple[str, ...],
    now: datetime,
    policy: TlsPolicy,
) -> Material:
    """The material ``decision`` asks for: the stored one (KEEP), a certificate from the stored CA
    (REISSUE), or a new CA and certificate (CREATE, REPLACE; the old CA kept as previous while valid)."""
    if decision.action is Action.KEEP:
        return material_of(data)
    if decision.action is Action.REISSUE:
        stored = material_of(data)
        ca_key = _key(stored.ca_key, CA_KEY)
        ca = x509.load_pem_x509_certificate(stored.ca_crt)
        crt, key = issue_certificate(ca, ca_key, names, now, policy.cert_validity)
        return Material(stored.ca_crt, stored.ca_key, crt, key, stored.previous_ca_crt)
    previous = b""
    if decision.action is Action.REPLACE:
        try:
            old = material_of(data)
        except Unusable:
            pass
        else:
            if x509.load_pem_x509_certificate(old.ca_crt).not_valid_after_utc > now:
                previous = old.ca_crt
    ca_crt, ca_key_pem = issue_ca(names[0], now, policy.ca_validity)
    ca = x509.load_pem_x509_certificate(ca_crt)
    crt, key = issue_certificate(ca, _key(ca_key_pem, CA_KEY), names, now, policy.cert_validity)
    return Material(ca_crt, ca_key_pem, crt, key, previous)


# --- the MutatingWebhookConfiguration ---------------------------------------------------------------------


def ca_bundle_patch(configuration: Mapping[str, Any], bundle: bytes) -> list[dict[str, Any]]:
    """RFC 6902 ops that set every webhook's ``clientConfig.caBundle`` of ``configuration`` to ``bundle``
    ([] when all already have it). Each change is guarded by a ``test`` of the webhook's name at its
    index, so a configuration changed since it was read is refused (422) instead of patched wrongly."""
    want = base64.b64encode(bundle).decode("ascii")
    ops: list[dict[str, Any]] = []
    for i, hook in enumerate(configuration.get("webhooks") or []):
        client_config = hook.get("clientConfig") or {}
        if client_config.get("caBundle") == want:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": hook.get("name")})
        if "clientConfig" in hook:
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": want})
        else:
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig", "value": {"caBundle": want}})
    return ops


def owner_reference(configuration: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The Secret is owned by the MutatingWebhookConfiguration (a namespaced dependent of a cluster-scoped
    owner): uninstalling the chart garbage-collects it. No blockOwnerDeletion (it would need more RBAC)."""
    meta = (configuration or {}).get("metadata") or {}
    if not meta.get("uid"):
        return None
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "name": str(meta.get("name") or ""), "uid": str(meta["uid"]),
    }  # fmt: skip


def secret_labels() -> dict[str, str]:
    return {c.LABEL_MANAGED_BY: c.EVENT_COMPONENT, c.LABEL_COMPONENT: "webhook-tls"}


# --- one pass: the Secret, then the caBundle --------------------------------------------------------------


@dataclass(frozen=True)
class StoredSecret:
    """The Secret as read: its data (base64 values), resourceVersion (for a conditional replace) and type."""

    data: Mapping[str, str]
    resource_version: str
    type: str = SECRET_TYPE


class TlsStore(Protocol):
    """What :func:`ensure_tls` needs from the cluster (``webhook_tls_kube.TlsKube``; a fake in unit tests)."""

    def read_secret(self) -> StoredSecret | None: ...

    def write_secret(
        self, data: Mapping[str, str], stored: StoredSecret | None, owner: Mapping[str, Any] | None
    ) -> bool:
        """Create the Secret (``stored`` None) or replace it if unchanged since read; False on a conflict."""
        ...

    def read_configuration(self) -> Mapping[str, Any] | None: ...

    def patch_configuration(self, ops: list[dict[str, Any]]) -> bool:
        """Apply RFC 6902 ``ops``; False when a ``test`` failed (changed since read)."""
        ...


@dataclass(frozen=True)
class Outcome:
    material: Material
    decision: Decision
    #: The caBundle was changed by this pass.
    bundle_patched: bool
    #: The MutatingWebhookConfiguration exists (absent: the API server does not call the webhook).
    configuration_found: bool


def ensure_tls(
    store: TlsStore, names: tuple[str, ...], policy: TlsPolicy, now: datetime, attempts: int = 3
) -> Outcome:
    """Make the stored Secret serve ``names`` (keep, re-issue or replace it, once, whoever wins a race with
    another replica), then make the configuration trust it. Idempotent: a second pass changes nothing.

    Raises :class:`RetryableError` when the Secret or the configuration kept changing under it."""
    configuration = store.read_configuration()
    for _ in range(attempts):
        stored = store.read_secret()
        data = stored.data if stored is not None else None
        decision = assess(data, names, now, policy)
        material = carry_out(decision, data, names, now, policy)
        if decision.action is Action.KEEP:
            break
        if store.write_secret(material.secret_data(), stored, owner_reference(configuration)):
            break
    else:
        raise RetryableError(f"the webhook's certificate Secret changed {attempts} times while being renewed")
    found = configuration is not None
    for _ in range(attempts):
        if configuration is None:
            return Outcome(material, decision, False, found)
        ops = ca_bundle_patch(configuration, material.ca_bundle(now))
        if not ops:
            return Outcome(material, decision, False, True)
        if store.patch_configuration(ops):
            return Outcome(material, decision, True, True)
        configuration = store.read_configuration()
    raise RetryableError(
        f"the MutatingWebhookConfiguration changed {attempts} times while its caBundle was set"
    )
