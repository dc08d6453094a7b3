"""What the local-cluster benchmarks share: submitting an opted-in 4-rank PyTorchJob (1 master, 3 workers)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from frwatch_operator import constants as c

IMAGE = "ghcr.io/frwatch/frwatch:0.1.0"  #: the local cluster runs the command on the machine; any image name


def submit(api: client.ApiClient, namespace: str, name: str, command: list[str]) -> None:
    """Create the PyTorchJob ``name`` running ``command`` in each of its 4 pods, capture on."""

    def replica(n: int) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [
            {"name": "pytorch", "image": IMAGE, "command": command}]}}}  # fmt: skip

    body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": namespace, "annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED}},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(3)}}}  # fmt: skip
    client.CustomObjectsApi(api).create_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs", body)
