"""The local cluster for these tests: one per session, without the frwatch operator (the webhook runs
alone, from webhook.py, fed a hand-made job index)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from kube import Kube

from frwatch_dev.localcluster.cluster import LocalCluster
from frwatch_operator.config import load_config
from frwatch_operator.webhook import JobIndex, serve


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(start_operator=False) as lc:
        yield lc


@pytest.fixture(scope="session")
def kube(cluster: LocalCluster) -> Kube:
    return Kube(cluster.url)


@pytest.fixture(scope="session")
def job_index(cluster: LocalCluster) -> JobIndex:
    """The webhook's job index, fed by the tests (the operator's watch would feed it)."""
    index = JobIndex()
    config = load_config(cluster.frwatch_env())
    cluster.serve_webhook(lambda: serve(index, config))
    return index


@pytest.fixture
def ns(cluster: LocalCluster, request: pytest.FixtureRequest) -> str:
    """A fresh namespace with frwatch's Secrets, named after the test."""
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:5]}"
    cluster.prepare_namespace(name)
    return name
