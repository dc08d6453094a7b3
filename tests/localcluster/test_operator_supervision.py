"""The local cluster restarts a dead operator, as a Deployment would, and says so."""

from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from frwatch_dev.localcluster.cluster import LocalCluster, operator_available

pytestmark = pytest.mark.skipif(not operator_available(), reason="`frwatch operator` is not in this checkout")


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_a_killed_operator_is_restarted_on_the_same_webhook_port() -> None:
    with LocalCluster(nodes=("node-a",)) as cluster:
        assert cluster.operator is not None
        first = cluster.operator.pid
        os.killpg(first, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            proc = cluster.operator
            if (
                cluster.operator_restarts == 1
                and proc is not None
                and proc.pid != first
                and _answers(cluster.webhook_port)
            ):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the operator was not restarted: {cluster.operator_status}")
        assert "restarted 1x" in cluster.operator_status
