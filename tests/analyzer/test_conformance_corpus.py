"""The conformance corpus (frwatch_dev.dumps.corpus): every collective type torch records crossed
with the ways a job goes wrong, each case with its truth; frwatch must say the truth of every one."""

from __future__ import annotations

from collections import Counter

import pytest

from frwatch_dev.dumps.corpus import TYPES, Case, cases, check
from frwatch_dev.dumps.corpus_evidence import verdict_of

CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_frwatch_says_the_truth(case: Case) -> None:
    v = verdict_of(case)
    assert not check(v, case.truth), f"{case.name}: {check(v, case.truth)}\n{v.headline}\n{v.culprit_detail}"


def test_the_corpus_covers_every_type_and_class() -> None:
    by_class = Counter(c.klass for c in CASES)
    assert len(CASES) >= 80
    for klass in ("healthy", "wrong op", "wrong size", "wrong dtype", "wrong tensor count", "skipped", "extra",
                  "cpu-stuck", "GPU hang", "network hang", "partial stall", "crashed", "two dumps"):  # fmt: skip
        assert by_class[klass] >= len(TYPES), klass
    names = {c.collective for c in CASES}
    assert {t.name for t in TYPES} | {"send/recv", "batch_isend_irecv"} <= names
    layouts = {c.name.rsplit(", ", 1)[-1].rstrip("]") for c in CASES if ", " in c.name}
    assert {"one group", "split groups", "subgroup", "three groups"} <= layouts
    assert any("timing off" in c.name for c in CASES) and any("timing on" in c.name for c in CASES)
    assert any("[gloo" in c.name for c in CASES)
    assert by_class["partial evidence"] >= 40 and by_class["dump names"] >= 16
    assert any(c.on_disk for c in CASES)
