"""The live-watch bootstrap: real torch gloo ranks get a worker-server socket each, with no change to
their code; a broken bootstrap leaves training as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from live_ranks import live_job, with_pythonpath_appended

from frwatch_operator.agent.livebootstrap import install
from frwatch_operator.agent.livebootstrap.frwatch_live_boot import ENV_LIVE_DIR, ENV_TORCH_SOCKET, SOCKET_NAME
from frwatch_operator.agent.worker_client import WorkerCallError, call
from frwatch_operator.constants import ENV_LIVE_DIR as CONST_ENV_LIVE_DIR
from frwatch_operator.constants import ENV_TORCH_WORKER_SERVER_SOCKET

WAIT_S = 120.0  # a loaded 2-core machine starts torch ranks slowly


def wait_for(predicate, timeout_s: float = WAIT_S, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def answers(path: Path, handler: str) -> bool:
    try:
        return call(str(path), handler, timeout_s=5.0, max_bytes=1 << 24).status == 200
    except WorkerCallError:
        return False


def test_the_names_agree_with_the_constants() -> None:
    assert ENV_LIVE_DIR == CONST_ENV_LIVE_DIR
    assert ENV_TORCH_SOCKET == ENV_TORCH_WORKER_SERVER_SOCKET


def test_sitecustomize_chains_to_the_one_it_shadows(tmp_path: Path) -> None:
    code_dir, live_dir = install(tmp_path)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import sys\nsys.stderr.write('their sitecustomize ran\\n')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(code_dir), str(theirs)]))
    env[ENV_LIVE_DIR] = str(live_dir)
    out = subprocess.run(
        [sys.executable, "-c", "import sys, threading; print([t.name for t in threading.enumerate()])"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "their sitecustomize ran" in out.stderr
    assert "frwatch-live" in out.stdout  # the watching thread runs (it imports no torch)
    assert "Error" not in out.stderr


def test_without_the_env_the_bootstrap_does_nothing(tmp_path: Path) -> None:
    code_dir, _ = install(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(code_dir))
    env.pop(ENV_LIVE_DIR, None)
    out = subprocess.run(
        [sys.executable, "-c", "import threading; print([t.name for t in threading.enumerate()])"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "frwatch-live" not in out.stdout and out.stderr == ""


@pytest.mark.slow
def test_each_real_rank_serves_its_socket_and_training_finishes(tmp_path: Path) -> None:
    code_dir, live_dir = install(tmp_path)
    env = with_pythonpath_appended(os.environ, code_dir)
    env[ENV_LIVE_DIR] = str(live_dir)
    stop = tmp_path / "stop"
    args = ["--mode", "healthy", "--steps", "100000", "--until-file", str(stop)]
    with live_job(2, tmp_path, args, env) as job:
        socks = [live_dir / SOCKET_NAME.format(rank=r) for r in range(2)]
        wait_for(lambda: all(answers(s, "ping") for s in socks), what="both ranks' sockets to answer ping")
        for sock in socks:
            fr = json.loads(call(str(sock), "fr_trace_json", timeout_s=10.0, max_bytes=1 << 24).body)
            assert fr["pg_status"]["0"]["last_enqueued_collective"] != "-1"
            assert all(e["profiling_name"] == "gloo:all_reduce" for e in fr["entries"])
        stop.touch()  # the ranks agree to stop at their next step, and finish
        assert job.wait(timeout_s=WAIT_S) == [0, 0]
        for rank in range(2):
            log = job.log(rank)
            assert f"live_rank {rank} done" in log
            assert f"frwatch-live: rank {rank}: torch's worker server answers on" in log
            assert log.count("frwatch-live:") == 1


@pytest.mark.slow
def test_a_stale_socket_of_a_dead_rank_is_replaced(tmp_path: Path) -> None:
    import socket as socketlib

    code_dir, live_dir = install(tmp_path)
    stale = live_dir / SOCKET_NAME.format(rank=0)
    s = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
    s.bind(str(stale))
    s.close()  # bound, never listening: what a killed rank leaves (connect is refused)
    env = with_pythonpath_appended(os.environ, code_dir)
    env[ENV_LIVE_DIR] = str(live_dir)
    with live_job(2, tmp_path, ["--mode", "stuck", "--fault-step", "2"], env):
        wait_for(lambda: answers(stale, "ping"), what="rank 0 to serve on the path a dead rank left")


BROKEN_TORCH = """
import sys
sys.stderr.write('{marker}\\n')
import torch._C._distributed_c10d as c10d
{breakage}
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "breakage",
    [
        "del c10d._WorkerServer",  # a torch without the worker server
        "def _boom(*a, **k):\n    raise RuntimeError('bind exploded')\nc10d._WorkerServer = _boom",
    ],
    ids=["no_worker_server", "server_raises"],
)
def test_a_broken_bootstrap_leaves_training_unaffected(tmp_path: Path, breakage: str) -> None:
    """torch.distributed is patched before the program runs (a usercustomize after ours): the bootstrap
    fails, says so once, and every rank trains to the end."""
    code_dir, live_dir = install(tmp_path)
    patch_dir = tmp_path / "patch"
    patch_dir.mkdir()
    (patch_dir / "usercustomize.py").write_text(
        BROKEN_TORCH.format(marker="patched torch", breakage=breakage)
    )
    program = tmp_path / "program.py"
    program.write_text(
        f"import os, runpy, sys\nsys.path.insert(0, {str(patch_dir)!r})\nimport usercustomize\n"
        # the training ends with os._exit: first let the bootstrap's thread finish its attempt (the signal)
        "import frwatch_live_boot\nreal_exit = os._exit\n"
        "def exit_after_bootstrap(code):\n"
        "    frwatch_live_boot._state['thread'].join(120)\n"
        "    real_exit(code)\n"
        "os._exit = exit_after_bootstrap\n"
        f"sys.argv = [{str(Path(__file__).with_name('live_rank_program.py'))!r}] + sys.argv[1:]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    env = with_pythonpath_appended(os.environ, code_dir)
    env[ENV_LIVE_DIR] = str(live_dir)
    with live_job(2, tmp_path, ["--mode", "healthy", "--steps", "40"], env, program=program) as job:
        assert job.wait(timeout_s=WAIT_S) == [0, 0]
        for rank in range(2):
            log = job.log(rank)
            assert "patched torch" in log and f"live_rank {rank} done" in log
            assert log.count("frwatch-live:") == 1 and "live watch is off for this process" in log
    assert list(live_dir.iterdir()) == []
