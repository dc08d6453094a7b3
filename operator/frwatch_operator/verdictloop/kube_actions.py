"""The Kubernetes adapter of the verdict loop (the official ``kubernetes`` client, synchronous).

Every API call the verdict loop makes is here, one method each (RBAC is rendered from this list):

=========================  ============================================  =====================================
method                     call                                          RBAC
=========================  ============================================  =====================================
create_job                 POST   batch/v1 jobs (ns)                     batch jobs: create
get_job                    GET    batch/v1 jobs/NAME (ns)                batch jobs: get
delete_job                 DELETE batch/v1 jobs/NAME (ns), Background    batch jobs: delete
list_job_pods              LIST   v1 pods (ns), labelSelector job-name   pods: list
get_training_job           GET    kubeflow.org/v1 pytorchjobs/NAME (ns)  kubeflow.org pytorchjobs: get
annotate_training_job      PATCH  (merge) kubeflow.org/v1 pytorchjobs    kubeflow.org pytorchjobs: patch
post_event                 POST   v1 events (ns; nodes': "default")      events: create
get_node                   GET    v1 nodes/NAME                          nodes: get
count_nodes                LIST   v1 nodes (paged, limit 500)            nodes: list
patch_node                 PATCH  (merge) v1 nodes/NAME                  nodes: patch
read_configmap             GET    v1 configmaps/NAME (breaker ns)        configmaps: get
write_configmap            POST / PUT v1 configmaps (breaker ns)         configmaps: create, update
=========================  ============================================  =====================================

Responses are read raw (``_preload_content=False``) and returned as the API's JSON dicts; API errors
become frwatch's vocabulary in :mod:`frwatch_operator.kube_errors` (a 404 on an object a call needs is an
:class:`ApiRefusedError`; on a ConfigMap create, :class:`NamespaceMissingError`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kubernetes import client

from frwatch_analyzers.safe_text import printable
from frwatch_operator import constants as c
from frwatch_operator.errors import (
    ApiRefusedError,
    ConflictError,
    FatalError,
    NamespaceMissingError,
    NotFoundError,
    RetryableError,
)
from frwatch_operator.jobkinds import kind_of
from frwatch_operator.kube_errors import api_call
from frwatch_operator.resources import JobRef
from frwatch_operator.verdictloop.ports import Obj

T = TypeVar("T")
MERGE_PATCH = "application/merge-patch+json"


def _optional(what: str, fn: Callable[[], T]) -> T | None:
    try:
        return api_call(what, fn)
    except NotFoundError:
        return None


def _required(what: str, fn: Callable[[], T]) -> T:
    try:
        return api_call(what, fn)
    except NotFoundError as exc:
        fix = "create it, or install the CustomResourceDefinition of its kind"
        raise ApiRefusedError(f"{what}: not found", call=what, status=404, fix=fix) from exc


def _json(response: Any) -> Obj:
    data = json.loads(response.data or b"{}")
    if not isinstance(data, dict):
        raise FatalError(f"API answered {type(data).__name__}, expected an object")
    return data


class KubernetesActions:
    """:class:`~frwatch_operator.verdictloop.ports.KubeActions` over a ``kubernetes.client.ApiClient``."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    # --- the analyzer Job -------------------------------------------------------------------------
    def create_job(self, job: Mapping[str, Any]) -> Obj:
        meta = job["metadata"]
        ns, name = meta["namespace"], meta["name"]
        try:
            return _required(
                f"create Job {ns}/{name}",
                lambda: _json(self.batch.create_namespaced_job(ns, dict(job), _preload_content=False)),
            )
        except ConflictError:
            existing = self.get_job(ns, name)
            if existing is None:
                raise RetryableError(f"Job {ns}/{name} exists and vanished; will retry", delay=1.0) from None
            return existing

    def get_job(self, namespace: str, name: str) -> Obj | None:
        return _optional(
            f"get Job {namespace}/{name}",
            lambda: _json(self.batch.read_namespaced_job(name, namespace, _preload_content=False)),
        )

    def delete_job(self, namespace: str, name: str) -> None:
        _optional(
            f"delete Job {namespace}/{name}",
            lambda: self.batch.delete_namespaced_job(
                name, namespace, propagation_policy="Background", _preload_content=False
            ),
        )

    def list_job_pods(self, namespace: str, job_name: str) -> list[Obj]:
        listed = _required(
            f"list pods of Job {namespace}/{job_name}",
            lambda: _json(
                self.core.list_namespaced_pod(
                    namespace, label_selector=f"{c.LABEL_BATCH_JOB_NAME}={job_name}", _preload_content=False
                )
            ),
        )
        return list(listed.get("items") or [])

    # --- the training job -------------------------------------------------------------------------
    def _job_args(self, namespace: str, ref: JobRef) -> tuple[str, str, str, str]:
        """Where the job's kind lives (its :class:`~frwatch_operator.jobkinds.JobKind` says)."""
        kind = kind_of(ref.kind)
        if kind is None:
            raise FatalError(f"{ref.kind} {namespace}/{ref.name}: job kind {ref.kind!r} is not supported")
        return kind.group, kind.version, namespace, kind.plural

    def get_training_job(self, namespace: str, ref: JobRef) -> Obj | None:
        args = self._job_args(namespace, ref)
        return _optional(
            f"get {ref.kind} {namespace}/{ref.name}",
            lambda: _json(self.custom.get_namespaced_custom_object(*args, ref.name, _preload_content=False)),
        )

    def annotate_training_job(
        self, namespace: str, ref: JobRef, annotations: Mapping[str, str | None]
    ) -> None:
        args = self._job_args(namespace, ref)
        body = {"metadata": {"annotations": {k: printable(v) if v else v for k, v in annotations.items()}}}
        _required(
            f"annotate {ref.kind} {namespace}/{ref.name}",
            lambda: self.custom.patch_namespaced_custom_object(
                *args, ref.name, body, _content_type=MERGE_PATCH, _preload_content=False
            ),
        )

    # --- Events -----------------------------------------------------------------------------------
    def post_event(self, event: Mapping[str, Any]) -> None:
        ns = event["metadata"]["namespace"]
        try:
            _required(
                f"create Event {ns}/{event['metadata']['name']}",
                lambda: self.core.create_namespaced_event(ns, dict(event), _preload_content=False),
            )
        except ConflictError:
            return  # the same Event (same name) was posted before a restart

    # --- nodes ------------------------------------------------------------------------------------
    def get_node(self, name: str) -> Obj | None:
        return _optional(f"get Node {name}", lambda: _json(self.core.read_node(name, _preload_content=False)))

    def count_nodes(self) -> int:
        count, token = 0, ""
        while True:
            page = self._node_page(token)
            count += len(page.get("items") or [])
            token = str((page.get("metadata") or {}).get("continue") or "")
            if not token:
                return count

    def _node_page(self, token: str) -> Obj:
        kwargs: dict[str, Any] = {"limit": 500, "_preload_content": False}
        if token:
            kwargs["_continue"] = token
        return _required("list Nodes", lambda: _json(self.core.list_node(**kwargs)))

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> Obj:
        return _required(
            f"patch Node {name}",
            lambda: _json(
                self.core.patch_node(name, dict(patch), _content_type=MERGE_PATCH, _preload_content=False)
            ),
        )

    # --- the breaker's ConfigMap ------------------------------------------------------------------
    def read_configmap(self, namespace: str, name: str) -> Obj | None:
        return _optional(
            f"get ConfigMap {namespace}/{name}",
            lambda: _json(self.core.read_namespaced_config_map(name, namespace, _preload_content=False)),
        )

    def write_configmap(
        self, namespace: str, name: str, data: Mapping[str, str], *, resource_version: str | None
    ) -> Obj:
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {c.LABEL_MANAGED_BY: c.EVENT_COMPONENT},
            },
            "data": dict(data),
        }
        if resource_version is None:
            what = f"create ConfigMap {namespace}/{name}"
            try:
                return api_call(
                    what,
                    lambda: _json(
                        self.core.create_namespaced_config_map(namespace, body, _preload_content=False)
                    ),
                )
            except NotFoundError as exc:  # a create answers 404 only for its namespace
                raise NamespaceMissingError(
                    f"{what}: the namespace {namespace} does not exist", namespace=namespace
                ) from exc
        body["metadata"]["resourceVersion"] = resource_version
        return _required(
            f"replace ConfigMap {namespace}/{name}",
            lambda: _json(
                self.core.replace_namespaced_config_map(name, namespace, body, _preload_content=False)
            ),
        )
