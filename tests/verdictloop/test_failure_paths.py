"""The Analyzing phase when things go wrong, and the hardware path end to end: the analyzer Job fails or
runs out of time, the verdict is missing or malformed, the job or the analyzer Job is deleted meanwhile,
a Job that never finishes; and a hardware-class verdict cordoning (or dry-running) through the same pass."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client
from vl_builders import (
    analyzing,
    bound,
    create_incident,
    create_node,
    create_pytorchjob,
    events_about,
    finish_job,
    get_incident,
    hardware_verdict,
    node_agent_says,
    set_observed,
    settings,
    write_status,
)

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_operator import constants as c
from frwatch_operator.analysis.analyzing import AnalysisRequest, advance_analysis, start_analysis
from frwatch_operator.config import AnalyzerSettings, Config, RemediationSettings
from frwatch_operator.kube.adapter import Kube
from frwatch_operator.store.s3 import S3Store


@dataclass
class Case:
    ns: str
    config: Config
    store: S3Store
    key: AttemptKey
    url: str
    job: dict[str, Any]
    incident: dict[str, Any]
    analyzer: dict[str, Any]

    def body(self, custom: client.CustomObjectsApi) -> dict[str, Any]:
        return get_incident(custom, self.ns, self.incident["metadata"]["name"])


@pytest.fixture
def case(
    k8s_namespace: str, crds: None, s3: Any, custom: Any, kube: Kube, api_client: Any
) -> Case:
    ns = k8s_namespace
    config = Config(
        s3=s3.settings(),
        analyzer=AnalyzerSettings(namespace=ns), remediation=RemediationSettings(breaker_namespace=ns, breaker_configmap="breaker")
    )
    store = S3Store(s3.settings())
    job = create_pytorchjob(custom, ns)
    key = AttemptKey("frwatch", ns, "llama", job["metadata"]["uid"], "0")
    url = f"s3://{s3.bucket}/{key.root}"
    incident = create_incident(custom, ns, job, storage_url=url, status=analyzing())
    meta = incident["metadata"]
    start_analysis(AnalysisRequest(ns, meta["name"], meta["uid"], url, settings(config)), config, kube=kube)
    (analyzer,) = [
        api_client.sanitize_for_serialization(j)
        for j in client.BatchV1Api(api_client).list_namespaced_job(ns).items
    ]
    return Case(ns, config, store, key, url, job, incident, analyzer)


def advance(
    case: Case, custom: Any, kube: Any, config: Config | None = None, now: datetime | None = None
) -> tuple[Any, dict[str, Any]]:
    body = case.body(custom)
    cfg = config or case.config
    step = advance_analysis(body, config=cfg, kube=kube, store=case.store, settings=settings(cfg), now=now)
    status = write_status(custom, body, step.status)["status"] if step.status else body.get("status", {})
    return step, status


def reasons(core: Any, ns: str, name: str) -> dict[str, str]:
    return {e.reason: e.message for e in events_about(core, ns, name)}


@pytest.mark.parametrize(
    ("reason", "words"),
    [("DeadlineExceeded", "ran out of time"), ("BackoffLimitExceeded", "failed on every try")],
)
def test_analyzer_job_fails(case: Case, custom: Any, core: Any, kube: Any, api_client: Any, kubectl: Any,
                            reason: str, words: str) -> None:  # fmt: skip
    finish_job(client.BatchV1Api(api_client), core, case.analyzer, condition="Failed", reason=reason,
               message="Job was active longer than specified deadline", exit_code=2,
               termination_message="frwatch analyze: no verdict: s3://x: 403 AccessDenied")  # fmt: skip
    step, status = advance(case, custom, kube)
    assert step.done and status["phase"] == "Failed"
    analyzed = next(x for x in status["conditions"] if x["type"] == "Analyzed")
    assert analyzed["status"] == "False" and analyzed["reason"] == reason
    assert words in status["message"] and "exit 2 (no verdict could be made)" in status["message"]
    assert "AccessDenied" in status["message"]
    on_job = reasons(core, case.ns, "llama")
    assert "AnalysisFailed" in on_job and reason in on_job["AnalysisFailed"]
    assert "AnalysisFailed" in reasons(core, case.ns, case.incident["metadata"]["name"])
    assert "Failed" in kubectl("get", "incidents", "-n", case.ns).stdout
    assert c.ANN_VERDICT not in (custom.get_namespaced_custom_object(
        c.KF_GROUP, c.KF_VERSION, case.ns, c.KF_PLURAL, "llama")["metadata"].get("annotations") or {})  # fmt: skip


def test_verdict_missing(case: Case, custom: Any, core: Any, kube: Any, api_client: Any) -> None:
    finish_job(
        client.BatchV1Api(api_client), core, case.analyzer, condition="Complete", termination_message=""
    )
    step, status = advance(case, custom, kube)
    assert step.done and status["phase"] == "Failed"
    assert next(x for x in status["conditions"] if x["type"] == "Analyzed")["reason"] == "VerdictMissing"
    assert f"{case.url}/verdict.json does not exist" in status["message"]


@pytest.mark.parametrize(
    ("data", "says"),
    [(b"\x80\x04not json at all", "is not a valid verdict"),
     (b'{"status": "problem", "category": "gpu_hang"}', "headline"),
     (b'{"status": "problem", "category": "cosmic_ray", "headline": "x"}', "category"),
     (b'{"schema_version": "frwatch.io/verdict/v9", "status": "healthy", "category": "healthy", "headline": "x"}',
      "schema_version")],
)  # fmt: skip
def test_verdict_malformed(
    case: Case, custom: Any, core: Any, kube: Any, api_client: Any, data: bytes, says: str
) -> None:
    case.store.put(case.key.verdict, data)
    finish_job(client.BatchV1Api(api_client), core, case.analyzer, condition="Complete")
    step, status = advance(case, custom, kube)
    assert step.done and status["phase"] == "Failed"
    assert next(x for x in status["conditions"] if x["type"] == "Analyzed")["reason"] == "VerdictMalformed"
    assert says in status["message"]


def test_job_deleted_while_analysing_orphaning_the_incident(
    case: Case, custom: Any, core: Any, kube: Any, api_client: Any
) -> None:
    case.store.put(case.key.verdict, hardware_verdict("node-3").model_dump_json().encode())
    custom.delete_namespaced_custom_object(c.KF_GROUP, c.KF_VERSION, case.ns, c.KF_PLURAL, "llama",
                                           propagation_policy="Orphan")  # fmt: skip
    finish_job(client.BatchV1Api(api_client), core, case.analyzer, condition="Complete")
    cfg = case.config.model_copy(
        update={"remediation": case.config.remediation.model_copy(update={"enabled": True, "dry_run": False})}
    )
    create_node(core, "node-3")
    step, status = advance(case, custom, kube, config=cfg)
    assert step.done and status["phase"] == "Reported"
    assert "deleted while it was analysed" in status["message"]
    assert not any(x["type"] == "Remediated" for x in status["conditions"])
    assert not (core.read_node("node-3").spec and core.read_node("node-3").spec.unschedulable)
    assert reasons(core, case.ns, "llama") == {}  # nothing posted about a job that is gone


def test_job_deleted_while_analysing_with_everything_it_owns(
    case: Case, custom: Any, core: Any, kube: Any
) -> None:
    stale = case.body(custom)  # what a timer pass in flight holds
    custom.delete_namespaced_custom_object(c.KF_GROUP, c.KF_VERSION, case.ns, c.KF_PLURAL, "llama")
    with pytest.raises(client.ApiException) as gone:  # the garbage collector took the Incident and its Job
        case.body(custom)
    assert gone.value.status == 404
    step = advance_analysis(stale, config=case.config, kube=kube, store=case.store)
    assert step.done and step.status["phase"] == "Failed"
    assert "AnalyzerJobGone" in str(step.status["conditions"])


def test_analyzer_job_deleted_before_it_wrote_a_verdict(case: Case, custom: Any, kube: Any) -> None:
    kube.delete_job(case.ns, case.analyzer["metadata"]["name"])
    _, status = advance(case, custom, kube)
    assert status["phase"] == "Failed" and "was gone when frwatch looked" in status["message"]


def test_analyzer_job_gone_after_writing_its_verdict(case: Case, custom: Any, kube: Any) -> None:
    case.store.put(case.key.verdict, hardware_verdict("node-3").model_dump_json().encode())
    kube.delete_job(case.ns, case.analyzer["metadata"]["name"])  # e.g. ttlSecondsAfterFinished
    _, status = advance(case, custom, kube)
    assert status["phase"] == "Reported" and status["suspectNodes"] == ["node-3"]


def test_running_then_overdue(case: Case, custom: Any, core: Any, kube: Any) -> None:
    name = case.analyzer["metadata"]["name"]
    core.create_namespaced_pod(case.ns, {
        "metadata": {"name": f"{name}-abcde", "labels": {c.LABEL_BATCH_JOB_NAME: name}},
        "spec": case.analyzer["spec"]["template"]["spec"],
    })  # fmt: skip
    core.patch_namespaced_pod_status(f"{name}-abcde", case.ns, {"status": {"phase": "Pending", "containerStatuses": [
        {"name": "analyzer", "image": "x", "imageID": "", "ready": False, "restartCount": 0,
         "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}]}})  # fmt: skip
    step, status = advance(case, custom, kube)
    assert not step.done and step.retry_after
    assert status["phase"] == "Analyzing" and status["analyzerJob"] == name
    assert "ImagePullBackOff" in status["message"]
    assert advance(case, custom, kube)[0].status == {}  # nothing new: no write
    late = datetime.now(UTC) + timedelta(seconds=case.config.analyzer.deadline_seconds + 600)
    step, status = advance(case, custom, kube, now=late)
    assert step.done and status["phase"] == "Failed"
    assert next(x for x in status["conditions"] if x["type"] == "Analyzed")["reason"] == "AnalyzerOverdue"


@pytest.mark.parametrize("dry_run", [False, True], ids=["cordon", "dry-run"])
def test_hardware_verdict_through_the_loop(case: Case, custom: Any, core: Any, kube: Any, api_client: Any,
                                           kubectl: Any, dry_run: bool) -> None:  # fmt: skip
    nodes = [f"{case.ns[-6:]}-n{i}" for i in range(4)]
    for n in nodes:
        create_node(core, n)
    set_observed(custom, case.incident, nodes)
    data = hardware_verdict(nodes[3]).model_dump_json().encode()
    case.store.put(case.key.verdict, data)
    finish_job(client.BatchV1Api(api_client), core, case.analyzer, condition="Complete", termination_message=bound(data))
    node_agent_says(core, nodes[3])  # corroborated: the node's own health agent reports it
    cfg = case.config.model_copy(
        update={
            "remediation": case.config.remediation.model_copy(update={"enabled": True, "dry_run": dry_run})
        }
    )
    _, status = advance(case, custom, kube, config=cfg)
    assert status["phase"] == "Reported" and status["hardwareClass"] is True
    remediated = next(x for x in status["conditions"] if x["type"] == "Remediated")
    spec = core.read_node(nodes[3]).spec
    if dry_run:
        assert remediated["reason"] == "DryRun" and f"would cordon {nodes[3]}" in remediated["message"]
        assert not (spec and spec.unschedulable)
    else:
        assert remediated["status"] == "True" and remediated["reason"] == "Cordoned"
        assert spec.unschedulable is True
    described = kubectl("describe", "pytorchjob", "llama", "-n", case.ns).stdout
    assert "Remediation" in described and nodes[3] in described and "hardware-class" in described
    assert ("FrwatchWouldCordon" if dry_run else "FrwatchCordoned") in kubectl(
        "describe", "node", nodes[3]
    ).stdout


def test_a_pass_repeated_after_a_crash_before_the_status_write_changes_nothing(
    case: Case, custom: Any, core: Any, kube: Any, api_client: Any
) -> None:
    nodes = [f"{case.ns[-6:]}-r{i}" for i in range(4)]
    for n in nodes:
        create_node(core, n)
    set_observed(custom, case.incident, nodes)
    data = hardware_verdict(nodes[0], ranks=[0]).model_dump_json().encode()
    case.store.put(case.key.verdict, data)
    finish_job(client.BatchV1Api(api_client), core, case.analyzer, condition="Complete", termination_message=bound(data))
    node_agent_says(core, nodes[0])
    cfg = case.config.model_copy(
        update={"remediation": case.config.remediation.model_copy(update={"enabled": True, "dry_run": False})}
    )
    body = case.body(custom)
    first = advance_analysis(body, config=cfg, kube=kube, store=case.store, settings=settings(cfg))
    events = sorted((e.reason, e.message) for e in events_about(core, case.ns, "llama"))
    breaker = core.read_namespaced_config_map("breaker", case.ns).data
    # the operator died before writing the status: the next pass sees the same Incident
    second = advance_analysis(body, config=cfg, kube=kube, store=case.store, settings=settings(cfg))
    assert second.status["phase"] == first.status["phase"] == "Reported"
    remediated = next(x for x in second.status["conditions"] if x["type"] == "Remediated")
    assert (remediated["status"], remediated["reason"]) == ("True", "Cordoned")
    assert f"{nodes[0]} already cordoned for this incident" in remediated["message"]
    assert (
        sorted((e.reason, e.message) for e in events_about(core, case.ns, "llama")) == events
    )  # no duplicates
    assert core.read_namespaced_config_map("breaker", case.ns).data == breaker  # counted once
    said = sorted(e.reason for e in events_about(core, "default", nodes[0]) if e.reason.startswith("Frwatch"))
    assert said == ["FrwatchCordoned", "FrwatchNominated"]  # each once


def test_breaker_namespace_missing_is_one_visible_bounded_failure(
    case: Case, custom: Any, core: Any, kube: Any, api_client: Any, kubectl: Any
) -> None:
    """Cordoning on, its breaker's namespace absent: the verdict is reported, no node is cordoned, the
    Incident says BreakerStateUnavailable, one Warning on the job says what to create; the pass is final."""
    nodes = [f"{case.ns[-6:]}-b{i}" for i in range(4)]
    for n in nodes:
        create_node(core, n)
    set_observed(custom, case.incident, nodes)
    data = hardware_verdict(nodes[2], ranks=[2]).model_dump_json().encode()
    case.store.put(case.key.verdict, data)
    finish_job(client.BatchV1Api(api_client), core, case.analyzer, condition="Complete", termination_message=bound(data))
    node_agent_says(core, nodes[2])
    missing = f"gone-{case.ns[-6:]}"
    cfg = case.config.model_copy(update={"remediation": case.config.remediation.model_copy(
        update={"enabled": True, "dry_run": False, "breaker_namespace": missing})})  # fmt: skip
    step, status = advance(case, custom, kube, config=cfg)
    assert step.done and status["phase"] == "Reported" and status["suspectNodes"] == [nodes[2]]
    remediated = next(x for x in status["conditions"] if x["type"] == "Remediated")
    assert (remediated["status"], remediated["reason"]) == ("False", "BreakerStateUnavailable")
    assert f"kubectl create namespace {missing}" in remediated["message"]
    assert step.observed.skipped == ("breaker_unavailable",) and step.observed.cordoned == 0
    assert not (core.read_node(nodes[2]).spec and core.read_node(nodes[2]).spec.unschedulable)
    warnings = [e for e in events_about(core, case.ns, "llama") if e.reason == "BreakerStateUnavailable"]
    assert len(warnings) == 1 and warnings[0].type == "Warning"
    assert f"the namespace {missing} of its ConfigMap {missing}/breaker does not exist" in warnings[0].message
    assert "BreakerStateUnavailable" in kubectl("describe", "pytorchjob", "llama", "-n", case.ns).stdout
    # nothing happened to the node: the health agent's Event and frwatch's nomination are all it has
    assert sorted(e.reason for e in events_about(core, "default", nodes[2])) == ["FrwatchNominated", "XidError"]
    assert not (core.read_node(nodes[2]).spec and core.read_node(nodes[2]).spec.unschedulable)
    again, _ = advance(case, custom, kube, config=cfg)  # the next timer pass: nothing left to do
    assert again.done and again.status == {}
    assert len([e for e in events_about(core, case.ns, "llama") if e.reason == "BreakerStateUnavailable"]) == 1
