"""The verdict acted on is the analyzer Job's: its termination message carries the sha256 of the bytes it
wrote, read only from a pod the Job controls, and stored bytes of another digest are refused."""

from __future__ import annotations

from typing import Any

import pytest
from vl_builders import hardware_verdict

from frwatch_analyzers.verdict_binding import digest_in, digest_of, termination_line
from frwatch_operator import constants as c
from frwatch_operator.analysis.job_outcome import JobState, job_outcome
from frwatch_operator.verdict.reading import VerdictUnavailable, read_verdict

URL = "s3://frwatch/frwatch/ns/llama/uid/0"
JOB = {"metadata": {"name": "frwatch-analyze-llama-0", "uid": "job-uid"},
       "status": {"conditions": [{"type": "Complete", "status": "True"}]}}  # fmt: skip


def pod(message: str, *, owner_uid: str = "job-uid", created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {
        "metadata": {"name": f"p-{owner_uid}", "creationTimestamp": created,
                     "labels": {c.LABEL_BATCH_JOB_NAME: "frwatch-analyze-llama-0"},
                     "ownerReferences": [{"kind": "Job", "uid": owner_uid, "controller": True}]},
        "status": {"containerStatuses": [{"name": c.ANALYZER_CONTAINER,
                                          "state": {"terminated": {"exitCode": 0, "message": message}}}]},
    }  # fmt: skip


class Store:
    """The store as the operator reads it (size, bounded get)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def size(self, key: str, *, bucket: str) -> int:
        return len(self.data)

    def get_bounded(self, key: str, limit: int, *, bucket: str) -> bytes:
        return self.data


def test_the_digest_leads_the_termination_message_and_is_read_back() -> None:
    data = b'{"verdict": 1}'
    line = termination_line(data, "problem/gpu_hang: rank 1 ...")
    assert digest_in(line) == digest_of(data)
    assert digest_in("problem/gpu_hang: verdict-sha256:" + "a" * 64) is None  # only at the start
    assert digest_in("Traceback (most recent call last): ...") is None


def test_only_a_pod_the_job_controls_gives_the_digest() -> None:
    data = hardware_verdict("node-3").model_dump_json().encode()
    own = pod(termination_line(data, "problem/gpu_hang: ..."))
    assert job_outcome(JOB, [own]).verdict_digest == digest_of(data)
    # a newer pod carrying only the Job's name label (anyone who may create pods there can make one)
    forged = pod(termination_line(b"forged", "problem/gpu_hang: ..."), owner_uid="other", created="2026-01-02T00:00:00Z")
    outcome = job_outcome(JOB, [own, forged])
    assert outcome.state is JobState.SUCCEEDED and outcome.verdict_digest == digest_of(data)
    assert job_outcome(JOB, [forged]).verdict_digest is None


def test_a_verdict_replaced_in_the_store_is_refused() -> None:
    genuine = hardware_verdict("node-3", category=hardware_verdict().category).model_dump_json().encode()
    forged = hardware_verdict("victim-1").model_dump_json().encode()
    assert read_verdict(Store(genuine), URL, digest_of(genuine)).suspect_nodes == ["node-3"]  # type: ignore[arg-type]
    with pytest.raises(VerdictUnavailable) as refused:
        read_verdict(Store(forged), URL, digest_of(genuine))  # type: ignore[arg-type]
    assert refused.value.reason == "VerdictNotBound"
    assert "replaced in the store after the analyzer wrote it" in str(refused.value)
