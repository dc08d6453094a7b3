"""The webhook over real HTTP: AdmissionReview JSON posted to a real kopf WebhookServer."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import threading
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any

import jsonpatch
import kopf
import pytest
from builders import env_of, job, pod, policy

from frwatch_dev.testing.admission import review
from frwatch_dev.testing.webhook_thread import KEYS, WebhookThread, webhook_config
from frwatch_operator import constants as c
from frwatch_operator.capture.agent_keys import AgentKeys
from frwatch_operator.capture.sidecar import SECURITY_CONTEXT
from frwatch_operator.capture.webhook_patch import MAX_CONTAINERS, MAX_LIST_ITEMS
from frwatch_operator.config import Config, env_name
from frwatch_operator.webhook import AdmissionNote, JobIndex, register


@pytest.fixture
def index() -> JobIndex:
    idx = JobIndex()
    idx.upsert_job(job("llama"))
    idx.upsert_job(job("plain", capture=None))
    idx.upsert_job(job("typo", capture="yes"))
    return idx


@pytest.fixture
def server(index: JobIndex):
    with WebhookThread(index, webhook_config(), KEYS) as srv:
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
    # the user's value kept, and given to the other name too (the default "any" sets both): never 2000 beside it
    assert env[c.ENV_FR_BUFFER_SIZE] == "0" and env[c.ENV_FR_BUFFER_SIZE_OLD] == "0"
    warnings = resp["response"]["warnings"]
    assert any("turns the Flight Recorder off" in w for w in warnings)
    assert any("pytorch#121055" in w for w in warnings)
    assert server.notes and server.notes[-1].job == "llama" and server.notes[-1].warnings == warnings


def test_a_pod_arriving_already_injected_is_injected_anew_with_one_agent_holding_a_new_token(server):
    """The webhook runs once per pod (reinvocationPolicy Never): a pod that arrives injected was written so
    by its author, whose agent and token are not frwatch's."""
    req = review(pod("llama"))
    once = patched(req["request"]["object"], server.post(req))
    twice = patched(once, server.post(review(once)))
    agents = [x for x in twice["spec"]["initContainers"] if x["name"] == c.AGENT_CONTAINER]
    assert len(agents) == 1
    token = env_name("agent", "token")
    assert env_of(agents[0])[token] != env_of(once["spec"]["initContainers"][0])[token]
    assert token not in env_of(next(x for x in twice["spec"]["initContainers"] if x["name"] == c.LOOKALIKE_CONTAINER))
    assert len([v for v in twice["spec"]["volumes"] if v["name"] == c.DUMP_VOLUME]) == 1


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
    again = admit(injected)  # arriving injected (reinvocationPolicy is Never: only a tenant's pod does): redone
    assert [x["name"] for x in again["spec"]["initContainers"]] == [c.AGENT_CONTAINER, c.LOOKALIKE_CONTAINER]
    admit(pod("plain"))  # not opted in
    admit(pod("typo"))  # malformed opt-in: left untouched
    monkeypatch.setattr("frwatch_operator.webhook.inject", lambda *a, **k: 1 / 0)
    admit(pod("llama", index=1))
    assert outcomes == ["injected", "injected", "untouched", "untouched", "error"]


# --- the agent's token, its security context, and the pods frwatch does not inject -------------------------


def test_each_agent_gets_the_token_of_its_own_pod_even_without_a_pod_name(server):
    named = patched(pod("llama"), server.post(review(pod("llama"))))
    nameless = pod("llama")
    nameless["metadata"]["generateName"] = nameless["metadata"].pop("name")[:-1]  # a name is not known yet
    generated = patched(nameless, server.post(review(nameless)))
    tokens = [env_of(p["spec"]["initContainers"][0])[env_name("agent", "token")] for p in (named, generated)]
    ids = [p["metadata"]["annotations"][c.ANN_AGENT_ID] for p in (named, generated)]
    assert ids[0] != ids[1] and tokens[0] != tokens[1]
    assert tokens == [KEYS.token_of("team", "llama", i) for i in ids]
    agent = named["spec"]["initContainers"][0]
    assert agent["securityContext"] == SECURITY_CONTEXT


def test_without_a_key_yet_the_pod_is_injected_with_a_warning_and_no_token(index):
    with WebhookThread(index, webhook_config(), AgentKeys(timedelta(minutes=10))) as srv:
        resp = srv.post(review(pod("llama")))
    out = patched(pod("llama"), resp)
    assert env_name("agent", "token") not in env_of(out["spec"]["initContainers"][0])
    assert any("no agent key yet" in w for w in resp["response"]["warnings"])


def test_image_pull_secrets_are_added_once_and_the_answer_says_they_must_exist(index):
    with WebhookThread(index, webhook_config(image_pull_secrets="regcred, other"), KEYS) as srv:
        mine = pod("llama")
        mine["spec"]["imagePullSecrets"] = [{"name": "regcred"}]
        resp = srv.post(review(mine))
    out = patched(mine, resp)
    assert out["spec"]["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other"}]
    notice = [w for w in resp["response"]["warnings"] if "imagePullSecrets" in w]
    assert notice == [
        "frwatch: the agent's image is pulled with imagePullSecrets regcred, other: each must exist in the "
        "pod's namespace (frwatch does not create it)"
    ]
    assert not srv.notes or "imagePullSecrets" not in " ".join(srv.notes[-1].warnings)  # no Event per pod


@pytest.mark.parametrize(
    ("mangle", "says"),
    [
        (lambda p: p["spec"].__setitem__("containers", [{"name": f"c{i}", "image": "i"} for i in range(MAX_CONTAINERS + 1)]), f"more than the {MAX_CONTAINERS}"),
        (lambda p: p["spec"]["containers"][0].__setitem__("env", [{"name": f"E{i}", "value": "x"} for i in range(MAX_LIST_ITEMS + 1)]), f"more than the {MAX_LIST_ITEMS}"),
        (lambda p: p["metadata"]["labels"].__setitem__(c.LABEL_JOBSET_RESTART_ATTEMPT, ".."), "not a usable key segment"),
    ],
    ids=["too-many-containers",
         "too-many-env-entries", "attempt-escaping-its-prefix"],
)  # fmt: skip
def test_pods_frwatch_does_not_inject_are_admitted_unchanged_with_the_reason(server, mangle, says):
    p = pod("llama")
    mangle(p)
    resp = server.post(review(p))["response"]
    assert resp["allowed"] is True and "patch" not in resp
    assert len(resp["warnings"]) == 1 and says in resp["warnings"][0], resp["warnings"]
    assert not server.notes[-1].injected and server.notes[-1].warnings == resp["warnings"]


def test_a_huge_pod_is_refused_before_any_injection_work(server, monkeypatch):
    """4000 containers (the issue's pod) blocked the operator's loop past the webhook timeout: the budget
    is checked first, so no per-container work runs (benchmarks/bench_webhook.py --huge times it)."""
    import frwatch_operator.capture.webhook_patch as injection

    def no_per_container_work(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("per-container work ran for a pod past the budget")

    monkeypatch.setattr(injection, "_env_list", no_per_container_work)
    p = pod("llama", containers=4000, env=[{"name": f"E{i}", "value": "x"} for i in range(5)])
    resp = server.post(review(p))["response"]
    assert "patch" not in resp and f"more than the {MAX_CONTAINERS}" in resp["warnings"][0]


def test_a_pod_arriving_as_if_injected_with_its_own_agent_is_stripped_and_injected(server):
    """The issue-25 attack: ``frwatch.io/injected`` pre-set (it skipped the injection) and the tenant's own
    ``frwatch-agent`` holding a token and the control port of its choosing."""
    p = pod("llama")
    p["metadata"]["annotations"] = {c.ANN_INJECTED: "true", c.ANN_AGENT_ID: "k.forged", "mine": "kept"}
    fake = {"name": c.AGENT_CONTAINER, "image": "mine", "args": ["agent"], "restartPolicy": "Always",
            "env": [{"name": env_name("agent", "token"), "value": "stolen"}, {"name": "KEEP", "value": "1"}],
            "ports": [{"name": c.AGENT_CONTROL_PORT_NAME, "containerPort": 9464}, {"name": "web", "containerPort": 80}]}
    p["spec"]["initContainers"] = [fake]
    p["spec"]["containers"][0]["env"] = [{"name": env_name("agent", "token"), "value": "stolen"}]
    p["spec"]["volumes"] = [{"name": c.DUMP_VOLUME, "hostPath": {"path": "/"}}]
    resp = server.post(review(p))
    out = patched(p, resp)
    annotations = out["metadata"]["annotations"]
    assert annotations["mine"] == "kept" and annotations[c.ANN_INJECTED] != "true"
    assert annotations[c.ANN_AGENT_ID] != "k.forged"
    agent, renamed = out["spec"]["initContainers"]
    assert agent["name"] == c.AGENT_CONTAINER and agent["args"] == ["agent"]
    assert env_of(agent)[env_name("agent", "token")] == KEYS.token_of("team", "llama", annotations[c.ANN_AGENT_ID])
    assert renamed["name"] == c.LOOKALIKE_CONTAINER and renamed["image"] == "mine"
    assert env_of(renamed) == {"KEEP": "1"}  # no token, none of frwatch's variables
    assert renamed["ports"] == [{"name": "web", "containerPort": 80}]
    assert "stolen" not in json.dumps(out["spec"]["containers"])
    assert [v for v in out["spec"]["volumes"] if v["name"] == c.DUMP_VOLUME] == [
        {"name": c.DUMP_VOLUME, "emptyDir": {"sizeLimit": Config().fr.volume_size_limit}}
    ]
    warnings = " ".join(resp["response"]["warnings"])
    assert "renamed 'frwatch-agent-lookalike'" in warnings and c.ANN_INJECTED in warnings
