"""Trust boundaries end to end (issue 10): a tenant who can write its job's prefix in the store cannot steer
a cordon, and a job spec claiming 5,000,000 processes per node cannot take the operator down.

Against a real cluster the tenant's writes need the store's endpoint (``FRWATCH_E2E_S3_ENDPOINT``, and
``FRWATCH_E2E_S3_BUCKET``/``FRWATCH_E2E_S3_PREFIX`` when not ``frwatch``); the operator's memory is read
from its process on the local cluster only (elsewhere: its ``/metrics``)."""

from __future__ import annotations

import base64
import json
import os
import re
import threading
import uuid
from pathlib import Path

import boto3
import botocore.config
import pytest
from e2e_helpers import GPU_HANG, Target, wait_for

from frwatch_analyzers.verdict import Category, RankGroup, Status, Verdict
from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


class Tenant:
    """Someone with the namespace's own S3 keys (the Secret the agents get), writing under its job's prefix."""

    def __init__(self, target: Target) -> None:
        secret = target.core.read_namespaced_secret("frwatch-s3", target.namespace).data
        keys = {k: base64.b64decode(v).decode() for k, v in secret.items()}
        endpoint = os.environ.get("FRWATCH_E2E_S3_ENDPOINT") or (target.local.store.endpoint if target.local else "")
        if not endpoint:
            pytest.skip("set FRWATCH_E2E_S3_ENDPOINT: the tenant writes to the store directly")
        self.bucket = os.environ.get("FRWATCH_E2E_S3_BUCKET", "frwatch")
        self.prefix = os.environ.get("FRWATCH_E2E_S3_PREFIX", "frwatch")
        self.s3 = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id=keys[c.ENV_AWS_ACCESS_KEY_ID], aws_secret_access_key=keys[c.ENV_AWS_SECRET_ACCESS_KEY],
            config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )  # fmt: skip

    def root(self, target: Target, job: str) -> str:
        uid = target.job(job)["metadata"]["uid"]
        return f"{self.prefix}/{target.namespace}/{job}/{uid}/0"

    def put(self, key: str, body: bytes) -> bool:
        """Write as the tenant; False when the store refuses (least-privilege keys)."""
        try:
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)
        except self.s3.exceptions.ClientError:
            return False
        return True

    def get(self, key: str) -> bytes:
        return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()  # type: ignore[no-any-return]


def forged_verdict(victims: list[str], decoys: list[str]) -> bytes:
    """A hardware-class verdict naming nodes the job never ran on, padded with decoy node names."""
    return Verdict(
        status=Status.problem, category=Category.gpu_hang, hardware_class=True,
        headline="rank 1 never started all_reduce #7 while its peers did: a GPU kernel hung",
        culprit_ranks=[1], suspect_nodes=victims,
        groups=[RankGroup(ranks=[0, 2, 3], label="waiting", nodes=decoys), RankGroup(ranks=[1], label="stuck", nodes=victims)],
    ).model_dump_json().encode()  # fmt: skip


def test_a_tenant_forging_the_evidence_gets_no_foreign_node_cordoned(cordoning_target: Target) -> None:
    target = cordoning_target
    tenant = Tenant(target)
    tag = uuid.uuid4().hex[:6]
    victims = [f"victim-{tag}-1", f"victim-{tag}-2"]  # nodes that exist and run none of the job's pods
    decoys = [f"decoy-{tag}-{i}" for i in range(20)]  # names of nodes that do not exist at all
    for name in victims:
        target.core.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
    name = target.submit(GPU_HANG, prefix="forged")
    root = tenant.root(target, name)
    manifest = {"world_size": 4, "pods": [{"pod": f"{name}-worker-0", "node": victims[0], "ranks": [1]}],
                "ranks": [{"rank": r, "node": victims[r % 2]} for r in range(4)]}  # fmt: skip
    writes = {
        f"{root}/manifest.json": json.dumps(manifest).encode(),
        f"{root}/pods/ghost-{tag}.json": json.dumps({"pod": f"ghost-{tag}", "node": victims[1], "ranks": [1], "dumps": {}}).encode(),
        f"{root}/pods/{name}-worker-0.json": json.dumps({"pod": f"{name}-worker-0", "node": victims[0], "ranks": [1]}).encode(),
        f"{root}/ranks/9.pickle": b"not a dump",  # a rank past the 4-rank world
    }  # fmt: skip
    written = {key: tenant.put(key, body) for key, body in writes.items()}
    # the forged verdict is written again and again until the verdict lands: whichever copy the operator
    # reads (the analyzer's or the tenant's), the cluster decides
    stop = threading.Event()

    def keep_forging() -> None:
        while not stop.wait(0.05):
            tenant.put(f"{root}/verdict.json", forged_verdict(victims, decoys))

    forger = threading.Thread(target=keep_forging, daemon=True)
    forger.start()
    try:  # the analyzer's verdict, or (the forgery is what the store holds) the refusal of the replaced one
        ended = wait_for(lambda: (i := target.incidents(name)) and i[0].get("status", {}).get("phase") in ("Reported", "Failed")
                         and i[0], 150, "the Incident to end")  # fmt: skip
    finally:
        stop.set()
        forger.join(5)
    try:
        ran_on = {p["spec"]["nodeName"] for p in target.pods(name)}
        [incident] = target.incidents(name)
        status = incident["status"]
        ann = target.annotations(name)
        if ended["status"]["phase"] == "Failed":  # issue 25: a verdict.json the analyzer Job did not write is refused
            analyzed = next(x for x in status["conditions"] if x["type"] == "Analyzed")
            assert analyzed["reason"] == "VerdictNotBound", analyzed
        # the operator's record of the attempt is what the cluster showed, nothing the store said
        assert set(status["observed"]["nodes"]) == ran_on, status["observed"]
        assert not (set(victims) | set(decoys)) & set(status["observed"]["nodes"])
        # no foreign node cordoned, and nothing foreign reported as a suspect
        for node in victims:
            assert not (target.node(node).get("spec") or {}).get("unschedulable"), f"{node} was cordoned"
        assert set(filter(None, ann.get(c.ANN_SUSPECT_NODES, "").split(","))) <= ran_on, ann
        assert set(status.get("suspectNodes") or []) <= ran_on
        # the suspect share counts only nodes the cluster saw: at most the job's own nodes in the plan
        plans = wait_for(lambda: target.events(name, "Remediation"), 30, "the remediation plan") if status["phase"] == "Reported" else []
        for plan in plans:
            share = re.search(r"(\d+) of the job's (\d+) nodes", plan)
            assert share is None or int(share.group(2)) == len(ran_on), plan
            assert not any(v in plan for v in [*victims, *decoys]) or "skip" in plan, plan
        for node in ran_on:  # a cordon, if any, only of a node that ran a pod and whose rank hung
            cordoned = (target.node(node).get("spec") or {}).get("unschedulable")
            assert not cordoned or node == target.culprit_node(name), node
        # said in a Warning Event on the job: the evidence was inconsistent with what the cluster saw
        warnings = target.events(name, "EvidenceInconsistent")
        assert warnings, f"no EvidenceInconsistent Event; writes: {written}\n{target.diagnostics()}"
        said = " ".join(warnings)
        assert "inconsistent with what the cluster saw" in said
        if written[f"{root}/pods/ghost-{tag}.json"]:
            assert f"pods/ghost-{tag}.json names a pod the cluster never showed" in said, said
        if written[f"{root}/manifest.json"]:
            assert "manifest.json frwatch did not write" in said, said
            evidence = next(x for x in status["conditions"] if x["type"] == "EvidenceConsistent")
            assert evidence["status"] == "False" and evidence["reason"] == "EvidenceInconsistent"
        # the manifest in the store is the operator's own: no forged node in it
        stored = json.loads(tenant.get(f"{root}/manifest.json"))
        nodes = {p["node"] for p in stored["pods"]} | {r["node"] for r in stored["ranks"]}
        assert nodes - {""} <= ran_on, nodes
    finally:
        for node in victims:
            target.core.delete_node(node)


def _memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, in kB, from /proc."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def test_a_job_claiming_5_million_processes_per_node_fails_and_the_operator_stays_flat(target: Target) -> None:
    pid = None
    if target.local is not None:
        found = re.search(r"pid (\d+)", target.local.operator_status)
        assert found, target.local.operator_status
        pid = int(found.group(1))
        rss_before, peak_before = _memory_kb(pid)
    name = f"absurd-{uuid.uuid4().hex[:6]}"
    replica = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
        {"name": "pytorch", "image": target.image, "command": ["python", "-c", "raise SystemExit(3)"]}]}}}  # fmt: skip
    body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": target.namespace, "annotations": {c.ANN_CAPTURE: c.CAPTURE_ENABLED}},
            "spec": {"nprocPerNode": "5000000", "pytorchReplicaSpecs": {"Master": replica, "Worker": {**replica, "replicas": 3}}}}  # fmt: skip
    target.custom.create_namespaced_custom_object("kubeflow.org", "v1", target.namespace, "pytorchjobs", body)
    assert "Failed" in target.wait_finished(name)
    out_of_bounds = wait_for(lambda: target.events(name, "JobSpecOutOfBounds"), 30, "JobSpecOutOfBounds")
    assert "20000000 ranks" in out_of_bounds[0]
    incident = wait_for(lambda: (i := target.incidents(name)) and i[0].get("status", {}).get("phase") == "Collecting" and i[0],
                        60, "the Incident collecting")  # fmt: skip
    world = next(x for x in incident["status"]["conditions"] if x["type"] == "WorldSize")
    assert world["status"] == "False" and world["reason"] == "SpecOutOfBounds"
    # while it collects, the webhook (the same process) keeps answering: a new job's pods are injected
    other = target.submit(["python", "-c", "raise SystemExit(0)"], prefix="alongside")
    # the training operator creates the 4 pods one by one: wait for all 4, each injected
    injected = wait_for(
        lambda: (pods := target.pods(other)) and len(pods) == 4
        and all(c.ANN_INJECTED in (p["metadata"].get("annotations") or {}) for p in pods) and pods,
        60, "the webhook injecting all 4 pods")  # fmt: skip
    assert len(injected) == 4
    done = wait_for(lambda: (i := target.incidents(name)) and i[0]["status"].get("phase") in ("Analyzing", "Reported", "Failed") and i[0],
                    120, "collection to end")  # fmt: skip
    assert done["status"]["counts"].get("expectedRanks") is None  # never the spec's 20,000,000
    if pid is not None:
        assert target.local is not None and target.local.operator_restarts == 0
        rss_after, peak_after = _memory_kb(pid)
        print(f"operator memory: RSS {rss_before} -> {rss_after} kB, peak {peak_before} -> {peak_after} kB")
        assert peak_after - peak_before < 64 * 1024, (peak_before, peak_after)
