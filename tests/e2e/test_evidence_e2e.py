"""Evidence beyond Flight Recorder, end to end with real torch ranks (issue 14): a rank that raises a Python
exception mid-step, a rank killed by SIGKILL, and gloo aborting the receiver of an oversize send. Each
time the store holds every training container's log (the operator read pods/log before the pods were
gone) and the Incident says so; the manifest ties each log to its pod; and the verdict, read from those
logs by the analyzer, names what happened first: the exception with its message and line, the kill
(exit 137), gloo's abort of the receiver.

Reading the store needs its endpoint and keys that may read the job's prefix: on the local cluster, the
namespace's ``frwatch-s3`` Secret and the local store; against a real cluster ``FRWATCH_E2E_S3_ENDPOINT``
(and ``FRWATCH_E2E_S3_BUCKET``/``FRWATCH_E2E_S3_PREFIX`` when not ``frwatch``), with keys from
``FRWATCH_E2E_S3_READ_SECRET`` (a Secret of the test namespace holding reader keys: the agents' own
keys may only write) or else ``frwatch-s3``.
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any

import boto3
import botocore.config
import pytest
from e2e_helpers import WORKLOAD, Target

from frwatch_analyzers.store.layout import RootUrl
from frwatch_analyzers.store.manifest import Manifest
from frwatch_analyzers.store.node_record import parse_node_record
from frwatch_dev import workloads
from frwatch_operator import constants as c

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


class Store:
    """The evidence of one job attempt, read from the store."""

    def __init__(self, target: Target, incident: dict[str, Any]) -> None:
        secret = os.environ.get("FRWATCH_E2E_S3_READ_SECRET", "frwatch-s3")
        data = target.core.read_namespaced_secret(secret, target.namespace).data
        keys = {k: base64.b64decode(v).decode() for k, v in data.items()}
        endpoint = os.environ.get("FRWATCH_E2E_S3_ENDPOINT") or (target.local.store.endpoint if target.local else "")
        if not endpoint:
            pytest.skip("set FRWATCH_E2E_S3_ENDPOINT to read the evidence in the store")
        self.root = RootUrl.parse(incident["spec"]["storageUrl"])
        self.s3 = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id=keys[c.ENV_AWS_ACCESS_KEY_ID], aws_secret_access_key=keys[c.ENV_AWS_SECRET_ACCESS_KEY],
            config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
        )  # fmt: skip

    def get(self, rel: str) -> bytes:
        body = self.s3.get_object(Bucket=self.root.bucket, Key=f"{self.root.root}/{rel}")["Body"]
        return body.read()  # type: ignore[no-any-return]

    def manifest(self) -> Manifest:
        return Manifest.model_validate_json(self.get("manifest.json"))

    def log(self, pod: str, container: str = "pytorch") -> str:
        return self.get(f"logs/{pod}/{container}.txt").decode(errors="replace")


def _condition(incident: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(x for x in incident["status"]["conditions"] if x["type"] == kind)


def _exits(incident: dict[str, Any]) -> dict[str, int | None]:
    """pod -> the training container's exit code, as the operator saw it through the API."""
    return {p["name"]: next((e.get("exitCode") for e in p.get("exits") or [] if e["container"] == "pytorch"), None)
            for p in incident["status"]["observed"]["pods"]}  # fmt: skip


def _first_cause(store: Store) -> dict[str, Any]:
    """The verdict's cause marked as the first rank to fail."""
    verdict = json.loads(store.get("verdict.json"))
    firsts = [x for x in verdict["causes"] if x["first"]]
    assert len(firsts) == 1, verdict["causes"]
    return firsts[0]  # type: ignore[no-any-return]


def _line_of(module: str, text: str) -> int:
    """The line of the workload's source that holds ``text`` (the image runs the same source)."""
    lines = (Path(workloads.__file__).parent / module).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _every_log_stored(store: Store, incident: dict[str, Any], pods: int) -> Manifest:
    logs = _condition(incident, "LogsCollected")
    assert logs["status"] == "True", logs
    manifest = store.manifest()
    assert len(manifest.pods) == pods
    for pod in manifest.pods:
        (tail,) = [x for x in pod.logs if x.variant == "tail"]
        assert tail.key.endswith(f"/logs/{pod.pod}/pytorch.txt") and not tail.unavailable, pod
    return manifest


def test_a_rank_raising_an_exception_mid_step_has_its_traceback_in_the_store(target: Target) -> None:
    name = target.submit([*WORKLOAD, "--scenario", "crash"])  # rank 2 (worker-1) raises at step 3
    ann = target.wait_verdict(name)
    incident = target.reported_incident(name)
    store = Store(target, incident)
    _every_log_stored(store, incident, 4)
    log = store.log(f"{name}-worker-1")
    assert "Traceback (most recent call last):" in log
    assert "ValueError: corrupt sample in shard 2 at step 3: cannot decode record" in log
    assert 'faulty_training.py", line' in log and "in load_batch" in log
    assert _exits(incident)[f"{name}-worker-1"] == 1
    peer = store.log(f"{name}-master-0")  # the others only saw their peer go
    assert "Connection closed by peer" in peer or "Connection reset" in peer
    # the verdict names the exception, its message and line, and the rank that failed first
    first = _first_cause(store)
    line = _line_of("faulty_training.py", 'raise ValueError(f"corrupt sample')
    assert (first["rank"], first["kind"], first["exception"]) == (2, "exception", "ValueError"), first
    assert first["message"] == "ValueError: corrupt sample in shard 2 at step 3: cannot decode record"
    assert first["location"] == f"faulty_training.py:{line}" and first["step"] == 3
    assert first["pod"] == f"{name}-worker-1" and first["source"].endswith(f"/logs/{name}-worker-1/pytorch.txt")
    assert ann[c.ANN_VERDICT].startswith(f"rank 2 crashed: ValueError at faulty_training.py:{line}"), ann
    assert ann[c.ANN_SUSPECT_RANKS] == "2"


def test_a_rank_killed_by_sigkill_is_seen_as_killed_with_what_it_printed(target: Target) -> None:
    name = target.submit([*WORKLOAD, "--scenario", "killed"])  # rank 2 (worker-1) SIGKILLs itself at step 3
    ann = target.wait_verdict(name)
    incident = target.reported_incident(name)
    assert _exits(incident)[f"{name}-worker-1"] == 137
    store = Store(target, incident)
    manifest = _every_log_stored(store, incident, 4)
    assert store.log(f"{name}-worker-1").endswith("rank 2: step 3: loading a batch\n")  # nothing after the kill
    (rank2,) = [r for r in manifest.ranks if r.rank == 2]
    assert not rank2.dumped and rank2.pod == f"{name}-worker-1"
    first = _first_cause(store)  # named as killed, exit 137, the first to fail
    assert (first["rank"], first["kind"], first["pod"]) == (2, "killed", f"{name}-worker-1"), first
    assert "exit code 137" in first["message"]
    assert ann[c.ANN_VERDICT].startswith("rank 2 was killed"), ann
    # the node it ran on, as the API showed it when collection ended: its conditions (and Events naming it)
    node = first["node"]
    assert node == next(p["spec"]["nodeName"] for p in target.pods(name) if p["metadata"]["name"] == f"{name}-worker-1")
    record = parse_node_record(store.get(f"nodes/{node}.json"))
    assert record is not None and record.node == node and not record.unavailable, record
    conditions = {x["type"] for x in target.node(node)["status"]["conditions"]}
    assert conditions and {x.type for x in record.conditions} == conditions


def test_gloo_aborting_the_receiver_of_an_oversize_send_is_in_its_log(target: Target) -> None:
    name = target.submit([*WORKLOAD, "--scenario", "size"])  # rank 1 sends a larger bucket at step 3
    target.wait_verdict(name)
    incident = target.reported_incident(name)
    aborted = [pod for pod, code in _exits(incident).items() if code == 134]  # SIGABRT: gloo's enforce
    assert len(aborted) == 1, _exits(incident)
    store = Store(target, incident)
    _every_log_stored(store, incident, 4)
    log = store.log(aborted[0])
    assert "terminate called after throwing an instance of 'gloo::EnforceNotMet'" in log
    assert "Received data size doesn't match expected size" in log and "op.preamble.length <= op.nbytes" in log
    verdict = json.loads(store.get("verdict.json"))
    assert verdict["category"] == "size_mismatch" and verdict["culprit_ranks"] == [1], verdict["headline"]
    # the receiver's abort says what the sender's oversize send did to it
    (abort,) = [x for x in verdict["causes"] if x["kind"] == "gloo_abort"]
    assert abort["pod"] == aborted[0] and abort["primary"], abort
    assert re.search(r"received \d+ bytes where \d+ were expected", abort["message"]), abort["message"]
