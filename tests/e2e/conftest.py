"""End-to-end tests: the local cluster (default), or a real cluster given ``FRWATCH_E2E_KUBECONFIG``.

Against a real cluster (frwatch installed with its chart, the Kubeflow training operator, nodes; for
``test_kinds_e2e.py`` also Kubeflow Trainer v2 with its ``torch-distributed`` ClusterTrainingRuntime, and JobSet):

    FRWATCH_E2E_KUBECONFIG=~/.kube/config            # the cluster to use (required)
    FRWATCH_E2E_NAMESPACE=frwatch-e2e                # an existing namespace with frwatch's Secrets
    FRWATCH_E2E_IMAGE=ghcr.io/frwatch/frwatch:0.1.0  # an image with python, torch and frwatch
    FRWATCH_E2E_CORDON=1                             # the operator really cordons (remediation on, dry-run off)
    FRWATCH_E2E_LIVE_STALL_AFTER_SECONDS=60          # the operator's live_stall_after_seconds (chart default)
    pytest -m e2e tests/e2e

Tests that need the stand-ins (the fabricated GPU hang's node plan, a dry-run and a real cordon in one
run) say so and are skipped there unless the variables above say the cluster is set up for them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import LIVE_ENV, NO_PYTHON, Target

from frwatch_dev.localcluster.cluster import LocalCluster, operator_available
from frwatch_dev.standin_probe import PROBE_ENV
from frwatch_dev.testing.notice_receiver import NoticeReceiver

NODES = ("node-a", "node-b", "node-c", "node-d")
NAMESPACE = "e2e"


def _local(operator_env: dict[str, str], replicas: int = 1) -> Iterator[Target]:
    if not operator_available():
        pytest.skip("`frwatch operator` is not in this checkout")
    with LocalCluster(
        nodes=NODES, namespaces=(NAMESPACE,), operator_env=operator_env, operator_replicas=replicas
    ) as cluster:
        yield Target(
            Path(cluster.kubeconfig), NAMESPACE, image="ghcr.io/frwatch/frwatch:0.1.0", local=cluster
        )


@pytest.fixture(scope="session")
def notices() -> Iterator[NoticeReceiver]:
    """The chat webhook the session's local operator announces verdicts to (``notify.webhookUrl``)."""
    receiver = NoticeReceiver()
    yield receiver
    receiver.close()


@pytest.fixture(scope="session")
def target(notices: NoticeReceiver) -> Iterator[Target]:
    """The cluster the tests run on; on the local one, remediation is on in dry-run, the repeat policy acts
    (only on jobs annotated frwatch.io/repeat-policy: suspend, as ``test_repeat_e2e`` does) and verdicts are
    announced to ``notices``."""
    real = os.environ.get("FRWATCH_E2E_KUBECONFIG")
    if real:
        yield Target(
            Path(real),
            os.environ.get("FRWATCH_E2E_NAMESPACE", "frwatch-e2e"),
            image=os.environ.get("FRWATCH_E2E_IMAGE", "ghcr.io/frwatch/frwatch:0.1.0"),
            local=None,
        )
        return
    yield from _local(
        {"FRWATCH_COLLECTION_DEADLINE_SECONDS": "30", "FRWATCH_REMEDIATION_ENABLED": "true",
         "FRWATCH_REMEDIATION_DRY_RUN": "true", "FRWATCH_REMEDIATION_REPEAT_DRY_RUN": "false",
         "FRWATCH_NOTIFY_WEBHOOK_URL": notices.url, **LIVE_ENV}
    )  # fmt: skip


@pytest.fixture
def cordoning_target() -> Iterator[Target]:
    """A cluster whose operator really cordons: its own local cluster, or the real one when it is set
    up for it (``FRWATCH_E2E_CORDON=1``)."""
    real = os.environ.get("FRWATCH_E2E_KUBECONFIG")
    if real:
        if os.environ.get("FRWATCH_E2E_CORDON") != "1":
            pytest.skip("the real cluster's operator does not cordon (set FRWATCH_E2E_CORDON=1 when it does)")
        yield Target(Path(real), os.environ.get("FRWATCH_E2E_NAMESPACE", "frwatch-e2e"),
                     image=os.environ.get("FRWATCH_E2E_IMAGE", "ghcr.io/frwatch/frwatch:0.1.0"), local=None)  # fmt: skip
        return
    yield from _local(  # the stand-in probe corroborates a nomination on a node a test broke (break_node)
        {"FRWATCH_COLLECTION_DEADLINE_SECONDS": "30", "FRWATCH_REMEDIATION_ENABLED": "true",
         "FRWATCH_REMEDIATION_DRY_RUN": "false", **PROBE_ENV}
    )  # fmt: skip


@pytest.fixture
def fanout_target() -> Iterator[Target]:
    """A cluster whose operator fans the analysis out at 2 ranks a pod (``analyzer.ranksPerPod``): its own
    local cluster, or the real one when it is installed so (``FRWATCH_E2E_FANOUT=1``)."""
    real = os.environ.get("FRWATCH_E2E_KUBECONFIG")
    if real:
        if os.environ.get("FRWATCH_E2E_FANOUT") != "1":
            pytest.skip("the real cluster's operator does not fan out at 2 ranks a pod (set FRWATCH_E2E_FANOUT=1)")
        yield Target(Path(real), os.environ.get("FRWATCH_E2E_NAMESPACE", "frwatch-e2e"),
                     image=os.environ.get("FRWATCH_E2E_IMAGE", "ghcr.io/frwatch/frwatch:0.1.0"), local=None)  # fmt: skip
        return
    yield from _local({"FRWATCH_COLLECTION_DEADLINE_SECONDS": "30", "FRWATCH_ANALYZER_RANKS_PER_POD": "2"})


@pytest.fixture
def replicas_target() -> Iterator[Target]:
    """A cluster whose operator runs as two replicas with leader election: its own local cluster, or the
    real one (the chart's default replicaCount 2; the Lease in FRWATCH_E2E_OPERATOR_NAMESPACE, default
    frwatch-system, named FRWATCH_E2E_LEASE, default frwatch-leader)."""
    real = os.environ.get("FRWATCH_E2E_KUBECONFIG")
    if real:
        yield Target(Path(real), os.environ.get("FRWATCH_E2E_NAMESPACE", "frwatch-e2e"),
                     image=os.environ.get("FRWATCH_E2E_IMAGE", "ghcr.io/frwatch/frwatch:0.1.0"), local=None,
                     operator_lease=(os.environ.get("FRWATCH_E2E_OPERATOR_NAMESPACE", "frwatch-system"),
                                     os.environ.get("FRWATCH_E2E_LEASE", "frwatch-leader")))  # fmt: skip
        return
    yield from _local({"FRWATCH_COLLECTION_DEADLINE_SECONDS": "30"}, replicas=2)


def _real_if(flag: str, why: str) -> Target | None:
    """The real cluster when one is given and installed as ``flag`` says (else skip); None: use a local one."""
    real = os.environ.get("FRWATCH_E2E_KUBECONFIG")
    if not real:
        return None
    if os.environ.get(flag) != "1":
        pytest.skip(f"{why} (set {flag}=1 when it is)")
    return Target(Path(real), os.environ.get("FRWATCH_E2E_NAMESPACE", "frwatch-e2e"),
                  image=os.environ.get("FRWATCH_E2E_IMAGE", "ghcr.io/frwatch/frwatch:0.1.0"), local=None)  # fmt: skip


@pytest.fixture
def source_target() -> Iterator[Target]:
    """A cluster whose operator runs the source step (``analyzer.sourceFromImage``): its own local cluster, or
    the real one installed with ``--set analyzer.sourceFromImage=true`` (``FRWATCH_E2E_SOURCE=1``)."""
    real = _real_if("FRWATCH_E2E_SOURCE", "the real cluster's operator runs no source step")
    if real is not None:
        yield real
        return
    yield from _local({"FRWATCH_COLLECTION_DEADLINE_SECONDS": "30", "FRWATCH_ANALYZER_SOURCE_FROM_IMAGE": "true"})


@pytest.fixture
def source_broken_target() -> Iterator[Target]:
    """A cluster whose source step cannot run (``analyzer.sourcePython`` names no program of the image): its
    own local cluster, or the real one installed with ``--set analyzer.sourceFromImage=true --set
    analyzer.sourcePython=frwatch-no-such-python`` (``FRWATCH_E2E_SOURCE_BROKEN=1``)."""
    real = _real_if("FRWATCH_E2E_SOURCE_BROKEN", f"the real cluster's operator copies with a real Python, not {NO_PYTHON}")
    if real is not None:
        yield real
        return
    yield from _local({
        "FRWATCH_COLLECTION_DEADLINE_SECONDS": "30", "FRWATCH_ANALYZER_SOURCE_FROM_IMAGE": "true",
        "FRWATCH_ANALYZER_SOURCE_PYTHON": NO_PYTHON,
    })  # fmt: skip
