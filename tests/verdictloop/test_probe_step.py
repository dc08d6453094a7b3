"""The probe step through the verdict loop against the API emulator: a bound hardware verdict nominates its
node, frwatch's probe Job is created on it and the Incident waits (``analysisStep: Probe``); the probe's end
decides: failed, the node is cordoned; the job deleted meanwhile, nothing is touched."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from test_failure_paths import Case, advance, case  # noqa: F401 - the fixture, shared
from vl_builders import bound, create_node, finish_job, hardware_verdict, now_text, set_observed

from frwatch_operator import constants as c
from frwatch_operator.remediation.probe_job import PROBE_CONTAINER


def _probe_ended(api_client: Any, core: Any, ns: str, name: str, node: str, exit_code: int) -> None:
    """What the Job controller and the kubelet record for a probe that ran on ``node`` and exited."""
    batch = client.BatchV1Api(api_client)
    job = batch.read_namespaced_job(name, ns)
    pod = f"{name}-p1"
    core.create_namespaced_pod(ns, {
        "metadata": {"name": pod, "labels": {c.LABEL_BATCH_JOB_NAME: name},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": job.metadata.uid, "controller": True}]},
        "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [{"name": PROBE_CONTAINER, "image": "probe"}]},
    })  # fmt: skip
    core.patch_namespaced_pod_status(pod, ns, {"status": {"phase": "Failed" if exit_code else "Succeeded", "containerStatuses": [
        {"name": PROBE_CONTAINER, "image": "probe", "imageID": "", "ready": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed",
                                  "message": "diagnostic FAILED: Xid 79" if exit_code else "passed",
                                  "startedAt": now_text(), "finishedAt": now_text()}}}]}})  # fmt: skip
    kind = "Failed" if exit_code else "Complete"
    batch.patch_namespaced_job_status(name, ns, {"status": {"conditions": [
        {"type": kind, "status": "True", "reason": "BackoffLimitExceeded" if exit_code else "", "message": "",
         "lastTransitionTime": now_text(), "lastProbeTime": now_text()}]}})  # fmt: skip


@pytest.mark.parametrize("job_deleted", [False, True], ids=["probe-fails", "job-deleted-meanwhile"])
def test_a_failing_probe_corroborates_after_the_incident_waited_for_it(
    case: Case, custom: Any, core: Any, kube: Any, api_client: Any, job_deleted: bool  # noqa: F811
) -> None:
    nodes = [f"{case.ns[-6:]}-p{i}" for i in range(4)]
    for n in nodes:
        create_node(core, n)
    set_observed(custom, case.incident, nodes)
    data = hardware_verdict(nodes[3]).model_dump_json().encode()
    case.store.put(case.key.verdict, data)
    finish_job(client.BatchV1Api(api_client), core, case.analyzer, condition="Complete", termination_message=bound(data))
    cfg = case.config.model_copy(update={"remediation": case.config.remediation.model_copy(update={
        "enabled": True, "dry_run": False, "probe_image": "probe", "probe_command": ["dcgmi", "diag", "-r", "1"]})})  # fmt: skip
    step, status = advance(case, custom, kube, config=cfg)
    assert not step.done and status["phase"] == "Analyzing" and status["analysisStep"] == "Probe", status
    [nominated] = status["nominations"]
    assert nominated["node"] == nodes[3] and nominated["probe"] == "Running" and not nominated.get("corroborated")
    assert status["category"] == "gpu_hang"  # the verdict is on the job already; only the plan waits
    assert not (core.read_node(nodes[3]).spec and core.read_node(nodes[3]).spec.unschedulable)
    probe = client.BatchV1Api(api_client).read_namespaced_job(nominated["probeJob"], case.ns)
    assert probe.spec.template.spec.node_name == nodes[3]

    step, status = advance(case, custom, kube, config=cfg)  # still running: nothing new
    assert not step.done and step.status == {}
    _probe_ended(api_client, core, case.ns, nominated["probeJob"], nodes[3], exit_code=1)
    if job_deleted:
        custom.delete_namespaced_custom_object(c.KF_GROUP, c.KF_VERSION, case.ns, c.KF_PLURAL, "llama",
                                               propagation_policy="Orphan")  # fmt: skip
    step, status = advance(case, custom, kube, config=cfg)
    assert step.done and status["phase"] == "Reported", status
    [probed] = status["nominations"]
    assert probed["probe"] == "Failed" and "diagnostic FAILED" in probed["probeDetail"], probed
    remediated = next(x for x in status["conditions"] if x["type"] == "Remediated")
    spec = core.read_node(nodes[3]).spec
    if job_deleted:
        assert remediated["status"] == "False" and "deleted while its nodes were probed" in remediated["message"]
        assert not (spec and spec.unschedulable)
    else:
        assert (remediated["status"], remediated["reason"]) == ("True", "Cordoned"), remediated
        assert spec.unschedulable is True
