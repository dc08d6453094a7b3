"""Every job-kind adapter question (frwatch_operator.kinds.job_kind, jobset_kinds, torchrun_ranks) on job and pod
bodies shaped as the real controllers make them (``kind_bodies`` cites the releases)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from kind_bodies import jobset, mnist_container, pod, trainer_container, trainjob, trainjob_pods

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_operator import constants as c
from frwatch_operator.capture.webhook_patch import attempt_of as admission_attempt
from frwatch_operator.collect.progress import rank_owners
from frwatch_operator.detect.observations import Observations
from frwatch_operator.detect.pod_failure import attempt_of, pod_facts
from frwatch_operator.kinds.job_kind import (
    KINDS,
    PYTORCHJOB,
    enabled_kinds,
    kind_of,
    kinds_for_pod,
    pod_labels,
)
from frwatch_operator.kinds.jobset_trainjob import JOBSET, TRAINJOB, owner_chain, runtime_ref
from frwatch_operator.kinds.rank_layout import RankLayout
from frwatch_operator.kinds.torchrun_ranks import torchrun_ranks

UNKNOWN = RankLayout(world_size=None, nproc_per_node=None, masters=0)


def test_every_kind_has_an_adapter_and_the_setting_names_them() -> None:
    assert list(KINDS) == list(c.JOB_KINDS)
    assert kind_of("TrainJob") is TRAINJOB and kind_of("JobSet") is JOBSET and kind_of("MPIJob") is None
    assert [k.kind for k in enabled_kinds("JobSet, PyTorchJob")] == ["PyTorchJob", "JobSet"]
    with pytest.raises(ValueError, match="MPIJob"):
        enabled_kinds("MPIJob")
    assert pod_labels(enabled_kinds("PyTorchJob,TrainJob,JobSet")) == [c.KF_LABEL_JOB_NAME, c.LABEL_JOBSET_NAME]
    assert pod_labels(enabled_kinds("TrainJob,JobSet")) == [c.LABEL_JOBSET_NAME]
    assert (TRAINJOB.group, TRAINJOB.version, TRAINJOB.plural) == ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
    assert (JOBSET.group, JOBSET.version, JOBSET.plural) == ("jobset.x-k8s.io", "v1alpha2", "jobsets")


# --- which pods belong to a job --------------------------------------------------------------------------------


def test_a_trainjobs_pods_belong_to_it_by_the_jobset_name_and_their_job_controller() -> None:
    pods = trainjob_pods("llama")
    name, kinds = kinds_for_pod(pods[0], list(KINDS.values()))
    assert name == "llama" and kinds == [TRAINJOB, JOBSET]  # the TrainJob first: its JobSet is not the user's
    assert TRAINJOB.job_name_of(pods[0]) == "llama" and not TRAINJOB.owned_elsewhere(pods[0], "tj-uid-1")
    stray = copy.deepcopy(pods[0])
    stray["metadata"]["ownerReferences"][0].update(kind="ReplicaSet", apiVersion="apps/v1")
    assert TRAINJOB.owned_elsewhere(stray) and JOBSET.owned_elsewhere(stray)
    assert kinds_for_pod({"metadata": {"labels": {"app": "x"}}}, list(KINDS.values())) == ("", [])


def test_a_jobset_pod_of_another_jobset_of_the_same_name_is_not_its_own() -> None:
    p = pod("train", "workers", 0, mnist_container(), jobset_uid="old-uid")
    assert not JOBSET.owned_elsewhere(p) and not JOBSET.owned_elsewhere(p, "old-uid")
    assert JOBSET.owned_elsewhere(p, "new-uid")


def test_the_owner_chain_from_a_pod_reaches_the_trainjob() -> None:
    tj = trainjob("llama")
    js = jobset("llama", owner=tj)
    p = trainjob_pods("llama")[1]
    chain = owner_chain(p, js)
    assert [(s.kind, s.name) for s in chain] == [
        ("Pod", p["metadata"]["name"]), ("Job", "llama-node-0"), ("JobSet", "llama"), ("TrainJob", "llama")
    ]  # fmt: skip
    assert chain[-1].uid == "tj-uid-1" and chain[2].uid == "js-uid-1"
    assert [s.kind for s in owner_chain(p)] == ["Pod", "Job", "JobSet"]  # without the JobSet's body


def test_a_jobset_run_by_a_trainjob_is_not_the_users_object() -> None:
    assert "TrainJob llama" in JOBSET.handled_elsewhere(jobset("llama", owner=trainjob("llama")))
    assert JOBSET.handled_elsewhere(jobset("mine")) == ""


# --- ranks ---------------------------------------------------------------------------------------------------


def test_torchrun_nproc_2_on_2_pods_maps_all_4_ranks_to_the_right_pod_and_node() -> None:
    pods = trainjob_pods("llama", nodes=2, nproc="2")
    layout = TRAINJOB.layout(trainjob("llama", nodes=2, nproc=2))
    assert (layout.world_size, layout.nproc_per_node) == (4, 2)
    facts = [pod_facts(p, ranks=TRAINJOB.pod_ranks(p, layout).ranks) for p in pods]
    owners = rank_owners(facts, {})
    by_name = {f.name: f for f in facts}
    assert {r: (owners[r], by_name[owners[r]].node) for r in range(4)} == {
        0: (pods[0]["metadata"]["name"], "gpu-node-0"),
        1: (pods[0]["metadata"]["name"], "gpu-node-0"),
        2: (pods[1]["metadata"]["name"], "gpu-node-1"),
        3: (pods[1]["metadata"]["name"], "gpu-node-1"),
    }
    assert all(f.job == "llama" and f.attempt == "0" for f in facts)


def test_the_jobset_example_pods_hold_one_rank_each_from_the_completion_index() -> None:
    pods = [pod("pytorch", "workers", i, mnist_container()) for i in range(4)]
    assert [JOBSET.ranks_of(p, UNKNOWN) for p in pods] == [range(i, i + 1) for i in range(4)]
    layout = JOBSET.layout(jobset("pytorch"))
    assert (layout.world_size, layout.nproc_per_node) == (4, 1)


@pytest.mark.parametrize(
    ("command", "ranks"),
    [
        (["torchrun", "--nproc-per-node=2", "--node-rank=$(JOB_COMPLETION_INDEX)", "t.py"], range(6, 8)),
        (["torchrun", "--nproc_per_node", "4", "--node_rank", "${JOB_COMPLETION_INDEX}", "t.py"], range(12, 16)),
        (["sh", "-c", "torchrun --node-rank=$JOB_COMPLETION_INDEX t.py"], range(3, 4)),  # torchrun's default: 1
        (["torchrun", "--node-rank=1", "t.py"], range(1, 2)),  # a literal is read as written
    ],
)
def test_torchrun_arguments_give_the_ranks_of_completion_index_3(command: list[str], ranks: range) -> None:
    p = pod("js", "workers", 3, {"name": "trainer", "image": "x", "command": command})
    assert JOBSET.pod_ranks(p, UNKNOWN).ranks == ranks and not JOBSET.pod_ranks(p, UNKNOWN).problem


def test_the_torchrun_argument_wins_over_the_pet_env() -> None:
    container = trainer_container(2, "2", "j")
    container["command"] = ["torchrun", "--nproc-per-node=1", "t.py"]
    assert TRAINJOB.ranks_of(pod("j", "node", 1, container), UNKNOWN) == range(1, 2)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda x: x["env"].__setitem__(2, {"name": "PET_NODE_RANK", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}}),
         "not a literal or the pod's own annotation"),
        (lambda x: x.__setitem__("command", ["sh", "-c", "torchrun --node-rank=$((JOB_COMPLETION_INDEX*2)) t.py"]),
         "is not a number"),
        (lambda x: x["env"].__setitem__(1, {"name": "PET_NPROC_PER_NODE", "value": "auto"}), "decided by torchrun at run time"),
        (lambda x: x["env"].__setitem__(2, {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.annotations['example.com/rank']"}}}), "which the pod lacks"),
        (lambda x: x["env"].__setitem__(1, {"name": "PET_NPROC_PER_NODE", "value": str(MAX_WORLD_SIZE)}), "past the"),
        (lambda x: x.__setitem__("command", ["torchrun", "--node-rank=$(NODE_RANK)", "t.py"]),
         "does not set"),
        (lambda x: x.__setitem__("env", []), "no container sets PET_NODE_RANK"),
    ],
)  # fmt: skip
def test_a_pod_whose_rank_cannot_be_derived_gets_none_and_is_named(change: Any, why: str) -> None:
    container = trainer_container(2, "2", "j")
    change(container)
    p = pod("j", "node", 1, container)
    if why == "no container sets PET_NODE_RANK":  # the Job controller's JOB_COMPLETION_INDEX alone is no rank
        p["spec"]["containers"][0]["env"] = [e for e in p["spec"]["containers"][0]["env"] if e["name"] != "PET_NODE_RANK"]
    got = TRAINJOB.pod_ranks(p, UNKNOWN)
    assert got.ranks == range(0) and why in got.problem, got


def test_containers_that_disagree_on_the_rank_give_none() -> None:
    p = pod("j", "node", 1, trainer_container(2, "2", "j"))
    other = {"name": "second", "image": "x", "command": ["torchrun", "--node-rank=0", "t.py"]}
    p["spec"]["containers"].append(other)
    assert torchrun_ranks(p).ranks == range(0) and "disagree" in torchrun_ranks(p).problem
    p["spec"]["containers"].append({"name": c.AGENT_CONTAINER, "image": "a", "command": ["torchrun", "--node-rank=9"]})
    p["spec"]["containers"].remove(other)
    assert torchrun_ranks(p).ranks == range(2, 4)  # frwatch's own agent is never read


def test_an_initializer_pod_of_a_trainjob_holds_no_rank_and_that_is_no_problem() -> None:
    p = pod("llama", "dataset-initializer", 0, {"name": "dataset-initializer", "image": "x"})
    assert TRAINJOB.pod_ranks(p, UNKNOWN).ranks == range(0) and TRAINJOB.pod_ranks(p, UNKNOWN).problem == ""


def test_trainjob_layout_from_its_spec_and_unknown_when_the_runtime_decides() -> None:
    assert TRAINJOB.layout(trainjob(nodes=3, nproc=8)).world_size == 24
    assert TRAINJOB.layout(trainjob(nodes=None, nproc=2)).world_size is None
    assert TRAINJOB.layout(trainjob(nodes=2, nproc=None)).world_size is None
    big = TRAINJOB.layout(trainjob(nodes=MAX_WORLD_SIZE, nproc=8))
    assert big.world_size is None and "more than" in big.problem


def test_pytorchjob_pods_keep_their_replica_label_ranks() -> None:
    job = {"spec": {"nprocPerNode": 2, "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 1}}}}
    labels = {c.KF_LABEL_JOB_NAME: "j", c.KF_LABEL_REPLICA_TYPE: "worker", c.KF_LABEL_REPLICA_INDEX: "0"}
    p = {"metadata": {"name": "j-worker-0", "labels": labels}, "spec": {}}
    assert PYTORCHJOB.pod_ranks(p, PYTORCHJOB.layout(job)).ranks == range(2, 4)
    del labels[c.KF_LABEL_REPLICA_INDEX]
    got = PYTORCHJOB.pod_ranks(p, PYTORCHJOB.layout(job))
    assert got.ranks == range(0) and c.KF_LABEL_REPLICA_INDEX in got.problem


# --- attempts: a JobSet restart recreates every pod with the next restart-attempt -------------------------------


def test_a_jobset_restart_never_mixes_the_two_attempts_pods() -> None:
    first = [pod("train", "workers", i, mnist_container(), restart=0) for i in range(4)]
    second = [pod("train", "workers", i, mnist_container(), restart=1) for i in range(4)]
    assert {p["metadata"]["name"] for p in first}.isdisjoint(p["metadata"]["name"] for p in second)
    assert [attempt_of(p) for p in first + second] == ["0"] * 4 + ["1"] * 4
    # at admission the label wins over frwatch's own count (which may lag a restart)
    assert admission_attempt(second[0], "0") == "1"
    seen = Observations()
    for p in second + first:  # interleaved order: each lands in its own attempt
        seen.record_pod(pod_facts(p, ranks=JOBSET.ranks_of(p, UNKNOWN)))
    assert sorted(f.name for f in seen.pods("ns", "train", "0")) == sorted(p["metadata"]["name"] for p in first)
    assert sorted(f.name for f in seen.pods("ns", "train", "1")) == sorted(p["metadata"]["name"] for p in second)
    assert sorted(r for f in seen.pods("ns", "train", "1") for r in f.ranks) == [0, 1, 2, 3]


def _started(attempt: str, at: str = "2026-11-25T10:00:00Z") -> dict[str, str]:
    return {c.ANN_ATTEMPT: attempt, c.ANN_ATTEMPT_STARTED: f"{attempt}@{at}"}


def test_a_jobset_that_restarted_past_the_attempt_frwatch_saw_failed_that_attempt() -> None:
    failure = JOBSET.failure(jobset("train", restarts=1, annotations=_started("0")))
    assert failure is not None and failure.attempt == "0" and "restarts is 1" in failure.describe()
    assert JOBSET.failure(jobset("train", restarts=1, annotations=_started("1"))) is None  # attempt 1 runs
    assert JOBSET.failure(jobset("train", restarts=1, annotations={c.ANN_ATTEMPT: "0"})) is None  # never seen


def _failed(body: dict[str, Any], reason: str, at: str) -> dict[str, Any]:
    body.setdefault("status", {})["conditions"] = [
        {"type": "Failed", "status": "True", "reason": reason, "message": "m", "lastTransitionTime": at}
    ]
    return body


def test_failed_conditions_of_jobset_and_trainjob_count_for_the_current_attempt_only() -> None:
    js = _failed(jobset("train", annotations=_started("0")), "FailedJobs", "2026-11-25T10:05:00Z")
    failure = JOBSET.failure(js)
    assert failure is not None and failure.reason == "FailedJobs" and failure.at == datetime(2026, 11, 25, 10, 5, tzinfo=UTC)
    tj = _failed(trainjob(annotations=_started("0")), "ReachedMaxRestarts", "2026-11-25T10:05:00Z")
    assert TRAINJOB.failure(tj) is not None
    old = _failed(trainjob(annotations=_started("1", "2026-11-25T10:06:00Z")), "FailedJobs", "2026-11-25T10:05:00Z")
    assert TRAINJOB.failure(old) is None  # about attempt 0: written before attempt 1's first pod


# --- bad input --------------------------------------------------------------------------------------------------


def test_a_trainjob_without_a_runtime_is_named() -> None:
    assert runtime_ref(trainjob(runtime="torch-distributed")) == (c.TRAINER_GROUP, "ClusterTrainingRuntime", "torch-distributed")
    assert TRAINJOB.spec_problems(trainjob()) == []
    assert "runtimeRef.name is missing" in TRAINJOB.spec_problems(trainjob(runtime=None))[0]
    odd = trainjob()
    odd["spec"]["runtimeRef"]["kind"] = "MPIRuntime"
    assert "no Trainer runtime" in TRAINJOB.spec_problems(odd)[0]
    unsupported = _failed(trainjob(), "TrainingRuntimeNotSupported", "2026-11-25T10:05:00Z")
    assert "TrainingRuntimeNotSupported" in TRAINJOB.spec_problems(unsupported)[0]
    bare = {"spec": {"runtimeRef": {"name": "r"}}}  # the API's defaults: ClusterTrainingRuntime
    assert runtime_ref(bare) == (c.TRAINER_GROUP, c.CLUSTER_TRAINING_RUNTIME_KIND, "r")


def test_a_jobset_pod_without_the_jobset_labels_is_named() -> None:
    p = pod("train", "workers", 0, mnist_container())
    assert JOBSET.pod_problems(p) == []
    del p["metadata"]["labels"][c.LABEL_JOBSET_RESTART_ATTEMPT]
    (problem,) = JOBSET.pod_problems(p)
    assert c.LABEL_JOBSET_RESTART_ATTEMPT in problem and "frwatch's count" in problem
    assert attempt_of(p) is None  # not injected and no label: no attempt is guessed
    assert "empty" in JOBSET.spec_problems({"spec": {"replicatedJobs": []}})[0]


def test_each_kind_says_when_the_job_ended_in_its_own_words() -> None:
    from frwatch_operator.detect.job_failure import job_end

    def ended(kind: Any, condition: str) -> str | None:
        return job_end({"status": {"conditions": [{"type": condition, "status": "True"}]}}, kind.succeeded_condition)

    assert ended(TRAINJOB, "Complete") == "Succeeded" and ended(JOBSET, "Completed") == "Succeeded"
    assert ended(PYTORCHJOB, "Succeeded") == "Succeeded"
    assert ended(TRAINJOB, "Failed") == ended(JOBSET, "Failed") == "Failed"
    assert ended(JOBSET, "Suspended") is None and ended(TRAINJOB, "Completed") is None
