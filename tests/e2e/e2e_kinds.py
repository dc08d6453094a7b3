"""The end-to-end tests' TrainJob and JobSet: submitted, read and watched through the Kubernetes API only, so the
same tests run on the local cluster and on a real one with Kubeflow Trainer v2 / JobSet installed.

Both run the failing training script under real torchrun (``TORCHRUN_WORKLOAD``), ``pods`` pods of ``nproc``
ranks: the TrainJob through the ``torch-distributed`` ClusterTrainingRuntime (the Trainer sets the ``PET_*``
env), the JobSet with that env written in its template as a JobSet user writes it."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from e2e_helpers import Target, wait_for
from kubernetes import client, watch

from frwatch_dev.ports import free_port
from frwatch_dev.workloads import TORCHRUN_WORKLOAD
from frwatch_operator import constants as c

Obj = dict[str, Any]
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_PATH = f"metadata.annotations['{COMPLETION_INDEX}']"
#: the kind's condition types that end it
FINISHED = {"TrainJob": ("Complete", "Failed"), "JobSet": ("Completed", "Failed")}


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str
    version: str
    plural: str


TRAINJOB = Kind("TrainJob", c.TRAINER_GROUP, c.TRAINER_VERSION, c.TRAINJOB_PLURAL)
JOBSET = Kind("JobSet", c.JOBSET_GROUP, c.JOBSET_VERSION, c.JOBSET_PLURAL)
KINDS = {"trainjob": TRAINJOB, "jobset": JOBSET}


def script(scenario: str, *extra: str) -> list[str]:
    return [*TORCHRUN_WORKLOAD, "--scenario", scenario, *extra]


def torchrun(command: list[str]) -> list[str]:
    """``python -m X ...`` under torchrun."""
    assert command[:2] == ["python", "-m"], command
    return ["python", "-m", "torch.distributed.run", *command[1:]]


@dataclass
class KindJobs:
    """Jobs of one kind on a :class:`Target`."""

    target: Target
    kind: Kind
    created: list[str] = field(default_factory=list)

    def body(self, name: str, command: list[str], *, pods: int, nproc: int, capture: bool,
             max_restarts: int | None) -> Obj:  # fmt: skip
        meta: Obj = {"name": name, "namespace": self.target.namespace}
        if capture:
            meta["annotations"] = {c.ANN_CAPTURE: c.CAPTURE_ENABLED}
        if self.kind is TRAINJOB:
            assert max_restarts is None, "a TrainJob's failure policy is its runtime's"
            trainer = {
                "numNodes": pods,
                "numProcPerNode": nproc,
                "image": self.target.image,
                "command": command,
            }
            return {"apiVersion": f"{c.TRAINER_GROUP}/{c.TRAINER_VERSION}", "kind": "TrainJob", "metadata": meta,
                    "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}}  # fmt: skip
        env = [
            {"name": c.ENV_PET_NNODES, "value": str(pods)},
            {"name": c.ENV_PET_NPROC_PER_NODE, "value": str(nproc)},
            {"name": c.ENV_PET_NODE_RANK, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_PATH}}},
            {
                "name": "PET_MASTER_ADDR",
                "value": f"{name}-workers-0-0.{name}",
            },  # the first pod, by its DNS name
            {"name": "PET_MASTER_PORT", "value": str(free_port())},  # any port; on one host, a free one
        ]
        spec: Obj = {"replicatedJobs": [{
            "name": "workers",
            "replicas": 1,
            "template": {"spec": {
                "parallelism": pods, "completions": pods, "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "trainer", "image": self.target.image, "command": command, "env": env}]}},
            }},
        }]}  # fmt: skip
        if max_restarts is not None:
            spec["failurePolicy"] = {"maxRestarts": max_restarts}
        return {
            "apiVersion": f"{c.JOBSET_GROUP}/{c.JOBSET_VERSION}",
            "kind": "JobSet",
            "metadata": meta,
            "spec": spec,
        }

    def submit(self, command: list[str], *, pods: int = 2, nproc: int = 2, capture: bool = True,
               max_restarts: int | None = None, prefix: str = "e2e") -> str:  # fmt: skip
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        body = self.body(name, command, pods=pods, nproc=nproc, capture=capture, max_restarts=max_restarts)
        self.create(body)
        return name

    def create(self, body: Obj) -> None:
        k = self.kind
        self.created.append(body["metadata"]["name"])
        self.target.custom.create_namespaced_custom_object(
            k.group, k.version, self.target.namespace, k.plural, body
        )

    def cleanup(self) -> None:
        """Delete the jobs this made (a TrainJob's failing pods would restart in place for minutes)."""
        k = self.kind
        for name in self.created:
            try:
                self.target.custom.delete_namespaced_custom_object(
                    k.group, k.version, self.target.namespace, k.plural, name, propagation_policy="Background"
                )
            except client.ApiException as exc:
                if exc.status != 404:
                    raise

    def get(self, name: str) -> Obj:
        k = self.kind
        return self.target.custom.get_namespaced_custom_object(  # type: ignore[no-any-return]
            k.group, k.version, self.target.namespace, k.plural, name
        )

    def annotations(self, name: str) -> dict[str, str]:
        return dict(self.get(name)["metadata"].get("annotations") or {})

    def true_conditions(self, name: str) -> dict[str, Obj]:
        conds = (self.get(name).get("status") or {}).get("conditions") or []
        return {x["type"]: x for x in conds if x.get("status") == "True"}

    def wait_verdict(self, name: str, timeout: float = 150) -> dict[str, str]:
        try:
            return wait_for(  # type: ignore[no-any-return]
                lambda: (a := self.annotations(name)).get(c.ANN_VERDICT) and a,
                timeout,
                f"a verdict on {name}",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.target.diagnostics()}") from None

    def wait_finished(self, name: str, timeout: float = 150) -> dict[str, Obj]:
        ends = FINISHED[self.kind.kind]
        return wait_for(  # type: ignore[no-any-return]
            lambda: (x := self.true_conditions(name)) and set(ends) & set(x) and x, timeout, f"{name} to end"
        )

    def pods(self, name: str) -> list[Obj]:
        """The job's pods now (a TrainJob's JobSet has the TrainJob's name)."""
        items = self.target.core.list_namespaced_pod(
            self.target.namespace, label_selector=f"{c.LABEL_JOBSET_NAME}={name}"
        ).items
        return [self.target.api.sanitize_for_serialization(p) for p in items]

    def events(self, name: str, reason: str) -> list[str]:
        """The messages of the Events of ``reason`` on the object of this kind named ``name`` (a TrainJob and
        its JobSet share the name: the kind tells them apart)."""
        items = self.target.core.list_namespaced_event(
            self.target.namespace, field_selector=f"involvedObject.name={name}"
        ).items
        return [e.message for e in items if e.reason == reason and e.involved_object.kind == self.kind.kind]

    def incidents(self, name: str) -> list[Obj]:
        return self.target.incidents(name)

    def reported_incidents(self, name: str, count: int, timeout: float = 60) -> list[Obj]:
        """The job's ``count`` Incidents once each is Reported, by attempt."""

        def reported() -> list[Obj] | None:
            found = self.incidents(name)
            done = [i for i in found if (i.get("status") or {}).get("phase") == "Reported"]
            return sorted(done, key=lambda i: str(i["spec"]["attempt"])) if len(done) >= count else None

        return wait_for(reported, timeout, f"{count} Reported Incident(s) of {name}")  # type: ignore[no-any-return]


@dataclass
class PodWatch:
    """Every pod matching ``selector`` as last seen (a watch sees each pod, even one deleted soon after, as a Job
    that fails deletes its running pods): name -> the pod. Started before the job is submitted."""

    target: Target
    selector: str
    seen: dict[str, Obj] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(30), "the pod watch did not start"

    def _run(self) -> None:
        core = self.target.core
        listed = core.list_namespaced_pod(self.target.namespace, label_selector=self.selector)
        for pod in listed.items:
            self._add(pod)
        self._ready.set()
        w = watch.Watch()
        version = listed.metadata.resource_version
        while not self._stop.is_set():
            for ev in w.stream(core.list_namespaced_pod, self.target.namespace, label_selector=self.selector,
                               resource_version=version, timeout_seconds=5):  # fmt: skip
                self._add(ev["object"])
                version = ev["object"].metadata.resource_version
                if self._stop.is_set():
                    break

    def _add(self, pod: Any) -> None:
        obj = self.target.api.sanitize_for_serialization(pod)
        self.seen[obj["metadata"]["name"]] = obj

    def of_job(self, name: str) -> dict[str, Obj]:
        """The pods of the JobSet (or the TrainJob's JobSet) ``name``."""
        return {
            n: p for n, p in self.seen.items() if p["metadata"]["labels"].get(c.LABEL_JOBSET_NAME) == name
        }

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)
