"""OpenAPI v3 and server-side field validation, through the real kubectl: `kubectl apply` validates without
--validate=false, refuses a misspelled field as a real server does, and `kubectl explain` describes CRDs
(from their openAPIV3Schema) and built-in kinds (from the release's own schemas)."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path

from frwatch_dev.localcluster import openapi
from frwatch_dev.localcluster.apiserver import ApiServerHandle

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
ROOT = Path(__file__).resolve().parents[2]
POLICY = """apiVersion: frwatch.io/v1alpha1
kind: CapturePolicy
metadata: {{name: {name}, namespace: {ns}}}
spec:
  {field}:
    matchLabels: {{team: llm}}
"""


def test_apply_refuses_a_misspelled_capturepolicy_field_and_accepts_the_right_one(
    kubectl: Kubectl, k8s_namespace: str
) -> None:
    kubectl("apply", "-f", str(ROOT / "crds" / "capturepolicy.yaml"))
    wrong = kubectl(
        "apply", "-f", "-", stdin=POLICY.format(name="p", ns=k8s_namespace, field="selector"), check=False
    )
    assert wrong.returncode != 0
    assert (
        'CapturePolicy in version "v1alpha1" cannot be handled as a CapturePolicy: strict decoding error: '
        'unknown field "spec.selector"' in wrong.stderr
    ), wrong.stderr
    assert "NotFound" in kubectl("get", "capturepolicy", "p", "-n", k8s_namespace, check=False).stderr

    kubectl("apply", "-f", "-", stdin=POLICY.format(name="p", ns=k8s_namespace, field="jobSelector"))
    made = json.loads(kubectl("get", "capturepolicy", "p", "-n", k8s_namespace, "-o", "json").stdout)
    assert made["spec"]["jobSelector"] == {"matchLabels": {"team": "llm"}}
    # a later apply (a patch) with an unknown field is refused too, and changes nothing
    again = kubectl(
        "apply", "-f", "-", stdin=POLICY.format(name="p", ns=k8s_namespace, field="jobSelectr"), check=False
    )
    assert again.returncode != 0 and 'unknown field "spec.jobSelectr"' in again.stderr, again.stderr


def test_apply_refuses_an_unknown_field_of_a_built_in_kind(kubectl: Kubectl, k8s_namespace: str) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": k8s_namespace},
           "spec": {"containers": [{"name": "a", "image": "busybox", "imagePullPolcy": "Always"}]}}  # fmt: skip
    out = kubectl("apply", "-f", "-", stdin=json.dumps(pod), check=False)
    assert 'unknown field "spec.containers[0].imagePullPolcy"' in out.stderr, out.stderr
    del pod["spec"]["containers"][0]["imagePullPolcy"]  # type: ignore[index]
    kubectl("apply", "-f", "-", stdin=json.dumps(pod))


def test_warn_is_the_default_and_ignore_says_nothing(k8s_api: ApiServerHandle, k8s_namespace: str) -> None:
    def post(name: str, query: str) -> tuple[int, list[str]]:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}, "datum": 1}
        req = urllib.request.Request(
            f"{k8s_api.url}/api/v1/namespaces/{k8s_namespace}/configmaps{query}",
            data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers.get_all("Warning") or []

    assert post("warned", "") == (201, ['299 - "unknown field \\"datum\\""'])
    assert post("ignored", "?fieldValidation=Ignore") == (201, [])


def test_explain_describes_a_crd_and_a_built_in_kind(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(ROOT / "crds" / "capturepolicy.yaml"))
    spec = kubectl("explain", "capturepolicies.spec").stdout
    assert "KIND:       CapturePolicy" in spec and "jobSelector\t<Object>" in spec, spec
    image = kubectl("explain", "pods.spec.containers.image").stdout
    assert "FIELD: image <string>" in image and "Container image name" in image, image


def test_the_index_names_each_document_with_its_hash(k8s_api: ApiServerHandle) -> None:
    with urllib.request.urlopen(f"{k8s_api.url}/openapi/v3", timeout=10) as resp:
        index = json.loads(resp.read())["paths"]
    assert index["api/v1"]["serverRelativeURL"].startswith("/openapi/v3/api/v1?hash=")
    with urllib.request.urlopen(k8s_api.url + index["api/v1"]["serverRelativeURL"], timeout=10) as resp:
        doc = json.loads(resp.read())
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "kind": "Pod", "version": "v1"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"]


def test_a_custom_resource_s_metadata_is_checked_as_object_meta(k8s_api: ApiServerHandle, kubectl: Kubectl) -> None:
    """metadata of a custom resource follows ObjectMeta (a built-in type): its free-form parts
    (managedFields[].fieldsV1) are not unknown fields, a misspelled key is."""
    kubectl("apply", "-f", str(ROOT / "crds" / "capturepolicy.yaml"))
    rt = k8s_api.call(lambda store: store.type_for("frwatch.io", "v1alpha1", "capturepolicies"))
    assert rt is not None
    body = {"metadata": {"name": "p", "labels": {"a": "b"}, "lables": {},
                         "managedFields": [{"manager": "x", "fieldsV1": {"f:spec": {"f:jobSelector": {}}}}]},
            "spec": {"jobSelector": {}, "jobSelectr": {}}}  # fmt: skip
    assert openapi.unknown_fields(rt, body) == ["metadata.lables", "spec.jobSelectr"]


def test_frwatch_crds_leave_no_field_open() -> None:
    """No x-kubernetes-preserve-unknown-fields (nor additionalProperties: true) anywhere in frwatch's CRDs:
    a real API server refuses a misspelled field under kubectl's Strict validation, as the emulator does."""
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        text = path.read_text()
        assert "x-kubernetes-preserve-unknown-fields" not in text, path
        assert "additionalProperties: true" not in text, path
