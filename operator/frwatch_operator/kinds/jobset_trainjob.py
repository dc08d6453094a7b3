"""The JobSet and Kubeflow Trainer v2 TrainJob adapters (:class:`~frwatch_operator.kinds.job_kind.JobKind`). Pure.

Facts, by release:

* **JobSet** (kubernetes-sigs/jobset v0.12.0): child Job ``<jobset>-<replicatedJob>-<jobIndex>``, owned by
  the JobSet (``pkg/controllers/jobset_controller.go`` ``constructJob``); its pods are owned by that Job
  (the Job controller). ``labelAndAnnotateObject`` labels (and annotates) the Jobs and their pod templates
  with ``jobset.sigs.k8s.io/jobset-name``, ``jobset-uid``, ``replicatedjob-name``, ``job-index``,
  ``job-global-index``, ``restart-attempt`` (= ``status.restarts`` when the Job was made) and more.
  ``failurePolicy`` restarts (``RestartJobSet``, the default up to ``maxRestarts``) recreate every child Job:
  ``status.restarts`` goes up by one and the new pods carry the new ``restart-attempt``, so that label *is*
  the attempt, and pods of two attempts never share it. Conditions (``api/jobset/v1alpha2``):
  ``Completed``, ``Failed`` (reasons ``FailedJobs``, ``ReachedMaxRestarts``,
  ``FailJobSetFailurePolicyAction``), ``Suspended``, ``RestartingJobSet``, ``StartupPolicy*``.
* **TrainJob** (kubeflow/trainer v2.3.0): the controller builds a JobSet with exactly the TrainJob's name
  and namespace, controller-owned by it (``pkg/runtime/framework/plugins/jobset/jobset.go`` ``Build``); its
  labels and annotations come from the runtime's template, not from the TrainJob (so the opt-in lives on the
  TrainJob, and the JobSet is never followed on its own). The torch runtime's ``node`` replicated Job runs
  the trainer container ``node`` with ``PET_*`` env (:mod:`frwatch_operator.kinds.torchrun_ranks`); initializer
  Jobs (``dataset-initializer``, ``model-initializer``) hold no ranks. ``spec.runtimeRef`` (``name``
  required; ``apiGroup`` default ``trainer.kubeflow.org``; ``kind`` default ``ClusterTrainingRuntime``)
  names the runtime; a kind the controller has no runtime for fails the TrainJob (condition ``Failed``,
  reason ``TrainingRuntimeNotSupported``), a missing runtime object leaves it without a JobSet (an Event
  ``TrainJobResourcesCreationFailed`` only). Conditions: ``Suspended``, ``Complete``, ``Failed`` (copied
  from the JobSet's, with its reason).

The owner chain from a pod: Pod -> Job (``ownerReferences``, controller) -> JobSet (the Job's controller; the
pod's ``jobset-name``/``jobset-uid`` labels) -> TrainJob (the JobSet's controller, same name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_operator import constants as c
from frwatch_operator.detect.job_failure import JobFailure, attempt_start, current_attempt, job_failure
from frwatch_operator.kinds.rank_layout import RankLayout, int_or_none, labels_of, short
from frwatch_operator.kinds.torchrun_ranks import PodRanks, torchrun_ranks

#: Replicated Jobs of the Trainer's runtimes that run no training ranks (kubeflow/trainer v2.3.0
#: ``pkg/constants``: DatasetInitializer, ModelInitializer).
TRAINER_NON_RANK_JOBS = frozenset({"dataset-initializer", "model-initializer"})
#: The labels the JobSet controller puts on every pod of a JobSet (v0.12.0 ``labelAndAnnotateObject``) that
#: frwatch reads: without them a pod's attempt or JobSet cannot be told.
JOBSET_POD_LABELS = (c.LABEL_JOBSET_NAME, c.LABEL_JOBSET_UID, c.LABEL_JOBSET_REPLICATED_JOB,
                     c.LABEL_JOBSET_RESTART_ATTEMPT)  # fmt: skip
#: JobSet's failure condition type (``JobSetFailed``); a restart shows as ``status.restarts`` going up.
JOBSET_FAILED = "Failed"
#: The status.restarts value past which frwatch does not read (it is data, not a bound).
_MAX_RESTARTS = 10**9


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    refs = _map(obj.get("metadata")).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def _is(ref: Mapping[str, Any] | None, kind: str, group: str) -> bool:
    return (
        ref is not None
        and ref.get("kind") == kind
        and str(ref.get("apiVersion") or "").split("/")[0] == group
    )


def _pod_of_a_job_elsewhere(pod: Mapping[str, Any]) -> bool:
    """The pod's controller is not a batch/v1 Job (the JobSet's child Jobs own its pods)."""
    ref = _controller(pod)
    return ref is not None and not (
        ref.get("kind") == "Job" and str(ref.get("apiVersion") or "") == "batch/v1"
    )


@dataclass(frozen=True)
class OwnerStep:
    """One link of a pod's owner chain."""

    kind: str
    name: str
    uid: str = ""


def owner_chain(pod: Mapping[str, Any], jobset: Mapping[str, Any] | None = None) -> list[OwnerStep]:
    """Pod -> Job -> JobSet [-> TrainJob]: from the pod's controller reference and JobSet labels, and, given
    the JobSet's body, its controller (a TrainJob). Stops where a link is missing."""
    meta = _map(pod.get("metadata"))
    chain = [OwnerStep("Pod", str(meta.get("name") or ""), str(meta.get("uid") or ""))]
    ref = _controller(pod)
    if ref is None or ref.get("kind") != "Job":
        return chain
    chain.append(OwnerStep("Job", str(ref.get("name") or ""), str(ref.get("uid") or "")))
    labels = labels_of(pod)
    name = labels.get(c.LABEL_JOBSET_NAME)
    if not isinstance(name, str) or not name:
        return chain
    chain.append(OwnerStep("JobSet", name, str(labels.get(c.LABEL_JOBSET_UID) or "")))
    if jobset is not None:
        owner = _controller(jobset)
        if _is(owner, "TrainJob", c.TRAINER_GROUP) and owner is not None:
            chain.append(OwnerStep("TrainJob", str(owner.get("name") or ""), str(owner.get("uid") or "")))
    return chain


def _missing_labels(pod: Mapping[str, Any]) -> list[str]:
    labels = labels_of(pod)
    missing = [label for label in JOBSET_POD_LABELS if not isinstance(labels.get(label), str)]
    if not missing:
        return []
    return [
        f"the pod lacks the JobSet label(s) {', '.join(missing)} (the JobSet controller sets them): "
        + ("its attempt is frwatch's count, not the JobSet's restart count"
           if c.LABEL_JOBSET_RESTART_ATTEMPT in missing else "it cannot be tied to its JobSet's uid")
    ]  # fmt: skip


class JobSetKind:
    """``JobSet`` (``jobset.x-k8s.io/v1alpha2``) created by the user (not through a TrainJob)."""

    kind = "JobSet"
    group = c.JOBSET_GROUP
    version = c.JOBSET_VERSION
    plural = c.JOBSET_PLURAL
    pod_job_label = c.LABEL_JOBSET_NAME
    succeeded_condition = "Completed"  # JobSetCompleted

    def layout(self, job: Mapping[str, Any]) -> RankLayout:
        """The world size when exactly one replicated Job runs torchrun with literal ``--nnodes`` (or
        ``PET_NNODES``) and nproc; else unknown (the pods' own ranks and the agents' records say)."""
        rjobs = _map(job.get("spec")).get("replicatedJobs")
        worlds = []
        for rjob in rjobs if isinstance(rjobs, list) else []:
            podspec = _map(
                _map(_map(_map(_map(rjob).get("template")).get("spec")).get("template")).get("spec")
            )
            probe = torchrun_ranks(
                {"metadata": {"annotations": {c.ANN_JOB_COMPLETION_INDEX: "0"}}, "spec": podspec}
            )
            if probe.node_rank is not None:
                worlds.append((probe.nnodes, probe.nproc))
        nnodes, nproc = worlds[0] if len(worlds) == 1 else (None, None)
        if nnodes is not None and nproc is not None and nnodes * nproc <= MAX_WORLD_SIZE:
            return RankLayout(world_size=nnodes * nproc, nproc_per_node=nproc, masters=0)
        return RankLayout(world_size=None, nproc_per_node=None, masters=0)

    def job_name_of(self, pod: Mapping[str, Any]) -> str | None:
        name = labels_of(pod).get(self.pod_job_label)
        return name if isinstance(name, str) and name else None

    def owned_elsewhere(self, pod: Mapping[str, Any], job_uid: str | None = None) -> bool:
        if _pod_of_a_job_elsewhere(pod):
            return True
        uid = labels_of(pod).get(c.LABEL_JOBSET_UID)
        return job_uid is not None and isinstance(uid, str) and uid != job_uid

    def ranks_of(self, pod: Mapping[str, Any], layout: RankLayout) -> range:
        return self.pod_ranks(pod, layout).ranks

    def pod_ranks(self, pod: Mapping[str, Any], layout: RankLayout) -> PodRanks:
        return torchrun_ranks(pod)

    def pod_problems(self, pod: Mapping[str, Any]) -> list[str]:
        return _missing_labels(pod)

    def failure(self, job: Mapping[str, Any]) -> JobFailure | None:
        """The JobSet restarted past the attempt frwatch saw running (``status.restarts`` above frwatch's
        attempt, whose first pod frwatch recorded), else its ``Failed`` condition for the current attempt."""
        status = _map(job.get("status"))
        restarts = int_or_none(status.get("restarts"))
        attempt = current_attempt(job)
        started = attempt_start(job)
        if (
            restarts is not None
            and attempt
            and started is not None
            and min(restarts, _MAX_RESTARTS) > int(attempt)
        ):
            name = str(_map(job.get("metadata")).get("name") or "")
            return JobFailure(
                job=name, attempt=attempt, condition="Restarted", reason="RestartJobSet",
                message=f"status.restarts is {restarts}: every child Job of attempt {attempt} was recreated",
                at=started,
            )  # fmt: skip
        return job_failure(job, (JOBSET_FAILED,))

    def handled_elsewhere(self, job: Mapping[str, Any]) -> str:
        owner = _controller(job)
        if _is(owner, "TrainJob", c.TRAINER_GROUP) and owner is not None:
            return (f"JobSet {_map(job.get('metadata')).get('name')} is run by TrainJob {owner.get('name')}: "
                    "frwatch follows the TrainJob")  # fmt: skip
        return ""

    def spec_problems(self, job: Mapping[str, Any]) -> list[str]:
        rjobs = _map(job.get("spec")).get("replicatedJobs")
        if not isinstance(rjobs, list) or not rjobs:
            return ["spec.replicatedJobs is empty or missing: the JobSet makes no pods"]
        return []


def runtime_ref(job: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(apiGroup, kind, name)`` of the TrainJob's runtime with the API's defaults applied; None when
    ``spec.runtimeRef.name`` is missing."""
    ref = _map(_map(job.get("spec")).get("runtimeRef"))
    name = ref.get("name")
    if not isinstance(name, str) or not name:
        return None
    group = ref.get("apiGroup") if isinstance(ref.get("apiGroup"), str) else c.TRAINER_GROUP
    kind = ref.get("kind") if isinstance(ref.get("kind"), str) else c.CLUSTER_TRAINING_RUNTIME_KIND
    return str(group), str(kind), name


class TrainJobKind:
    """Kubeflow Trainer v2 ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``): pods are its JobSet's."""

    kind = "TrainJob"
    group = c.TRAINER_GROUP
    version = c.TRAINER_VERSION
    plural = c.TRAINJOB_PLURAL
    pod_job_label = c.LABEL_JOBSET_NAME  # the JobSet has the TrainJob's name; no TrainJob pod label exists
    succeeded_condition = "Complete"  # TrainJobComplete

    def layout(self, job: Mapping[str, Any]) -> RankLayout:
        """``spec.trainer.numNodes x numProcPerNode`` when both are set as numbers; else unknown (the
        runtime's defaults, or "auto": the pods' own ``PET_*`` say)."""
        trainer = _map(_map(job.get("spec")).get("trainer"))
        nodes, nproc = int_or_none(trainer.get("numNodes")), int_or_none(trainer.get("numProcPerNode"))
        if nodes is None or nproc is None or nproc == 0:
            return RankLayout(world_size=None, nproc_per_node=None, masters=0)
        if max(nodes, nproc, nodes * nproc) > MAX_WORLD_SIZE:
            return RankLayout(world_size=None, nproc_per_node=None, masters=0, problem=(
                f"the spec claims numNodes {short(trainer.get('numNodes'))} x numProcPerNode "
                f"{short(trainer.get('numProcPerNode'))} ranks, more than the {MAX_WORLD_SIZE} frwatch takes "
                "from a spec: the world size is treated as unknown"
            ))  # fmt: skip
        return RankLayout(world_size=nodes * nproc, nproc_per_node=nproc, masters=0)

    def job_name_of(self, pod: Mapping[str, Any]) -> str | None:
        name = labels_of(pod).get(self.pod_job_label)
        return name if isinstance(name, str) and name else None

    def owned_elsewhere(self, pod: Mapping[str, Any], job_uid: str | None = None) -> bool:
        """Pods are owned by the JobSet's child Jobs; the TrainJob's uid is not on them (the JobSet's is)."""
        return _pod_of_a_job_elsewhere(pod)

    def ranks_of(self, pod: Mapping[str, Any], layout: RankLayout) -> range:
        return self.pod_ranks(pod, layout).ranks

    def pod_ranks(self, pod: Mapping[str, Any], layout: RankLayout) -> PodRanks:
        if labels_of(pod).get(c.LABEL_JOBSET_REPLICATED_JOB) in TRAINER_NON_RANK_JOBS:
            return PodRanks()  # an initializer: no ranks, and nothing wrong with that
        return torchrun_ranks(pod)

    def pod_problems(self, pod: Mapping[str, Any]) -> list[str]:
        return _missing_labels(pod)

    def failure(self, job: Mapping[str, Any]) -> JobFailure | None:
        return job_failure(job, ("Failed",))  # TrainJobFailed, with the JobSet's reason

    def handled_elsewhere(self, job: Mapping[str, Any]) -> str:
        return ""

    def spec_problems(self, job: Mapping[str, Any]) -> list[str]:
        ref = runtime_ref(job)
        if ref is None:
            return ["spec.runtimeRef.name is missing: the trainer cannot build the TrainJob's pods"]
        group, kind, name = ref
        problems = []
        if group != c.TRAINER_GROUP or kind not in (c.TRAINING_RUNTIME_KIND, c.CLUSTER_TRAINING_RUNTIME_KIND):
            problems.append(
                f"spec.runtimeRef {group}/{kind} {name!r} is no Trainer runtime: the trainer makes no pods"
            )
        conditions = _map(job.get("status")).get("conditions")
        for cond in conditions if isinstance(conditions, list) else []:
            if (isinstance(cond, Mapping) and cond.get("type") == "Failed" and cond.get("status") == "True"
                    and cond.get("reason") == "TrainingRuntimeNotSupported"):  # fmt: skip
                problems.append(
                    f"the trainer does not support runtime {kind} {name!r} (TrainingRuntimeNotSupported)"
                )
        return problems


JOBSET = JobSetKind()
TRAINJOB = TrainJobKind()
