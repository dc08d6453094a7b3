"""The whole chain for Kubeflow Trainer v2 TrainJobs and JobSets (PyTorchJob: ``test_e2e.py``): real torch gloo
ranks under real torchrun, 2 pods of 2 ranks, on the local cluster or a real one with the kind installed.
The verdict lands on the object the user created; each rank is placed on its pod and node; a JobSet restart
is a second attempt with its own Incident and its own dumps."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from e2e_helpers import GPU_HANG, Target, wait_for
from e2e_kinds import COMPLETION_INDEX, JOBSET, KINDS, TRAINJOB, KindJobs, PodWatch, script, torchrun

from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SOFTWARE = {"desync", "missing_rank", "size_mismatch", "dtype_mismatch"}


@pytest.fixture(params=sorted(KINDS))
def jobs(request: pytest.FixtureRequest, target: Target) -> Iterator[KindJobs]:
    made = KindJobs(target, KINDS[request.param])
    yield made
    made.cleanup()


@pytest.fixture
def jobsets(target: Target) -> Iterator[KindJobs]:
    made = KindJobs(target, JOBSET)
    yield made
    made.cleanup()


@pytest.fixture
def trainjobs(target: Target) -> Iterator[KindJobs]:
    made = KindJobs(target, TRAINJOB)
    yield made
    made.cleanup()


def node_rank(pod: dict) -> int:
    return int(pod["metadata"]["annotations"][COMPLETION_INDEX])


def failed_once(pod: dict) -> bool:
    """A container of ``pod`` ended non-zero (now, or before a restart in place)."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        ends = [(cs.get(k) or {}).get("terminated") or {} for k in ("state", "lastState")]
        if int(cs.get("restartCount") or 0) > 0 or any(e.get("exitCode") for e in ends):
            return True
    return False


def test_skip_verdict_lands_on_the_users_object_with_every_rank_on_its_pod_and_node(jobs: KindJobs) -> None:
    """torchrun, 2 ranks per pod on 2 pods: ranks 0-1 in the pod of node rank 0, 2-3 in node rank 1's; an
    opted-out job of the same kind beside it gets nothing."""
    watcher = PodWatch(
        jobs.target, c.LABEL_JOBSET_NAME
    )  # a failed Job deletes its running pods: watch them all
    try:
        name = jobs.submit(script("skip"))
        quiet = jobs.submit(script("skip"), capture=False, prefix="optout")
        ann = jobs.wait_verdict(name)
    finally:
        watcher.stop()
    assert ann[c.ANN_CATEGORY] in SOFTWARE, ann
    assert ann[c.ANN_SUSPECT_RANKS] == "1"
    assert c.ANN_SUSPECT_NODES not in ann  # a software finding names no suspect node
    [incident] = jobs.reported_incidents(name, 1)
    assert ann[c.ANN_INCIDENT] == incident["metadata"]["name"]
    assert incident["spec"]["jobRef"]["kind"] == jobs.kind.kind and incident["spec"]["jobRef"]["name"] == name
    assert incident["status"]["counts"]["dumpedRanks"] == 4 == incident["status"]["counts"]["expectedRanks"]
    pods = watcher.of_job(name)
    assert sorted(node_rank(p) for p in pods.values()) == [0, 1], sorted(pods)
    observed = {o["name"]: o for o in incident["status"]["observed"]["pods"]}
    assert set(observed) == set(pods), (observed, sorted(pods))
    for pod_name, pod in pods.items():
        n = node_rank(pod)
        assert observed[pod_name]["ranks"] == f"{2 * n}-{2 * n + 1}", observed[pod_name]
        assert observed[pod_name]["node"] == pod["spec"]["nodeName"]
    [culprit_pod] = [p for p in pods.values() if node_rank(p) == 0]  # rank 1 is local rank 1 of node rank 0
    [said] = jobs.events(name, "CulpritsNamed")  # on the user's object
    assert f"rank 1 ran on node {culprit_pod['spec']['nodeName']}" in said and "no node is suspect" in said
    assert incident["status"]["verdict"]["ranOn"] == f"rank 1 ran on node {culprit_pod['spec']['nodeName']}"
    # the opted-out job failed the same way at the same time (an opted-in one's Incident opens at once and
    # its verdict comes after the collection and the analysis): nothing injected, no Incident, no verdict
    wait_for(lambda: any(failed_once(p) for p in jobs.pods(quiet)) or jobs.true_conditions(quiet).get("Failed"),
             60, f"{quiet} to fail")  # fmt: skip
    quiet_pods = watcher.of_job(quiet)
    assert len(quiet_pods) == 2, sorted(quiet_pods)
    for pod in quiet_pods.values():
        assert c.ANN_INJECTED not in (pod["metadata"].get("annotations") or {})
        assert not pod["spec"].get("initContainers")
        assert not any(
            e["name"].startswith("TORCH_FR") for e in pod["spec"]["containers"][0].get("env") or []
        )
    assert jobs.incidents(quiet) == []
    assert c.ANN_VERDICT not in jobs.annotations(quiet)


def test_gpu_hang_names_the_node_of_the_culprits_pod(jobs: KindJobs) -> None:
    """Hardware class: the suspect node is the node of the pod that ran rank 1 (4 pods of 1 rank under
    torchrun, one per node: a cordon is planned only when few of the job's nodes are suspects), on the user's
    object, with the cordon planned in dry-run."""
    if jobs.target.local is None:
        pytest.skip("needs the stand-ins: the GPU hang is fabricated by the demo workload (no GPU here)")
    watcher = PodWatch(jobs.target, c.LABEL_JOBSET_NAME)
    try:
        name = jobs.submit(torchrun(GPU_HANG), pods=4, nproc=1)
        ann = jobs.wait_verdict(name)
    finally:
        watcher.stop()
    assert ann[c.ANN_CATEGORY] == "gpu_hang", ann
    assert ann[c.ANN_SUSPECT_RANKS] == "1", ann
    pods = watcher.of_job(name)
    assert len({p["spec"].get("nodeName") for p in pods.values()}) == 4, pods
    [culprit_pod] = [p for p in pods.values() if node_rank(p) == 1]
    node = culprit_pod["spec"]["nodeName"]
    assert ann[c.ANN_SUSPECT_NODES] == node
    [incident] = jobs.reported_incidents(name, 1)
    assert incident["status"]["suspectNodes"] == [node]
    plan = wait_for(lambda: jobs.events(name, "Remediation"), 20, "the remediation plan")
    # the dumps only nominate the node: without a probe, its health agents or a second namespace, no cordon
    assert len(plan) == 1 and plan[0].startswith(f"dry-run: no cordon; skip {node} (nominated only"), plan
    assert not jobs.target.node(node)["spec"].get("unschedulable")


def test_crashed_rank_is_named_missing(jobs: KindJobs) -> None:
    name = jobs.submit(script("crash"))
    ann = jobs.wait_verdict(name)
    assert ann[c.ANN_CATEGORY] == "missing_rank", ann
    assert "2" in ann[c.ANN_SUSPECT_RANKS].split(","), (
        ann
    )  # the crashed rank (its torchrun may stop rank 3 too)
    [incident] = jobs.reported_incidents(name, 1)
    assert incident["spec"]["jobRef"]["kind"] == jobs.kind.kind


def test_healthy_job_completes_without_an_incident(jobs: KindJobs) -> None:
    name = jobs.submit(script("healthy"))
    ends = jobs.wait_finished(name)
    assert {"Complete", "Completed"} & set(ends), ends
    assert jobs.incidents(name) == []
    assert c.ANN_VERDICT not in jobs.annotations(name)
    pods = jobs.pods(name)
    assert len(pods) == 2 and all(c.ANN_INJECTED in (p["metadata"].get("annotations") or {}) for p in pods)


def test_jobset_restart_is_a_second_attempt_with_its_own_incident_and_dumps(
    target: Target, jobsets: KindJobs
) -> None:
    jobs = jobsets
    watcher = PodWatch(target, c.LABEL_JOBSET_NAME)
    try:
        name = jobs.submit(script("skip"), max_restarts=1, prefix="restart")
        ends = jobs.wait_finished(name, timeout=240)
        assert ends["Failed"]["reason"] == "ReachedMaxRestarts", ends
        first, second = jobs.reported_incidents(name, 2, timeout=120)
    finally:
        watcher.stop()
    attempt_of = {
        n: p["metadata"]["labels"][c.LABEL_JOBSET_RESTART_ATTEMPT] for n, p in watcher.of_job(name).items()
    }
    assert sorted(attempt_of.values()) == ["0", "0", "1", "1"], attempt_of
    for incident, attempt in ((first, "0"), (second, "1")):
        status = incident["status"]
        assert status["phase"] == "Reported" and status["counts"]["dumpedRanks"] == 4, status
        pods = [o["name"] for o in status["observed"]["pods"]]
        assert sorted(attempt_of[p] for p in pods) == [attempt, attempt], (incident["metadata"]["name"], pods)
    assert first["spec"]["storageUrl"] != second["spec"]["storageUrl"]
    ann = jobs.annotations(name)
    assert (
        ann[c.ANN_INCIDENT] == second["metadata"]["name"]
    )  # the verdict on the JobSet is the latest attempt's
    if target.local is not None:  # the store itself: each attempt's pod records name only its own pods
        for incident, attempt in ((first, "0"), (second, "1")):
            recorded = stored_pod_names(target, incident["spec"]["storageUrl"])
            assert recorded and {attempt_of[p] for p in recorded} == {attempt}, (recorded, attempt)


def stored_pod_names(target: Target, url: str) -> list[str]:
    """The pods whose records (``pods/<pod>.json``) are under an attempt's storage URL, in the local store."""

    from frwatch_analyzers.store.layout import split_s3_url

    assert target.local is not None and target.local.store is not None
    store = target.local.store
    s3 = store.client()
    bucket, key = split_s3_url(url)
    listed = wait_for(
        lambda: s3.list_objects_v2(Bucket=bucket, Prefix=key.rstrip("/") + "/pods/").get("Contents"),
        30, f"pod records under {url}",
    )  # fmt: skip
    return [o["Key"].rsplit("/", 1)[1].removesuffix(".json") for o in listed]


def test_trainjob_whose_runtime_is_missing_is_named_on_it(target: Target, trainjobs: KindJobs) -> None:
    """Bad input: a TrainJob naming a TrainingRuntime that does not exist. The trainer's validating webhook
    refuses it where it runs (then the refusal names the runtime); else the trainer makes no JobSet and
    frwatch names the problem in an Event on the TrainJob, with no Incident and no crash."""
    from kubernetes import client

    jobs = trainjobs
    runtime = f"absent-{uuid.uuid4().hex[:6]}"
    body = jobs.body(f"noruntime-{uuid.uuid4().hex[:6]}", script("healthy"), pods=2, nproc=2, capture=True,
                     max_restarts=None)  # fmt: skip
    body["spec"]["runtimeRef"] = {"name": runtime, "kind": "TrainingRuntime"}
    name = body["metadata"]["name"]
    try:
        jobs.create(body)
    except client.ApiException as exc:  # the trainer's webhook (a real cluster): the user sees it at once
        assert exc.status in (400, 403, 422) and runtime in str(exc.body), exc
        return
    [said] = wait_for(lambda: jobs.events(name, "JobSpecProblem"), 60, f"frwatch's JobSpecProblem on {name}")
    assert f"TrainingRuntime {runtime!r}, which does not exist" in said, said
    trainer_said = wait_for(
        lambda: jobs.events(name, "TrainJobResourcesCreationFailed"), 60, "the trainer's Event"
    )
    assert runtime in trainer_said[0]
    assert jobs.incidents(name) == [] and jobs.pods(name) == []
    assert target.local is None or target.local.operator_restarts == 0
