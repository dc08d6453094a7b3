"""Job and pod bodies shaped exactly as the real controllers make them, for the job-kind adapter tests.

* TrainJob -> JobSet: kubeflow/trainer v2.3.0 (``pkg/runtime/framework/plugins/jobset/jobset.go`` Build: the
  JobSet has the TrainJob's name, controller-owned by it; ``plugins/torch/torch.go`` EnforceMLPolicy: the
  ``node`` container's ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK`` (fieldRef to the completion
  index annotation), ``PET_MASTER_ADDR``/``PET_MASTER_PORT``; the torch-distributed runtime's replicated Job
  ``node`` with the label ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``).
* JobSet -> Job: kubernetes-sigs/jobset v0.12.0 (``pkg/controllers/jobset_controller.go`` constructJob,
  labelAndAnnotateObject: Job ``<jobset>-<replicatedJob>-<jobIndex>``, owned by the JobSet; the labels and
  annotations below on the Job and its pod template).
* Job -> Pod: the Indexed Job controller (Kubernetes 1.31 ``pkg/controller/job``): pod
  ``<job>-<index>-<5 chars>``, owned by the Job, label and annotation ``batch.kubernetes.io/job-completion-index``,
  labels ``batch.kubernetes.io/job-name``/``controller-uid``, env ``JOB_COMPLETION_INDEX`` (fieldRef) added to
  every container.
* A user's JobSet: the JobSet site's PyTorch example (v0.12.0 ``site/static/examples/pytorch/cnn-mnist/
  mnist.yaml``): ``RANK`` from the completion index annotation, ``torchrun ... --node_rank=$RANK`` in a
  ``bash -xc`` script.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from frwatch_operator import constants as c

COMPLETION_INDEX_FIELD = f"metadata.annotations['{c.ANN_JOB_COMPLETION_INDEX}']"


def _index_env() -> dict[str, Any]:
    return {"name": c.ENV_JOB_COMPLETION_INDEX, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}}


def trainjob(name: str = "llama", *, uid: str = "tj-uid-1", nodes: int | None = 2, nproc: int | None = 2,
             runtime: str | None = "torch-distributed", annotations: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    trainer: dict[str, Any] = {"image": "example/train:1"}
    if nodes is not None:
        trainer["numNodes"] = nodes
    if nproc is not None:
        trainer["numProcPerNode"] = nproc
    spec: dict[str, Any] = {"trainer": trainer}
    if runtime is not None:
        spec["runtimeRef"] = {"name": runtime, "apiGroup": c.TRAINER_GROUP, "kind": c.CLUSTER_TRAINING_RUNTIME_KIND}
    return {
        "apiVersion": f"{c.TRAINER_GROUP}/{c.TRAINER_VERSION}",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "annotations": dict(annotations or {})},
        "spec": spec,
    }


def jobset(name: str = "llama", *, uid: str = "js-uid-1", owner: dict[str, Any] | None = None,
           restarts: int = 0, annotations: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid, "annotations": dict(annotations or {})}
    if owner is not None:  # trainer v2.3.0: WithController(true), WithBlockOwnerDeletion(true)
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                    "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
    return {
        "apiVersion": f"{c.JOBSET_GROUP}/{c.JOBSET_VERSION}",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
            "parallelism": 4, "completions": 4, "completionMode": "Indexed",
            "template": {"spec": {"containers": [mnist_container()]}}}}}]},
        "status": {"restarts": restarts},
    }


def mnist_container() -> dict[str, Any]:
    """The JobSet site's PyTorch example container (v0.12.0 cnn-mnist/mnist.yaml), nproc 1 on 4 nodes."""
    return {
        "name": "pytorch",
        "image": "gcr.io/k8s-staging-jobset/pytorch-mnist:latest",
        "env": [
            {"name": "MASTER_ADDR", "value": "pytorch-workers-0-0.pytorch"},
            {"name": "MASTER_PORT", "value": "3389"},
            {"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}},
            {"name": "PYTHONUNBUFFERED", "value": "0"},
        ],
        "command": ["bash", "-xc", "torchrun --rdzv_id=123 --nnodes=4 --nproc_per_node=1 --master_addr=$MASTER_ADDR "
                    "--master_port=$MASTER_PORT --node_rank=$RANK mnist.py --epochs=1 --log-interval=1\n"],
    }


def trainer_container(nnodes: int, nproc: str, jobset_name: str) -> dict[str, Any]:
    """The torch runtime's ``node`` container after EnforceMLPolicy (trainer v2.3.0)."""
    return {
        "name": "node",
        "image": "example/train:1",
        "command": ["torchrun", "/workspace/train.py"],
        "env": [
            {"name": "PET_NNODES", "value": str(nnodes)},
            {"name": "PET_NPROC_PER_NODE", "value": nproc},
            {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}},
            {"name": "PET_MASTER_ADDR", "value": f"{jobset_name}-node-0-0.{jobset_name}"},
            {"name": "PET_MASTER_PORT", "value": "29500"},
        ],
    }


def pod(jobset_name: str, rjob: str, index: int, container: dict[str, Any], *, jobset_uid: str = "js-uid-1",
        restart: int = 0, job_index: int = 0, node: str = "", extra_labels: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """A pod of replicated Job ``rjob`` (job index ``job_index``), completion index ``index``, made in the
    JobSet's attempt ``restart``, as the Job controller creates it from the JobSet's template."""
    job = f"{jobset_name}-{rjob}-{job_index}"
    job_uid = hashlib.sha256(f"{job}/{restart}".encode()).hexdigest()[:12]
    jobset_meta = {
        c.LABEL_JOBSET_NAME: jobset_name, c.LABEL_JOBSET_UID: jobset_uid, c.LABEL_JOBSET_REPLICATED_JOB: rjob,
        c.LABEL_JOBSET_RESTART_ATTEMPT: str(restart), "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
        "jobset.sigs.k8s.io/global-replicas": "1", c.LABEL_JOBSET_JOB_INDEX: str(job_index),
        "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"ns/{job}".encode()).hexdigest(),
        c.LABEL_JOBSET_JOB_GLOBAL_INDEX: str(job_index), "jobset.sigs.k8s.io/group-name": "default",
        "jobset.sigs.k8s.io/group-replicas": "1", "jobset.sigs.k8s.io/job-group-index": str(job_index),
    }  # fmt: skip
    labels = {**jobset_meta, "batch.kubernetes.io/controller-uid": job_uid, "controller-uid": job_uid,
              c.LABEL_BATCH_JOB_NAME: job, "job-name": job, c.ANN_JOB_COMPLETION_INDEX: str(index),
              **(extra_labels or {})}  # fmt: skip
    body_container = copy.deepcopy(container)
    body_container["env"] = [*body_container.get("env", []), _index_env()]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-{index}-{hashlib.sha256(f'{job}{index}{restart}'.encode()).hexdigest()[:5]}",
            "namespace": "ns",
            "uid": f"pod-{job}-{index}-{restart}",
            "labels": labels,
            "annotations": {**jobset_meta, c.ANN_JOB_COMPLETION_INDEX: str(index)},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": job_uid,
                                 "controller": True, "blockOwnerDeletion": True}],
            "creationTimestamp": "2026-11-25T10:00:00Z",
        },
        "spec": {"containers": [body_container], "restartPolicy": "OnFailure", "subdomain": jobset_name,
                 "hostname": f"{job}-{index}", "nodeName": node},
        "status": {"phase": "Running"},
    }


def trainjob_pods(name: str = "llama", nodes: int = 2, nproc: str = "2", restart: int = 0) -> list[dict[str, Any]]:
    """The trainer pods of a TrainJob on the torch runtime: one ``node`` Job of ``nodes`` completions."""
    container = trainer_container(nodes, nproc, name)
    return [
        pod(name, "node", i, container, restart=restart, node=f"gpu-node-{i}",
            extra_labels={"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"})
        for i in range(nodes)
    ]  # fmt: skip
