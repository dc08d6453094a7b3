"""Clients for the emulator's tests: the real kubernetes client, kubectl, and raw HTTP."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from emulator_helpers import Raw
from kubernetes import client, config

from frwatch_dev.localcluster.apiserver import ApiServerHandle
from frwatch_dev.localcluster.kubectl import kubectl_path

HERE = Path(__file__).parent
KUBECTL = kubectl_path()


@pytest.fixture(scope="session")
def api_client(k8s_api: ApiServerHandle) -> client.ApiClient:
    """A kubernetes ApiClient built from $KUBECONFIG, as any user of the client would."""
    return config.new_client_from_config()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture(scope="session")
def pytorchjob_crd(api_client: client.ApiClient) -> dict[str, Any]:
    """The minimal PyTorchJob CRD (tests/emulator/pytorchjob-crd.yaml), created once."""
    crd = yaml.safe_load((HERE / "pytorchjob-crd.yaml").read_text())
    ext = client.ApiextensionsV1Api(api_client)
    try:
        made = ext.create_custom_resource_definition(crd)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        # another test folder of this session (the same emulator) registered PyTorchJobs first: use ours
        current = ext.read_custom_resource_definition(crd["metadata"]["name"])
        crd["metadata"]["resourceVersion"] = current.metadata.resource_version
        made = ext.replace_custom_resource_definition(crd["metadata"]["name"], crd)
    created = api_client.sanitize_for_serialization(made)
    return created  # type: ignore[no-any-return]


Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl(k8s_api: ApiServerHandle) -> Kubectl:
    """Run the real kubectl against the emulator; fails the test on a non-zero exit unless check=False."""

    def run(
        *args: str, stdin: str | None = None, check: bool = True, timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [KUBECTL, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=os.environ.copy(),
        )
        if check and proc.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


@pytest.fixture
def raw(k8s_api: ApiServerHandle) -> Raw:
    return Raw(k8s_api.url)
