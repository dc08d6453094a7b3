"""A summary that cannot stand for its dump falls back to the dump, and the verdict says which and why, in
few words at any rank count: another dump of the same size (sha256 on a folder; the store's MD5 ETag, or
sha256 for an object uploaded in parts, on a real SeaweedFS), counts no dump of that size can hold, a
summary over the size cap, nested too deeply, a pickle in place of JSON (never run), columns that would
inflate to gigabytes (refused within a bounded budget, in a process limited to 1 GB), JSON that would parse
into millions of objects (counted and refused unparsed), an empty file."""

from __future__ import annotations

import base64
import json
import os
import pickle
import shutil
import subprocess
import sys
import zlib
from array import array
from pathlib import Path
from typing import Any

import boto3
import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.store.layout import AttemptKey
from frwatch_analyzers.summaries.check import MIN_ENTRY_BYTES
from frwatch_analyzers.summaries.rank_summary import MAX_COLUMN, MAX_SUMMARY_BYTES, Reader, encode
from frwatch_analyzers.summaries.reduce import FromSummaries
from frwatch_analyzers.summaries.writer import summarise_file
from frwatch_dev.dumps import varied

WORLD = 16
ENTRIES = 200
CULPRIT = varied.culprit(WORLD)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 varied ranks (several groups, an op mix, many call sites, one rank skips), each with its summary."""
    root = tmp_path_factory.mktemp("fallbacks") / "dumps"
    varied.fabricate(root, WORLD, ENTRIES, workers=1)
    (root / "fabricated.json").unlink()
    (root / "summaries").mkdir()
    for rank in range(WORLD):
        made = summarise_file(root / f"{varied.PREFIX}{rank}", rank)
        (root / "summaries" / f"{rank}.json").write_bytes(made.data)
    return root


def _core(verdict: Any) -> dict[str, Any]:
    out = verdict if isinstance(verdict, dict) else verdict.model_dump()
    out = dict(out)
    out.pop("stats")
    out.pop("summary")
    return out


def _same_size_other_dump(data: bytes) -> bytes:
    """The dump with one memoized string changed, its length kept: a valid dump of the same size."""
    other = data.replace(b"pt_autograd_0", b"pt_autograd_9", 1)
    assert other != data and len(other) == len(data)
    pickle.loads(other)  # still a dump (made here by the test: trusted)
    return other


def _reencoded(summary: bytes, **changes: Any) -> bytes:
    """The summary decoded, some counts changed, encoded again with the digest of the real dump."""
    trace, digest = Reader().decode(summary)
    for name, value in changes.items():
        setattr(trace, name, value)
    return encode(trace, trace.sig_details, digest)


def _column(values: array[int]) -> str:
    return base64.b64encode(zlib.compress(values.tobytes(), 9)).decode()


def _inflating(good: dict[str, Any], groups: int) -> bytes:
    """A summary of ``groups`` groups whose 7 columns each hold a million distinct int64 (56 MB a group)
    in about 60 KB of JSON: without a budget, decoding it holds groups x 56 MB."""
    zeros = array("q", bytes(8 * MAX_COLUMN))
    pgs = []
    for g in range(groups):
        cols = {}
        for n, name in enumerate(("seqs", "sigs", "plain", "created", "var_seqs", "var_in", "var_out")):
            zeros[-1] = g * 8 + n  # distinct columns: no cache can share them
            cols[name] = _column(zeros)
        pgs.append({**good["pgs"][0], "name": f"g{g}", **cols})
    return json.dumps({**good, "pgs": pgs}).encode()


def test_every_kind_of_unusable_summary_falls_back_to_its_dump_and_is_named(
    folder: Path, tmp_path: Path
) -> None:
    work = tmp_path / "dumps"
    shutil.copytree(folder, work)
    s = work / "summaries"
    dump3 = work / f"{varied.PREFIX}3"
    dump3.write_bytes(_same_size_other_dump(dump3.read_bytes()))  # its summary: of the dump before
    summary = (s / "4.json").read_bytes()
    (s / "4.json").write_bytes(_reencoded(summary, entries=10**9))
    (s / "5.json").write_bytes(_reencoded((s / "5.json").read_bytes(), entries=10))
    (s / "6.json").write_bytes(b" " * (MAX_SUMMARY_BYTES + 1))
    (s / "7.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    sentinel = tmp_path / "ran"
    (s / "8.json").write_bytes(
        b"\x80\x02cos\nsystem\nq\x00X" + f"touch {sentinel}".encode().__len__().to_bytes(4, "little")
        + f"touch {sentinel}".encode() + b"\x85R."
    )  # fmt: skip
    # (the payload above is os.system('touch ...') for whatever would unpickle it)
    (s / "9.json").write_bytes(_inflating(json.loads(summary), groups=3))
    (s / "10.json").write_bytes(b"")

    verdict = analyze(str(work))
    assert not sentinel.exists()
    assert verdict.stats["from_summaries"] == WORLD - 8
    assert _core(verdict) == _core(analyze(str(work), from_dumps=True))
    assert verdict.category == "desync" and verdict.culprit_ranks == [CULPRIT]
    said = verdict.summary
    assert f"{WORLD - 8} rank(s) read from their agents' summaries" in said
    assert "8 read from their dumps instead" in said
    assert "rank 3: made from another dump (sha256)" in said
    assert f"rank 4: implausible: 1000000000 entries in a dump of {(work / f'{varied.PREFIX}4').stat().st_size}" in said
    assert "rank 5: implausible: " in said and "in a trace of 10 entries" in said
    assert "rank 6: summary too large" in said
    assert "rank 7: summary not used: malformed summary: nested too deeply" in said
    assert "rank 8: summary not used: not JSON or truncated" in said
    assert "rank 9: summary not used: malformed summary: pgs[1]." in said
    assert f"columns of more than {8 * MAX_COLUMN} elements in all" in said
    assert "rank 10: summary not used: empty" in said


def test_a_summary_that_would_inflate_to_gigabytes_is_refused_within_a_gigabyte(
    folder: Path, tmp_path: Path
) -> None:
    """30 groups of distinct million-element columns (1.7 GB once inflated, 1.8 MB on disk), read in a
    process whose address space is capped at 1 GB: refused with a reason, not a MemoryError."""
    bomb = tmp_path / "bomb.json"
    bomb.write_bytes(_inflating(json.loads((folder / "summaries" / "0.json").read_bytes()), groups=30))
    assert bomb.stat().st_size < MAX_SUMMARY_BYTES
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from frwatch_analyzers.summaries.rank_summary import Reader, SummaryError\n"
        "try:\n"
        "    Reader().decode(open(sys.argv[1], 'rb').read())\n"
        "except SummaryError as exc:\n"
        "    print('refused:', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(bomb)], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused: malformed summary: pgs[1].") and "elements in all" in done.stdout


def test_the_smallest_entry_a_dump_can_hold_is_above_the_bound() -> None:
    """MIN_ENTRY_BYTES is below what any pickled entry takes: twenty fields, every value None, every key
    memoized (what the bound's comment says was measured)."""
    keys = ["record_id", "pg_id", "process_group", "thread_name", "thread_id", "collective_seq_id",
            "p2p_seq_id", "op_id", "profiling_name", "time_created_ns", "input_sizes", "input_dtypes",
            "output_sizes", "output_dtypes", "state", "time_discovered_started_ns",
            "time_discovered_completed_ns", "retired", "timeout_ms", "is_p2p"]  # fmt: skip
    entries = [{k: (i if k == "record_id" else None) for k in keys} for i in range(5000)]
    for protocol in (2, 4, 5):
        per_entry = len(pickle.dumps({"version": "2.10", "entries": entries}, protocol=protocol)) / 5000
        assert per_entry >= 2 * MIN_ENTRY_BYTES, (protocol, per_entry)


def test_the_note_stays_short_at_a_hundred_thousand_ranks() -> None:
    taken = FromSummaries([], [])
    for rank in range(100_000):
        if rank % 10 < 6:
            taken.fallbacks[rank] = f"made from a dump of {1000 + rank} bytes, the stored one has {rank}"
        elif rank % 10 < 9:
            taken.fallbacks[rank] = "summary not used: not JSON or truncated: Expecting value"
        else:
            taken.fallbacks[rank] = f"odd reason number {rank % 7} of its own kind {'abcdefghijklmnop'[rank % 16]}"
    taken.missing = list(range(100_000, 200_000, 3))
    note = taken.note()
    assert len(note) < 4000, len(note)
    assert "0 rank(s) read from their agents' summaries, 100000 read from their dumps instead (" in note
    assert "made from a dump of 1000 bytes, the stored one has 0 (and 59999 alike)" in note
    assert "(60000 ranks): made from a dump" in note and "(30000 ranks): summary not used: not JSON" in note
    assert "; 2500 more rank(s) for 2 other reason(s))" in note  # 10 kinds (digits aside): 8 spelled
    assert "(33334 ranks) had no summary (read from the dump)" in note


@pytest.mark.slow
def test_in_the_store_the_md5_etag_or_the_sha256_of_a_multipart_dump_decides(folder: Path, s3: Any) -> None:
    key = AttemptKey("fallbacks", "team", "trainer", "uid-fallbacks", "0")
    client = boto3.client(
        "s3", endpoint_url=s3.endpoint, aws_access_key_id=s3.access_key, aws_secret_access_key=s3.secret_key,
        region_name="us-east-1",
    )  # fmt: skip

    def multipart(rank: int, body: bytes) -> None:
        up = client.create_multipart_upload(Bucket=s3.bucket, Key=key.rank(rank))
        part = client.upload_part(Bucket=s3.bucket, Key=key.rank(rank), UploadId=up["UploadId"], PartNumber=1,
                                  Body=body)  # fmt: skip
        client.complete_multipart_upload(
            Bucket=s3.bucket, Key=key.rank(rank), UploadId=up["UploadId"],
            MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
        )  # fmt: skip

    for rank in range(WORLD):
        data = (folder / f"{varied.PREFIX}{rank}").read_bytes()
        if rank == 3:  # another dump of the same size: the store's MD5 ETag differs from the summary's
            client.put_object(Bucket=s3.bucket, Key=key.rank(rank), Body=_same_size_other_dump(data))
        elif rank == 5:  # uploaded in parts, the very dump: its ETag is no MD5, the sha256 matches
            multipart(rank, data)
        elif rank == 6:  # in parts and another dump: the sha256 differs
            multipart(rank, _same_size_other_dump(data))
        else:
            client.put_object(Bucket=s3.bucket, Key=key.rank(rank), Body=data)
        client.put_object(
            Bucket=s3.bucket, Key=key.summary(rank), Body=(folder / "summaries" / f"{rank}.json").read_bytes()
        )
    etags = {r: client.head_object(Bucket=s3.bucket, Key=key.rank(r))["ETag"].strip('"') for r in (0, 5)}
    assert len(etags[0]) == 32 and "-" in etags[5], etags  # what the check relies on, seen on the store

    env = {**os.environ, **s3.env(), "AWS_ENDPOINT_URL": s3.endpoint, "AWS_REGION": "us-east-1"}

    def cli(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "frwatch_analyzers.cli", str(key.at(s3.bucket)), "--format", "json", *args],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    reduced, decoded = cli(), cli("--from-dumps")
    assert reduced["stats"]["from_summaries"] == WORLD - 2
    said = reduced["summary"]
    assert "2 read from their dumps instead" in said
    assert "rank 3: made from another dump (its MD5 differs from the store's)" in said
    assert "rank 6: made from another dump (sha256)" in said
    assert _core(reduced) == _core(decoded)


def test_json_that_would_parse_into_millions_of_objects_is_refused_unparsed(folder: Path) -> None:
    """Every JSON array costs 56-64 bytes parsed: 7 MB of ``[],`` in a summary would be ~170 MB, and a
    signature table of 30 MB (from 30 KB compressed) ~700 MB. Both are counted and refused first."""
    from frwatch_analyzers.summaries.rank_summary import MAX_CONTAINERS, SummaryError

    good = json.loads((folder / "summaries" / "0.json").read_bytes())
    body = json.dumps(good).encode()
    many = body[:-1] + b',"pad":[' + b"[]," * ((7 << 20) // 3) + b"[]]}"
    assert len(many) < MAX_SUMMARY_BYTES
    with pytest.raises(SummaryError, match=f"summary: more than {MAX_CONTAINERS} JSON arrays"):
        Reader().decode(many)
    table = base64.b64encode(zlib.compress(b"[" + b"[]," * ((30 << 20) // 3) + b"[]]", 9)).decode()
    with pytest.raises(SummaryError, match=f"sigs: more than {MAX_CONTAINERS} JSON arrays"):
        Reader().decode(json.dumps({**good, "sigs": table}).encode())
    Reader().decode(body)  # the real one passes


def test_summaries_of_every_kind_of_entry_are_plausible(folder: Path) -> None:
    """The counts the check compares hold for real summaries: collectives, p2p sends and batches, coalesced
    regions, all_to_all with splits, and the varied set (several groups, a skipped collective)."""
    from frwatch_analyzers.summaries.check import implausible
    from frwatch_analyzers.summaries.writer import summary_of
    from frwatch_dev.dumps import pickle_bytes, world

    mixed = (
        world(4).all_reduce(steps=3).send(0, 1, steps=5)
        .batch_isend_irecv([(0, 1), (1, 0), (2, 3), (3, 2)], steps=4)
        .coalesced(["all_reduce", "all_reduce"], steps=3).all_to_all(steps=2).all_reduce(steps=2)
    )  # fmt: skip
    made = [summary_of(pickle_bytes(d), r).data for r, d in mixed.dumps().items()]
    made += [(folder / "summaries" / f"{r}.json").read_bytes() for r in range(WORLD)]
    for data in made:
        trace, digest = Reader().decode(data)
        assert implausible(trace, digest) == "", trace.rank
    assert any(Reader().decode(d)[0].p2p for d in made)
