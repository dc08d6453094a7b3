"""The store layout: every key and URL frwatch builds parses back to what built it; records keep their bytes."""

from __future__ import annotations

import json

import pytest

from frwatch_analyzers.layout import AttemptKey, RootUrl, StoreKey, parse_key
from frwatch_analyzers.limits import MAX_MANIFEST_BYTES, MAX_WORLD_SIZE
from frwatch_analyzers.manifest import ContainerEnd, Manifest, PodRecord, parse_manifest
from frwatch_analyzers.pod_record import MAX_POD_RECORD_BYTES, RankUpload, StoredPodRecord, parse_pod_record

KEY = AttemptKey("frwatch/x", "team", "llama", "u-1", "3")


def test_every_key_built_parses_back() -> None:
    root = KEY.root
    assert root == "frwatch/x/team/llama/u-1/3"
    assert parse_key(root, KEY.rank(7, "json")) == StoreKey("rank", "7.json", 7, "json")
    top = MAX_WORLD_SIZE - 1
    assert parse_key(root, KEY.rank(top)) == StoreKey("rank", f"{top}.pickle", top, "pickle")
    assert parse_key(root, KEY.pod("llama-worker-0")) == StoreKey("pod", "llama-worker-0")
    assert parse_key(root, KEY.manifest) == StoreKey("manifest", "manifest.json")
    assert parse_key(root, KEY.later(7, 1700000000000, "json")).kind == "other"  # type: ignore[union-attr]
    assert parse_key(root, KEY.verdict).kind == "other"  # type: ignore[union-attr]
    assert parse_key(root, KEY.report).kind == "other"  # type: ignore[union-attr]
    assert parse_key(root, "frwatch/x/team/llama/u-1/30/ranks/0.pickle") is None  # another attempt


@pytest.mark.parametrize(
    ("leaf", "kind"),
    [
        (f"{MAX_WORLD_SIZE}.pickle", "rank-out-of-bounds"),
        ("9" * 23 + ".pickle", "rank-out-of-bounds"),
        ("3.txt", "rank-out-of-bounds"),
        ("3", "rank-out-of-bounds"),
        ("\u0663.pickle", "other"),  # an Arabic-Indic digit is no rank (ASCII digits only)
        ("notes.txt", "other"),
        ("a/3.pickle", "other"),
    ],
)
def test_rank_keys_read_back_are_bounded(leaf: str, kind: str) -> None:
    parsed = parse_key(KEY.root, f"{KEY.root}/ranks/{leaf}")
    assert parsed is not None and parsed.kind == kind and parsed.rank is None


def test_urls_name_the_objects_of_one_root() -> None:
    url = KEY.at("fr-dumps")
    assert str(url) == "s3://fr-dumps/frwatch/x/team/llama/u-1/3"
    again = RootUrl.parse(str(url) + "/")
    assert again == url and again.attempt() == KEY
    assert again.verdict_url == "s3://fr-dumps/frwatch/x/team/llama/u-1/3/verdict.json"
    assert again.report_url.endswith("/3/report.txt") and again.manifest_url.endswith("/3/manifest.json")
    assert again.key("verdict.json") == KEY.verdict
    assert AttemptKey.of_root("team/llama/u-1/3") == AttemptKey("", "team", "llama", "u-1", "3")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://b/r", "not an s3:// URL"),
        ("s3:///r", "without a bucket"),
        ("s3://b/", "names no attempt root"),
    ],
)
def test_a_url_that_is_no_root_is_refused(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        RootUrl.parse(url)


@pytest.mark.parametrize("root", ["llama/u-1/3", "p/team/../u-1/3", "p/team/llama/u 1/3"])
def test_a_root_that_is_no_attempt_is_refused(root: str) -> None:
    with pytest.raises(ValueError, match="not an attempt's root"):
        AttemptKey.of_root(root)


# --- pods/<pod>.json: the bytes both writers wrote before there was one model -------------------------------
AGENT_BYTES = b"""{
 "pod": "p",
 "namespace": "ns",
 "node": "n",
 "uid": "u",
 "job": "j",
 "job_uid": "ju",
 "attempt": "0",
 "agent_started_at": 1.5,
 "ranks": [
  1
 ],
 "dumps": {
  "1": [
   {
    "key": "k",
    "bytes": 3,
    "sha256": "s",
    "format": "pickle",
    "corrupt": false,
    "uploaded_at": 2.5
   }
  ]
 },
 "skipped": [],
 "replaced": []
}"""


def test_the_agent_record_keeps_its_bytes_and_reads_back() -> None:
    me = StoredPodRecord(pod="p", namespace="ns", node="n", uid="u", job="j", job_uid="ju", attempt="0",
                         agent_started_at=1.5)  # fmt: skip
    upload = RankUpload(key="k", bytes=3, sha256="s", format="pickle", corrupt=False, uploaded_at=2.5)
    data = me.with_uploads({1: [upload]}, [], []).agent_json()
    assert data == AGENT_BYTES
    back = parse_pod_record(data)
    assert back is not None and (back.pod, back.node, back.ranks) == ("p", "n", (1,)) and back.dumps


def test_the_operator_record_keeps_its_bytes_and_reads_back() -> None:
    pod = PodRecord(pod="p", node="n", ranks=[0, 1], phase="Failed",
                    ended=[ContainerEnd(container="c", exit_code=137, reason="OOMKilled")])  # fmt: skip
    data = StoredPodRecord.of_manifest_pod(pod, KEY).operator_json()
    body = {"writer": "operator", "namespace": "team", "job": "llama", "job_uid": "u-1", "attempt": "3",
            **pod.model_dump(mode="json")}  # fmt: skip
    assert data == json.dumps(body, indent=1, sort_keys=True).encode()
    back = parse_pod_record(data)
    assert back is not None and back.writer == "operator" and back.ranks == (0, 1) and back.dumps is None


def test_a_pod_record_is_read_strictly_and_within_bounds() -> None:
    assert parse_pod_record(b" " * (MAX_POD_RECORD_BYTES + 1)) is None
    assert parse_pod_record(b'{"pod": 3, "ranks": [1]}') is None  # the pod must be named
    odd = parse_pod_record(b'{"pod": "p", "ranks": [1, 1.0, true, "2", 3], "deleted": "y", "agent_started_at": []}')
    assert odd is not None and odd.ranks == (1, 3) and odd.deleted is False and odd.agent_started_at is None


def test_a_manifest_past_its_limit_is_refused_unparsed() -> None:
    with pytest.raises(ValueError, match="over the limit"):
        parse_manifest(b" " * (MAX_MANIFEST_BYTES + 1))
    assert parse_manifest(Manifest(world_size=2).model_dump_json().encode()).world_size == 2
