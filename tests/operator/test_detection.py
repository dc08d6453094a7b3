"""Detection: a training container's failure opens exactly one Incident for the job attempt, within seconds."""

from __future__ import annotations

import subprocess
import time

from harness import Cluster, eventually
from kubernetes import client

from frwatch_dev.localcluster.kubectl import kubectl_path
from frwatch_operator import constants as c


def test_a_container_exit_opens_an_incident_and_moves_the_job_to_the_next_attempt(
    cluster: Cluster, start_operator
):
    op = start_operator()
    job = cluster.create_job("llama", world=2)
    pods = cluster.create_pods(op, job, 2)
    assert all(c.ANN_INJECTED in cluster.pod(p)["metadata"]["annotations"] for p in pods)
    for p in pods:
        cluster.running(p)

    t0 = time.monotonic()
    cluster.exited(pods[1], exit_code=1)
    incident = cluster.incident()
    latency = time.monotonic() - t0
    print(f"detection latency: {latency:.2f}s")

    assert incident["spec"]["jobRef"]["uid"] == job["metadata"]["uid"]
    assert incident["spec"]["attempt"] == "0"
    assert f"pod {pods[1]}: container pytorch exited 1" in incident["spec"]["trigger"]
    assert incident["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    eventually(
        lambda: cluster.job("llama")["metadata"]["annotations"].get(c.ANN_ATTEMPT) == "1", "attempt bumped"
    )
    events = eventually(
        lambda: [e for e in cluster.events("llama") if e.reason == "IncidentOpened"],
        "an IncidentOpened Event",
    )
    assert incident["metadata"]["name"] in events[0].message
    assert "attempt 1" in events[0].message

    described = subprocess.run(
        [kubectl_path(), "describe", "pytorchjob", "llama", "-n", cluster.namespace],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    assert "IncidentOpened" in described and incident["metadata"]["name"] in described

    # a pod created by the restart belongs to the next attempt
    restarted = op.admit(cluster.pod_body(cluster.job("llama"), 1), cluster.namespace)
    agent = next(x for x in restarted["spec"]["initContainers"] if x["name"] == c.AGENT_CONTAINER)
    assert {"name": c.ENV_JOB_ATTEMPT, "value": "1"} in agent["env"]
    assert op.stop() == 0  # SIGTERM: a clean stop
    # a job kind whose CRD this cluster lacks: the operator said so at start, and works all the same
    installed = {crd.metadata.name for crd in client.ApiextensionsV1Api(cluster.api).list_custom_resource_definition().items}
    said = {r["event"].split(" ")[0] for r in op.log_records()
            if r.get("level") == "warning" and "is not installed in this cluster" in r["event"]}  # fmt: skip
    absent = {k for k, crd in (("TrainJob", "trainjobs.trainer.kubeflow.org"), ("JobSet", "jobsets.jobset.x-k8s.io"),
                               ("PyTorchJob", "pytorchjobs.kubeflow.org")) if crd not in installed}  # fmt: skip
    assert said == absent and "PyTorchJob" not in absent


def test_the_same_failure_reported_many_times_opens_one_incident(cluster: Cluster, start_operator):
    op = start_operator()
    job = cluster.create_job("gpt", world=3)
    pods = cluster.create_pods(op, job, 3)
    for p in pods:
        cluster.running(p)
    # every pod fails, each status is reported several times (duplicated watch events)
    for _ in range(3):
        for i, p in enumerate(pods):
            cluster.exited(p, exit_code=1 + i, reason="Error")
    cluster.evicted(pods[2], "The node was low on resource: memory.")
    cluster.incident()
    cluster.failure_looked_at(op, *pods)  # the last (duplicated) event of every pod is handled
    assert len(cluster.incidents()) == 1
    assert cluster.job("gpt")["metadata"]["annotations"][c.ANN_ATTEMPT] == "1"
    opened = [e for e in cluster.events("gpt") if e.reason == "IncidentOpened"]
    assert len(opened) == 1


def test_a_malformed_opt_in_leaves_the_job_untouched_and_says_why(cluster: Cluster, start_operator):
    op = start_operator()
    job = cluster.create_job("bert", world=2, annotations={c.ANN_CAPTURE: "yes please"})
    before = cluster.job("bert")["metadata"]
    events = eventually(
        lambda: [e for e in cluster.events("bert") if e.reason == "CaptureConfigInvalid"],
        "a CaptureConfigInvalid Event",
    )
    assert events[0].type == "Warning"
    assert "'yes please'" in events[0].message and "enabled" in events[0].message
    assert events[0].involved_object.uid == job["metadata"]["uid"]

    pod = op.admit(cluster.pod_body(job, 0), cluster.namespace)
    assert c.ANN_INJECTED not in (pod["metadata"].get("annotations") or {})
    name = cluster.core.create_namespaced_pod(cluster.namespace, pod).metadata.name
    cluster.exited(name, exit_code=1)
    [said] = cluster.failure_looked_at(op, name)  # looked at the failure and decided
    assert said.endswith("is not captured: no Incident"), said
    assert cluster.incidents() == []
    after = cluster.job("bert")["metadata"]
    assert after["annotations"] == before["annotations"]
    assert after.get("finalizers") in (None, [])
