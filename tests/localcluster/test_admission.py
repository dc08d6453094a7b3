"""Pod CREATE goes through mutating webhooks as on a real API server: the real frwatch webhook over HTTP
(MutatingWebhookConfiguration -> AdmissionReview -> JSONPatch), failurePolicy, and selectors."""

from __future__ import annotations

import pytest
from kube import Kube, env_of, jobs_path, pytorchjob, wait_for

from frwatch_dev.localcluster.cluster import LocalCluster
from frwatch_operator import constants as c
from frwatch_operator.webhook import JobIndex

MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def sleeper(name: str, ns: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "0.1"]}]},
    }  # fmt: skip


def test_pods_of_an_opted_in_job_are_injected_and_others_are_not(
    kube: Kube, ns: str, job_index: JobIndex
) -> None:
    sleep = ["python", "-c", "pass"]
    job_index.upsert_job(
        kube.create(jobs_path(ns), pytorchjob("inj", ns, capture=True, workers=1, command=sleep))
    )
    job_index.upsert_job(kube.create(jobs_path(ns), pytorchjob("plain", ns, workers=1, command=sleep)))
    pods = wait_for(lambda: len(kube.pods(ns)) == 4 and kube.pods(ns), 20, "4 pods")
    by_name = {p["metadata"]["name"]: p for p in pods}
    for name in ("inj-master-0", "inj-worker-0"):
        pod = by_name[name]
        assert pod["metadata"]["annotations"][c.ANN_INJECTED]
        assert pod["spec"]["initContainers"][0]["name"] == c.AGENT_CONTAINER
        env = env_of(pod["spec"]["containers"][0])
        assert env[c.ENV_FR_DUMP_TEMP_FILE] == f"{c.DUMP_MOUNT_PATH}/{c.DUMP_FILE_PREFIX}"
        assert env[c.ENV_POD_NAME] == "<valueFrom>"  # the downward API, resolved by the kubelet
        assert {v["name"] for v in pod["spec"]["volumes"]} >= {c.DUMP_VOLUME}
    for name in ("plain-master-0", "plain-worker-0"):
        assert c.ANN_INJECTED not in (by_name[name]["metadata"].get("annotations") or {})
        assert "initContainers" not in by_name[name]["spec"]


def test_kubectl_created_pod_is_mutated_too(cluster: LocalCluster, ns: str, job_index: JobIndex) -> None:
    job_index.upsert_job(
        {"kind": "PyTorchJob", "metadata": {"name": "byhand", "namespace": ns, "uid": "u-1",
                                            "annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED}}}
    )  # fmt: skip
    import json

    body = sleeper("byhand-pod", ns, {c.KF_LABEL_JOB_NAME: "byhand"})
    cluster.kubectl("create", "--validate=false", "-f", "-", stdin=json.dumps(body))
    out = json.loads(cluster.kubectl("get", "pod", "byhand-pod", "-n", ns, "-o", "json").stdout)
    assert out["metadata"]["annotations"][c.ANN_INJECTED]
    assert [x["name"] for x in out["spec"]["initContainers"]] == [c.AGENT_CONTAINER]


@pytest.mark.parametrize("policy", ["Ignore", "Fail"])
def test_failure_policy_of_an_unreachable_webhook(kube: Kube, ns: str, policy: str) -> None:
    name = f"broken-{policy.lower()}"
    kube.create(MWC, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{"name": f"{name}.example.com", "clientConfig": {"url": "http://127.0.0.1:9/nowhere"},
                      "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                      "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                      "failurePolicy": policy, "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 2}],
    })  # fmt: skip
    try:
        if policy == "Ignore":
            created = kube.create(f"/api/v1/namespaces/{ns}/pods", sleeper("p", ns))
            assert created["metadata"]["name"] == "p"
        else:
            with pytest.raises(
                AssertionError, match=r'HTTP 500.*failed calling webhook \\"broken-fail.example.com\\"'
            ):
                kube.create(f"/api/v1/namespaces/{ns}/pods", sleeper("p", ns))
    finally:
        kube.delete(f"{MWC}/{name}")


def test_webhook_that_matches_no_selector_is_not_called(kube: Kube, ns: str) -> None:
    kube.create(MWC, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "elsewhere"},
        "webhooks": [{"name": "elsewhere.example.com", "clientConfig": {"url": "http://127.0.0.1:9/nowhere"},
                      "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                      "objectSelector": {"matchLabels": {"app": "other"}},
                      "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"]}],
    })  # fmt: skip
    try:
        assert kube.create(f"/api/v1/namespaces/{ns}/pods", sleeper("q", ns, {"app": "mine"}))
    finally:
        kube.delete(f"{MWC}/elsewhere")
