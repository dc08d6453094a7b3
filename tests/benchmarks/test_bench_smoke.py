"""Every script in ``benchmarks/`` runs in the suite, so none can rot unseen (``bench_webhook.py`` once failed
with an ImportError at HEAD, unnoticed).

- The scripts that need no cluster run end to end at tiny sizes, and print the figures they exist for.
- The scripts that need the local cluster, real torch ranks or a browser (minutes even at their smallest) are
  started with ``--help``: their imports and argument parsing run, which is where they rotted before.
  Their end-to-end runs are elsewhere or not in the suite; the list below says which.
- Helper modules are imported.
- A test holds the list complete: a new script must be added here.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

#: script -> (arguments of a tiny run, text its output must hold)
TINY: dict[str, tuple[list[str], str]] = {
    "bench_reduce.py": (["--smoke"], "binary: decode"),
    "bench_store_schema.py": (["--ranks", "64", "--per-pod", "8", "--repeat", "1"], "us a key"),
    "bench_live_operator.py": (["--pods", "2", "--pods-per-job", "2", "--rounds", "1"], "requests/s"),
    "make_summaries.py": (["{tmp}", "--ranks", "16", "--entries", "60", "--workers", "1"], '"ranks": 16'),
    "bench_analyze.py": (
        ["--ranks", "16", "--entries", "40", "--skip-frtrace", "--skip-summaries", "--workers", "1"],
        "floor",
    ),
    "regenerate.py": (["--smoke"], "| command |"),
    "bench_summary_formats.py": (
        ["--world", "64", "--entries", "100", "--n", "5", "--repeat", "1"],
        "msgspec typed decode alone",
    ),
}
#: run end to end by another test (which one)
ELSEWHERE = {
    "bench_webhook.py": "tests/benchmarks/test_bench_webhook_smoke.py",
    "bench_agent_memory.py": "tests/capture/test_agent_memory.py",
}
#: too slow for the suite even at their smallest (a local cluster, real torch ranks, chromium, 633 cases, logs
#: of 9 MB): started with --help only
HELP_ONLY = [
    "bench_crash_to_verdict.py",
    "bench_evidence.py",
    "bench_failover.py",
    "bench_fanout.py",
    "bench_hostile.py",
    "bench_live_overhead.py",
    "bench_report.py",
    "compare_frtrace.py",
    "fork_vs_spawn.py",
    "score_blind.py",
    "score_corpus.py",
]
#: modules the scripts import, not scripts
MODULES = ["bench_jobs", "summary_path"]


def _run(args: list[str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_every_script_is_covered_here() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")}
    covered = {*TINY, *ELSEWHERE, *HELP_ONLY, *(f"{m}.py" for m in MODULES)}
    assert scripts == covered, f"not covered: {sorted(scripts - covered)}; gone: {sorted(covered - scripts)}"


@pytest.mark.parametrize("script", sorted(TINY))
def test_the_script_runs_at_a_tiny_size(script: str, tmp_path: Path) -> None:
    args, expect = TINY[script]
    if script == "regenerate.py":
        args = [*args, "--readme", str(tmp_path / "README.md")]
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    out = _run([str(BENCH / script), *args])
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert expect in out.stdout, out.stdout[-2000:]


@pytest.mark.parametrize("script", HELP_ONLY)
def test_the_script_imports_and_parses_its_arguments(script: str) -> None:
    out = _run([str(BENCH / script), "--help"], timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "usage:" in out.stdout


@pytest.mark.parametrize("module", MODULES)
def test_the_helper_module_imports(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    assert importlib.import_module(module).__doc__


def test_make_summaries_writes_binary_summaries_that_reduce_to_the_culprit(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import bench_reduce
        import make_summaries
    finally:
        sys.path.remove(str(BENCH))
    from frwatch_analyzers.summaries.binary import MAGIC
    from frwatch_dev.dumps import varied

    made = make_summaries.make(tmp_path, 16, workers=1, entries=60)
    assert made["ranks"] == 16
    files = sorted(tmp_path.glob("*.bin"))
    assert len(files) == 16 and all(f.read_bytes().startswith(MAGIC) for f in files)
    assert len({f.read_bytes() for f in files}) == 16  # each rank's own bytes
    r = bench_reduce.reduce_here(tmp_path, 16, ".bin")
    assert r["verdict"] == f"problem/desync culprits=[{varied.culprit(16)}]"
