"""The webhook certificate's rules, pure: what is kept, re-issued or replaced, and what the caBundle becomes."""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import jsonpatch
import pytest
from cryptography import x509

from frwatch_operator.capture.webhook_certs import issue_ca
from frwatch_operator.capture.webhook_tls import (
    CA_CRT,
    CA_KEY,
    TLS_CRT,
    TLS_KEY,
    Action,
    Decision,
    Material,
    StoredSecret,
    TlsPolicy,
    assess,
    ca_bundle_patch,
    carry_out,
    certificate_names,
    dns_names,
    ensure_tls,
    material_of,
)
from frwatch_operator.config import WebhookSettings, load_config
from frwatch_operator.errors import FatalError

NOW = datetime(2030, 1, 1, tzinfo=UTC)
NAMES = dns_names("frwatch-webhook", "frwatch-system")
POLICY = TlsPolicy.of(WebhookSettings())  # 10 years, 1 year, renew 30 days before
DAY = timedelta(days=1)


def fresh(now: datetime = NOW, names: tuple[str, ...] = NAMES) -> Material:
    return carry_out(Decision(Action.CREATE, "test"), None, names, now, POLICY)


def cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def pems(bundle: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle)


def test_the_service_names_are_the_two_the_api_server_may_use() -> None:
    assert NAMES == ("frwatch-webhook.frwatch-system.svc", "frwatch-webhook.frwatch-system.svc.cluster.local")


def test_a_new_ca_signs_a_serving_certificate_for_exactly_the_service_names() -> None:
    m = fresh()
    ca, leaf = cert(m.ca_crt), cert(m.tls_crt)
    leaf.verify_directly_issued_by(ca)
    assert certificate_names(m.tls_crt) == set(NAMES)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in eku
    # lifetimes: CA 10 years, certificate 1 year, both from an hour before now (clock skew)
    assert ca.not_valid_after_utc - NOW == timedelta(days=3650)
    assert leaf.not_valid_after_utc - NOW == timedelta(days=365)
    assert ca.not_valid_before_utc == leaf.not_valid_before_utc == NOW - timedelta(hours=1)
    assert material_of(m.secret_data()) == m
    assert m.ca_bundle(NOW) == m.ca_crt


def test_no_secret_means_create_and_a_good_one_is_kept_until_its_renewal_window() -> None:
    assert assess(None, NAMES, NOW, POLICY).action is Action.CREATE
    data = fresh().secret_data()
    assert assess(data, NAMES, NOW, POLICY).action is Action.KEEP
    assert assess(data, NAMES, NOW + 334 * DAY, POLICY).action is Action.KEEP
    renew = assess(data, NAMES, NOW + 336 * DAY, POLICY)
    assert renew.action is Action.REISSUE and "renewal window" in renew.reason
    assert assess(data, NAMES, NOW + 400 * DAY, POLICY).action is Action.REISSUE  # expired: same


def test_a_reissued_certificate_keeps_the_ca_so_the_ca_bundle_does_not_change() -> None:
    old = fresh()
    later = NOW + 340 * DAY
    decision = assess(old.secret_data(), NAMES, later, POLICY)
    new = carry_out(decision, old.secret_data(), NAMES, later, POLICY)
    assert new.ca_crt == old.ca_crt and new.ca_key == old.ca_key
    assert new.tls_crt != old.tls_crt and new.tls_key != old.tls_key
    assert new.ca_bundle(later) == old.ca_bundle(later)
    cert(new.tls_crt).verify_directly_issued_by(cert(old.ca_crt))
    assert cert(new.tls_crt).not_valid_after_utc == later + 365 * DAY
    assert assess(new.secret_data(), NAMES, later, POLICY).action is Action.KEEP


def test_other_dns_names_reissue_the_certificate() -> None:
    data = fresh(names=dns_names("old-webhook", "frwatch-system")).secret_data()
    decision = assess(data, NAMES, NOW, POLICY)
    assert decision.action is Action.REISSUE and "old-webhook" in decision.reason
    assert certificate_names(carry_out(decision, data, NAMES, NOW, POLICY).tls_crt) == set(NAMES)
    extra = fresh(names=(*NAMES, "frwatch-webhook")).secret_data()  # a stale extra name goes too
    assert assess(extra, NAMES, NOW, POLICY).action is Action.REISSUE


def test_a_ca_near_its_end_is_replaced_and_stays_trusted_until_it_expires() -> None:
    old = fresh()
    # The CA is replaced once less than 365 + 30 days of it are left.
    assert assess(old.secret_data(), NAMES, NOW + (3650 - 396) * DAY, POLICY).action is not Action.REPLACE
    when = NOW + (3650 - 394) * DAY
    decision = assess(old.secret_data(), NAMES, when, POLICY)
    assert decision.action is Action.REPLACE and "CA expires" in decision.reason
    new = carry_out(decision, old.secret_data(), NAMES, when, POLICY)
    assert new.ca_crt != old.ca_crt and new.previous_ca_crt == old.ca_crt
    trusted = pems(new.ca_bundle(when))
    assert len(trusted) == 2 and trusted[1] == cert(old.ca_crt)
    assert new.ca_bundle(NOW + 3651 * DAY) == new.ca_crt  # the old CA leaves the bundle once expired
    assert material_of(new.secret_data()).previous_ca_crt == old.ca_crt


def _corrupt(how: str) -> dict[str, str]:
    good, other = fresh().secret_data(), fresh().secret_data()
    data = dict(good)
    if how == "missing tls.key":
        del data[TLS_KEY]
    elif how == "not base64":
        data[TLS_CRT] = "%%%not base64%%%"
    elif how == "not PEM":
        data[TLS_CRT] = base64.b64encode(b"hello").decode()
    elif how == "key of another certificate":
        data[TLS_KEY] = other[TLS_KEY]
    elif how == "certificate of another CA":
        data[TLS_CRT], data[TLS_KEY] = other[TLS_CRT], other[TLS_KEY]
    elif how == "CA key of another CA":
        data[CA_KEY] = other[CA_KEY]
    elif how == "a leaf as the CA":
        data[CA_CRT], data[CA_KEY] = good[TLS_CRT], good[TLS_KEY]
    return data


@pytest.mark.parametrize(
    ("how", "named"),
    [
        ("missing tls.key", "tls.key is missing"),
        ("not base64", "tls.crt is not base64"),
        ("not PEM", "tls.crt is not a PEM certificate"),
        ("key of another certificate", "tls.key does not belong to tls.crt"),
        ("certificate of another CA", "tls.crt was not issued by ca.crt"),
        ("CA key of another CA", "ca.key does not belong to ca.crt"),
        ("a leaf as the CA", "ca.crt is not a CA certificate"),
    ],
)
def test_an_unusable_secret_is_replaced_and_the_reason_names_the_key(how: str, named: str) -> None:
    data = _corrupt(how)
    decision = assess(data, NAMES, NOW, POLICY)
    assert decision.action is Action.REPLACE and named in decision.reason, decision.reason
    new = carry_out(decision, data, NAMES, NOW, POLICY)
    assert material_of(new.secret_data()) == new
    assert new.previous_ca_crt == b""  # nothing of an unusable Secret is trusted any more


def test_ca_bundle_patch_sets_every_webhook_and_is_empty_once_set() -> None:
    m = fresh()
    mwc: dict[str, Any] = {"metadata": {"name": "frwatch"}, "webhooks": [
        {"name": "inject.frwatch.io", "clientConfig": {"service": {"name": "s", "namespace": "n"}}},
        {"name": "other.frwatch.io", "clientConfig": {"caBundle": "b2xk"}},
    ]}  # fmt: skip
    ops = ca_bundle_patch(mwc, m.ca_bundle(NOW))
    assert [op["op"] for op in ops] == ["test", "add", "test", "add"]
    patched = jsonpatch.apply_patch(mwc, ops)
    want = base64.b64encode(m.ca_crt).decode()
    assert [h["clientConfig"].get("caBundle") for h in patched["webhooks"]] == [want, want]
    assert patched["webhooks"][0]["clientConfig"]["service"] == {"name": "s", "namespace": "n"}
    assert ca_bundle_patch(patched, m.ca_bundle(NOW)) == []
    reordered = copy.deepcopy(mwc)
    reordered["webhooks"].reverse()  # changed since read: the test op refuses the patch
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(reordered, ops)


class FakeStore:
    """A TlsStore in memory, whose first write or patch can lose a race to another replica."""

    def __init__(self, configuration: dict[str, Any] | None) -> None:
        self.secret: StoredSecret | None = None
        self.configuration = configuration
        self.version = 0
        self.lose_next_write: Mapping[str, str] | None = None
        self.writes: list[Mapping[str, str]] = []
        self.patches = 0

    def read_secret(self) -> StoredSecret | None:
        return self.secret

    def _store(self, data: Mapping[str, str]) -> None:
        self.version += 1
        self.secret = StoredSecret(dict(data), str(self.version))

    def write_secret(
        self, data: Mapping[str, str], stored: StoredSecret | None, owner: Mapping[str, Any] | None
    ) -> bool:
        if self.lose_next_write is not None:  # another replica wrote first
            self._store(self.lose_next_write)
            self.lose_next_write = None
        current = self.secret.resource_version if self.secret else None
        if (stored.resource_version if stored else None) != current:
            return False
        self.writes.append(data)
        self._store(data)
        return True

    def read_configuration(self) -> dict[str, Any] | None:
        return copy.deepcopy(self.configuration)

    def patch_configuration(self, ops: list[dict[str, Any]]) -> bool:
        try:
            self.configuration = jsonpatch.apply_patch(self.configuration, ops)
        except jsonpatch.JsonPatchTestFailed:
            return False
        self.patches += 1
        return True


MWC = {
    "metadata": {"name": "frwatch", "uid": "u1"},
    "webhooks": [{"name": "inject.frwatch.io", "clientConfig": {}}],
}


def test_ensure_creates_once_then_changes_nothing() -> None:
    store = FakeStore(copy.deepcopy(MWC))
    first = ensure_tls(store, NAMES, POLICY, NOW)
    assert first.decision.action is Action.CREATE and first.bundle_patched and first.configuration_found
    second = ensure_tls(store, NAMES, POLICY, NOW + DAY)
    assert second.decision.action is Action.KEEP and not second.bundle_patched
    assert second.material == first.material and len(store.writes) == 1 and store.patches == 1


def test_a_replica_that_loses_the_race_serves_the_winners_certificate() -> None:
    store = FakeStore(copy.deepcopy(MWC))
    winner = fresh()
    store.lose_next_write = winner.secret_data()
    outcome = ensure_tls(store, NAMES, POLICY, NOW)
    assert outcome.material == winner and outcome.decision.action is Action.KEEP
    assert store.writes == []
    bundle = store.configuration["webhooks"][0]["clientConfig"]["caBundle"]  # type: ignore[index]
    assert base64.b64decode(bundle) == winner.ca_crt


def test_without_the_configuration_the_secret_is_still_made_and_found_is_false() -> None:
    outcome = ensure_tls(FakeStore(None), NAMES, POLICY, NOW)
    assert outcome.decision.action is Action.CREATE and not outcome.configuration_found


def test_the_config_refuses_lifetimes_that_would_rotate_forever_or_mixed_tls_sources() -> None:
    base = {"FRWATCH_WEBHOOK_MANAGE_CERTS": "true", "FRWATCH_WEBHOOK_SERVICE_NAME": "s",
            "FRWATCH_WEBHOOK_NAMESPACE": "n"}  # fmt: skip
    assert load_config(base).webhook.manage_certs
    for extra, says in [
        ({"FRWATCH_WEBHOOK_CA_VALIDITY_DAYS": "395"}, "FRWATCH_WEBHOOK_CA_VALIDITY_DAYS must exceed"),
        (
            {"FRWATCH_WEBHOOK_CERT_RENEW_BEFORE_DAYS": "365"},
            "must be below FRWATCH_WEBHOOK_CERT_VALIDITY_DAYS",
        ),
        ({"FRWATCH_WEBHOOK_INSECURE": "true"}, "unset FRWATCH_WEBHOOK_INSECURE"),
        ({"FRWATCH_WEBHOOK_CERT_FILE": "/x"}, "FRWATCH_WEBHOOK_CERT_FILE"),
        (
            {"FRWATCH_WEBHOOK_NAMESPACE": ""},
            "needs FRWATCH_WEBHOOK_SERVICE_NAME and FRWATCH_WEBHOOK_NAMESPACE",
        ),
    ]:
        with pytest.raises(FatalError, match=says):
            load_config({**base, **extra})


def test_issue_ca_is_a_ca_for_leaf_certificates_only() -> None:
    crt, _ = issue_ca(NAMES[0], NOW, timedelta(days=10))
    bc = cert(crt).extensions.get_extension_for_class(x509.BasicConstraints).value
    assert bc.ca is True and bc.path_length == 0
