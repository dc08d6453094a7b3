"""Nothing silent about capture that did not happen: a job opted in while it runs says (Warning Event and
annotation) that its current attempt is not captured and the next one is, and the next one is; a pod admitted
without injection in a captured attempt is reported on the job."""

from __future__ import annotations

from typing import Any

from harness import Cluster, eventually

from frwatch_operator import constants as c
from frwatch_operator.detect.pod_failure import attempt_of


def annotations(cluster: Cluster, job: str) -> dict[str, str]:
    return dict(cluster.job(job)["metadata"].get("annotations") or {})


def events(cluster: Cluster, job: str, reason: str) -> list[Any]:
    return [e for e in cluster.events(job) if e.reason == reason]


def injected(pod: dict[str, Any]) -> bool:
    return c.ANN_INJECTED in (pod["metadata"].get("annotations") or {})


def test_opting_in_a_running_job_says_this_attempt_is_not_captured_and_the_next_one_is(
    cluster: Cluster, start_operator
):
    op = start_operator()
    job = cluster.create_job("late", world=2, annotations={})
    running = []
    for rank in range(2):
        pod = op.admit(cluster.pod_body(job, rank), cluster.namespace)
        assert not injected(pod)  # not opted in yet: the webhook leaves it alone
        running.append(cluster.core.create_namespaced_pod(cluster.namespace, pod).metadata.name)
        cluster.running(running[-1])

    cluster.custom.patch_namespaced_custom_object(
        "kubeflow.org", "v1", cluster.namespace, "pytorchjobs", "late",
        {"metadata": {"annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED}}},
    )  # fmt: skip
    said = eventually(lambda: events(cluster, "late", "AttemptNotCaptured"), "AttemptNotCaptured", timeout=20)
    assert len(said) == 1 and said[0].type == "Warning"
    assert "attempt 0 of this job runs without Flight Recorder capture" in said[0].message
    assert "Pods created from now on belong to attempt 1 and are captured" in said[0].message
    ann = annotations(cluster, "late")
    assert ann[c.ANN_ATTEMPT] == "1" and ann[c.ANN_NOT_CAPTURED].startswith("attempt 0: its pods run without")

    # the uncaptured attempt fails (no Incident can come of it), the training operator recreates the pods
    for name in running:
        cluster.exited(name, exit_code=1)
        cluster.delete_pod(name)
    job = cluster.job("late")
    # the webhook learns the new attempt from its watch: the sign is its own answer for a new pod
    eventually(lambda: attempt_of(op.admit(cluster.pod_body(job, 0), cluster.namespace)) == "1",
               "the webhook giving new pods attempt 1")  # fmt: skip
    recreated = cluster.create_pods(op, job, 2)
    assert all(injected(cluster.pod(p)) for p in recreated)
    for name in recreated:
        cluster.running(name)
    eventually(lambda: c.ANN_NOT_CAPTURED not in annotations(cluster, "late"), "the not-captured annotation gone")
    cluster.exited(recreated[1], exit_code=1)
    incident = cluster.incident()
    assert incident["spec"]["attempt"] == "1"  # the captured attempt, the only Incident


def test_a_pod_admitted_without_injection_is_reported_on_the_job(cluster: Cluster, start_operator):
    op = start_operator()
    job = cluster.create_job("partial", world=2)
    first = cluster.create_pods(op, job, 1)[0]
    cluster.running(first)
    eventually(lambda: annotations(cluster, "partial").get(c.ANN_ATTEMPT_STARTED), "attempt 0's start recorded")

    missed = cluster.pod_body(job, 1)  # created while the webhook could not be reached: admitted as is
    cluster.core.create_namespaced_pod(cluster.namespace, missed)
    said = eventually(lambda: events(cluster, "partial", "PodNotCaptured"), "PodNotCaptured", timeout=20)
    assert said[0].message.startswith(f"pod {missed['metadata']['name']} was admitted without Flight Recorder")
    assert "attempt 0's Incident will have no dump of its ranks" in said[0].message
    ann = annotations(cluster, "partial")
    assert ann.get(c.ANN_ATTEMPT, "0") == "0" and c.ANN_NOT_CAPTURED not in ann  # the attempt is captured
