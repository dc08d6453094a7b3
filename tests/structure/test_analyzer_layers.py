"""The analyzer's import contracts cover a module nobody listed (issue 27): a new module that imports upward,
imports the operator or reaches the store from a pure package fails lint-imports, naming the contract; a new
top-level module outside every layer fails too (the layers contract is exhaustive). Checked on a copy of
the analyzer in a temporary folder, found first on the path, against the repository's own pyproject.toml."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")
CONTRACTS = ("analyzer-layers", "analyzer-alone", "analyzer-pure")

#: Wrong modules a newcomer might add, each with the contract that must catch it.
WRONG = {
    "trace/upward.py": (
        "from ..diagnose.category import Candidate\n\nX: Candidate | None = None\n",
        "Analyzer layers",
    ),
    "align/operator_use.py": (
        "import frwatch_operator.constants\n\nX = frwatch_operator.constants\n",
        "Analyzer stands alone",
    ),
    "diagnose/store_read.py": (
        "from ..store import sources\n\nX = sources\n",
        "Analyzer's pure packages reach no store",
    ),
    "newtop.py": ("X = 1\n", "Analyzer layers"),
}


def _lint(analyzers: Path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(analyzers)}
    args = [str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache"]
    for c in CONTRACTS:
        args += ["--contract", c]
    run = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    return run.returncode, re.sub(r"\s+", " ", run.stdout + run.stderr)


def _copy(tmp_path: Path) -> Path:
    analyzers = tmp_path / "analyzers"
    shutil.copytree(
        ROOT / "analyzers" / "frwatch_analyzers",
        analyzers / "frwatch_analyzers",
        ignore=shutil.ignore_patterns("__pycache__", "*.so"),
    )
    return analyzers


def test_the_unchanged_analyzer_keeps_its_contracts(tmp_path: Path) -> None:
    code, out = _lint(_copy(tmp_path))
    assert code == 0, out
    assert "Contracts: 3 kept, 0 broken." in out, out


def test_a_wrong_import_in_a_new_module_breaks_the_contract_that_names_it(tmp_path: Path) -> None:
    analyzers = _copy(tmp_path)
    for rel, (text, _) in WRONG.items():
        (analyzers / "frwatch_analyzers" / rel).write_text(text)
    code, out = _lint(analyzers)
    assert code != 0, out
    assert "Contracts: 0 kept, 3 broken." in out, out
    for rel, (_, contract) in WRONG.items():
        module = "frwatch_analyzers." + rel.removesuffix(".py").replace("/", ".")
        assert module in out, (module, out)
        assert re.search(re.escape(contract) + r"[^\n]*? BROKEN", out), (contract, out)
