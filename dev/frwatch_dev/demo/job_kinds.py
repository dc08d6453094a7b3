"""The job the cluster demo submits, in each kind frwatch watches: a Trainer v2 TrainJob (the default: what new
Kubeflow installs run), a JobSet, or a Kubeflow PyTorchJob. Four ranks each, opted in by the same annotation.

TrainJob and JobSet pods run the script under real torchrun (``TORCHRUN_WORKLOAD``): with 2 nodes, 2 pods of 2
ranks each; with 4 nodes, 4 pods of 1. A TrainJob uses the ``torch-distributed`` ClusterTrainingRuntime (the
Trainer sets the ``PET_*`` env); a JobSet sets that env itself, as a JobSet user writes it (the node rank from
the completion index, the master the first pod's DNS name under the JobSet's subdomain). A PyTorchJob has a
Master and 3 Workers, one rank per pod.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from frwatch_dev.localcluster import jobset_controller as jsc
from frwatch_dev.localcluster import trainer_controller as tc
from frwatch_dev.ports import free_port
from frwatch_operator import constants as c

Obj = dict[str, Any]
RANKS = 4
#: the torch the local ranks really run (2.13): the webhook reads the version from an official image tag to name
#: the Flight Recorder variables (frwatch_operator.capture.torch_env_names), so the tag must not claim an older torch
IMAGE = "docker.io/pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"


def torchrun(command: list[str]) -> list[str]:
    """``python -m X args`` -> ``python -m torch.distributed.run -m X args`` (the ``PET_*`` env sets it up)."""
    if command[:2] != ["python", "-m"]:
        raise ValueError(f"not a `python -m` command: {command}")
    return ["python", "-m", "torch.distributed.run", *command[1:]]


def _meta(name: str, namespace: str) -> Obj:
    return {"name": name, "namespace": namespace, "annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED}}


def pytorchjob(name: str, namespace: str, command: list[str], pods: int) -> Obj:
    def replica(n: int) -> Obj:
        container = {"name": "pytorch", "image": IMAGE, "command": command}
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": f"{c.KF_GROUP}/{c.KF_VERSION}",
        "kind": "PyTorchJob",
        "metadata": _meta(name, namespace),
        "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(RANKS - 1)}},
    }


def trainjob(name: str, namespace: str, command: list[str], pods: int) -> Obj:
    return {
        "apiVersion": tc.API_VERSION,
        "kind": tc.KIND,
        "metadata": _meta(name, namespace),
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": pods,
                "numProcPerNode": RANKS // pods,
                "image": IMAGE,
                "command": torchrun(command),
            },
        },
    }


def jobset(name: str, namespace: str, command: list[str], pods: int) -> Obj:
    env = [
        {"name": tc.ENV_NNODES, "value": str(pods)},
        {"name": tc.ENV_NPROC, "value": str(RANKS // pods)},
        {"name": tc.ENV_NODE_RANK, "valueFrom": {"fieldRef": {"fieldPath": tc.COMPLETION_INDEX_PATH}}},
        {"name": tc.ENV_MASTER_ADDR, "value": f"{name}-workers-0-0.{name}"},
        {"name": tc.ENV_MASTER_PORT, "value": str(free_port())},  # on one host, jobs must not share a port
    ]
    container = {"name": "trainer", "image": IMAGE, "command": torchrun(command), "env": env}
    return {
        "apiVersion": jsc.API_VERSION,
        "kind": jsc.KIND,
        "metadata": _meta(name, namespace),
        "spec": {
            "replicatedJobs": [{
                "name": "workers",
                "replicas": 1,
                "template": {"spec": {
                    "parallelism": pods, "completions": pods, "backoffLimit": 0,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                }},
            }],
        },
    }  # fmt: skip


@dataclass(frozen=True)
class DemoKind:
    kind: str  #: as kubectl prints it
    resource: str  #: kubectl's resource name
    group: str
    version: str
    plural: str
    build: Callable[[str, str, list[str], int], Obj]

    def shape(self, pods: int) -> str:
        if self.kind == "PyTorchJob":
            return f"{RANKS} pods of 1 rank (Master + {RANKS - 1} Workers)"
        return f"{pods} pods of {RANKS // pods} rank{'s' if RANKS // pods > 1 else ''} (torchrun)"


KINDS = {
    "trainjob": DemoKind("TrainJob", "trainjob", tc.GROUP, tc.VERSION, tc.PLURAL, trainjob),
    "jobset": DemoKind("JobSet", "jobset", jsc.GROUP, jsc.VERSION, jsc.PLURAL, jobset),
    "pytorchjob": DemoKind("PyTorchJob", "pytorchjob", c.KF_GROUP, c.KF_VERSION, c.KF_PLURAL, pytorchjob),
}
#: the most common kind in new installs (Kubeflow Trainer v2)
DEFAULT_KIND = "trainjob"
