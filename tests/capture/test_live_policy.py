"""Which live watch a job gets: the job's annotations over its CapturePolicy's liveWatch over the operator's
default (one path, as capture's settings); abort only where the operator allows it."""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch
import pytest
from builders import job, policy

from frwatch_dev.testing.admission import review
from frwatch_dev.testing.webhook_thread import KEYS, WebhookThread, webhook_config
from frwatch_operator import constants as c
from frwatch_operator.capture.optin import resolve
from frwatch_operator.config import Config, OperatorSettings
from frwatch_operator.handlers.live_actions import succeeded, suspend_patch
from frwatch_operator.kinds.job_kind import PYTORCHJOB
from frwatch_operator.kinds.jobset_trainjob import JOBSET, TRAINJOB
from frwatch_operator.live.policy import live_choice, live_requested
from frwatch_operator.resources import CapturePolicySpec, LivePolicyName
from frwatch_operator.webhook import JobIndex

CFG = Config()
DUMP = LivePolicyName.DUMP_AND_ANALYZE


def settings(body: dict, policies: list, config: Config = CFG):
    decision = resolve(body, policies, config)
    assert decision.settings is not None
    return decision.settings


def test_off_by_default_and_report_by_default() -> None:
    choice = live_choice(job(), settings(job(), []), abort_allowed=False)
    assert not choice.enabled and choice.policy is LivePolicyName.REPORT and choice.problem is None


def test_the_chart_default_policy_holds_when_nothing_else_says() -> None:
    config = Config(operator=OperatorSettings(live_policy="dumpAndAnalyze"))
    body = job(annotations={c.ANN_LIVE: "enabled"})
    choice = live_choice(body, settings(body, [], config), abort_allowed=False)
    assert choice.enabled and choice.policy is DUMP


def test_the_policy_wins_over_the_chart_and_the_job_over_the_policy() -> None:
    labelled = job(labels={"team": "x"})
    pol = policy("live", spec={"jobSelector": {"matchLabels": {"team": "x"}},
                               "liveWatch": {"enabled": True, "policy": "dumpAndAnalyze"}})  # fmt: skip
    choice = live_choice(labelled, settings(labelled, [pol]), abort_allowed=True)
    assert choice.enabled and choice.policy is DUMP
    mine = job(labels={"team": "x"}, annotations={c.ANN_LIVE_POLICY: "report"})
    assert live_choice(mine, settings(mine, [pol]), abort_allowed=True).policy is LivePolicyName.REPORT
    off = job(labels={"team": "x"}, annotations={c.ANN_LIVE: "disabled"})
    assert not live_choice(off, settings(off, [pol]), abort_allowed=True).enabled


def test_abort_needs_the_operators_switch() -> None:
    body = job(annotations={c.ANN_LIVE: "enabled", c.ANN_LIVE_POLICY: "abort"})
    allowed = live_choice(body, settings(body, []), abort_allowed=True)
    assert allowed.policy is LivePolicyName.ABORT and allowed.problem is None
    refused = live_choice(body, settings(body, []), abort_allowed=False)
    assert refused.policy is DUMP and "abortAllowed" in (refused.problem or "")


@pytest.mark.parametrize(("key", "value"), [(c.ANN_LIVE, "yes"), (c.ANN_LIVE_POLICY, "dump")])
def test_a_malformed_annotation_is_ignored_and_said(key: str, value: str) -> None:
    pol = policy("live", spec={"liveWatch": {"enabled": True, "policy": "dumpAndAnalyze"}})
    body = job(annotations={key: value})
    choice = live_choice(body, settings(body, [pol]), abort_allowed=False)
    assert choice.enabled and choice.policy is DUMP  # the policy's choice holds
    assert choice.problem is not None and value in choice.problem


def test_without_capture_there_is_no_live_watch() -> None:
    assert not live_requested(job(annotations={c.ANN_LIVE: "enabled"}), None)


def test_a_malformed_policy_field_is_refused_by_the_model() -> None:
    with pytest.raises(ValueError, match=r"policy"):
        CapturePolicySpec.model_validate({"liveWatch": {"policy": "kill"}})


def test_suspend_is_the_kinds_own_field() -> None:
    assert suspend_patch(PYTORCHJOB) == {"spec": {"runPolicy": {"suspend": True}}}
    assert suspend_patch(TRAINJOB) == {"spec": {"suspend": True}}
    assert suspend_patch(JOBSET) == {"spec": {"suspend": True}}


def test_succeeded_reads_the_kinds_condition() -> None:
    done = {"status": {"conditions": [{"type": "Succeeded", "status": "True"}]}}
    assert succeeded(PYTORCHJOB, done) and not succeeded(JOBSET, done)
    assert not succeeded(PYTORCHJOB, {"status": {"conditions": "garbage"}})


def test_through_the_webhook_a_policy_turns_live_watch_on_and_the_job_can_turn_it_off() -> None:
    """The webhook's path: a CapturePolicy with liveWatch.enabled gives its jobs' pods the bootstrap; a job of
    it annotated frwatch.io/live: disabled gets capture without live watch."""
    index = JobIndex()
    index.upsert_policy(policy("live", spec={"jobSelector": {"matchLabels": {"live": "yes"}},
                                             "liveWatch": {"enabled": True}}))  # fmt: skip
    for name, ann in (("llama", {}), ("quiet", {c.ANN_LIVE: c.LIVE_DISABLED})):
        index.upsert_job({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                          "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}",
                                       "labels": {"live": "yes"}, "annotations": ann}})  # fmt: skip
    envs = {}
    with WebhookThread(index, webhook_config(), KEYS) as server:
        for name in ("llama", "quiet"):
            p = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"{name}-worker-0", "namespace": "team", "labels": {c.KF_LABEL_JOB_NAME: name}},
                 "spec": {"containers": [{"name": "pytorch", "image": "t:1", "env": [{"name": "PYTHONPATH", "value": "/app"}]}]}}  # fmt: skip
            req = review(p)
            r = server.post(req)["response"]
            out = jsonpatch.apply_patch(
                copy.deepcopy(req["request"]["object"]), json.loads(base64.b64decode(r["patch"]))
            )
            envs[name] = {e["name"]: e.get("value") for e in out["spec"]["containers"][0].get("env", [])}
    assert c.ENV_LIVE_DIR in envs["llama"] and envs["llama"]["PYTHONPATH"].startswith("/app:")
    assert c.ENV_LIVE_DIR not in envs["quiet"] and envs["quiet"]["PYTHONPATH"] == "/app"
    assert c.ENV_FR_DUMP_TEMP_FILE in envs["quiet"]  # captured all the same
