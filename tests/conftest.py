"""Shared pytest fixtures. Each block belongs to one area; add yours as a block, touch no other."""

from __future__ import annotations

# --- emulator: point $KUBECONFIG at this session's API emulator BEFORE anything imports `kubernetes` ----
# (the client reads the variable at import time; the `k8s_api` fixture below writes the file). Tests
# never see the developer's own cluster. kubectl's discovery cache goes to the same private folder.
import os
import tempfile

os.environ["KUBECONFIG"] = os.path.join(tempfile.mkdtemp(prefix="frwatch-kube-"), "kubeconfig")
os.environ["KUBECACHEDIR"] = os.path.join(os.path.dirname(os.environ["KUBECONFIG"]), "kubectl-cache")
# --- end of the import-time emulator block ----------------------------------------------------------

import atexit
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

# the folder above goes when the session ends: a run leaves nothing in the temp dir
atexit.register(shutil.rmtree, os.path.dirname(os.environ["KUBECONFIG"]), ignore_errors=True)

if TYPE_CHECKING:
    from fixtures.seaweed import SeaweedFS
    from frwatch_dev.localcluster.apiserver import ApiServerHandle
    from frwatch_dev.localcluster.storage import Store
    from realdumps import RealDumps

# --- capture: a real SeaweedFS S3 store (tests/fixtures/seaweed.py) --------------------------------------
@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """A real SeaweedFS for the session: ``.endpoint``, ``.bucket``, ``.access_key``, ``.secret_key``,
    ``.settings()`` (S3Settings), ``.env()`` (for subprocesses), ``.down()`` (S3 out, then back)."""
    from fixtures.seaweed import SeaweedFS

    store = SeaweedFS(Path(tmp_path_factory.mktemp("seaweed")))
    store.start()
    try:
        yield store
    finally:
        store.stop()


# --- emulator: the Kubernetes API emulator over real HTTP (frwatch_dev.localcluster) -------------
@pytest.fixture(scope="session")
def k8s_api() -> Iterator[ApiServerHandle]:
    """The session's Kubernetes API emulator: ``.url``, ``.call(fn(store))``, ``.write_kubeconfig(path)``.
    Its kubeconfig is at ``$KUBECONFIG`` (set at import), so kubectl, the kubernetes client
    (``kubernetes.config.load_kube_config()``) and kopf all talk to it."""
    from frwatch_dev.localcluster import start_apiserver

    handle = start_apiserver()
    handle.write_kubeconfig(os.environ["KUBECONFIG"])
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def k8s_namespace(k8s_api: ApiServerHandle, request: pytest.FixtureRequest) -> str:
    """A fresh namespace in the session's emulator, named after the test (isolation between tests)."""
    import re
    import uuid

    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"

    def create(store: Store) -> None:
        namespaces = store.type_for("", "v1", "namespaces")
        assert namespaces is not None
        store.create(namespaces, "", {"metadata": {"name": name}})

    k8s_api.call(create)
    return name


# --- workloads: real Flight Recorder dumps from real torch gloo ranks (tests/realdumps.py) -----------------
@pytest.fixture(scope="session")
def real_dumps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealDumps]:
    """``real_dumps("skip") -> Path``: the dump folder of a scenario of
    ``frwatch_dev.workloads`` (4 real gloo ranks), made once per session, two scenarios at a time at
    most. ``.run(scenario)`` gives the whole LocalJobResult (exit codes, signals, logs); extra workload
    arguments make a variant (``real_dumps("skip", "--json-ranks", "3")``); ``.load(path)`` reads a dump
    without trusting it."""
    from realdumps import RealDumps

    dumps = RealDumps(Path(tmp_path_factory.mktemp("real_dumps")))
    try:
        yield dumps
    finally:
        dumps.close()
