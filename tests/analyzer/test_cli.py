"""`frwatch analyze` as a user runs it: a real process, its exit codes, its outputs (local and S3)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from frwatch_analyzers.verdict import Verdict
from frwatch_analyzers.verdict_binding import digest_in
from frwatch_dev.dumps import World, world

ROOT = Path(__file__).resolve().parents[2]


def _write_world(folder: Path, stop_rank: int = 3) -> None:
    """4 ranks of the real schema: everyone but ``stop_rank`` waits in all_reduce #10."""
    world(4).all_reduce(steps=9).rank(stop_rank).stops_at(10).write(folder)


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frwatch_operator.cli", "analyze", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )


def test_text_report_names_the_culprit_and_exits_0(tmp_path: Path) -> None:
    _write_world(tmp_path)
    out = _run(str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "PROBLEM / missing_rank" in out.stdout
    assert "rank 3 never enqueued all_reduce at collective #10 of pg 0" in out.stdout
    assert "Next steps:" in out.stdout


def test_json_is_the_verdict_model_and_out_file_matches(tmp_path: Path) -> None:
    _write_world(tmp_path / "dumps")
    out_file = tmp_path / "verdict.json"
    term = tmp_path / "termination-log"
    out = _run(
        str(tmp_path / "dumps"), "--format", "json", "--out", str(out_file), "--termination-log", str(term)
    )
    assert out.returncode == 0, out.stderr
    v = Verdict.model_validate_json(out.stdout)
    assert v.culprit_ranks == [3]
    assert Verdict.model_validate_json(out_file.read_text()) == v
    # the termination message binds the stored verdict to this run: the digest of the bytes written, first
    lead, _, summary = term.read_text().partition(" ")
    assert lead == f"verdict-sha256:{hashlib.sha256(out_file.read_bytes()).hexdigest()}"
    assert digest_in(term.read_text()) == hashlib.sha256(out_file.read_bytes()).hexdigest()
    assert summary.startswith("problem/missing_rank: rank 3 never enqueued")


def test_no_verdict_exits_2_with_the_reason(tmp_path: Path) -> None:
    out = _run(str(tmp_path / "does-not-exist"))
    assert out.returncode == 2
    assert "no such file or folder" in out.stderr


def test_published_schema_is_the_models_schema() -> None:
    published = json.loads((ROOT / "analyzers/frwatch_analyzers/verdict.schema.json").read_text())
    assert published == Verdict.model_json_schema(), "regenerate with: frwatch analyze --schema"


@pytest.mark.usefixtures("s3")
def test_reads_dumps_from_s3_and_writes_the_verdict_there(tmp_path: Path, s3) -> None:  # type: ignore[no-untyped-def]
    _write_world(tmp_path / "dumps", stop_rank=1)
    client = s3.client()
    root = "frwatch/ns/job/uid-1/0"
    for f in (tmp_path / "dumps").iterdir():
        client.put_object(
            Bucket=s3.bucket, Key=f"{root}/ranks/{f.name.rsplit('_', 1)[-1]}.pickle", Body=f.read_bytes()
        )
    manifest = {
        "world_size": 4,
        "ranks": [
            {"rank": r, "pod": f"job-worker-{r}", "node": f"node-{r}", "dumped": True} for r in range(4)
        ],
    }
    client.put_object(Bucket=s3.bucket, Key=f"{root}/manifest.json", Body=json.dumps(manifest).encode())
    url = f"s3://{s3.bucket}/{root}"
    out = _run(
        url,
        "--format",
        "json",
        "--out",
        f"{url}/verdict.json",
        "--report-out",
        f"{url}/report.txt",
        env={**s3.env(), "AWS_ENDPOINT_URL": s3.endpoint, "AWS_REGION": "us-east-1"},
    )
    assert out.returncode == 0, out.stderr
    v = Verdict.model_validate_json(out.stdout)
    assert v.culprit_ranks == [1]
    assert v.suspect_nodes == []  # a software finding names no hardware suspect
    assert v.culprit_nodes == ["node-1"]
    stored = client.get_object(Bucket=s3.bucket, Key=f"{root}/verdict.json")["Body"].read()
    assert Verdict.model_validate_json(stored) == v
    report = client.get_object(Bucket=s3.bucket, Key=f"{root}/report.txt")["Body"].read().decode()
    assert "Culprit: rank 1 on node-1" in report


def test_s3_down_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    env = {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "y",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "PATH": "/usr/bin",
    }
    out = _run("s3://bucket/prefix", env=env)
    assert out.returncode == 2
    assert "cannot list the dumps" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_rotating_root_is_healthy_and_a_second_root_names_the_rank_off_the_rotation(tmp_path: Path) -> None:
    """NCCL dumps of a gather whose root rotates every step (non-roots record one undefined tensor, as
    ProcessGroupNCCL::gather passes the recorder); at step 5 rank 2 also acts as root."""

    def rotating() -> World:
        w = world(4)
        for step in range(6):
            w = w.gather(root=step % 4).all_reduce()
        return w

    rotating().write(tmp_path / "healthy")
    ok = _run(str(tmp_path / "healthy"), "--fail-on", "problem")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    rotating().rank(2).root_at(9, 2).write(tmp_path / "two-roots")
    out = _run(str(tmp_path / "two-roots"), "--format", "json", "--fail-on", "problem")
    assert out.returncode == 1, out.stderr
    v = Verdict.model_validate_json(out.stdout)
    assert (v.category.value, v.culprit_ranks) == ("desync", [2])
    b = v.earliest_branch
    assert b is not None and (b.seq, b.op) == (9, "nccl:gather")
    text = _run(str(tmp_path / "two-roots")).stdout
    assert "rank 0's root is rank 0; rank 2's root is rank 2" in text
    assert "it is rank 0, next in the rotation of roots" in text
