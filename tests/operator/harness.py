"""What the operator tests stand on: the real `frwatch operator` as a subprocess, a job and its pods created
through the API (admitted by the operator's own webhook over real HTTP, as the API server would), a
kubelet played by the test (pod statuses patched through the API), and the agent's real upload code."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_analyzers.store.pod_record import StoredPodRecord
from frwatch_dev.ports import free_port
from frwatch_dev.testing.agent_process import AgentProcess
from frwatch_dev.testing.agent_process import start_agent as start_agent_process
from frwatch_dev.testing.operator_process import OperatorProcess
from frwatch_dev.testing.polling import eventually as eventually  # the one poller (404: not yet)
from frwatch_operator import constants as c
from frwatch_operator.agent.dumpfiles import DumpWatcher
from frwatch_operator.agent.uploader import Uploader
from frwatch_operator.store.s3 import S3Store

ROOT = Path(__file__).resolve().parents[2]
GROUP, VERSION = c.GROUP, c.VERSION


# --- the operator process ----------------------------------------------------------------------------------
def operator_env(s3_env: dict[str, str], namespace: str, deadline_seconds: int, **env: str) -> dict[str, str]:
    """The environment of `frwatch operator` watching ``namespace``: this process's, without its FRWATCH_
    and AWS_ variables, plus the store's, free loopback ports (webhook, /healthz, /metrics), fast passes
    and ``env`` on top."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("FRWATCH_", "AWS_"))}
    return {
        **base, **s3_env,
        "FRWATCH_S3_PREFIX": "frwatch", "FRWATCH_OPERATOR_NAMESPACES": namespace,
        "FRWATCH_WEBHOOK_INSECURE": "true", "FRWATCH_WEBHOOK_ADDR": "127.0.0.1",
        "FRWATCH_WEBHOOK_PORT": str(free_port()), "FRWATCH_WEBHOOK_JOB_WAIT_SECONDS": "2",
        "FRWATCH_COLLECTION_DEADLINE_SECONDS": str(deadline_seconds),
        "FRWATCH_OPERATOR_INCIDENT_POLL_SECONDS": "0.5", "FRWATCH_OPERATOR_ASK_AGENTS_AFTER_SECONDS": "1",
        "FRWATCH_LOG_LEVEL": "INFO", "FRWATCH_OPERATOR_LISTEN_ADDR": "127.0.0.1",
        "FRWATCH_OPERATOR_HEALTH_PORT": str(free_port()), "FRWATCH_OPERATOR_METRICS_PORT": str(free_port()),
        **({"FRWATCH_AGENT_KEY_NAMESPACE": namespace} if namespace else {}),  # its key ring beside the jobs
        **env,
    }  # fmt: skip


# --- jobs and pods, through the API ---------------------------------------------------------------------------
@dataclass
class Cluster:
    """The test's hands on the emulator: creating jobs and pods, and playing the kubelet."""

    api: client.ApiClient
    namespace: str

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def create_job(self, name: str, world: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
        """A PyTorchJob with one master and ``world - 1`` workers, one process per pod."""
        body = {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "annotations": annotations if annotations is not None
                         else {c.ANN_CAPTURE: c.CAPTURE_ENABLED}},
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": _template()},
                **({"Worker": {"replicas": world - 1, "restartPolicy": "OnFailure", "template": _template()}}
                   if world > 1 else {}),
            }},
        }  # fmt: skip
        return dict(
            self.custom.create_namespaced_custom_object(
                "kubeflow.org", "v1", self.namespace, "pytorchjobs", body
            )
        )

    def job(self, name: str) -> dict[str, Any]:
        return dict(
            self.custom.get_namespaced_custom_object(
                "kubeflow.org", "v1", self.namespace, "pytorchjobs", name
            )
        )

    def pod_body(self, job: dict[str, Any], rank: int) -> dict[str, Any]:
        """The pod the training-operator would create for node rank ``rank`` (master 0, worker i -> i+1)."""
        jname = job["metadata"]["name"]
        rtype, index = ("master", 0) if rank == 0 else ("worker", rank - 1)
        labels = {
            c.KF_LABEL_JOB_NAME: jname, c.KF_LABEL_REPLICA_TYPE: rtype, c.KF_LABEL_REPLICA_INDEX: str(index),
            c.KF_LABEL_OPERATOR_NAME: "pytorchjob-controller",
        }  # fmt: skip
        if rank == 0:
            labels[c.KF_LABEL_JOB_ROLE] = "master"
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{jname}-{rtype}-{index}", "namespace": self.namespace, "labels": labels,
                         "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": jname,
                                              "uid": job["metadata"]["uid"], "controller": True}]},
            "spec": {**_template()["spec"], "nodeName": f"node-{rank}"},
        }  # fmt: skip

    def create_pods(self, op: OperatorProcess, job: dict[str, Any], world: int) -> list[str]:
        names = []
        for rank in range(world):
            pod = op.admit(self.pod_body(job, rank), self.namespace)
            created = self.core.create_namespaced_pod(self.namespace, pod)
            names.append(created.metadata.name)
        return names

    def pod(self, name: str) -> dict[str, Any]:
        return dict(self.api.sanitize_for_serialization(self.core.read_namespaced_pod(name, self.namespace)))

    # --- the kubelet's part ---
    def set_status(self, name: str, status: dict[str, Any]) -> None:
        self.core.patch_namespaced_pod_status(name, self.namespace, {"status": status})

    def running(self, name: str, agent_port: int | None = None) -> None:
        now = _now()
        statuses = [{"name": "pytorch", "ready": True, "restartCount": 0, "image": "trainer",
                     "imageID": "", "state": {"running": {"startedAt": now}}}]  # fmt: skip
        init = [{"name": c.AGENT_CONTAINER, "ready": True, "restartCount": 0, "image": "frwatch",
                 "imageID": "", "started": True, "state": {"running": {"startedAt": now}}}]  # fmt: skip
        self.set_status(name, {"phase": "Running", "podIP": "127.0.0.1", "hostIP": "127.0.0.1",
                               "containerStatuses": statuses, "initContainerStatuses": init})  # fmt: skip

    def exited(self, name: str, exit_code: int, reason: str = "Error") -> None:
        now = _now()
        statuses = [{"name": "pytorch", "ready": False, "restartCount": 0, "image": "trainer", "imageID": "",
                     "state": {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": now,
                                              "finishedAt": now}}}]  # fmt: skip
        self.set_status(name, {"phase": "Failed", "containerStatuses": statuses})

    def ended(self, name: str, exit_code: int, reason: str = "Error") -> None:
        """The training container exited, then the kubelet stopped the agent sidecar, which drained and
        exited: the pod is settled (nothing more can reach the store from it)."""
        now = _now()
        term = {"exitCode": exit_code, "reason": reason, "startedAt": now, "finishedAt": now}
        statuses = [{"name": "pytorch", "ready": False, "restartCount": 0, "image": "trainer", "imageID": "",
                     "state": {"terminated": term}}]  # fmt: skip
        init = [{"name": c.AGENT_CONTAINER, "ready": False, "restartCount": 0, "image": "frwatch", "imageID": "",
                 "started": False, "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                            "startedAt": now, "finishedAt": now}}}]  # fmt: skip
        self.set_status(name, {"phase": "Failed", "containerStatuses": statuses, "initContainerStatuses": init})

    def evicted(self, name: str, message: str) -> None:
        self.set_status(name, {"phase": "Failed", "reason": "Evicted", "message": message})

    def delete_pod(self, name: str) -> None:
        self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)

    def failure_looked_at(self, op: OperatorProcess, *pods: str, timeout: float = 20.0) -> list[str]:
        """Wait until ``op`` has handled the current state of each (failed) pod: its log line "failure seen
        on pod <ns>/<pod> (resourceVersion <rv>): ...; Incident <name>" (or "...: no Incident"), for the
        resourceVersion the pod has now. The operator's explicit "looked and decided": what it did about
        those pods is done by then. Returns those lines."""
        wanted = {
            f"failure seen on pod {self.namespace}/{p} (resourceVersion {self.pod(p)['metadata']['resourceVersion']})"
            for p in pods
        }

        def lines() -> list[str] | None:
            found = [r["event"] for r in op.log_records() if str(r.get("event", "")).startswith(tuple(wanted))]
            return found if {w for w in wanted if any(f.startswith(w) for f in found)} == wanted else None

        return eventually(lines, f"the operator looking at the failure of {', '.join(pods)}", timeout)  # type: ignore[no-any-return]

    # --- incidents and events ---
    def incidents(self) -> list[dict[str, Any]]:
        return list(
            self.custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, c.INCIDENT_PLURAL)[
                "items"
            ]
        )

    def incident(self, phase: str | None = None, timeout: float = 20.0) -> dict[str, Any]:
        """The namespace's one Incident once its writer settled: it has a status (the creator writes it right
        after the create), in ``phase`` if given; in ``Analyzing``, once the hand-off to the verdict loop is
        recorded (condition ``AnalysisRequested``, written in a second write after the phase)."""

        def one() -> dict[str, Any] | None:
            items = self.incidents()
            assert len(items) <= 1, f"more than one Incident: {[i['metadata']['name'] for i in items]}"
            status = (items[0].get("status") or {}) if items else {}
            if not status.get("phase") or (phase is not None and status["phase"] != phase):
                return None
            if status["phase"] == "Analyzing" and not handed_over(status):
                return None
            return items[0]

        return eventually(one, f"an Incident in phase {phase or 'any'}", timeout)  # type: ignore[no-any-return]

    def events(self, name: str) -> list[Any]:
        return list(
            self.core.list_namespaced_event(
                self.namespace, field_selector=f"involvedObject.name={name}"
            ).items
        )


def handed_over(status: dict[str, Any]) -> dict[str, Any] | None:
    """The hand-off condition of an Incident's status (True: the analyzer Job was asked for, or there is nothing to align)."""
    return next((x for x in status.get("conditions") or [] if x.get("type") == "AnalysisRequested"), None)


def _template() -> dict[str, Any]:
    return {
        "spec": {"containers": [{"name": "pytorch", "image": "trainer:1", "command": ["python", "train.py"]}]}
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# --- the agent's part: real upload code ------------------------------------------------------------------------
def upload_as_agent(
    store: S3Store, job: dict[str, Any], pod: str, node: str, dumps: dict[int, bytes], attempt: str = "0"
) -> AttemptKey:
    """Upload ``dumps`` (rank -> real dump bytes) the way the pod's agent does: the agent's own watcher over
    a real folder and its Uploader (layout keys, size and ETag checks, pods/<pod>.json record)."""
    meta = job["metadata"]
    key = AttemptKey("frwatch", meta["namespace"], meta["name"], meta["uid"], attempt)
    record = StoredPodRecord(pod=pod, namespace=meta["namespace"], node=node, uid="", job=meta["name"],
                       job_uid=meta["uid"], attempt=attempt, agent_started_at=time.time())  # fmt: skip
    uploader = Uploader(store, key, record, bucket=store.default_bucket)
    folder = Path(tempfile.mkdtemp(prefix=f"agent-{pod}-"))
    try:
        for rank, data in dumps.items():
            (folder / f"{c.DUMP_FILE_PREFIX}{rank}").write_bytes(data)
        watcher = DumpWatcher(folder, c.DUMP_FILE_PREFIX, stable_seconds=0.0, corrupt_after_seconds=30.0)
        watcher.poll(0.0)
        found = watcher.poll(1.0)
        assert sorted(d.rank for d in found) == sorted(dumps), "not whole dumps"
        for dump in found:
            uploader.submit(dump)
        uploader.step(time.monotonic())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert uploader.idle, uploader.status()
    return key


# --- the real agent process ---------------------------------------------------------------------------------
def agent_token(pod: dict[str, Any]) -> str:
    """The control token the webhook gave the pod's agent (derived from the operator's key ring)."""
    agent = next(x for x in pod["spec"]["initContainers"] if x["name"] == c.AGENT_CONTAINER)
    return str(next(e["value"] for e in agent["env"] if e["name"] == "FRWATCH_AGENT_TOKEN"))


def start_agent(s3_env: dict[str, str], job: dict[str, Any], pod: str, node: str, workdir: Path,
                control_port: int, token: str, attempt: str = "0") -> AgentProcess:  # fmt: skip
    """`frwatch agent` for one pod, with the environment the webhook injects (identity, store, ``token``:
    the one injected into the admitted pod, :func:`agent_token`)."""
    meta = job["metadata"]
    return start_agent_process(
        workdir, s3_env, dump_dir=workdir / f"dumps-{pod}", log=workdir / f"agent-{pod}.log",
        FRWATCH_POD_NAME=pod, FRWATCH_POD_NAMESPACE=meta["namespace"], FRWATCH_POD_NODE=node, FRWATCH_POD_UID="",
        FRWATCH_JOB_NAME=meta["name"], FRWATCH_JOB_UID=meta["uid"], FRWATCH_JOB_ATTEMPT=attempt,
        FRWATCH_AGENT_CONTROL_PORT=str(control_port), FRWATCH_AGENT_TOKEN=token,
        FRWATCH_AGENT_STABLE_SECONDS="0.2", FRWATCH_AGENT_DRAIN_SECONDS="5",
    )  # fmt: skip
