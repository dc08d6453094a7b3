"""`frwatch` without the operator extra: the subcommands that need it say which extra to install; the
analyzer needs none of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A process in which the operator extra's modules cannot be imported, as on `pip install frwatch`.
_WITHOUT_EXTRA = """
import sys
from frwatch_operator.cli import EXTRAS, main
for module in EXTRAS["operator"][0]:
    sys.modules[module] = None  # `import module` now raises ModuleNotFoundError, as when not installed
sys.exit(main(sys.argv[1:]))
"""


def _frwatch_without_extra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_EXTRA, *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.mark.parametrize("subcommand", ["operator", "demo", "agent"])
def test_a_subcommand_that_needs_the_operator_extra_says_which_to_install(subcommand: str) -> None:
    out = _frwatch_without_extra(subcommand)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert f"frwatch {subcommand}: needs the 'operator' extra, which is not installed" in out.stderr
    assert "Install it with: pip install 'frwatch[operator]'" in out.stderr


def test_the_analyzer_needs_no_extra(tmp_path: Path) -> None:
    out = _frwatch_without_extra("analyze", str(tmp_path), "--format", "json")
    assert out.returncode == 0, out.stderr
    assert '"category": "no_dump"' in out.stdout


def test_the_demo_without_the_development_package_says_where_it_is() -> None:
    """The image has no frwatch_dev: `frwatch demo` there names it instead of a traceback."""
    code = "import sys\nsys.modules['frwatch_dev'] = None\nfrom frwatch_operator.cli import main\nsys.exit(main(['demo']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert "frwatch demo: needs the 'dev' extra, which is not installed (no module named 'frwatch_dev" in out.stderr
    assert "bash scripts/setup in a checkout of frwatch" in out.stderr
