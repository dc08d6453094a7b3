"""The agent writes each rank's summary beside its dump (real SeaweedFS, the agent's own watcher and
Uploader, real gloo dumps), and the analyzer reads the attempt from the summaries with the verdict it
gives from the dumps; the dumps stay in the store."""

from __future__ import annotations

from typing import Any

import pytest
from harness import upload_as_agent

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.store.layout import s3_url
from frwatch_analyzers.store.sources import S3Config
from frwatch_operator.store.s3 import S3Store

JOB: dict[str, Any] = {"metadata": {"namespace": "team-a", "name": "llama", "uid": "u-16"}}


def test_the_agent_summarises_each_rank_and_the_analyzer_reads_the_summaries(
    store: S3Store, s3: Any, real_dumps: dict[int, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = upload_as_agent(store, JOB, "llama-worker-0", "node-0", real_dumps)
    client = s3.client()
    listed = client.list_objects_v2(Bucket=s3.bucket, Prefix=key.root + "/")
    keys = {o["Key"] for o in listed.get("Contents", [])}
    for rank in real_dumps:
        assert key.summary(rank) in keys, sorted(keys)
        assert key.rank(rank) in keys, "the dump is always kept"

    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    cfg = S3Config(endpoint_url=s3.endpoint, region=s3.region)
    url = s3_url(s3.bucket, key.root)
    from_summaries = analyze(url, s3=cfg, world_size=3)
    from_dumps = analyze(url, s3=cfg, world_size=3, from_dumps=True)
    assert from_summaries.stats["from_summaries"] == len(real_dumps)
    assert from_dumps.stats["from_summaries"] == 0
    assert from_dumps.ranks_seen == sorted(real_dumps), from_dumps.summary

    def core(v: Any) -> dict[str, Any]:
        out = v.model_dump()
        out.pop("stats")
        out.pop("summary")
        return out  # type: ignore[no-any-return]

    assert core(from_summaries) == core(from_dumps)

    # a summary of other content under a rank's key is not used: the store's MD5 of the dump differs
    client.put_object(Bucket=s3.bucket, Key=key.summary(0), Body=client.get_object(
        Bucket=s3.bucket, Key=key.summary(1))["Body"].read())  # fmt: skip
    mixed = analyze(url, s3=cfg, world_size=3)
    assert mixed.stats["from_summaries"] == len(real_dumps) - 1
    assert "rank 0: summary is about rank 1" in mixed.summary
    assert core(mixed) == core(from_dumps)
