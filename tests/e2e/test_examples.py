"""The numbered examples (examples/NN-*/), applied with the real kubectl as a user would, each to its
verdict. Only the image (FRWATCH_E2E_IMAGE on a real cluster) and the names (unique per run) change."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_helpers import Target, wait_for

from frwatch_dev.localcluster.kubectl import kubectl_path
from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SOFTWARE = {"desync", "size_mismatch", "dtype_mismatch", "missing_rank"}


def _kubectl(target: Target, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(
        [kubectl_path(), f"--kubeconfig={target.kubeconfig}", "-n", target.namespace, *args],
        input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def _documents(example: str) -> list[dict[str, Any]]:
    docs = []
    for path in sorted((EXAMPLES / example).glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs, f"no manifest in examples/{example}"
    return docs


def _for_this_run(doc: dict[str, Any], target: Target, suffix: str) -> dict[str, Any]:
    """The example as applied here: a unique name (and team label), the image this cluster runs."""
    doc = json.loads(json.dumps(doc))
    doc["metadata"]["name"] += f"-{suffix}"
    labels = doc["metadata"].get("labels") or {}
    if "team" in labels:
        labels["team"] += f"-{suffix}"
    selector = ((doc.get("spec") or {}).get("jobSelector") or {}).get("matchLabels") or {}
    if "team" in selector:
        selector["team"] += f"-{suffix}"
    for replica in ((doc.get("spec") or {}).get("pytorchReplicaSpecs") or {}).values():
        for container in replica["template"]["spec"]["containers"]:
            container["image"] = target.image
    return doc


def _apply(target: Target, doc: dict[str, Any]) -> str:
    _kubectl(target, "apply", "-f", "-", stdin=json.dumps(doc))
    return str(doc["metadata"]["name"])


def _policy_in_effect(target: Target, labels: dict[str, str]) -> None:
    """The operator has seen the policy (capture applies only to pods created after that): a probe job
    with the policy's labels gets the operator's CaptureEnabled Event. Explicit, whatever the load."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    replica = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
        {"name": "pytorch", "image": target.image, "command": ["python", "-c", "pass"]}]}}}  # fmt: skip
    probe = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
             "metadata": {"name": name, "namespace": target.namespace, "labels": labels},
             "spec": {"pytorchReplicaSpecs": {"Master": replica}}}  # fmt: skip
    _apply(target, probe)
    wait_for(lambda: target.events(name, "CaptureEnabled"), 60, "the policy to opt the probe job in")
    _kubectl(target, "delete", "pytorchjob", name, "--wait=false")


def test_01_an_annotated_pytorchjob_gets_its_verdict(target: Target) -> None:
    suffix = uuid.uuid4().hex[:5]
    [job] = _documents("01-opt-in-a-pytorchjob")
    assert job["metadata"]["annotations"][c.ANN_CAPTURE] == c.CAPTURE_ENABLED
    name = _apply(target, _for_this_run(job, target, suffix))
    ann = target.wait_verdict(name)
    assert ann[c.ANN_CATEGORY] in SOFTWARE, ann
    assert ann[c.ANN_SUSPECT_RANKS] == "1"
    described = _kubectl(target, "describe", "pytorchjob", name)
    assert c.ANN_VERDICT in described and "Diagnosed" in described


def test_02_a_namespace_capturepolicy_opts_a_labelled_job_in(target: Target) -> None:
    suffix = uuid.uuid4().hex[:5]
    policy, job = (_for_this_run(d, target, suffix) for d in _documents("02-namespace-capturepolicy"))
    assert policy["kind"] == c.POLICY_KIND and job["kind"] == "PyTorchJob"
    assert c.ANN_CAPTURE not in (job["metadata"].get("annotations") or {})
    policy_name = _apply(target, policy)
    _policy_in_effect(target, job["metadata"]["labels"])
    name = _apply(target, job)
    ann = target.wait_verdict(name)
    assert ann[c.ANN_CATEGORY] == "missing_rank", ann
    assert ann[c.ANN_SUSPECT_RANKS] == "1"
    _kubectl(target, "delete", "capturepolicy", policy_name)


def test_03_a_hardware_finding_plans_a_cordon_in_dry_run(target: Target) -> None:
    if target.local is None:
        pytest.skip("needs the stand-ins: the GPU hang is fabricated by the demo workload (no GPU here)")
    suffix = uuid.uuid4().hex[:5]
    [job] = _documents("03-remediation-dry-run")
    name = _apply(target, _for_this_run(job, target, suffix))
    ann = target.wait_verdict(name)
    assert ann[c.ANN_CATEGORY] == "gpu_hang", ann
    node = target.culprit_node(name)
    plan = wait_for(lambda: target.events(name, "Remediation"), 20, "the remediation plan")
    # the dumps only nominate the node: without a probe, its health agents or a second namespace, no cordon
    assert len(plan) == 1 and plan[0].startswith(f"dry-run: no cordon; skip {node} (nominated only"), plan
    assert not target.node(node)["spec"].get("unschedulable")
