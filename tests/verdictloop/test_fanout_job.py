"""Fan-out of the analysis (verdictloop.fanout): how many map pods for how many ranks, the Indexed map Job as
the API stores it, and the Analyzing sub-steps (Map, then Reduce) recorded in the Incident's status so a
restarted operator resumes; a failed map Job still leads to the reduce Job."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client
from vl_builders import (
    analyzing,
    create_incident,
    create_pytorchjob,
    finish_job,
    get_incident,
    settings,
    write_status,
)

from frwatch_operator import constants as c
from frwatch_operator.analysis.analyzer_job import analyzer_job, effective_run
from frwatch_operator.analysis.analyzing import AnalysisRequest, advance_analysis, start_analysis
from frwatch_operator.analysis.fanout import MAX_SHARDS, map_job, map_job_ref, shard_count
from frwatch_operator.config import AnalyzerSettings, Config, S3Settings
from frwatch_operator.incident.record import IncidentIdentity

KUBE_VERSION = "1.32.0"
S3 = S3Settings(
    endpoint_url="http://seaweedfs.storage:8333", region="eu-west-1", credentials_secret="team-s3"
)
URL = "s3://frwatch/frwatch/team/llama/uid-1/0"
INCIDENT = IncidentIdentity("team", "llama-0-abc", "7a0c-uid")


def test_shard_count_from_the_rank_count_and_ranks_per_pod() -> None:
    assert shard_count(None, 2) == 1  # the world size is unknown: one analyzer Job
    assert shard_count(4, 0) == 1  # fan-out off
    assert shard_count(4, 4) == 1  # at the threshold: one pod
    assert shard_count(5, 4) == 2
    assert shard_count(4, 2) == 2
    assert shard_count(131_072, 4096) == 32
    assert shard_count(131_072, 1) == MAX_SHARDS  # bounded: never more pods than that


def test_the_map_job_is_an_indexed_job_with_the_analyzers_pod() -> None:
    config = Config(s3=S3, analyzer=AnalyzerSettings(namespace="frwatch-system", backoff_limit=2))
    run = effective_run(config.analyzer)
    job = map_job(INCIDENT, evidence_url=URL, s3=S3, run=run, shards=3, settings=config.analyzer)
    single = analyzer_job(INCIDENT, evidence_url=URL, s3=S3, run=run, settings=config.analyzer)
    kubernetes_validate.validate(job, KUBE_VERSION, strict=True)
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 3, 3)
    # each index retried on its own (a poison shard fails its index only); the Job-wide limit is what every
    # index may spend, a bound where backoffLimitPerIndex is not honoured
    assert (spec["backoffLimitPerIndex"], spec["maxFailedIndexes"], spec["backoffLimit"]) == (2, 1, 9)
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # what backoffLimitPerIndex needs
    assert spec["activeDeadlineSeconds"] == single["spec"]["activeDeadlineSeconds"]
    ns, name = map_job_ref(INCIDENT, config.analyzer)
    assert job["metadata"]["name"] == name and name.endswith("-map") and name != single["metadata"]["name"]
    assert job["metadata"]["namespace"] == ns == "frwatch-system" and "ownerReferences" not in job["metadata"]
    assert job["metadata"]["labels"][c.LABEL_COMPONENT] == "analyzer-map"
    (container,) = spec["template"]["spec"]["containers"]
    assert container["command"][:5] == ["frwatch", "analyze", URL, "--map-shard", "$(JOB_COMPLETION_INDEX)/3"]
    assert "--out" not in container["command"]  # the map step writes summaries, no verdict
    (theirs,) = single["spec"]["template"]["spec"]["containers"]
    for same in ("image", "env", "resources", "securityContext", "volumeMounts"):
        assert container[same] == theirs[same], same
    pod, single_pod = spec["template"]["spec"], single["spec"]["template"]["spec"]
    assert (
        pod["automountServiceAccountToken"] is False
        and pod["securityContext"] == single_pod["securityContext"]
    )
    with pytest.raises(ValueError):
        map_job(INCIDENT, evidence_url=URL, s3=S3, run=run, shards=1, settings=config.analyzer)


def _jobs(api_client: Any, ns: str) -> dict[str, dict[str, Any]]:
    items = client.BatchV1Api(api_client).list_namespaced_job(ns).items
    return {j.metadata.name: api_client.sanitize_for_serialization(j) for j in items}


@pytest.mark.parametrize("map_ends", ["Complete", "Failed"])
def test_map_then_reduce_recorded_in_the_status(
    map_ends: str, k8s_namespace: str, crds: None, custom: Any, kube: Any, api_client: Any
) -> None:
    ns = k8s_namespace
    config = Config(s3=S3, analyzer=AnalyzerSettings(namespace=ns, ranks_per_pod=2))
    job = create_pytorchjob(custom, ns)
    url = f"s3://frwatch/frwatch/{ns}/llama/{job['metadata']['uid']}/0"
    incident = create_incident(custom, ns, job, storage_url=url, status=analyzing())
    meta = incident["metadata"]
    request = AnalysisRequest(ns, meta["name"], meta["uid"], url, settings(config), ranks=4)

    step = start_analysis(request, config, kube=kube)
    assert step.status["analysisStep"] == "Map" and step.status["analyzerJob"] == ""
    (mapped,) = _jobs(api_client, ns).values()
    assert mapped["metadata"]["name"] == step.status["analyzerMapJob"]
    assert mapped["spec"]["completions"] == 2 and mapped["spec"]["completionMode"] == "Indexed"
    assert "2 map pods" in step.status["message"]
    body = write_status(custom, incident, step.status)

    running = advance_analysis(body, config=config, kube=kube, store=None, settings=settings(config))  # type: ignore[arg-type]
    assert not running.done and running.retry_after and "analyzerJob" not in running.status
    assert len(_jobs(api_client, ns)) == 1  # the reduce waits for the map Job

    finish_job(client.BatchV1Api(api_client), client.CoreV1Api(api_client), mapped, condition=map_ends,
               reason="FailedIndexes" if map_ends == "Failed" else "", exit_code=0 if map_ends == "Complete" else 2)  # fmt: skip
    if map_ends == "Failed":  # index 0 spent its backoffLimitPerIndex, index 1 finished
        client.BatchV1Api(api_client).patch_namespaced_job_status(
            mapped["metadata"]["name"], ns, {"status": {"failedIndexes": "0", "completedIndexes": "1"}}
        )
    body = get_incident(custom, ns, meta["name"])
    reduce = advance_analysis(body, config=config, kube=kube, store=None, settings=settings(config))  # type: ignore[arg-type]
    assert not reduce.done and reduce.status["analysisStep"] == "Reduce"
    jobs = _jobs(api_client, ns)
    assert set(jobs) == {mapped["metadata"]["name"], reduce.status["analyzerJob"]}
    reducer = jobs[reduce.status["analyzerJob"]]
    assert "--map-shard" not in reducer["spec"]["template"]["spec"]["containers"][0]["command"]
    assert f"map Job {mapped['metadata']['name']}" in reduce.status["message"]
    failed_said = "map index(es) 0 of 2 failed: the reduce decodes the dumps of their ranks (rank % 2 in 0)"
    assert (failed_said in reduce.status["message"]) == (map_ends == "Failed"), reduce.status["message"]
    written = write_status(custom, body, reduce.status)["status"]
    assert written["analysisStep"] == "Reduce" and written["analyzerMapJob"] == mapped["metadata"]["name"]

    # a restarted operator resumes from the status: it watches the reduce Job, creates nothing more
    again = advance_analysis(
        get_incident(custom, ns, meta["name"]),
        config=config,
        kube=kube,
        store=None,
        settings=settings(config),  # type: ignore[arg-type]
    )
    assert not again.done and len(_jobs(api_client, ns)) == 2


def test_at_the_threshold_there_is_one_analyzer_job(
    k8s_namespace: str, crds: None, custom: Any, kube: Any, api_client: Any
) -> None:
    ns = k8s_namespace
    config = Config(s3=S3, analyzer=AnalyzerSettings(namespace=ns, ranks_per_pod=4))
    job = create_pytorchjob(custom, ns)
    url = f"s3://frwatch/frwatch/{ns}/llama/{job['metadata']['uid']}/0"
    meta = create_incident(custom, ns, job, storage_url=url, status=analyzing())["metadata"]
    step = start_analysis(
        AnalysisRequest(ns, meta["name"], meta["uid"], url, settings(config), ranks=4), config, kube=kube
    )
    assert "analysisStep" not in step.status and step.status["analyzerJob"]
    (only,) = _jobs(api_client, ns).values()
    assert "completionMode" not in only["spec"] or only["spec"]["completionMode"] == "NonIndexed"
