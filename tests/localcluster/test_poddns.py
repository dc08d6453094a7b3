"""The kubelet's stand-in for pod DNS: only a pod name under the pod's own subdomain becomes loopback."""

from __future__ import annotations

import pytest

from frwatch_dev.localcluster.poddns import resolve

POD = {"metadata": {"namespace": "team"}, "spec": {"hostname": "tj-node-0-1", "subdomain": "tj"}}


@pytest.mark.parametrize(
    "value",
    [
        "tj-node-0-0.tj",
        "tj-node-0-0.tj.team",
        "tj-node-0-0.tj.team.svc",
        "tj-node-0-0.tj.team.svc.cluster.local",
    ],
)
def test_a_pod_name_under_the_own_subdomain_is_loopback(value: str) -> None:
    assert resolve(value, POD) == "127.0.0.1"
    assert resolve(f"{value}:29500", POD) == "127.0.0.1:29500"


@pytest.mark.parametrize(
    "value",
    ["tj", "other-0-0.other", "tj-node-0-0.tj.elsewhere", "x.tj.team.svc.cluster.local.evil", "http://tj-node-0-0.tj",
     "a.b.tj", "/data/tj-node-0-0.tj", "tj-node-0-0.tj:port", ""],
)  # fmt: skip
def test_anything_else_is_left_alone(value: str) -> None:
    assert resolve(value, POD) == value


def test_a_pod_without_subdomain_resolves_nothing() -> None:
    assert resolve("tj-node-0-0.tj", {"metadata": {"namespace": "team"}, "spec": {}}) == "tj-node-0-0.tj"
