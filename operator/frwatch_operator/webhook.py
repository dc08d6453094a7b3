"""The mutating admission webhook: Pod CREATE -> Flight Recorder injection for pods of opted-in jobs.

Two ways to serve the same logic (:func:`review`):

* inside the kopf operator: :func:`register` adds an ``@kopf.on.mutate`` handler (pods, CREATE,
  ``failurePolicy: Ignore``, only pods carrying the job label of an enabled kind:
  ``training.kubeflow.org/job-name`` for PyTorchJob, ``jobset.sigs.k8s.io/jobset-name`` for TrainJob and
  JobSet; the job of a JobSet pod is the TrainJob of that name when frwatch follows one, else the JobSet);
* standalone (tests, benchmarks, or an operator that prefers its own server): :func:`serve` runs a
  ``kopf.WebhookServer`` whose handler is :func:`review` directly (no API server needed).

The request path never calls the API server: opt-in is resolved from a :class:`JobIndex` that the
operator feeds from its watch handlers (``upsert_job``/``delete_job``/``upsert_policy``/``delete_policy``).
It fails open: any internal error admits the pod unchanged with a warning, and so does a pod frwatch will
not inject (past the size budget, an attempt that is no object-key segment). What a pod of an opted-in job
arrives with that only frwatch sets (``frwatch.io/*`` annotations, a container named ``frwatch-agent``,
``FRWATCH_*`` variables, its own dump volume: ``injection.strip_lookalikes``) is removed before it is
injected: pre-setting ``frwatch.io/injected`` skips nothing, and the only agent in the pod, and the only
holder of its token, is the one injected here (a per-pod token: ``agentkeys``). Admission outcomes that
deserve an Event (user-value warnings, malformed opt-in) go to an optional ``observer`` callback, which
must not block (e.g. ``queue.put_nowait``): the operator posts the Events outside the request path.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from frwatch_analyzers.store.layout import segment_problem
from frwatch_operator import constants as c
from frwatch_operator.capture.agent_keys import AgentKeys
from frwatch_operator.capture.live_patch import live_ops
from frwatch_operator.capture.optin import CaptureDecision, OptIn, resolve
from frwatch_operator.capture.sidecar import JobContext
from frwatch_operator.capture.webhook_patch import (
    InjectionError,
    NotInjected,
    agent_id_ops,
    apply_ops,
    attempt_of,
    inject,
    strip_lookalikes,
)
from frwatch_operator.config import Config, load_config
from frwatch_operator.kinds.job_kind import enabled_kinds, kind_of, kinds_for_pod, pod_labels
from frwatch_operator.live.policy import live_requested

logger = logging.getLogger(__name__)

HANDLER_ID = "frwatch-inject"


@dataclass(frozen=True)
class JobEntry:
    """What the index keeps of a job: enough to resolve opt-in and to name the attempt."""

    kind: str
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]

    @property
    def attempt(self) -> str:
        return self.annotations.get(c.ANN_ATTEMPT, "0") or "0"

    def as_body(self) -> dict[str, Any]:
        return {
            "metadata": {
                "namespace": self.namespace,
                "name": self.name,
                "uid": self.uid,
                "labels": dict(self.labels),
                "annotations": dict(self.annotations),
            }
        }


class JobIndex:
    """The operator's in-memory view of jobs and CapturePolicies, read by the webhook.

    Feed it from watch handlers (kopf ``on.event`` for the jobs of each enabled kind and CapturePolicies).
    Writes replace whole entries (atomic under the GIL), so a handler thread and the webhook's event
    loop can share it without locks.
    """

    def __init__(self) -> None:
        self._jobs: dict[tuple[str, str], JobEntry] = {}
        self._policies: dict[str, dict[str, Mapping[str, Any]]] = {}

    def upsert_job(self, body: Mapping[str, Any]) -> JobEntry:
        meta = body.get("metadata") or {}
        entry = JobEntry(
            kind=str(body.get("kind") or "PyTorchJob"),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
            annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
        )
        self._jobs[(entry.namespace, entry.name)] = entry
        return entry

    def delete_job(self, namespace: str, name: str) -> None:
        self._jobs.pop((namespace, name), None)

    def upsert_policy(self, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata") or {}
        ns = str(meta.get("namespace") or "")
        policies = dict(self._policies.get(ns, {}))
        policies[str(meta.get("name") or "")] = body
        self._policies[ns] = policies

    def delete_policy(self, namespace: str, name: str) -> None:
        policies = dict(self._policies.get(namespace, {}))
        policies.pop(name, None)
        self._policies[namespace] = policies

    def job(self, namespace: str, name: str) -> JobEntry | None:
        return self._jobs.get((namespace, name))

    def policies(self, namespace: str) -> list[Mapping[str, Any]]:
        return list(self._policies.get(namespace, {}).values())

    def decide(self, namespace: str, name: str, config: Config) -> CaptureDecision | None:
        """Opt-in decision for a known job (None when the job is not in the index)."""
        entry = self.job(namespace, name)
        if entry is None:
            return None
        return resolve(entry.as_body(), self.policies(namespace), config)

    async def wait_for_job(self, namespace: str, name: str, timeout: float) -> JobEntry | None:
        """The job's entry, waiting up to ``timeout`` seconds for the watch to deliver it."""
        deadline = time.monotonic() + timeout
        while True:
            entry = self.job(namespace, name)
            if entry is not None or time.monotonic() >= deadline:
                return entry
            await asyncio.sleep(0.01)


@dataclass(frozen=True)
class AdmissionNote:
    """One admission decision worth telling the operator (for Events and metrics)."""

    namespace: str
    job: str
    pod: str
    injected: bool
    warnings: list[str] = field(default_factory=list)
    reason: str = ""


Observer = Callable[[AdmissionNote], None]


@dataclass(frozen=True)
class Mutation:
    """The webhook's answer for one pod: ops (RFC 6902) to apply and warnings for the user."""

    ops: list[dict[str, Any]]
    warnings: list[str]
    note: AdmissionNote | None
    #: For the metrics: ``injected`` (the pod changed; a pod arriving injected is injected anew),
    #: ``untouched`` (not opted in, opted out, unknown job) or ``error`` (admitted as is because injecting failed).
    outcome: str = "untouched"


async def mutate_pod(
    pod: Mapping[str, Any], namespace: str, index: JobIndex, config: Config, keys: AgentKeys | None = None
) -> Mutation:
    """The decision for one pod (shared by the kopf handler and the standalone server). Never raises.
    ``keys``: the agents' key ring (None: the agent gets no token and refuses control calls)."""
    meta = pod.get("metadata") if isinstance(pod, Mapping) else None
    job_name, kinds = kinds_for_pod(pod, enabled_kinds(config.operator.job_kinds)) if isinstance(meta, Mapping) else ("", [])
    if not kinds:
        return Mutation([], [], None)
    assert isinstance(meta, Mapping)
    pod_name = str(meta.get("name") or meta.get("generateName") or "")
    namespace = namespace or str(meta.get("namespace") or "")
    if all(kind.owned_elsewhere(pod) for kind in kinds):  # another kind's pod sharing the label: never wait
        return Mutation([], [], None)
    try:
        entry = await index.wait_for_job(namespace, job_name, config.webhook.job_wait_seconds)
        if entry is None or kind_of(entry.kind) not in kinds:
            logger.warning("pod %s/%s of unknown job %s admitted unchanged", namespace, pod_name, job_name)
            return Mutation([], [], None)
        decision = resolve(entry.as_body(), index.policies(namespace), config)
        if decision.outcome is OptIn.UNTOUCHED:
            note = AdmissionNote(namespace, job_name, pod_name, False, [], decision.reason)
            return Mutation([], [f"frwatch: capture not injected: {decision.reason}"], note)
        if not decision.enabled or decision.settings is None:
            return Mutation([], [], None)
        attempt = attempt_of(pod, entry.attempt)
        if (why := segment_problem(attempt)) is not None:
            raise NotInjected(f"the job's attempt {why}: fix or remove the {c.ANN_ATTEMPT} annotation")
        ctx = JobContext(entry.kind, entry.name, entry.uid, attempt)
        clean, stripped, strip_warnings = strip_lookalikes(pod)
        issued = keys.issue(namespace, entry.name) if keys is not None else None
        result = inject(clean, decision.settings, config, ctx, issued[1] if issued else None)
        warnings = strip_warnings + list(result.warnings)
        if result.ops and live_requested(entry.as_body(), decision.settings):
            more, live_warnings = live_ops(apply_ops(copy.deepcopy(clean), result.ops), config)
            result = dataclasses.replace(result, ops=[*result.ops, *more])
            warnings += live_warnings
        if result.ops:
            result = dataclasses.replace(
                result, ops=[*stripped, *result.ops, *(agent_id_ops(issued[0]) if issued else [])]
            )
        if keys is not None and issued is None and result.changed:
            warnings.append(
                "frwatch: the operator has no agent key yet (see its log): this pod's agent refuses on-demand "
                "dump requests; dumps written by the ranks are still uploaded"
            )
        note = AdmissionNote(namespace, job_name, pod_name, result.changed, warnings, decision.reason)
        return Mutation(result.ops, warnings + result.notices, note, "injected" if result.ops else "untouched")
    except NotInjected as exc:
        warning = f"frwatch: pod admitted without Flight Recorder capture: {exc}"
        return Mutation([], [warning], AdmissionNote(namespace, job_name, pod_name, False, [warning]))
    except InjectionError as exc:
        warning = f"frwatch: pod admitted without Flight Recorder capture: {exc}"
        return Mutation([], [warning], AdmissionNote(namespace, job_name, pod_name, False, [warning]), "error")
    except Exception as exc:  # fail open: never block pod creation on frwatch's own bug
        logger.exception("webhook failed on pod %s/%s; admitted unchanged", namespace, pod_name)
        warning = f"frwatch: internal error, pod admitted without capture ({type(exc).__name__})"
        return Mutation([], [warning], AdmissionNote(namespace, job_name, pod_name, False, [warning]), "error")


def _notify(observer: Observer | None, note: AdmissionNote | None) -> None:
    if observer is None or note is None or not (note.warnings or not note.injected):
        return
    try:
        observer(note)
    except Exception:  # an observer's bug must not fail an admission
        logger.exception("admission observer failed")


async def review(
    request: Mapping[str, Any], index: JobIndex, config: Config, observer: Observer | None = None,
    keys: AgentKeys | None = None,
) -> dict[str, Any]:  # fmt: skip
    """An AdmissionReview request in, an AdmissionReview response out. Always allows; never raises."""
    payload = request.get("request") if isinstance(request, Mapping) else None
    payload = payload if isinstance(payload, Mapping) else {}
    response: dict[str, Any] = {"uid": str(payload.get("uid") or ""), "allowed": True}
    answer = {
        "apiVersion": str(request.get("apiVersion") or "admission.k8s.io/v1")
        if isinstance(request, Mapping)
        else "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": response,
    }
    pod = payload.get("object")
    kind = (payload.get("kind") or {}).get("kind") if isinstance(payload.get("kind"), Mapping) else None
    if not isinstance(pod, Mapping) or payload.get("operation") != "CREATE" or kind not in (None, "Pod"):
        if not payload or not isinstance(pod, Mapping):
            response["warnings"] = [
                "frwatch: malformed AdmissionReview (no request.object); admitted unchanged"
            ]
        return answer
    mutation = await mutate_pod(pod, str(payload.get("namespace") or ""), index, config, keys)
    if mutation.ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(mutation.ops).encode()).decode("ascii")
    if mutation.warnings:
        response["warnings"] = mutation.warnings
    _notify(observer, mutation.note)
    return answer


# --- serving ----------------------------------------------------------------------------------------------


def webhook_server(config: Config) -> Any:
    """A ``kopf.WebhookServer`` configured from ``config.webhook`` (for the standalone server or
    ``settings.admission.server`` in the operator)."""
    import kopf

    w = config.webhook
    return kopf.WebhookServer(
        addr=w.addr, port=w.port, host=w.host, insecure=w.insecure, certfile=w.cert_file, pkeyfile=w.key_file
    )


@contextlib.asynccontextmanager
async def serve(
    index: JobIndex, config: Config, observer: Observer | None = None, keys: AgentKeys | None = None
) -> AsyncIterator[str]:
    """Serve :func:`review` on a kopf WebhookServer until the context exits; yields the base URL
    (POST AdmissionReviews to ``<url>/<anything>``)."""
    server = webhook_server(config)

    async def fn(request: Any, *, webhook: Any = None, headers: Any = None, sslpeer: Any = None) -> Any:
        return await review(request, index, config, observer, keys)

    async with server:
        configs = server(fn)
        client_config = await configs.__anext__()
        try:
            yield str(client_config["url"]).rstrip("/")
        finally:
            await configs.aclose()


def register(
    index: JobIndex,
    config: Config,
    observer: Observer | None = None,
    registry: Any = None,
    count: Callable[[str], None] | None = None,
    keys: AgentKeys | None = None,
) -> Any:
    """Register the kopf ``@kopf.on.mutate`` handler (the operator's way). Returns the handler.
    ``count``: called with each admission's :attr:`Mutation.outcome` (the operator's metrics);
    ``keys``: the agents' key ring."""
    import kopf

    wanted = pod_labels(enabled_kinds(config.operator.job_kinds))

    def job_pod(body: Any, **_: Any) -> bool:
        labels = (body.get("metadata") or {}).get("labels") or {}
        return any(label in labels for label in wanted)

    @kopf.on.mutate(
        "v1",
        "pods",
        id=HANDLER_ID,
        operations=["CREATE"],
        ignore_failures=True,
        when=job_pod,
        registry=registry,
    )
    async def frwatch_inject(body: Any, patch: Any, warnings: list[str], **_: Any) -> None:
        mutation = await mutate_pod(
            dict(body), str(body.get("metadata", {}).get("namespace") or ""), index, config, keys
        )
        warnings.extend(mutation.warnings)
        if mutation.ops:
            ops = mutation.ops
            patch.fns.append(lambda raw: apply_ops(raw, ops))
        _notify(observer, mutation.note)
        if count is not None:
            count(mutation.outcome)

    return frwatch_inject


# --- `python -m frwatch_operator.webhook`: the standalone server for local runs and the benchmark -------


def main(argv: list[str] | None = None) -> int:
    """Serve the webhook standalone with an index loaded from a JSON file of job/policy bodies."""
    parser = argparse.ArgumentParser(prog="python -m frwatch_operator.webhook")
    parser.add_argument("--objects", help="JSON file: a list of job (any kind) and CapturePolicy bodies")
    args = parser.parse_args(argv)
    config = load_config(os.environ)
    logging.basicConfig(level=config.log_level)
    index = JobIndex()
    if args.objects:
        with open(args.objects) as f:
            for obj in json.load(f):
                if obj.get("kind") == c.POLICY_KIND:
                    index.upsert_policy(obj)
                else:
                    index.upsert_job(obj)

    async def run() -> None:
        async with serve(index, config) as url:
            print(f"serving {url}", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
