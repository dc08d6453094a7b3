"""Job kinds behind one small interface: which pods belong to a job, how many ranks it has, which global
ranks a pod holds. Pure: job and pod bodies in, facts out.

Only the Kubeflow ``PyTorchJob`` (``kubeflow.org/v1``) is implemented; Trainer v2 ``TrainJob``/JobSet
slots in as another :class:`JobKind` (pods labelled ``jobset.sigs.k8s.io/*``, the completion index as the
node rank).

PyTorchJob (FACTS.md section 2): ``spec.pytorchReplicaSpecs.{Master,Worker}.replicas`` pods, each running
``nprocPerNode`` processes; the node rank is 0 for the master and ``i + masters`` for worker ``i``; a pod
holds the global ranks ``node_rank * nproc .. node_rank * nproc + nproc - 1``. With elastic rendezvous or
``nprocPerNode: auto`` the mapping is known only at run time: the layout says "unknown" (None) and the
agents' pod records (which ranks each pod actually dumped) are the truth.

A world size from a job spec is data, never a loop bound: a spec whose ``nprocPerNode``, replica count or
their product exceeds :data:`MAX_WORLD_SIZE` (``frwatch_analyzers.limits``: the one rank bound of the agent,
the operator and the analyzer) is out of bounds (the layout says unknown and why, in
``problem``), and a pod's ranks are a ``range``, never a materialised list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from frwatch_analyzers.limits import MAX_WORLD_SIZE
from frwatch_operator import constants as c


@dataclass(frozen=True)
class RankLayout:
    """A job's static rank layout, as far as its spec tells it."""

    world_size: int | None  #: total ranks; None when the spec cannot tell (elastic, nproc "auto")
    nproc_per_node: int | None  #: processes per pod; None when unknown
    masters: int  #: master replicas (node ranks before the first worker)
    #: Why the spec's world size is not used ("": it is, or the spec cannot tell): an out-of-bounds spec.
    problem: str = ""

    def ranks_of(self, replica_type: str, replica_index: int | None) -> range:
        """Global ranks of the pod ``(replica_type, replica_index)`` (a range: never a list); empty when
        unknown or past :data:`MAX_WORLD_SIZE`."""
        if self.nproc_per_node is None or replica_index is None or replica_index >= MAX_WORLD_SIZE:
            return range(0)
        kind = replica_type.lower()
        if kind == "master":
            node_rank = replica_index
        elif kind == "worker":
            node_rank = self.masters + replica_index
        else:
            return range(0)
        first = node_rank * self.nproc_per_node
        if first + self.nproc_per_node > MAX_WORLD_SIZE:
            return range(0)
        return range(first, first + self.nproc_per_node)


class JobKind(Protocol):
    """What the operator needs to know about a kind of training job."""

    kind: str
    group: str
    version: str
    plural: str
    #: The pod label whose value is the job's name (the operator watches pods carrying it).
    pod_job_label: str

    def layout(self, job: Mapping[str, Any]) -> RankLayout: ...

    def job_name_of(self, pod: Mapping[str, Any]) -> str | None: ...

    def ranks_of(self, pod: Mapping[str, Any], layout: RankLayout) -> range: ...

    def owned_elsewhere(self, pod: Mapping[str, Any], job_uid: str | None = None) -> bool:
        """Whether the pod's controller (its ownerReferences, not a label alone) is not a job of this kind
        (or, with ``job_uid``, not that job). A pod with no controller reference is not ruled out."""
        ...


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


#: What a number of more than 12 digits in a spec reads as: out of every bound (never parsed whole).
_HUGE = 10**12


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return min(value, _HUGE) if value >= 0 else None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        digits = value.strip()
        return int(digits) if len(digits) <= 12 else _HUGE
    return None


def _short(value: object) -> str:
    """A spec value quoted for a message, cut to 24 characters."""
    text = repr(value)
    return text if len(text) <= 24 else text[:23] + "…"


class PyTorchJobKind:
    """Kubeflow training-operator ``PyTorchJob``."""

    kind = "PyTorchJob"
    group = c.KF_GROUP
    version = c.KF_VERSION
    plural = c.KF_PLURAL
    pod_job_label = c.KF_LABEL_JOB_NAME

    def layout(self, job: Mapping[str, Any]) -> RankLayout:
        spec = job.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        replicas = spec.get("pytorchReplicaSpecs")
        replicas = replicas if isinstance(replicas, Mapping) else {}
        counts: dict[str, int] = {}
        for name, replica in replicas.items():
            n = _int_or_none(replica.get("replicas", 1)) if isinstance(replica, Mapping) else None
            counts[str(name).lower()] = 1 if n is None else n
        elastic = spec.get("elasticPolicy")
        nproc_raw = spec.get("nprocPerNode")
        if nproc_raw is None and isinstance(elastic, Mapping):
            nproc_raw = elastic.get("nProcPerNode")
        nproc = 1 if nproc_raw is None else _int_or_none(nproc_raw)
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
                f"the spec claims {nodes} pod(s) x nprocPerNode {_short(nproc_raw)} = "
                f"{nodes * (nproc or 1)} ranks, more than the {MAX_WORLD_SIZE} frwatch takes from a spec: the "
                "world size is treated as unknown (the dumps and pods that exist are collected)"
            )
            return RankLayout(world_size=None, nproc_per_node=None, masters=min(masters, MAX_WORLD_SIZE),
                              problem=problem)  # fmt: skip
        return RankLayout(world_size=world, nproc_per_node=nproc, masters=masters)

    def job_name_of(self, pod: Mapping[str, Any]) -> str | None:
        name = _labels(pod).get(self.pod_job_label)
        return str(name) if isinstance(name, str) and name else None

    def owned_elsewhere(self, pod: Mapping[str, Any], job_uid: str | None = None) -> bool:
        meta = pod.get("metadata")
        refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
        for ref in refs if isinstance(refs, list) else []:
            if isinstance(ref, Mapping) and ref.get("controller") is True:
                mine = ref.get("kind") == self.kind and str(ref.get("apiVersion") or "").split("/")[0] == self.group
                return not mine or (job_uid is not None and ref.get("uid") != job_uid)
        return False

    def ranks_of(self, pod: Mapping[str, Any], layout: RankLayout) -> range:
        labels = _labels(pod)
        return layout.ranks_of(
            str(labels.get(c.KF_LABEL_REPLICA_TYPE) or ""), _int_or_none(labels.get(c.KF_LABEL_REPLICA_INDEX))
        )


PYTORCHJOB = PyTorchJobKind()
#: Every supported job kind by its ``kind``.
KINDS: dict[str, JobKind] = {PYTORCHJOB.kind: PYTORCHJOB}


def kind_of(name: str) -> JobKind | None:
    """The adapter for a job kind (e.g. an Incident's ``spec.jobRef.kind``); None if unsupported."""
    return KINDS.get(name)
