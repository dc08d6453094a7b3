"""Every figure published in ``benchmarks/README.md`` says how it was made: each table row holding a measured
time, size or ratio names its command, the machine (``nproc``) and the load it ran under, and the tables are
the regenerator's (between its markers), so one command remakes them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "benchmarks" / "README.md"
FIGURE = re.compile(r"\d(\.\d+)? ?(ms|s|MB|GB|x)\b")

sys.path.insert(0, str(ROOT / "benchmarks"))
import regenerate  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))


def figure_rows(text: str) -> list[str]:
    return [
        line
        for line in text.splitlines()
        if line.startswith("|") and not set(line) <= set("|-: ") and FIGURE.search(line)
    ]


def carries_its_provenance(row: str) -> bool:
    return bool(re.search(r"`\.venv/bin/python benchmarks/\w+\.py[^`]*`", row)) and "nproc" in row and "load" in row


def test_every_figure_row_names_its_command_machine_and_load() -> None:
    text = README.read_text()
    rows = figure_rows(text)
    assert rows, "no figures at all"
    bare = [r for r in rows if not carries_its_provenance(r)]
    assert not bare, "figure rows without command, machine or load:\n" + "\n".join(bare[:10])


def test_the_figure_tables_are_the_regenerators() -> None:
    text = README.read_text()
    assert text.count(regenerate.BEGIN) == 1 and text.count(regenerate.END) == 1
    inside = text.split(regenerate.BEGIN, 1)[1].split(regenerate.END, 1)[0]
    assert figure_rows(inside) == figure_rows(text)
    assert "Regenerated" in inside and "shared" in inside


def test_the_check_catches_a_row_without_provenance() -> None:
    assert figure_rows("| 512 x 2000 | 2.44 s | 1.3x |") == ["| 512 x 2000 | 2.44 s | 1.3x |"]
    assert not carries_its_provenance("| 512 x 2000 | 2.44 s | 1.3x |")
    assert carries_its_provenance(
        "| 64 | json | 0.6 ms | `.venv/bin/python benchmarks/bench_reduce.py --smoke` | nproc 2, X | load 2.0 -> 2.1 |"
    )
