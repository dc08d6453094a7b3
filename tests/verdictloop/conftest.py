"""Fixtures of the verdict-loop tests: the emulator's clients, the CRDs, the adapter, kubectl."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from frwatch_dev.localcluster.apiserver import ApiServerHandle
from frwatch_dev.localcluster.kubectl import kubectl_path
from frwatch_operator.kube.adapter import Kube

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def api_client(k8s_api: ApiServerHandle) -> client.ApiClient:
    return config.new_client_from_config()


@pytest.fixture(scope="session")
def crds(api_client: client.ApiClient) -> None:
    """The Incident CRD of ``crds/`` (its printer columns serve ``kubectl get incidents``; a minimal one
    when the folder has none) and a minimal PyTorchJob CRD, created once (already there is fine)."""
    ext = client.ApiextensionsV1Api(api_client)
    incident = ROOT / "crds" / "incident.yaml"
    sources = [
        incident if incident.exists() else HERE / "incident-crd.yaml",
        ROOT / "tests/emulator/pytorchjob-crd.yaml",
    ]
    for path in sources:
        try:
            ext.create_custom_resource_definition(yaml.safe_load(path.read_text()))
        except client.ApiException as exc:
            if exc.status != 409:
                raise


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def kube(api_client: client.ApiClient) -> Kube:
    return Kube(api_client)


@pytest.fixture
def kubectl(k8s_api: ApiServerHandle) -> Kubectl:
    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [kubectl_path(), *args],
            capture_output=True, text=True, timeout=30, env=os.environ.copy(),
        )  # fmt: skip
        if check and proc.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run
