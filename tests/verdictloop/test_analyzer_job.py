"""The analyzer Job as the API stores it: the fields that matter, pinned (no credentials, the S3 Secret,
owner, deadline, retries, clean-up, command, termination message), and its life with the Incident."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client
from vl_builders import analyzing, create_incident, create_pytorchjob, settings

from frwatch_operator import constants as c
from frwatch_operator.analysis.analyzer_job import (
    analysis_budget_seconds,
    analyzer_job_name,
    worker_count,
)
from frwatch_operator.analysis.analyzing import AnalysisRequest, start_analysis
from frwatch_operator.config import AnalyzerSettings, Config, S3Settings
from frwatch_operator.errors import FatalError, RetryableError
from frwatch_operator.kube.names import label_value
from frwatch_operator.resources import ComputeResources

KUBE_VERSION = "1.32.0"
S3 = S3Settings(
    endpoint_url="http://seaweedfs.storage:8333", region="eu-west-1", credentials_secret="team-s3"
)
CONFIG = Config(
    s3=S3, analyzer=AnalyzerSettings(image="registry.local/frwatch:0.1.0", ttl_seconds_after_finished=600)
)


def config_for(namespace: str, **analyzer: Any) -> Config:
    """CONFIG with the analyzer Jobs run in ``namespace`` (and a CapturePolicy allowed to pick the image)."""
    changes = {"namespace": namespace, "allow_policy_image": True, **analyzer}
    return CONFIG.model_copy(update={"analyzer": CONFIG.analyzer.model_copy(update=changes)})


@pytest.fixture
def opened(k8s_namespace: str, crds: None, custom: Any) -> tuple[dict[str, Any], str]:
    job = create_pytorchjob(custom, k8s_namespace)
    url = f"s3://frwatch/frwatch/{k8s_namespace}/llama/{job['metadata']['uid']}/0"
    return create_incident(custom, k8s_namespace, job, storage_url=url, status=analyzing()), url


def created_job(api_client: Any, ns: str) -> dict[str, Any]:
    """The one Job of the namespace, as the API serves it (a raw GET: apiVersion and kind included)."""
    from frwatch_operator.kube.adapter import Kube

    (job,) = client.BatchV1Api(api_client).list_namespaced_job(ns).items
    got = Kube(api_client).get_batch_job(ns, job.metadata.name)
    assert got is not None
    return got


def test_the_job_as_created(opened: Any, k8s_namespace: str, kube: Any, api_client: Any) -> None:
    incident, url = opened
    meta = incident["metadata"]
    policy = settings(config_for(k8s_namespace), analyzer_image="registry.local/frwatch:0.2.0", analyzer_deadline_seconds=1234,
                      analyzer_resources=ComputeResources(requests={"cpu": "2"}, limits={"cpu": "2500m", "memory": "8Gi"}))  # fmt: skip
    step = start_analysis(AnalysisRequest(k8s_namespace, meta["name"], meta["uid"], url, policy), config_for(k8s_namespace), kube=kube)
    job = created_job(api_client, k8s_namespace)
    assert job["metadata"]["name"] == step.status["analyzerJob"] == f"frwatch-analyze-{meta['name']}"
    kubernetes_validate.validate(job, KUBE_VERSION, strict=True)

    # owned by the Incident: deleted with it
    (owner,) = job["metadata"]["ownerReferences"]
    assert owner == {"apiVersion": "frwatch.io/v1alpha1", "kind": "Incident", "name": meta["name"],
                     "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    assert job["metadata"]["labels"][c.LABEL_INCIDENT] == meta["name"]
    spec = job["spec"]
    assert spec["activeDeadlineSeconds"] == 1234  # the policy's
    assert spec["backoffLimit"] == CONFIG.analyzer.backoff_limit
    assert spec["ttlSecondsAfterFinished"] == 600
    pod = spec["template"]["spec"]
    # no Kubernetes credentials in the pod
    assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False
    assert "serviceAccountName" not in pod and "serviceAccount" not in pod
    assert all("projected" not in v and "secret" not in v for v in pod["volumes"])
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["image"] == "registry.local/frwatch:0.2.0"
    assert container["resources"] == {"requests": {"cpu": "2"}, "limits": {"cpu": "2500m", "memory": "8Gi"}}
    assert container["command"] == [
        "frwatch", "analyze", url, "--format", "json", "--out", f"{url}/verdict.json", "--report-out",
        f"{url}/report.txt", "--html", f"{url}/report.html", "--termination-log", "/dev/termination-log",
        "--jobs", "3",
        "--deadline-seconds", "1111",  # the Job's 1234 s less a tenth: time left to write the verdict
    ]  # fmt: skip
    assert "imagePullSecrets" not in pod  # none configured
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    # S3: endpoint and region as values, credentials only as references to the Secret
    env = {e["name"]: e for e in container["env"]}
    assert env["AWS_ENDPOINT_URL_S3"]["value"] == "http://seaweedfs.storage:8333"
    assert "AWS_ENDPOINT_URL" not in env  # the global one would send STS (web identity) to the S3 endpoint
    assert env["AWS_REGION"]["value"] == "eu-west-1"
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env[key] == {
            "name": key,
            "valueFrom": {"secretKeyRef": {"name": "team-s3", "key": key, "optional": True}},
        }
    assert not any("KUBE" in name or "TOKEN" in name for name in env)

    # the Incident's Event says it started
    events = client.CoreV1Api(api_client).list_namespaced_event(k8s_namespace).items
    assert [e.reason for e in events if e.involved_object.kind == "Incident"] == ["AnalyzerStarted"]


def test_deleting_the_incident_deletes_its_job(
    opened: Any, k8s_namespace: str, kube: Any, api_client: Any, custom: Any
) -> None:
    incident, url = opened
    meta = incident["metadata"]
    start_analysis(
        AnalysisRequest(k8s_namespace, meta["name"], meta["uid"], url, settings(CONFIG)), config_for(k8s_namespace), kube=kube
    )
    custom.delete_namespaced_custom_object(c.GROUP, c.VERSION, k8s_namespace, c.INCIDENT_PLURAL, meta["name"])
    assert client.BatchV1Api(api_client).list_namespaced_job(k8s_namespace).items == []


def test_a_job_left_by_an_earlier_incident_of_the_same_name(
    opened: Any, k8s_namespace: str, kube: Any, api_client: Any
) -> None:
    incident, url = opened
    meta = incident["metadata"]
    start_analysis(
        AnalysisRequest(k8s_namespace, meta["name"], "uid-of-an-older-incident", url, settings(CONFIG)),
        config_for(k8s_namespace),
        kube=kube,
    )
    with pytest.raises(RetryableError, match="earlier Incident of the same name"):
        start_analysis(
            AnalysisRequest(k8s_namespace, meta["name"], meta["uid"], url, settings(CONFIG)), config_for(k8s_namespace), kube=kube
        )
    assert client.BatchV1Api(api_client).list_namespaced_job(k8s_namespace).items == []
    start_analysis(
        AnalysisRequest(k8s_namespace, meta["name"], meta["uid"], url, settings(CONFIG)), config_for(k8s_namespace), kube=kube
    )
    assert created_job(api_client, k8s_namespace)["metadata"]["ownerReferences"][0]["uid"] == meta["uid"]


def test_by_default_the_job_runs_in_the_operators_namespace_with_the_analyzers_credentials(
    opened: Any, k8s_namespace: str, kube: Any, api_client: Any
) -> None:
    """Not in the tenant's namespace (its users could read the credentials or change the pod), not owned
    across namespaces (impossible): named after the Incident's namespace too, its uid in an annotation; a
    CapturePolicy's image is ignored unless the operator allows it."""
    incident, url = opened
    meta = incident["metadata"]
    home = f"op-{k8s_namespace[-8:]}"
    client.CoreV1Api(api_client).create_namespace({"metadata": {"name": home}})
    config = config_for(home, allow_policy_image=False, credentials_secret="frwatch-s3-analyzer")
    policy = settings(config, analyzer_image="tenant.example/evil:1")
    step = start_analysis(AnalysisRequest(k8s_namespace, meta["name"], meta["uid"], url, policy), config, kube=kube)
    assert client.BatchV1Api(api_client).list_namespaced_job(k8s_namespace).items == []
    job = created_job(api_client, home)
    assert step.status["analyzerNamespace"] == home
    assert job["metadata"]["name"] == step.status["analyzerJob"] == analyzer_job_name(meta["name"], k8s_namespace)
    assert analyzer_job_name(meta["name"], k8s_namespace) != analyzer_job_name(meta["name"], "other-team")
    assert "ownerReferences" not in job["metadata"]
    assert job["metadata"]["annotations"][c.ANN_INCIDENT_UID] == meta["uid"]
    assert job["metadata"]["labels"][c.LABEL_INCIDENT_NAMESPACE] == k8s_namespace
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["image"] == CONFIG.analyzer.image
    env = {e["name"]: e for e in container["env"]}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "frwatch-s3-analyzer"
    # a second call finds its own Job (the annotation says whose it is)
    again = start_analysis(AnalysisRequest(k8s_namespace, meta["name"], meta["uid"], url, policy), config, kube=kube)
    assert again.status["analyzerJob"] == step.status["analyzerJob"]


def test_a_request_without_an_s3_url_is_refused(kube: Any) -> None:
    with pytest.raises(FatalError, match="storageUrl"):
        start_analysis(AnalysisRequest("ns", "inc", "uid", "/local/path", settings(CONFIG)), config_for("ns"), kube=kube)


@pytest.mark.parametrize(
    ("resources", "workers"),
    [({}, 1), ({"requests": {"cpu": "500m"}}, 1), ({"requests": {"cpu": "4"}}, 4),
     ({"requests": {"cpu": "1"}, "limits": {"cpu": "1500m"}}, 2), ({"limits": {"cpu": "lots"}}, 1)],
)  # fmt: skip
def test_workers_follow_the_cpu_share_not_the_nodes_cores(resources: dict[str, Any], workers: int) -> None:
    assert worker_count(ComputeResources.model_validate(resources)) == workers


def test_long_incident_names_still_make_valid_names() -> None:
    name = "a-very-long-training-job-name-from-a-research-team-" * 3 + "attempt-12"
    job_name = analyzer_job_name(name)
    assert (
        len(job_name) <= 63
        and job_name.startswith("frwatch-analyze-")
        and job_name != analyzer_job_name(name + "x")
    )
    value = label_value(name)
    assert len(value) <= 63 and value[0].isalnum() and value[-1].isalnum()


def test_the_analyzer_pod_pulls_with_the_configured_secrets(
    opened: Any, k8s_namespace: str, kube: Any, api_client: Any
) -> None:
    incident, url = opened
    meta = incident["metadata"]
    config = config_for(k8s_namespace, image_pull_secrets="regcred, mirror-cred")
    start_analysis(AnalysisRequest(k8s_namespace, meta["name"], meta["uid"], url, settings(config)), config, kube=kube)
    pod = created_job(api_client, k8s_namespace)["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror-cred"}]


@pytest.mark.parametrize(("deadline", "budget"), [(1234, 1111), (600, 540), (60, 30), (40, 20), (1, 1)])
def test_the_analyzer_stops_decoding_before_the_jobs_deadline(deadline: int, budget: int) -> None:
    assert analysis_budget_seconds(deadline) == budget
