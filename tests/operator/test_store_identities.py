"""Least privilege for the evidence, on a real store: the path-scoped identities docs/install.md shows
(SeaweedFS here; AWS says the same with IAM/bucket policies). A namespace's agent keys write only its own
ranks/, ranks-later/, pods/, nccl/ and summaries/ (never logs/ or nodes/, the operator's); the analyzer's
keys read everything and write only verdict.json, report.txt, report.html and summaries/ (the map step of a
fanned-out analysis); neither can write a manifest."""

from __future__ import annotations

from pathlib import Path

import boto3
import botocore.config
import pytest

from frwatch_dev.localcluster.objectstore import ObjectStore

pytestmark = pytest.mark.slow

TEAM_A = {"name": "team-a", "credentials": [{"accessKey": "team-a-key", "secretKey": "team-a-secret"}],
          "actions": ["Write:frwatch/frwatch/team-a/*/ranks/*", "Write:frwatch/frwatch/team-a/*/ranks-later/*",
                      "Write:frwatch/frwatch/team-a/*/pods/*", "Write:frwatch/frwatch/team-a/*/nccl/*",
                      "Write:frwatch/frwatch/team-a/*/summaries/*"]}  # fmt: skip
ANALYZER = {"name": "frwatch-analyzer", "credentials": [{"accessKey": "analyzer-key", "secretKey": "analyzer-secret"}],
            "actions": ["Read:frwatch", "List:frwatch", "Write:frwatch/*/verdict.json", "Write:frwatch/*/report.txt",
                        "Write:frwatch/*/report.html", "Write:frwatch/*/summaries/*"]}  # fmt: skip
ROOT_A = "frwatch/team-a/llama/0b4c-uid/0"
ROOT_B = "frwatch/team-b/other/9f1e-uid/0"


def test_agent_and_analyzer_keys_write_only_what_they_must(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path, state_dir=tmp_path / "state", identities=(TEAM_A, ANALYZER))
    store.start()
    try:

        def client(key: str, secret: str):  # type: ignore[no-untyped-def]
            return boto3.session.Session().client(
                "s3", endpoint_url=store.endpoint, region_name=store.region, aws_access_key_id=key,
                aws_secret_access_key=secret,
                config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
            )  # fmt: skip

        def may_write(c, key: str) -> bool:  # type: ignore[no-untyped-def]
            try:
                c.put_object(Bucket="frwatch", Key=key, Body=b"x")
            except c.exceptions.ClientError:
                return False
            return True

        agent = client("team-a-key", "team-a-secret")
        analyzer = client("analyzer-key", "analyzer-secret")
        assert may_write(agent, f"{ROOT_A}/ranks/0.pickle")
        assert may_write(agent, f"{ROOT_A}/ranks-later/0.1700000000000.pickle")
        assert may_write(agent, f"{ROOT_A}/pods/llama-worker-0.json")
        assert may_write(agent, f"{ROOT_A}/nccl/0.txt")  # the NCCL debug file of its rank
        assert may_write(agent, f"{ROOT_A}/summaries/0.json")  # its rank's summary
        # logs/ and nodes/ are the operator's (what the API showed): an agent cannot write them
        for forbidden in ("manifest.json", "verdict.json", "report.txt", "report.html",
                          "logs/llama-worker-1/pytorch.txt", "nodes/node-a.json"):  # fmt: skip
            assert not may_write(agent, f"{ROOT_A}/{forbidden}"), forbidden
        assert not may_write(agent, f"{ROOT_B}/ranks/0.pickle")  # another namespace
        assert not may_write(agent, f"{ROOT_A}/ranks/../manifest.json")

        assert may_write(analyzer, f"{ROOT_A}/verdict.json") and may_write(analyzer, f"{ROOT_A}/report.txt")
        assert may_write(analyzer, f"{ROOT_A}/report.html")
        assert not may_write(analyzer, f"{ROOT_A}/report.html.pickle")  # the pattern names the page, no more
        assert may_write(analyzer, f"{ROOT_A}/summaries/3.json")  # a map pod summarising a rank's dump
        for forbidden in ("manifest.json", "ranks/1.pickle", "pods/x.json"):
            assert not may_write(analyzer, f"{ROOT_A}/{forbidden}"), forbidden
        assert analyzer.get_object(Bucket="frwatch", Key=f"{ROOT_A}/ranks/0.pickle")["Body"].read() == b"x"
        assert len(analyzer.list_objects_v2(Bucket="frwatch", Prefix=f"{ROOT_A}/")["Contents"]) == 9
        with pytest.raises(agent.exceptions.ClientError):
            agent.get_object(Bucket="frwatch", Key=f"{ROOT_A}/verdict.json")  # agents read nothing
    finally:
        store.stop()
