"""The operator's self-managed state in its own namespace: the webhook's certificate (``webhook_tls_kube``)
and the agents' key ring (``agentkeys_kube``). A Secret read and replaced conditionally
(:class:`OwnSecret`; API errors in frwatch's words by :mod:`frwatch_operator.kube.api_errors`), and the pass that keeps
the state, at start-up and then periodically (:class:`Keeper`).

RBAC (the chart's Role in the release namespace): get/update of that Secret by name, and create of
Secrets there (create cannot be limited by name: the name is not known when it is authorized).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from kubernetes import client

from frwatch_operator.capture.webhook_tls import StoredSecret
from frwatch_operator.errors import ConflictError, FatalError, NotFoundError, RetryableError
from frwatch_operator.kube.api_errors import api_call

R = TypeVar("R")
logger = logging.getLogger(__name__)


class OwnSecret:
    """One Secret (``namespace``/``name``) the operator creates and replaces itself."""

    def __init__(
        self, api_client: client.ApiClient, namespace: str, name: str, *, secret_type: str,
        labels: Mapping[str, str], rbac: str,
    ) -> None:  # fmt: skip
        self.core = client.CoreV1Api(api_client)
        self.namespace, self.name, self.secret_type = namespace, name, secret_type
        self.labels, self.rbac = dict(labels), rbac

    @property
    def ref(self) -> str:
        return f"Secret {self.namespace}/{self.name}"

    def read(self) -> StoredSecret | None:
        try:
            found = api_call(
                f"read {self.ref}", lambda: self.core.read_namespaced_secret(self.name, self.namespace), grant=self.rbac
            )
        except NotFoundError:
            return None
        return StoredSecret(
            dict(found.data or {}), str(found.metadata.resource_version or ""), found.type or "Opaque"
        )

    def write(
        self, data: Mapping[str, str], stored: StoredSecret | None, owner: Mapping[str, Any] | None = None
    ) -> bool:
        """Create the Secret (``stored`` None) or replace it if unchanged since it was read; False on a
        conflict (another replica wrote first: read again)."""
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace, "labels": dict(self.labels)}
        if owner is not None:
            meta["ownerReferences"] = [dict(owner)]
        # A Secret's type is immutable: a replaced Secret keeps the type it had.
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": dict(data),
                "type": stored.type if stored is not None else self.secret_type}  # fmt: skip
        try:
            if stored is None:
                api_call(
                    f"create {self.ref}", lambda: self.core.create_namespaced_secret(self.namespace, body), grant=self.rbac
                )
            else:
                meta["resourceVersion"] = stored.resource_version
                api_call(
                    f"replace {self.ref}",
                    lambda: self.core.replace_namespaced_secret(self.name, self.namespace, body),
                    grant=self.rbac,
                )
        except ConflictError:
            return False
        except NotFoundError as exc:
            if stored is not None:
                return False  # deleted since it was read: read again (and create it)
            raise FatalError(f"{exc}: namespace {self.namespace!r} does not exist (it must be the operator's own)") from exc
        return True


class Keeper(Generic[R]):
    """A pass over the operator's self-managed state: once at start-up (retrying an unreachable or busy API
    server), then every ``interval`` seconds in a daemon thread until :meth:`stop`."""

    def __init__(self, what: str, interval: float) -> None:
        self.what, self.interval = what, interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> R:
        raise NotImplementedError

    def run_at_start(self, timeout: float = 60.0) -> R:
        """:meth:`run_once`, retrying a :class:`RetryableError` up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        delay = 0.5
        while True:
            try:
                return self.run_once()
            except RetryableError as exc:
                if time.monotonic() + delay > deadline:
                    raise FatalError(f"{self.what} not set up within {timeout:.0f} s: {exc}") from exc
                logger.warning("%s: %s", self.what, exc)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def start(self) -> None:
        name = "frwatch-" + self.what.replace(" ", "-").replace("'", "")
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _loop(self) -> None:
        wait = self.interval
        while not self._stop.wait(wait):
            try:
                self.run_once()
                wait = self.interval
            except Exception:  # keep what was set up last; try again sooner
                logger.exception("%s check failed; retrying", self.what)
                wait = min(self.interval, 60.0)
