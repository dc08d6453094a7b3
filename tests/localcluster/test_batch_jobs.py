"""batch/v1 Jobs: the command really runs; Complete/Failed conditions; the termination message."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest
from kube import Kube, true_conditions, wait_for

PY = "python"


def job(name: str, ns: str, script: str, *args: str, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
        "spec": {**spec, "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": "ghcr.io/example/tool:1", "command": [PY, "-c", script, *args],
            "env": [{"name": "OUT", "value": "/out/result.txt"}],
            "volumeMounts": [{"name": "out", "mountPath": "/out"}],
        }], "volumes": [{"name": "out", "emptyDir": {}}]}}},
    }  # fmt: skip


def finished(kube: Kube, ns: str, name: str) -> list[str] | None:
    conds = true_conditions(kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/{name}"))
    return conds if {"Complete", "Failed"} & set(conds) else None


def test_complete_with_the_termination_message(kube: Kube, ns: str) -> None:
    script = (
        "import os, pathlib; pathlib.Path(os.environ['OUT']).write_text('x');"
        "import sys; open(sys.argv[1].split('=', 1)[1], 'w').write('verdict: ok ' + os.environ['OUT'])"
    )  # the path comes in argv, as the analyzer's --termination-log: the kubelet rewrites it
    kube.create(
        f"/apis/batch/v1/namespaces/{ns}/jobs",
        job("ok", ns, script, "--termination-log=/dev/termination-log"),
    )
    assert wait_for(lambda: finished(kube, ns, "ok"), 30, "the job to finish") == [
        "SuccessCriteriaMet",
        "Complete",
    ]
    status = kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/ok")["status"]  # type: ignore[index]
    assert (status["succeeded"], status["failed"], status["active"]) == (1, 0, 0) and status["completionTime"]
    [pod] = kube.pods(ns, "batch.kubernetes.io/job-name=ok")
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 0 and term["reason"] == "Completed"
    # the path the program got was the pod's folder behind the emptyDir, and /dev/termination-log was redirected
    assert term["message"].startswith("verdict: ok /") and term["message"].endswith("/volumes/out/result.txt")


def test_failed_after_the_backoff_limit(kube: Kube, ns: str) -> None:
    kube.create(
        f"/apis/batch/v1/namespaces/{ns}/jobs",
        job("bad", ns, "import sys; print('boom'); sys.exit(3)", backoffLimit=1),
    )
    assert wait_for(lambda: finished(kube, ns, "bad"), 30, "the job to fail") == ["FailureTarget", "Failed"]
    job_obj = kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/bad")
    assert job_obj is not None
    failed = next(x for x in job_obj["status"]["conditions"] if x["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert job_obj["status"]["failed"] == 2
    pods = kube.pods(ns, "batch.kubernetes.io/job-name=bad")
    assert len(pods) == 2
    for pod in pods:
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (term["exitCode"], term["reason"]) == (3, "Error")
        assert pod["status"]["phase"] == "Failed"


def test_fallback_to_logs_and_deadline_exceeded(kube: Kube, ns: str) -> None:
    body = job(
        "slow", ns, "import time; print('still working', flush=True); time.sleep(60)", activeDeadlineSeconds=2
    )
    kube.create(f"/apis/batch/v1/namespaces/{ns}/jobs", body)
    assert wait_for(lambda: finished(kube, ns, "slow"), 30, "the deadline") == ["FailureTarget", "Failed"]
    job_obj = kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/slow")
    assert job_obj is not None
    assert (
        next(x for x in job_obj["status"]["conditions"] if x["type"] == "Failed")["reason"]
        == "DeadlineExceeded"
    )
    # its pod was deleted, and the kubelet stopped the process
    wait_for(lambda: not kube.pods(ns, "batch.kubernetes.io/job-name=slow"), 20, "the pod to go")


def test_indexed_job_gives_each_pod_its_index(kube: Kube, ns: str) -> None:
    script = "import os, sys; sys.exit(0 if os.environ['JOB_COMPLETION_INDEX'] in ('0', '1') else 1)"
    kube.create(f"/apis/batch/v1/namespaces/{ns}/jobs",
                job("idx", ns, script, completions=2, parallelism=2, completionMode="Indexed", backoffLimit=0))  # fmt: skip
    assert wait_for(lambda: finished(kube, ns, "idx"), 30, "the job to finish") == [
        "SuccessCriteriaMet",
        "Complete",
    ]
    status = kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/idx")["status"]  # type: ignore[index]
    assert status["completedIndexes"] == "0,1"  # as the real controller writes two neighbours


#: Index 0 always fails; index 1 fails once (a marker file outside the pods' own /tmp), the others succeed.
PER_INDEX = (
    "import os, pathlib, sys\n"
    "i = os.environ['JOB_COMPLETION_INDEX']\n"
    "mark = pathlib.Path(os.environ['MARKS']) / i\n"
    "if i in os.environ['POISON'].split(','): sys.exit(5)\n"
    "if i == '1' and not mark.exists(): mark.write_text('once'); sys.exit(6)\n"
)


def _per_index_job(name: str, ns: str, marks: str, poison: str, **spec: object) -> dict[str, object]:
    body = job(name, ns, PER_INDEX, completions=4, parallelism=4, completionMode="Indexed",
               backoffLimitPerIndex=1, **spec)  # fmt: skip
    env = body["spec"]["template"]["spec"]["containers"][0]["env"]  # type: ignore[index]
    env += [{"name": "MARKS", "value": marks}, {"name": "POISON", "value": poison}]
    return body


@pytest.fixture
def marks() -> Iterator[str]:
    """A folder the pods share (the kubelet gives each pod a /tmp of its own)."""
    folder = tempfile.mkdtemp(prefix="frwatch-per-index-", dir="/var/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_backoff_limit_per_index_retries_each_index_alone(kube: Kube, ns: str, marks: str) -> None:
    kube.create(f"/apis/batch/v1/namespaces/{ns}/jobs", _per_index_job("per", ns, marks, "0", maxFailedIndexes=2))
    assert wait_for(lambda: finished(kube, ns, "per"), 60, "the job to end") == ["FailureTarget", "Failed"]
    job_obj = kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/per")
    assert job_obj is not None
    status = job_obj["status"]
    assert next(x for x in status["conditions"] if x["type"] == "Failed")["reason"] == "FailedIndexes"
    # the poison index failed alone after its own retry; index 1 was retried and succeeded; 2 and 3 ran once
    assert (status["failedIndexes"], status["completedIndexes"]) == ("0", "1-3")
    assert (status["succeeded"], status["failed"]) == (3, 3)
    runs: dict[str, list[tuple[str, int]]] = {}
    for pod in kube.pods(ns, "batch.kubernetes.io/job-name=per"):
        ann = pod["metadata"]["annotations"]
        code = pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"]
        runs.setdefault(ann["batch.kubernetes.io/job-completion-index"], []).append(
            (ann["batch.kubernetes.io/job-index-failure-count"], code)
        )
    assert sorted(runs["0"]) == [("0", 5), ("1", 5)]
    assert sorted(runs["1"]) == [("0", 6), ("1", 0)]
    assert runs["2"] == [("0", 0)] and runs["3"] == [("0", 0)]


def test_more_failed_indexes_than_allowed_ends_the_job(kube: Kube, ns: str, marks: str) -> None:
    kube.create(f"/apis/batch/v1/namespaces/{ns}/jobs",
                _per_index_job("most", ns, marks, "0,2,3", maxFailedIndexes=1))  # fmt: skip
    assert wait_for(lambda: finished(kube, ns, "most"), 60, "the job to end") == ["FailureTarget", "Failed"]
    job_obj = kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/most")
    assert job_obj is not None
    reason = next(x for x in job_obj["status"]["conditions"] if x["type"] == "Failed")["reason"]
    assert reason == "MaxFailedIndexesExceeded"
    assert len(job_obj["status"]["failedIndexes"].replace("-", ",").split(",")) >= 2
