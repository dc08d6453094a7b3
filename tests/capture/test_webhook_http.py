"""The webhook over real HTTP: AdmissionReview JSON posted to a real kopf WebhookServer."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import socket
import threading
import urllib.error
import urllib.request
from typing import Any

import jsonpatch
import kopf
import pytest
from builders import env_of, job, pod, policy, review

from frwatch_operator import constants as c
from frwatch_operator.config import Config, WebhookSettings
from frwatch_operator.webhook import AdmissionNote, JobIndex, register, serve


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WebhookThread:
    """The standalone webhook server on its own event loop in a thread."""

    def __init__(self, index: JobIndex, config: Config) -> None:
        self.index, self.config = index, config
        self.notes: list[AdmissionNote] = []
        self.url = ""
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._stop = asyncio.Event()
            async with serve(self.index, self.config, observer=self.notes.append) as url:
                self.url = url
                self._ready.set()
                await self._stop.wait()

        self._loop.run_until_complete(main())

    def __enter__(self) -> WebhookThread:
        self._thread.start()
        assert self._ready.wait(10), "webhook server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def post(self, body: bytes | dict[str, Any], path: str = "/frwatch-inject") -> dict[str, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
            return dict(json.loads(resp.read()))


@pytest.fixture
def index() -> JobIndex:
    idx = JobIndex()
    idx.upsert_job(job("llama"))
    idx.upsert_job(job("plain", capture=None))
    idx.upsert_job(job("typo", capture="yes"))
    return idx


@pytest.fixture
def server(index: JobIndex):
    config = Config(
        webhook=WebhookSettings(addr="127.0.0.1", port=free_port(), insecure=True, job_wait_seconds=0.2)
    )
    with WebhookThread(index, config) as srv:
        yield srv


def patched(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    r = response["response"]
    if "patch" not in r:
        return obj
    assert r["patchType"] == "JSONPatch"
    return jsonpatch.apply_patch(copy.deepcopy(obj), json.loads(base64.b64decode(r["patch"])))


def test_opted_in_pod_is_injected_and_uid_echoed(server):
    req = review(pod("llama"), uid="abc-123")
    resp = server.post(req)
    assert resp["kind"] == "AdmissionReview" and resp["apiVersion"] == "admission.k8s.io/v1"
    assert resp["response"]["uid"] == "abc-123" and resp["response"]["allowed"] is True
    out = patched(req["request"]["object"], resp)
    assert out["spec"]["initContainers"][0]["name"] == c.AGENT_CONTAINER
    assert env_of(out["spec"]["containers"][0])[c.ENV_FR_BUFFER_SIZE] == "2000"


def test_opted_out_pod_is_untouched(server):
    for p in (
        pod("plain"),
        pod("unknown-job"),
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "x"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        },
    ):
        resp = server.post(review(p))
        assert resp["response"]["allowed"] is True
        assert "patch" not in resp["response"] and "warnings" not in resp["response"]


def test_user_value_kept_with_warning(server):
    req = review(
        pod(
            "llama",
            env=[
                {"name": c.ENV_FR_BUFFER_SIZE, "value": "0"},
                {"name": c.ENV_NCCL_ASYNC_ERROR_HANDLING, "value": "1"},
            ],
        )
    )
    resp = server.post(req)
    out = patched(req["request"]["object"], resp)
    env = env_of(out["spec"]["containers"][0])
    assert env[c.ENV_FR_BUFFER_SIZE] == "0" and env[c.ENV_FR_BUFFER_SIZE_OLD] == "0"
    warnings = resp["response"]["warnings"]
    assert any("turns the Flight Recorder off" in w for w in warnings)
    assert any("pytorch#121055" in w for w in warnings)
    assert server.notes and server.notes[-1].job == "llama" and server.notes[-1].warnings == warnings


def test_second_injection_is_a_no_op(server):
    req = review(pod("llama"))
    once = patched(req["request"]["object"], server.post(req))
    resp = server.post(review(once))
    assert "patch" not in resp["response"] and resp["response"]["allowed"] is True


def test_malformed_job_annotation_admits_untouched_with_reason(server):
    resp = server.post(review(pod("typo")))
    assert "patch" not in resp["response"]
    assert any(c.ANN_CAPTURE in w for w in resp["response"]["warnings"])
    assert server.notes[-1].reason and not server.notes[-1].injected


def test_malformed_bodies_never_block_pod_creation(server):
    # not JSON at all: kopf's server answers 400; with failurePolicy Ignore the API server admits the pod
    with pytest.raises(urllib.error.HTTPError) as err:
        server.post(b"{not json")
    assert err.value.code == 400
    # JSON, but not an AdmissionReview / not a pod: allowed, unchanged, with a warning where useful
    for body in ({}, {"request": None}, {"request": {"uid": "u", "operation": "CREATE", "object": "pod"}}):
        resp = server.post(body)
        assert resp["response"]["allowed"] is True and "patch" not in resp["response"]
    bad_pod = pod("llama")
    bad_pod["spec"]["containers"] = "pytorch"
    resp = server.post(review(bad_pod, uid="u2"))
    assert resp["response"] == {
        "uid": "u2",
        "allowed": True,
        "warnings": [
            "frwatch: pod admitted without Flight Recorder capture: spec.containers is not a non-empty list of objects"
        ],
    }


def test_non_create_operations_are_ignored(server):
    resp = server.post(review(pod("llama"), operation="UPDATE"))
    assert resp["response"]["allowed"] is True and "patch" not in resp["response"]


def test_index_updates_apply_to_the_next_request(server, index):
    assert "patch" not in server.post(review(pod("plain")))["response"]
    index.upsert_policy(policy("everything"))
    assert "patch" in server.post(review(pod("plain")))["response"]
    index.delete_policy("team", "everything")
    index.upsert_job(job("plain", capture="disabled"))
    assert "patch" not in server.post(review(pod("plain")))["response"]


def test_pod_arriving_just_before_its_job_waits_for_the_index(server, index):
    later = job("fresh")
    timer = threading.Timer(0.05, index.upsert_job, args=(later,))
    timer.start()
    resp = server.post(review(pod("fresh")))
    timer.join()
    assert "patch" in resp["response"]


def test_jobset_restart_attempt_reaches_the_agent(server):
    req = review(pod("llama", labels={c.LABEL_JOBSET_RESTART_ATTEMPT: "4"}))
    out = patched(req["request"]["object"], server.post(req))
    assert env_of(out["spec"]["initContainers"][0])[c.ENV_JOB_ATTEMPT] == "4"


def test_kopf_handler_glue_produces_the_same_patch(index):
    """The operator's way: the @kopf.on.mutate handler writes through kopf's own Patch."""
    registry = kopf.OperatorRegistry()
    notes: list[AdmissionNote] = []
    handler = register(index, Config(), observer=notes.append, registry=registry)
    assert registry._webhooks.get_all_handlers()
    body = pod("llama", env=[{"name": c.ENV_FR_BUFFER_SIZE, "value": "0"}])
    patch = kopf.Patch(body=kopf.Body(copy.deepcopy(body)))
    warnings: list[str] = []
    asyncio.run(handler(body=kopf.Body(copy.deepcopy(body)), patch=patch, warnings=warnings))
    out = jsonpatch.apply_patch(copy.deepcopy(body), patch.as_json_patch())
    assert out["spec"]["initContainers"][0]["name"] == c.AGENT_CONTAINER
    assert out["metadata"]["annotations"][c.ANN_INJECTED]
    assert warnings and "turns the Flight Recorder off" in warnings[0] and notes


def test_the_kopf_handler_counts_each_outcome(index, monkeypatch):
    """One count per admission, for the operator's metrics: injected, untouched, or error (admitted as is)."""
    outcomes: list[str] = []
    handler = register(index, Config(), registry=kopf.OperatorRegistry(), count=outcomes.append)

    def admit(body: dict[str, Any]) -> dict[str, Any]:
        patch = kopf.Patch(body=kopf.Body(copy.deepcopy(body)))
        asyncio.run(handler(body=kopf.Body(copy.deepcopy(body)), patch=patch, warnings=[]))
        return jsonpatch.apply_patch(copy.deepcopy(body), patch.as_json_patch())

    injected = admit(pod("llama"))
    admit(injected)  # a second pass changes nothing
    admit(pod("plain"))  # not opted in
    admit(pod("typo"))  # malformed opt-in: left untouched
    monkeypatch.setattr("frwatch_operator.webhook.inject", lambda *a, **k: 1 / 0)
    admit(pod("llama", index=1))
    assert outcomes == ["injected", "untouched", "untouched", "untouched", "error"]
