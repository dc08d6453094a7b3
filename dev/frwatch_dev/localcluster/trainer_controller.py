"""A stand-in for the Kubeflow Trainer v2 controller (``trainer.kubeflow.org/v1alpha1``), after kubeflow/trainer
v2.3.0.

    await TrainerController(api_url).run()     # until cancelled

Every fact below is from trainer v2.3.0 (``pkg/controller/trainjob_controller.go``, ``pkg/runtime/core``,
``pkg/runtime/framework/plugins/{jobset,torch}``, ``pkg/constants/constants.go``,
``manifests/base/runtimes/torch_distributed.yaml``).

A TrainJob names its runtime in ``spec.runtimeRef`` (``kind`` ``ClusterTrainingRuntime``, the default, or
``TrainingRuntime`` in its namespace; ``apiGroup`` ``trainer.kubeflow.org``). The controller turns the
runtime's ``spec.template`` (a JobSet template) into a JobSet of the TrainJob's name and namespace, owned by
the TrainJob (controller), labelled and annotated with the template's metadata. On the replicated Job whose
template carries ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``: ``replicas`` 1, ``parallelism`` =
``completions`` = ``spec.trainer.numNodes`` (else the runtime's ``mlPolicy.numNodes``, else 1); in its
container ``node``: ``spec.trainer.image``, ``command``, ``args``, ``resourcesPerNode`` (over the runtime's
resources) and ``env`` (upserted by name). The torch plugin (``mlPolicy.torch``, and only with a
``spec.trainer``) then upserts ``PET_NNODES``, ``PET_NPROC_PER_NODE`` (``numProcPerNode``; ``auto`` without
GPUs: the CPUs of ``resourcesPerNode``, at least 1), ``PET_NODE_RANK`` (the downward API of the pod's
``batch.kubernetes.io/job-completion-index`` annotation), ``PET_MASTER_ADDR`` =
``<trainjob>-node-0-0.<trainjob>`` and ``PET_MASTER_PORT`` = 29500, and the container port 29500.

Status (``JobSet.Status``): the JobSet's ``Completed`` condition becomes the TrainJob's ``Complete`` and its
``Failed`` the TrainJob's ``Failed``, reason and message kept (``AllJobsCompleted``, ``FailedJobs``,
``ReachedMaxRestarts`` ...); ``jobsStatus`` mirrors ``replicatedJobsStatus``. A runtime kind the controller
does not know: condition ``Failed`` (reason ``TrainingRuntimeNotSupported``, ``unsupported runtime:
<Kind>.<group>``). A runtime that does not exist: no JobSet, a Warning Event ``TrainJobResourcesCreationFailed``
(``TrainJob resources reconciliation failed: not found ClusterTrainingRuntime specified in TrainJob:
clustertrainingruntimes.trainer.kubeflow.org "<name>" not found``; for a TrainingRuntime ``TrainingRuntime
specified in TrainJob is not found: ...``), and it keeps trying (a runtime created later is used).
``spec.managedBy`` other than ``trainer.kubeflow.org/trainjob-controller``: left alone.

Suspend: ``spec.suspend`` is the JobSet's (set when it is made, and changed while either is suspended, as
``Build`` only updates a suspended JobSet), and the TrainJob's condition ``Suspended`` (reason ``Suspended``,
``TrainJob is suspended``; resumed: False, ``Resumed``, ``TrainJob is resumed``).

Local differences: the trainer's validating webhook (which refuses a TrainJob whose runtime does not exist)
is not emulated, so such a TrainJob is stored and shows the controller's Event; ``PET_MASTER_PORT`` is a free
port chosen per TrainJob (29500 would collide between jobs on one host; the container port stays 29500), and
the master's DNS name resolves through the kubelet's stand-in for cluster DNS (``poddns``). Not done:
initializers, ``podTemplateOverrides``/runtime patches, ``activeDeadlineSeconds``, the runtime
snapshot, other ML policies (MPI, JAX, XGBoost ...), Events on the runtime objects.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Sequence
from typing import Any

from frwatch_dev.localcluster import jobset_controller as jsc
from frwatch_dev.localcluster.client import Api, ApiStatusError, Informer, now, ns_path
from frwatch_dev.localcluster.controllers import controller_ref, owned, reconcile_each, run_loop
from frwatch_dev.ports import free_port

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND, PLURAL = "TrainJob", "trainjobs"
CLUSTER_RUNTIME, CLUSTER_RUNTIME_PLURAL = "ClusterTrainingRuntime", "clustertrainingruntimes"
RUNTIME, RUNTIME_PLURAL = "TrainingRuntime", "trainingruntimes"
COMPONENT = "trainjob-controller"
MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"
LABEL_ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
NODE = "node"  # the trainer's replicated Job and container name
CONTAINER_PORT = 29500
ENV_NNODES, ENV_NPROC, ENV_NODE_RANK = "PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK"
ENV_MASTER_ADDR, ENV_MASTER_PORT = "PET_MASTER_ADDR", "PET_MASTER_PORT"
COMPLETION_INDEX_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
CREATION_FAILED = "TrainJobResourcesCreationFailed"
NOT_SUPPORTED = "TrainingRuntimeNotSupported"


def runtime_ref(tj: Obj) -> tuple[str, str, str]:
    """(apiGroup, kind, name) of ``spec.runtimeRef`` with the CRD's defaults."""
    ref = (tj.get("spec") or {}).get("runtimeRef") or {}
    return (
        str(ref.get("apiGroup") or GROUP),
        str(ref.get("kind") or CLUSTER_RUNTIME),
        str(ref.get("name") or ""),
    )


def master_addr(name: str) -> str:
    """The torch plugin's ``PET_MASTER_ADDR``: the first pod of the ``node`` Job, under the JobSet's subdomain."""
    return f"{name}-{NODE}-0-0.{name}"


def _upsert_env(env: list[Obj], items: list[Obj]) -> list[Obj]:
    out = list(env)
    for item in items:
        for i, e in enumerate(out):
            if e.get("name") == item["name"]:
                out[i] = copy.deepcopy(item)
                break
        else:
            out.append(copy.deepcopy(item))
    return out


def _cpus(resources: Obj) -> int:
    """``getNumCPUPerNode``: the cpu request, else the limit, as whole CPUs."""
    value = (resources.get("requests") or {}).get("cpu") or (resources.get("limits") or {}).get("cpu")
    if value is None:
        return 0
    text = str(value)
    return int(text[:-1]) // 1000 if text.endswith("m") else int(float(text))


def _gpus(resources: Obj) -> int:
    for part in ("limits", "requests"):
        for key, value in (resources.get(part) or {}).items():
            if key.endswith("/gpu"):
                return int(value)
    return 0


def build_jobset(tj: Obj, runtime: Obj, master_port: int = CONTAINER_PORT) -> Obj:
    """The JobSet the controller applies for ``tj`` and its runtime object."""
    meta, tspec = tj["metadata"], tj.get("spec") or {}
    rspec = runtime.get("spec") or {}
    template = copy.deepcopy(rspec.get("template") or {})
    spec = template.get("spec") or {}
    trainer = tspec.get("trainer")
    ml_policy = rspec.get("mlPolicy") or {}
    num_nodes = int((trainer or {}).get("numNodes") or ml_policy.get("numNodes") or 1)
    for rjob in spec.get("replicatedJobs") or []:
        jtemplate = rjob.setdefault("template", {})
        if ((jtemplate.get("metadata") or {}).get("labels") or {}).get(LABEL_ANCESTOR) != ANCESTOR_TRAINER:
            continue
        rjob["replicas"] = 1
        jspec = jtemplate.setdefault("spec", {})
        jspec["parallelism"] = jspec["completions"] = num_nodes
        for container in (jspec.setdefault("template", {}).setdefault("spec", {}).get("containers")) or []:
            if container.get("name") != NODE or trainer is None:
                continue
            for key in ("image", "command", "args"):
                if trainer.get(key) is not None:
                    container[key] = copy.deepcopy(trainer[key])
            resources = container.get("resources") or {}
            if trainer.get("resourcesPerNode") is not None:
                resources = {**resources, **copy.deepcopy(trainer["resourcesPerNode"])}
                container["resources"] = resources
            container["env"] = _upsert_env(container.get("env") or [], list(trainer.get("env") or []))
            if "torch" in ml_policy:
                nproc = str(trainer.get("numProcPerNode") or "auto")
                if nproc == "auto" and _gpus(resources) == 0:
                    nproc = str(max(1, _cpus(resources)))
                container["env"] = _upsert_env(container["env"], [
                    {"name": ENV_NNODES, "value": str(num_nodes)},
                    {"name": ENV_NPROC, "value": nproc},
                    {"name": ENV_NODE_RANK, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_PATH}}},
                    {"name": ENV_MASTER_ADDR, "value": master_addr(meta["name"])},
                    {"name": ENV_MASTER_PORT, "value": str(master_port)},
                ])  # fmt: skip
                ports = container.setdefault("ports", [])
                if not any(p.get("containerPort") == CONTAINER_PORT for p in ports):
                    ports.append({"containerPort": CONTAINER_PORT, "protocol": "TCP"})
    if tspec.get("suspend") is not None:
        spec["suspend"] = bool(tspec["suspend"])
    tmeta = template.get("metadata") or {}
    return {
        "apiVersion": jsc.API_VERSION,
        "kind": jsc.KIND,
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": dict(tmeta.get("annotations") or {}),
            "ownerReferences": [controller_ref(API_VERSION, KIND, tj)],
        },
        "spec": spec,
    }  # fmt: skip


def _set(conditions: list[Obj], cond: Obj) -> None:
    """``meta.SetStatusCondition``: one per type; the transition time changes only with the status."""
    for i, old in enumerate(conditions):
        if old.get("type") == cond["type"]:
            if old.get("status") == cond.get("status"):
                cond = {**cond, "lastTransitionTime": old.get("lastTransitionTime")}
            conditions[i] = cond
            return
    conditions.append(cond)


def finished(tj: Obj) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (tj.get("status") or {}).get("conditions") or []
    )


def status_from_jobset(tj: Obj, js: Obj) -> Obj:
    """``JobSet.Status``: the TrainJob status the jobset plugin derives."""
    status = copy.deepcopy(tj.get("status") or {})
    conditions = status.setdefault("conditions", [])
    for js_type, tj_type in ((jsc.COMPLETED, "Complete"), (jsc.FAILED, "Failed")):
        cond = jsc.condition_true(js, js_type)
        if cond is not None:
            _set(conditions, {**cond, "type": tj_type})
    status["jobsStatus"] = [
        {k: s.get(k, 0) for k in ("name", "ready", "succeeded", "failed", "active", "suspended")}
        for s in (js.get("status") or {}).get("replicatedJobsStatus") or []
    ]
    return status


class TrainerController:
    def __init__(self, api_url: str, tick_seconds: float = 0.5, *, local_ports: bool = True) -> None:
        """``local_ports``: a free ``PET_MASTER_PORT`` per TrainJob (else the real 29500)."""
        self.api_url = api_url
        self.tick = tick_seconds
        self.local_ports = local_ports
        self._ports: dict[str, int] = {}
        self._said: set[tuple[str, str]] = set()
        self.ready = asyncio.Event()

    async def run(self) -> None:
        def informers(api: Api, wake: asyncio.Event) -> tuple[Informer, ...]:
            return (Informer(api, ns_path(GROUP, VERSION, PLURAL), wake),
                    Informer(api, ns_path(jsc.GROUP, jsc.VERSION, jsc.PLURAL), wake),
                    Informer(api, ns_path(GROUP, VERSION, CLUSTER_RUNTIME_PLURAL), wake))  # fmt: skip

        async def one_round(api: Api, informers: Sequence[Informer]) -> None:
            trainjobs, jobsets, _runtimes = informers
            by_owner = owned(jobsets.values(), KIND)

            async def reconcile(tj: Obj) -> None:
                mine = by_owner.get(tj["metadata"]["uid"])
                await self.reconcile(api, tj, mine[-1] if mine else None)  # the last listed, were there two

            await reconcile_each(trainjobs.values(), reconcile, "trainjob", logger)

        await run_loop(self.api_url, informers, one_round, ready=self.ready, tick=self.tick)

    async def _event(self, api: Api, tj: Obj, type_: str, reason: str, message: str) -> None:
        key = (tj["metadata"]["uid"], message)
        if key not in self._said:  # the real recorder aggregates repeats into one Event's count
            self._said.add(key)
            await api.event(tj, type_, reason, message, component=COMPONENT)

    async def reconcile(self, api: Api, tj: Obj, js: Obj | None) -> None:
        meta, spec = tj["metadata"], tj.get("spec") or {}
        if meta.get("deletionTimestamp") or spec.get("managedBy") not in (None, "", MANAGED_BY):
            return
        ns, name = meta["namespace"], meta["name"]
        path = ns_path(GROUP, VERSION, PLURAL, ns, name)
        status = copy.deepcopy(tj.get("status") or {})
        group, kind, runtime_name = runtime_ref(tj)
        if group != GROUP or kind not in (CLUSTER_RUNTIME, RUNTIME):
            conditions = status.setdefault("conditions", [])
            _set(conditions, {"type": "Failed", "status": "True", "reason": NOT_SUPPORTED,
                              "message": f"unsupported runtime: {kind}.{group}", "lastTransitionTime": now()})  # fmt: skip
        elif js is None and not finished(tj):
            if kind == CLUSTER_RUNTIME:
                rpath = ns_path(GROUP, VERSION, CLUSTER_RUNTIME_PLURAL, None, runtime_name)
                missing = "not found ClusterTrainingRuntime specified in TrainJob"
            else:
                rpath = ns_path(GROUP, VERSION, RUNTIME_PLURAL, ns, runtime_name)
                missing = "TrainingRuntime specified in TrainJob is not found"
            runtime = await api.get(rpath)
            if runtime is None:
                plural = CLUSTER_RUNTIME_PLURAL if kind == CLUSTER_RUNTIME else RUNTIME_PLURAL
                error = f'{missing}: {plural}.{GROUP} "{runtime_name}" not found'
                await self._event(api, tj, "Warning", CREATION_FAILED,
                                  f"TrainJob resources reconciliation failed: {error}")  # fmt: skip
                return
            port = CONTAINER_PORT
            if self.local_ports:
                port = self._ports.setdefault(meta["uid"], free_port())
            try:
                await api.create(
                    ns_path(jsc.GROUP, jsc.VERSION, jsc.PLURAL, ns), build_jobset(tj, runtime, port)
                )
            except ApiStatusError as exc:
                if exc.code != 409:
                    await self._event(api, tj, "Warning", CREATION_FAILED,
                                      f"TrainJob resources reconciliation failed: {exc}")  # fmt: skip
            return
        elif js is not None:
            status = status_from_jobset(tj, js)
            suspend = bool(spec.get("suspend"))
            if (suspend or (js.get("spec") or {}).get("suspend")) and bool((js.get("spec") or {}).get("suspend")) != suspend:
                await api.patch(ns_path(jsc.GROUP, jsc.VERSION, jsc.PLURAL, ns, name), {"spec": {"suspend": suspend}})
        conditions = status.setdefault("conditions", [])
        suspended_now = any(x.get("type") == "Suspended" and x.get("status") == "True" for x in conditions)
        if spec.get("suspend"):
            _set(conditions, {"type": "Suspended", "status": "True", "reason": "Suspended",
                              "message": "TrainJob is suspended", "lastTransitionTime": now()})  # fmt: skip
        elif suspended_now:
            _set(conditions, {"type": "Suspended", "status": "False", "reason": "Resumed",
                              "message": "TrainJob is resumed", "lastTransitionTime": now()})  # fmt: skip
        if not conditions:
            del status["conditions"]
        old = tj.get("status") or {}
        if {k: old.get(k) for k in status} != status:
            await api.patch(path + "/status", {"status": status})
