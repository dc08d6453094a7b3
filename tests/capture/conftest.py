"""The capture tests' fixtures: the agent as a real process, real torch dumps."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from frwatch_dev.testing.agent_process import AgentProcess
from frwatch_dev.testing.agent_process import start_agent as start_agent_process

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def torch_dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Real FR dumps from 2 real torch gloo ranks: {'rank0.pickle': ..., 'rank1.json': ...}."""
    out = tmp_path_factory.mktemp("fr")
    subprocess.run(
        [sys.executable, str(HERE / "fr_dumps.py"), str(out), "2"],
        check=True,
        timeout=120,
        capture_output=True,
    )
    return {p.name: p.read_bytes() for p in out.iterdir()}


@pytest.fixture
def start_agent(s3, tmp_path: Path) -> Iterator[Callable[..., AgentProcess]]:
    started: list[AgentProcess] = []

    def start(**env_overrides: str) -> AgentProcess:
        agent = start_agent_process(tmp_path, s3.env(), len(started), **env_overrides)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        if agent.proc.poll() is None:
            agent.proc.kill()
            agent.proc.wait()


