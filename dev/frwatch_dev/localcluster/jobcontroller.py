"""A stand-in for the Job controller of kube-controller-manager: ``batch/v1`` Jobs become pods.

    await JobController(api_url).run()       # until cancelled

For each unfinished Job it creates pods from ``spec.template`` (``generateName: <job>-``, the labels
``batch.kubernetes.io/job-name``/``controller-uid`` and their legacy forms, an owner reference to the
Job, so deleting the Job deletes its pods), ``parallelism`` at a time until ``completions`` pods
succeeded (``completionMode: Indexed``: one pod per index, the annotation and label
``batch.kubernetes.io/job-completion-index`` and ``JOB_COMPLETION_INDEX`` in every container), and
keeps ``status`` (``startTime``, ``active``, ``ready``, ``succeeded``, ``failed``, ``completionTime``,
conditions ``SuccessCriteriaMet`` + ``Complete``, or ``FailureTarget`` + ``Failed`` with reason
``BackoffLimitExceeded`` (more failed pods, or container restarts, than ``backoffLimit``, default 6)
or ``DeadlineExceeded`` (``activeDeadlineSeconds``), when it also deletes the pods still running).
``completedIndexes`` is written as the real controller writes it (``0-2,5``; two neighbours ``0,1``).

``backoffLimitPerIndex`` (Indexed Jobs, as the real controller since Kubernetes 1.33): each index is retried
on its own; a pod carries ``batch.kubernetes.io/job-index-failure-count`` (failures of its index so far); an
index that failed more than ``backoffLimitPerIndex`` times is listed in ``status.failedIndexes`` and gets no
more pods while the others run on; once every index succeeded or failed the Job is ``Failed`` with reason
``FailedIndexes`` if any failed, and at once with ``MaxFailedIndexesExceeded`` when more than
``maxFailedIndexes`` did. ``backoffLimit`` then defaults to 2147483647 and still bounds the failed pods of
the whole Job.
``ttlSecondsAfterFinished`` deletes a finished Job. The kubelet runs the pods (and fills each
container's ``state.terminated.message`` from its ``terminationMessagePath``).

``suspend: true`` deletes the running pods, creates none, clears ``startTime`` and sets ``Suspended``
(``JobSuspended``, Event ``Suspended``); unsuspended, ``Suspended`` turns False (``JobResumed``, Event
``Resumed``) and pods are made again.

Not done: ``podFailurePolicy``, ``successPolicy``, the
exponential delay between retries (one second here), pod-tracking finalizers.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import logging
from collections.abc import Sequence
from typing import Any

from frwatch_dev.localcluster.client import Api, Informer, now, ns_path
from frwatch_dev.localcluster.controllers import controller_ref, owned, reconcile_each, run_loop

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
COMPONENT = "job-controller"
LABEL_JOB_NAME = "batch.kubernetes.io/job-name"
LABEL_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
LABEL_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
ANN_INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
MAX_INT32 = 2147483647
ENV_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
RETRY_DELAY_SECONDS = 1.0


def _parse_time(stamp: str) -> datetime.datetime:
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)


def _age(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    return (datetime.datetime.now(tz=datetime.UTC) - _parse_time(stamp)).total_seconds()


def finished(job: Obj) -> str | None:
    """ "Complete" or "Failed" when the Job has that condition True, else None."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def pod_for(job: Obj, index: int | None, failures: int | None = None) -> Obj:
    """The pod the Job controller creates (``index`` for an Indexed Job; ``failures``: its index's failed
    pods so far, with ``backoffLimitPerIndex``)."""
    meta = job["metadata"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    tmeta = template.get("metadata") or {}
    labels = {
        **(tmeta.get("labels") or {}),
        LABEL_CONTROLLER_UID: meta["uid"], LABEL_JOB_NAME: meta["name"],
        "controller-uid": meta["uid"], "job-name": meta["name"],
    }  # fmt: skip
    annotations = dict(tmeta.get("annotations") or {})
    spec = template.get("spec") or {}
    prefix = f"{meta['name']}-"
    if index is not None:
        labels[LABEL_COMPLETION_INDEX] = str(index)
        annotations[LABEL_COMPLETION_INDEX] = str(index)
        if failures is not None:
            annotations[ANN_INDEX_FAILURE_COUNT] = str(failures)
        prefix = f"{meta['name']}-{index}-"
        spec.setdefault("hostname", f"{meta['name']}-{index}")
        for c in spec.get("containers") or []:
            env = c.setdefault("env", [])
            if not any(e.get("name") == ENV_COMPLETION_INDEX for e in env):
                env.insert(0, {"name": ENV_COMPLETION_INDEX, "valueFrom": {"fieldRef": {
                    "fieldPath": f"metadata.annotations['{LABEL_COMPLETION_INDEX}']"}}})  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": prefix,
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [controller_ref("batch/v1", "Job", job)],
        },
        "spec": spec,
    }


def _restarts(pod: Obj) -> int:
    return sum(
        int(cs.get("restartCount") or 0) for cs in (pod.get("status") or {}).get("containerStatuses") or []
    )


class JobController:
    def __init__(self, api_url: str, tick_seconds: float = 0.5) -> None:
        self.api_url = api_url
        self.tick = tick_seconds
        self._last_create: dict[str, float] = {}
        self._expected: dict[str, dict[str, float]] = {}
        self.ready = asyncio.Event()

    async def run(self) -> None:
        def informers(api: Api, wake: asyncio.Event) -> tuple[Informer, ...]:
            return (Informer(api, "/apis/batch/v1/jobs", wake),
                    Informer(api, "/api/v1/pods", wake, label_selector=LABEL_JOB_NAME))  # fmt: skip

        async def one_round(api: Api, informers: Sequence[Informer]) -> None:
            jobs, pods = informers
            by_owner = owned(pods.values(), "Job")

            async def reconcile(job: Obj) -> None:
                await self.reconcile(api, job, by_owner.get(job["metadata"]["uid"], []))

            await reconcile_each(jobs.values(), reconcile, "job", logger)

        await run_loop(self.api_url, informers, one_round, ready=self.ready, tick=self.tick)

    async def reconcile(self, api: Api, job: Obj, pods: list[Obj]) -> None:
        meta, spec = job["metadata"], job.get("spec") or {}
        status = dict(job.get("status") or {})
        path = ns_path("batch", "v1", "jobs", meta["namespace"], meta["name"])
        done = finished(job)
        if done:
            ttl = spec.get("ttlSecondsAfterFinished")
            if ttl is not None and _age(status.get("completionTime") or _last_transition(job)) >= float(ttl):
                await api.delete(path, propagation="Background")
            return
        if meta.get("deletionTimestamp"):
            return
        if spec.get("suspend") or _suspended(job):
            if await self._suspension(api, job, pods, path, status):
                return
            status = {**status, "conditions": _resumed(status), "startTime": None}
        phases = [(p.get("status") or {}).get("phase", "Pending") for p in pods]
        live = [p for p, ph in zip(pods, phases, strict=True) if ph not in ("Succeeded", "Failed")]
        succeeded = [p for p, ph in zip(pods, phases, strict=True) if ph == "Succeeded"]
        failed_count = phases.count("Failed") + sum(_restarts(p) for p in pods)
        completions = _int(spec.get("completions"), 1)
        parallelism = _int(spec.get("parallelism"), 1)
        indexed = spec.get("completionMode") == "Indexed"
        per_index = _per_index(spec) if indexed else None
        backoff_limit = _int(spec.get("backoffLimit"), 6 if per_index is None else MAX_INT32)
        failed_idx = _failed_indexes(pods, per_index) if per_index is not None else set()
        start_time = status.get("startTime") or now()
        new_status: Obj = {
            "startTime": start_time,
            "active": len(live),
            "ready": sum(1 for p in live if _ready(p)),
            "succeeded": max(len(succeeded), int(status.get("succeeded") or 0)),
            "failed": max(failed_count, int(status.get("failed") or 0)),
            "terminating": 0,
            "uncountedTerminatedPods": {},
        }
        if indexed:
            done_idx = sorted({int(p["metadata"]["labels"][LABEL_COMPLETION_INDEX]) for p in succeeded})
            new_status["completedIndexes"] = _ranges(done_idx)
            if per_index is not None:
                new_status["failedIndexes"] = _ranges(sorted(failed_idx - set(done_idx)))
        conditions = list(status.get("conditions") or [])
        outcome = None
        deadline = spec.get("activeDeadlineSeconds")
        if new_status["succeeded"] >= completions and (
            not indexed or len(_index_set(succeeded)) >= completions
        ):
            outcome = ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
        elif new_status["failed"] > backoff_limit:
            outcome = ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif per_index is not None and len(failed_idx) > _int(spec.get("maxFailedIndexes"), MAX_INT32):
            outcome = ("Failed", "MaxFailedIndexesExceeded",
                       "Job has exceeded the specified maximal number of failed indexes")  # fmt: skip
        elif failed_idx and len(failed_idx | _index_set(succeeded)) >= completions:
            outcome = ("Failed", "FailedIndexes", "Job has failed indexes")
        elif deadline is not None and _age(start_time) > float(deadline):
            outcome = ("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
        if outcome is not None:
            kind, reason, message = outcome
            first = "SuccessCriteriaMet" if kind == "Complete" else "FailureTarget"
            stamp = now()
            conditions += [
                {"type": t, "status": "True", "reason": reason, "message": message,
                 "lastProbeTime": stamp, "lastTransitionTime": stamp}
                for t in (first, kind)
            ]  # fmt: skip
            for pod in live:
                await api.delete(ns_path("", "v1", "pods", meta["namespace"], pod["metadata"]["name"]))
            new_status["active"] = 0
            new_status["ready"] = 0
            if kind == "Complete":
                new_status["completionTime"] = stamp
        new_status["conditions"] = conditions
        if outcome is None:
            await self._create_missing(
                api, job, pods, live, succeeded, completions, parallelism, indexed, per_index, failed_idx
            )
        if {k: status.get(k) for k in new_status} != new_status:
            await api.patch(path + "/status", {"status": new_status})
        if outcome is not None:
            type_ = "Normal" if outcome[0] == "Complete" else "Warning"
            await api.event(job, type_, "Completed" if outcome[0] == "Complete" else outcome[1], outcome[2],
                            component=COMPONENT)  # fmt: skip

    async def _suspension(self, api: Api, job: Obj, pods: list[Obj], path: str, status: Obj) -> bool:
        """A suspended Job: its running pods deleted, its status so. False when it was resumed (the caller
        goes on with ``Suspended`` False)."""
        meta = job["metadata"]
        if not (job.get("spec") or {}).get("suspend"):
            await api.event(job, "Normal", "Resumed", "Job resumed", component=COMPONENT)
            return False
        for pod in pods:
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                await api.delete(ns_path("", "v1", "pods", meta["namespace"], pod["metadata"]["name"]))
        if _suspended(job):
            return True
        stamp = now()
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Suspended"] + [
            {"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended",
             "lastProbeTime": stamp, "lastTransitionTime": stamp}
        ]  # fmt: skip
        await api.patch(path + "/status", {"status": {"conditions": conditions, "active": 0, "ready": 0,
                                                      "startTime": None}})  # fmt: skip
        await api.event(job, "Normal", "Suspended", "Job suspended", component=COMPONENT)
        return True

    async def _create_missing(
        self, api: Api, job: Obj, pods: list[Obj], live: list[Obj], succeeded: list[Obj], completions: int,
        parallelism: int,
        indexed: bool,
        per_index: int | None = None,
        failed_idx: set[int] | None = None,
    ) -> None:  # fmt: skip
        uid = job["metadata"]["uid"]
        loop = asyncio.get_running_loop()
        # expectations, as the real controller keeps them: pods it created that its cache has not shown yet
        seen = {p["metadata"]["name"] for p in pods}
        expected = {
            n: t for n, t in self._expected.get(uid, {}).items() if n not in seen and loop.time() - t < 10
        }
        self._expected[uid] = expected
        if expected or loop.time() - self._last_create.get(uid, -1e9) < RETRY_DELAY_SECONDS:
            return
        if indexed:
            taken = _index_set(live) | _index_set(succeeded) | (failed_idx or set())
            wanted: list[int | None] = [i for i in range(completions) if i not in taken]
        else:
            wanted = [None] * (completions - len(succeeded) - len(live))
        room = parallelism - len(live)
        for index in wanted[: max(room, 0)]:
            failures = None if per_index is None or index is None else _index_failures(pods, index)
            created = await api.create(
                ns_path("", "v1", "pods", job["metadata"]["namespace"]), pod_for(job, index, failures)
            )
            self._last_create[uid] = loop.time()
            expected[created["metadata"]["name"]] = loop.time()
            await api.event(job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}",
                            component=COMPONENT)  # fmt: skip


def _suspended(job: Obj) -> bool:
    return any(
        c.get("type") == "Suspended" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _resumed(status: Obj) -> list[Obj]:
    stamp = now()
    return [
        {**c, "status": "False", "reason": "JobResumed", "message": "Job resumed", "lastProbeTime": stamp,
         "lastTransitionTime": stamp} if c.get("type") == "Suspended" else c
        for c in status.get("conditions") or []
    ]  # fmt: skip


def _int(value: Any, default: int) -> int:
    return default if value is None else int(value)


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _index_set(pods: list[Obj]) -> set[int]:
    out = set()
    for p in pods:
        value = (p["metadata"].get("labels") or {}).get(LABEL_COMPLETION_INDEX)
        if value is not None and value.isdigit():
            out.add(int(value))
    return out


def _ranges(indexes: list[int]) -> str:
    """``[0,1,2,5]`` -> ``"0-2,5"``, ``[0,1]`` -> ``"0,1"`` (``status.completedIndexes``/``failedIndexes``,
    as the real controller writes them: a run of two is two numbers, of three or more a span)."""
    spans: list[list[int]] = []
    for i in sorted(set(indexes)):
        if spans and spans[-1][1] == i - 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ",".join(
        str(a) if a == b else f"{a},{b}" if b == a + 1 else f"{a}-{b}" for a, b in spans
    )


def _per_index(spec: Obj) -> int | None:
    value = spec.get("backoffLimitPerIndex")
    return None if value is None else int(value)


def _pod_index(pod: Obj) -> int | None:
    value = (pod["metadata"].get("labels") or {}).get(LABEL_COMPLETION_INDEX)
    return int(value) if value is not None and value.isdigit() else None


def _index_failures(pods: list[Obj], index: int) -> int:
    """Failed pods of ``index`` (restarts of its containers count too, as for ``backoffLimit``)."""
    return sum(
        (1 if (p.get("status") or {}).get("phase") == "Failed" else 0) + _restarts(p)
        for p in pods
        if _pod_index(p) == index
    )


def _failed_indexes(pods: list[Obj], per_index: int) -> set[int]:
    """Indexes whose pods failed more than ``backoffLimitPerIndex`` times (and none succeeded)."""
    done = {_pod_index(p) for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"}
    indexes = {i for p in pods if (i := _pod_index(p)) is not None and i not in done}
    return {i for i in indexes if _index_failures(pods, i) > per_index}


def _last_transition(job: Obj) -> str | None:
    conds = (job.get("status") or {}).get("conditions") or []
    return str(conds[-1].get("lastTransitionTime")) if conds else None
