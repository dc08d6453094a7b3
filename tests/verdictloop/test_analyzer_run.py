"""The whole verdict loop on real evidence: real gloo dumps in real S3 (SeaweedFS), the analyzer Job
created in the API emulator, its container command really run as a process with the Job's env, and the
verdict surfacing on the PyTorchJob (annotations, Events, `kubectl describe`) and the Incident
(`kubectl get incidents`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from vl_builders import (
    analyzing,
    create_incident,
    create_node,
    create_pytorchjob,
    create_s3_secret,
    finish_job,
    get_incident,
    observed_record,
    settings,
    write_status,
)
from vl_jobrun import no_kubernetes_credentials, run_container

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_analyzers.store.manifest import Manifest, PodRecord, RankRecord
from frwatch_analyzers.verdict import Verdict
from frwatch_operator import constants as c
from frwatch_operator.analysis.analyzer_job import analysis_budget_seconds
from frwatch_operator.analysis.analyzing import AnalysisRequest, advance_analysis, start_analysis
from frwatch_operator.config import AnalyzerSettings, Config, RemediationSettings
from frwatch_operator.store.s3 import S3Store

WORLD = 4


def upload_attempt(
    store: S3Store, key: AttemptKey, dumps: dict[int, bytes], nodes: list[str] | None = None
) -> Manifest:
    """What the agents and the collector leave in the store: ranks/, manifest.json (rank r on nodes[r])."""
    world = len(nodes) if nodes else WORLD
    names = nodes or [f"node-{r}" for r in range(world)]
    for rank, data in dumps.items():
        store.put(key.rank(rank), data)
    manifest = Manifest(
        namespace=key.namespace, job=key.job, job_uid=key.job_uid, attempt=key.attempt, world_size=world,
        ranks=[RankRecord(rank=r, pod=f"{key.job}-worker-{r}", node=names[r], dumped=r in dumps,
                          key=key.rank(r) if r in dumps else "") for r in range(world)],
        pods=[PodRecord(pod=f"{key.job}-worker-{r}", node=names[r], ranks=[r]) for r in range(world)],
    )  # fmt: skip
    store.put(key.manifest, manifest.model_dump_json().encode())
    return manifest


@pytest.mark.slow
def test_real_dumps_to_verdict_on_the_job(
    real_dumps: Any, s3: Any, k8s_namespace: str, crds: None, core: Any, custom: Any, kube: Any, kubectl: Any,
    api_client: Any, tmp_path: Path,
) -> None:  # fmt: skip
    from kubernetes import client

    ns = k8s_namespace
    result = real_dumps.run("skip")
    assert len(result.dumps) == WORLD, result.describe()
    store = S3Store(s3.settings())
    config = Config(s3=s3.settings(), remediation=RemediationSettings(enabled=True, breaker_namespace=ns),
                    analyzer=AnalyzerSettings(namespace=ns))
    job = create_pytorchjob(custom, ns)
    key = AttemptKey("frwatch", ns, "llama", job["metadata"]["uid"], "0")
    upload_attempt(store, key, {rank: path.read_bytes() for rank, path in result.dumps.items()})
    url = f"s3://{s3.bucket}/{key.root}"
    create_s3_secret(core, ns, config.s3.credentials_secret, s3.access_key, s3.secret_key)
    incident = create_incident(custom, ns, job, storage_url=url, status=analyzing())

    # --- hand-off: the Job as created in the API ----------------------------------------------------------
    step = start_analysis(
        AnalysisRequest(ns, incident["metadata"]["name"], incident["metadata"]["uid"], url, settings(config)),
        config,
        kube=kube,
    )
    assert step.status["phase"] == "Analyzing" and not step.done
    again = start_analysis(
        AnalysisRequest(ns, incident["metadata"]["name"], incident["metadata"]["uid"], url, settings(config)),
        config,
        kube=kube,
    )
    assert again.status["analyzerJob"] == step.status["analyzerJob"]  # idempotent: one Job
    batch = client.BatchV1Api(api_client)
    jobs = batch.list_namespaced_job(ns).items
    assert len(jobs) == 1
    analyzer = api_client.sanitize_for_serialization(jobs[0])
    pod = analyzer["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == [
        "frwatch", "analyze", url, "--format", "json", "--out", f"{url}/verdict.json",
        "--report-out", f"{url}/report.txt", "--html", f"{url}/report.html", "--termination-log", "/dev/termination-log", "--jobs", "1",
        "--deadline-seconds", str(analysis_budget_seconds(analyzer["spec"]["activeDeadlineSeconds"])),
    ]  # fmt: skip

    # --- the container, run as a process with the Job's env ------------------------------------------------
    run = run_container(analyzer, core, tmp_path)
    assert run.returncode == 0, run.stderr
    assert no_kubernetes_credentials(run)
    assert run.env["AWS_ACCESS_KEY_ID"] == s3.access_key and run.env["AWS_ENDPOINT_URL_S3"] == s3.endpoint
    stored = Verdict.model_validate_json(store.get(key.verdict))
    assert stored.culprit_ranks == [1] and stored.culprit_nodes == ["node-1"], stored.headline
    assert stored.suspect_nodes == []  # a desync is software: the node is where rank 1 ran, not a suspect
    assert not stored.hardware_class
    report = store.get(key.report).decode()
    assert "rank" in report and "1" in report
    page = store.get(key.report_html).decode()  # the HTML report beside it: culprit, its pod and node
    assert 'class="side culprit"' in page and "node-1" in page and "<script" not in page
    # the digest of the verdict it wrote, then its summary: the operator acts only on a verdict with these bytes
    assert run.termination_message.startswith(f"verdict-sha256:{hashlib.sha256(store.get(key.verdict)).hexdigest()} ")
    assert f" {stored.status.value}/{stored.category.value}: " in run.termination_message
    assert json.loads(run.stdout)["headline"] == stored.headline

    # --- what the Job controller and the kubelet record; the operator's next pass -------------------------------
    finish_job(batch, core, analyzer, condition="Complete", termination_message=run.termination_message)
    body = get_incident(custom, ns, incident["metadata"]["name"])
    done = advance_analysis(body, config=config, kube=kube, store=store, settings=settings(config))
    assert done.done
    written = write_status(custom, body, done.status)["status"]
    assert written["phase"] == "Reported"
    assert written["suspectRanks"] == [1] and written["suspectNodes"] == []  # software: no suspect node
    assert written["suspects"] == ""  # software: the Suspects column names no node
    assert written["verdict"]["ranOn"] == "rank 1 ran on node node-1" and written["verdict"]["nextSteps"]
    assert written["reportUrl"] == f"{url}/report.txt"
    assert written["reportHtmlUrl"] == f"{url}/report.html"
    remediated = next(x for x in written["conditions"] if x["type"] == "Remediated")
    assert remediated["status"] == "False" and "not hardware-class" in remediated["message"]
    assert {x["type"] for x in written["conditions"]} >= {
        "Collected",
        "AnalysisRequested",
        "Analyzed",
        "Remediated",
    }

    annotations = custom.get_namespaced_custom_object(c.KF_GROUP, c.KF_VERSION, ns, c.KF_PLURAL, "llama")[
        "metadata"
    ]["annotations"]
    assert annotations[c.ANN_VERDICT] == written["verdict"]["short"] and len(annotations[c.ANN_VERDICT]) <= 120
    assert annotations[c.ANN_CATEGORY] == stored.category.value
    assert annotations[c.ANN_SUSPECT_RANKS] == "1" and c.ANN_SUSPECT_NODES not in annotations
    assert annotations[c.ANN_REPORT] == f"{url}/report.txt"
    assert annotations[c.ANN_REPORT_HTML] == f"{url}/report.html"
    assert annotations[c.ANN_INCIDENT] == incident["metadata"]["name"]
    # the verdict says which attempt it is about; frwatch.io/attempt is the next one (pods created since)
    assert annotations[c.ANN_INCIDENT_ATTEMPT] == incident["spec"]["attempt"]

    described = kubectl("describe", "pytorchjob", "llama", "-n", ns).stdout
    print(described)
    for text in ("Diagnosed", "CulpritsNamed", "NextSteps", "Remediation", f"{url}/report.txt",
                 "rank 1 ran on node node-1", f"{c.ANN_VERDICT}: {written['verdict']['short']}\n", "frwatch"):  # fmt: skip
        assert text in described, text
    table = kubectl("get", "incidents", "-n", ns, "-o", "wide").stdout
    print(table)
    header, row = table.splitlines()[:2]
    assert header.split()[:7] == ["NAME", "JOB", "PHASE", "CATEGORY", "KIND", "CULPRITS", "SUSPECTS"]
    assert row.split()[:4] == [incident["metadata"]["name"], "llama", "Reported", stored.category.value]

    def column(name: str) -> str:  # the columns hold spaces: cut the row where the header's names start
        start = header.index(name)
        end = header.index(header.split()[header.split().index(name) + 1])
        return row[start:end].strip()

    assert column("KIND") == written["verdict"]["kindText"]
    assert column("CULPRITS") == written["verdict"]["culprits"] and column("CULPRITS").startswith("rank 1")
    assert column("SUSPECTS") == ""  # a software finding: no node is suspect
    assert written["verdict"]["short"] in row  # -o wide: the verdict's short line

    # a second pass (a restarted operator) changes nothing
    body = get_incident(custom, ns, incident["metadata"]["name"])
    assert advance_analysis(body, config=config, kube=kube, store=store).status == {}


def test_a_gpu_hang_cordons_its_node(
    s3: Any, k8s_namespace: str, crds: None, core: Any, custom: Any, kube: Any, kubectl: Any, api_client: Any,
    tmp_path: Path,
) -> None:  # fmt: skip
    """NCCL-flavoured dumps of the real schema (rank 4 never started all_reduce #13 while its 7 peers
    did), the analyzer Job's command really run, and remediation on: the suspect node is cordoned."""
    from kubernetes import client

    from frwatch_dev.dumps import pickle_bytes, world

    ns = k8s_namespace
    nodes = [f"{ns[-6:]}-gpu-{r}" for r in range(8)]
    for name in nodes:
        create_node(core, name)
    dumps = world(8).all_reduce(steps=20).rank(4).not_started_at(13).dumps()
    store = S3Store(s3.settings())
    config = Config(
        s3=s3.settings(),
        analyzer=AnalyzerSettings(namespace=ns),
        remediation=RemediationSettings(enabled=True, dry_run=False, breaker_namespace=ns),
    )
    job = create_pytorchjob(custom, ns)
    key = AttemptKey("frwatch", ns, "llama", job["metadata"]["uid"], "0")
    upload_attempt(store, key, {r: pickle_bytes(d) for r, d in dumps.items()}, nodes)
    url = f"s3://{s3.bucket}/{key.root}"
    create_s3_secret(core, ns, config.s3.credentials_secret, s3.access_key, s3.secret_key)
    observed = observed_record({n: str(r) for r, n in enumerate(nodes)})
    incident = create_incident(custom, ns, job, storage_url=url, status=analyzing(observed=observed))
    meta = incident["metadata"]
    start_analysis(AnalysisRequest(ns, meta["name"], meta["uid"], url, settings(config)), config, kube=kube)
    (analyzer,) = client.BatchV1Api(api_client).list_namespaced_job(ns).items
    analyzer = kube.get_batch_job(ns, analyzer.metadata.name)

    run = run_container(analyzer, core, tmp_path)
    assert run.returncode == 0, run.stderr
    stored = Verdict.model_validate_json(store.get(key.verdict))
    assert stored.category.value == "gpu_hang" and stored.hardware_class, stored.headline
    assert stored.suspect_nodes == [nodes[4]]

    finish_job(client.BatchV1Api(api_client), core, analyzer, condition="Complete",
               termination_message=run.termination_message)  # fmt: skip
    # the dumps only nominate the node; its own health agent (an Xid Event in namespace default) corroborates
    core.create_namespaced_event("default", {
        "metadata": {"name": f"{nodes[4]}.xid"}, "type": "Warning", "reason": "XidError",
        "message": "Xid 79: GPU has fallen off the bus", "count": 1,
        "involvedObject": {"kind": "Node", "name": nodes[4], "apiVersion": "v1"}, "source": {"component": "dcgm-exporter"},
    })  # fmt: skip
    body = get_incident(custom, ns, meta["name"])
    step = advance_analysis(body, config=config, kube=kube, store=store, settings=settings(config))
    status = write_status(custom, body, step.status)["status"]
    assert status["phase"] == "Reported" and status["category"] == "gpu_hang"
    [nominated] = status["nominations"]
    assert nominated["node"] == nodes[4] and "Xid 79" in nominated["corroborated"], nominated
    remediated = next(x for x in status["conditions"] if x["type"] == "Remediated")
    assert (remediated["status"], remediated["reason"]) == ("True", "Cordoned"), remediated

    node = core.read_node(nodes[4])
    assert node.spec.unschedulable is True
    assert node.metadata.annotations[c.ANN_CORDON_INCIDENT] == f"{ns}/{meta['name']}"
    assert node.metadata.annotations[c.ANN_CORDON_EVIDENCE] == f"{url}/report.txt"
    assert not any(
        (core.read_node(n).spec and core.read_node(n).spec.unschedulable) for n in nodes if n != nodes[4]
    )
    described = kubectl("describe", "node", nodes[4]).stdout
    print(described)
    assert "FrwatchCordoned" in described and f"{c.ANN_CORDONED_BY}: frwatch" in described
    job_described = kubectl("describe", "pytorchjob", "llama", "-n", ns).stdout
    print(job_described)
    assert f"cordoned {nodes[4]}" in job_described and "hardware-class" in job_described
    print(kubectl("get", "incidents", "-n", ns).stdout)
