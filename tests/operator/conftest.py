"""Fixtures of the operator tests: CRDs in the emulator, real dumps from real torch ranks, the operator."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from frwatch_dev.testing.crds import ensure_crds
from frwatch_dev.testing.operator_process import OperatorProcess

sys.path.insert(0, str(Path(__file__).parent))

from harness import ROOT, Cluster, operator_env

from frwatch_operator.store.s3 import S3Store

CRD_FILES = [ROOT / "crds" / "incident.yaml", ROOT / "crds" / "capturepolicy.yaml",
             ROOT / "tests" / "emulator" / "pytorchjob-crd.yaml"]  # fmt: skip
#: Short, so that the deadline tests stay fast; a CapturePolicy can set another per job.
DEADLINE_SECONDS = 5


@pytest.fixture(scope="session")
def op_api(k8s_api: Any) -> client.ApiClient:
    api = config.new_client_from_config()
    ensure_crds(api, CRD_FILES)
    return api


@pytest.fixture
def cluster(op_api: client.ApiClient, k8s_namespace: str) -> Cluster:
    return Cluster(op_api, k8s_namespace)


@pytest.fixture
def store(s3: Any) -> S3Store:
    return S3Store(s3.settings())


@pytest.fixture(scope="session")
def real_dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[int, bytes]:
    """Real Flight Recorder dumps of a real 3-rank torch gloo job whose rank 2 crashed (no dump from it):
    {0: bytes, 1: bytes}. The workloads module's local launcher, the same code the demo runs."""
    from frwatch_dev.workloads.local_launch import run_local_job

    result = run_local_job(
        "crash", 3, tmp_path_factory.mktemp("crash-dumps"), culprit=2, timeout_s=3.0, deadline_s=90
    )
    dumps = {rank: path.read_bytes() for rank, path in result.dumps.items()}
    assert set(dumps) == {0, 1}, result.describe()
    return dumps


OperatorFactory = Callable[..., OperatorProcess]


@pytest.fixture
def start_operator(s3: Any, cluster: Cluster, tmp_path: Path) -> Iterator[OperatorFactory]:
    """Start `frwatch operator` (a subprocess) watching the test's namespace; extra env overrides."""
    started: list[OperatorProcess] = []

    def start(**env: str) -> OperatorProcess:
        full = operator_env(s3.env(), cluster.namespace, DEADLINE_SECONDS, **env)
        op = OperatorProcess(full, tmp_path / f"operator{len(started)}.log")
        started.append(op)
        return op.start()

    yield start
    for op in started:
        op.stop()


@pytest.fixture
def desync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every live round's agents answer a desync (``live_round_fakes.answer_a_desync``)."""
    from live_round_fakes import answer_a_desync

    answer_a_desync(monkeypatch)
