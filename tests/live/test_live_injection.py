"""Live watch's opt-in on the pod: FRWATCH_LIVE_DIR, the bootstrap appended to the user's PYTHONPATH (never
replacing it, never set where the spec has none), the agent told to sample; through the real webhook."""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch
import pytest

from frwatch_dev.testing.admission import review
from frwatch_dev.testing.webhook_thread import KEYS, WebhookThread, webhook_config
from frwatch_operator import constants as c
from frwatch_operator.capture.live_patch import live_ops
from frwatch_operator.capture.optin import defaults
from frwatch_operator.capture.sidecar import JobContext
from frwatch_operator.capture.webhook_patch import apply_ops, inject
from frwatch_operator.config import Config, env_name
from frwatch_operator.live.policy import live_requested
from frwatch_operator.webhook import JobIndex

CFG = Config()
JOB = JobContext("PyTorchJob", "llama", "uid-1", "0")
CODE = f"{CFG.fr.dump_dir}/{c.LIVE_BOOTSTRAP_SUBDIR}"
LIVE = f"{CFG.fr.dump_dir}/{c.LIVE_SOCKET_SUBDIR}"


def pod(env: list[dict] | None = None) -> dict:
    cont: dict = {"name": "pytorch", "image": "trainer:1"}
    if env is not None:
        cont["env"] = env
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "llama-worker-0", "namespace": "team", "labels": {c.KF_LABEL_JOB_NAME: "llama"}},
        "spec": {"containers": [cont], "restartPolicy": "Never"},
    }  # fmt: skip


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def live_pod(p: dict) -> tuple[dict, list[str]]:
    capture = inject(p, defaults(CFG), CFG, JOB)
    after = apply_ops(copy.deepcopy(p), capture.ops)
    ops, warnings = live_ops(after, CFG)
    out = jsonpatch.apply_patch(copy.deepcopy(p), [*capture.ops, *ops])  # valid RFC 6902, in one patch
    assert apply_ops(copy.deepcopy(after), ops) == out
    return out, warnings


def test_the_bootstrap_is_appended_to_the_users_pythonpath() -> None:
    out, warnings = live_pod(pod([{"name": "PYTHONPATH", "value": "/app:/lib"}]))
    env = env_of(out["spec"]["containers"][0])
    assert env["PYTHONPATH"] == f"/app:/lib:{CODE}" and env[c.ENV_LIVE_DIR] == LIVE and warnings == []
    agent = env_of(out["spec"]["initContainers"][0])
    assert (
        agent[env_name("agent", "live")] == "true"
        and agent[env_name("agent", "live_period_seconds")] == "15.0"
    )
    # the ranks start only once the agent listens, i.e. after it placed the bootstrap (else a rank's Python
    # could start before its sitecustomize exists: seen on the local cluster)
    assert out["spec"]["initContainers"][0]["startupProbe"]["tcpSocket"] == {"port": c.AGENT_CONTROL_PORT_NAME}
    again, _ = live_pod(out)  # a second pass changes nothing
    assert again == out


def test_no_pythonpath_in_the_spec_is_left_alone_with_a_warning() -> None:
    """The image may set PYTHONPATH; the webhook cannot see it, so it never replaces it."""
    for env in (None, [{"name": "PYTHONPATH", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}}]):
        out, warnings = live_pod(pod(env))
        cont = out["spec"]["containers"][0]
        assert "PYTHONPATH" not in env_of(cont) or env_of(cont)["PYTHONPATH"] is None
        assert env_of(cont)[c.ENV_LIVE_DIR] == LIVE
        (w,) = warnings
        assert "worker_main()" in w and "PYTHONPATH" in w


def test_a_users_live_dir_is_kept() -> None:
    out, _ = live_pod(pod([{"name": c.ENV_LIVE_DIR, "value": "/mine"}, {"name": "PYTHONPATH", "value": ""}]))
    env = env_of(out["spec"]["containers"][0])
    assert env[c.ENV_LIVE_DIR] == "/mine" and env["PYTHONPATH"] == CODE


@pytest.mark.parametrize(("value", "wanted"), [("enabled", True), ("Enabled", False), (None, False)])
def test_opt_in_is_the_annotation(value: str | None, wanted: bool) -> None:
    ann = {} if value is None else {c.ANN_LIVE: value}
    assert live_requested({"metadata": {"annotations": ann}}, defaults(Config())) is wanted


def test_through_the_webhook_only_the_opted_in_job_gets_live_watch() -> None:
    index = JobIndex()
    for name, live in (("llama", True), ("plain", False)):
        ann = {c.ANN_CAPTURE: "enabled", **({c.ANN_LIVE: "enabled"} if live else {})}
        index.upsert_job({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                          "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}", "annotations": ann}})  # fmt: skip
    with WebhookThread(index, webhook_config(), KEYS) as server:
        outs = {}
        for name in ("llama", "plain"):
            p = pod([{"name": "PYTHONPATH", "value": "/app"}])
            p["metadata"]["labels"][c.KF_LABEL_JOB_NAME] = name
            req = review(p)
            r = server.post(req)["response"]
            outs[name] = jsonpatch.apply_patch(
                copy.deepcopy(req["request"]["object"]), json.loads(base64.b64decode(r["patch"]))
            )
    assert env_of(outs["llama"]["spec"]["containers"][0])["PYTHONPATH"] == f"/app:{CODE}"
    assert env_of(outs["plain"]["spec"]["containers"][0])["PYTHONPATH"] == "/app"
    assert c.ENV_LIVE_DIR not in env_of(outs["plain"]["spec"]["containers"][0])


def test_the_agent_is_told_the_ranks_of_its_pod_when_kubeflow_says() -> None:
    env = [{"name": "PYTHONPATH", "value": "/app"}, {"name": c.ENV_PET_NODE_RANK, "value": "2"},
           {"name": c.ENV_PET_NPROC_PER_NODE, "value": "4"}]  # fmt: skip
    out, _ = live_pod(pod(env))
    assert env_of(out["spec"]["initContainers"][0])[env_name("agent", "live_ranks")] == "8-11"
    env[2]["value"] = "auto"
    out, _ = live_pod(pod(env))
    assert env_name("agent", "live_ranks") not in env_of(out["spec"]["initContainers"][0])
