"""The source step in the Analyzing phase (issue 17, ``analyzer.sourceFromImage``), against the API emulator
and a real S3 store: the verdict is surfaced first, then ``analysisStep: Source`` while the source Job runs
(its copy from the image of the training pod as the API shows it), and the phase Reported when it ends. A
source step that fails, or cannot start, never takes the verdict back: the Incident says why, and so does
report.html."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from vl_builders import (
    analyzing,
    create_incident,
    create_pytorchjob,
    events_about,
    finish_job,
    get_incident,
    settings,
    write_status,
)

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.layout import AttemptKey
from frwatch_operator.config import AnalyzerSettings, Config
from frwatch_operator.s3store import S3Store
from frwatch_operator.verdictloop import AnalysisRequest, advance_analysis, start_analysis


def _jobs(api_client: Any, ns: str) -> dict[str, dict[str, Any]]:
    items = client.BatchV1Api(api_client).list_namespaced_job(ns).items
    return {j.metadata.name: api_client.sanitize_for_serialization(j) for j in items}


def _setup(real_dumps: Any, s3: Any, ns: str, custom: Any, kube: Any, api_client: Any) -> tuple[Any, ...]:
    """An Incident whose analyzer Job ended with the skip workload's verdict in the store."""
    store = S3Store(s3.settings())
    config = Config(s3=s3.settings(), analyzer=AnalyzerSettings(namespace=ns, source_from_image=True))
    job = create_pytorchjob(custom, ns)
    key = AttemptKey("frwatch", ns, "llama", job["metadata"]["uid"], "0")
    verdict = analyze(str(real_dumps("skip")), jobs=1)
    store.put(key.verdict, verdict.model_dump_json().encode())
    url = f"s3://{s3.bucket}/{key.root}"
    incident = create_incident(custom, ns, job, storage_url=url, status=analyzing())
    meta = incident["metadata"]
    step = start_analysis(AnalysisRequest(ns, meta["name"], meta["uid"], url, settings(config)), config, kube=kube)
    body = write_status(custom, incident, step.status)
    (analyzer,) = _jobs(api_client, ns).values()
    finish_job(client.BatchV1Api(api_client), client.CoreV1Api(api_client), analyzer, condition="Complete")
    return store, config, key, get_incident(custom, ns, meta["name"]), body


@pytest.mark.slow
def test_the_source_job_runs_after_the_verdict_and_its_failure_keeps_it(
    real_dumps: Any, s3: Any, k8s_namespace: str, crds: None, core: Any, custom: Any, kube: Any, api_client: Any
) -> None:
    ns = k8s_namespace
    store, config, key, body, _ = _setup(real_dumps, s3, ns, custom, kube, api_client)
    # the training pod as the API shows it: the image the copy runs (the agent sidecar is not it)
    core.create_namespaced_pod(ns, {"metadata": {"name": "llama-worker-0"}, "spec": {
        "imagePullSecrets": [{"name": "regcred"}],
        "initContainers": [{"name": "frwatch-agent", "image": "ghcr.io/frwatch/frwatch:0.1.0", "restartPolicy": "Always"}],
        "containers": [{"name": "pytorch", "image": "registry.example/team/trainer:7"}]}})  # fmt: skip

    surfaced = advance_analysis(body, config=config, kube=kube, store=store, settings=settings(config))
    assert not surfaced.done and surfaced.retry_after
    status = surfaced.status
    assert status["phase"] == "Analyzing" and status["analysisStep"] == "Source", status
    assert status["suspectRanks"] == [1] and status["reportHtmlUrl"].endswith("/report.html")  # the verdict is out
    annotations = custom.get_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", "llama")["metadata"]["annotations"]
    assert annotations["frwatch.io/suspect-ranks"] == "1"
    source = _jobs(api_client, ns)[status["analyzerSourceJob"]]
    pod = source["spec"]["template"]["spec"]
    (copier,) = pod["initContainers"]
    assert copier["image"] == "registry.example/team/trainer:7"  # from the pod, never from the store
    assert any(a.endswith("dev/frwatch_dev/workloads/faulty_training.py") for a in copier["command"])
    assert {"name": "regcred"} in pod["imagePullSecrets"]  # the Incident's namespace: the pod's own pull Secret
    body = write_status(custom, body, status)

    # a restarted operator resumes from the status: it looks at the source Job, creates nothing more
    running = advance_analysis(body, config=config, kube=kube, store=store, settings=settings(config))
    assert not running.done and len(_jobs(api_client, ns)) == 2
    assert running.status["message"].startswith(body["status"]["verdict"]["short"] + "; source step: source Job ")

    finish_job(client.BatchV1Api(api_client), core, source, condition="Failed", reason="DeadlineExceeded", exit_code=2)
    ended = advance_analysis(
        get_incident(custom, ns, body["metadata"]["name"]), config=config, kube=kube, store=store,
        settings=settings(config),
    )  # fmt: skip
    assert ended.done
    written = write_status(custom, body, ended.status)["status"]
    assert written["phase"] == "Reported" and written["suspectRanks"] == [1] and written["category"]
    assert written["sourceReport"].startswith("report.html without code: source Job "), written
    assert "ran out of time" in written["sourceReport"]
    assert written["message"].startswith(written["verdict"]["short"] + "; report.html without code"), written
    page = store.get(key.report_html).decode()
    assert "The code could not be copied from the training image: source Job" in page and 'id="needs-source"' in page
    said = [e.message for e in events_about(core, ns, body["metadata"]["name"]) if e.reason == "SourceReport"]
    assert len(said) == 2 and any(m.startswith("report.html without code") for m in said), said


@pytest.mark.slow
def test_without_a_training_image_the_incident_is_reported_at_once_saying_why(
    real_dumps: Any, s3: Any, k8s_namespace: str, crds: None, core: Any, custom: Any, kube: Any, api_client: Any
) -> None:
    ns = k8s_namespace
    store, config, key, body, _ = _setup(real_dumps, s3, ns, custom, kube, api_client)
    # the pods are gone and this PyTorchJob's replica specs name no container: nowhere to copy from
    step = advance_analysis(body, config=config, kube=kube, store=store, settings=settings(config))
    assert step.done and step.status["phase"] == "Reported" and step.status["suspectRanks"] == [1]
    assert step.status["sourceReport"].startswith("report.html without code: no training image found"), step.status
    assert len(_jobs(api_client, ns)) == 1  # no source Job
    assert "no training image found" in store.get(key.report_html).decode()
