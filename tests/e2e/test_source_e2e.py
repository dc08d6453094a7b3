"""The bridge to the code in a cluster (issue 17): once the verdict is on the job, the source step copies the
files the branch's frames name from the training job's own image (an init container running that image's
Python) and report.html in the store shows the deciding condition and its line, as ``frwatch analyze
--source`` does locally (tests/htmlreport/test_code_bridge.py); a source step that cannot run keeps the
verdict, and the Incident and the report say why.

Where it runs (issue 25 item 6): the copy Job, the only place the training image runs, is created in the
training job's own namespace with no service-account token, a read-only root, limits, a total deadline and
no frwatch credentials in any container (a presigned URL for one key is all it holds); the render Job in
frwatch's namespace runs frwatch's image only.

The real gloo skip workload: rank 1 skips a gradient all_reduce. Reading the store needs its endpoint and
reader keys: on the local cluster the namespace's ``frwatch-s3`` Secret and the local store; against a real
cluster ``FRWATCH_E2E_S3_ENDPOINT`` and ``FRWATCH_E2E_S3_READ_SECRET`` (else ``frwatch-s3``), and the
operator installed as ``conftest.source_target``/``source_broken_target`` say.
"""

from __future__ import annotations

import base64
import os
from typing import Any

import boto3
import botocore.config
import pytest
from e2e_helpers import NO_PYTHON, WORKLOAD, Target
from kubernetes import client

from frwatch_analyzers.store.layout import RootUrl
from frwatch_dev import workloads
from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: What decides rank 1's path in the skip workload (tests/htmlreport/test_code_bridge.py checks the same).
CONDITION = "if bug and scenario is Scenario.SKIP:"
#: A verdict, the source Job and the report: the analyzer's pod and the source Job's pod, one after the other.
TIMEOUT = 240


def line_of(text: str) -> int:
    """The workload's line holding ``text`` (found, not hard-coded)."""
    path = os.path.join(os.path.dirname(workloads.__file__), "faulty_training.py")
    with open(path, encoding="utf-8") as f:
        [n] = [i for i, line in enumerate(f.read().splitlines(), 1) if text in line]
    return n


def report_html(target: Target, incident: dict[str, Any]) -> str:
    """report.html of the incident's attempt, read from the store."""
    secret = os.environ.get("FRWATCH_E2E_S3_READ_SECRET", "frwatch-s3")
    data = target.core.read_namespaced_secret(secret, target.namespace).data
    keys = {k: base64.b64decode(v).decode() for k, v in data.items()}
    endpoint = os.environ.get("FRWATCH_E2E_S3_ENDPOINT") or (target.local.store.endpoint if target.local else "")
    if not endpoint:
        pytest.skip("set FRWATCH_E2E_S3_ENDPOINT to read the report in the store")
    root = RootUrl.parse(incident["spec"]["storageUrl"])
    s3 = boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=keys[c.ENV_AWS_ACCESS_KEY_ID], aws_secret_access_key=keys[c.ENV_AWS_SECRET_ACCESS_KEY],
        config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
    )  # fmt: skip
    assert incident["status"]["reportHtmlUrl"] == root.report_html_url, incident["status"]
    body = s3.get_object(Bucket=root.bucket, Key=root.key("report.html"))["Body"]
    return body.read().decode()  # type: ignore[no-any-return]


def root_url(incident: dict[str, Any]) -> str:
    return str(RootUrl.parse(incident["spec"]["storageUrl"]))


def copy_job(target: Target, incident: dict[str, Any]) -> dict[str, Any]:
    """The incident's copy Job, read from the training job's namespace (marked with the Incident's uid)."""
    jobs = client.BatchV1Api(target.api).list_namespaced_job(target.namespace).items
    uid = incident["metadata"]["uid"]
    [job] = [j for j in jobs if (j.metadata.annotations or {}).get(c.ANN_INCIDENT_UID) == uid]
    return target.api.sanitize_for_serialization(job)  # type: ignore[no-any-return]


def assert_nothing_to_steal(job: dict[str, Any], training_image: str) -> None:
    """The copy Job as the API holds it: the tenant's image runs in it with no token, no keys, no Secret."""
    spec = job["spec"]
    assert spec["activeDeadlineSeconds"] > 0 and spec["backoffLimit"] == 0, spec
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False
    containers = pod["initContainers"] + pod["containers"]
    assert [x["image"] for x in pod["initContainers"]] == [training_image]  # the tenant's image: here only
    for container in containers:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True, container
        assert container["securityContext"]["runAsNonRoot"] is True, container
        assert container["resources"]["limits"]["memory"] and container["resources"]["limits"]["cpu"], container
        assert not container.get("envFrom"), container
        for var in container.get("env") or []:
            assert "valueFrom" not in var and not var["name"].startswith("AWS_"), var
    assert "env" not in pod["initContainers"][0]
    assert all("secret" not in v and "projected" not in v for v in pod.get("volumes") or []), pod["volumes"]


def test_the_report_in_the_store_shows_the_deciding_condition_and_its_line(source_target: Target) -> None:
    target = source_target
    name = target.submit([*WORKLOAD, "--scenario", "skip"])
    ann = target.wait_verdict(name, timeout=TIMEOUT)
    assert ann[c.ANN_SUSPECT_RANKS] == "1", ann
    incident = target.reported_incident(name, timeout=TIMEOUT)  # Reported: the source step has ended
    status = incident["status"]
    assert status["analysisStep"] == "Source" and status["analyzerSourceJob"].endswith("-src"), status
    assert status["sourceReport"].startswith("report.html shows the code"), (status, target.diagnostics())
    assert status["analyzerSourceJob"] in target.analyzer_jobs(incident)
    copied = copy_job(target, incident)  # in the job's own namespace, never in frwatch's
    assert copied["metadata"]["namespace"] == target.namespace != target.operator_lease[0]
    assert copied["metadata"]["name"] not in target.analyzer_jobs(incident)
    assert_nothing_to_steal(copied, target.image)
    rendering = client.BatchV1Api(target.api).read_namespaced_job(status["analyzerSourceJob"], target.operator_lease[0])
    pod = rendering.spec.template.spec
    # frwatch's own programs only (the copier, the training image's Python, ran in the job's namespace)
    assert [(x.name, x.command[:3]) for x in pod.init_containers + pod.containers] == [
        ("fetch-source", ["frwatch", "source", "fetch"]), (c.ANALYZER_CONTAINER, ["frwatch", "analyze", root_url(incident)]),
    ]  # fmt: skip
    assert status["message"].startswith(ann[c.ANN_VERDICT]) and "report.html shows the code" in status["message"]
    assert ann[c.ANN_REPORT_HTML] == status["reportHtmlUrl"]  # the job's annotation links to it
    page = report_html(target, incident)
    line = line_of(CONDITION)
    assert f"faulty_training.py:{line}</span>" in page, page[-3000:]
    assert "rank-local state" in page and 'class="l cond"' in page and 'class="l call"' in page
    assert 'id="needs-source"' not in page
    said = target.events(incident["metadata"]["name"], "SourceReport")
    assert any(m.startswith("report.html shows the code") for m in said), said


def test_a_source_step_that_cannot_run_keeps_the_verdict_and_says_why(source_broken_target: Target) -> None:
    target = source_broken_target
    name = target.submit([*WORKLOAD, "--scenario", "skip"])
    ann = target.wait_verdict(name, timeout=TIMEOUT)
    assert ann[c.ANN_SUSPECT_RANKS] == "1" and ann[c.ANN_CATEGORY], ann
    incident = target.reported_incident(name, timeout=TIMEOUT)
    status = incident["status"]
    assert status["phase"] == "Reported" and status["suspectRanks"] == [1], status  # the verdict stands
    report = status["sourceReport"]
    assert report.startswith("report.html without code: "), (status, target.diagnostics())
    assert "StartError" in report and NO_PYTHON in report, report  # the copy never started: why, in its words
    page = report_html(target, incident)
    assert 'id="needs-source"' in page and "The code could not be copied from the training image" in page
    assert NO_PYTHON in page
    said = target.events(incident["metadata"]["name"], "SourceReport")
    assert any(m.startswith("report.html without code") for m in said), said
    assert target.annotations(name)[c.ANN_VERDICT] == ann[c.ANN_VERDICT]  # nothing taken back
