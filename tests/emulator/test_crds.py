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


POLICY_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["bucket"],
            "properties": {
                "bucket": {"type": "string", "minLength": 3},
                "bufferSize": {"type": "integer", "minimum": 0, "default": 2000},
                "remediation": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "mode": {"type": "string", "enum": ["off", "dry-run", "on"], "default": "dry-run"}
                    },
                },
                "deadline": {"x-kubernetes-int-or-string": True},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


@pytest.fixture(scope="module")
def policies(api_client: client.ApiClient) -> client.CustomObjectsApi:
    body = crd("schema.frwatch.io", "policies", "Policy", "Namespaced")
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = POLICY_SCHEMA
    body["spec"]["versions"][0]["subresources"] = {"status": {}}
    client.ApiextensionsV1Api(api_client).create_custom_resource_definition(body)
    return client.CustomObjectsApi(api_client)


def policy(name: str, **spec: object) -> dict:
    return {"apiVersion": "schema.frwatch.io/v1", "kind": "Policy", "metadata": {"name": name}, "spec": spec}


def test_schema_defaults_are_applied(policies: client.CustomObjectsApi, k8s_namespace: str) -> None:
    created = policies.create_namespaced_custom_object(
        "schema.frwatch.io", "v1", k8s_namespace, "policies", policy("p", bucket="frwatch", deadline="5m")
    )
    assert created["spec"] == {
        "bucket": "frwatch",
        "bufferSize": 2000,
        "remediation": {"mode": "dry-run"},
        "deadline": "5m",
    }


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"bucket": "frwatch", "bufferSize": "big"}, "spec.bufferSize"),
        ({"bucket": "frwatch", "bufferSize": -1}, "spec.bufferSize"),
        ({"bucket": "frwatch", "remediation": {"mode": "always"}}, "spec.remediation.mode"),
        ({"bufferSize": 1}, "spec.bucket"),
        ({"bucket": "x"}, "spec.bucket"),
        ({"bucket": "frwatch", "deadline": 1.5}, "spec.deadline"),
    ],
)
def test_schema_violations_are_422(
    policies: client.CustomObjectsApi, k8s_namespace: str, spec: dict, field: str
) -> None:
    with pytest.raises(ApiException) as err:
        policies.create_namespaced_custom_object(
            "schema.frwatch.io", "v1", k8s_namespace, "policies", policy("p", **spec)
        )
    assert err.value.status == 422
    assert f'"field": "{field}"' in err.value.body


def test_status_writes_are_validated_too(policies: client.CustomObjectsApi, k8s_namespace: str) -> None:
    args = ("schema.frwatch.io", "v1", k8s_namespace, "policies")
    policies.create_namespaced_custom_object(*args, policy("p", bucket="frwatch"))
    with pytest.raises(ApiException) as err:
        policies.patch_namespaced_custom_object_status(*args, "p", {"status": {"phase": 3}})
    assert err.value.status == 422
    assert policies.patch_namespaced_custom_object_status(*args, "p", {"status": {"phase": "Detected"}})[
        "status"
    ] == {"phase": "Detected"}
