"""Summaries at the edge: the verdict from the agents' summaries is the verdict from the dumps; a summary
that is missing, truncated, of another version or made from another dump falls back to the dump and the
verdict says so; a hostile summary is refused with a reason, within bounds, and nothing in it is run."""

from __future__ import annotations

import base64
import json
import pickle
import shutil
import zlib
from array import array
from pathlib import Path
from typing import Any

import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.summaries.rank_summary import MAX_SUMMARY_BYTES, Reader, SummaryError
from frwatch_analyzers.summaries.writer import NotSummarised, summarise_file, summary_of
from frwatch_dev.dumps import varied

WORLD = 16
ENTRIES = 300
CULPRIT = varied.culprit(WORLD)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 varied ranks (3 kinds of group, 5 op types, 8 call sites, one rank skips), each with its summary."""
    root = tmp_path_factory.mktemp("varied")
    varied.fabricate(root / "dumps", WORLD, ENTRIES, workers=1)
    (root / "dumps" / "fabricated.json").unlink()
    summaries = root / "dumps" / "summaries"
    summaries.mkdir()
    for rank in range(WORLD):
        made = summarise_file(root / "dumps" / f"{varied.PREFIX}{rank}", rank)
        (summaries / f"{rank}.json").write_bytes(made.data)
    return root / "dumps"


def _core(verdict: Any) -> dict[str, Any]:
    """The verdict without what says how it was read (summary line, stats)."""
    out = verdict.model_dump()
    out.pop("stats")
    out.pop("summary")
    return out


def test_the_verdict_from_summaries_is_the_verdict_from_the_dumps(folder: Path) -> None:
    from_summaries = analyze(str(folder))
    from_dumps = analyze(str(folder), from_dumps=True)
    assert from_summaries.stats["from_summaries"] == WORLD
    assert from_dumps.stats["from_summaries"] == 0
    assert from_dumps.category == "desync" and from_dumps.culprit_ranks == [CULPRIT]
    assert _core(from_summaries) == _core(from_dumps)
    assert f"{WORLD} rank(s) read from their agents' summaries" in from_summaries.summary


def test_a_summary_that_cannot_be_used_falls_back_to_the_dump_and_the_verdict_says_why(
    folder: Path, tmp_path: Path
) -> None:
    work = tmp_path / "dumps"
    shutil.copytree(folder, work)
    s = work / "summaries"
    (s / "1.json").unlink()  # missing: simply decoded, nothing to say
    (s / "2.json").write_bytes((s / "2.json").read_bytes()[:700])  # truncated
    body = json.loads((s / "3.json").read_bytes())
    body["version"] = 99
    (s / "3.json").write_text(json.dumps(body))  # another version
    other = pickle.loads((work / f"{varied.PREFIX}4").read_bytes())
    other["entries"] = other["entries"][:-5]
    (s / "4.json").write_bytes(summary_of(pickle.dumps(other, protocol=2), 4).data)  # made from another dump
    (s / "5.json").write_bytes((s / "6.json").read_bytes())  # another rank's

    verdict = analyze(str(work))
    assert verdict.stats["from_summaries"] == WORLD - 5
    assert _core(verdict) == _core(analyze(str(folder), from_dumps=True))
    said = verdict.summary
    assert "4 read from their dumps instead" in said
    assert "rank 2: summary not used: not JSON or truncated" in said
    assert "rank 3: summary not used: summary version '99', this analyzer reads 1 and 2" in said
    assert "rank 4: made from a dump of" in said
    assert "rank 5: summary is about rank 6" in said
    assert "rank 1 had no summary (read from the dump)" in said


def _summary(folder: Path, rank: int = 0) -> dict[str, Any]:
    return json.loads((folder / "summaries" / f"{rank}.json").read_bytes())  # type: ignore[no-any-return]


def _refused(body: Any) -> str:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(SummaryError) as err:
        Reader().decode(data)
    return str(err.value)


def test_hostile_summaries_are_refused_with_a_reason(folder: Path) -> None:
    good = _summary(folder)
    assert "too large" in _refused(b" " * (MAX_SUMMARY_BYTES + 1))
    deep = _refused(b"[" * 200_000 + b"]" * 200_000)
    assert "nested too deeply" in deep or "not JSON" in deep
    assert "not JSON" in _refused(pickle.dumps(good))  # JSON only: a pickle is never unpickled
    assert "not an object" in _refused([good])
    assert "not a frwatch rank summary" in _refused(dict(good, format="other"))
    bomb = base64.b64encode(zlib.compress(b"\0" * (64 << 20))).decode()  # 64 MB of zeros from 64 KB
    pg = dict(good["pgs"][0], sigs=bomb)
    assert "larger than allowed" in _refused(dict(good, pgs=[pg]))
    assert "not an integer in range" in _refused(dict(good, rank=1 << 40))
    assert "not an integer in range" in _refused(dict(good, dumped_ns=10**40))
    assert "not true or false" in _refused(dict(good, has_states="yes"))
    short = dict(good["pgs"][0], created=good["pgs"][1]["var_in"])
    assert "different lengths" in _refused(dict(good, pgs=[short]))
    empty = base64.b64encode(zlib.compress(json.dumps({"sites": [], "sigs": []}).encode())).decode()
    assert "has no detail" in _refused(dict(good, sigs=empty))
    table = base64.b64encode(zlib.compress(b"[" * (40 << 20))).decode()  # 40 MB of JSON from 40 KB
    assert "larger than allowed" in _refused(dict(good, sigs=table))
    assert "malformed summary" in _refused(dict(good, pgs=[dict(good["pgs"][0], tail=[[1, 2]])]))
    odd = base64.b64encode(zlib.compress(array("q", [1, 2, 3]).tobytes())).decode()
    assert "not rows of 8" in _refused(dict(good, pgs=[dict(good["pgs"][0], tail=odd)]))
    assert "malformed summary" in _refused({k: v for k, v in good.items() if k != "p2p"})


def test_a_file_that_is_no_dump_gets_no_summary(tmp_path: Path) -> None:
    bad = tmp_path / "nccl_trace_rank_0"
    bad.write_bytes(pickle.dumps({"version": "2.10", "entries": [{"record_id": "x"}]}, protocol=2))
    with pytest.raises(NotSummarised, match="record_id"):
        summarise_file(bad, 0)
    evil = tmp_path / "nccl_trace_rank_1"
    evil.write_bytes(b"\x80\x02cos\nsystem\nq\x00.")
    with pytest.raises(NotSummarised, match="refused"):
        summarise_file(evil, 1)
