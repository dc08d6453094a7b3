"""Resilience: the operator killed mid-collection resumes from the Incident's status; S3 down mid-collection
loses nothing; a live rank that did not dump is asked through its agent (real agent process)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness import Cluster, agent_token, eventually, start_agent, upload_as_agent
from test_collection import key_of, long_deadline_policy, manifest_of

from frwatch_dev.ports import free_port
from frwatch_operator import constants as c
from frwatch_operator.store.s3 import S3Store

pytestmark = pytest.mark.slow


def test_the_operator_killed_during_collection_resumes_one_incident_one_manifest(
    cluster: Cluster, start_operator, store: S3Store, real_dumps: dict[int, bytes]
):
    long_deadline_policy(cluster)
    first = start_operator()
    job = cluster.create_job("llama", world=2)
    pods = cluster.create_pods(first, job, 2)
    for p in pods:
        cluster.running(p)
    cluster.exited(pods[1], exit_code=1)
    before = cluster.incident(phase="Collecting")
    first.kill()  # SIGKILL in the middle of collection

    for rank, pod in enumerate(pods):  # the dumps arrive while no operator runs
        upload_as_agent(store, job, pod, f"node-{rank}", {rank: real_dumps[rank]})
    cluster.exited(pods[0], exit_code=1)  # and another failure event of the same attempt

    second = start_operator()
    after = cluster.incident(phase="Analyzing", timeout=20)  # the second operator's timer handed it over
    cluster.failure_looked_at(second, *pods)  # and it handled the (re-listed) failed pods: nothing repeated
    assert len(cluster.incidents()) == 1
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["status"]["detectedAt"] == before["status"]["detectedAt"]
    assert after["status"]["collectionDeadline"] == before["status"]["collectionDeadline"]
    assert cluster.job("llama")["metadata"]["annotations"][c.ANN_ATTEMPT] == "1"  # not bumped twice
    written = [r for op in (first, second) for r in op.log_records() if "manifest written" in r["event"]]
    assert len(written) == 1, written
    m = manifest_of(store, key_of(job))
    assert [r.dumped for r in m.ranks] == [True, True]
    assert m.collection_started == before["status"]["detectedAt"]
    opened = [e for e in cluster.events("llama") if e.reason == "IncidentOpened"]
    assert len(opened) == 1


def test_s3_down_during_collection_loses_nothing(
    cluster: Cluster, start_operator, store: S3Store, s3: Any, real_dumps: dict[int, bytes], tmp_path: Path
):
    long_deadline_policy(cluster)
    op = start_operator()
    job = cluster.create_job("gpt", world=2)
    pods = cluster.create_pods(op, job, 2)
    for p in pods:
        cluster.running(p)
    agent = start_agent(s3.env(), job, pods[1], "node-1", tmp_path, control_port=free_port(),
                        token=agent_token(cluster.pod(pods[1])))  # fmt: skip
    try:
        upload_as_agent(store, job, pods[0], "node-0", {0: real_dumps[0]})
        cluster.exited(pods[0], exit_code=1)
        cluster.incident(phase="Collecting")
        with s3.down():
            # rank 1 dumps while the store is down: its agent keeps it and retries, the operator retries
            (agent.dump_dir / f"{c.DUMP_FILE_PREFIX}1").write_bytes(real_dumps[1])
            eventually(retried(op), "the operator failing to reach the store and retrying")
            assert cluster.incidents()[0]["status"]["phase"] == "Collecting"
        incident = cluster.incident(phase="Analyzing", timeout=30)
    finally:
        agent.stop()
    assert incident["status"]["counts"]["dumpedRanks"] == 2
    m = manifest_of(store, key_of(job))
    assert not m.deadline_reached and [r.dumped for r in m.ranks] == [True, True]
    assert store.get(key_of(job).rank(1)) == real_dumps[1]
    assert retried(op)(), "no retry seen"


def retried(op: Any) -> Any:
    """Whether ``op`` logged a store it could not reach and a retry: the store outage was seen."""
    return lambda: [r for r in op.log_records() if "unreachable" in r["event"] or "will retry" in r["event"]]


def _rank_listening_on_its_pipe(dump_dir: Path, rank: int, dump: bytes, stop: threading.Event) -> None:
    """A rank with NCCL's on-demand dump: whatever is written to its pipe makes it write its dump."""
    pipe = dump_dir / f"{c.DUMP_FILE_PREFIX}{rank}.pipe"
    os.mkfifo(pipe)
    fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    try:
        while not stop.is_set():
            try:
                data = os.read(fd, 64)
            except BlockingIOError:
                data = b""
            if data:
                (dump_dir / f"{c.DUMP_FILE_PREFIX}{rank}").write_bytes(dump)
                return
            time.sleep(0.05)
    finally:
        os.close(fd)


def test_a_live_rank_that_did_not_dump_is_asked_through_its_agent(
    cluster: Cluster, start_operator, store: S3Store, s3: Any, real_dumps: dict[int, bytes], tmp_path: Path
):
    long_deadline_policy(cluster)
    port = free_port()
    op = start_operator(FRWATCH_AGENT_CONTROL_PORT=str(port))  # the port the webhook injects
    job = cluster.create_job("t5", world=2)
    pods = cluster.create_pods(op, job, 2)
    for p in pods:
        cluster.running(p)
    agent = start_agent(s3.env(), job, pods[1], "node-1", tmp_path, control_port=port,
                        token=agent_token(cluster.pod(pods[1])))  # the webhook's, from the key ring
    stop = threading.Event()
    rank1 = threading.Thread(
        target=_rank_listening_on_its_pipe, args=(agent.dump_dir, 1, real_dumps[1], stop)
    )
    rank1.start()
    try:
        upload_as_agent(store, job, pods[0], "node-0", {0: real_dumps[0]})
        cluster.exited(pods[0], exit_code=1)
        incident = cluster.incident(phase="Analyzing", timeout=20)
    finally:
        stop.set()
        rank1.join()
        agent.stop()
    assert incident["status"]["counts"]["dumpedRanks"] == 2
    assert [r.dumped for r in manifest_of(store, key_of(job)).ranks] == [True, True]
    asked = eventually(
        lambda: [r for r in op.log_records() if "asked agent of pod" in r["event"]], "the operator asking"
    )
    assert "asked rank(s) 1 to dump" in asked[0]["event"]
