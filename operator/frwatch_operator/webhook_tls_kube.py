"""The side effects of ``webhook.tls.mode=operator``: the certificate Secret, the caBundle, the served file.

:func:`start_webhook_tls` runs once at start-up, before the webhook serves: it makes sure the Secret in
the operator's namespace holds a usable CA and certificate (:func:`frwatch_operator.webhook_tls.ensure_tls`
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
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import urllib3.exceptions
from kubernetes import client
from kubernetes.client.rest import ApiException

from frwatch_operator.config import Config, WebhookSettings
from frwatch_operator.errors import FatalError, NotFoundError, RetryableError
from frwatch_operator.webhook_tls import (
    SECRET_TYPE,
    Action,
    Outcome,
    StoredSecret,
    TlsPolicy,
    dns_names,
    ensure_tls,
    secret_labels,
)

logger = logging.getLogger(__name__)
T = TypeVar("T")


class _Conflict(Exception):
    """409 (exists / changed since read) or 422 on a JSON patch whose test failed."""


def _call(what: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except ApiException as exc:
        status = int(exc.status or 0)
        msg = f"{what}: {status} {exc.reason}"
        if status == 404:
            raise NotFoundError(msg) from exc
        if status in (409, 422):
            raise _Conflict(msg) from exc
        if status == 429 or status >= 500 or status == 0:
            raise RetryableError(msg + "; will retry", delay=1.0) from exc
        raise FatalError(
            f"{msg} (tls.mode=operator needs get/create/update on that Secret and get/patch on that "
            "MutatingWebhookConfiguration: check the chart's RBAC)"
        ) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise RetryableError(f"{what}: API server unreachable ({exc}); will retry", delay=1.0) from exc


class TlsKube:
    """:class:`frwatch_operator.webhook_tls.TlsStore` over the Kubernetes API."""

    def __init__(self, api_client: client.ApiClient, namespace: str, secret: str, configuration: str) -> None:
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.admission = client.AdmissionregistrationV1Api(api_client)
        self.namespace, self.secret, self.configuration = namespace, secret, configuration

    @property
    def secret_ref(self) -> str:
        return f"Secret {self.namespace}/{self.secret}"

    def read_secret(self) -> StoredSecret | None:
        try:
            found = _call(
                f"read {self.secret_ref}",
                lambda: self.core.read_namespaced_secret(self.secret, self.namespace),
            )
        except NotFoundError:
            return None
        return StoredSecret(
            dict(found.data or {}), str(found.metadata.resource_version or ""), found.type or "Opaque"
        )

    def write_secret(
        self, data: Mapping[str, str], stored: StoredSecret | None, owner: Mapping[str, Any] | None
    ) -> bool:
        meta: dict[str, Any] = {"name": self.secret, "namespace": self.namespace, "labels": secret_labels()}
        if owner is not None:
            meta["ownerReferences"] = [dict(owner)]
        # A Secret's type is immutable: a replaced Secret keeps the type it had.
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": dict(data),
                "type": stored.type if stored is not None else SECRET_TYPE}  # fmt: skip
        try:
            if stored is None:
                _call(
                    f"create {self.secret_ref}",
                    lambda: self.core.create_namespaced_secret(self.namespace, body),
                )
            else:
                meta["resourceVersion"] = stored.resource_version
                _call(
                    f"replace {self.secret_ref}",
                    lambda: self.core.replace_namespaced_secret(self.secret, self.namespace, body),
                )
        except _Conflict:
            return False
        return True

    def read_configuration(self) -> dict[str, Any] | None:
        try:
            found = _call(
                f"read MutatingWebhookConfiguration {self.configuration}",
                lambda: self.admission.read_mutating_webhook_configuration(self.configuration),
            )
        except NotFoundError:
            return None
        return dict(self.api.sanitize_for_serialization(found))

    def patch_configuration(self, ops: list[dict[str, Any]]) -> bool:
        try:
            _call(
                f"patch the caBundle of MutatingWebhookConfiguration {self.configuration}",
                lambda: self.admission.patch_mutating_webhook_configuration(self.configuration, ops),
            )
        except (_Conflict, NotFoundError):
            return False
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


class CertKeeper:
    """One pass of :func:`ensure_tls` plus the file, now and every ``certs_check_seconds`` in a thread."""

    def __init__(
        self, store: TlsKube, settings: WebhookSettings, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.store, self.settings = store, settings
        self.names = dns_names(settings.service_name, settings.namespace)
        self.policy = TlsPolicy.of(settings)
        self.clock = clock or (lambda: datetime.now(UTC))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

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

    def run_at_start(self, timeout: float = 60.0) -> Path:
        """:meth:`run_once`, retrying an unreachable or busy API server up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        delay = 0.5
        while True:
            try:
                return self.run_once()[1]
            except RetryableError as exc:
                if time.monotonic() + delay > deadline:
                    raise FatalError(f"webhook certificate not set up within {timeout:.0f} s: {exc}") from exc
                logger.warning("webhook certificate: %s", exc)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="frwatch-webhook-certs", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _loop(self) -> None:
        interval = self.settings.certs_check_seconds
        wait = interval
        while not self._stop.wait(wait):
            try:
                self.run_once()
                wait = interval
            except Exception:  # keep serving the current certificate; try again sooner
                logger.exception("webhook certificate check failed; retrying")
                wait = min(interval, 60.0)


def start_webhook_tls(config: Config, api_client: client.ApiClient) -> tuple[Config, CertKeeper]:
    """At start-up, before serving (tls.mode=operator): set up the certificate, start the keeper, and
    return ``config`` with the webhook serving ``<certs_dir>/tls.pem``."""
    w = config.webhook
    keeper = CertKeeper(TlsKube(api_client, w.namespace, w.certs_secret, w.configuration_name), w)
    path = str(keeper.run_at_start())
    keeper.start()
    served = WebhookSettings.model_validate({**w.model_dump(), "cert_file": path, "key_file": path})
    return config.model_copy(update={"webhook": served}), keeper
