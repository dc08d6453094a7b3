"""A verdict-loop pass the API refuses for good (403 forbidden, 422 invalid) is bounded and visible: the
refusal is recorded in the Incident's status, the next pass backs off (doubling up to a cap), and a pass
still refused at the give-up time ends the Incident Failed (reason ApiRefused: the call, the status, what
to grant) with one Warning Event; a fixed refusal resumes where it stopped. Transient errors (5xx, 409,
timeouts) are still raised for the timer to retry soon, without touching the status.

Against the API emulator: the adapter is the real one over the real client; only the one refused call is
made to answer as an API server answers a refusal (an ``ApiException`` with that status and a Status body).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import urllib3
from kubernetes import client
from vl_builders import (
    analyzing,
    create_incident,
    create_pytorchjob,
    events_about,
    finish_job,
    get_incident,
    hardware_verdict,
    observed_record,
    settings,
    write_status,
)

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_operator import constants as c
from frwatch_operator.analysis.analyzing import AnalysisRequest, advance_analysis, start_analysis
from frwatch_operator.config import AnalyzerSettings, Config, OperatorSettings
from frwatch_operator.errors import RetryableError
from frwatch_operator.handlers.incident_phases import active, handed_over
from frwatch_operator.kube.adapter import Kube
from frwatch_operator.resources import IncidentPhase, IncidentStatus
from frwatch_operator.store.s3 import S3Store

T0 = datetime(2026, 1, 5, 3, 0, tzinfo=UTC)


def refusal(status: int, message: str) -> client.ApiException:
    """What the client raises when the API server answers ``status`` with a Status object."""
    exc = client.ApiException(status=status, reason="refused")
    exc.body = json.dumps(
        {"kind": "Status", "status": "Failure", "message": message, "code": status}
    ).encode()
    return exc


class Refusing:
    """Wraps a client API object: ``method`` raises what ``answers`` returns (None: the real call)."""

    def __init__(self, api: Any, method: str, answers: Callable[[], Exception | None]) -> None:
        self._api, self._method, self._answers = api, method, answers
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._api, name)
        if name != self._method:
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            exc = self._answers()
            if exc is not None:
                raise exc
            return real(*args, **kwargs)

        return call


@dataclass
class Setup:
    ns: str
    config: Config
    store: S3Store
    key: AttemptKey
    url: str
    incident: dict[str, Any]

    def body(self, custom: Any) -> dict[str, Any]:
        return get_incident(custom, self.ns, self.incident["metadata"]["name"])

    def request(self) -> AnalysisRequest:
        meta = self.incident["metadata"]
        return AnalysisRequest(self.ns, meta["name"], meta["uid"], self.url, settings(self.config))


@pytest.fixture
def setup(k8s_namespace: str, crds: None, s3: Any, custom: Any) -> Setup:
    ns = k8s_namespace
    config = Config(s3=s3.settings(), analyzer=AnalyzerSettings(namespace=ns))
    job = create_pytorchjob(custom, ns)
    key = AttemptKey("frwatch", ns, "llama", job["metadata"]["uid"], "0")
    url = f"s3://{s3.bucket}/{key.root}"
    observed = observed_record({"node-0": "0", "node-1": "1", "node-2": "2", "node-7": "3"})
    incident = create_incident(custom, ns, job, storage_url=url, status=analyzing(observed=observed))
    return Setup(ns, config, S3Store(s3.settings()), key, url, incident)


def a_pass(
    setup: Setup, custom: Any, kube: Any, now: datetime, config: Config | None = None
) -> tuple[Any, Any]:
    body = setup.body(custom)
    cfg = config or setup.config
    step = advance_analysis(body, config=cfg, kube=kube, store=setup.store, settings=settings(cfg), now=now)
    status = write_status(custom, body, step.status)["status"] if step.status else body["status"]
    return step, status


def analysed(setup: Setup, api_client: Any, core: Any, kube: Kube) -> None:
    """The analyzer Job created, finished, and its verdict in S3: the next pass reports."""
    start_analysis(setup.request(), setup.config, kube=kube, now=T0)
    batch = client.BatchV1Api(api_client)
    (job,) = [api_client.sanitize_for_serialization(j) for j in batch.list_namespaced_job(setup.ns).items]
    setup.store.put(setup.key.verdict, hardware_verdict("node-7").model_dump_json().encode())
    finish_job(batch, core, job, condition="Complete")


def handed_off(setup: Setup, custom: Any, step: Any) -> dict[str, Any]:
    """What the core's hand_off writes with start_analysis's Step: its status, its conditions merged in."""
    body = setup.body(custom)
    patch = dict(step.status)
    theirs = patch.pop("conditions", [])
    kept = [x for x in body["status"]["conditions"] if x["type"] not in {t["type"] for t in theirs}]
    return write_status(custom, body, {**patch, "conditions": kept + theirs})["status"]  # type: ignore[no-any-return]


def analysis_pass_next(status: dict[str, Any]) -> bool:
    """Whether the Incident's timer runs an Analyzing pass (advance_analysis) on it next."""
    typed = IncidentStatus.model_validate(status)
    return active(status=status, meta={}) and typed.phase is IncidentPhase.ANALYZING and handed_over(typed)


def warnings(core: Any, ns: str, name: str) -> list[Any]:
    return [e for e in events_about(core, ns, name) if e.type == "Warning" and e.reason == "AnalysisFailed"]


def test_forbidden_annotation_backs_off_then_fails_once_with_what_to_grant(
    setup: Setup, custom: Any, core: Any, kube: Kube, api_client: Any, kubectl: Any
) -> None:  # fmt: skip
    analysed(setup, api_client, core, kube)
    denied = (
        'pytorchjobs.kubeflow.org "llama" is forbidden: User "system:serviceaccount:frwatch:op" cannot patch'
    )
    refusing = Refusing(kube.custom, "patch_namespaced_custom_object", lambda: refusal(403, denied))
    kube.custom = refusing  # type: ignore[assignment]
    name = setup.incident["metadata"]["name"]
    ops = setup.config.operator  # the documented defaults: 10 s doubling to 300 s, give up after 30 min
    assert (ops.refused_backoff_seconds, ops.refused_backoff_max_seconds, ops.refused_give_up_seconds) == (
        10.0, 300.0, 1800.0,
    )  # fmt: skip

    step, status = a_pass(setup, custom, kube, T0)
    assert not step.done and step.retry_after == 10.0 and refusing.calls == 1
    assert status["phase"] == "Analyzing" and analysis_pass_next(status)  # the timer keeps it
    refused = status["apiRefusals"]
    assert refused["count"] == 1 and refused["firstAt"] == "2026-01-05T03:00:00Z"
    assert refused["nextPassAt"] == "2026-01-05T03:00:10Z" and refused["giveUpAt"] == "2026-01-05T03:30:00Z"
    for words in (f"annotate PyTorchJob {setup.ns}/llama", "forbidden", "HTTP 403", "cannot patch",
                  "grant the operator's ServiceAccount 'patch' on PyTorchJob"):  # fmt: skip
        assert words in refused["lastError"], words
    assert status["message"].startswith("pass refused (1 in a row): annotate PyTorchJob")
    assert warnings(core, setup.ns, name) == [] and warnings(core, setup.ns, "llama") == []

    step, status = a_pass(setup, custom, kube, T0 + timedelta(seconds=9))  # backing off: no call at all
    assert step.status == {} and not step.done and step.retry_after == pytest.approx(1.0)
    assert refusing.calls == 1

    waits = []
    now = T0 + timedelta(seconds=10)
    while True:  # every pass at its nextPassAt, until one is past the give-up time
        step, status = a_pass(setup, custom, kube, now)
        if step.done:
            break
        waits.append(step.retry_after)
        now = datetime.fromisoformat(status["apiRefusals"]["nextPassAt"].replace("Z", "+00:00"))
    assert waits[:6] == [20.0, 40.0, 80.0, 160.0, 300.0, 300.0]  # exponential, capped
    assert refusing.calls == len(waits) + 2 and now >= T0 + timedelta(minutes=30)

    assert status["phase"] == "Failed" and "apiRefusals" not in status
    analyzed = next(x for x in status["conditions"] if x["type"] == "Analyzed")
    assert (analyzed["status"], analyzed["reason"]) == ("False", "ApiRefused")
    assert f"the API refused {len(waits) + 2} passes since 2026-01-05T03:00:00Z" in status["message"]
    assert "'patch' on PyTorchJob" in status["message"]
    for about in (name, "llama"):  # one Warning on the Incident, one on the job
        (warning,) = warnings(core, setup.ns, about)
        assert "no verdict (ApiRefused)" in warning.message and "forbidden" in warning.message
    assert not analysis_pass_next(status)  # the timer lets it go

    again, _ = a_pass(setup, custom, kube, now + timedelta(hours=1))
    assert again.done and again.status == {} and refusing.calls == len(waits) + 2
    assert len(warnings(core, setup.ns, name)) == 1
    described = kubectl("describe", "incident", name, "-n", setup.ns).stdout
    assert "ApiRefused" in described and "Failed" in described


def test_a_refusal_fixed_in_time_resumes_and_clears(
    setup: Setup, custom: Any, core: Any, kube: Kube, api_client: Any
) -> None:  # fmt: skip
    analysed(setup, api_client, core, kube)
    answers: list[Exception | None] = [refusal(422, "metadata.annotations: Invalid value"), None]
    refusing = Refusing(kube.custom, "patch_namespaced_custom_object", lambda: answers.pop(0))
    kube.custom = refusing  # type: ignore[assignment]

    step, status = a_pass(setup, custom, kube, T0)
    assert not step.done and status["apiRefusals"]["count"] == 1
    assert "refused (422)" in status["apiRefusals"]["lastError"] and "HTTP 422" in status["message"]
    step, status = a_pass(setup, custom, kube, T0 + timedelta(seconds=10))  # fixed meanwhile
    assert step.done and status["phase"] == "Reported" and "apiRefusals" not in status
    assert status["suspects"] == "rank 3 on node-7"
    job = custom.get_namespaced_custom_object(c.KF_GROUP, c.KF_VERSION, setup.ns, c.KF_PLURAL, "llama")
    assert job["metadata"]["annotations"][c.ANN_CATEGORY] == "gpu_hang"
    assert warnings(core, setup.ns, "llama") == []


@pytest.mark.parametrize(
    "transient",
    [
        lambda: refusal(503, "etcdserver: request timed out"),
        lambda: refusal(409, "the object has been modified"),
        lambda: refusal(429, "too many requests"),
        lambda: urllib3.exceptions.ReadTimeoutError(None, "/apis", "read timed out"),  # type: ignore[arg-type]
    ],
    ids=["503", "409", "429", "timeout"],
)
def test_transient_errors_are_retried_soon_and_recorded_nowhere(
    setup: Setup, custom: Any, core: Any, kube: Kube, api_client: Any,
    transient: Callable[[], Exception],
) -> None:  # fmt: skip
    analysed(setup, api_client, core, kube)
    kube.custom = Refusing(kube.custom, "patch_namespaced_custom_object", transient)  # type: ignore[assignment]
    before = setup.body(custom)["status"]
    for minutes in (0, 45):  # even long after: never given up on
        with pytest.raises(RetryableError) as raised:
            advance_analysis(
                setup.body(custom), config=setup.config, kube=kube, store=setup.store,
                settings=settings(setup.config), now=T0 + timedelta(minutes=minutes),
            )  # fmt: skip
        assert raised.value.delay <= 2.0
    after = setup.body(custom)["status"]
    assert after == before and "apiRefusals" not in after


def test_analyzer_job_create_refused_is_retried_by_the_loop_then_created(
    setup: Setup, custom: Any, core: Any, kube: Kube, api_client: Any
) -> None:  # fmt: skip
    denied = 'jobs.batch is forbidden: User "system:serviceaccount:frwatch:op" cannot create resource "jobs"'
    answers: list[Exception | None] = [refusal(403, denied), refusal(403, denied), None]
    refusing = Refusing(kube.batch, "create_namespaced_job", lambda: answers.pop(0))
    kube.batch = refusing  # type: ignore[assignment]

    step = start_analysis(setup.request(), setup.config, kube=kube, now=T0)  # the core's hand-off: no raise
    assert not step.done
    status = handed_off(setup, custom, step)
    assert status["phase"] == "Analyzing" and status["apiRefusals"]["count"] == 1
    assert "create Job" in status["apiRefusals"]["lastError"]
    assert "'create' on Job objects" in status["apiRefusals"]["lastError"]
    assert (
        next(x for x in status["conditions"] if x["type"] == "Analyzed")["reason"] == "AnalyzerJobNotCreated"
    )
    assert analysis_pass_next(status)  # the verdict loop's timer takes it from here

    step, status = a_pass(setup, custom, kube, T0 + timedelta(seconds=10))
    assert not step.done and status["apiRefusals"]["count"] == 2 and refusing.calls == 2
    step, status = a_pass(setup, custom, kube, T0 + timedelta(seconds=30))  # granted meanwhile
    assert not step.done and refusing.calls == 3 and "apiRefusals" not in status
    analyzed = next(x for x in status["conditions"] if x["type"] == "Analyzed")
    assert analyzed["reason"] == "AnalyzerRunning" and status["message"].startswith("analyzing: Job")
    (job,) = client.BatchV1Api(api_client).list_namespaced_job(setup.ns).items
    assert job.metadata.name == status["analyzerJob"]
    assert [e.reason for e in events_about(core, setup.ns, setup.incident["metadata"]["name"])] == [
        "AnalyzerStarted"
    ]


def test_give_up_zero_fails_at_the_first_refusal(
    setup: Setup, custom: Any, core: Any, kube: Kube
) -> None:
    kube.batch = Refusing(  # type: ignore[assignment]
        kube.batch,
        "create_namespaced_job",
        lambda: refusal(422, "spec.template.spec.containers[0].image: Required"),
    )
    config = setup.config.model_copy(update={"operator": OperatorSettings(refused_give_up_seconds=0)})
    step = start_analysis(setup.request(), config, kube=kube, now=T0)
    assert step.done
    status = handed_off(setup, custom, step)
    assert (
        status["phase"] == "Failed"
        and "HTTP 422" in status["message"]
        and "image: Required" in status["message"]
    )
    (warning,) = warnings(core, setup.ns, setup.incident["metadata"]["name"])
    assert "no verdict (ApiRefused)" in warning.message
