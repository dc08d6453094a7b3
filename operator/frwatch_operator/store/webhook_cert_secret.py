"""The side effects of ``webhook.tls.mode=operator``: the certificate Secret, the caBundle, the served file.

:func:`start_webhook_tls` runs once at start-up, before the webhook serves: it makes sure the Secret in
the operator's namespace holds a usable CA and certificate (:func:`frwatch_operator.capture.webhook_tls.ensure_tls`
decides), that the MutatingWebhookConfiguration trusts that CA, and writes ``tls.pem`` (certificate and
key, mode 0600, replaced atomically) into ``config.webhook.certs_dir`` (``certs_file``). It returns the config with
``cert_file``/``key_file`` pointing at that file, for the ``kopf.WebhookServer``. A :class:`CertKeeper`
thread then repeats the pass every ``certs_check_seconds``; when the file changes (renewal, another
replica's rotation) kopf's server notices it and restarts its listener with the new certificate.

RBAC (the chart's Role and ClusterRole in tls.mode=operator): get/create/update of the Secret
``certs_secret`` in ``namespace``; get/patch of the MutatingWebhookConfiguration ``configuration_name``.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from frwatch_operator.capture.webhook_tls import (
    SECRET_TYPE,
    Action,
    Outcome,
    StoredSecret,
    TlsPolicy,
    dns_names,
    ensure_tls,
    secret_labels,
)
from frwatch_operator.config import Config, WebhookSettings
from frwatch_operator.errors import ApiRefusedError, ConflictError, FatalError, NotFoundError
from frwatch_operator.kube.api_errors import api_call
from frwatch_operator.store.own_secrets import Keeper, OwnSecret

logger = logging.getLogger(__name__)


#: What tls.mode=operator needs when a call is refused.
_RBAC = "tls.mode=operator needs get/create/update on that Secret and get/patch on that MutatingWebhookConfiguration"


class TlsKube:
    """:class:`frwatch_operator.capture.webhook_tls.TlsStore` over the Kubernetes API."""

    def __init__(self, api_client: client.ApiClient, namespace: str, secret: str, configuration: str) -> None:
        self.api = api_client
        self.admission = client.AdmissionregistrationV1Api(api_client)
        self.own = OwnSecret(
            api_client, namespace, secret, secret_type=SECRET_TYPE, labels=secret_labels(), rbac=_RBAC
        )
        self.configuration = configuration

    @property
    def secret_ref(self) -> str:
        return self.own.ref

    def read_secret(self) -> StoredSecret | None:
        return self.own.read()

    def write_secret(
        self, data: Mapping[str, str], stored: StoredSecret | None, owner: Mapping[str, Any] | None
    ) -> bool:
        return self.own.write(data, stored, owner)

    def read_configuration(self) -> dict[str, Any] | None:
        try:
            found = api_call(
                f"read MutatingWebhookConfiguration {self.configuration}",
                lambda: self.admission.read_mutating_webhook_configuration(self.configuration),
                grant=_RBAC,
            )
        except NotFoundError:
            return None
        return dict(self.api.sanitize_for_serialization(found))

    def patch_configuration(self, ops: list[dict[str, Any]]) -> bool:
        try:
            api_call(
                f"patch the caBundle of MutatingWebhookConfiguration {self.configuration}",
                lambda: self.admission.patch_mutating_webhook_configuration(self.configuration, ops),
                grant=_RBAC,
            )
        except (ConflictError, NotFoundError):
            return False
        except ApiRefusedError as exc:
            if exc.status == 422:  # a "test" of the JSON patch failed: the configuration changed since read
                return False
            raise
        return True


def write_server_file(path: str | Path, pem: bytes) -> tuple[Path, bool]:
    """Write ``pem`` to ``path`` (0600) by an atomic rename, unless it already holds it. Returns the path
    and whether it changed."""
    path = Path(path)
    folder = path.parent
    try:
        if path.read_bytes() == pem:
            return path, False
    except FileNotFoundError:
        pass
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.")
    except OSError as exc:
        raise FatalError(
            f"cannot write the webhook certificate into {folder} ({exc}): FRWATCH_WEBHOOK_CERTS_DIR must be a "
            "writable folder (the chart mounts an emptyDir there)"
        ) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(pem)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path, True


class CertKeeper(Keeper[tuple[Outcome, Path]]):
    """One pass of :func:`ensure_tls` plus the file, now and every ``certs_check_seconds`` in a thread."""

    def __init__(
        self, store: TlsKube, settings: WebhookSettings, clock: Callable[[], datetime] | None = None
    ) -> None:
        super().__init__("webhook certificate", settings.certs_check_seconds)
        self.store, self.settings = store, settings
        self.names = dns_names(settings.service_name, settings.namespace)
        self.policy = TlsPolicy.of(settings)
        self.clock = clock or (lambda: datetime.now(UTC))

    def run_once(self) -> tuple[Outcome, Path]:
        outcome = ensure_tls(self.store, self.names, self.policy, self.clock())
        self._log(outcome)
        path, changed = write_server_file(self.settings.certs_file, outcome.material.server_pem())
        if changed:
            logger.info("webhook certificate %s written to %s", outcome.material.fingerprint(), path)
        return outcome, path

    def _log(self, outcome: Outcome) -> None:
        d, ref = outcome.decision, self.store.secret_ref
        if d.action is Action.REPLACE:
            logger.warning(
                "webhook certificate: %s replaced with a new CA and certificate: %s", ref, d.reason
            )
        elif d.action is not Action.KEEP:
            logger.info("webhook certificate: %s %s (%s)", ref, "created" if d.action is Action.CREATE else
                        "re-issued by its CA", d.reason)  # fmt: skip
        if outcome.bundle_patched:
            logger.info("webhook certificate: caBundle of MutatingWebhookConfiguration %s set",
                        self.store.configuration)  # fmt: skip
        if not outcome.configuration_found:
            logger.warning(
                "webhook certificate: MutatingWebhookConfiguration %s not found: the API server does not call "
                "the webhook until it exists (the chart creates it); its caBundle is set at the next check",
                self.store.configuration,
            )


def start_webhook_tls(config: Config, api_client: client.ApiClient) -> tuple[Config, CertKeeper]:
    """At start-up, before serving (tls.mode=operator): set up the certificate, start the keeper, and
    return ``config`` with the webhook serving ``<certs_dir>/tls.pem``."""
    w = config.webhook
    keeper = CertKeeper(TlsKube(api_client, w.namespace, w.certs_secret, w.configuration_name), w)
    path = str(keeper.run_at_start()[1])
    keeper.start()
    served = WebhookSettings.model_validate({**w.model_dump(), "cert_file": path, "key_file": path})
    return config.model_copy(update={"webhook": served}), keeper
