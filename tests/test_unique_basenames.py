"""Test modules are imported by basename (no packages under tests/): two files with one name break collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def test_every_test_module_has_a_unique_basename() -> None:
    names = Counter(
        p.name
        for p in Path(__file__).parent.rglob("*.py")
        if p.name != "conftest.py" and p.name != "__init__.py"
    )
    assert [n for n, c in names.items() if c > 1] == []
