"""Real dumps for the analyzer tests: each scenario run once per session by real torch gloo ranks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def real_dumps(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    from frwatch_operator.workloads.local_launch import run_local_job

    made: dict[str, Path] = {}

    def make(scenario: str) -> Path:
        if scenario not in made:
            out = tmp_path_factory.mktemp(f"real-{scenario}")
            result = run_local_job(scenario, 4, out, deadline_s=90.0)
            assert any(r.dump for r in result.ranks), f"{scenario}: no rank dumped ({result})"
            made[scenario] = out
        return made[scenario]

    return make
