"""The operator's handlers and webhook on TrainJob and JobSet bodies (``kind_bodies``), with an in-memory
Kubernetes adapter that records what would be written: which object is followed, annotated and named in
Events (the one the user created), the Incident of a TrainJob, and bad input named in an Event and in the
Incident's conditions. The real API path (kopf, the webhook over HTTP, the local cluster) is the e2e tests'."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kind_bodies import jobset, mnist_container, pod, trainer_container, trainjob, trainjob_pods

from frwatch_analyzers.store.layout import RootUrl
from frwatch_operator import constants as c
from frwatch_operator.capture.webhook_patch import apply_ops
from frwatch_operator.config import load_config
from frwatch_operator.detect.observations import Observations
from frwatch_operator.handlers import Deps
from frwatch_operator.handlers.incidents import input_conditions
from frwatch_operator.handlers.jobs import on_job
from frwatch_operator.handlers.pods import on_pod
from frwatch_operator.kinds.job_kind import JobKind
from frwatch_operator.kinds.jobset_trainjob import JOBSET, TRAINJOB
from frwatch_operator.kube.adapter import ObjectRef
from frwatch_operator.notices import Notice, Reason
from frwatch_operator.resources import ConditionType
from frwatch_operator.webhook import JobIndex, mutate_pod

ENABLED = {c.ANN_CAPTURE: c.CAPTURE_ENABLED}


class FakeKube:
    """The calls the handlers make on ``kube.Kube``, on dicts."""

    def __init__(self, *objects: dict[str, Any], runtimes: tuple[str, ...] = ("torch-distributed",)) -> None:
        self.objects = {(o["kind"], o["metadata"]["name"]): copy.deepcopy(o) for o in objects}
        self.runtimes = runtimes
        self.events: list[tuple[ObjectRef, Notice]] = []
        self.incidents: dict[str, dict[str, Any]] = {}

    def get_job(self, kind: JobKind, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.objects.get((kind.kind, name))
        return copy.deepcopy(found) if found is not None else None

    def annotate_if(self, kind: JobKind, namespace: str, name: str,
                    decide: Callable[[Mapping[str, Any]], Mapping[str, str | None] | None]) -> Mapping[str, str | None] | None:  # fmt: skip
        job = self.objects.get((kind.kind, name))
        new = decide(job) if job is not None else None
        if job is None or not new:
            return None
        job["metadata"].setdefault("annotations", {}).update(new)
        return new

    def bump_attempt(self, kind: JobKind, namespace: str, name: str, opened: str) -> str | None:
        written = self.annotate_if(kind, namespace, name, lambda j: {c.ANN_ATTEMPT: str(int(opened) + 1)})
        return str(written[c.ANN_ATTEMPT]) if written else None

    def record_attempt_start(self, kind: JobKind, namespace: str, name: str, attempt: str | None,
                             created: datetime | None) -> str | None:  # fmt: skip
        return None

    def runtime_exists(self, namespace: str, kind: str, name: str) -> bool:
        return name in self.runtimes

    def post_event(self, about: ObjectRef, notice: Notice) -> bool:
        self.events.append((about, notice))
        return True

    def create_incident(self, body: Mapping[str, Any]) -> bool:
        self.incidents[body["metadata"]["name"]] = dict(body)
        return True

    def patch_incident_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.incidents[name]["status"] = dict(status)

    def read_pod_log(self, namespace: str, pod: str, container: str, **_: Any) -> bytes:
        """The failed pod's log, read when its Incident opens (issue 14): these pods printed nothing."""
        return b""


class FakeStore:
    """The object store as the handlers use it when an Incident opens: the failed pod's log goes there."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put(self, key: str, data: bytes, **_: Any) -> None:
        self.objects[key] = data


def deps_of(kube: FakeKube) -> Deps:
    config = load_config({"FRWATCH_S3_BUCKET": "b"})
    return Deps(config, JobIndex(), Observations(), kube, FakeStore())  # type: ignore[arg-type]


def reasons(kube: FakeKube, kind: str) -> list[Reason]:
    return [n.reason for ref, n in kube.events if ref.kind == kind]


def test_a_trainjob_is_followed_and_its_jobset_is_not() -> None:
    tj = trainjob("llama", annotations=ENABLED)
    js = jobset("llama", owner=tj)
    kube = FakeKube(tj, js)
    deps = deps_of(kube)
    on_job(deps, "ADDED", copy.deepcopy(js), JOBSET)  # the JobSet's event may come first: never indexed
    assert deps.index.job("ns", "llama") is None
    on_job(deps, "ADDED", copy.deepcopy(tj), TRAINJOB)
    entry = deps.index.job("ns", "llama")
    assert entry is not None and (entry.kind, entry.uid) == ("TrainJob", "tj-uid-1")
    on_job(deps, "DELETED", copy.deepcopy(js), JOBSET)  # the JobSet's deletion leaves the TrainJob's entry
    assert deps.index.job("ns", "llama") is not None
    assert reasons(kube, "TrainJob") == [Reason.CAPTURE_ENABLED] and not reasons(kube, "JobSet")


def test_a_trainjob_pod_is_injected_for_the_trainjob_with_the_jobsets_attempt() -> None:
    tj = trainjob("llama", annotations=ENABLED)
    deps = deps_of(FakeKube(tj))
    on_job(deps, "ADDED", copy.deepcopy(tj), TRAINJOB)
    p = trainjob_pods("llama", restart=2)[0]
    mutation = asyncio.run(mutate_pod(p, "ns", deps.index, deps.config))
    assert mutation.outcome == "injected"
    injected = apply_ops(copy.deepcopy(p), mutation.ops)
    (agent,) = [x for x in injected["spec"].get("initContainers", []) if x["name"] == c.AGENT_CONTAINER]
    env = {e["name"]: e.get("value") for e in agent["env"]}
    assert env[c.ENV_JOB_KIND] == "TrainJob" and env[c.ENV_JOB_NAME] == "llama"
    assert env[c.ENV_JOB_UID] == "tj-uid-1" and env[c.ENV_JOB_ATTEMPT] == "2"
    unrelated = copy.deepcopy(p)
    unrelated["metadata"]["labels"] = {"app": "web"}
    assert asyncio.run(mutate_pod(unrelated, "ns", deps.index, deps.config)).ops == []
    only_pytorch = load_config({"FRWATCH_OPERATOR_JOB_KINDS": "PyTorchJob"})
    assert asyncio.run(mutate_pod(p, "ns", deps.index, only_pytorch)).ops == []  # the kind is not enabled


def _injected(p: dict[str, Any], kind: str, name: str, uid: str) -> dict[str, Any]:
    p = copy.deepcopy(p)
    env = [{"name": c.ENV_JOB_KIND, "value": kind}, {"name": c.ENV_JOB_NAME, "value": name},
           {"name": c.ENV_JOB_UID, "value": uid},
           {"name": c.ENV_JOB_ATTEMPT, "value": p["metadata"]["labels"][c.LABEL_JOBSET_RESTART_ATTEMPT]}]  # fmt: skip
    p["spec"]["initContainers"] = [{"name": c.AGENT_CONTAINER, "image": "a", "restartPolicy": "Always", "env": env}]
    return p


def _crashed(p: dict[str, Any]) -> dict[str, Any]:
    p = copy.deepcopy(p)
    name = p["spec"]["containers"][0]["name"]
    p["status"]["containerStatuses"] = [
        {"name": name, "restartCount": 0, "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}
    ]
    return p


def test_a_pod_whose_rank_cannot_be_derived_is_named_on_the_trainjob_and_in_its_incident() -> None:
    tj = trainjob("llama", nodes=None, nproc=None, annotations=ENABLED)
    kube = FakeKube(tj)
    deps = deps_of(kube)
    on_job(deps, "ADDED", copy.deepcopy(tj), TRAINJOB)
    good, bad = trainjob_pods("llama")
    bad["spec"]["containers"][0]["env"][2] = {"name": "PET_NODE_RANK", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}}
    assert on_pod(deps, _injected(good, "TrainJob", "llama", "tj-uid-1"), deleted=False) is None
    assert on_pod(deps, _injected(bad, "TrainJob", "llama", "tj-uid-1"), deleted=False) is None
    ranks = {f.name: tuple(f.ranks) for f in deps.seen.pods("ns", "llama", "0")}
    assert ranks == {good["metadata"]["name"]: (0, 1), bad["metadata"]["name"]: ()}  # none, never a guess
    named = [(ref.kind, ref.name, n.message) for ref, n in kube.events if n.reason == Reason.RANKS_UNKNOWN]
    assert len(named) == 1 and named[0][:2] == ("TrainJob", "llama") and bad["metadata"]["name"] in named[0][2]
    twin = copy.deepcopy(bad)  # the same problem on another pod: in the conditions, not in another Event
    twin["metadata"]["name"] += "-twin"
    on_pod(deps, _injected(twin, "TrainJob", "llama", "tj-uid-1"), deleted=False)
    assert [n.reason for _, n in kube.events].count(Reason.RANKS_UNKNOWN) == 1

    incident = on_pod(deps, _crashed(_injected(bad, "TrainJob", "llama", "tj-uid-1")), deleted=False)
    assert incident is not None
    body = kube.incidents[incident]
    assert body["spec"]["jobRef"] == {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                      "name": "llama", "uid": "tj-uid-1"}  # fmt: skip
    assert body["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    key = RootUrl.parse(body["spec"]["storageUrl"]).attempt()
    assert (key.namespace, key.job, key.job_uid, key.attempt) == ("ns", "llama", "tj-uid-1", "0")
    assert kube.objects[("TrainJob", "llama")]["metadata"]["annotations"][c.ANN_ATTEMPT] == "1"
    now = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
    (cond,) = input_conditions(deps.seen.problems("ns", "llama"), [], now)
    assert (cond.type, cond.status) == (ConditionType.RANKS_KNOWN, "False")
    assert bad["metadata"]["name"] in cond.message and twin["metadata"]["name"] in cond.message


def test_a_trainjob_whose_runtime_is_missing_is_named_in_an_event_and_in_its_incidents() -> None:
    tj = trainjob("llama", runtime="no-such-runtime", annotations=ENABLED)
    kube = FakeKube(tj)
    deps = deps_of(kube)
    on_job(deps, "ADDED", copy.deepcopy(tj), TRAINJOB)
    on_job(deps, "MODIFIED", copy.deepcopy(tj), TRAINJOB)  # said once
    problems = [n.message for ref, n in kube.events if n.reason == Reason.JOB_SPEC_PROBLEM]
    assert len(problems) == 1 and "'no-such-runtime', which does not exist" in problems[0]
    (cond,) = input_conditions(deps.seen.problems("ns", "llama"), [], datetime.now(UTC))
    assert cond.type == ConditionType.JOB_INPUT_VALID and "no-such-runtime" in cond.message
    assert input_conditions(deps.seen.problems("ns", "llama"), [cond], datetime.now(UTC)) == []  # set once


def test_a_jobset_pod_without_its_labels_is_named_and_a_restart_opens_the_next_attempts_incident() -> None:
    js = jobset("train", annotations=ENABLED)
    kube = FakeKube(js)
    deps = deps_of(kube)
    on_job(deps, "ADDED", copy.deepcopy(js), JOBSET)
    first = [_injected(pod("train", "workers", i, mnist_container()), "JobSet", "train", "js-uid-1") for i in range(2)]
    unlabelled = copy.deepcopy(first[1])
    del unlabelled["metadata"]["labels"][c.LABEL_JOBSET_UID]
    on_pod(deps, first[0], deleted=False)
    on_pod(deps, unlabelled, deleted=False)
    assert reasons(kube, "JobSet").count(Reason.POD_LABELS_MISSING) == 1
    incident0 = on_pod(deps, _crashed(first[0]), deleted=False)
    second = _injected(pod("train", "workers", 0, mnist_container(), restart=1), "JobSet", "train", "js-uid-1")
    incident1 = on_pod(deps, _crashed(second), deleted=False)
    assert incident0 and incident1 and incident0 != incident1
    attempts = {kube.incidents[i]["spec"]["attempt"] for i in (incident0, incident1)}
    assert attempts == {"0", "1"}
    assert {f.name for f in deps.seen.pods("ns", "train", "1")} == {second["metadata"]["name"]}
    other_jobset = pod("train", "workers", 0, trainer_container(1, "1", "train"), jobset_uid="someone-else")
    assert on_pod(deps, _crashed(_injected(other_jobset, "JobSet", "train", "js-uid-1")), deleted=False) is None


def test_a_capture_policy_selects_jobs_of_every_kind_by_their_labels() -> None:
    labelled = {"team": "vision"}
    tj, js = trainjob("llama"), jobset("mine", uid="js-uid-2")
    for body in (tj, js):
        body["metadata"]["labels"] = labelled
    kube = FakeKube(tj, js)
    deps = deps_of(kube)
    deps.index.upsert_policy({"metadata": {"name": "vision", "namespace": "ns", "creationTimestamp": "2026-11-25T09:00:00Z"},
                              "spec": {"jobSelector": {"matchLabels": labelled}}})  # fmt: skip
    on_job(deps, "ADDED", copy.deepcopy(tj), TRAINJOB)
    on_job(deps, "ADDED", copy.deepcopy(js), JOBSET)
    for name in ("llama", "mine"):
        decision = deps.index.decide("ns", name, deps.config)
        assert decision is not None and decision.enabled and decision.policy == "vision"
    assert reasons(kube, "TrainJob") == [Reason.CAPTURE_ENABLED] == reasons(kube, "JobSet")


def test_a_jobset_named_like_a_followed_pytorchjob_is_ignored_not_mixed_with_it() -> None:
    from frwatch_operator.kinds.job_kind import PYTORCHJOB

    ptj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "train", "namespace": "ns", "uid": "ptj-uid", "annotations": dict(ENABLED)},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}}}}  # fmt: skip
    js = jobset("train", uid="js-uid-9", annotations=ENABLED)
    kube = FakeKube(ptj, js)
    deps = deps_of(kube)
    on_job(deps, "ADDED", copy.deepcopy(ptj), PYTORCHJOB)
    on_job(deps, "ADDED", copy.deepcopy(js), JOBSET)
    on_job(deps, "DELETED", copy.deepcopy(js), JOBSET)
    entry = deps.index.job("ns", "train")
    assert entry is not None and (entry.kind, entry.uid) == ("PyTorchJob", "ptj-uid")
    assert not reasons(kube, "JobSet")
    jobset_pod = _crashed(_injected(pod("train", "workers", 0, mnist_container(), jobset_uid="js-uid-9"),
                                    "JobSet", "train", "js-uid-9"))  # fmt: skip
    assert on_pod(deps, jobset_pod, deleted=False) is None and not kube.incidents
