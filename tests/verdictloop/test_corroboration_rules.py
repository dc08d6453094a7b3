"""What may corroborate a nominated node, piece by piece: the tenant's placement (never evidence), fleet
memory across namespaces, and a probe Job's end (only one that ran and failed confirms)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from frwatch_operator.config import AnalyzerSettings, RemediationSettings
from frwatch_operator.detect.placement import job_pins, pinned_by_pod
from frwatch_operator.incident.record import IncidentIdentity
from frwatch_operator.remediation import fleet_memory as fleet
from frwatch_operator.remediation import probe_job as probes
from frwatch_operator.remediation.cordon_policy import SkipReason
from frwatch_operator.remediation.corroboration import uncorroborated
from frwatch_operator.resources import NodeNomination

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def test_a_node_the_job_names_in_its_templates_or_selectors_is_pinned() -> None:
    job = {"spec": {"pytorchReplicaSpecs": {
        "Master": {"template": {"spec": {"nodeName": "gpu-8"}}},
        "Worker": {"template": {"spec": {"nodeSelector": {"kubernetes.io/hostname": "gpu-9"},
                                         "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                             "nodeSelectorTerms": [{"matchExpressions": [
                                                 {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-10"]}]},
                                                 {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-11"]}]}]}}}}}},
    }}}  # fmt: skip
    assert job_pins(job) == {"gpu-8", "gpu-9", "gpu-10", "gpu-11"}
    # a selector on a pool label chooses no one node: not pinned
    assert job_pins({"spec": {"template": {"spec": {"nodeSelector": {"pool": "a100"}}}}}) == set()
    assert pinned_by_pod({"spec": {"nodeName": "gpu-9", "nodeSelector": {"kubernetes.io/hostname": "gpu-9"}}})
    assert not pinned_by_pod({"spec": {"nodeName": "gpu-9"}})  # the scheduler's binding looks the same: templates say
    deep: dict[str, Any] = {"spec": {}}
    cursor = deep["spec"]
    for _ in range(10_000):  # a hostile spec: the walk is bounded, never recursive
        cursor["x"] = {}
        cursor = cursor["x"]
    assert job_pins(deep) == set()


def test_two_namespaces_corroborate_one_namespace_never_does() -> None:
    mine = [fleet.Nomination("gpu-3", "team-a", f"team-a/llama-{i}", NOW - timedelta(hours=i)) for i in range(5)]
    kept = fleet.remember([], mine, now=NOW, window=DAY)
    assert fleet.namespaces_naming(kept, "gpu-3", now=NOW, window=DAY) == {"team-a"}
    other = fleet.Nomination("gpu-3", "team-b", "team-b/bert-0", NOW)
    kept = fleet.remember(fleet.from_data(fleet.to_data(kept)), [other], now=NOW, window=DAY)  # through the ConfigMap
    assert fleet.namespaces_naming(kept, "gpu-3", now=NOW, window=DAY) == {"team-a", "team-b"}
    assert fleet.namespaces_naming(kept, "gpu-3", now=NOW + 2 * DAY, window=DAY) == set()  # forgotten
    assert len(fleet.remember([], [other, other], now=NOW, window=DAY)) == 1
    assert fleet.from_data({fleet.FIELD: "not json"}) == []


def _job(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {"metadata": {"uid": "probe-uid"},
            "status": {"conditions": [{"type": t, "status": "True", "reason": r} for t, r in conditions]}}  # fmt: skip


def _pod(state: dict[str, Any], node: str = "gpu-3", owner: str = "probe-uid") -> dict[str, Any]:
    return {"metadata": {"ownerReferences": [{"uid": owner, "controller": True, "kind": "Job"}]},
            "spec": {"nodeName": node},
            "status": {"containerStatuses": [{"name": probes.PROBE_CONTAINER, "state": state}]}}  # fmt: skip


def test_only_a_probe_that_ran_and_failed_confirms() -> None:
    failed = _pod({"terminated": {"exitCode": 1, "message": "diagnostic FAILED: Xid 79"}})
    assert probes.probe_result(_job(("Failed", "BackoffLimitExceeded")), [failed], "gpu-3")[0] == probes.FAILED
    passed = _pod({"terminated": {"exitCode": 0, "message": "passed"}})
    assert probes.probe_result(_job(("Complete", "")), [passed], "gpu-3")[0] == probes.PASSED
    hung = _pod({"running": {}})
    assert probes.probe_result(_job(("Failed", "DeadlineExceeded")), [hung], "gpu-3")[0] == probes.FAILED
    never = _pod({"waiting": {"reason": "ImagePullBackOff"}})
    assert probes.probe_result(_job(("Failed", "DeadlineExceeded")), [never], "gpu-3")[0] == probes.INCONCLUSIVE
    assert probes.probe_result(_job(), [never], "gpu-3") == (probes.RUNNING, "waiting: ImagePullBackOff")
    # a failing pod that is not the Job's, or ran elsewhere, says nothing
    assert probes.probe_result(_job(("Complete", "")), [_pod(failed["status"]["containerStatuses"][0]["state"], owner="x")],
                               "gpu-3")[0] == probes.INCONCLUSIVE  # fmt: skip
    assert probes.probe_result(_job(), [_pod({"terminated": {"exitCode": 1}}, node="gpu-4")], "gpu-3")[0] == probes.RUNNING
    assert probes.probe_result(None, [], "gpu-3")[0] == probes.INCONCLUSIVE
    # a probe whose command the runtime could not start (a wrong setting) says nothing about the node
    unstarted = _pod({"terminated": {"exitCode": 128, "reason": "StartError", "message": "dcgmi: not found"}})
    assert probes.probe_result(_job(("Failed", "BackoffLimitExceeded")), [unstarted], "gpu-3")[0] == probes.INCONCLUSIVE


def test_the_probe_job_runs_on_the_node_with_no_credentials() -> None:
    incident = IncidentIdentity("team-a", "llama-0", "uid-1")
    job = probes.probe_job(incident, "gpu-3", remediation=RemediationSettings(
        probe_image="nvcr.io/nvidia/cloud-native/dcgm:4", probe_command=["dcgmi", "diag", "-r", "1"]),
        analyzer=AnalyzerSettings(namespace="frwatch-system"))  # fmt: skip
    spec = job["spec"]["template"]["spec"]
    assert job["metadata"]["namespace"] == "frwatch-system" and spec["nodeName"] == "gpu-3"
    assert spec["automountServiceAccountToken"] is False and job["spec"]["backoffLimit"] == 0
    assert spec["containers"][0]["command"] == ["dcgmi", "diag", "-r", "1"]
    assert probes.probe_job_name(incident, "gpu-3") == job["metadata"]["name"] != probes.probe_job_name(incident, "gpu-4")


def test_what_the_plan_leaves_alone() -> None:
    skip = uncorroborated([
        NodeNomination(node="a", pinned=True),
        NodeNomination(node="b", namespaces=1, probe="Passed", probe_detail="exit 0"),
        NodeNomination(node="c", corroborated="a probe frwatch ran on the node failed (exit 1)"),
    ])  # fmt: skip
    assert skip["a"][0] is SkipReason.PINNED and skip["b"][0] is SkipReason.NOT_CORROBORATED
    assert "probe passed: exit 0" in skip["b"][1] and "c" not in skip
