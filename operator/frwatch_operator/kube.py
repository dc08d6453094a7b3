"""The Kubernetes adapter: the only module of detection and collection that talks to the API server.

Reads and writes through the ``kubernetes`` client (synchronous; kopf runs sync handlers in threads):
jobs, Incidents (create, status), pods, Events (core/v1, ``involvedObject`` set so ``kubectl describe``
shows them), the agent token Secret. API errors become frwatch's vocabulary: :class:`RetryableError`
(5xx, 429, connection trouble, conflicts), :class:`NotFoundError`, :class:`FatalError` (other 4xx).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import urllib3.exceptions
from kubernetes import client
from kubernetes.client.rest import ApiException

from frwatch_operator import constants as c
from frwatch_operator.errors import FatalError, NotFoundError, RetryableError
from frwatch_operator.incident_naming import next_attempt
from frwatch_operator.job_failure import start_to_record
from frwatch_operator.jobkinds import JobKind
from frwatch_operator.notices import Notice
from frwatch_operator.textsafe import printable

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class ObjectRef:
    """The object an Event is about."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> ObjectRef:
        meta = body.get("metadata") or {}
        return cls(
            str(body.get("apiVersion") or ""), str(body.get("kind") or ""), str(meta.get("namespace") or ""),
            str(meta.get("name") or ""), str(meta.get("uid") or ""),
        )  # fmt: skip


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Kube:
    """Typed access to what detection and collection read and write."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except ApiException as exc:
            status = int(exc.status or 0)
            msg = f"{what}: {status} {exc.reason}"
            if status == 404:
                raise NotFoundError(msg) from exc
            if status in (409, 429) or status >= 500 or status == 0:
                raise RetryableError(msg + "; will retry", delay=1.0) from exc
            raise FatalError(f"{msg} (check frwatch's RBAC and the object)") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise RetryableError(f"{what}: API server unreachable ({exc}); will retry", delay=1.0) from exc

    # --- jobs -------------------------------------------------------------------------------------------
    def get_job(self, kind: JobKind, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            job = self._call(
                f"get {kind.kind} {namespace}/{name}",
                lambda: self.custom.get_namespaced_custom_object(
                    kind.group, kind.version, namespace, kind.plural, name
                ),
            )
        except NotFoundError:
            return None
        return dict(job)

    def bump_attempt(self, kind: JobKind, namespace: str, name: str, opened: str) -> str | None:
        """Move the job's ``frwatch.io/attempt`` past ``opened`` (idempotent; never backwards). Returns the
        new value, or None when nothing changed. A concurrent change of the job retries."""

        def decide(job: Mapping[str, Any]) -> str | None:
            return next_attempt(((job.get("metadata") or {}).get("annotations") or {}).get(c.ANN_ATTEMPT), opened)

        return self._annotate_if(kind, namespace, name, c.ANN_ATTEMPT, decide)

    def record_attempt_start(
        self, kind: JobKind, namespace: str, name: str, pod_attempt: str | None, pod_created: datetime | None
    ) -> str | None:
        """Record on the job when the current attempt's first pod was created (``frwatch.io/attempt-started``,
        see :mod:`frwatch_operator.job_failure`); once per attempt. Returns the value written, or None."""
        return self._annotate_if(
            kind, namespace, name, c.ANN_ATTEMPT_STARTED, lambda job: start_to_record(job, pod_attempt, pod_created)
        )

    def _annotate_if(
        self, kind: JobKind, namespace: str, name: str, key: str, decide: Callable[[Mapping[str, Any]], str | None]
    ) -> str | None:
        """Read the job, let ``decide`` name the annotation's new value (None: leave it), and write it
        conditionally on the resourceVersion read (a concurrent change: read again, decide again)."""
        for _ in range(3):
            job = self.get_job(kind, namespace, name)
            if job is None:
                return None
            new = decide(job)
            if new is None:
                return None
            meta = job.get("metadata") or {}
            patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": {key: new}}}
            try:
                self._call(
                    f"annotate {kind.kind} {namespace}/{name}",
                    lambda p=patch: self.custom.patch_namespaced_custom_object(  # type: ignore[misc]
                        kind.group, kind.version, namespace, kind.plural, name, p
                    ),
                )
            except RetryableError:
                continue  # 409: someone changed the job; read it again
            return new
        raise RetryableError(f"annotate {kind.kind} {namespace}/{name}: kept conflicting; will retry")

    # --- incidents --------------------------------------------------------------------------------------
    def create_incident(self, body: Mapping[str, Any]) -> bool:
        """Create the Incident; False when it already exists (409: someone created it: success)."""
        ns = str(body["metadata"]["namespace"])
        try:
            self._call(
                f"create Incident {ns}/{body['metadata']['name']}",
                lambda: self.custom.create_namespaced_custom_object(
                    c.GROUP, c.VERSION, ns, c.INCIDENT_PLURAL, dict(body)
                ),
            )
        except RetryableError as exc:
            if _conflict(exc):
                return False
            raise
        return True

    def patch_incident_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self._call(
            f"patch Incident {namespace}/{name} status",
            lambda: self.custom.patch_namespaced_custom_object_status(
                c.GROUP, c.VERSION, namespace, c.INCIDENT_PLURAL, name, {"status": dict(status)}
            ),
        )

    # --- pods -------------------------------------------------------------------------------------------
    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        pods = self._call(
            f"list pods {namespace} {label_selector}",
            lambda: self.core.list_namespaced_pod(namespace, label_selector=label_selector),
        )
        return [self.api.sanitize_for_serialization(p) for p in pods.items]

    # --- secrets ----------------------------------------------------------------------------------------
    # --- events -----------------------------------------------------------------------------------------
    def post_event(self, about: ObjectRef, notice: Notice) -> bool:
        """Post a core/v1 Event about ``about``. The name is derived from (object uid, reason, message), so
        the same notice is posted once, even by a restarted operator. Returns False if it already existed."""
        digest = hashlib.sha256(f"{about.uid}/{notice.reason}/{notice.message}".encode()).hexdigest()[:16]
        now = _now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{about.name}.{digest}", "namespace": about.namespace},
            "involvedObject": {
                "apiVersion": about.api_version, "kind": about.kind, "name": about.name,
                "namespace": about.namespace, "uid": about.uid,
            },
            "type": notice.type, "reason": notice.reason, "message": printable(notice.message)[:1024],
            "source": {"component": c.EVENT_COMPONENT}, "reportingComponent": c.EVENT_COMPONENT,
            "reportingInstance": c.EVENT_COMPONENT, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }  # fmt: skip
        try:
            self._call(
                f"post Event {notice.reason} on {about.kind} {about.name}",
                lambda: self.core.create_namespaced_event(about.namespace, body),
            )
        except RetryableError as exc:
            if _conflict(exc):
                return False
            raise
        return True


def _conflict(exc: BaseException) -> bool:
    """Whether a RetryableError came from a 409 Conflict (an object of that name exists)."""
    cause = exc.__cause__
    return isinstance(cause, ApiException) and cause.status == 409
