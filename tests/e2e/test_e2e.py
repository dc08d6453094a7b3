"""The whole chain, end to end: a rank goes wrong -> dumps captured -> analyzer Job -> verdict on the job
-> (hardware-class only) a cordon plan, or a cordon."""

from __future__ import annotations

import urllib.request

import pytest
from e2e_helpers import GPU_HANG, WORKLOAD, Target, wait_for

from frwatch_dev.testing.notice_receiver import NoticeReceiver
from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SOFTWARE = {"desync", "missing_rank", "size_mismatch", "dtype_mismatch"}
#: What a culprit of a skipped collective did, as analyzers of different versions word it.
SOFTWARE_KINDS = {"took_another_path", "mismatched_call", "extra_call", "cpu_stuck"}


def test_skipped_collective_gives_a_software_verdict_and_no_cordon(target: Target, notices: NoticeReceiver) -> None:
    name = target.submit([*WORKLOAD, "--scenario", "skip"])
    ann = target.wait_verdict(name)
    assert ann[c.ANN_CATEGORY] in SOFTWARE, ann
    assert ann[c.ANN_SUSPECT_RANKS] == "1"
    node = target.culprit_node(name)
    assert c.ANN_SUSPECT_NODES not in ann  # a software finding names no suspect node...
    [said] = target.events(name, "CulpritsNamed")  # ...but says where the culprit ran
    assert f"rank 1 ran on node {node}" in said and "no node is suspect" in said
    assert len(ann[c.ANN_VERDICT]) <= 120  # whole in kubectl describe
    assert ann[c.ANN_REPORT].startswith("s3://")
    assert ann[c.ANN_REPORT_HTML] == ann[c.ANN_REPORT].removesuffix("report.txt") + "report.html"
    incident = target.reported_incident(name)
    assert incident["status"]["reportHtmlUrl"] == ann[c.ANN_REPORT_HTML]
    assert ann[c.ANN_INCIDENT] == incident["metadata"]["name"]
    verdict = incident["status"]["verdict"]  # the verdict in words outlives the Events
    assert verdict["short"] == ann[c.ANN_VERDICT] and verdict["kind"] in SOFTWARE_KINDS, verdict
    assert verdict["nextSteps"] and verdict["ranOn"] == f"rank 1 ran on node {node}"
    assert not target.node(node)["spec"].get("unschedulable")
    assert not any(
        "cordon" in m and "would" not in m and "not" not in m for m in target.events(name, "Remediation")
    )
    if target.local is not None:  # the people on call were told, once, and the Incident says so
        [told] = wait_for(lambda: [t for t in notices.texts() if f"/{name}" in t], 20, "the notice")
        assert verdict["short"] in told and ann[c.ANN_REPORT] in told and ann[c.ANN_INCIDENT] in told
        marked = wait_for(lambda: (target.reported_incident(name)["metadata"].get("annotations") or {}).get(
            "frwatch.io/notified"), 20, "the Incident marked notified")  # fmt: skip
        assert marked == "sent"


def test_cpu_stuck_rank_is_named(target: Target) -> None:
    name = target.submit([*WORKLOAD, "--scenario", "cpu_stuck"])
    ann = target.wait_verdict(name)
    assert ann[c.ANN_CATEGORY] == "missing_rank", ann
    assert ann[c.ANN_SUSPECT_RANKS] == "1"


def test_gpu_hang_on_one_node_plans_a_cordon_in_dry_run(target: Target) -> None:
    if target.local is None:
        pytest.skip("needs the stand-ins: the GPU hang is fabricated by the demo workload (no GPU here)")
    name = target.submit(GPU_HANG)
    ann = target.wait_verdict(name)
    assert ann[c.ANN_CATEGORY] == "gpu_hang", ann
    node = target.culprit_node(name)
    assert ann[c.ANN_SUSPECT_NODES] == node
    plan = wait_for(lambda: target.events(name, "Remediation"), 20, "the remediation plan")
    # the dumps only nominate the node: without a probe, its health agents or a second namespace, no cordon
    assert len(plan) == 1 and plan[0].startswith(f"dry-run: no cordon; skip {node} (nominated only"), plan
    assert not target.node(node)["spec"].get("unschedulable")


def test_gpu_hang_on_one_node_cordons_it_when_enabled(cordoning_target: Target) -> None:
    target = cordoning_target
    if target.local is None:
        pytest.skip("needs the stand-ins: the GPU hang is fabricated by the demo workload (no GPU here)")
    for each in ("node-a", "node-b", "node-c", "node-d"):  # the GPUs are broken: frwatch's probe finds it
        target.local.break_node(each)
    name = target.submit(GPU_HANG)
    ann = target.wait_verdict(name)
    assert c.ANN_SUSPECT_NODES in ann, ann  # the verdict's words say why when no node is suspect
    node = ann[c.ANN_SUSPECT_NODES]
    assert node == target.culprit_node(name)
    cordoned = wait_for(
        lambda: (n := target.node(node))["spec"].get("unschedulable") and n, 20, f"{node} cordoned"
    )
    assert (
        cordoned["metadata"]["annotations"][c.ANN_CORDON_INCIDENT]
        == f"{target.namespace}/{ann[c.ANN_INCIDENT]}"
    )
    assert c.ANN_CORDONED_BY in cordoned["metadata"]["annotations"]
    others = [n for n in ("node-a", "node-b", "node-c", "node-d") if n != node]
    assert not any(target.node(n)["spec"].get("unschedulable") for n in others)


def test_healthy_job_opens_no_incident(target: Target) -> None:
    name = target.submit([*WORKLOAD, "--scenario", "healthy"])
    assert "Succeeded" in target.wait_finished(name)
    [said] = wait_for(lambda: target.events(name, "NoIncident"), 60, "frwatch deciding: no Incident")
    assert "succeeded" in said and "nothing to capture" in said, said
    assert target.incidents(name) == []
    assert c.ANN_VERDICT not in target.annotations(name)


def test_opted_out_job_gets_nothing_injected(target: Target) -> None:
    name = target.submit([*WORKLOAD, "--scenario", "skip"], capture=False)
    assert "Failed" in target.wait_finished(name)
    for pod in target.pods(name):
        assert c.ANN_INJECTED not in (pod["metadata"].get("annotations") or {})
        assert not pod["spec"].get("initContainers")
        assert not any(
            e["name"].startswith("TORCH_FR") for e in pod["spec"]["containers"][0].get("env") or []
        )
    [said] = wait_for(lambda: target.events(name, "NoIncident"), 60, "frwatch deciding: no Incident")
    assert "failed" in said and "not captured" in said, said
    assert target.incidents(name) == []


def test_local_operator_serves_health_and_metrics_on_its_own_loopback_ports(target: Target) -> None:
    """Local clusters side by side never collide (the cordon test runs one next to this one): each
    operator's /healthz and /metrics listen on free loopback ports, not on all interfaces at 8080/9090."""
    if target.local is None:
        pytest.skip("the local cluster's own operator only")
    cluster = target.local
    assert cluster.metrics_url == f"http://127.0.0.1:{cluster.metrics_port}/metrics"
    assert cluster.frwatch_env()["FRWATCH_OPERATOR_LISTEN_ADDR"] == "127.0.0.1"
    with urllib.request.urlopen(cluster.health_url, timeout=5) as health:
        assert health.status == 200
    with urllib.request.urlopen(cluster.metrics_url, timeout=5) as metrics:
        assert "frwatch_" in metrics.read().decode()
