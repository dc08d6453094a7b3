"""Issue 26: `frwatch --version`, and `--help` of the operator and the agent in plain text (no docstring markup)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRWATCH = Path(sys.executable).parent / "frwatch"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(FRWATCH), *args], capture_output=True, text=True, timeout=120)


def test_version_is_the_distributions() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for flag in ("--version", "-V"):
        out = run(flag)
        assert out.returncode == 0 and out.stdout.strip() == f"frwatch {version}", out


@pytest.mark.parametrize("sub", ["operator", "agent"])
def test_help_is_plain_text(sub: str) -> None:
    out = run(sub, "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: frwatch {sub}")
    for markup in ("``", ":func:", ":mod:", ":class:", ":data:"):
        assert markup not in out.stdout, (markup, out.stdout)
    assert "FRWATCH_" in out.stdout  # the settings it reads are named
