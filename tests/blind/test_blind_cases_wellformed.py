"""The blind cases are well formed: each truth.json holds the verdict contract's fields with values the
schema allows, and each case folder has at least one dump that loads without trusting it (a pickle through an
unpickler that refuses every global, or JSON). It asserts nothing about frwatch's answers (issue 24: the
coordinator decides that after other rooms' fixes land); `benchmarks/score_blind.py` measures those."""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "cases"
SCHEMA = json.loads((ROOT / "analyzers" / "frwatch_analyzers" / "verdict.schema.json").read_text())
STATUSES = set(SCHEMA["$defs"]["Status"]["enum"])
CATEGORIES = set(SCHEMA["$defs"]["Category"]["enum"])
ALL = sorted(p for p in CASES.iterdir() if p.is_dir())
TRUTH_KEYS = {"status", "category", "culprit_ranks", "earliest_branch", "hardware_class", "principle",
              "rationale", "source", "made_by"}


class NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"global {module}.{name} refused")


def load_dump(path: Path) -> dict[str, Any] | None:
    """The dump as data, or None when the file is not a dump (the cases' garbage files are meant not to be)."""
    raw = path.read_bytes()
    try:
        data = NoGlobals(io.BytesIO(raw)).load() if raw[:1] == b"\x80" else json.loads(raw)
    except Exception:
        return None
    return data if isinstance(data, dict) and "entries" in data and "version" in data else None


def test_there_are_enough_cases_and_every_principle_has_one() -> None:
    truths = [json.loads((c / "truth.json").read_text()) for c in ALL]
    assert len(truths) >= 24
    assert {t["principle"] for t in truths} >= {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}


@pytest.mark.parametrize("case", ALL, ids=[c.name for c in ALL])
def test_truth_has_the_verdict_fields(case: Path) -> None:
    t = json.loads((case / "truth.json").read_text())
    assert set(t) >= TRUTH_KEYS, TRUTH_KEYS - set(t)
    assert t["status"] in STATUSES
    assert t["category"] in CATEGORIES
    assert (t["status"] == "healthy") == (t["category"] == "healthy")
    assert isinstance(t["hardware_class"], bool)
    assert all(isinstance(r, int) and r >= 0 for r in t["culprit_ranks"])
    assert t["culprit_ranks"] == sorted(set(t["culprit_ranks"]))
    b = t["earliest_branch"]
    if t["status"] == "problem":
        assert b is not None
    if b is not None:
        assert isinstance(b["pg"], str) and isinstance(b["seq"], int) and ":" in b["op"]
    for field, values in t.get("accept", {}).items():
        assert field in {"status", "category", "culprit_ranks", "seq", "op", "why"}, field
        if field == "status":
            assert set(values) <= STATUSES
        if field == "category":
            assert set(values) <= CATEGORIES
    assert t["rationale"].strip() and t["source"].strip() and t["made_by"].strip()


@pytest.mark.parametrize("case", ALL, ids=[c.name for c in ALL])
def test_case_has_a_dump_that_loads_without_globals(case: Path) -> None:
    dumps = [d for p in sorted(case.glob("nccl_trace_rank_*")) if (d := load_dump(p)) is not None]
    assert dumps, f"{case.name}: no dump loads"
    for d in dumps:
        assert d["version"] == "2.10"
        for e in d["entries"]:
            assert e["state"] in ("scheduled", "started", "completed")
            assert isinstance(e["collective_seq_id"], int) and isinstance(e["record_id"], int)


def test_culprits_and_branches_name_ranks_and_groups_the_dumps_hold() -> None:
    for case in ALL:
        t = json.loads((case / "truth.json").read_text())
        dumps = [d for p in sorted(case.glob("nccl_trace_rank_*")) if (d := load_dump(p)) is not None]
        groups = {str(e["process_group"][0]) for d in dumps for e in d["entries"]}
        b = t["earliest_branch"]
        if b is not None:
            assert b["pg"] in groups, (case.name, b["pg"], groups)
            seqs = {(e["p2p_seq_id"] if e["is_p2p"] else e["collective_seq_id"]) for d in dumps
                    for e in d["entries"] if str(e["process_group"][0]) == b["pg"]}
            assert b["seq"] in seqs, (case.name, b["seq"])
        assert all(r < 64 for r in t["culprit_ranks"])
