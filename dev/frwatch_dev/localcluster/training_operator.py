"""A stand-in for the Kubeflow training operator (``kubeflow.org/v1`` PyTorchJob), after its v1.7/v1.8 code.

    await TrainingOperator(api_url).run()     # until cancelled

For each PyTorchJob it creates the pods of ``spec.pytorchReplicaSpecs`` (``Master``, ``Worker``) with the
real names (``<job>-master-0``, ``<job>-worker-<i>``), labels (``training.kubeflow.org/job-name``,
``operator-name: pytorchjob-controller``, ``replica-type`` lower case, ``replica-index``, ``job-role:
master`` on the master), an owner reference to the job, the pod ``restartPolicy`` of the replica spec
(``ExitCode`` -> ``Never``; default ``OnFailure``), and in every container the env the operator appends:
``PYTHONUNBUFFERED``, ``MASTER_PORT``, ``MASTER_ADDR``, ``WORLD_SIZE`` (pods x nprocPerNode, ``auto`` = 1),
``RANK`` (master 0, worker i -> i+1), ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_NNODES``.

It keeps ``status`` as the real one: conditions ``Created``, ``Running`` (the master runs; without a
master, a worker), ``Restarting``, ``Succeeded`` (every master pod succeeded, the workers may still be
running; without a master, every worker), ``Failed`` (``PyTorchJob ns/name has failed because N Worker
replica(s) failed.``), with the real reasons (``PyTorchJobCreated`` ...) and the real replacement rules (Running and Restarting replace
each other; a terminal condition turns Running False), ``replicaStatuses``, ``startTime``,
``completionTime``; and Events (``SuccessfulCreatePod``, ``ExitedWithCode``, ``PyTorchJobFailed`` ...).

Restarts: ``OnFailure``/``Always`` pods are restarted in place by the kubelet (the pod stays; its
``restartCount`` grows); ``ExitCode``: a pod that failed with a retryable code (>= 128: killed by a
signal) is deleted and created again (condition ``Restarting``), a permanent code (1-127) fails the
job; ``Never``: a failed pod fails the job. ``runPolicy.backoffLimit`` (container restarts plus
``ExitCode`` re-creations) and ``activeDeadlineSeconds`` fail the job and delete its pods. When the
job ends, ``runPolicy.cleanPodPolicy`` (default ``None``) deletes ``All`` pods or the ``Running`` ones;
``ttlSecondsAfterFinished`` deletes the job. ``runPolicy.suspend`` (v1.7's common reconciler): true deletes
the job's active (Pending, Running) pods, creates none, sets ``Suspended`` True (``PyTorchJobSuspended``,
``PyTorchJob ns/name is suspended.``), ``Running`` False and clears ``startTime``; false again sets
``Suspended`` False (``PyTorchJobResumed``) and creates the pods again.

Local differences: ``MASTER_ADDR`` is ``127.0.0.1`` (no Services, no DNS: every pod is on loopback) and
``MASTER_PORT`` is the master's ``pytorchjob-port`` when its template declares one, else a free port
chosen per job (the real default, 23456, would collide between jobs on one host). Not done:
``elasticPolicy``, ``schedulingPolicy``/gang scheduling, Services.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import logging
from collections.abc import Sequence
from typing import Any

from frwatch_dev.localcluster.client import Api, ApiStatusError, Informer, now, ns_path
from frwatch_dev.localcluster.controllers import controller_ref, owned, reconcile_each, run_loop
from frwatch_dev.ports import free_port
from frwatch_operator import constants as c

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
OPERATOR_NAME = "pytorchjob-controller"
COMPONENT = "pytorchjob-controller"
KIND = "PyTorchJob"
API_VERSION = f"{c.KF_GROUP}/{c.KF_VERSION}"
DEFAULT_PORT_NAME = "pytorchjob-port"
DEFAULT_CONTAINER = "pytorch"
LOCAL_MASTER_ADDR = "127.0.0.1"
REPLICA_ORDER = ("Master", "Worker")
TERMINAL = ("Succeeded", "Failed")


def replica_specs(job: Obj) -> dict[str, Obj]:
    specs = (job.get("spec") or {}).get("pytorchReplicaSpecs") or {}
    return {rt: specs[rt] for rt in REPLICA_ORDER if rt in specs} | {
        rt: s for rt, s in specs.items() if rt not in REPLICA_ORDER
    }


def declared_port(job: Obj) -> int | None:
    """The master's ``pytorchjob-port`` (the real operator's MASTER_PORT), if its template declares one."""
    master = replica_specs(job).get("Master")
    if master is None:
        return None
    for container in ((master.get("template") or {}).get("spec") or {}).get("containers") or []:
        if container.get("name") == DEFAULT_CONTAINER:
            for port in container.get("ports") or []:
                if port.get("name") == DEFAULT_PORT_NAME:
                    return int(port["containerPort"])
    return None


def _replicas(replica: Obj) -> int:
    value = replica.get("replicas")
    return 1 if value is None else int(value)


def _nproc(job: Obj) -> tuple[str, int]:
    value = str((job.get("spec") or {}).get("nprocPerNode") or "auto")
    return value, int(value) if value.isdigit() else 1


def pod_restart_policy(replica: Obj) -> str:
    policy = str(replica.get("restartPolicy") or "OnFailure")
    return "Never" if policy == "ExitCode" else policy


def pod_name(job: Obj, rtype: str, index: int) -> str:
    return f"{job['metadata']['name']}-{rtype.lower()}-{index}"


def labels_for(job: Obj, rtype: str, index: int) -> dict[str, str]:
    labels = {
        c.KF_LABEL_JOB_NAME: job["metadata"]["name"],
        c.KF_LABEL_OPERATOR_NAME: OPERATOR_NAME,
        c.KF_LABEL_REPLICA_TYPE: rtype.lower(),
        c.KF_LABEL_REPLICA_INDEX: str(index),
    }
    if rtype == "Master":
        labels[c.KF_LABEL_JOB_ROLE] = "master"
    return labels


def desired_pods(job: Obj, master_addr: str, master_port: int) -> list[Obj]:
    """Every pod the job should have, as the training operator builds them."""
    specs = replica_specs(job)
    total = sum(_replicas(s) for s in specs.values())
    nproc_text, nproc = _nproc(job)
    has_master = "Master" in specs
    meta = job["metadata"]
    pods = []
    for rtype, replica in specs.items():
        for index in range(_replicas(replica)):
            template = copy.deepcopy(replica.get("template") or {})
            tmeta = template.get("metadata") or {}
            spec = template.get("spec") or {}
            spec["restartPolicy"] = pod_restart_policy(replica)
            rank = index + 1 if rtype == "Worker" and has_master else index
            env = [
                {"name": "PYTHONUNBUFFERED", "value": "1"},
                {"name": c.ENV_MASTER_PORT, "value": str(master_port)},
                {"name": c.ENV_MASTER_ADDR, "value": master_addr},
                {"name": c.ENV_WORLD_SIZE, "value": str(total * nproc)},
                {"name": c.ENV_RANK, "value": str(rank)},
                {"name": c.ENV_PET_NPROC_PER_NODE, "value": nproc_text},
                {"name": c.ENV_PET_NODE_RANK, "value": str(rank)},
                {"name": c.ENV_PET_NNODES, "value": str(total)},
            ]
            for container in spec.get("containers") or []:
                container["env"] = list(container.get("env") or []) + copy.deepcopy(env)
            pods.append({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name(job, rtype, index),
                    "namespace": meta["namespace"],
                    "labels": {**(tmeta.get("labels") or {}), **labels_for(job, rtype, index)},
                    "annotations": dict(tmeta.get("annotations") or {}),
                    "ownerReferences": [controller_ref(API_VERSION, KIND, job)],
                },
                "spec": spec,
            })  # fmt: skip
    return pods


def set_condition(conditions: list[Obj], type_: str, reason: str, message: str) -> list[Obj]:
    """The training operator's ``UpdateJobConditions``: same type replaced, Running and Restarting replace
    each other, a terminal condition turns Running False; no change when already True for that reason."""
    for cond in conditions:
        if cond.get("type") == type_ and cond.get("status") == "True" and cond.get("reason") == reason:
            return conditions
    stamp = now()
    out = []
    for cond in conditions:
        kind = cond.get("type")
        if kind == type_ or {kind, type_} == {"Running", "Restarting"}:
            continue
        if type_ in TERMINAL and kind == "Running" and cond.get("status") == "True":
            cond = {**cond, "status": "False", "lastUpdateTime": stamp, "lastTransitionTime": stamp}
        out.append(cond)
    out.append({"type": type_, "status": "True", "reason": reason, "message": message,
                "lastUpdateTime": stamp, "lastTransitionTime": stamp})  # fmt: skip
    return out


def terminal(job: Obj) -> str | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in TERMINAL and cond.get("status") == "True":
            return str(cond["type"])
    return None


def _exit_code(pod: Obj) -> int | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated") or {}
        if term.get("exitCode"):
            return int(term["exitCode"])
    return None


def _age(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    then = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return (datetime.datetime.now(tz=datetime.UTC) - then).total_seconds()


class TrainingOperator:
    def __init__(self, api_url: str, master_addr: str = LOCAL_MASTER_ADDR, tick_seconds: float = 0.5) -> None:
        self.api_url = api_url
        self.master_addr = master_addr
        self.tick = tick_seconds
        self._ports: dict[str, int] = {}
        self._recreated: dict[str, int] = {}  # ExitCode re-creations per job uid
        self._said: set[tuple[str, str, str]] = set()
        self.ready = asyncio.Event()

    async def run(self) -> None:
        def informers(api: Api, wake: asyncio.Event) -> tuple[Informer, ...]:
            return (Informer(api, ns_path(c.KF_GROUP, c.KF_VERSION, c.KF_PLURAL), wake),
                    Informer(api, "/api/v1/pods", wake, label_selector=f"{c.KF_LABEL_OPERATOR_NAME}={OPERATOR_NAME}"))  # fmt: skip

        async def one_round(api: Api, informers: Sequence[Informer]) -> None:
            jobs, pods = informers
            by_owner = owned(pods.values(), KIND)

            async def reconcile(job: Obj) -> None:
                await self.reconcile(api, job, by_owner.get(job["metadata"]["uid"], []))

            await reconcile_each(jobs.values(), reconcile, "pytorchjob", logger)

        await run_loop(self.api_url, informers, one_round, ready=self.ready, tick=self.tick)

    def _port(self, job: Obj) -> int:
        uid = job["metadata"]["uid"]
        if uid not in self._ports:
            self._ports[uid] = declared_port(job) or free_port()
        return self._ports[uid]

    async def reconcile(self, api: Api, job: Obj, pods: list[Obj]) -> None:
        meta = job["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        full = f"{ns}/{name}"
        path = ns_path(c.KF_GROUP, c.KF_VERSION, c.KF_PLURAL, ns, name)
        run_policy = (job.get("spec") or {}).get("runPolicy") or {}
        status = dict(job.get("status") or {})
        conditions = list(status.get("conditions") or [])
        events: list[tuple[str, str, str]] = []
        ended = terminal(job)
        if meta.get("deletionTimestamp"):
            return
        if ended:
            await self._clean(api, pods, str(run_policy.get("cleanPodPolicy") or "None"))
            ttl = run_policy.get("ttlSecondsAfterFinished")
            if ttl is not None and _age(
                status.get("completionTime") or status.get("lastReconcileTime")
            ) >= float(ttl):
                await api.delete(path, propagation="Background")
            return
        if not any(cond.get("type") == "Created" for cond in conditions):
            conditions = set_condition(conditions, "Created", f"{KIND}Created", f"{KIND} {full} is created.")
        if run_policy.get("suspend"):
            await self._suspend(api, job, pods, conditions)
            return
        if any(cd.get("type") == "Suspended" and cd.get("status") == "True" for cd in conditions):
            stamp = now()
            conditions = [{**cd, "status": "False", "reason": f"{KIND}Resumed", "message": f"{KIND} {full} is resumed.",
                           "lastUpdateTime": stamp, "lastTransitionTime": stamp} if cd.get("type") == "Suspended" else cd
                          for cd in conditions]  # fmt: skip
            events.append(("Normal", f"{KIND}Resumed", f"{KIND} {full} is resumed."))
        by_name = {p["metadata"]["name"]: p for p in pods}
        specs = replica_specs(job)
        # ExitCode: pods that failed with a retryable code are deleted and created again
        for rtype, replica in specs.items():
            if replica.get("restartPolicy") != "ExitCode":
                continue
            for pod in pods:
                labels = pod["metadata"].get("labels") or {}
                if (
                    labels.get(c.KF_LABEL_REPLICA_TYPE) != rtype.lower()
                    or (pod.get("status") or {}).get("phase") != "Failed"
                ):
                    continue
                code = _exit_code(pod)
                events.append(
                    (
                        "Normal",
                        "ExitedWithCode",
                        f"Pod: {ns}.{pod['metadata']['name']} exited with code {code}",
                    )
                )
                if code is not None and code >= 128:
                    await api.delete(ns_path("", "v1", "pods", ns, pod["metadata"]["name"]))
                    by_name.pop(pod["metadata"]["name"], None)
                    self._recreated[uid] = self._recreated.get(uid, 0) + 1
                    msg = f"{KIND} {full} is restarting because 1 {rtype} replica(s) failed."
                    conditions = set_condition(conditions, "Restarting", f"{KIND}Restarting", msg)
                    events.append(("Warning", f"{KIND}Restarting", msg))
        # create what is missing
        for body in desired_pods(job, self.master_addr, self._port(job)):
            pname = body["metadata"]["name"]
            if pname in by_name:
                continue
            try:
                await api.create(ns_path("", "v1", "pods", ns), body)
                events.append(("Normal", "SuccessfulCreatePod", f"Created pod: {pname}"))
            except ApiStatusError as exc:
                if exc.code != 409:  # 409: the old pod of that name is still going away
                    raise
        # counts and conditions
        replica_statuses: Obj = {}
        failure: str | None = None
        for rtype, replica in specs.items():
            mine = [
                p
                for p in by_name.values()
                if (p["metadata"].get("labels") or {}).get(c.KF_LABEL_REPLICA_TYPE) == rtype.lower()
            ]
            phases = [(p.get("status") or {}).get("phase", "Pending") for p in mine]
            active = sum(1 for ph in phases if ph in ("Pending", "Running"))
            running = phases.count("Running")
            succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
            replica_statuses[rtype] = {
                "active": active, "succeeded": succeeded, "failed": failed,
                "selector": ",".join(f"{k}={v}" for k, v in sorted(labels_for(job, rtype, 0).items())
                                     if k not in (c.KF_LABEL_REPLICA_INDEX, c.KF_LABEL_JOB_ROLE)),
            }  # fmt: skip
            expected = _replicas(replica) - succeeded
            decides = rtype == "Master" or "Master" not in specs
            if decides and running > 0:
                conditions = set_condition(
                    conditions, "Running", f"{KIND}Running", f"{KIND} {full} is running."
                )
            if decides and expected == 0:
                msg = f"{KIND} {full} is successfully completed."
                conditions = set_condition(conditions, "Succeeded", f"{KIND}Succeeded", msg)
                events.append(("Normal", f"{KIND}Succeeded", msg))
            if failed > 0 and failure is None:
                restarting = any(
                    cd.get("type") == "Restarting" and cd.get("status") == "True" for cd in conditions
                )
                if not restarting or replica.get("restartPolicy") != "ExitCode":
                    failure = f"{KIND} {full} has failed because {failed} {rtype} replica(s) failed."
        restarts = self._recreated.get(uid, 0) + sum(
            int(cs.get("restartCount") or 0)
            for p in by_name.values()
            for cs in (p.get("status") or {}).get("containerStatuses") or []
        )
        backoff = run_policy.get("backoffLimit")
        deadline = run_policy.get("activeDeadlineSeconds")
        start = status.get("startTime") or now()
        if failure is None and backoff is not None and restarts > int(backoff):
            failure = f"{KIND} {full} has failed because it has reached the specified backoff limit"
        if failure is None and deadline is not None and _age(start) > float(deadline):
            failure = f"{KIND} {full} has failed because it was active longer than specified deadline"
        if failure is not None and not terminal({"status": {"conditions": conditions}}):
            conditions = set_condition(conditions, "Failed", f"{KIND}Failed", failure)
            events.append(("Warning", f"{KIND}Failed", failure))
            if "backoff limit" in failure or "deadline" in failure:
                await self._clean(api, list(by_name.values()), "All")
        new_status: Obj = {"conditions": conditions, "replicaStatuses": replica_statuses, "startTime": start}
        if terminal({"status": {"conditions": conditions}}):
            new_status["completionTime"] = status.get("completionTime") or now()
        if {k: status.get(k) for k in new_status} != new_status:
            new_status["lastReconcileTime"] = now()
            await api.patch(path + "/status", {"status": new_status})
        for type_, reason, message in events:
            if (uid, reason, message) not in self._said:  # each Event once (they would repeat every pass)
                self._said.add((uid, reason, message))
                await api.event(job, type_, reason, message, component=COMPONENT)

    async def _suspend(self, api: Api, job: Obj, pods: list[Obj], conditions: list[Obj]) -> None:
        """runPolicy.suspend: the active pods deleted, none created, Suspended True, Running False."""
        meta = job["metadata"]
        full = f"{meta['namespace']}/{meta['name']}"
        await self._clean(api, pods, "Running")
        msg = f"{KIND} {full} is suspended."
        conditions = set_condition(conditions, "Suspended", f"{KIND}Suspended", msg)
        stamp = now()
        conditions = [{**cd, "status": "False", "lastUpdateTime": stamp, "lastTransitionTime": stamp}
                      if cd.get("type") == "Running" and cd.get("status") == "True" else cd for cd in conditions]  # fmt: skip
        status = job.get("status") or {}
        if status.get("conditions") != conditions or status.get("startTime") is not None:
            path = ns_path(c.KF_GROUP, c.KF_VERSION, c.KF_PLURAL, meta["namespace"], meta["name"])
            await api.patch(path + "/status", {"status": {"conditions": conditions, "startTime": None,
                                                          "lastReconcileTime": now()}})  # fmt: skip
        if (meta["uid"], f"{KIND}Suspended", msg) not in self._said:
            self._said.add((meta["uid"], f"{KIND}Suspended", msg))
            await api.event(job, "Normal", f"{KIND}Suspended", msg, component=COMPONENT)

    async def _clean(self, api: Api, pods: list[Obj], policy: str) -> None:
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase", "Pending")
            doomed = policy == "All" or (policy == "Running" and phase in ("Pending", "Running"))
            if doomed and not pod["metadata"].get("deletionTimestamp"):
                await api.delete(
                    ns_path("", "v1", "pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
                )
