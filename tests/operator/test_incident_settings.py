"""An Incident runs with the capture settings it opened with: a CapturePolicy edited while it is under way
changes nothing of it (its collection deadline, its analyzer Job), only the Incidents opened after."""

from __future__ import annotations

import pickle
from typing import Any

from harness import Cluster, eventually, upload_as_agent
from kubernetes import client

from frwatch_operator import constants as c
from frwatch_operator.store.s3 import S3Store

#: Whole pickles the agent's watcher takes; the operator never reads a dump's content.
DUMP = pickle.dumps({"version": "2.10", "entries": []})


def policy(*, buffer_size: int, analyzer_deadline: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{c.GROUP}/{c.VERSION}", "kind": c.POLICY_KIND, "metadata": {"name": "all-jobs"},
        "spec": {"jobSelector": {}, "collectionDeadlineSeconds": 60, "bufferSize": buffer_size,
                 "analyzer": {"deadlineSeconds": analyzer_deadline}},
    }  # fmt: skip


def injected_buffer_size(pod: dict[str, Any]) -> str | None:
    env = [e for ctr in pod["spec"]["containers"] for e in ctr.get("env") or []]
    return next((e.get("value") for e in env if e["name"] == c.ENV_FR_BUFFER_SIZE), None)


def test_a_policy_edited_mid_incident_changes_nothing_of_it(cluster: Cluster, start_operator, store: S3Store):
    cluster.custom.create_namespaced_custom_object(
        c.GROUP, c.VERSION, cluster.namespace, c.POLICY_PLURAL, policy(buffer_size=2000, analyzer_deadline=1200)
    )
    op = start_operator(FRWATCH_ANALYZER_NAMESPACE=cluster.namespace)
    job = cluster.create_job("llama", world=2)
    pods = cluster.create_pods(op, job, 2)
    for p in pods:
        cluster.running(p)
    cluster.exited(pods[1], exit_code=1)
    opened = cluster.incident(phase="Collecting")["status"]
    assert opened["settings"]["analyzerDeadlineSeconds"] == 1200
    assert opened["settings"]["collectionDeadlineSeconds"] == 60

    edited = policy(buffer_size=1999, analyzer_deadline=30)
    edited["metadata"]["resourceVersion"] = cluster.custom.get_namespaced_custom_object(
        c.GROUP, c.VERSION, cluster.namespace, c.POLICY_PLURAL, "all-jobs"
    )["metadata"]["resourceVersion"]
    cluster.custom.replace_namespaced_custom_object(
        c.GROUP, c.VERSION, cluster.namespace, c.POLICY_PLURAL, "all-jobs", edited
    )
    # the signal that the operator took the edit: its webhook now injects the edited ring size
    eventually(
        lambda: injected_buffer_size(op.admit(cluster.pod_body(job, 0), cluster.namespace)) == "1999",
        "the operator's webhook injecting the edited policy",
    )

    for rank, pod in enumerate(pods):
        upload_as_agent(store, job, pod, f"node-{rank}", {rank: DUMP})
    status = cluster.incident(phase="Analyzing")["status"]
    assert status["settings"] == opened["settings"]
    assert status["collectionDeadline"] == opened["collectionDeadline"]
    analyzer = client.BatchV1Api(cluster.api).read_namespaced_job(status["analyzerJob"], cluster.namespace)
    assert analyzer.spec.active_deadline_seconds == 1200  # the policy's at the opening, not the edited 30
