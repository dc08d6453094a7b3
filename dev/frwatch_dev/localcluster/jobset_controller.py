"""A stand-in for the JobSet controller (``jobset.x-k8s.io/v1alpha2``), after kubernetes-sigs/jobset v0.12.0.

    await JobSetController(api_url).run()     # until cancelled

Every fact below is from jobset v0.12.0 (``pkg/controllers/jobset_controller.go``, ``failure_policy.go``,
``success_policy.go``, ``pkg/constants/constants.go``, ``api/jobset/v1alpha2/jobset_types.go``,
``pkg/webhooks/jobset_webhook.go``).

Child Jobs (``constructJob``): one per ``replicatedJobs[].replicas``, named ``<jobset>-<replicatedJob>-<i>``,
owned by the JobSet (controller), made by the local Job controller (``jobcontroller.py``). The Job and its
pod template get the labels and annotations ``jobset.sigs.k8s.io/jobset-name``, ``jobset-uid``,
``replicatedjob-name``, ``restart-attempt`` (= ``status.restarts``), ``replicatedjob-replicas``,
``global-replicas``, ``job-index``, ``job-key`` (sha1 of ``<ns>/<job name>``), ``job-global-index``,
``group-name``/``group-replicas``/``job-group-index`` (group ``default``); with DNS hostnames on (the
default) the pods' ``subdomain`` is the JobSet name (or ``network.subdomain``) and a headless Service of
that name is created. The pod hostname is ``<job>-<completion index>``, set by the Job controller.

The webhook's defaults (``jobSetWebhook.Default``; applied at admission here too, :func:`install_jobset_webhook`):
``successPolicy {operator: All}``, ``startupPolicy {startupPolicyOrder: AnyOrder}``, each replicated Job's
``completionMode: Indexed`` and pod ``restartPolicy: OnFailure`` when unset, ``network.enableDNSHostnames``
and ``publishNotReadyAddresses`` true, failure policy rules named ``failurePolicyRule<i>``.

Failures (``executeFailurePolicy``): without ``failurePolicy``, the first failed child Job fails the JobSet
(condition ``Failed``, reason ``FailedJobs``, ``jobset failed due to one or more job failures (first failed
job: <job>)``). With one, the first rule that matches (``onJobFailureReasons``, ``targetReplicatedJobs``) gives
the action, else ``RestartJobSet``: ``FailJobSet`` fails it (reason ``FailJobSetFailurePolicyAction``);
``RestartJobSet`` fails it with ``ReachedMaxRestarts`` once ``status.restartsCountTowardsMax`` reached
``maxRestarts``, else bumps ``status.restarts`` and ``restartsCountTowardsMax``, sets ``RestartingJobSet``
True (reason ``DefaultFailurePolicy`` or ``FailurePolicy_<rule>``) and posts a Warning
``RestartJobSetFailurePolicyAction``; ``RestartJobSetAndIgnoreMaxRestarts`` bumps ``restarts`` only. A restart
is ``Recreate``: the next pass deletes every child Job whose ``restart-attempt`` is below ``status.restarts``
(its pods go with it) and creates them again with the new attempt. ``RestartingJobSet`` turns False
(``JobsReady``) once every Job is ready again, or (``JobSetFailed``) when the JobSet fails.

Success (``executeSuccessPolicy``): ``All`` (every Job of the target replicated Jobs, default all) or ``Any``
succeeded -> ``Completed`` (``AllJobsCompleted``, ``jobset completed successfully``), ``terminalState``.
When finished, the active child Jobs are deleted; ``ttlSecondsAfterFinished`` deletes the JobSet.
``status.replicatedJobsStatus``: per replicated Job the ready/succeeded/failed/active/suspended Job counts.
Conditions follow ``updateCondition`` (one per type; Events for each change, as the real one posts them).

Suspend (``suspendJobs``/``resumeJobsIfNecessary``): ``spec.suspend`` suspends every active child Job (new ones
are made suspended) and sets ``Suspended`` (``SuspendedJobs``, ``jobset is suspended``); unsuspended, the Jobs
are resumed and ``Suspended`` turns False (``ResumeJobs``, ``jobset is resumed``). ``startupPolicy: InOrder``
(``reconcileReplicatedJobs``): the Jobs of each replicated Job are made only once every Job of the ones before
started (ready, succeeded or failed), with ``StartupPolicyInProgress`` (``InOrderStartupPolicyInProgress``)
until all did, then ``StartupPolicyCompleted`` (``InOrderStartupPolicyCompleted``); the two exclude each other.

Not done: ``dependsOn``,
``coordinator``, ``RestartJob`` actions (feature gated), ``BlockingRecreate``/``InPlaceRestart``, exclusive
placement, volume claim policies, ``managedBy``. ``onJobFailureMessagePatterns`` (v0.10.0+) is matched as
jobset's ``ruleIsApplicable`` does (:func:`message_matches`), with Python's ``re`` for RE2.

Over 400 lines on purpose: the child Job builder, the webhook's defaults, the conditions and the failure and
success policies are one controller's rules, read together as the real ``jobset_controller.go`` holds them.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import re
from collections.abc import Sequence
from typing import Any

from frwatch_dev.localcluster.apiserver import ApiServerHandle
from frwatch_dev.localcluster.client import Api, ApiStatusError, Informer, now, ns_path
from frwatch_dev.localcluster.controllers import controller_ref, owned, reconcile_each, run_loop
from frwatch_dev.localcluster.jobcontroller import _age, finished

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
GROUP, VERSION, PLURAL, KIND = "jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"
API_VERSION = f"{GROUP}/{VERSION}"
COMPONENT = "jobset"
PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME = PREFIX + "jobset-name"
JOBSET_UID = PREFIX + "jobset-uid"
REPLICATED_JOB_NAME = PREFIX + "replicatedjob-name"
REPLICATED_JOB_REPLICAS = PREFIX + "replicatedjob-replicas"
GLOBAL_REPLICAS = PREFIX + "global-replicas"
JOB_INDEX = PREFIX + "job-index"
JOB_GLOBAL_INDEX = PREFIX + "job-global-index"
JOB_KEY = PREFIX + "job-key"
RESTART_ATTEMPT = PREFIX + "restart-attempt"
GROUP_NAME = PREFIX + "group-name"
GROUP_REPLICAS = PREFIX + "group-replicas"
JOB_GROUP_INDEX = PREFIX + "job-group-index"
DEFAULT_GROUP = "default"
# condition types, reasons and messages (api/jobset/v1alpha2/jobset_types.go, pkg/constants/constants.go)
COMPLETED, FAILED, RESTARTING, SUSPENDED = "Completed", "Failed", "RestartingJobSet", "Suspended"
IN_PROGRESS, STARTED = "StartupPolicyInProgress", "StartupPolicyCompleted"
SUSPENDED_JOBS = ("SuspendedJobs", "jobset is suspended")
RESUMED_JOBS = ("ResumeJobs", "jobset is resumed")
IN_ORDER_PROGRESS = ("InOrderStartupPolicyInProgress", "in order startup policy is in progress")
IN_ORDER_DONE = ("InOrderStartupPolicyCompleted", "in order startup policy has completed")
FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
REACHED_MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
FAIL_ACTION = ("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action")
RESTART_ACTION = ("RestartJobSetFailurePolicyAction", "applying RestartJobSet failure policy action")
RESTART_IGNORE_ACTION = (
    "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
    "applying RestartJobSetAndIgnoreMaxRestarts failure policy action",
)
ALL_COMPLETED = ("AllJobsCompleted", "jobset completed successfully")


# -- the webhook's defaults ------------------------------------------------------------------------------


def apply_defaults(js: Obj) -> Obj:
    """``jobSetWebhook.Default`` (v0.12.0) on a copy of ``js``."""
    js = copy.deepcopy(js)
    spec = js.setdefault("spec", {})
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    for rjob in spec.get("replicatedJobs") or []:
        jspec = rjob.setdefault("template", {}).setdefault("spec", {})
        jspec.setdefault("completionMode", "Indexed")
        pspec = jspec.setdefault("template", {}).setdefault("spec", {})
        if not pspec.get("restartPolicy"):
            pspec["restartPolicy"] = "OnFailure"
        rjob.setdefault("replicas", 1)  # the CRD's default (+kubebuilder:default=1)
        rjob.setdefault("groupName", DEFAULT_GROUP)  # the CRD's default (+kubebuilder:default=default)
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    policy = spec.get("failurePolicy")
    if policy is not None:
        policy.setdefault("maxRestarts", 0)
        for i, rule in enumerate(policy.get("rules") or []):
            if not rule.get("name"):
                rule["name"] = f"failurePolicyRule{i}"
    return js


def install_jobset_webhook(handle: ApiServerHandle) -> None:
    """The JobSet mutating webhook's defaults on every JobSet CREATE in the emulator."""

    async def hook(rt: Any, namespace: str, body: Obj, dry_run: bool) -> tuple[Obj, list[str]]:
        if (rt.group, rt.plural) != (GROUP, PLURAL):
            return body, []
        return apply_defaults(body), []

    async def install() -> None:
        handle.server.admission_hooks.append(hook)

    asyncio.run_coroutine_threadsafe(install(), handle.loop).result(timeout=10)


# -- child Jobs ------------------------------------------------------------------------------------------


def replicated_jobs(js: Obj) -> list[Obj]:
    return list((js.get("spec") or {}).get("replicatedJobs") or [])


def _replicas(rjob: Obj) -> int:
    return int(rjob.get("replicas", 1))


def child_job_name(js_name: str, rjob_name: str, index: int) -> str:
    """``placement.GenJobName``."""
    return f"{js_name}-{rjob_name}-{index}"


def job_key(namespace: str, job_name: str) -> str:
    return hashlib.sha1(f"{namespace}/{job_name}".encode()).hexdigest()  # noqa: S324 - the real key is sha1


def global_replicas(js: Obj) -> int:
    return sum(_replicas(r) for r in replicated_jobs(js))


def global_index(js: Obj, rjob_name: str, index: int) -> int:
    total = 0
    for rjob in replicated_jobs(js):
        if rjob["name"] == rjob_name:
            return total + index
        total += _replicas(rjob)
    raise KeyError(rjob_name)


def _group_of(rjob: Obj) -> str:
    return str(rjob.get("groupName") or DEFAULT_GROUP)


def subdomain(js: Obj) -> str:
    """``GetSubdomain``: ``network.subdomain`` or the JobSet's name."""
    return str(((js.get("spec") or {}).get("network") or {}).get("subdomain") or js["metadata"]["name"])


def dns_hostnames(js: Obj) -> bool:
    return bool(((js.get("spec") or {}).get("network") or {}).get("enableDNSHostnames"))


def restarts(js: Obj) -> int:
    return int((js.get("status") or {}).get("restarts") or 0)


def child_meta(js: Obj, rjob: Obj, index: int) -> dict[str, str]:
    """The labels (and, the same, annotations) ``labelAndAnnotateObject`` puts on a child Job and its pods."""
    meta = js["metadata"]
    name = child_job_name(meta["name"], rjob["name"], index)
    group = _group_of(rjob)
    in_group = [r for r in replicated_jobs(js) if _group_of(r) == group]
    group_index = 0
    for r in in_group:
        if r["name"] == rjob["name"]:
            break
        group_index += _replicas(r)
    return {
        JOBSET_NAME: meta["name"],
        JOBSET_UID: meta["uid"],
        REPLICATED_JOB_NAME: rjob["name"],
        RESTART_ATTEMPT: str(restarts(js)),
        REPLICATED_JOB_REPLICAS: str(_replicas(rjob)),
        GLOBAL_REPLICAS: str(global_replicas(js)),
        JOB_INDEX: str(index),
        JOB_KEY: job_key(meta["namespace"], name),
        JOB_GLOBAL_INDEX: str(global_index(js, rjob["name"], index)),
        GROUP_NAME: group,
        GROUP_REPLICAS: str(sum(_replicas(r) for r in in_group)),
        JOB_GROUP_INDEX: str(group_index + index),
    }


def child_job(js: Obj, rjob: Obj, index: int) -> Obj:
    """``constructJob``: the child Job, labelled and annotated on itself and on its pod template."""
    meta = js["metadata"]
    template = copy.deepcopy(rjob.get("template") or {})
    tmeta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    extra = child_meta(js, rjob, index)
    pod_template = spec.setdefault("template", {})
    ptmeta = pod_template.setdefault("metadata", {})
    ptmeta["labels"] = {**(ptmeta.get("labels") or {}), **extra}
    ptmeta["annotations"] = {**(ptmeta.get("annotations") or {}), **extra}
    if dns_hostnames(js):
        pod_template.setdefault("spec", {})["subdomain"] = subdomain(js)
    spec["suspend"] = bool((js.get("spec") or {}).get("suspend"))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": child_job_name(meta["name"], rjob["name"], index),
            "namespace": meta["namespace"],
            "labels": {**(tmeta.get("labels") or {}), **extra},
            "annotations": {**(tmeta.get("annotations") or {}), **extra},
            "ownerReferences": [controller_ref(API_VERSION, KIND, js)],
        },
        "spec": spec,
    }  # fmt: skip


def headless_service(js: Obj) -> Obj:
    """``createHeadlessSvcIfNecessary``: the Service that gives pods ``<hostname>.<subdomain>`` names."""
    meta = js["metadata"]
    network = (js.get("spec") or {}).get("network") or {}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": subdomain(js),
            "namespace": meta["namespace"],
            "ownerReferences": [controller_ref(API_VERSION, KIND, js)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {JOBSET_NAME: meta["name"]},
            "publishNotReadyAddresses": bool(network.get("publishNotReadyAddresses", True)),
        },
    }  # fmt: skip


# -- conditions ------------------------------------------------------------------------------------------


def set_condition(conditions: list[Obj], type_: str, status: str, reason: str, message: str) -> bool:
    """``updateCondition``: one condition per type, changed in place; a False condition of a type not
    there is not added; the startup policy's two types exclude each other. True when something changed
    (then the real controller posts an Event)."""
    stamp = now()
    other = {IN_PROGRESS: STARTED, STARTED: IN_PROGRESS}.get(type_)
    for i, cond in enumerate(conditions):
        if status == "True" and cond.get("type") == other and cond.get("status") == "True":
            conditions[i] = {**cond, "status": "False"}
        if cond.get("type") != type_:
            continue
        if cond.get("status") != status:
            conditions[i] = {"type": type_, "status": status, "reason": reason, "message": message,
                             "lastTransitionTime": stamp}  # fmt: skip
            return True
        if cond.get("reason") != reason or cond.get("message") != message:
            conditions[i] = {**cond, "reason": reason, "message": message}
            return True
        return False
    if status == "True":
        conditions.append({"type": type_, "status": status, "reason": reason, "message": message,
                           "lastTransitionTime": stamp})  # fmt: skip
        return True
    return False


def condition_true(obj: Obj, type_: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_ and cond.get("status") == "True":
            return dict(cond)
    return None


def jobset_finished(js: Obj) -> bool:
    return condition_true(js, COMPLETED) is not None or condition_true(js, FAILED) is not None


def _job_failure(job: Obj) -> Obj:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Failed" and cond.get("status") == "True":
            return dict(cond)
    return {}


def message_matches(patterns: Any, message: Any) -> bool:
    """A rule's ``onJobFailureMessagePatterns`` against a child Job's failure message, as jobset's
    ``ruleIsApplicable``/``anyMatchFound`` (``pkg/controllers/failure_policy.go``, since v0.10.0): an empty list
    matches any message; otherwise any pattern found anywhere in the message (Go's ``regexp.MatchString``: a
    search, not a full match); an invalid pattern is skipped (logged there), never an error."""
    if not patterns:
        return True
    for pattern in patterns:
        try:
            if re.search(str(pattern), str(message or "")):
                return True
        except re.error:
            continue
    return False


def _ready(job: Obj) -> bool:
    """``allJobsReady`` counts a Job ready when its ready + succeeded pods reach its parallelism."""
    status = job.get("status") or {}
    parallelism = int((job.get("spec") or {}).get("parallelism") or 1)
    return int(status.get("ready") or 0) + int(status.get("succeeded") or 0) >= parallelism


class JobSetController:
    def __init__(self, api_url: str, tick_seconds: float = 0.5) -> None:
        self.api_url = api_url
        self.tick = tick_seconds
        self.ready = asyncio.Event()
        #: what this controller last wrote per JobSet uid: the informer may not show it yet, and acting twice
        #: on one failure would restart twice (the real one's status update fails on a stale resourceVersion)
        self._written: dict[str, Obj] = {}

    def _fresher(self, js: Obj) -> Obj:
        mine = self._written.get(js["metadata"]["uid"])
        if mine is None:
            return js
        seen, wrote = js["metadata"].get("resourceVersion", "0"), mine["metadata"].get("resourceVersion", "0")
        return mine if str(wrote).isdigit() and str(seen).isdigit() and int(wrote) > int(seen) else js

    async def run(self) -> None:
        def informers(api: Api, wake: asyncio.Event) -> tuple[Informer, ...]:
            return (Informer(api, ns_path(GROUP, VERSION, PLURAL), wake),
                    Informer(api, "/apis/batch/v1/jobs", wake, label_selector=JOBSET_NAME))  # fmt: skip

        async def one_round(api: Api, informers: Sequence[Informer]) -> None:
            jobsets, jobs = informers
            by_owner = owned(jobs.values(), KIND)

            async def reconcile(js: Obj) -> None:
                await self.reconcile(api, js, by_owner.get(js["metadata"]["uid"], []))

            await reconcile_each((self._fresher(seen) for seen in jobsets.values()), reconcile, "jobset", logger)

        await run_loop(self.api_url, informers, one_round, ready=self.ready, tick=self.tick)

    async def reconcile(self, api: Api, js: Obj, jobs: list[Obj]) -> None:
        meta, spec = js["metadata"], js.get("spec") or {}
        if meta.get("deletionTimestamp"):
            return
        ns, name = meta["namespace"], meta["name"]
        path = ns_path(GROUP, VERSION, PLURAL, ns, name)
        status = copy.deepcopy(js.get("status") or {})
        status.setdefault("restarts", 0)
        conditions: list[Obj] = status.setdefault("conditions", [])
        events: list[tuple[str, str, str]] = []
        attempt = restarts(js)
        previous, active, failed, succeeded = [], [], [], []
        for job in jobs:
            label = (job["metadata"].get("labels") or {}).get(RESTART_ATTEMPT, "")
            if not label.isdigit() or int(label) < attempt:
                previous.append(job)
            elif finished(job) == "Failed":
                failed.append(job)
            elif finished(job) == "Complete":
                succeeded.append(job)
            else:
                active.append(job)
        status["replicatedJobsStatus"] = [self._rjob_status(r["name"], active, failed, succeeded)
                                          for r in replicated_jobs(js)]  # fmt: skip
        if jobset_finished(js):
            for job in active:
                await self._delete_job(api, job)
            ttl = spec.get("ttlSecondsAfterFinished")
            if ttl is not None:
                await self._ttl(api, js, path, float(ttl))
            await self._write(api, js, path, status, events)
            return
        for job in previous:  # Recreate: a past attempt's Jobs (and so their pods) go
            await self._delete_job(api, job)
        current = active + failed + succeeded
        all_ready = bool(current) and len(current) == global_replicas(js) and all(_ready(j) for j in current)
        if all_ready and set_condition(conditions, RESTARTING, "False", "JobsReady", "all jobs are ready"):
            events.append(("Normal", "JobsReady", "all jobs are ready"))
        if failed:
            self._failure_policy(js, status, failed, events)
            await self._write(api, js, path, status, events)
            return
        if succeeded and self._succeeded(js, succeeded):
            set_condition(conditions, COMPLETED, "True", *ALL_COMPLETED)
            status["terminalState"] = COMPLETED
            events.append(("Normal", ALL_COMPLETED[0], ALL_COMPLETED[1]))
            await self._write(api, js, path, status, events)
            return
        if dns_hostnames(js):
            try:
                await api.create(ns_path("", "v1", "services", ns), headless_service(js))
            except ApiStatusError as exc:
                if exc.code != 409:
                    events.append(("Warning", "HeadlessServiceCreationFailed", str(exc)))
        await self._create_jobs(api, js, jobs, status, events)
        suspended = bool(spec.get("suspend"))
        for job in active:
            if bool((job.get("spec") or {}).get("suspend")) != suspended:
                job_path = ns_path("batch", "v1", "jobs", ns, job["metadata"]["name"])
                await api.patch(job_path, {"spec": {"suspend": suspended}})
        type_reason = SUSPENDED_JOBS if suspended else RESUMED_JOBS
        if set_condition(conditions, SUSPENDED, "True" if suspended else "False", *type_reason):
            events.append(("Normal", *type_reason))
        await self._write(api, js, path, status, events)

    async def _create_jobs(self, api: Api, js: Obj, jobs: list[Obj], status: Obj, events: list[tuple[str, str, str]]) -> None:
        """``reconcileReplicatedJobs``: the missing child Jobs, replicated Job by replicated Job (``InOrder``:
        each once the ones before all started)."""
        meta, spec = js["metadata"], js.get("spec") or {}
        in_order = ((spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
                    and not spec.get("suspend"))  # fmt: skip
        statuses = {s["name"]: s for s in status["replicatedJobsStatus"]}
        existing = {j["metadata"]["name"] for j in jobs}
        for rjob in replicated_jobs(js):
            st = statuses[rjob["name"]]
            if in_order and _replicas(rjob) == st["failed"] + st["ready"] + st["succeeded"]:
                continue
            for index in range(_replicas(rjob)):
                if child_job_name(meta["name"], rjob["name"], index) in existing:
                    continue  # ``shouldCreateJob``: not while a Job of that name (even a past attempt's) exists
                try:
                    await api.create(ns_path("batch", "v1", "jobs", meta["namespace"]), child_job(js, rjob, index))
                except ApiStatusError as exc:
                    if exc.code != 409:
                        events.append(("Warning", "JobCreationFailed", str(exc)))
            if in_order:
                if set_condition(status["conditions"], IN_PROGRESS, "True", *IN_ORDER_PROGRESS):
                    events.append(("Normal", *IN_ORDER_PROGRESS))
                return
        if in_order and set_condition(status["conditions"], STARTED, "True", *IN_ORDER_DONE):
            events.append(("Normal", *IN_ORDER_DONE))

    @staticmethod
    def _rjob_status(rjob_name: str, active: list[Obj], failed: list[Obj], succeeded: list[Obj]) -> Obj:
        def mine(jobs: list[Obj]) -> list[Obj]:
            return [
                j for j in jobs if (j["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME) == rjob_name
            ]

        live = mine(active)
        return {
            "name": rjob_name,
            "ready": sum(1 for j in live if _ready(j)),
            "succeeded": len(mine(succeeded)),
            "failed": len(mine(failed)),
            "active": sum(1 for j in live if int((j.get("status") or {}).get("active") or 0) > 0),
            "suspended": sum(1 for j in live if (j.get("spec") or {}).get("suspend")),
        }

    @staticmethod
    def _succeeded(js: Obj, succeeded: list[Obj]) -> bool:
        """``executeSuccessPolicy``: ``All`` or ``Any`` of the target replicated Jobs' Jobs succeeded."""
        policy = (js.get("spec") or {}).get("successPolicy") or {"operator": "All"}
        targets = policy.get("targetReplicatedJobs") or [r["name"] for r in replicated_jobs(js)]
        done = [
            j for j in succeeded if (j["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME) in targets
        ]
        if policy.get("operator") == "Any":
            return len(done) > 0
        return len(done) >= sum(_replicas(r) for r in replicated_jobs(js) if r["name"] in targets)

    @staticmethod
    def _failure_policy(js: Obj, status: Obj, failed: list[Obj], events: list[tuple[str, str, str]]) -> None:
        conditions = status["conditions"]

        def first(jobs: list[Obj]) -> Obj:
            return min(jobs, key=lambda j: str(_job_failure(j).get("lastTransitionTime") or ""))

        def fail(reason: str, base: str, job: Obj) -> None:
            message = f"{base} (first failed job: {job['metadata']['name']})"
            set_condition(conditions, FAILED, "True", reason, message)
            set_condition(conditions, RESTARTING, "False", "JobSetFailed", "jobset failed")
            status["terminalState"] = FAILED
            events.append(("Warning", reason, message))

        policy = (js.get("spec") or {}).get("failurePolicy")
        if policy is None:
            fail(*FAILED_JOBS, first(failed))
            return
        rule, job = None, first(failed)
        for candidate in policy.get("rules") or []:
            matching = [
                j for j in failed
                if (not candidate.get("onJobFailureReasons")
                    or _job_failure(j).get("reason") in candidate["onJobFailureReasons"])
                and message_matches(candidate.get("onJobFailureMessagePatterns"), _job_failure(j).get("message"))
                and (not candidate.get("targetReplicatedJobs")
                     or (j["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME)
                     in candidate["targetReplicatedJobs"])
            ]  # fmt: skip
            if matching:
                rule, job = candidate, first(matching)
                break
        action = rule.get("action") if rule else "RestartJobSet"
        if action == "FailJobSet":
            fail(*FAIL_ACTION, job)
            return
        counted = action == "RestartJobSet"
        if counted and int(status.get("restartsCountTowardsMax") or 0) >= int(policy.get("maxRestarts") or 0):
            fail(*REACHED_MAX_RESTARTS, job)
            return
        reason_event, base = RESTART_ACTION if counted else RESTART_IGNORE_ACTION
        message = f"{base} (first failed job: {job['metadata']['name']})"
        status["restarts"] = int(status.get("restarts") or 0) + 1
        if counted:
            status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax") or 0) + 1
        reason = f"FailurePolicy_{rule['name']}" if rule else "DefaultFailurePolicy"
        set_condition(conditions, RESTARTING, "True", reason, message)
        events.append(("Warning", reason, message))
        events.append(("Warning", reason_event, message))

    async def _delete_job(self, api: Api, job: Obj) -> None:
        if not job["metadata"].get("deletionTimestamp"):
            await api.delete(
                ns_path("batch", "v1", "jobs", job["metadata"]["namespace"], job["metadata"]["name"]),
                propagation="Foreground",
            )

    async def _ttl(self, api: Api, js: Obj, path: str, ttl: float) -> None:
        stamps = [c.get("lastTransitionTime") for c in (js.get("status") or {}).get("conditions") or []
                  if c.get("type") in (COMPLETED, FAILED) and c.get("status") == "True"]  # fmt: skip
        if stamps and _age(str(stamps[0])) >= ttl:
            await api.delete(path, propagation="Foreground")

    async def _write(
        self, api: Api, js: Obj, path: str, status: Obj, events: list[tuple[str, str, str]]
    ) -> None:
        old = js.get("status") or {}
        if {k: old.get(k) for k in status} != status:
            written = await api.patch(path + "/status", {"status": status})
            if written is not None:
                self._written[js["metadata"]["uid"]] = written
        for type_, reason, message in events:
            await api.event(js, type_, reason, message, component=COMPONENT)
