"""A tiny synchronous client of the local cluster's API for the tests, plus builders and waits."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from frwatch_dev.testing.polling import wait_for as wait_for  # the one poller of the test suite
from frwatch_dev.workloads import WORKLOAD as WORKLOAD  # what the pods run
from frwatch_operator import constants as c

Obj = dict[str, Any]


class Kube:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": content_type}
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode()[:500]}") from exc
        return json.loads(text) if text else None

    def get(self, path: str) -> Obj | None:
        try:
            return self.request("GET", path)  # type: ignore[no-any-return]
        except AssertionError as exc:
            if "HTTP 404" in str(exc):
                return None
            raise

    def items(self, path: str, selector: str = "") -> list[Obj]:
        query = "?" + urllib.parse.urlencode({"labelSelector": selector}) if selector else ""
        return list(self.request("GET", path + query).get("items") or [])

    def create(self, path: str, body: Obj) -> Obj:
        return self.request("POST", path, body)  # type: ignore[no-any-return]

    def merge(self, path: str, patch: Obj) -> Obj:
        return self.request("PATCH", path, patch, "application/merge-patch+json")  # type: ignore[no-any-return]

    def delete(self, path: str) -> None:
        self.request("DELETE", path)

    def pods(self, ns: str, selector: str = "") -> list[Obj]:
        return self.items(f"/api/v1/namespaces/{ns}/pods", selector)

    def events(self, ns: str, name: str) -> list[Obj]:
        return [
            e
            for e in self.items(f"/api/v1/namespaces/{ns}/events")
            if e["involvedObject"].get("name") == name
        ]


def true_conditions(obj: Obj | None) -> list[str]:
    return [
        x["type"]
        for x in ((obj or {}).get("status") or {}).get("conditions") or []
        if x.get("status") == "True"
    ]


def pytorchjob(
    name: str,
    ns: str,
    scenario: str = "healthy",
    *,
    workers: int = 3,
    restart_policy: str = "Never",
    capture: bool = False,
    args: list[str] | None = None,
    command: list[str] | None = None,
) -> Obj:
    """A PyTorchJob of 1 master + ``workers`` workers running the faulty_training workload."""
    command = command or [*WORKLOAD, "--scenario", scenario, *(args or [])]

    def replica(n: int) -> Obj:
        return {
            "replicas": n,
            "restartPolicy": restart_policy,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "pytorch",
                            "image": "docker.io/pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime",
                            "command": command,
                        }
                    ]
                }
            },
        }

    meta: Obj = {"name": name, "namespace": ns}
    if capture:
        meta["annotations"] = {c.ANN_CAPTURE: c.CAPTURE_ENABLED}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": meta,
        "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}},
    }


def jobs_path(ns: str, name: str = "") -> str:
    return f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs" + (f"/{name}" if name else "")


def env_of(container: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "<valueFrom>") for e in container.get("env") or []}
