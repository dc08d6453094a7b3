"""The stand-in JobSet and Trainer v2 controllers alone (no frwatch): kubectl against the emulator, waiting on
the objects' own conditions. Child Job names, labels and annotations, the webhook's defaults, Recreate restarts
with the restart-attempt label, max restarts, the TrainJob -> JobSet translation and the torch env, and a
TrainJob whose runtime is missing."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube import wait_for

from frwatch_analyzers.decode.safe_load import decode
from frwatch_dev.localcluster import jobset_controller as jsc
from frwatch_dev.localcluster.cluster import LocalCluster
from frwatch_dev.workloads import TORCHRUN_WORKLOAD

pytestmark = pytest.mark.slow

Obj = dict[str, Any]
#: a container that prints the env frwatch derives ranks from, then exits 0, or 1 on restart attempt 0 when
#: FAIL_FIRST is set (the attempt comes from the pod's restart-attempt annotation, through the downward API)
PRINT_ENV = (
    "import json, os, sys; keys = ('JOB_COMPLETION_INDEX', 'PET_NODE_RANK', 'PET_NNODES', 'PET_NPROC_PER_NODE',"
    " 'PET_MASTER_ADDR', 'PET_MASTER_PORT', 'ATTEMPT'); print('ENV ' + json.dumps({k: os.environ.get(k) for k in keys}));"
    " sys.exit(1 if os.environ.get('FAIL_FIRST') and os.environ.get('ATTEMPT') == '0' else 0)"
)


def kubectl_json(cluster: LocalCluster, *args: str) -> Obj:
    return json.loads(cluster.kubectl(*args, "-o", "json").stdout)  # type: ignore[no-any-return]


def get(cluster: LocalCluster, kind: str, ns: str, name: str) -> Obj | None:
    proc = cluster.kubectl("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def condition(obj: Obj | None, type_: str) -> Obj | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


def wait_condition(
    cluster: LocalCluster, kind: str, ns: str, name: str, types: tuple[str, ...], timeout: float = 120
) -> Obj:
    def done() -> Obj | None:
        obj = get(cluster, kind, ns, name)
        return obj if any(condition(obj, t) for t in types) else None

    return wait_for(done, timeout, f"{kind} {name} to have one of {types}")  # type: ignore[no-any-return]


def jobset(
    name: str, replicas: int = 2, pods: int = 1, *, fail_first: bool = False, policy: Obj | None = None
) -> Obj:
    env = [
        {
            "name": "ATTEMPT",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{jsc.RESTART_ATTEMPT}']"}},
        }
    ]
    if fail_first:
        env.append({"name": "FAIL_FIRST", "value": "1"})
    spec: Obj = {
        "replicatedJobs": [{
            "name": "workers",
            "replicas": replicas,
            "template": {"spec": {
                "parallelism": pods, "completions": pods, "backoffLimit": 0,
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "python:3.12", "command": ["python", "-c", PRINT_ENV], "env": env}],
                }},
            }},
        }],
    }  # fmt: skip
    if policy is not None:
        spec["failurePolicy"] = policy
    return {"apiVersion": jsc.API_VERSION, "kind": "JobSet", "metadata": {"name": name}, "spec": spec}


def apply(cluster: LocalCluster, ns: str, body: Obj) -> None:
    cluster.kubectl("apply", "-n", ns, "-f", "-", stdin=yaml.safe_dump(body))


def logged_env(cluster: LocalCluster, ns: str, pod: str) -> dict[str, str | None]:
    out = cluster.kubectl("logs", "-n", ns, pod).stdout
    line = next(x for x in out.splitlines() if x.startswith("ENV "))
    return json.loads(line[4:])  # type: ignore[no-any-return]


def test_jobset_child_jobs_pods_and_completion(cluster: LocalCluster, ns: str) -> None:
    apply(cluster, ns, jobset("js", replicas=2, pods=2))
    js = wait_condition(cluster, "jobset", ns, "js", ("Completed", "Failed"))
    done = condition(js, "Completed")
    assert done is not None and done["reason"] == "AllJobsCompleted", js["status"]
    assert done["message"] == "jobset completed successfully"
    assert js["status"]["terminalState"] == "Completed" and js["status"]["restarts"] == 0
    assert js["status"]["replicatedJobsStatus"] == [
        {"name": "workers", "ready": 0, "succeeded": 2, "failed": 0, "active": 0, "suspended": 0}
    ]
    # the webhook's defaults
    rjob = js["spec"]["replicatedJobs"][0]
    assert rjob["template"]["spec"]["completionMode"] == "Indexed"
    assert js["spec"]["successPolicy"] == {"operator": "All"}
    assert js["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    uid = js["metadata"]["uid"]
    jobs = {j["metadata"]["name"]: j for j in kubectl_json(cluster, "get", "jobs", "-n", ns)["items"]}
    assert sorted(jobs) == ["js-workers-0", "js-workers-1"]
    for index, name in enumerate(sorted(jobs)):
        job = jobs[name]
        expected = {
            jsc.JOBSET_NAME: "js", jsc.JOBSET_UID: uid, jsc.REPLICATED_JOB_NAME: "workers",
            jsc.RESTART_ATTEMPT: "0", jsc.REPLICATED_JOB_REPLICAS: "2", jsc.GLOBAL_REPLICAS: "2",
            jsc.JOB_INDEX: str(index), jsc.JOB_GLOBAL_INDEX: str(index), jsc.JOB_KEY: jsc.job_key(ns, name),
        }  # fmt: skip
        for meta in (job["metadata"], job["spec"]["template"]["metadata"]):
            assert expected.items() <= meta["labels"].items()
            assert expected.items() <= meta["annotations"].items()
        assert job["metadata"]["ownerReferences"][0]["uid"] == uid
        assert job["spec"]["template"]["spec"]["subdomain"] == "js"
    pods = kubectl_json(cluster, "get", "pods", "-n", ns, "-l", f"{jsc.JOBSET_NAME}=js")["items"]
    hosts = sorted((p["spec"]["hostname"], p["spec"]["subdomain"], p["spec"]["restartPolicy"]) for p in pods)
    assert hosts == [(f"js-workers-{j}-{i}", "js", "Never") for j in range(2) for i in range(2)]
    for pod in pods:
        env = logged_env(cluster, ns, pod["metadata"]["name"])
        assert env["ATTEMPT"] == "0"
        assert (
            env["JOB_COMPLETION_INDEX"]
            == pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
        )
    svc = kubectl_json(cluster, "get", "service", "js", "-n", ns)
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["selector"] == {jsc.JOBSET_NAME: "js"}
    table = cluster.kubectl("get", "jobset", "js", "-n", ns).stdout
    assert "TERMINALSTATE" in table and "Completed" in table


def test_jobset_default_restart_policy_is_on_failure(cluster: LocalCluster, ns: str) -> None:
    body = jobset("dflt", replicas=1)
    del body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"]
    apply(cluster, ns, body)
    js = get(cluster, "jobset", ns, "dflt")
    assert js is not None
    assert (
        js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"]
        == "OnFailure"
    )


def test_jobset_without_failure_policy_fails_on_first_failed_job(cluster: LocalCluster, ns: str) -> None:
    apply(cluster, ns, jobset("nopolicy", replicas=2, fail_first=True))
    js = wait_condition(cluster, "jobset", ns, "nopolicy", ("Completed", "Failed"))
    failed = condition(js, "Failed")
    assert failed is not None and failed["reason"] == "FailedJobs", js["status"]
    assert failed["message"].startswith(
        "jobset failed due to one or more job failures (first failed job: nopolicy-workers-"
    )
    assert js["status"]["restarts"] == 0 and js["status"]["terminalState"] == "Failed"


def test_jobset_restart_recreates_every_child_job_with_the_next_attempt(
    cluster: LocalCluster, ns: str
) -> None:
    apply(cluster, ns, jobset("again", replicas=2, fail_first=True, policy={"maxRestarts": 2}))
    js = wait_condition(cluster, "jobset", ns, "again", ("Completed", "Failed"), timeout=180)
    assert condition(js, "Completed") is not None, js["status"]
    assert js["status"]["restarts"] == 1 and js["status"]["restartsCountTowardsMax"] == 1
    restarting = [c for c in js["status"]["conditions"] if c["type"] == "RestartingJobSet"]
    assert restarting and restarting[0]["status"] == "False", js["status"]["conditions"]
    jobs = kubectl_json(cluster, "get", "jobs", "-n", ns)["items"]
    assert sorted(j["metadata"]["name"] for j in jobs) == ["again-workers-0", "again-workers-1"]
    assert {j["metadata"]["labels"][jsc.RESTART_ATTEMPT] for j in jobs} == {"1"}
    pods = kubectl_json(cluster, "get", "pods", "-n", ns)["items"]
    assert len(pods) == 2 and {p["metadata"]["annotations"][jsc.RESTART_ATTEMPT] for p in pods} == {"1"}
    assert all(logged_env(cluster, ns, p["metadata"]["name"])["ATTEMPT"] == "1" for p in pods)
    events = kubectl_json(
        cluster, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=again"
    )["items"]
    reasons = [e["reason"] for e in events]
    assert "RestartJobSetFailurePolicyAction" in reasons and "AllJobsCompleted" in reasons, reasons


def test_jobset_fails_with_reached_max_restarts(cluster: LocalCluster, ns: str) -> None:
    body = jobset("maxed", replicas=1, policy={"maxRestarts": 1})
    container = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["python", "-c", "raise SystemExit(3)"]
    apply(cluster, ns, body)
    js = wait_condition(cluster, "jobset", ns, "maxed", ("Completed", "Failed"), timeout=180)
    failed = condition(js, "Failed")
    assert failed is not None and failed["reason"] == "ReachedMaxRestarts", js["status"]
    assert (
        failed["message"]
        == "jobset failed due to reaching max number of restarts (first failed job: maxed-workers-0)"
    )
    assert js["status"]["restarts"] == 1
    job = kubectl_json(cluster, "get", "job", "maxed-workers-0", "-n", ns)
    assert job["metadata"]["labels"][jsc.RESTART_ATTEMPT] == "1"


def test_jobset_failure_policy_rules_match_the_failure_message(cluster: LocalCluster, ns: str) -> None:
    """jobset's ``ruleIsApplicable`` (``pkg/controllers/failure_policy.go``, v0.10.0+): a rule applies only when
    one of its ``onJobFailureMessagePatterns`` is found in the child Job's failure message; a rule whose
    patterns all miss (an invalid one is skipped) is passed over, and the default action (restart) applies."""
    rules = {"maxRestarts": 1, "rules": [
        {"name": "miss", "action": "FailJobSet", "onJobFailureMessagePatterns": ["(unclosed", "^no such message$"]},
        {"name": "limit", "action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"],
         "onJobFailureMessagePatterns": ["backoff limit"]},
    ]}  # fmt: skip
    body = jobset("patterned", replicas=1, policy=rules)
    container = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["command"] = ["python", "-c", "raise SystemExit(3)"]
    apply(cluster, ns, body)
    missed = copy.deepcopy(body)
    missed["metadata"]["name"] = "unmatched"
    missed["spec"]["failurePolicy"]["rules"] = rules["rules"][:1]
    apply(cluster, ns, missed)
    js = wait_condition(cluster, "jobset", ns, "patterned", ("Completed", "Failed"), timeout=180)
    failed = condition(js, "Failed")
    assert failed is not None and failed["reason"] == "FailJobSetFailurePolicyAction", js["status"]
    assert js["status"]["restarts"] == 0
    js = wait_condition(cluster, "jobset", ns, "unmatched", ("Completed", "Failed"), timeout=180)
    failed = condition(js, "Failed")
    assert failed is not None and failed["reason"] == "ReachedMaxRestarts", js["status"]
    assert js["status"]["restarts"] == 1


def trainjob(name: str, command: list[str], *, runtime: str = "torch-distributed", kind: str = "ClusterTrainingRuntime",
             nodes: int = 2, nproc: int = 2) -> Obj:  # fmt: skip
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": runtime, "kind": kind},
            "trainer": {"numNodes": nodes, "numProcPerNode": nproc, "image": "python:3.12", "command": command,
                        "env": [{"name": "EXTRA", "value": "yes"}]},
        },
    }  # fmt: skip


def test_trainjob_becomes_a_jobset_with_the_torch_env(cluster: LocalCluster, ns: str) -> None:
    apply(cluster, ns, trainjob("tj", ["python", "-c", PRINT_ENV]))
    tj = wait_condition(cluster, "trainjob", ns, "tj", ("Complete", "Failed"))
    complete = condition(tj, "Complete")
    assert complete is not None and complete["reason"] == "AllJobsCompleted", tj["status"]
    js = get(cluster, "jobset", ns, "tj")
    assert js is not None
    owner = js["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("TrainJob", tj["metadata"]["uid"], True)
    rjob = js["spec"]["replicatedJobs"][0]
    assert rjob["name"] == "node" and rjob["replicas"] == 1
    assert rjob["template"]["spec"]["parallelism"] == rjob["template"]["spec"]["completions"] == 2
    container = rjob["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == "node" and container["image"] == "python:3.12"
    env = {e["name"]: e for e in container["env"]}
    assert env["EXTRA"]["value"] == "yes"
    assert env["PET_NNODES"]["value"] == "2" and env["PET_NPROC_PER_NODE"]["value"] == "2"
    assert env["PET_MASTER_ADDR"]["value"] == "tj-node-0-0.tj"
    assert env["PET_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    )
    assert {"containerPort": 29500, "protocol": "TCP"} in container["ports"]
    assert tj["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    pods = kubectl_json(cluster, "get", "pods", "-n", ns, "-l", f"{jsc.JOBSET_NAME}=tj")["items"]
    seen = {}
    for pod in pods:
        penv = logged_env(cluster, ns, pod["metadata"]["name"])
        seen[pod["spec"]["hostname"]] = penv["PET_NODE_RANK"]
        assert penv["PET_MASTER_ADDR"] == "127.0.0.1"  # the kubelet's stand-in for the pod DNS name
    assert seen == {"tj-node-0-0": "0", "tj-node-0-1": "1"}


def test_trainjob_failure_is_copied_from_its_jobset(cluster: LocalCluster, ns: str) -> None:
    # the torch-distributed runtime with backoffLimit 0 on its Job: the first failed container fails the Job
    # (the default, 6, only adds about 35 s of restarts with back-off before the same Failed)
    runtime = kubectl_json(cluster, "get", "clustertrainingruntime", "torch-distributed")
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 0
    apply(cluster, ns, {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
                        "metadata": {"name": "no-retries"}, "spec": runtime["spec"]})  # fmt: skip
    apply(cluster, ns, trainjob("broken", ["python", "-c", "raise SystemExit(2)"], runtime="no-retries",
                                kind="TrainingRuntime", nodes=1, nproc=1))  # fmt: skip
    tj = wait_condition(cluster, "trainjob", ns, "broken", ("Complete", "Failed"))
    failed = condition(tj, "Failed")
    assert failed is not None and failed["reason"] == "FailedJobs", tj["status"]
    assert failed["message"].endswith("(first failed job: broken-node-0)")
    table = cluster.kubectl("get", "trainjob", "broken", "-n", ns).stdout
    assert "Failed" in table


def test_trainjob_with_a_missing_runtime_gets_the_controllers_event(cluster: LocalCluster, ns: str) -> None:
    apply(
        cluster,
        ns,
        trainjob(
            "orphan", ["python", "-c", PRINT_ENV], runtime="mine", kind="TrainingRuntime", nodes=1, nproc=1
        ),
    )

    def event() -> Obj | None:
        items = kubectl_json(
            cluster, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=orphan"
        )["items"]
        return next((e for e in items if e["reason"] == "TrainJobResourcesCreationFailed"), None)

    ev = wait_for(event, 60, "the TrainJobResourcesCreationFailed Event")
    assert ev["type"] == "Warning"
    assert ev["message"] == (
        "TrainJob resources reconciliation failed: TrainingRuntime specified in TrainJob is not found: "
        'trainingruntimes.trainer.kubeflow.org "mine" not found'
    )
    assert get(cluster, "jobset", ns, "orphan") is None
    # the runtime created afterwards is used (the controller keeps reconciling)
    runtime = kubectl_json(cluster, "get", "clustertrainingruntime", "torch-distributed")
    apply(cluster, ns, {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
                        "metadata": {"name": "mine"}, "spec": runtime["spec"]})  # fmt: skip
    tj = wait_condition(cluster, "trainjob", ns, "orphan", ("Complete", "Failed"))
    assert condition(tj, "Complete") is not None, tj["status"]


def test_trainjob_with_an_unknown_runtime_kind_fails(cluster: LocalCluster, ns: str) -> None:
    apply(cluster, ns, trainjob("odd", ["python", "-c", PRINT_ENV], kind="SomethingElse", nodes=1, nproc=1))
    tj = wait_condition(cluster, "trainjob", ns, "odd", ("Failed",), timeout=60)
    failed = condition(tj, "Failed")
    assert failed is not None and failed["reason"] == "TrainingRuntimeNotSupported"
    assert failed["message"] == "unsupported runtime: SomethingElse.trainer.kubeflow.org"


def test_torchrun_two_ranks_per_pod_on_two_pods_dump_under_their_global_ranks(
    cluster: LocalCluster, ns: str, tmp_path: Path
) -> None:
    """Real torchrun in each of the 2 pods of a TrainJob (numNodes 2, numProcPerNode 2) starts 2 real gloo
    ranks: 4 global ranks, pod of node rank n holding ranks 2n and 2n+1, each dumping under its global rank."""
    prefix = f"{tmp_path}/rank_"
    body = trainjob("tr", [*TORCHRUN_WORKLOAD, "--scenario", "healthy"])
    body["spec"]["trainer"]["env"] = [{"name": "TORCH_FR_DUMP_TEMP_FILE", "value": prefix}]
    apply(cluster, ns, body)
    tj = wait_condition(cluster, "trainjob", ns, "tr", ("Complete", "Failed"), timeout=240)
    assert condition(tj, "Complete") is not None, tj["status"]  # every rank dumps as it finishes
    pods = kubectl_json(cluster, "get", "pods", "-n", ns, "-l", f"{jsc.JOBSET_NAME}=tr")["items"]
    assert sorted(p["spec"]["hostname"] for p in pods) == ["tr-node-0-0", "tr-node-0-1"]
    ranks_of = {}
    for pod in pods:
        index = int(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
        lines = [x for x in cluster.kubectl("logs", "-n", ns, pod["metadata"]["name"]).stdout.splitlines()
                 if x.startswith("faulty_training rank=")]  # fmt: skip
        fields = [dict(f.split("=", 1) for f in x.split()[1:] if "=" in f) for x in lines]
        assert all(f["world"] == "4" for f in fields), lines
        ranks_of[index] = sorted(int(f["rank"]) for f in fields)
        for f in fields:
            assert f["dump"] == f"{prefix}{f['rank']}", f
    assert ranks_of == {0: [0, 1], 1: [2, 3]}
    for rank in range(4):
        entries, _ = decode(Path(f"{prefix}{rank}").read_bytes())
        assert entries["pg_config"], rank  # a real Flight Recorder dump of that rank's process groups


def test_jobset_suspended_then_resumed(cluster: LocalCluster, ns: str) -> None:
    body = jobset("paused", replicas=1)
    body["spec"]["suspend"] = True
    apply(cluster, ns, body)
    js = wait_condition(cluster, "jobset", ns, "paused", ("Suspended",), timeout=60)
    suspended = condition(js, "Suspended") or {}
    assert (suspended.get("reason"), suspended.get("message")) == ("SuspendedJobs", "jobset is suspended")
    job = wait_for(lambda: get(cluster, "job", ns, "paused-workers-0"), 30, "the suspended child Job")
    assert job["spec"]["suspend"] is True
    job = wait_condition(cluster, "job", ns, "paused-workers-0", ("Suspended",), timeout=30)
    assert condition(job, "Suspended")["reason"] == "JobSuspended"  # type: ignore[index]
    assert kubectl_json(cluster, "get", "pods", "-n", ns)["items"] == []
    cluster.kubectl(
        "patch", "jobset", "paused", "-n", ns, "--type", "merge", "-p", '{"spec": {"suspend": false}}'
    )
    js = wait_condition(cluster, "jobset", ns, "paused", ("Completed", "Failed"))
    assert condition(js, "Completed") is not None, js["status"]
    [suspended] = [x for x in js["status"]["conditions"] if x["type"] == "Suspended"]
    assert (suspended["status"], suspended["reason"], suspended["message"]) == (
        "False",
        "ResumeJobs",
        "jobset is resumed",
    )


def test_jobset_in_order_startup_makes_each_replicated_job_after_the_ones_before_started(
    cluster: LocalCluster, ns: str
) -> None:
    body = jobset("ordered", replicas=1)
    first = body["spec"]["replicatedJobs"][0]
    first["name"] = "leader"
    first["template"]["spec"]["template"]["spec"]["containers"][0]["command"] = [
        "python",
        "-c",
        "import time; time.sleep(3)",
    ]
    second = json.loads(json.dumps(first))
    second["name"] = "workers"
    body["spec"]["replicatedJobs"].append(second)
    body["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    apply(cluster, ns, body)
    js = wait_condition(cluster, "jobset", ns, "ordered", ("Completed", "Failed"))
    assert condition(js, "Completed") is not None, js["status"]
    started = condition(js, "StartupPolicyCompleted")
    assert started is not None and started["reason"] == "InOrderStartupPolicyCompleted", js["status"]
    [progress] = [x for x in js["status"]["conditions"] if x["type"] == "StartupPolicyInProgress"]
    assert (progress["status"], progress["reason"]) == ("False", "InOrderStartupPolicyInProgress")
    leader_pod = kubectl_json(cluster, "get", "pods", "-n", ns, "-l", f"{jsc.REPLICATED_JOB_NAME}=leader")[
        "items"
    ][0]
    workers_job = kubectl_json(cluster, "get", "job", "ordered-workers-0", "-n", ns)
    assert workers_job["metadata"]["creationTimestamp"] >= leader_pod["status"]["startTime"]


def test_trainjob_suspended_then_resumed(cluster: LocalCluster, ns: str) -> None:
    body = trainjob("held", ["python", "-c", PRINT_ENV], nodes=1, nproc=1)
    body["spec"]["suspend"] = True
    apply(cluster, ns, body)
    tj = wait_condition(cluster, "trainjob", ns, "held", ("Suspended",), timeout=60)
    assert condition(tj, "Suspended")["message"] == "TrainJob is suspended"  # type: ignore[index]
    js = wait_condition(cluster, "jobset", ns, "held", ("Suspended",), timeout=60)
    assert js["spec"]["suspend"] is True
    assert kubectl_json(cluster, "get", "pods", "-n", ns)["items"] == []
    cluster.kubectl(
        "patch", "trainjob", "held", "-n", ns, "--type", "merge", "-p", '{"spec": {"suspend": false}}'
    )
    tj = wait_condition(cluster, "trainjob", ns, "held", ("Complete", "Failed"))
    assert condition(tj, "Complete") is not None, tj["status"]
    [suspended] = [x for x in tj["status"]["conditions"] if x["type"] == "Suspended"]
    assert (suspended["status"], suspended["reason"]) == ("False", "Resumed")
