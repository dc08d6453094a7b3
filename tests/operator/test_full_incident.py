"""One whole incident through the real operator, watched from outside: every API call it makes recorded by a
proxy and checked against the chart's rendered RBAC (remediation on, dry-run off), its /metrics scraped
over HTTP, its /healthz probed. The operator runs cluster-wide, as the chart runs it, against an API
emulator of its own (nothing left by other tests to drive; watching named namespaces would make kopf list
and watch namespaces, which the chart's cluster-wide operator never does).

The run: a 4-rank PyTorchJob (fabricated NCCL-style dumps of the real schema: rank 3 never started
all_reduce #6 while its peers did, a GPU hang), injected by the operator's webhook; rank 3's pod aborts;
ranks 0, 1 and 3 dump at once, rank 2 only after the operator asked its agent (which reads the agent
token Secret; the agent does not answer); collection ends, the analyzer Job is created; the test runs
the Job's container command as the kubelet would (a process with the Job's env) and records the Job as
complete; the verdict loop reads the verdict (gpu_hang, hardware-class), annotates the job, cordons the
suspect node (breaker ConfigMap first) and reports.
"""

from __future__ import annotations

import base64
import re
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from harness import ROOT, Cluster, eventually, operator_env, upload_as_agent
from kubernetes import client, config

from frwatch_dev.dumps import pickle_bytes, world
from frwatch_dev.localcluster import podlogs
from frwatch_dev.localcluster.audit import AuditEntry, start_audit_proxy
from frwatch_dev.localcluster.rbac import check, grants_for
from frwatch_dev.ports import free_port
from frwatch_dev.testing.crds import ensure_crds
from frwatch_dev.testing.operator_process import OperatorProcess
from frwatch_operator import constants as c
from frwatch_operator.store.s3 import S3Store

sys.path.insert(0, str(ROOT / "tests" / "chart"))
sys.path.insert(0, str(ROOT / "tests" / "verdictloop"))
from chart_helpers import render
from vl_builders import finish_job, node_agent_says
from vl_jobrun import run_container

WORLD = 4
HUNG_RANK = 3
LATE_RANK = 2  #: dumps only after the operator asked its agent
WATCHDOG = b"[rank3]:[E] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6, OpType=ALLREDUCE)\n"
USER = "frwatch-operator"  #: the operator's bearer token through the proxy: its name in the audit log
SA = "frwatch"  #: the chart's ServiceAccount (release "frwatch")
#: This run is a PyTorchJob's: the chart and the operator follow that kind only (every kind's grants are
#: derived from the code in tests/chart/test_rbac.py).
CORDON_VALUES = {"remediation": {"enabled": True, "dryRun": False}, "operator": {"jobKinds": ["PyTorchJob"]}}
CRD_FILES = [ROOT / "crds" / "incident.yaml", ROOT / "crds" / "capturepolicy.yaml",
             ROOT / "tests" / "emulator" / "pytorchjob-crd.yaml"]  # fmt: skip

#: Rendered grants this run cannot exercise, each needed all the same:
JUSTIFIED_UNUSED = {
    # verdictloop.analyzing.start_analysis deletes an analyzer Job left by an EARLIER Incident of the same
    # name (a job deleted and recreated); a first incident never meets one (tests/verdictloop covers it).
    ("delete", "batch", "jobs"),
    # handlers.pods.join_early reads the Incident when its create answered 409, to join one live watch opened
    # Early; this run's failure creates its Incident (tests/operator/test_live_watch.py joins one).
    ("get", "frwatch.io", "incidents"),
    # The breaker's ConfigMap is replaced (update) once it exists; the first cordon in a cluster's life
    # creates it (this run). A second cordon replaces it (tests/verdictloop/test_cordoning_cluster.py).
    ("update", "", "configmaps"),
    # The agents' key ring is replaced (update) when a key is rotated (every agent.keyRotationDays); the
    # operator's first start creates it (this run). tests/capture/test_agent_keys_kube.py rotates it.
    ("update", "", "secrets"),
}


@dataclass
class Run:
    job_ns: str
    release_ns: str
    incident: dict[str, Any]
    node: dict[str, Any]
    calls: list[AuditEntry]
    metrics: dict[str, float]
    health: tuple[int, str]
    exit_code: int
    operator_log: str
    logs: dict[str, bytes]  #: the container logs the operator stored (key -> bytes)


def _namespace(k8s_api: Any, base: str) -> str:
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    k8s_api.call(
        lambda store: store.create(store.type_for("", "v1", "namespaces"), "", {"metadata": {"name": name}})
    )
    return name


def _secret(core: client.CoreV1Api, namespace: str, name: str, data: dict[str, str]) -> None:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    core.create_namespaced_secret(namespace, {"metadata": {"name": name}, "data": encoded})


@pytest.fixture(scope="module")
def own_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, client.ApiClient]]:
    """A fresh API emulator with the CRDs, and an admin client of it (the test's hands, not audited)."""
    from frwatch_dev.localcluster import start_apiserver

    handle = start_apiserver()
    try:
        path = handle.write_kubeconfig(tmp_path_factory.mktemp("own-api") / "kubeconfig")
        api = config.new_client_from_config(str(path))
        ensure_crds(api, CRD_FILES)
        yield handle, api
        api.close()
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def run(
    own_api: tuple[Any, client.ApiClient], s3: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Run]:
    k8s_api, op_api = own_api
    workdir = tmp_path_factory.mktemp("full-incident")
    job_ns, release_ns = _namespace(k8s_api, "team-a"), _namespace(k8s_api, "frwatch-system")
    core, batch = client.CoreV1Api(op_api), client.BatchV1Api(op_api)
    for ns in (job_ns, release_ns):  # the agents' keys, and the analyzer's (it runs in the release namespace)
        _secret(
            core,
            ns,
            "frwatch-s3",
            {c.ENV_AWS_ACCESS_KEY_ID: s3.access_key, c.ENV_AWS_SECRET_ACCESS_KEY: s3.secret_key},
        )
    nodes = [f"{job_ns[-6:]}-gpu-{r}" for r in range(WORLD)]
    for name in nodes:
        core.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
    store = S3Store(s3.settings())
    dumps = world(WORLD).all_reduce(steps=10).rank(HUNG_RANK).not_started_at(6).dumps()

    logs_dir = workdir / "pod-logs"
    k8s_api.server.pod_logs_dir = logs_dir
    proxy = start_audit_proxy(k8s_api.url)
    kubeconfig = proxy.write_kubeconfig(workdir / "kubeconfig", user=USER)
    env = operator_env(
        s3.env(), "", 60, KUBECONFIG=str(kubeconfig), FRWATCH_REMEDIATION_ENABLED="true",
        FRWATCH_REMEDIATION_DRY_RUN="false", FRWATCH_REMEDIATION_BREAKER_NAMESPACE=release_ns,
        FRWATCH_AGENT_KEY_NAMESPACE=release_ns, FRWATCH_ANALYZER_NAMESPACE=release_ns,
        FRWATCH_AGENT_CONTROL_PORT=str(free_port()),  # nothing listens: the asked agent does not answer
        # as the chart runs it: elected over its Lease in the release namespace (created, renewed, released)
        FRWATCH_OPERATOR_LEADER_ELECTION="true", FRWATCH_OPERATOR_LEASE_NAMESPACE=release_ns,
        FRWATCH_OPERATOR_IDENTITY="frwatch-5d8c7-x2x9q", FRWATCH_OPERATOR_JOB_KINDS="PyTorchJob",
    )  # fmt: skip
    op = OperatorProcess(env, workdir / "operator.log")
    try:
        op.start()
        cluster = Cluster(op_api, job_ns)
        job = cluster.create_job("llama", world=WORLD)
        pods = []
        for rank in range(WORLD):
            body = cluster.pod_body(job, rank)
            body["spec"]["nodeName"] = nodes[rank]
            created = core.create_namespaced_pod(job_ns, op.admit(body, job_ns))
            pods.append(created.metadata.name)
            # the kubelet's output of the pod's training container, served as pods/log
            out = podlogs.container_dir(logs_dir, job_ns, created.metadata.name, created.metadata.uid, "pytorch")
            out.mkdir(parents=True)
            (out / "0.log").write_bytes(b"rank %d: step 1\n" % rank + (WATCHDOG if rank == HUNG_RANK else b""))
            cluster.running(pods[-1])
        cluster.exited(pods[HUNG_RANK], exit_code=134)  # NCCL's watchdog tore the process down (SIGABRT)
        for rank in range(WORLD):
            if rank != LATE_RANK:
                upload_as_agent(store, job, pods[rank], nodes[rank], {rank: pickle_bytes(dumps[rank])})
        eventually(lambda: [r for r in op.log_records() if "asked agent of pod" in r["event"]], "the ask", 15)
        upload_as_agent(
            store, job, pods[LATE_RANK], nodes[LATE_RANK], {LATE_RANK: pickle_bytes(dumps[LATE_RANK])}
        )

        analyzing = cluster.incident(phase="Analyzing", timeout=20)
        name, where = analyzing["status"]["analyzerJob"], analyzing["status"]["analyzerNamespace"]
        assert where == release_ns  # never in the tenant's namespace
        analyzer = op_api.sanitize_for_serialization(batch.read_namespaced_job(name, where))
        ran = run_container(analyzer, core, workdir)
        assert ran.returncode == 0, ran.stderr
        # the dumps only nominate the hung rank's node; its own health agent's Xid Event corroborates it
        node_agent_says(core, nodes[HUNG_RANK])
        finish_job(batch, core, analyzer, condition="Complete", termination_message=ran.termination_message)
        incident = cluster.incident(phase="Reported", timeout=20)
        node = op_api.sanitize_for_serialization(core.read_node(nodes[HUNG_RANK]))
        at_rest = len(proxy.entries_for(USER))  # whatever the operator does at rest is recorded too:
        eventually(  # a Lease renewal after the Incident was Reported
            lambda: [e for e in proxy.entries_for(USER)[at_rest:] if e.resource == "leases" and e.verb == "update"],
            "a Lease renewal at rest", 30,
        )  # fmt: skip
        metrics = eventually(  # and the Incident's end phase counted (the Incident's event handler)
            lambda: m if _value(m := op.metrics(), "frwatch_incidents_finished_total", phase="Reported") else None,
            "the Reported Incident in the metrics",
        )  # fmt: skip
        health = op.healthz()
        stored_logs = {k: store.get(k) for k in store.list(f"{incident['spec']['storageUrl'].split('/', 3)[3]}/logs/")}
    finally:
        exit_code = op.stop()
        proxy.stop()
    yield Run(
        job_ns, release_ns, incident, node, proxy.entries_for(USER), metrics, health, exit_code, op.log(), stored_logs
    )


def test_the_incident_runs_from_a_pod_failure_to_a_cordoned_node(run: Run) -> None:
    status = run.incident["status"]
    assert status["category"] == "gpu_hang" and status["hardwareClass"] is True, status["message"]
    assert status["counts"] == {"expectedRanks": WORLD, "dumpedRanks": WORLD, "missingRanks": 0}
    assert status["suspectNodes"] == [run.node["metadata"]["name"]]
    assert run.node["spec"]["unschedulable"] is True
    assert run.node["metadata"]["annotations"][c.ANN_CORDONED_BY] == c.CORDONED_BY_FRWATCH
    assert run.exit_code == 0, run.operator_log[-3000:]


def test_each_training_containers_log_is_in_the_store(run: Run) -> None:
    by_pod = {k.split("/logs/")[1]: v for k, v in run.logs.items()}
    assert len([k for k in by_pod if k.endswith("/pytorch.txt")]) == WORLD, sorted(by_pod)
    hung = next(v for k, v in by_pod.items() if k.endswith(f"-{HUNG_RANK - 1}/pytorch.txt"))
    assert hung.endswith(WATCHDOG)
    logs = next(x for x in run.incident["status"]["conditions"] if x["type"] == "LogsCollected")
    assert logs["status"] == "True" and logs["message"].startswith(f"{WORLD} log(s) stored"), logs


def test_every_call_is_allowed_by_the_rendered_rbac_and_every_rule_is_used(run: Run) -> None:
    grants = grants_for(render(CORDON_VALUES, namespace=run.release_ns), SA, run.release_ns)
    coverage = check(run.calls, grants)
    print(f"{len(run.calls)} calls; distinct (verb, group, resource, namespace):")
    for key in sorted({(e.verb, e.api_group, e.resource_path, e.namespace) for e in run.calls}):
        print("  ", key)
    assert not coverage.denied, coverage.explain()
    assert not coverage.wildcards, coverage.explain()
    unused = {(verb, group, resource) for _, verb, group, resource in coverage.unused}
    assert unused == JUSTIFIED_UNUSED, coverage.explain()
    # the run really went where the rules are about: reads and writes of each kind
    seen = {(e.verb, e.api_group, e.resource_path) for e in run.calls}
    assert {("patch", "", "nodes"), ("create", "", "configmaps"), ("get", "", "secrets"),
            ("create", "batch", "jobs"), ("patch", c.GROUP, "incidents/status"),
            ("get", "", "pods/log"), ("list", "", "events"), ("get", "", "nodes")} <= seen  # fmt: skip
    # refused or broken calls: none. A 404 is a normal probe; a 409 is a conditional write that lost a
    # race and must have been retried successfully (the attempt annotation, the breaker ConfigMap).
    bad = [
        (e.verb, e.resource_path, e.name, e.status)
        for e in run.calls
        if e.status >= 400 and e.status not in (404, 409)
    ]
    assert not bad, bad
    for i, e in enumerate(run.calls):
        if e.status == 409:
            assert (
                any(
                    (later.verb, later.resource_path, later.name) == (e.verb, e.resource_path, e.name)
                    and later.status < 400
                    for later in run.calls[i + 1 :]
                )
                or e.verb == "create"
            ), (e.verb, e.resource_path, e.name)


def _value(samples: dict[str, float], name: str, **labels: str) -> float:
    key = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    return samples.get(key, 0.0)


def test_the_metrics_moved_where_things_happened(run: Run) -> None:
    m = run.metrics
    assert _value(m, "frwatch_webhook_admissions_total", outcome="injected") == WORLD
    assert _value(m, "frwatch_incidents_opened_total", namespace=run.job_ns) == 1
    assert _value(m, "frwatch_capture_latency_seconds_count") == 1
    assert 1.0 <= _value(m, "frwatch_capture_latency_seconds_sum") < 60  # rank 2 dumped after the ask
    assert _value(m, "frwatch_dumps_collected_total") == WORLD
    assert _value(m, "frwatch_dumps_missing_total") == 0
    assert _value(m, "frwatch_analyzer_jobs_total", outcome="succeeded") == 1
    assert _value(m, "frwatch_verdicts_total", category="gpu_hang", hardware_class="true") == 1
    assert _value(m, "frwatch_verdict_latency_seconds_count") == 1
    assert _value(m, "frwatch_cordons_total", mode="applied") == 1
    assert _value(m, "frwatch_cordons_total", mode="dry_run") == 0
    assert _value(m, "frwatch_remediation_breaker_tripped") == 0
    assert _value(m, "frwatch_incidents_finished_total", phase="Reported") == 1
    for phase in ("Detected", "Collecting", "Analyzing"):
        assert _value(m, "frwatch_incidents_active", phase=phase) == 0, phase
    assert not [k for k in m if re.match(r"frwatch_cordons_skipped_total\{", k)]


def test_healthz_answers_200(run: Run) -> None:
    status, body = run.health
    assert status == 200, body
