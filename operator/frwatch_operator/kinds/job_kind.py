"""Job kinds behind one small interface: which pods belong to a job, how many ranks it has, which global
ranks a pod holds. Pure: job and pod bodies in, facts out.

Three kinds, one adapter each: Kubeflow ``PyTorchJob`` (``kubeflow.org/v1``, here), Trainer v2 ``TrainJob``
(``trainer.kubeflow.org/v1alpha1``) and ``JobSet`` (``jobset.x-k8s.io/v1alpha2``) in
:mod:`frwatch_operator.kinds.jobset_trainjob`. Each answers the same questions: which pods belong to a job (its pod
label and the pods' controller), each pod's global ranks (or why they cannot be derived: never a guess),
when the job failed (its conditions), whether the object is the one the user created (a JobSet run by a
TrainJob is not: the TrainJob is followed, annotated and named in Events), and what its spec gets wrong.

PyTorchJob (FACTS.md section 2): ``spec.pytorchReplicaSpecs.{Master,Worker}.replicas`` pods, each running
``nprocPerNode`` processes; the node rank is 0 for the master and ``i + masters`` for worker ``i``; a pod
holds the global ranks ``node_rank * nproc .. node_rank * nproc + nproc - 1``. With elastic rendezvous or
``nprocPerNode: auto`` the mapping is known only at run time: the layout says "unknown" (None) and the
agents' pod records (which ranks each pod actually dumped) are the truth.

A world size from a job spec is data, never a loop bound: a spec whose ``nprocPerNode``, replica count or
their product exceeds :data:`MAX_WORLD_SIZE` (``frwatch_analyzers.base.limits``: the one rank bound of the agent,
the operator and the analyzer) is out of bounds (the layout says unknown and why, in
``problem``), and a pod's ranks are a ``range``, never a materialised list.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_operator import constants as c
from frwatch_operator.detect.job_failure import JobFailure, job_failure
from frwatch_operator.kinds.rank_layout import (
    RankLayout as RankLayout,  # re-exported: the layout of a job kind
)
from frwatch_operator.kinds.rank_layout import int_or_none, labels_of, short
from frwatch_operator.kinds.torchrun_ranks import PodRanks


class JobKind(Protocol):
    """What the operator needs to know about a kind of training job."""

    kind: str
    group: str
    version: str
    plural: str
    #: The pod label whose value is the job's name (the operator watches pods carrying it).
    pod_job_label: str
    #: The condition type that says the job succeeded (it ended with no failure).
    succeeded_condition: str

    def layout(self, job: Mapping[str, Any]) -> RankLayout: ...

    def job_name_of(self, pod: Mapping[str, Any]) -> str | None: ...

    def ranks_of(self, pod: Mapping[str, Any], layout: RankLayout) -> range: ...

    def owned_elsewhere(self, pod: Mapping[str, Any], job_uid: str | None = None) -> bool:
        """Whether the pod's controller (its ownerReferences, not a label alone) is not a job of this kind
        (or, with ``job_uid``, not that job). A pod with no controller reference is not ruled out."""
        ...

    def pod_ranks(self, pod: Mapping[str, Any], layout: RankLayout) -> PodRanks:
        """The pod's global ranks, or (``problem``) why they cannot be derived; never a guessed rank."""
        ...

    def pod_problems(self, pod: Mapping[str, Any]) -> list[str]:
        """Labels the kind's controller always sets that the pod lacks (each one sentence)."""
        ...

    def failure(self, job: Mapping[str, Any]) -> JobFailure | None:
        """The failure the job's own status shows for its current attempt (``frwatch_operator.detect.job_failure``)."""
        ...

    def handled_elsewhere(self, job: Mapping[str, Any]) -> str:
        """Why this object is not the one frwatch follows ("" when it is): a JobSet run by a TrainJob."""
        ...

    def spec_problems(self, job: Mapping[str, Any]) -> list[str]:
        """What in the job's spec or status stops capture or ranks (each one sentence; [] when nothing)."""
        ...


def api_version(kind: JobKind) -> str:
    """``group/version`` of the kind (an ownerReference's or an Event's ``involvedObject.apiVersion``)."""
    return f"{kind.group}/{kind.version}"


class PyTorchJobKind:
    """Kubeflow training-operator ``PyTorchJob``."""

    kind = "PyTorchJob"
    group = c.KF_GROUP
    version = c.KF_VERSION
    plural = c.KF_PLURAL
    pod_job_label = c.KF_LABEL_JOB_NAME
    succeeded_condition = "Succeeded"  # Kubeflow's JobConditionType

    def layout(self, job: Mapping[str, Any]) -> RankLayout:
        spec = job.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        replicas = spec.get("pytorchReplicaSpecs")
        replicas = replicas if isinstance(replicas, Mapping) else {}
        counts: dict[str, int] = {}
        for name, replica in replicas.items():
            n = int_or_none(replica.get("replicas", 1)) if isinstance(replica, Mapping) else None
            counts[str(name).lower()] = 1 if n is None else n
        elastic = spec.get("elasticPolicy")
        nproc_raw = spec.get("nprocPerNode")
        if nproc_raw is None and isinstance(elastic, Mapping):
            nproc_raw = elastic.get("nProcPerNode")
        nproc = 1 if nproc_raw is None else int_or_none(nproc_raw)
        nodes = sum(counts.values())
        world = nodes * nproc if nproc is not None and nodes else None
        if isinstance(elastic, Mapping) and elastic.get("maxReplicas") not in (
            None,
            elastic.get("minReplicas"),
        ):
            world = None  # elastic: the number of nodes is decided at run time
        masters = counts.get("master", 0)
        if max(nproc or 0, nodes, world or 0) > MAX_WORLD_SIZE:
            problem = (
                f"the spec claims {nodes} pod(s) x nprocPerNode {short(nproc_raw)} = "
                f"{nodes * (nproc or 1)} ranks, more than the {MAX_WORLD_SIZE} frwatch takes from a spec: the "
                "world size is treated as unknown (the dumps and pods that exist are collected)"
            )
            return RankLayout(world_size=None, nproc_per_node=None, masters=min(masters, MAX_WORLD_SIZE),
                              problem=problem)  # fmt: skip
        return RankLayout(world_size=world, nproc_per_node=nproc, masters=masters)

    def job_name_of(self, pod: Mapping[str, Any]) -> str | None:
        name = labels_of(pod).get(self.pod_job_label)
        return str(name) if isinstance(name, str) and name else None

    def owned_elsewhere(self, pod: Mapping[str, Any], job_uid: str | None = None) -> bool:
        meta = pod.get("metadata")
        refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
        for ref in refs if isinstance(refs, list) else []:
            if isinstance(ref, Mapping) and ref.get("controller") is True:
                mine = (
                    ref.get("kind") == self.kind
                    and str(ref.get("apiVersion") or "").split("/")[0] == self.group
                )
                return not mine or (job_uid is not None and ref.get("uid") != job_uid)
        return False

    def ranks_of(self, pod: Mapping[str, Any], layout: RankLayout) -> range:
        labels = labels_of(pod)
        return layout.ranks_of(
            str(labels.get(c.KF_LABEL_REPLICA_TYPE) or ""), int_or_none(labels.get(c.KF_LABEL_REPLICA_INDEX))
        )

    def pod_ranks(self, pod: Mapping[str, Any], layout: RankLayout) -> PodRanks:
        """From the replica labels and the spec's layout; an unknown layout (elastic, nproc "auto") is no
        problem of the pod's: the agents' records say which ranks it dumped."""
        ranks = self.ranks_of(pod, layout)
        missing = self.pod_problems(pod)
        if not ranks and missing and layout.nproc_per_node is not None:
            return PodRanks(problem=" ".join(missing))
        return PodRanks(ranks)

    def pod_problems(self, pod: Mapping[str, Any]) -> list[str]:
        labels = labels_of(pod)
        return [
            f"the pod has no {label} label (the training operator sets it): its ranks cannot be derived"
            for label in (c.KF_LABEL_REPLICA_TYPE, c.KF_LABEL_REPLICA_INDEX)
            if not isinstance(labels.get(label), str)
        ]

    def failure(self, job: Mapping[str, Any]) -> JobFailure | None:
        return job_failure(job)  # Kubeflow's JobConditionType Failed / Restarting

    def handled_elsewhere(self, job: Mapping[str, Any]) -> str:
        return ""

    def spec_problems(self, job: Mapping[str, Any]) -> list[str]:
        return []


PYTORCHJOB = PyTorchJobKind()


def _all_kinds() -> dict[str, JobKind]:
    from frwatch_operator.kinds.jobset_trainjob import JOBSET, TRAINJOB  # they build on this module's names

    return {PYTORCHJOB.kind: PYTORCHJOB, TRAINJOB.kind: TRAINJOB, JOBSET.kind: JOBSET}


#: Every supported job kind by its ``kind``.
KINDS: dict[str, JobKind] = _all_kinds()


def enabled_kinds(names: str) -> list[JobKind]:
    """The kinds named in ``names`` (comma-separated, e.g. the setting ``operator.job_kinds``), in the
    registry's order; ValueError naming an unknown one."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in KINDS]
    if unknown:
        raise ValueError(f"unknown job kind(s) {', '.join(unknown)}; supported: {', '.join(KINDS)}")
    return [k for n, k in KINDS.items() if n in wanted]


def pod_labels(kinds: list[JobKind]) -> list[str]:
    """The pod labels that mark a pod of one of ``kinds`` (one webhook objectSelector and one pod watch
    each): ``training.kubeflow.org/job-name`` for PyTorchJob, ``jobset.sigs.k8s.io/jobset-name`` for
    TrainJob and JobSet (a TrainJob's pods are its JobSet's)."""
    return list(dict.fromkeys(k.pod_job_label for k in kinds))


def kinds_for_pod(pod: Mapping[str, Any], kinds: list[JobKind]) -> tuple[str, list[JobKind]]:
    """(the job name the pod's label gives, the enabled kinds that label may stand for); ("", []) when the
    pod carries none of them."""
    labels = labels_of(pod)
    for kind in kinds:
        name = labels.get(kind.pod_job_label)
        if isinstance(name, str) and name:
            return name, [k for k in kinds if k.pod_job_label == kind.pod_job_label]
    return "", []


def kind_of(name: str) -> JobKind | None:
    """The adapter for a job kind (e.g. an Incident's ``spec.jobRef.kind``); None if unsupported."""
    return KINDS.get(name)
