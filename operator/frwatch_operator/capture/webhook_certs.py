"""Making the webhook's keys and certificates (ECDSA P-256, SHA-256): a self-signed CA that signs leaf
certificates only, and a serving certificate for the Service's DNS names that never outlives its CA.
Pure apart from key generation (``cryptography``); what to keep and when to make which is
:mod:`frwatch_operator.capture.webhook_tls`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Certificates start this long before they are made, so a node whose clock runs behind accepts them.
BACKDATE = timedelta(hours=1)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _key_usage(*, signs: bool) -> x509.KeyUsage:
    """Digital signatures; and, for a CA (``signs``), signing certificates and CRLs. Nothing else."""
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
        key_agreement=False, key_cert_sign=signs, crl_sign=signs, encipher_only=False, decipher_only=False,
    )  # fmt: skip


def issue_ca(service_name: str, now: datetime, validity: timedelta) -> tuple[bytes, bytes]:
    """A self-signed CA for the webhook (certificate PEM, key PEM); it can sign leaf certificates only."""
    key = _new_key()
    name = x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "frwatch"),
        x509.NameAttribute(NameOID.COMMON_NAME, f"frwatch webhook CA ({service_name})"[:64]),
    ])  # fmt: skip
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs=True), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue_certificate(
    ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, names: tuple[str, ...], now: datetime,
    validity: timedelta,
) -> tuple[bytes, bytes]:  # fmt: skip
    """A serving certificate for ``names`` signed by ``ca`` (certificate PEM, key PEM); it never outlives
    its CA."""
    key = _new_key()
    not_after = min(now + validity, ca.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0][:64])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)
