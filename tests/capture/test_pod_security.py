"""Injected pods pass Pod Security "restricted": the checks (localcluster.podsecurity, written from the Pod
Security Standards) on the injected spec, and the API emulator admitting injected pods in a namespace
labelled ``pod-security.kubernetes.io/enforce: restricted`` while refusing what the profile forbids."""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from builders import job, pod

from frwatch_dev.localcluster import start_apiserver
from frwatch_dev.localcluster.admission import install_webhook_admission
from frwatch_dev.localcluster.podsecurity import (
    LABEL_ENFORCE,
    LABEL_WARN,
    install_pod_security,
    violations,
)
from frwatch_dev.testing.webhook_thread import KEYS, WebhookThread, webhook_config
from frwatch_operator import constants as c
from frwatch_operator.capture.optin import defaults
from frwatch_operator.capture.sidecar import JobContext
from frwatch_operator.capture.webhook_patch import apply_ops, inject
from frwatch_operator.config import Config
from frwatch_operator.webhook import HANDLER_ID, JobIndex

#: What a user's training container sets to run in a restricted namespace.
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}  # fmt: skip


def restricted_pod(job_name: str = "llama", ns: str = "team") -> dict[str, Any]:
    p = pod(job_name, ns)
    p["spec"]["containers"][0]["securityContext"] = copy.deepcopy(RESTRICTED_CONTAINER)
    return p


def injected(p: dict[str, Any]) -> dict[str, Any]:
    cfg = Config()
    ops = inject(p, defaults(cfg), cfg, JobContext("PyTorchJob", "llama", "u", "0"), "tok").ops
    return apply_ops(copy.deepcopy(p), ops)


def test_the_injected_agent_and_volume_pass_restricted_on_their_own() -> None:
    assert violations(restricted_pod(), "restricted") == []
    assert violations(injected(restricted_pod()), "restricted") == []


def test_the_checks_name_what_fails_and_only_that() -> None:
    """A user pod with no securityContext fails on its own container only, never on the agent's; the agent
    as it was injected before (no drop ALL, no runAsNonRoot, no seccomp) would fail three checks."""
    found = dict(violations(injected(pod()), "restricted"))
    assert set(found) == {"allowPrivilegeEscalation != false", "runAsNonRoot != true", "seccompProfile",
                          "unrestricted capabilities"}  # fmt: skip
    assert all('"pytorch"' in d or "pytorch" in d for d in found.values()) and c.AGENT_CONTAINER not in str(found)
    before = injected(restricted_pod())
    before["spec"]["initContainers"][0]["securityContext"] = {"allowPrivilegeEscalation": False,
                                                              "readOnlyRootFilesystem": True}  # fmt: skip
    assert {r for r, _ in violations(before, "restricted")} == {
        "runAsNonRoot != true", "seccompProfile", "unrestricted capabilities"
    }
    assert violations(before, "baseline") == []  # baseline asked for none of it


@pytest.mark.parametrize(
    ("mangle", "reason"),
    [
        (lambda s: s.__setitem__("hostNetwork", True), "host namespaces"),
        (lambda s: s["containers"][0]["securityContext"].__setitem__("privileged", True), "privileged"),
        (lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}), "hostPath volumes"),
        (lambda s: s["volumes"].append({"name": "n", "nfs": {"server": "x", "path": "/"}}), "restricted volume types"),
        (lambda s: s["containers"][0]["securityContext"].__setitem__("runAsUser", 0), "runAsUser=0"),
        (lambda s: s["containers"][0]["securityContext"]["capabilities"].__setitem__("add", ["SYS_ADMIN"]),
         "unrestricted capabilities"),
        (lambda s: s["containers"][0].__setitem__("ports", [{"containerPort": 80, "hostPort": 80}]), "hostPort"),
    ],
)  # fmt: skip
def test_each_restricted_rule_can_fail(mangle: Any, reason: str) -> None:
    p = injected(restricted_pod())
    mangle(p["spec"])
    assert reason in {r for r, _ in violations(p, "restricted")}


# --- the emulator's admission: mutating webhook first, then Pod Security ----------------------------------


def _call(url: str, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url + path, data=json.dumps(body).encode() if body is not None else None,
                                 method=method, headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    """Its own API emulator (the admission hooks stay out of the session's), the frwatch webhook registered."""
    handle = start_apiserver()
    install_webhook_admission(handle)
    install_pod_security(handle)
    index = JobIndex()
    index.upsert_job(job("llama", "strict"))
    index.upsert_job(job("llama", "warned"))
    with WebhookThread(index, webhook_config(), KEYS) as hook:
        mwc = {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "frwatch"},
            "webhooks": [{"name": "inject.frwatch.io", "clientConfig": {"url": f"{hook.url}/{HANDLER_ID}"},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["pods"]}],
                          "objectSelector": {"matchExpressions": [{"key": c.KF_LABEL_JOB_NAME, "operator": "Exists"}]},
                          "failurePolicy": "Ignore", "sideEffects": "None", "admissionReviewVersions": ["v1"]}],
        }  # fmt: skip
        assert _call(handle.url, "POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                     mwc)[0] == 201  # fmt: skip
        for ns, labels in (("strict", {LABEL_ENFORCE: "restricted"}), ("warned", {LABEL_WARN: "restricted"})):
            assert _call(handle.url, "POST", "/api/v1/namespaces", {"metadata": {"name": ns, "labels": labels}})[0] == 201
        try:
            yield handle.url
        finally:
            handle.stop()


def test_an_injected_pod_is_admitted_in_a_restricted_namespace(emulator: str) -> None:
    status, created = _call(emulator, "POST", "/api/v1/namespaces/strict/pods", restricted_pod(ns="strict"))
    assert status == 201, created
    assert [x["name"] for x in created["spec"]["initContainers"]] == [c.AGENT_CONTAINER]
    assert created["metadata"]["annotations"][c.ANN_INJECTED]


def test_a_restricted_namespace_refuses_what_the_profile_forbids_as_the_api_server_says_it(emulator: str) -> None:
    loose = pod("llama", "strict")
    loose["metadata"]["name"] = "loose"
    status, body = _call(emulator, "POST", "/api/v1/namespaces/strict/pods", loose)
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["message"].startswith('pods "loose" is forbidden: violates PodSecurity "restricted:latest": ')
    assert '"pytorch"' in body["message"] and c.AGENT_CONTAINER not in body["message"]


def test_warn_mode_admits_with_a_warning(emulator: str) -> None:
    req = urllib.request.Request(f"{emulator}/api/v1/namespaces/warned/pods", method="POST",
                                 data=json.dumps(pod("llama", "warned")).encode(),
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 201
        warnings = resp.headers.get_all("Warning") or []
    assert any("violates PodSecurity" in w for w in warnings), warnings
