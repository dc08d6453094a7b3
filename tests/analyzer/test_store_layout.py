"""The store layout: every key and URL frwatch builds parses back to what built it; records keep their bytes."""

from __future__ import annotations

import json

import pytest

from frwatch_analyzers.base.limits import MAX_MANIFEST_BYTES, MAX_WORLD_SIZE
from frwatch_analyzers.store.layout import AttemptKey, LogVariant, RootUrl, StoreKey, parse_key
from frwatch_analyzers.store.manifest import ContainerEnd, Manifest, PodRecord, parse_manifest
from frwatch_analyzers.store.node_record import (
    MAX_EVENTS,
    MAX_MESSAGE,
    MAX_NODE_RECORD_BYTES,
    NodeCondition,
    NodeEvent,
    NodeRecord,
    parse_node_record,
)
from frwatch_analyzers.store.pod_record import (
    MAX_POD_RECORD_BYTES,
    RankUpload,
    StoredPodRecord,
    parse_pod_record,
)

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
            **pod.model_dump(mode="json", exclude={"logs"})}  # fmt: skip (logs are the manifest's, not the record's)
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


# --- evidence beyond Flight Recorder: logs, NCCL debug files, nodes ------------------------------------------
def test_evidence_keys_are_pinned_and_parse_back() -> None:
    root = KEY.root
    assert KEY.log("llama-worker-3", "trainer") == f"{root}/logs/llama-worker-3/trainer.txt"
    assert KEY.log("llama-worker-3", "trainer", "previous") == f"{root}/logs/llama-worker-3/trainer.previous.txt"
    termination = KEY.log("llama-worker-3", "trainer", "termination")
    assert termination == f"{root}/logs/llama-worker-3/trainer.termination.txt"
    assert KEY.nccl(5) == f"{root}/nccl/5.txt"
    assert KEY.node("gpu-node-7.zone-a") == f"{root}/nodes/gpu-node-7.zone-a.json"
    variants: tuple[LogVariant, ...] = ("tail", "previous", "termination")
    for variant in variants:
        assert parse_key(root, KEY.log("p-0", "c-1", variant)) == StoreKey("log", "p-0", container="c-1", variant=variant)
    assert parse_key(root, KEY.nccl(MAX_WORLD_SIZE - 1)) == StoreKey(
        "nccl", f"{MAX_WORLD_SIZE - 1}.txt", MAX_WORLD_SIZE - 1
    )
    assert parse_key(root, KEY.node("gpu-node-7.zone-a")) == StoreKey("node", "gpu-node-7.zone-a")


@pytest.mark.parametrize(
    "rel",
    [
        "logs/p/c.log",  # not text
        "logs/p/a.b.txt",  # a container name holds no '.'
        "logs/p/x/c.txt",  # too deep
        "logs/../c.txt",
        "logs/p/.txt",
        f"nccl/{MAX_WORLD_SIZE}.txt",
        "nccl/" + "9" * 23 + ".txt",
        "nccl/\u0663.txt",
        "nccl/3.log",
        "nodes/a b.json",
        "nodes/x/n.json",
    ],
)
def test_evidence_keys_that_name_nothing_usable_are_other(rel: str) -> None:
    assert parse_key(KEY.root, f"{KEY.root}/{rel}") == StoreKey("other", rel)


# --- nodes/<node>.json ---------------------------------------------------------------------------------------
NODE_BYTES = b"""{
 "conditions": [
  {
   "last_transition_time": "2026-11-25T10:00:00Z",
   "message": "GPU 3 reported Xid 79",
   "reason": "XidCriticalError",
   "status": "True",
   "type": "GpuUnhealthy"
  }
 ],
 "events": [
  {
   "count": 2,
   "last_timestamp": "2026-11-25T10:00:01Z",
   "message": "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
   "reason": "XidError",
   "source_component": "nvsentinel",
   "type": "Warning"
  }
 ],
 "node": "gpu-7",
 "node_record_version": "frwatch.io/node/v1",
 "read_at": "2026-11-25T10:05:00Z",
 "unavailable": [
  "events: partial"
 ]
}"""


def test_the_node_record_keeps_its_bytes_and_reads_back() -> None:
    record = NodeRecord(
        node="gpu-7",
        conditions=(NodeCondition(type="GpuUnhealthy", status="True", reason="XidCriticalError",
                                  message="GPU 3 reported Xid 79", last_transition_time="2026-11-25T10:00:00Z"),),
        events=(NodeEvent(type="Warning", reason="XidError", count=2, last_timestamp="2026-11-25T10:00:01Z",
                          message="NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
                          source_component="nvsentinel"),),
        read_at="2026-11-25T10:05:00Z",
        unavailable=("events: partial",),
    )  # fmt: skip
    assert record.to_json() == NODE_BYTES
    assert parse_node_record(NODE_BYTES) == record


def test_a_node_record_is_read_strictly_and_within_bounds() -> None:
    assert parse_node_record(b" " * (MAX_NODE_RECORD_BYTES + 1)) is None
    assert parse_node_record(b'{"node": 3}') is None  # the node must be named
    assert parse_node_record(b"[1]") is None and parse_node_record(b"\xff") is None
    many = {"node": "n", "events": [{"reason": "XidError", "message": "m"}] * (MAX_EVENTS + 5)}
    assert len(parse_node_record(json.dumps(many).encode()).events) == MAX_EVENTS  # type: ignore[union-attr]
    odd = parse_node_record(
        json.dumps({
            "node": "n\x1b[2J",
            "conditions": [{"type": 3}, {"type": "Ready", "status": 1}, 5, {"type": "X", "message": "m" * 5000}],
            "events": {"not": "a list"},
            "unavailable": [1, "node: not found"],
            "read_at": 7,
        }).encode()
    )
    assert odd is not None and odd.node == "n\\x1b[2J" and odd.events == () and odd.read_at == ""
    assert [c.type for c in odd.conditions] == ["Ready", "X"] and odd.conditions[0].status == ""
    assert len(odd.conditions[1].message) < MAX_MESSAGE + 40 and odd.unavailable == ("node: not found",)
