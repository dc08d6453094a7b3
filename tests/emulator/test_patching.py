"""The three patch formats and the status subresource, over HTTP and as pure functions."""

from __future__ import annotations

import pytest
from emulator_helpers import pod, pytorchjob
from kubernetes import client
from kubernetes.client.rest import ApiException

from frwatch_dev.localcluster import patching
from frwatch_dev.localcluster.errors import ApiError


def test_strategic_merge_merges_containers_env_and_volumes_by_name(
    core: client.CoreV1Api, k8s_namespace: str
) -> None:
    core.create_namespaced_pod(k8s_namespace, pod("p"))
    patched = core.patch_namespaced_pod(
        "p",
        k8s_namespace,
        {
            "spec": {  # a dict body: strategic merge
                "containers": [
                    {
                        "name": "trainer",
                        "env": [{"name": "TORCH_FR_BUFFER_SIZE", "value": "2000"}],
                        "volumeMounts": [{"name": "dumps", "mountPath": "/dumps"}],
                    }
                ],
                "initContainers": [{"name": "frwatch-agent", "image": "frwatch", "restartPolicy": "Always"}],
                "volumes": [{"name": "dumps", "emptyDir": {}}],
            }
        },
    )
    (trainer,) = patched.spec.containers
    assert trainer.image == "pytorch"  # kept
    assert [(e.name, e.value) for e in trainer.env] == [("A", "1"), ("TORCH_FR_BUFFER_SIZE", "2000")]
    assert [m.mount_path for m in trainer.volume_mounts] == ["/dumps"]
    assert [c.name for c in patched.spec.init_containers] == ["frwatch-agent"]
    assert [v.name for v in patched.spec.volumes] == ["dumps"]


def test_strategic_merge_directives() -> None:
    original = {
        "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
        "metadata": {"finalizers": ["one"]},
    }
    assert patching.strategic_merge_patch(
        original, {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}
    ) == {"spec": {"containers": [{"name": "b", "image": "y"}]}, "metadata": {"finalizers": ["one"]}}
    assert patching.strategic_merge_patch(original, {"metadata": {"finalizers": ["two"]}})["metadata"] == {
        "finalizers": ["one", "two"]
    }
    assert patching.strategic_merge_patch(
        original, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["one"]}}
    )["metadata"] == {"finalizers": []}
    replaced = patching.strategic_merge_patch(original, {"spec": {"$patch": "replace", "containers": []}})
    assert replaced["spec"] == {"containers": []}
    # a list without a merge strategy (tolerations) is replaced, as in Kubernetes
    assert patching.strategic_merge_patch(
        {"tolerations": [{"key": "a"}]}, {"tolerations": [{"key": "b"}]}
    ) == {"tolerations": [{"key": "b"}]}


def test_merge_patch_replaces_lists_and_null_deletes(core: client.CoreV1Api, k8s_namespace: str) -> None:
    core.create_namespaced_pod(k8s_namespace, pod("p", labels={"a": "1", "b": "2"}))
    patched = core.patch_namespaced_pod(
        "p",
        k8s_namespace,
        {"metadata": {"labels": {"a": None}}, "spec": {"containers": [{"name": "x", "image": "i"}]}},
        _content_type="application/merge-patch+json",
    )
    assert patched.metadata.labels == {"b": "2"}
    assert [c.name for c in patched.spec.containers] == ["x"]


def test_json_patch_with_a_failing_test_is_422_and_changes_nothing(
    core: client.CoreV1Api, k8s_namespace: str
) -> None:
    created = core.create_namespaced_pod(k8s_namespace, pod("p"))
    rv = created.metadata.resource_version
    ok = core.patch_namespaced_pod(
        "p",
        k8s_namespace,
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/metadata/annotations", "value": {"frwatch.io/injected": "true"}},
        ],
    )
    assert ok.metadata.annotations == {"frwatch.io/injected": "true"}
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod(
            "p",
            k8s_namespace,
            [
                {"op": "test", "path": "/metadata/resourceVersion", "value": rv},  # stale now
                {"op": "replace", "path": "/metadata/annotations", "value": {}},
            ],
        )
    assert err.value.status == 422
    assert core.read_namespaced_pod("p", k8s_namespace).metadata.annotations == {
        "frwatch.io/injected": "true"
    }


def test_json_patch_ops() -> None:
    doc = {"a": {"b": [1, 2]}, "c": "x"}
    out = patching.json_patch(
        doc,
        [
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "remove", "path": "/a/b/0"},
            {"op": "copy", "from": "/c", "path": "/d"},
            {"op": "move", "from": "/c", "path": "/e"},
            {"op": "add", "path": "/a/x~1y", "value": 0},
        ],
    )
    assert out == {"a": {"b": [2, 3], "x/y": 0}, "d": "x", "e": "x"}
    assert doc == {"a": {"b": [1, 2]}, "c": "x"}  # untouched
    with pytest.raises(ApiError) as err:
        patching.json_patch(doc, [{"op": "remove", "path": "/nope"}])
    assert err.value.code == 422


def test_status_subresource_separates_spec_and_status(
    custom: client.CustomObjectsApi, k8s_namespace: str, pytorchjob_crd: dict
) -> None:
    args = ("kubeflow.org", "v1", k8s_namespace, "pytorchjobs")
    created = custom.create_namespaced_custom_object(*args, {**pytorchjob("j"), "status": {"conditions": []}})
    assert "status" not in created  # status is not settable on create
    main = custom.patch_namespaced_custom_object(*args, "j", {"status": {"conditions": [{"type": "Failed"}]}})
    assert "status" not in main  # the main resource ignores status
    status = custom.patch_namespaced_custom_object_status(
        *args,
        "j",
        {"spec": {"runPolicy": {"x": 1}}, "status": {"conditions": [{"type": "Running", "status": "True"}]}},
    )
    assert status["status"] == {"conditions": [{"type": "Running", "status": "True"}]}
    assert "runPolicy" not in status["spec"]  # the status endpoint ignores spec


def test_pod_status_subresource(core: client.CoreV1Api, k8s_namespace: str) -> None:
    core.create_namespaced_pod(k8s_namespace, pod("p"))
    core.patch_namespaced_pod_status(
        "p",
        k8s_namespace,
        {
            "status": {
                "phase": "Failed",
                "containerStatuses": [
                    {
                        "name": "trainer",
                        "ready": False,
                        "restartCount": 0,
                        "image": "pytorch",
                        "imageID": "",
                        "state": {"terminated": {"exitCode": 1, "reason": "Error"}},
                    }
                ],
            }
        },
    )
    got = core.read_namespaced_pod_status("p", k8s_namespace)
    assert got.status.phase == "Failed"
    assert got.status.container_statuses[0].state.terminated.exit_code == 1


def test_strategic_merge_on_a_custom_resource_is_415(
    api_client: client.ApiClient, custom: client.CustomObjectsApi, k8s_namespace: str, pytorchjob_crd: dict
) -> None:
    args = ("kubeflow.org", "v1", k8s_namespace, "pytorchjobs")
    custom.create_namespaced_custom_object(*args, pytorchjob("j"))
    with pytest.raises(ApiException) as err:
        custom.patch_namespaced_custom_object(
            *args,
            "j",
            {"metadata": {"labels": {"a": "b"}}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert err.value.status == 415


def test_unknown_fields_of_a_custom_resource_are_pruned(
    custom: client.CustomObjectsApi, k8s_namespace: str, pytorchjob_crd: dict
) -> None:
    args = ("kubeflow.org", "v1", k8s_namespace, "pytorchjobs")
    created = custom.create_namespaced_custom_object(*args, {**pytorchjob("j"), "extra": {"dropped": True}})
    assert "extra" not in created
    assert created["spec"]["pytorchReplicaSpecs"]["Worker"] == {"replicas": 3}  # preserve-unknown-fields
    status = custom.patch_namespaced_custom_object_status(
        *args,
        "j",
        {"status": {"conditions": [{"type": "Running", "undeclared": "x"}], "frwatchUndeclared": 1}},
    )
    assert status["status"] == {"conditions": [{"type": "Running"}]}
