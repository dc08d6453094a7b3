"""The source step in the Analyzing phase (issue 17, ``analyzer.sourceFromImage``), against the API emulator
and a real S3 store: the verdict is surfaced first, then ``analysisStep: SourceCopy`` while the copy Job runs
in the training job's namespace (its copy from the image of the training pod as the API shows it, handed over
through a presigned URL for one key), then ``Source`` while the render Job runs, and the phase Reported
when it ends. A source step that fails, or cannot start, never takes the verdict back: the Incident says
why, and so does report.html."""

from __future__ import annotations

import json
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
from frwatch_analyzers.store.layout import AttemptKey
from frwatch_operator.analysis import source_handover
from frwatch_operator.analysis.analyzing import AnalysisRequest, advance_analysis, start_analysis
from frwatch_operator.config import AnalyzerSettings, Config
from frwatch_operator.errors import FatalError
from frwatch_operator.store.s3 import S3Store


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
    assert status["phase"] == "Analyzing" and status["analysisStep"] == "SourceCopy", status
    assert status["suspectRanks"] == [1] and status["reportHtmlUrl"].endswith("/report.html")  # the verdict is out
    annotations = custom.get_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", "llama")["metadata"]["annotations"]
    assert annotations["frwatch.io/suspect-ranks"] == "1"
    copying = _jobs(api_client, ns)[status["analyzerSourceJob"]]
    assert copying["metadata"]["ownerReferences"][0]["uid"] == body["metadata"]["uid"]
    pod = copying["spec"]["template"]["spec"]
    (copier,) = pod["initContainers"]
    assert copier["image"] == "registry.example/team/trainer:7"  # from the pod, never from the store
    assert any(a.endswith("dev/frwatch_dev/workloads/faulty_training.py") for a in copier["command"])
    assert {"name": "regcred"} in pod["imagePullSecrets"]  # the Incident's namespace: the pod's own pull Secret
    ((hand_over,),) = [pod["containers"]]
    [put_url] = [e["value"] for e in hand_over["env"] if e["name"] == source_handover.ENV_PUT_URL]
    body = write_status(custom, body, status)

    # a restarted operator resumes from the status: it looks at the copy Job, creates nothing more
    running = advance_analysis(body, config=config, kube=kube, store=store, settings=settings(config))
    assert not running.done and len(_jobs(api_client, ns)) == 2
    assert running.status["message"].startswith(body["status"]["verdict"]["short"] + "; source step: copy Job ")

    # the hand-over container's PUT, through the URL the Job holds: that one key only
    source_handover.put(put_url, json.dumps({"version": 1, "files": {"/app/train.py": "x = 1\n"}}).encode())
    assert store.exists(f"{key.root}/{source_handover.BUNDLE_KEY}")
    finish_job(client.BatchV1Api(api_client), core, copying, condition="Complete")
    patch_copier_message(core, ns, copying, "copied 1 of 1 files")
    started = advance_analysis(
        get_incident(custom, ns, body["metadata"]["name"]), config=config, kube=kube, store=store,
        settings=settings(config),
    )  # fmt: skip
    assert not started.done and started.status["analysisStep"] == "Source", started.status
    rendering = _jobs(api_client, ns)[started.status["analyzerSourceJob"]]
    assert rendering["metadata"]["name"].endswith("-src")
    assert rendering["metadata"]["annotations"]["frwatch.io/source-copied"] == "copied 1 of 1 files"
    images = {x["image"] for k in ("initContainers", "containers") for x in rendering["spec"]["template"]["spec"][k]}
    assert "registry.example/team/trainer:7" not in images  # the render Job runs frwatch's image only
    body = write_status(custom, body, started.status)

    finish_job(client.BatchV1Api(api_client), core, rendering, condition="Failed", reason="DeadlineExceeded", exit_code=2)
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


def patch_copier_message(core: Any, ns: str, job: dict[str, Any], message: str) -> None:
    """The copy container's termination message on the finished Job's pod, as the kubelet records it."""
    name = f"{job['metadata']['name']}-x7k2p"
    terminated = {"exitCode": 0, "reason": "Completed", "message": message}
    core.patch_namespaced_pod_status(name, ns, {"status": {"initContainerStatuses": [
        {"name": "copy-source", "image": "t", "imageID": "", "ready": False, "restartCount": 0,
         "state": {"terminated": terminated}}]}})  # fmt: skip


@pytest.mark.slow
def test_a_copy_job_that_fails_ends_the_step_without_a_render_job(
    real_dumps: Any, s3: Any, k8s_namespace: str, crds: None, core: Any, custom: Any, kube: Any, api_client: Any
) -> None:
    ns = k8s_namespace
    store, config, _, body, _ = _setup(real_dumps, s3, ns, custom, kube, api_client)
    core.create_namespaced_pod(ns, {"metadata": {"name": "llama-worker-0"}, "spec": {
        "containers": [{"name": "pytorch", "image": "registry.example/team/trainer:7"}]}})  # fmt: skip
    status = advance_analysis(body, config=config, kube=kube, store=store, settings=settings(config)).status
    body = write_status(custom, body, status)
    copying = _jobs(api_client, ns)[status["analyzerSourceJob"]]
    finish_job(client.BatchV1Api(api_client), core, copying, condition="Failed", reason="DeadlineExceeded", exit_code=2)
    ended = advance_analysis(
        get_incident(custom, ns, body["metadata"]["name"]), config=config, kube=kube, store=store,
        settings=settings(config),
    )  # fmt: skip
    assert ended.done and ended.status["phase"] == "Reported"
    assert ended.status["sourceReport"].startswith("report.html without code: copy Job "), ended.status
    assert len(_jobs(api_client, ns)) == 2  # the analyzer's and the copy: no render Job


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


@pytest.mark.slow
def test_without_an_upload_url_no_job_runs_in_the_tenants_namespace(
    real_dumps: Any, s3: Any, k8s_namespace: str, crds: None, core: Any, custom: Any, kube: Any, api_client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The operator's store cannot sign (keyless, denied): the step ends at once saying why; no copy Job is
    made that could hand nothing over."""
    ns = k8s_namespace
    store, config, key, body, _ = _setup(real_dumps, s3, ns, custom, kube, api_client)
    core.create_namespaced_pod(ns, {"metadata": {"name": "llama-worker-0"}, "spec": {
        "containers": [{"name": "pytorch", "image": "registry.example/team/trainer:7"}]}})  # fmt: skip

    def refused(*_: Any, **__: Any) -> str:
        raise FatalError("S3 presign put: no credentials")

    monkeypatch.setattr(store, "presign_put", refused)
    step = advance_analysis(body, config=config, kube=kube, store=store, settings=settings(config))
    assert step.done and step.status["phase"] == "Reported" and step.status["suspectRanks"] == [1]
    assert step.status["sourceReport"].startswith(
        "report.html without code: no upload URL could be made for the hand-over: S3 presign put"
    ), step.status
    assert len(_jobs(api_client, ns)) == 1  # the analyzer's only
    assert "no upload URL could be made" in store.get(key.report_html).decode()
