"""No import cycle among frwatch's modules (issue 27): scripts/import_cycles.py, run as a user runs it, finds
none in the repository (but the known ones it lists in EXPECTED), and finds one in a package that has one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "import_cycles.py"


def _run(*args: str, pythonpath: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )


def test_frwatch_has_no_import_cycle() -> None:
    run = _run()
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no import cycle among frwatch_analyzers, frwatch_operator, frwatch_dev" in run.stdout


def test_a_type_level_cycle_is_printed_and_fails(tmp_path: Path) -> None:
    pkg = tmp_path / "cyclepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "world.py").write_text("from .low import helper\n\nclass World:\n    pass\n")
    (pkg / "low.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .world import World\n\n"
        "def helper(w: 'World') -> None:\n    pass\n"
    )
    (pkg / "free.py").write_text("from .low import helper\n")
    run = _run("cyclepkg", pythonpath=str(tmp_path))
    assert run.returncode == 1, run.stdout + run.stderr
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("import cycle: ")]
    assert lines == ["import cycle: cyclepkg.low -> cyclepkg.world -> cyclepkg.low"], run.stdout
