"""Issue 26: a captured rank's log does not start with torch's deprecation warning.

A real torch (2.13) gloo rank runs with the Flight Recorder variables the webhook injects into its container
(the literal values of the patched pod). A job that says it runs torch 2.13 (or whose image names it) gets the
new names and the rank prints no "is deprecated" line; a job that says it runs torch 2.5 gets the old names,
which torch 2.13 warns about: the check that the first run's silence means something. A job that says nothing
gets both names (the chart's default "any": no torch loses its dumps for a name it does not read).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import jsonpatch
import pytest
from builders import env_of, pod

from frwatch_dev.ports import free_port
from frwatch_operator import constants as c
from frwatch_operator.capture.optin import defaults
from frwatch_operator.capture.sidecar import JobContext
from frwatch_operator.capture.webhook_patch import inject
from frwatch_operator.config import Config

pytestmark = pytest.mark.slow

RANK = """
import torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=0, world_size=1)
t = torch.ones(4)
dist.all_reduce(t)
dist.destroy_process_group()
print("done", torch.__version__)
"""


def injected_env(declared: str, dump_dir: Path) -> dict[str, str]:
    """The training container's literal env after injection, the dump folder moved to ``dump_dir``."""
    cfg = Config.model_validate({"fr": {"dump_dir": str(dump_dir)}})
    settings = defaults(cfg).model_copy(update={"torch_version": declared})
    p = pod()
    out = jsonpatch.apply_patch(copy.deepcopy(p), inject(p, settings, cfg, JobContext("PyTorchJob", "j", "u", "0")).ops)
    return {k: v for k, v in env_of(out["spec"]["containers"][0]).items() if isinstance(v, str)}


def run_rank(env: dict[str, str]) -> str:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "NCCL_"))}
    proc = subprocess.run(
        [sys.executable, "-c", RANK.format(port=free_port())], env={**base, **env, "GLOO_SOCKET_IFNAME": "lo"},
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr[-2000:]
    return proc.stderr


def test_the_injected_names_print_no_deprecation_warning_on_current_torch(tmp_path: Path) -> None:
    env = injected_env("2.13", tmp_path)
    assert c.ENV_FR_BUFFER_SIZE in env and c.ENV_FR_BUFFER_SIZE_OLD not in env
    assert "is deprecated" not in run_rank(env)


def test_a_job_whose_torch_is_unknown_gets_both_names(tmp_path: Path) -> None:
    env = injected_env("", tmp_path)
    assert {c.ENV_FR_BUFFER_SIZE, c.ENV_FR_BUFFER_SIZE_OLD} <= env.keys()
    assert {c.ENV_FR_DUMP_TEMP_FILE, c.ENV_FR_DUMP_TEMP_FILE_OLD} <= env.keys()


def test_the_old_names_for_an_old_torch_are_what_current_torch_warns_about(tmp_path: Path) -> None:
    env = injected_env("2.5", tmp_path)
    assert c.ENV_FR_BUFFER_SIZE_OLD in env and c.ENV_FR_BUFFER_SIZE not in env
    stderr = run_rank(env)
    assert f"Environment variable {c.ENV_FR_BUFFER_SIZE_OLD} is deprecated; use {c.ENV_FR_BUFFER_SIZE} instead" in stderr
