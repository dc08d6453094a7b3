"""``frwatch analyze`` reads the evidence next to the dumps: a flat folder of logs named by rank or pod, the
store's layout in a folder or under an s3:// prefix; every refusal is named in bad_files, none is a crash."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.evidence.causes import UNRANKED_UNUSED
from frwatch_analyzers.evidence.logtext import MAX_LOG_BYTES
from frwatch_analyzers.report.terminal import render
from frwatch_analyzers.store.layout import AttemptKey
from frwatch_analyzers.store.manifest import Manifest, PodRecord
from frwatch_analyzers.store.node_record import NodeEvent, NodeRecord
from frwatch_analyzers.store.sources import S3Config
from frwatch_analyzers.verdict import Category, CauseKind, Status
from frwatch_dev.dumps import pickle_bytes, world

CRASH = (
    "\x1b[32m2026-11-25 14:39:35,100 INFO train: step 7 loss 1.25\x1b[0m\n"
    "Traceback (most recent call last):\n"
    '  File "/app/train.py", line 88, in train_step\n'
    "    batch = next(loader)\n"
    "ValueError: corrupt sample in shard 3 (token=ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8)\n"
)
LOST = "RuntimeError: [pair.cc:553] Connection closed by peer [10.0.0.4]:5555\n"


def _dumps_without_rank_3() -> dict[int, Any]:
    dumps = world(4).all_reduce(steps=5).rank(3).stops_at(5).dumps()
    dumps.pop(3)
    return dumps


def test_a_number_in_a_log_name_is_a_rank_only_after_rank(tmp_path: Path) -> None:
    """``node1.log`` may hold ranks 8-15 and a PyTorchJob's ``worker-0`` is rank 1: such a name's number is
    nobody's rank. The file is read all the same, and its lines prefixed ``[rankN]:`` are rank N's; one with
    no such line is shown as nobody's, and a file with nothing in it is named as not used."""
    for rank, dump in _dumps_without_rank_3().items():
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(pickle_bytes(dump))
    (tmp_path / "node1.log").write_text("".join(f"[rank3]:{line}\n" for line in CRASH.splitlines()))
    (tmp_path / "job-worker-0.log").write_text(LOST)
    (tmp_path / "train_rank_0.out").write_text(LOST)
    v = analyze(str(tmp_path), world_size=4)
    first = v.causes[0]
    assert (first.rank, first.kind, first.location, first.source) == (
        3,
        CauseKind.exception,
        "train.py:88",
        str(tmp_path / "node1.log"),
    )
    assert (
        v.headline
        == "rank 3 crashed first: ValueError at train.py:88 (step 7); then rank 0 only lost its peer"
    )
    assert {(c.rank, Path(c.source).name) for c in v.causes} == {
        (3, "node1.log"),
        (0, "train_rank_0.out"),
        (None, "job-worker-0.log"),
    }
    (tmp_path / "job-worker-0.log").write_text("step 1 ok\n")
    reasons = {Path(p.file).name: p.reason for p in analyze(str(tmp_path), world_size=4).bad_files}
    assert reasons == {"job-worker-0.log": UNRANKED_UNUSED}


def test_a_flat_folder_with_logs_named_by_rank_tells_the_same_story(tmp_path: Path) -> None:
    for rank, dump in _dumps_without_rank_3().items():
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(pickle_bytes(dump))
    (tmp_path / "rank3.log").write_text(CRASH)
    (tmp_path / "worker_0.log").write_text(LOST)
    # hostile neighbours: many MB with the cause at the end, binary garbage, a 1 MB line, a name with no rank
    (tmp_path / "rank1.log").write_bytes(b"step 1 ok\n" * 600_000 + LOST.encode())
    (tmp_path / "rank2.log").write_bytes(os.urandom(200_000))
    (tmp_path / "notes.txt").write_text("nothing to see")
    (tmp_path / "rank0.err").write_bytes(b"x" * (1 << 20) + b"\n" + LOST.encode())
    (tmp_path / "rank4.log").symlink_to("/etc/passwd")
    os.mkfifo(tmp_path / "rank5.log")  # opening it would block: never opened
    v = analyze(str(tmp_path), world_size=4)
    assert (
        v.headline
        == "rank 3 crashed first: ValueError at train.py:88 (step 7); then ranks 0-1 only lost their peer"
    )
    first = v.causes[0]
    assert (first.rank, first.kind, first.location, first.source) == (
        3,
        CauseKind.exception,
        "train.py:88",
        str(tmp_path / "rank3.log"),
    )
    assert first.time == "2026-11-25T14:39:35.100000Z"
    reasons = {Path(p.file).name: p.reason for p in v.bad_files}
    assert reasons["rank2.log"].startswith("log not read: binary data, not a text log")
    assert reasons["notes.txt"] == UNRANKED_UNUSED and "worker_0.log" not in reasons
    assert "rank0.err" not in reasons  # a log, not a dump that failed to decode
    [lost] = [c for c in v.causes if c.source.endswith("worker_0.log")]
    assert lost.rank is None  # its number is no rank: what it says is shown as nobody's
    assert (
        reasons["rank4.log"]
        == reasons["rank5.log"]
        == ("not read: not a regular file (a link, a FIFO or a device is never followed or opened)")
    )
    assert "rank1.log" not in reasons and os.path.getsize(tmp_path / "rank1.log") > 2 * MAX_LOG_BYTES
    text = v.model_dump_json() + render(v)
    assert "ghp_a1B2" not in text and "token=[masked]" in text and "\x1b" not in text


def _layout(root: Path) -> AttemptKey:
    key = AttemptKey("", "team", "llama", "u-1", "0")
    base = root / key.root
    (base / "ranks").mkdir(parents=True)
    for rank, dump in _dumps_without_rank_3().items():
        (base / "ranks" / f"{rank}.pickle").write_bytes(pickle_bytes(dump))
    pods = [PodRecord(pod=f"llama-worker-{r}", node=f"gpu-{r}", ranks=[r]) for r in range(4)]
    (base / "manifest.json").write_text(Manifest(world_size=4, pods=pods).model_dump_json())
    return key


def _evidence(key: AttemptKey) -> dict[str, bytes]:
    """Store keys (relative to the attempt's root) and bytes, as the operator writes them."""
    node = NodeRecord(
        node="gpu-3",
        events=(NodeEvent(type="Warning", reason="XidError", message="Xid 79: GPU has fallen off the bus"),),
    )
    rel = {
        k: v
        for k, v in {
            key.log("llama-worker-3", "trainer"): b"step 9\n",
            key.log("llama-worker-3", "trainer", "previous"): CRASH.encode(),
            key.log("llama-worker-3", "trainer", "termination"): b"exit 1\n",
            key.log("llama-worker-0", "trainer"): LOST.encode(),
            key.log("someone-else", "trainer"): CRASH.encode(),
            key.nccl(1): b"h:1:2 [1] NCCL WARN NET/Socket : Connection closed by peer\n",
            key.node("gpu-3"): node.to_json(),
            key.node("gpu-1"): b"{not json",
        }.items()
    }
    return {k[len(key.root) + 1 :]: v for k, v in rel.items()}


def test_the_store_layout_in_a_folder_is_read_with_the_manifest_mapping_pods_to_ranks(tmp_path: Path) -> None:
    key = _layout(tmp_path)
    for rel, data in _evidence(key).items():
        (tmp_path / key.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key.root / rel).write_bytes(data)
    v = analyze(str(tmp_path / key.root))
    _check_layout_verdict(v)


def _check_layout_verdict(v: Any) -> None:
    assert v.status == Status.problem and v.category == Category.missing_rank
    assert v.headline.startswith("rank 3 crashed first: ValueError at train.py:88 (step 7)")
    first = v.causes[0]
    assert first.source.endswith("logs/llama-worker-3/trainer.previous.txt") and first.pod == "llama-worker-3"
    assert v.hardware_class and v.suspect_nodes == ["gpu-3"]  # the crashed rank's node reports an Xid
    assert any(c.kind == CauseKind.node_event and c.node == "gpu-3" for c in v.causes)
    assert any(c.kind == CauseKind.nccl_network_error and c.rank == 1 for c in v.causes)
    reasons = {p.file.rsplit("/", 2)[-2] + "/" + p.file.rsplit("/", 1)[-1]: p.reason for p in v.bad_files}
    assert reasons["someone-else/trainer.txt"].startswith(
        "log not read: pod someone-else is not in the manifest"
    )
    assert reasons["nodes/gpu-1.json"] == "node record not read: not a node record"


@pytest.mark.usefixtures("s3")
def test_the_store_layout_under_an_s3_prefix_is_read_the_same_way(
    tmp_path: Path, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:

    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    client = s3.client()
    key = _layout(tmp_path)
    root = f"evidence-test/{key.root}"
    local = tmp_path / key.root
    for path in local.rglob("*"):
        if path.is_file():
            client.put_object(
                Bucket=s3.bucket, Key=f"{root}/{path.relative_to(local)}", Body=path.read_bytes()
            )
    for rel, data in _evidence(key).items():
        client.put_object(Bucket=s3.bucket, Key=f"{root}/{rel}", Body=data)
    v = analyze(f"s3://{s3.bucket}/{root}", s3=S3Config(endpoint_url=s3.endpoint, region="us-east-1"))
    _check_layout_verdict(v)
    assert v.causes[0].source == f"s3://{s3.bucket}/{root}/logs/llama-worker-3/trainer.previous.txt"


def test_a_single_dump_file_has_no_evidence_beside_it(tmp_path: Path) -> None:
    dumps = _dumps_without_rank_3()
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle_bytes(dumps[0]))
    (tmp_path / "rank0.log").write_text(LOST)
    v = analyze(str(tmp_path / "nccl_trace_rank_0"))
    assert v.causes == [] and json.loads(v.model_dump_json())["causes"] == []


def test_past_the_budget_the_suspects_logs_were_read_first_and_the_rest_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from frwatch_analyzers.evidence import read as evidence_read

    monkeypatch.setattr(evidence_read, "MAX_EVIDENCE_FILES", 2)
    for rank, dump in _dumps_without_rank_3().items():
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(pickle_bytes(dump))
        (tmp_path / f"rank{rank}.log").write_text(LOST)
    (tmp_path / "rank3.log").write_text(CRASH)  # sorts last by name, read first: rank 3 left no dump
    v = analyze(str(tmp_path), world_size=4)
    assert v.causes[0].rank == 3 and v.headline.startswith("rank 3 crashed")
    [over] = [p for p in v.bad_files if "budget" in p.reason]
    assert over.reason.startswith("2 evidence file(s) from here on not read: over the budget of 2 files")
