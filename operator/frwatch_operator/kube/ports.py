"""What the verdict loop needs from Kubernetes: one small interface (the adapter is
:class:`frwatch_operator.kube.adapter.Kube`, the operator's one Kubernetes adapter).

Objects go in and come out as plain dicts in wire form (camelCase), as the API serves them. Every method
raises frwatch's errors (``frwatch_operator.errors``): ``RetryableError`` (API unreachable, 5xx,
throttled), ``ConflictError`` (409: the object changed or exists), ``ApiRefusedError`` (forbidden, invalid,
a required object missing; ``NamespaceMissingError`` when a create names a namespace that does not exist);
"not found" is ``None`` where the method says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from frwatch_operator.resources import JobRef

Obj = dict[str, Any]

class KubeActions(Protocol):
    # batch/v1 Jobs (the analyzer) and their pods
    def create_job(self, job: Mapping[str, Any]) -> Obj:
        """Create the Job; when one of that name exists, return it (the caller checks its owner)."""
        ...

    def get_batch_job(self, namespace: str, name: str) -> Obj | None: ...

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete the Job and (background propagation) its pods; absent is fine."""
        ...

    def list_job_pods(self, namespace: str, job_name: str) -> list[Obj]: ...

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        """The pod (listed by ``metadata.name``: the operator may list pods, not get them); None when absent."""
        ...

    # the training job (PyTorchJob ...)
    def get_training_job(self, namespace: str, ref: JobRef) -> Obj | None: ...

    def annotate_training_job(
        self, namespace: str, ref: JobRef, annotations: Mapping[str, str | None]
    ) -> None:
        """Merge-patch the job's annotations (None removes one). Never touches its spec or status."""
        ...

    def patch_training_job_spec(self, namespace: str, ref: JobRef, patch: Mapping[str, Any]) -> None:
        """Merge-patch the job's spec and annotations (the repeat policy's suspend: ``restart_step``)."""
        ...

    def get_incident(self, namespace: str, name: str) -> Obj | None:
        """Another Incident of the namespace (the previous attempt's); None when absent."""
        ...

    # Events
    def create_event(self, event: Mapping[str, Any]) -> None:
        """Create the Event; one of the same name already there is fine (idempotent)."""
        ...

    # Nodes
    def get_node(self, name: str) -> Obj | None: ...

    def count_nodes(self) -> int: ...

    def list_node_events(self, node: str, limit: int) -> list[Obj]:
        """Events (any namespace) about the node: at most ``limit``."""
        ...

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> Obj:
        """Merge-patch a node; a resourceVersion in the patch makes it conditional (409 if changed)."""
        ...

    def create_maintenance_request(self, body: Mapping[str, Any]) -> Obj:
        """Create NVSentinel's cluster-scoped MaintenanceRequest (one of that name already there is fine)."""
        ...

    # the breaker's ConfigMap (and the fleet's nominations)
    def read_configmap(self, namespace: str, name: str) -> Obj | None: ...

    def write_configmap(
        self, namespace: str, name: str, data: Mapping[str, str], *, resource_version: str | None
    ) -> Obj:
        """Create it (``resource_version`` None) or replace it at that version (409 if it changed).
        :class:`NamespaceMissingError` when the namespace does not exist."""
        ...
