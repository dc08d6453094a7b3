"""What the end-to-end tests do, through the Kubernetes API only (the kubernetes client and a kubeconfig),
so the same tests run on the local cluster and on a real one."""

from __future__ import annotations

import os
import signal
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config

from frwatch_dev.localcluster.cluster import LocalCluster
from frwatch_dev.testing.polling import wait_for as wait_for  # the one poller of the test suite
from frwatch_dev.workloads import GPU_HANG as GPU_HANG  # what the pods run
from frwatch_dev.workloads import WORKLOAD as WORKLOAD
from frwatch_operator import constants as c

Obj = dict[str, Any]
CULPRIT_POD = "worker-0"  # rank 1: the workloads' default culprit

#: Live watch (frwatch.io/live jobs only) on the local cluster: agents sample and the operator pulls every 2 s
#: (chart default 15 s each), and a stall is named after 10 s (default 60 s) so test_live_e2e.py runs short.
#: On a real cluster the tests read the threshold from FRWATCH_E2E_LIVE_STALL_AFTER_SECONDS (default 60).
LIVE_STALL_AFTER_SECONDS = 10
LIVE_ENV = {
    "FRWATCH_AGENT_LIVE_PERIOD_SECONDS": "2",
    "FRWATCH_OPERATOR_LIVE_POLL_SECONDS": "2",
    "FRWATCH_OPERATOR_LIVE_STALL_AFTER_SECONDS": str(LIVE_STALL_AFTER_SECONDS),
    # policy abort (only jobs that ask for it: test_live_policy_e2e.py) may suspend a job on the local cluster
    "FRWATCH_OPERATOR_LIVE_ABORT_ALLOWED": "true",
}

#: The source step's Python in ``conftest.source_broken_target``: no image has it.
NO_PYTHON = "frwatch-no-such-python"


@dataclass
class Target:
    kubeconfig: Path
    namespace: str
    image: str
    local: LocalCluster | None
    #: (namespace, name) of the operators' leader election Lease
    operator_lease: tuple[str, str] = ("frwatch-system", "frwatch-leader")
    api: client.ApiClient = field(init=False)

    def __post_init__(self) -> None:
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig))

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def submit(
        self, command: list[str], *, capture: bool = True, prefix: str = "e2e", workers: int = 3,
        security_context: Obj | None = None, annotations: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> str:  # fmt: skip
        """A PyTorchJob of 1 master and ``workers`` workers running ``command`` (its container with
        ``security_context`` and ``env`` when given, the job with more ``annotations``); returns its name."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        container: Obj = {"name": "pytorch", "image": self.image, "command": command}
        if security_context is not None:
            container["securityContext"] = security_context
        if env:
            container["env"] = [{"name": k, "value": v} for k, v in env.items()]

        def replica(n: int) -> Obj:
            return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}

        meta: Obj = {"name": name, "namespace": self.namespace}
        if capture or annotations:
            meta["annotations"] = ({c.ANN_CAPTURE: c.CAPTURE_ENABLED} if capture else {}) | (annotations or {})
        body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta,
                "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}}}  # fmt: skip
        self.custom.create_namespaced_custom_object("kubeflow.org", "v1", self.namespace, "pytorchjobs", body)
        return name

    def job(self, name: str) -> Obj:
        return self.custom.get_namespaced_custom_object(
            "kubeflow.org", "v1", self.namespace, "pytorchjobs", name
        )  # type: ignore[no-any-return]

    def annotations(self, name: str) -> dict[str, str]:
        return dict(self.job(name)["metadata"].get("annotations") or {})

    def conditions(self, name: str) -> list[str]:
        conds = (self.job(name).get("status") or {}).get("conditions") or []
        return [x["type"] for x in conds if x.get("status") == "True"]

    def wait_verdict(self, name: str, timeout: float = 100) -> dict[str, str]:
        try:
            return wait_for(
                lambda: (a := self.annotations(name)).get(c.ANN_VERDICT) and a,
                timeout,
                f"a verdict on {name}",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnostics()}") from None

    def reported_incident(self, name: str, timeout: float = 30) -> Obj:
        """The job's one Incident once Reported (the verdict loop annotates the job first, then writes the
        Incident's status: the annotation alone does not mean the status is written)."""
        def reported() -> Obj | None:
            found = self.incidents(name)
            assert len(found) <= 1, [i["metadata"]["name"] for i in found]
            return found[0] if found and (found[0].get("status") or {}).get("phase") == "Reported" else None

        return wait_for(reported, timeout, f"{name}'s Incident Reported")  # type: ignore[no-any-return]

    def diagnostics(self) -> str:
        """What the local cluster's operator did (its status and log tail), for a failure message."""
        if self.local is None:
            return "(a real cluster: see the operator's logs)"
        log = self.local.logs_dir / "frwatch-operator.log"
        tail = log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"
        return f"operator: {self.local.operator_status}\n--- operator log tail ---\n{tail}"

    def operator_log(self) -> str:
        """The operator's log: the local cluster's file, or on a real cluster the logs of the operator pods
        (label ``app.kubernetes.io/component=operator`` in the Lease's namespace, as the chart labels them)."""
        if self.local is not None:
            log = self.local.logs_dir / "frwatch-operator.log"
            return log.read_text(errors="replace") if log.exists() else ""
        ns, _ = self.operator_lease
        pods = self.core.list_namespaced_pod(ns, label_selector="app.kubernetes.io/component=operator").items
        return "\n".join(self.core.read_namespaced_pod_log(p.metadata.name, ns) for p in pods)

    def delete_job(self, name: str) -> None:
        """Delete the PyTorchJob, then its pods, so a hung job does not run on after its test."""
        self.custom.delete_namespaced_custom_object(
            "kubeflow.org", "v1", self.namespace, "pytorchjobs", name, propagation_policy="Background"
        )
        for pod in self.pods(name):
            try:
                self.core.delete_namespaced_pod(pod["metadata"]["name"], self.namespace, grace_period_seconds=0)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise

    def wait_finished(self, name: str, timeout: float = 90) -> list[str]:
        return wait_for(
            lambda: (x := self.conditions(name)) and {"Succeeded", "Failed"} & set(x) and x,
            timeout,
            f"{name} to end",
        )

    def pods(self, name: str) -> list[Obj]:
        items = self.core.list_namespaced_pod(
            self.namespace, label_selector=f"{c.KF_LABEL_JOB_NAME}={name}"
        ).items
        return [self.api.sanitize_for_serialization(p) for p in items]

    def incidents(self, name: str) -> list[Obj]:
        items = self.custom.list_namespaced_custom_object(
            c.GROUP, c.VERSION, self.namespace, c.INCIDENT_PLURAL
        )["items"]
        return [i for i in items if any(r.get("name") == name for r in i["metadata"].get("ownerReferences") or [])
                or (i["metadata"].get("labels") or {}).get(c.LABEL_INCIDENT_JOB) == name]  # fmt: skip

    def events(self, name: str, reason: str) -> list[str]:
        items = self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={name}"
        ).items
        return [e.message for e in items if e.reason == reason]

    def event_objects(self, name: str, reason: str) -> list[Any]:
        """The Events of that reason about the object ``name`` (each with its count)."""
        items = self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={name}"
        ).items
        return [e for e in items if e.reason == reason]

    def analyzer_jobs(self, incident: Obj) -> list[str]:
        """The analyzer Jobs created for ``incident`` (in the operator's namespace, marked with its uid)."""
        ns, _ = self.operator_lease
        jobs = client.BatchV1Api(self.api).list_namespaced_job(
            ns, label_selector=f"{c.LABEL_INCIDENT_NAMESPACE}={self.namespace}"
        ).items
        uid = incident["metadata"]["uid"]
        return [j.metadata.name for j in jobs if (j.metadata.annotations or {}).get(c.ANN_INCIDENT_UID) == uid]

    # --- operator replicas (leader election) -----------------------------------------------------------
    def lease(self) -> Obj | None:
        """The leader election's Lease: the local cluster's, or the chart's (FRWATCH_E2E_OPERATOR_NAMESPACE,
        FRWATCH_E2E_LEASE)."""
        ns, name = self.operator_lease
        try:
            lease = client.CoordinationV1Api(self.api).read_namespaced_lease(name, ns)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return self.api.sanitize_for_serialization(lease)  # type: ignore[no-any-return]

    def kill_operator(self, identity: str) -> None:
        """Kill the operator replica named ``identity`` in the Lease, without goodbye, and return once it is
        down: locally its process (SIGKILL; the identity ends with its pid) is gone, on a real cluster its pod
        (deleted with grace period 0, as a crash) is gone."""
        if self.local is None:
            ns, _ = self.operator_lease
            self.core.delete_namespaced_pod(identity, ns, grace_period_seconds=0)

            def gone() -> bool:
                try:
                    self.core.read_namespaced_pod(identity, ns)
                except client.ApiException as exc:
                    return exc.status == 404
                return False

            wait_for(gone, 60, f"operator pod {identity} gone")
            return
        local = self.local
        pid = int(identity.rsplit("-", 1)[1])
        assert pid in local.operator_pids(), f"{identity} is not one of this cluster's operators"
        os.killpg(pid, signal.SIGKILL)
        wait_for(lambda: pid not in local.operator_pids(), 30, f"operator process {pid} gone")

    def agent_status(self, pod: str) -> Obj:
        """The frwatch agent's container status in ``pod`` (a native sidecar: an init container)."""
        status = self.api.sanitize_for_serialization(self.core.read_namespaced_pod(pod, self.namespace).status)
        found = [s for s in status.get("initContainerStatuses") or [] if s["name"] == c.AGENT_CONTAINER]
        assert found, f"{pod} has no {c.AGENT_CONTAINER} container status"
        return found[0]  # type: ignore[no-any-return]

    def restart_agent(self, pod: str) -> None:
        """Make the frwatch agent of ``pod`` exit (SIGTERM to its process, as a node's eviction or an OOM-free
        crash-and-drain would) so its kubelet restarts the sidecar; returns once it is told. Locally the
        process named by its containerID (``local://<pid>``); on a real cluster an exec into the agent
        container that signals its PID 1 (the agent handles SIGTERM, so PID 1's signal protection does not
        stop it)."""
        if self.local is not None:
            cid = str(self.agent_status(pod).get("containerID") or "")
            assert cid.startswith("local://"), cid
            os.kill(int(cid.removeprefix("local://")), signal.SIGTERM)
            return
        from kubernetes.stream import stream

        stream(
            self.core.connect_get_namespaced_pod_exec, pod, self.namespace, container=c.AGENT_CONTAINER,
            command=["python", "-c", "import os, signal; os.kill(1, signal.SIGTERM)"],
            stderr=True, stdin=False, stdout=True, tty=False,
        )  # fmt: skip

    def node(self, name: str) -> Obj:
        return self.api.sanitize_for_serialization(self.core.read_node(name))  # type: ignore[no-any-return]

    def culprit_node(self, name: str) -> str:
        pod = next(p for p in self.pods(name) if p["metadata"]["name"] == f"{name}-{CULPRIT_POD}")
        return str(pod["spec"]["nodeName"])
