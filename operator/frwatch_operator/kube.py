"""The Kubernetes adapter: the only module of detection and collection that talks to the API server.

Reads and writes through the ``kubernetes`` client (synchronous; kopf runs sync handlers in threads):
jobs, Incidents (create, status), pods, Events (core/v1, ``involvedObject`` set so ``kubectl describe``
shows them), the Lease. API errors become frwatch's vocabulary in :mod:`frwatch_operator.kube_errors`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes import client

from frwatch_analyzers.safe_text import printable
from frwatch_operator import constants as c
from frwatch_operator.capture_gaps import gap_closed
from frwatch_operator.errors import ConflictError, NotFoundError, RetryableError
from frwatch_operator.incident_naming import next_attempt
from frwatch_operator.job_failure import start_to_record
from frwatch_operator.jobkinds import JobKind
from frwatch_operator.kube_errors import api_call
from frwatch_operator.notices import Notice
from frwatch_operator.times import now_rfc3339

logger = logging.getLogger(__name__)
#: What a refused log read needs (the chart grants it).
LOG_GRANT = "grant the operator's ServiceAccount 'get' on pods/log (a ClusterRole rule: resources [pods/log], verbs [get])"
#: What a refused read of the Events naming a node needs (the chart grants it).
NODE_EVENTS_GRANT = "grant the operator's ServiceAccount 'list' on events cluster-wide (resources [events], verbs [list])"


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


class Kube:
    """Typed access to what detection and collection read and write."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.coordination = client.CoordinationV1Api(api_client)

    # --- jobs -------------------------------------------------------------------------------------------
    def get_job(self, kind: JobKind, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            job = api_call(
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

        def decide(job: Mapping[str, Any]) -> dict[str, str | None] | None:
            new = next_attempt(((job.get("metadata") or {}).get("annotations") or {}).get(c.ANN_ATTEMPT), opened)
            return {c.ANN_ATTEMPT: new} if new is not None else None

        written = self.annotate_if(kind, namespace, name, decide)
        return written.get(c.ANN_ATTEMPT) if written else None

    def record_attempt_start(
        self, kind: JobKind, namespace: str, name: str, pod_attempt: str | None, pod_created: datetime | None
    ) -> str | None:
        """Record on the job when the current attempt's first pod was created (``frwatch.io/attempt-started``,
        see :mod:`frwatch_operator.job_failure`); once per attempt. Returns the value written, or None."""
        def decide(job: Mapping[str, Any]) -> dict[str, str | None] | None:
            new = start_to_record(job, pod_attempt, pod_created)
            return {c.ANN_ATTEMPT_STARTED: new, **gap_closed(job, pod_attempt)} if new is not None else None

        written = self.annotate_if(kind, namespace, name, decide)
        return written.get(c.ANN_ATTEMPT_STARTED) if written else None

    def annotate_if(
        self,
        kind: JobKind,
        namespace: str,
        name: str,
        decide: Callable[[Mapping[str, Any]], Mapping[str, str | None] | None],
    ) -> Mapping[str, str | None] | None:
        """Read the job, let ``decide`` name the annotations to change (a merge patch: None removes one; None
        instead of a patch: leave the job), and write them conditionally on the resourceVersion read (a
        concurrent change: read again, decide again). Returns what was written, None when nothing was."""
        for _ in range(3):
            job = self.get_job(kind, namespace, name)
            if job is None:
                return None
            new = decide(job)
            if not new:
                return None
            meta = job.get("metadata") or {}
            patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"), "annotations": dict(new)}}
            try:
                api_call(
                    f"annotate {kind.kind} {namespace}/{name}",
                    lambda p=patch: self.custom.patch_namespaced_custom_object(  # type: ignore[misc]
                        kind.group, kind.version, namespace, kind.plural, name, p
                    ),
                )
            except ConflictError:
                continue  # someone changed the job; read it again
            return new
        raise RetryableError(f"annotate {kind.kind} {namespace}/{name}: kept conflicting; will retry")

    # --- incidents --------------------------------------------------------------------------------------
    def create_incident(self, body: Mapping[str, Any]) -> bool:
        """Create the Incident; False when it already exists (409: someone created it: success)."""
        ns = str(body["metadata"]["namespace"])
        try:
            api_call(
                f"create Incident {ns}/{body['metadata']['name']}",
                lambda: self.custom.create_namespaced_custom_object(
                    c.GROUP, c.VERSION, ns, c.INCIDENT_PLURAL, dict(body)
                ),
            )
        except ConflictError:
            return False
        return True

    def patch_incident_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        api_call(
            f"patch Incident {namespace}/{name} status",
            lambda: self.custom.patch_namespaced_custom_object_status(
                c.GROUP, c.VERSION, namespace, c.INCIDENT_PLURAL, name, {"status": dict(status)}
            ),
        )

    # --- pods -------------------------------------------------------------------------------------------
    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        pods = api_call(
            f"list pods {namespace} {label_selector}",
            lambda: self.core.list_namespaced_pod(namespace, label_selector=label_selector),
        )
        return [self.api.sanitize_for_serialization(p) for p in pods.items]

    def read_pod_log(
        self, namespace: str, pod: str, container: str, *, previous: bool, tail_lines: int, limit_bytes: int
    ) -> bytes:
        """The last ``tail_lines`` lines of a container's log (``previous``: of its previous instance), at
        most ``limit_bytes`` bytes of them, as the API gave them (bytes: never decoded here). Never more than
        ``limit_bytes`` are read, whatever the server sends. A 400 (no such instance, not started yet) is an
        :class:`~frwatch_operator.errors.ApiRefusedError` with status 400; 403 names the grant."""
        what = f"get pods/log {namespace}/{pod} container {container}" + (" (previous)" if previous else "")

        def read() -> bytes:
            response = self.core.read_namespaced_pod_log(
                pod, namespace, container=container, previous=previous, tail_lines=tail_lines,
                limit_bytes=limit_bytes, _preload_content=False,
            )  # fmt: skip
            try:
                return bytes(response.read(limit_bytes))
            finally:
                response.release_conn()

        return api_call(what, read, grant=LOG_GRANT)

    # --- the leader election's Lease (frwatch_operator.leader_election) ----------------------------------
    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            lease = api_call(
                f"read Lease {namespace}/{name}", lambda: self.coordination.read_namespaced_lease(name, namespace)
            )
        except NotFoundError:
            return None
        return dict(self.api.sanitize_for_serialization(lease))

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> bool:
        """Create the Lease; False on a 409 (another replica created it first)."""
        return self._lease_write(
            f"create Lease {namespace}", lambda: self.coordination.create_namespaced_lease(namespace, dict(body))
        )

    def replace_lease(self, namespace: str, name: str, body: Mapping[str, Any]) -> bool:
        """Replace the Lease at the resourceVersion in ``body``; False on a 409 (it changed since)."""
        return self._lease_write(
            f"replace Lease {namespace}/{name}",
            lambda: self.coordination.replace_namespaced_lease(name, namespace, dict(body)),
        )

    def _lease_write(self, what: str, fn: Callable[[], object]) -> bool:
        try:
            api_call(what, fn)
        except ConflictError:
            return False
        return True

    # --- nodes (evidence) --------------------------------------------------------------------------------
    def read_node(self, name: str) -> dict[str, Any] | None:
        """The node, None when it is gone."""
        try:
            node = api_call(f"get nodes {name}", lambda: self.core.read_node(name))
        except NotFoundError:
            return None
        return dict(self.api.sanitize_for_serialization(node))

    def list_node_events(self, node: str, limit: int) -> list[dict[str, Any]]:
        """Events (any namespace) whose involved object is the node ``node``: at most ``limit`` of them."""
        events = api_call(
            f"list events about node {node}",
            lambda: self.core.list_event_for_all_namespaces(
                field_selector=f"involvedObject.kind=Node,involvedObject.name={node}", limit=limit
            ),
            grant=NODE_EVENTS_GRANT,
        )
        return [self.api.sanitize_for_serialization(e) for e in events.items[:limit]]

    # --- events -----------------------------------------------------------------------------------------
    def post_event(self, about: ObjectRef, notice: Notice) -> bool:
        """Post a core/v1 Event about ``about``. The name is derived from (object uid, reason, message), so
        the same notice is posted once, even by a restarted operator. Returns False if it already existed."""
        digest = hashlib.sha256(f"{about.uid}/{notice.reason}/{notice.message}".encode()).hexdigest()[:16]
        now = now_rfc3339()
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
            api_call(
                f"post Event {notice.reason} on {about.kind} {about.name}",
                lambda: self.core.create_namespaced_event(about.namespace, body),
            )
        except ConflictError:
            return False
        return True

