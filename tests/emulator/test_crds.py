"""CustomResourceDefinitions: creating one serves its resource; deleting it takes the resource away."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

REPO = Path(__file__).resolve().parents[2]


def crd(group: str, plural: str, kind: str, scope: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def test_a_cluster_scoped_crd_is_served_without_namespaces(api_client: client.ApiClient, raw) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    created = ext.create_custom_resource_definition(
        crd("cluster.frwatch.io", "breakers", "Breaker", "Cluster")
    )
    assert {c.type: c.status for c in created.status.conditions} == {
        "NamesAccepted": "True",
        "Established": "True",
    }
    custom = client.CustomObjectsApi(api_client)
    custom.create_cluster_custom_object(
        "cluster.frwatch.io",
        "v1",
        "breakers",
        {
            "apiVersion": "cluster.frwatch.io/v1",
            "kind": "Breaker",
            "metadata": {"name": "global"},
            "spec": {"open": True},
        },
    )
    got = custom.get_cluster_custom_object("cluster.frwatch.io", "v1", "breakers", "global")
    assert "namespace" not in got["metadata"] and got["spec"] == {"open": True}
    code, doc = raw("GET", "/apis/cluster.frwatch.io/v1")
    assert code == 200
    assert [(r["name"], r["namespaced"], r["kind"]) for r in doc["resources"]] == [
        ("breakers", False, "Breaker")
    ]
    code, _ = raw("GET", "/apis/cluster.frwatch.io/v1/namespaces/default/breakers")
    assert code == 404

    ext.delete_custom_resource_definition("breakers.cluster.frwatch.io")
    with pytest.raises(ApiException) as err:
        custom.list_cluster_custom_object("cluster.frwatch.io", "v1", "breakers")
    assert err.value.status == 404
    code, groups = raw("GET", "/apis")
    assert "cluster.frwatch.io" not in [g["name"] for g in groups["groups"]]


def test_a_crd_named_against_its_spec_is_422(api_client: client.ApiClient) -> None:
    bad = crd("x.frwatch.io", "things", "Thing", "Namespaced")
    bad["metadata"]["name"] = "wrong.x.frwatch.io"
    with pytest.raises(ApiException) as err:
        client.ApiextensionsV1Api(api_client).create_custom_resource_definition(bad)
    assert err.value.status == 422


def test_discovery_of_built_in_groups(raw) -> None:
    _, core = raw("GET", "/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["namespaced"] and not by_name["nodes"]["namespaced"]
    assert {"pods/status", "events", "secrets", "configmaps", "services", "namespaces"} <= set(by_name)
    _, groups = raw("GET", "/apis")
    names = {g["name"] for g in groups["groups"]}
    assert {"batch", "coordination.k8s.io", "events.k8s.io", "apiextensions.k8s.io"} <= names
    _, batch = raw("GET", "/apis/batch/v1")
    assert {r["name"] for r in batch["resources"]} == {"jobs", "jobs/status"}


@pytest.mark.parametrize("path", sorted((REPO / "crds").glob("*.yaml")) or [None])
def test_the_projects_crds_are_served(
    api_client: client.ApiClient, path: Path | None, k8s_namespace: str
) -> None:
    if path is None:
        pytest.skip("no CRDs in crds/ yet")
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        ext = client.ApiextensionsV1Api(api_client)
        existing = {c.metadata.name for c in ext.list_custom_resource_definition().items}
        if doc["metadata"]["name"] not in existing:
            ext.create_custom_resource_definition(doc)
        spec = doc["spec"]
        version = next(v["name"] for v in spec["versions"] if v.get("served", True))
        custom = client.CustomObjectsApi(api_client)
        if spec["scope"] == "Namespaced":
            listed = custom.list_namespaced_custom_object(
                spec["group"], version, k8s_namespace, spec["names"]["plural"]
            )
        else:
            listed = custom.list_cluster_custom_object(spec["group"], version, spec["names"]["plural"])
        assert listed["items"] == []


def test_a_batch_job_and_its_status(api_client: client.ApiClient, kubectl, k8s_namespace: str) -> None:
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job(
        k8s_namespace,
        {
            "metadata": {"name": "frwatch-analyze-x"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "a", "image": "frwatch", "command": ["frwatch"]}],
                    }
                }
            },
        },
    )
    batch.patch_namespaced_job_status(
        "frwatch-analyze-x",
        k8s_namespace,
        {"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}},
    )
    assert batch.read_namespaced_job("frwatch-analyze-x", k8s_namespace).status.succeeded == 1
    out = kubectl("get", "jobs", "-n", k8s_namespace).stdout.splitlines()
    assert out[1].split()[:3] == ["frwatch-analyze-x", "Complete", "1/1"]
