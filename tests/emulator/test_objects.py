"""Object metadata and the write verbs, pinned with the real kubernetes client."""

from __future__ import annotations

import pytest
from emulator_helpers import pod, pytorchjob
from kubernetes import client
from kubernetes.client.rest import ApiException


def test_create_fills_uid_resource_version_timestamps_and_namespace(
    core: client.CoreV1Api, k8s_namespace: str
) -> None:
    created = core.create_namespaced_pod(k8s_namespace, pod("p1"))
    assert created.metadata.uid and len(created.metadata.uid) == 36
    assert created.metadata.namespace == k8s_namespace
    assert created.metadata.creation_timestamp is not None
    assert created.status.phase == "Pending"
    other = core.create_namespaced_config_map(k8s_namespace, {"metadata": {"name": "c"}, "data": {"k": "v"}})
    assert int(other.metadata.resource_version) > int(created.metadata.resource_version)
    assert other.metadata.uid != created.metadata.uid


def test_every_write_changes_the_resource_version_but_a_no_op_does_not(
    core: client.CoreV1Api, k8s_namespace: str
) -> None:
    cm = core.create_namespaced_config_map(k8s_namespace, {"metadata": {"name": "c"}, "data": {"k": "v"}})
    changed = core.patch_namespaced_config_map("c", k8s_namespace, {"data": {"k": "w"}})
    assert int(changed.metadata.resource_version) > int(cm.metadata.resource_version)
    same = core.patch_namespaced_config_map("c", k8s_namespace, {"data": {"k": "w"}})
    assert same.metadata.resource_version == changed.metadata.resource_version


def test_generation_bumps_on_spec_changes_only(
    custom: client.CustomObjectsApi, k8s_namespace: str, pytorchjob_crd: dict
) -> None:
    args = ("kubeflow.org", "v1", k8s_namespace, "pytorchjobs")
    job = custom.create_namespaced_custom_object(*args, pytorchjob("llama"))
    assert job["metadata"]["generation"] == 1
    job = custom.patch_namespaced_custom_object(*args, "llama", {"metadata": {"annotations": {"a": "b"}}})
    assert job["metadata"]["generation"] == 1
    job = custom.patch_namespaced_custom_object_status(
        *args, "llama", {"status": {"conditions": [{"type": "Running"}]}}
    )
    assert job["metadata"]["generation"] == 1
    job = custom.patch_namespaced_custom_object(
        *args, "llama", {"spec": {"runPolicy": {"cleanPodPolicy": "None"}}}
    )
    assert job["metadata"]["generation"] == 2


def test_generate_name(core: client.CoreV1Api, k8s_namespace: str) -> None:
    body = {"metadata": {"generateName": "frwatch-analyze-"}, "data": {}}
    names = {core.create_namespaced_config_map(k8s_namespace, body).metadata.name for _ in range(3)}
    assert len(names) == 3
    assert all(n.startswith("frwatch-analyze-") and len(n) == len("frwatch-analyze-") + 5 for n in names)


def test_create_twice_is_409_already_exists(core: client.CoreV1Api, k8s_namespace: str) -> None:
    core.create_namespaced_pod(k8s_namespace, pod("p1"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(k8s_namespace, pod("p1"))
    assert err.value.status == 409
    assert '"reason": "AlreadyExists"' in err.value.body
    assert 'pods \\"p1\\" already exists' in err.value.body


def test_replace_with_a_stale_resource_version_is_409_conflict(
    core: client.CoreV1Api, k8s_namespace: str
) -> None:
    cm = core.create_namespaced_config_map(k8s_namespace, {"metadata": {"name": "c"}, "data": {"k": "v"}})
    stale = cm.metadata.resource_version
    cm.data = {"k": "first"}
    replaced = core.replace_namespaced_config_map("c", k8s_namespace, cm)
    assert replaced.data == {"k": "first"}
    cm.data = {"k": "second"}
    cm.metadata.resource_version = stale
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("c", k8s_namespace, cm)
    assert err.value.status == 409
    assert '"reason": "Conflict"' in err.value.body
    assert core.read_namespaced_config_map("c", k8s_namespace).data == {"k": "first"}


def test_custom_resource_replace_needs_a_resource_version(
    custom: client.CustomObjectsApi, k8s_namespace: str, pytorchjob_crd: dict
) -> None:
    args = ("kubeflow.org", "v1", k8s_namespace, "pytorchjobs")
    custom.create_namespaced_custom_object(*args, pytorchjob("j"))
    with pytest.raises(ApiException) as err:
        custom.replace_namespaced_custom_object(*args, "j", pytorchjob("j"))
    assert err.value.status == 422


def test_missing_object_is_404_status(core: client.CoreV1Api, raw, k8s_namespace: str) -> None:
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("nope", k8s_namespace)
    assert err.value.status == 404
    code, body = raw("GET", f"/api/v1/namespaces/{k8s_namespace}/pods/nope")
    assert code == 404
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "code": 404,
        "details": {"name": "nope", "kind": "pods"},
    }
    code, body = raw("GET", "/apis/nothing.example/v1/things")
    assert (code, body["reason"]) == (404, "NotFound")


def test_invalid_names_and_labels_are_422(core: client.CoreV1Api, k8s_namespace: str) -> None:
    for bad in (pod("Upper_Case"), pod("ok", labels={"frwatch.io/suspect-ranks": "3,7"})):
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod(k8s_namespace, bad)
        assert err.value.status == 422
        assert '"reason": "Invalid"' in err.value.body


def test_objects_need_an_existing_namespace(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("no-such-namespace", pod("p"))
    assert err.value.status == 404
    assert 'namespaces \\"no-such-namespace\\" not found' in err.value.body


def test_finalizers_hold_deletion_until_they_are_removed(core: client.CoreV1Api, k8s_namespace: str) -> None:
    body = {"metadata": {"name": "c", "finalizers": ["frwatch.io/keep"]}}
    core.create_namespaced_config_map(k8s_namespace, body)
    core.delete_namespaced_config_map("c", k8s_namespace)
    marked = core.read_namespaced_config_map("c", k8s_namespace)
    assert marked.metadata.deletion_timestamp is not None
    core.delete_namespaced_config_map("c", k8s_namespace)  # a second delete changes nothing
    with pytest.raises(ApiException) as err:  # no new finalizers on a dying object
        core.patch_namespaced_config_map(
            "c", k8s_namespace, {"metadata": {"finalizers": ["frwatch.io/keep", "x.io/y"]}}
        )
    assert err.value.status == 422
    core.patch_namespaced_config_map("c", k8s_namespace, [{"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("c", k8s_namespace)
    assert err.value.status == 404


def test_deleting_an_owner_deletes_its_dependents(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, k8s_namespace: str, pytorchjob_crd: dict
) -> None:
    args = ("kubeflow.org", "v1", k8s_namespace, "pytorchjobs")
    job = custom.create_namespaced_custom_object(*args, pytorchjob("owner"))
    ref = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "owner",
        "uid": job["metadata"]["uid"],
        "controller": True,
    }
    owned = pod("owner-master-0")
    owned["metadata"]["ownerReferences"] = [ref]
    core.create_namespaced_pod(k8s_namespace, owned)
    core.create_namespaced_pod(k8s_namespace, pod("bystander"))
    custom.delete_namespaced_custom_object(*args, "owner")
    assert [p.metadata.name for p in core.list_namespaced_pod(k8s_namespace).items] == ["bystander"]


def test_deleting_a_namespace_deletes_its_contents(core: client.CoreV1Api, k8s_namespace: str) -> None:
    core.create_namespaced_pod(k8s_namespace, pod("p"))
    core.delete_namespace(k8s_namespace)
    with pytest.raises(ApiException) as err:
        core.read_namespace(k8s_namespace)
    assert err.value.status == 404
    assert core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={k8s_namespace}").items == []


def test_delete_collection_by_label(core: client.CoreV1Api, k8s_namespace: str) -> None:
    for i, role in enumerate(["master", "worker", "worker"]):
        core.create_namespaced_pod(k8s_namespace, pod(f"p{i}", labels={"role": role}))
    core.delete_collection_namespaced_pod(k8s_namespace, label_selector="role=worker")
    assert [p.metadata.name for p in core.list_namespaced_pod(k8s_namespace).items] == ["p0"]


def test_server_side_dry_run_stores_nothing(core: client.CoreV1Api, k8s_namespace: str) -> None:
    core.create_namespaced_pod(k8s_namespace, pod("p"), dry_run="All")
    assert core.list_namespaced_pod(k8s_namespace).items == []


def test_events_in_core_v1_are_events_k8s_io_v1_too(
    api_client: client.ApiClient, core: client.CoreV1Api, k8s_namespace: str
) -> None:
    core.create_namespaced_event(
        k8s_namespace,
        {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": k8s_namespace},
            "reason": "Captured",
            "message": "dump uploaded",
            "type": "Normal",
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingComponent": "frwatch",
            "reportingInstance": "op-1",
        },
    )
    events = client.EventsV1Api(api_client).list_namespaced_event(k8s_namespace).items
    assert [(e.regarding.name, e.reason, e.note) for e in events] == [("p", "Captured", "dump uploaded")]


def test_paginated_list(core: client.CoreV1Api, k8s_namespace: str) -> None:
    for i in range(5):
        core.create_namespaced_config_map(k8s_namespace, {"metadata": {"name": f"c{i}"}})
    first = core.list_namespaced_config_map(k8s_namespace, limit=2)
    assert [c.metadata.name for c in first.items] == ["c0", "c1"]
    rest = core.list_namespaced_config_map(k8s_namespace, limit=10, _continue=first.metadata._continue)
    assert [c.metadata.name for c in rest.items] == ["c2", "c3", "c4"]
    assert rest.metadata._continue is None
