"""The fanned-out analysis on the local cluster, Kubernetes as the engine: the operator's Indexed map Job
(2 shards for 4 ranks at ranksPerPod 2) run by the Job controller and the kubelet (each pod's index in
``$(JOB_COMPLETION_INDEX)``), one map pod failing once and retried by the Job, every rank's summary in the
store at the agent's key, then the reduce Job (the usual analyzer Job): the verdict of the single-pod path,
naming every rank, read from the summaries."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from kube import Kube, true_conditions, wait_for

from frwatch_analyzers.store.layout import AttemptKey
from frwatch_analyzers.verdict import Verdict
from frwatch_dev.dumps import pickle_bytes, world
from frwatch_dev.localcluster.cluster import LocalCluster
from frwatch_operator.analysis.analyzer_job import analyzer_job, effective_run
from frwatch_operator.analysis.fanout import failed_shards, map_job, shard_count
from frwatch_operator.config import load_config
from frwatch_operator.incident.record import IncidentIdentity

pytestmark = pytest.mark.slow

WORLD = 4
#: Index 0's first pod exits 7 before doing anything (a test hook in the test, not in frwatch): the
#: marker file says it already failed once; every other pod runs the map command unchanged.
FAIL_ONCE = (
    "import os, pathlib, sys\n"
    "mark = pathlib.Path(os.environ['FAIL_ONCE_MARK'])\n"
    "if os.environ['JOB_COMPLETION_INDEX'] == '0' and not mark.exists():\n"
    "    mark.write_text('failed once'); print('failing on purpose', flush=True); sys.exit(7)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)


def jobs(ns: str, name: str = "") -> str:
    return f"/apis/batch/v1/namespaces/{ns}/jobs" + (f"/{name}" if name else "")


def ended(kube: Kube, ns: str, name: str) -> list[str] | None:
    conds = true_conditions(kube.get(jobs(ns, name)))
    return conds if {"Complete", "Failed"} & set(conds) else None


@dataclass(frozen=True)
class Staged:
    """One attempt's dumps in the store and what the operator would build its Jobs from."""

    store: Any
    config: Any
    s3: Any
    key: AttemptKey
    url: str
    incident: IncidentIdentity
    run: Any

    def summaries(self) -> list[str]:
        listed = self.s3.list_objects_v2(Bucket=self.store.bucket, Prefix=f"{self.key.root}/summaries/")
        return sorted(o["Key"] for o in listed.get("Contents", []))


def staged(cluster: LocalCluster, ns: str, world_size: int) -> Staged:
    """``world_size`` ranks' dumps (rank 2 never starts collective 13) in the store; analyzer Jobs in ``ns``
    at ranksPerPod 2."""
    store = cluster.store
    assert store is not None
    base = load_config(cluster.frwatch_env())
    config = base.model_copy(
        update={"analyzer": base.analyzer.model_copy(update={"namespace": ns, "ranks_per_pod": 2})}
    )
    s3 = boto3.client(
        "s3", endpoint_url=store.endpoint, region_name=store.region, aws_access_key_id=store.access_key,
        aws_secret_access_key=store.secret_key,
    )  # fmt: skip
    key = AttemptKey("frwatch", "team", "llama", uuid.uuid4().hex, "0")
    for rank, dump in world(world_size).all_reduce(steps=20).rank(2).not_started_at(13).dumps().items():
        s3.put_object(Bucket=store.bucket, Key=key.rank(rank), Body=pickle_bytes(dump))
    incident = IncidentIdentity("team", f"llama-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex)
    return Staged(store, config, s3, key, str(key.at(store.bucket)), incident, effective_run(config.analyzer))


def start_map(kube: Kube, ns: str, at: Staged, shards: int, script: str, *env: dict[str, str]) -> tuple[Any, str]:
    """The operator's Indexed map Job, each pod's command run through ``script`` first; its manifest and name."""
    mapper = map_job(at.incident, evidence_url=at.url, s3=at.config.s3, run=at.run, shards=shards,
                     settings=at.config.analyzer)  # fmt: skip
    (container,) = mapper["spec"]["template"]["spec"]["containers"]
    container["command"] = ["python", "-c", script, *container["command"]]
    container["env"].extend(env)
    kube.create(jobs(ns), mapper)
    return mapper, mapper["metadata"]["name"]


def reduce(kube: Kube, ns: str, at: Staged) -> Verdict:
    """The reduce (the usual analyzer Job), run to completion; the verdict it wrote."""
    reducer = analyzer_job(at.incident, evidence_url=at.url, s3=at.config.s3, run=at.run, settings=at.config.analyzer)
    kube.create(jobs(ns), reducer)
    reduced_name = reducer["metadata"]["name"]
    assert wait_for(lambda: ended(kube, ns, reduced_name), 240, "the reduce Job to end") == [
        "SuccessCriteriaMet",
        "Complete",
    ]
    body = at.s3.get_object(Bucket=at.store.bucket, Key=at.key.verdict)["Body"].read()
    return Verdict.model_validate_json(body)


def test_an_indexed_map_job_then_the_reduce_gives_the_single_pod_verdict(
    cluster: LocalCluster, kube: Kube, ns: str
) -> None:
    at = staged(cluster, ns, WORLD)
    # the marker outside /tmp: the kubelet maps the pod's /tmp (an emptyDir) to a folder of each pod's own
    shared = Path(tempfile.mkdtemp(prefix="frwatch-fanout-", dir="/var/tmp"))
    try:
        _map_then_reduce(kube, ns, at, shared)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _map_then_reduce(kube: Kube, ns: str, at: Staged, tmp_path: Path) -> None:
    # --- map: the operator's Indexed Job, index 0's first pod failing once -------------------------------------
    shards = shard_count(WORLD, at.config.analyzer.ranks_per_pod)
    assert shards == 2
    _, name = start_map(kube, ns, at, shards, FAIL_ONCE, {"name": "FAIL_ONCE_MARK", "value": str(tmp_path / "failed-once")})
    outcome = wait_for(lambda: ended(kube, ns, name), 240, "the map Job to end")
    assert outcome == [
        "SuccessCriteriaMet",
        "Complete",
    ]
    status = kube.get(jobs(ns, name))["status"]  # type: ignore[index]
    assert (status["succeeded"], status["failed"], status["completedIndexes"]) == (2, 1, "0,1")
    assert (tmp_path / "failed-once").read_text() == "failed once"
    pods = kube.pods(ns, f"batch.kubernetes.io/job-name={name}")
    by_index: dict[str, list[int]] = {}
    for pod in pods:
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        by_index.setdefault(index, []).append(
            pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
        )
    assert sorted(by_index["0"]) == [0, 7] and by_index["1"] == [0]  # retried by the Job, not by frwatch
    assert at.summaries() == sorted(at.key.summary(r) for r in range(WORLD))

    # --- reduce: the usual analyzer Job ------------------------------------------------------------------------
    verdict = reduce(kube, ns, at)
    assert verdict.stats["from_summaries"] == WORLD and verdict.ranks_seen == list(range(WORLD))
    assert f"{WORLD} rank(s) read from their agents' summaries" in verdict.summary

    # the single-pod path: every dump decoded in one process
    # (in a process of its own, with the store's keys: boto3 keeps the first keys a process found)
    store = at.store
    env = {**os.environ, "AWS_ENDPOINT_URL": store.endpoint, "AWS_REGION": store.region,
           "AWS_ACCESS_KEY_ID": store.access_key, "AWS_SECRET_ACCESS_KEY": store.secret_key}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "frwatch_analyzers.cli", at.url, "--format", "json", "--from-dumps"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    single = Verdict.model_validate_json(done.stdout)
    assert single.culprit_ranks == [2]
    for same in ("status", "category", "headline", "culprit_ranks", "ranks_seen", "world_size"):
        assert getattr(verdict, same) == getattr(single, same), same
    assert not os.environ.get("KUBERNETES_SERVICE_HOST")


#: Index 0 fails every time (a poison shard), before doing anything; the other indexes map as usual.
POISON = (
    "import os, sys\n"
    "if os.environ['JOB_COMPLETION_INDEX'] == '0':\n"
    "    print('poison shard', flush=True); sys.exit(9)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)


def test_a_poison_shard_fails_its_index_alone_and_the_reduce_still_names_every_rank(
    cluster: LocalCluster, kube: Kube, ns: str
) -> None:
    """6 ranks at ranksPerPod 2: 3 map indexes; index 0 (ranks 0 and 3) fails on every try. With
    backoffLimitPerIndex it is retried alone and marked failed while 1 and 2 finish; the reduce reads ranks
    1, 2, 4, 5 from the summaries, decodes ranks 0 and 3 from their dumps, and says so."""
    world_size = 6
    at = staged(cluster, ns, world_size)
    shards = shard_count(world_size, at.config.analyzer.ranks_per_pod)
    assert shards == 3
    mapper, name = start_map(kube, ns, at, shards, POISON)
    assert wait_for(lambda: ended(kube, ns, name), 240, "the map Job to end") == ["FailureTarget", "Failed"]
    job = kube.get(jobs(ns, name))
    assert job is not None
    status = job["status"]
    assert next(x for x in status["conditions"] if x["type"] == "Failed")["reason"] == "FailedIndexes"
    per_index = mapper["spec"]["backoffLimitPerIndex"]
    # the poison index spent its own budget only; the others ran once and finished
    assert (status["failedIndexes"], status["completedIndexes"]) == ("0", "1,2")
    assert (status["succeeded"], status["failed"]) == (2, per_index + 1)
    assert failed_shards(job) == "map index(es) 0 of 3 failed: the reduce decodes the dumps of their ranks (rank % 3 in 0)"
    assert at.summaries() == sorted(at.key.summary(r) for r in (1, 2, 4, 5))

    verdict = reduce(kube, ns, at)
    assert verdict.ranks_seen == list(range(world_size)) and verdict.culprit_ranks == [2]
    assert verdict.stats["from_summaries"] == 4
    assert "4 rank(s) read from their agents' summaries" in verdict.summary
    assert "ranks 0,3 had no summary (read from the dump)" in verdict.summary
