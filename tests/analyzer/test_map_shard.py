"""The map step of a fanned-out analysis (``frwatch analyze LOCATION --map-shard I/N``): shards are disjoint
and cover every rank; each writes the summaries of its ranks where the agent would, leaves valid ones
alone, replaces one that is not valid, names a dump it cannot summarise; the reduce step then reads every
rank from summaries and gives the verdict the dumps give. Local folders and a real SeaweedFS."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.store.layout import AttemptKey
from frwatch_analyzers.summaries.map_shard import Shard, map_shard
from frwatch_dev.dumps import varied

WORLD = 16
ENTRIES = 100


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("varied") / "dumps"
    varied.fabricate(root, WORLD, ENTRIES, workers=1)
    (root / "fabricated.json").unlink()
    return root


def _core(verdict: Any) -> dict[str, Any]:
    out = verdict.model_dump()
    out.pop("stats")
    out.pop("summary")
    return out


def test_shard_parsing_refuses_what_is_not_i_of_n() -> None:
    assert Shard.parse("2/4") == Shard(2, 4)
    for bad in ("4/4", "1", "-1/4", "a/b", "0/0", "1/2/3", ""):
        with pytest.raises(ValueError):
            Shard.parse(bad)
    shards = [Shard(i, 3) for i in range(3)]
    assert all(sum(s.holds(r) for s in shards) == 1 for r in range(100))


def test_shards_summarise_every_rank_once_and_the_reduce_reads_them(dumps: Path, tmp_path: Path) -> None:
    work = tmp_path / "dumps"
    shutil.copytree(dumps, work)
    results = [map_shard(str(work), Shard(i, 3)) for i in range(3)]
    assert [r.written for r in results] == [list(range(i, WORLD, 3)) for i in range(3)]
    assert all(not r.failed and not r.valid for r in results)
    assert sorted(p.name for p in (work / "summaries").iterdir()) == sorted(f"{r}.json" for r in range(WORLD))

    reduced = analyze(str(work))
    assert reduced.stats["from_summaries"] == WORLD
    assert _core(reduced) == _core(analyze(str(dumps), from_dumps=True))

    # a second run finds them valid; a summary made invalid is written again
    (work / "summaries" / "3.json").write_bytes(b'{"version": 99}')
    again = map_shard(str(work), Shard(0, 3))
    assert again.written == [3] and again.valid == [r for r in range(0, WORLD, 3) if r != 3]


def test_a_dump_that_cannot_be_summarised_is_named_and_left_to_the_reduce(
    dumps: Path, tmp_path: Path
) -> None:
    work = tmp_path / "dumps"
    shutil.copytree(dumps, work)
    (work / f"{varied.PREFIX}2").write_bytes(b"\x80\x04not a pickle at all")
    result = map_shard(str(work), Shard(0, 2))
    assert 2 in result.failed and result.written == [r for r in range(0, WORLD, 2) if r != 2]
    assert not (work / "summaries" / "2.json").exists()
    verdict = analyze(str(work))
    assert any(f"{varied.PREFIX}2" in p.file for p in verdict.bad_files)


@pytest.mark.slow
def test_the_cli_maps_shards_into_the_store_at_the_agents_keys(dumps: Path, s3: Any) -> None:
    key = AttemptKey("fanout", "team", "trainer", "uid-1", "0")
    client = boto3.client(
        "s3", endpoint_url=s3.endpoint, aws_access_key_id=s3.access_key, aws_secret_access_key=s3.secret_key,
        region_name="us-east-1",
    )  # fmt: skip
    for rank in range(WORLD):
        client.put_object(
            Bucket=s3.bucket, Key=key.rank(rank), Body=(dumps / f"{varied.PREFIX}{rank}").read_bytes()
        )
    url = str(key.at(s3.bucket))
    # every analysis in a process of its own, with the store's keys (boto3 keeps the first keys it found)
    env = {**os.environ, **s3.env(), "AWS_ENDPOINT_URL": s3.endpoint, "AWS_REGION": "us-east-1"}

    def cli(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "frwatch_analyzers.cli", url, *args],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    lines = [cli("--map-shard", f"{i}/2") for i in range(2)]
    assert [line["written"] for line in lines] == [WORLD // 2, WORLD // 2]
    listed = client.list_objects_v2(Bucket=s3.bucket, Prefix=f"{key.root}/summaries/")
    assert sorted(o["Key"] for o in listed["Contents"]) == sorted(key.summary(r) for r in range(WORLD))

    reduced, decoded = cli("--format", "json"), cli("--format", "json", "--from-dumps")
    assert reduced["stats"]["from_summaries"] == WORLD and decoded["stats"]["from_summaries"] == 0
    for dropped in ("stats", "summary"):
        reduced.pop(dropped), decoded.pop(dropped)
    assert reduced == decoded


def test_a_summarizer_kept_across_ranks_writes_the_same_summaries(dumps: Path) -> None:
    """The map step keeps one summarizer a worker (its caches make the next rank cheaper): every summary is
    byte for byte the one a fresh summarizer makes."""
    from frwatch_analyzers.summaries.writer import summary_of
    from frwatch_analyzers.trace.summarize import Summarizer

    kept = Summarizer()
    for rank in (*range(WORLD), 0):
        data = (dumps / f"{varied.PREFIX}{rank}").read_bytes()
        assert summary_of(data, rank, kept).data == summary_of(data, rank).data, rank
