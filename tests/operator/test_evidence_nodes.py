"""Node records (``nodes/<node>.json``): a node's conditions and the recent Events naming it, whatever wrote
them (node-problem-detector, a GPU health condition, an Xid Event as DCGM/NVSentinel/NPD post it), read
through the API when collection ends, the nodes of failed pods first; what could not be read is said."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_analyzers.store.manifest import ContainerEnd, Manifest, PodRecord, RankRecord
from frwatch_analyzers.store.node_record import parse_node_record
from frwatch_operator.collect import evidence as evidence_collection
from frwatch_operator.collect.node_evidence import node_record, nodes_to_read
from frwatch_operator.config import EvidenceSettings
from frwatch_operator.errors import FrwatchError
from frwatch_operator.kube.adapter import NODE_EVENTS_GRANT, Kube, ObjectRef
from frwatch_operator.kube.api_errors import api_error
from frwatch_operator.store.s3 import S3Store
from frwatch_operator.times import now_rfc3339

XID = "Xid 79: GPU has fallen off the bus (pci 0000:3b:00.0)"


def _manifest(job: str = "j") -> Manifest:
    pods = [PodRecord(pod=f"{job}-worker-{i}", node=node, ranks=[i]) for i, node in enumerate(["n-b", "n-a", "n-c"])]
    pods[2] = pods[2].model_copy(update={"ended": [ContainerEnd(container="pytorch", exit_code=137)]})
    ranks = [RankRecord(rank=i, pod=p.pod, node=p.node, dumped=i != 0) for i, p in enumerate(pods)]
    return Manifest(namespace="ns", job=job, job_uid="u", attempt="0", world_size=3, ranks=ranks, pods=pods)


def test_nodes_of_failed_pods_and_missing_ranks_come_first_within_the_cap() -> None:
    assert nodes_to_read(_manifest(), 64) == ["n-b", "n-c", "n-a"]
    assert nodes_to_read(_manifest(), 1) == ["n-b"]
    assert nodes_to_read(_manifest(), 0) == []


def test_a_record_keeps_conditions_and_the_newest_events_first() -> None:
    node = {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady"},
        {"type": "GpuHealthy", "status": "False", "reason": "XidCritical", "message": XID},
        "not a condition", {"status": "True"}]}}  # fmt: skip
    events = [{"type": "Warning", "reason": "GpuXid", "message": XID, "count": 3,
               "lastTimestamp": f"2026-11-25T10:0{i}:00Z", "source": {"component": "nvsentinel"}} for i in range(5)]  # fmt: skip
    record = node_record("n-a", node, events, "2026-11-25T10:10:00Z", max_events=2)
    assert [c.type for c in record.conditions] == ["Ready", "GpuHealthy"]
    assert [e.last_timestamp for e in record.events] == ["2026-11-25T10:04:00Z", "2026-11-25T10:03:00Z"]
    assert record.events[0].source_component == "nvsentinel" and record.events[0].count == 3
    assert parse_node_record(record.to_json()) == record


def _where(ns: str, job: str) -> evidence_collection.Where:
    return evidence_collection.Where(
        AttemptKey("frwatch", ns, job, "u", "0"), "frwatch", ObjectRef("kubeflow.org/v1", "PyTorchJob", ns, job, "u"), f"{job}-0"
    )  # fmt: skip


def _node_event(core: client.CoreV1Api, node: str, reason: str, message: str, component: str) -> None:
    now = now_rfc3339()
    core.create_namespaced_event("default", {
        "metadata": {"generateName": f"{node}."}, "type": "Warning", "reason": reason, "message": message,
        "involvedObject": {"kind": "Node", "name": node, "apiVersion": "v1"}, "source": {"component": component},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1})  # fmt: skip


def test_records_of_the_attempts_nodes_reach_the_store(op_api: client.ApiClient, k8s_namespace: str, store: S3Store) -> None:
    core = client.CoreV1Api(op_api)
    tag = k8s_namespace[-6:]
    names = [f"ev-{tag}-{x}" for x in ("b", "a", "c")]
    for name in names:
        core.create_node({"metadata": {"name": name}})
    core.patch_node_status(names[0], {"status": {"conditions": [
        {"type": "KernelDeadlock", "status": "True", "reason": "DockerHung", "message": "task docker:7 blocked"}]}})  # fmt: skip
    _node_event(core, names[0], "GpuXid", XID, "dcgm-exporter")
    _node_event(core, names[1], "NodeNotReady", "Node is not ready", "node-controller")
    _node_event(core, "someone-else", "GpuXid", XID, "dcgm-exporter")
    manifest = _manifest().model_copy(update={"pods": [p.model_copy(update={"node": n}) for p, n in zip(_manifest().pods, names, strict=True)]})
    manifest = manifest.model_copy(update={"pods": [*manifest.pods, PodRecord(pod="x", node=f"ev-{tag}-gone")]})
    where = _where(k8s_namespace, "nodes")
    written = evidence_collection.write_node_records(
        Kube(op_api), store, EvidenceSettings(), where, manifest, datetime.now(UTC)
    )
    assert written[0] == names[0] and set(written) == {*names, f"ev-{tag}-gone"}
    first = parse_node_record(store.get(where.key.node(names[0])))
    assert first is not None
    assert [(c.type, c.status) for c in first.conditions] == [("KernelDeadlock", "True")]
    assert [(e.reason, e.message, e.source_component) for e in first.events] == [("GpuXid", XID, "dcgm-exporter")]
    second = parse_node_record(store.get(where.key.node(names[1])))
    assert second is not None and [e.reason for e in second.events] == ["NodeNotReady"]
    gone = parse_node_record(store.get(where.key.node(f"ev-{tag}-gone")))
    assert gone is not None and gone.unavailable == ("node: not found (deleted since)",)


class _NoEvents(Kube):
    def list_node_events(self, node: str, limit: int) -> list[dict[str, Any]]:
        raise api_error(f"list events about node {node}", 403, "events is forbidden", NODE_EVENTS_GRANT)


def test_events_forbidden_is_said_in_each_record_and_once_on_the_job(
    op_api: client.ApiClient, k8s_namespace: str, store: S3Store
) -> None:
    core = client.CoreV1Api(op_api)
    manifest = _manifest("noev")
    where = _where(k8s_namespace, "noev")
    written = evidence_collection.write_node_records(
        _NoEvents(op_api), store, EvidenceSettings(), where, manifest, datetime.now(UTC)
    )
    assert len(written) == 3
    for node in written:
        record = parse_node_record(store.get(where.key.node(node)))
        assert record is not None and "events: forbidden" in record.unavailable
    said = [e for e in core.list_namespaced_event(k8s_namespace).items if e.reason == "EvidenceForbidden"]
    assert len(said) == 1 and "verbs [list]" in said[0].message


def test_a_store_that_refuses_costs_only_the_records(op_api: client.ApiClient, k8s_namespace: str) -> None:
    class Refusing:
        def put(self, *_: Any, **__: Any) -> str:
            raise FrwatchError("store down")

    written = evidence_collection.write_node_records(
        Kube(op_api), Refusing(), EvidenceSettings(), _where(k8s_namespace, "down"), _manifest("down"),  # type: ignore[arg-type]
        datetime.now(UTC),
    )  # fmt: skip
    assert written == []
