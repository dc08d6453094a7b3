"""Label and field selectors on lists, as the real client sends them."""

from __future__ import annotations

import pytest
from emulator_helpers import pod
from kubernetes import client
from kubernetes.client.rest import ApiException

from frwatch_dev.localcluster.selectors import labels_match, parse_label_selector


@pytest.fixture
def pods(core: client.CoreV1Api, k8s_namespace: str) -> str:
    job = "training.kubeflow.org/job-name"
    core.create_namespaced_pod(
        k8s_namespace, pod("llama-master-0", {job: "llama", "role": "master"}, node="n1")
    )
    core.create_namespaced_pod(
        k8s_namespace, pod("llama-worker-0", {job: "llama", "role": "worker"}, node="n2")
    )
    core.create_namespaced_pod(k8s_namespace, pod("other", {"role": "worker"}, node="n2"))
    core.patch_namespaced_pod_status("other", k8s_namespace, {"status": {"phase": "Running"}})
    return k8s_namespace


def names(items: list) -> list[str]:
    return [i.metadata.name for i in items]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("training.kubeflow.org/job-name=llama", ["llama-master-0", "llama-worker-0"]),
        ("training.kubeflow.org/job-name==llama,role=worker", ["llama-worker-0"]),
        ("training.kubeflow.org/job-name!=llama", ["other"]),
        ("role in (master, chief)", ["llama-master-0"]),
        ("role notin (master)", ["llama-worker-0", "other"]),
        ("training.kubeflow.org/job-name", ["llama-master-0", "llama-worker-0"]),
        ("!training.kubeflow.org/job-name", ["other"]),
    ],
)
def test_label_selectors(core: client.CoreV1Api, pods: str, selector: str, expected: list[str]) -> None:
    assert names(core.list_namespaced_pod(pods, label_selector=selector).items) == expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("spec.nodeName=n2", ["llama-worker-0", "other"]),
        ("spec.nodeName=n2,status.phase!=Running", ["llama-worker-0"]),
        ("status.phase=Running", ["other"]),
        ("metadata.name=other", ["other"]),
    ],
)
def test_field_selectors(core: client.CoreV1Api, pods: str, selector: str, expected: list[str]) -> None:
    assert names(core.list_namespaced_pod(pods, field_selector=selector).items) == expected


def test_unsupported_field_and_malformed_label_selectors_are_400(core: client.CoreV1Api, pods: str) -> None:
    for kwargs in ({"field_selector": "spec.containers=x"}, {"label_selector": "role in master"}):
        with pytest.raises(ApiException) as err:
            core.list_namespaced_pod(pods, **kwargs)
        assert err.value.status == 400


def test_all_namespaces_and_namespace_field(core: client.CoreV1Api, pods: str) -> None:
    core.create_namespace({"metadata": {"name": f"{pods}-2"}})
    core.create_namespaced_pod(f"{pods}-2", pod("llama-master-0", {"role": "master"}))
    everywhere = core.list_pod_for_all_namespaces(label_selector="role=master").items
    assert {(pods, "llama-master-0"), (f"{pods}-2", "llama-master-0")} <= {
        (p.metadata.namespace, p.metadata.name) for p in everywhere
    }
    assert names(
        core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={pods},spec.nodeName=n1").items
    ) == ["llama-master-0"]


def test_event_field_selectors(core: client.CoreV1Api, k8s_namespace: str) -> None:
    for name, target in (("e1", "llama"), ("e2", "other")):
        core.create_namespaced_event(
            k8s_namespace,
            {
                "metadata": {"name": name},
                "reason": "Diagnosed",
                "involvedObject": {"kind": "PyTorchJob", "name": target, "namespace": k8s_namespace},
            },
        )
    found = core.list_namespaced_event(
        k8s_namespace,
        field_selector="involvedObject.kind=PyTorchJob,involvedObject.name=llama,reason=Diagnosed",
    )
    assert names(found.items) == ["e1"]


def test_label_selector_parser() -> None:
    reqs = parse_label_selector("a in (x,y), !b, c!=z")
    assert labels_match(reqs, {"metadata": {"labels": {"a": "x"}}})
    assert not labels_match(reqs, {"metadata": {"labels": {"a": "x", "b": ""}}})
    assert not labels_match(reqs, {"metadata": {"labels": {"a": "x", "c": "z"}}})
