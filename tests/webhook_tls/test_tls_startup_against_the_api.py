"""tls.mode=operator against the API emulator over real HTTP: the start-up path
(``webhook_tls_kube.start_webhook_tls``) creates the Secret and patches the caBundle, ``webhook.serve``
answers a real HTTPS AdmissionReview verified against that caBundle with the Service's name as SNI, a
restart reuses everything, and an expiring, misnamed or garbage Secret is replaced."""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import kopf
import pytest
import urllib3
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from kubernetes import client
from kubernetes import config as kube_config
from tls_helpers import SERVICE, configuration, https_admit, job, pod

from frwatch_dev.ports import free_port
from frwatch_dev.testing.admission import patched, review
from frwatch_dev.testing.webhook_thread import WebhookThread
from frwatch_operator import constants as c
from frwatch_operator.capture.webhook_certs import issue_ca
from frwatch_operator.capture.webhook_tls import CA_CRT, TLS_CRT, certificate_names, dns_names
from frwatch_operator.config import Config, WebhookSettings
from frwatch_operator.store.webhook_cert_secret import CertKeeper, TlsKube, start_webhook_tls
from frwatch_operator.webhook import JobIndex
from frwatch_operator.webhook import review as review_fn

SECRET = "frwatch-webhook-certs"


@dataclass
class Site:
    """The release namespace in the emulator with the chart's MutatingWebhookConfiguration in it."""

    api: client.ApiClient
    namespace: str
    mwc: str
    folder: Path

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def admission(self) -> client.AdmissionregistrationV1Api:
        return client.AdmissionregistrationV1Api(self.api)

    @property
    def hostname(self) -> str:
        return f"{SERVICE}.{self.namespace}.svc"

    def settings(self, service: str = SERVICE, **more: Any) -> WebhookSettings:
        return WebhookSettings(
            addr="127.0.0.1", port=free_port(), manage_certs=True, service_name=service,
            namespace=self.namespace, certs_secret=SECRET, certs_dir=str(self.folder),
            configuration_name=self.mwc, **more,
        )  # fmt: skip

    def keeper(self, settings: WebhookSettings | None = None, at: datetime | None = None) -> CertKeeper:
        s = settings or self.settings()
        store = TlsKube(self.api, s.namespace, s.certs_secret, s.configuration_name)
        return CertKeeper(store, s, clock=(lambda: at) if at else None)

    def secret(self) -> Any:
        return self.core.read_namespaced_secret(SECRET, self.namespace)

    def secret_pem(self, key: str) -> bytes:
        return base64.b64decode(self.secret().data[key])

    def configuration(self) -> Any:
        return self.admission.read_mutating_webhook_configuration(self.mwc)

    def bundle(self) -> str:
        return str(self.configuration().webhooks[0].client_config.ca_bundle)


@pytest.fixture
def site(k8s_api: Any, k8s_namespace: str, tmp_path: Path) -> Iterator[Site]:
    api = kube_config.new_client_from_config()
    name = f"frwatch-{k8s_namespace}"
    admission = client.AdmissionregistrationV1Api(api)
    admission.create_mutating_webhook_configuration(configuration(name, k8s_namespace))
    try:
        yield Site(api, k8s_namespace, name, tmp_path / "webhook-certs")
    finally:
        admission.delete_mutating_webhook_configuration(name)
        api.close()


def serve_and_admit(site: Site, config: Config, bundle: str) -> dict[str, Any]:
    """The webhook served over TLS as ``config`` says; one real HTTPS AdmissionReview; the patched pod."""
    index = JobIndex()
    index.upsert_job(job(site.namespace))
    with WebhookThread(index, config) as server:
        assert server.url.startswith("https://")
        obj = pod(site.namespace)
        answer = https_admit(config.webhook.port, bundle, site.hostname, review(obj, site.namespace))
        return dict(patched(obj, answer))


def test_start_up_creates_the_secret_patches_the_ca_bundle_and_serves_https_the_api_server_trusts(
    site: Site,
) -> None:
    config = Config(webhook=site.settings())
    served, keeper = start_webhook_tls(config, site.api)
    keeper.stop()
    secret = site.secret()
    assert secret.type == "kubernetes.io/tls"
    assert secret.metadata.labels == {c.LABEL_MANAGED_BY: "frwatch", c.LABEL_COMPONENT: "webhook-tls"}
    mwc = site.configuration()
    [owner] = secret.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid) == ("MutatingWebhookConfiguration", site.mwc, mwc.metadata.uid)
    assert base64.b64decode(site.bundle()) == site.secret_pem(CA_CRT)
    assert certificate_names(site.secret_pem(TLS_CRT)) == set(dns_names(SERVICE, site.namespace))
    # The served file: certificate and key together, owner-only.
    served_file = Path(str(served.webhook.cert_file))
    assert served_file == site.folder / "tls.pem" and served.webhook.key_file == str(served_file)
    assert served_file.stat().st_mode & 0o777 == 0o600
    assert served_file.read_bytes().startswith(site.secret_pem(TLS_CRT))

    injected = serve_and_admit(site, served, site.bundle())
    assert injected["metadata"]["annotations"][c.ANN_INJECTED]
    assert any(ctr["name"] != "pytorch" for ctr in injected["spec"].get("initContainers", []))


def test_the_https_check_is_real_unknown_ca_or_other_name_is_refused(site: Site) -> None:
    served, keeper = start_webhook_tls(Config(webhook=site.settings()), site.api)
    keeper.stop()
    index = JobIndex()
    with WebhookThread(index, served):
        body = review(pod(site.namespace), site.namespace)
        assert https_admit(served.webhook.port, site.bundle(), site.hostname, body)["allowed"]
        alt = f"{SERVICE}.{site.namespace}.svc.cluster.local"
        assert https_admit(served.webhook.port, site.bundle(), alt, body)["allowed"]
        with pytest.raises(urllib3.exceptions.SSLError, match=r"(?i)hostname|match"):
            https_admit(served.webhook.port, site.bundle(), f"{SERVICE}.elsewhere.svc", body)
        stranger = base64.b64encode(_a_different_ca()).decode()
        with pytest.raises(urllib3.exceptions.SSLError, match=r"(?i)verify"):
            https_admit(served.webhook.port, stranger, site.hostname, body)


def _a_different_ca() -> bytes:
    return issue_ca("someone-else", datetime.now(UTC), timedelta(days=10))[0]


def test_a_restart_reuses_the_same_secret_and_changes_nothing(site: Site) -> None:
    first, keeper = start_webhook_tls(Config(webhook=site.settings()), site.api)
    keeper.stop()
    secret, mwc = site.secret(), site.configuration()
    pem = Path(str(first.webhook.cert_file)).read_bytes()
    again, keeper = start_webhook_tls(Config(webhook=site.settings()), site.api)  # a restarted operator
    keeper.stop()
    assert site.secret().metadata.resource_version == secret.metadata.resource_version
    assert site.secret().data == secret.data
    assert site.configuration().metadata.resource_version == mwc.metadata.resource_version
    assert Path(str(again.webhook.cert_file)).read_bytes() == pem
    assert serve_and_admit(site, again, site.bundle())["metadata"]["annotations"][c.ANN_INJECTED]


def test_a_certificate_near_expiry_is_reissued_by_the_same_ca_and_the_bundle_stays(site: Site) -> None:
    now = datetime.now(UTC)
    site.keeper(at=now).run_once()
    ca, bundle, leaf = site.secret_pem(CA_CRT), site.bundle(), site.secret_pem(TLS_CRT)
    mwc_version = site.configuration().metadata.resource_version
    outcome, path = site.keeper(at=now + timedelta(days=340)).run_once()  # 25 days left: inside the window
    assert outcome.decision.action.value == "reissue"
    assert site.secret_pem(CA_CRT) == ca and site.secret_pem(TLS_CRT) != leaf
    assert site.bundle() == bundle and site.configuration().metadata.resource_version == mwc_version
    new_leaf = x509.load_pem_x509_certificate(site.secret_pem(TLS_CRT))
    assert new_leaf.not_valid_after_utc > now + timedelta(days=700)
    assert path.read_bytes().startswith(site.secret_pem(TLS_CRT))


def test_an_expired_certificate_is_reissued_and_served(site: Site) -> None:
    long_ago = datetime.now(UTC) - timedelta(days=400)
    site.keeper(at=long_ago).run_once()  # made 400 days ago: expired 35 days ago
    expired = x509.load_pem_x509_certificate(site.secret_pem(TLS_CRT))
    assert expired.not_valid_after_utc < datetime.now(UTC)
    served, keeper = start_webhook_tls(Config(webhook=site.settings()), site.api)
    keeper.stop()
    fresh = x509.load_pem_x509_certificate(site.secret_pem(TLS_CRT))
    assert fresh.not_valid_after_utc > datetime.now(UTC) + timedelta(days=300)
    assert serve_and_admit(site, served, site.bundle())["metadata"]["annotations"][c.ANN_INJECTED]


def test_a_certificate_for_other_dns_names_is_reissued(site: Site) -> None:
    site.keeper(site.settings(service="old-webhook")).run_once()
    assert certificate_names(site.secret_pem(TLS_CRT)) == set(dns_names("old-webhook", site.namespace))
    ca = site.secret_pem(CA_CRT)
    served, keeper = start_webhook_tls(Config(webhook=site.settings()), site.api)
    keeper.stop()
    assert certificate_names(site.secret_pem(TLS_CRT)) == set(dns_names(SERVICE, site.namespace))
    assert site.secret_pem(CA_CRT) == ca
    assert serve_and_admit(site, served, site.bundle())["metadata"]["annotations"][c.ANN_INJECTED]


def test_a_ca_near_its_end_is_replaced_and_both_cas_are_trusted_meanwhile(site: Site) -> None:
    now = datetime.now(UTC)
    site.keeper(at=now - timedelta(days=3650 - 300)).run_once()  # a CA with 300 days left
    old_ca = site.secret_pem(CA_CRT)
    outcome, _ = site.keeper().run_once()
    assert outcome.decision.action.value == "replace" and outcome.bundle_patched
    trusted = x509.load_pem_x509_certificates(base64.b64decode(site.bundle()))
    assert [t.public_bytes(Encoding.PEM) for t in trusted] == [site.secret_pem(CA_CRT), old_ca]


def test_a_garbage_secret_is_replaced_with_a_log_line_naming_what_was_wrong(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    site.core.create_namespaced_secret(site.namespace, {
        "metadata": {"name": SECRET}, "type": "Opaque",
        "data": {"tls.crt": base64.b64encode(b"not a certificate").decode(), "tls.key": "",
                 "ca.crt": base64.b64encode(b"junk").decode(), "ca.key": base64.b64encode(b"junk").decode()},
    })  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="frwatch_operator.store.webhook_cert_secret"):
        served, keeper = start_webhook_tls(Config(webhook=site.settings()), site.api)
    keeper.stop()
    [line] = [r.getMessage() for r in caplog.records if "replaced" in r.getMessage()]
    assert f"Secret {site.namespace}/{SECRET}" in line and "unusable" in line and "tls.key is missing" in line
    secret = site.secret()
    assert secret.type == "Opaque"  # a Secret's type is immutable: the replacement keeps it
    assert base64.b64decode(site.bundle()) == site.secret_pem(CA_CRT)
    assert serve_and_admit(site, served, site.bundle())["metadata"]["annotations"][c.ANN_INJECTED]


def test_without_its_configuration_the_operator_still_serves_and_patches_it_once_it_exists(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    site.admission.delete_mutating_webhook_configuration(site.mwc)
    with caplog.at_level(logging.WARNING, logger="frwatch_operator.store.webhook_cert_secret"):
        outcome, _ = site.keeper().run_once()
    assert not outcome.configuration_found
    assert any("not found" in r.getMessage() for r in caplog.records)
    assert not site.secret().metadata.owner_references
    site.admission.create_mutating_webhook_configuration(configuration(site.mwc, site.namespace))
    outcome, _ = site.keeper().run_once()
    assert outcome.bundle_patched and base64.b64decode(site.bundle()) == site.secret_pem(CA_CRT)


def test_the_keeper_thread_renews_and_the_server_reloads_the_new_certificate(site: Site) -> None:
    """A rotation while serving: the keeper rewrites tls.pem, kopf's server (its file check, here 0.2 s
    instead of 60 s) restarts its listener with it, and the bundle still verifies it."""
    clock = [datetime.now(UTC) - timedelta(days=340)]  # made 340 days ago: 25 days left, still served
    settings = site.settings(certs_check_seconds=0.2)
    keeper = site.keeper(settings)
    keeper.clock = lambda: clock[0]
    _, path = keeper.run_once()
    server = kopf.WebhookServer(addr="127.0.0.1", port=settings.port, certfile=path, pkeyfile=path)
    server.file_check_interval = 0.2
    index = JobIndex()
    config = Config(webhook=settings.model_copy(update={"cert_file": str(path), "key_file": str(path)}))

    def served_serial() -> int:
        """The serial of the certificate served now (verified against the caBundle, by the Service's name)."""
        context = ssl.create_default_context(cadata=base64.b64decode(site.bundle()).decode())
        with (
            socket.create_connection(("127.0.0.1", settings.port), 5) as raw,
            context.wrap_socket(raw, server_hostname=site.hostname) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return int(x509.load_der_x509_certificate(der).serial_number)

    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    up = threading.Event()

    async def run() -> None:
        async def fn(request: Any, **_: Any) -> Any:
            return await review_fn(request, index, config)

        async with server:
            configs = server(fn)
            await configs.__anext__()
            up.set()
            task = asyncio.ensure_future(configs.__anext__())
            await stop.wait()
            task.cancel()
            await cast(Any, configs).aclose()

    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    try:
        assert up.wait(10)
        before = served_serial()
        assert before == x509.load_pem_x509_certificate(site.secret_pem(TLS_CRT)).serial_number
        clock[0] = datetime.now(UTC)  # inside the renewal window: the keeper re-issues at its next check
        keeper.start()
        deadline = time.monotonic() + 10
        after = before
        errors: list[Exception] = []
        while time.monotonic() < deadline and after == before:
            time.sleep(0.2)
            try:
                after = served_serial()
            except (ssl.SSLError, OSError, urllib3.exceptions.HTTPError) as exc:
                errors.append(exc)
                continue  # the listener is restarting
        assert after != before, errors[-3:]
        assert after == x509.load_pem_x509_certificate(site.secret_pem(TLS_CRT)).serial_number
    finally:
        keeper.stop()
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
