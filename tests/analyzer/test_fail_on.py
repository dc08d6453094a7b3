"""`frwatch analyze --fail-on problem|inconclusive`: a pipeline can gate on the verdict; the exit codes are
the documented ones (0 below the threshold, 1 at or above it, 2 no verdict, 3 cannot write)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from frwatch_dev.dumps import world

ROOT = Path(__file__).resolve().parents[2]


def _analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frwatch_analyzers.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fail-on")
    world(4).all_reduce(steps=5).write(root / "healthy")
    world(4).all_reduce(steps=5).rank(3).stops_at(5).write(root / "problem")
    (root / "no_dump").mkdir()
    return {"healthy": root / "healthy", "problem": root / "problem", "inconclusive": root / "no_dump"}


@pytest.mark.parametrize(
    ("verdict", "fail_on", "code"),
    [
        ("healthy", None, 0),
        ("problem", None, 0),
        ("inconclusive", None, 0),
        ("healthy", "problem", 0),
        ("inconclusive", "problem", 0),
        ("problem", "problem", 1),
        ("healthy", "inconclusive", 0),
        ("inconclusive", "inconclusive", 1),
        ("problem", "inconclusive", 1),
    ],
)
def test_exit_code_follows_the_threshold(
    folders: dict[str, Path], verdict: str, fail_on: str | None, code: int
) -> None:
    out = _analyze(str(folders[verdict]), *(["--fail-on", fail_on] if fail_on else []))
    assert out.returncode == code, out.stderr
    assert (
        f"/ {'no_dump' if verdict == 'inconclusive' else verdict if verdict == 'healthy' else 'missing_rank'}"
        in out.stdout
    )


def test_no_verdict_is_2_whatever_the_threshold(tmp_path: Path) -> None:
    out = _analyze(str(tmp_path / "missing"), "--fail-on", "problem")
    assert out.returncode == 2 and "no verdict" in out.stderr


def test_a_verdict_that_cannot_be_written_is_3_even_below_the_threshold(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    out = _analyze(
        str(folders["healthy"]),
        "--fail-on",
        "problem",
        "--out",
        str(tmp_path / "no" / "such" / "dir" / "v.json"),
    )
    assert out.returncode == 3 and "could not be written" in out.stderr


def test_the_exit_codes_are_in_the_help() -> None:
    out = _analyze("--help")
    assert out.returncode == 0
    for line in (
        "0  a verdict was made",
        "1  the verdict is at or above the --fail-on threshold",
        "2  no verdict",
        "3  a verdict was made but",
    ):
        assert line in out.stdout


@pytest.mark.parametrize(
    "args",
    [["--world-size", "0"], ["--world-size", "262145"], ["--worker-memory-mb", "-1"], ["--fail-on", "maybe"]],
)
def test_wrong_arguments_are_2(args: list[str], tmp_path: Path) -> None:
    out = _analyze(str(tmp_path), *args)
    assert out.returncode == 2 and "error:" in out.stderr
