"""NCCL's debug file as evidence: the webhook points NCCL_DEBUG_FILE into the dump folder (never over the
user's own NCCL logging), the agent uploads its tail to ``nccl/<rank>.txt`` like a dump (a real agent
process, a real SeaweedFS)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from frwatch_dev.testing.polling import wait_for
from frwatch_operator import constants as c
from frwatch_operator.agent.dumpfiles import DumpWatcher
from frwatch_operator.agent.nccl_files import NcclFiles
from frwatch_operator.capture.optin import defaults
from frwatch_operator.capture.sidecar import JobContext
from frwatch_operator.capture.webhook_patch import apply_ops, inject
from frwatch_operator.config import Config, EvidenceSettings
from frwatch_operator.store.s3 import S3Store

JOB = JobContext("PyTorchJob", "llama", "uid-1", "0")
WARN = "NCCL WARN NET/IB : Got completion from peer 10.0.0.7<43210> with status=12 opcode=0 len=0 vendor err 129 (Recv)"


def _env(env: list[dict[str, Any]] | None = None, **container: Any) -> dict[str, Any]:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "pytorch", "image": "t", **({"env": env} if env is not None else {}), **container}]}}
    patched = apply_ops(json.loads(json.dumps(pod)), inject(pod, defaults(Config()), Config(), JOB).ops)
    return {e["name"]: e.get("value") for e in patched["spec"]["containers"][0]["env"]}


def test_the_webhook_sends_nccl_warnings_into_the_dump_folder_named_for_the_rank() -> None:
    env = _env([{"name": "RANK", "value": "3"}, {"name": "WORLD_SIZE", "value": "8"}])
    assert env[c.ENV_NCCL_DEBUG] == "WARN"
    assert env[c.ENV_NCCL_DEBUG_FILE] == f"{c.DUMP_MOUNT_PATH}/nccl.3.%h.%p.txt"


def test_several_processes_a_pod_or_no_rank_give_a_file_named_for_host_and_pid() -> None:
    many = _env([{"name": "RANK", "value": "1"}, {"name": "PET_NPROC_PER_NODE", "value": "8"}])
    assert many[c.ENV_NCCL_DEBUG_FILE] == f"{c.DUMP_MOUNT_PATH}/nccl.%h.%p.txt"
    assert _env()[c.ENV_NCCL_DEBUG_FILE] == f"{c.DUMP_MOUNT_PATH}/nccl.%h.%p.txt"
    odd = _env([{"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])
    assert odd[c.ENV_NCCL_DEBUG_FILE] == f"{c.DUMP_MOUNT_PATH}/nccl.%h.%p.txt"


@pytest.mark.parametrize(
    "user",
    [
        [{"name": "NCCL_DEBUG", "value": "INFO"}],
        [{"name": "NCCL_DEBUG_FILE", "value": "/logs/nccl.%h.%p"}],
        [{"name": "NCCL_DEBUG", "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}}],
    ],
)
def test_a_users_own_nccl_logging_is_left_alone(user: list[dict[str, Any]]) -> None:
    env = _env(user)
    assert {k: v for k, v in env.items() if k.startswith("NCCL_")} == {
        e["name"]: e.get("value") for e in user
    }


def test_envfrom_may_set_nccl_logging_so_nothing_is_added() -> None:
    env = _env(envFrom=[{"configMapRef": {"name": "nccl-settings"}}])
    assert c.ENV_NCCL_DEBUG not in env and c.ENV_NCCL_DEBUG_FILE not in env


def test_turned_off_by_config() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "pytorch", "image": "t"}]}}
    config = Config(evidence=EvidenceSettings(nccl_debug=False))
    ops = inject(pod, defaults(config), config, JOB).ops
    assert '"NCCL_DEBUG"' not in json.dumps(ops) and '"NCCL_DEBUG_FILE"' not in json.dumps(ops)


# --- the agent's side ------------------------------------------------------------------------------------
def test_files_are_taken_by_rank_bounded_to_their_tail_and_again_when_they_grow(tmp_path: Path) -> None:
    files = NcclFiles(tmp_path, max_bytes=1024, stable_seconds=0.5)
    named = tmp_path / "nccl.5.host-a.77.txt"
    named.write_bytes(b"x" * 5000 + b"\n" + WARN.encode() + b"\n")
    anon = tmp_path / "nccl.host-a.78.txt"
    anon.write_bytes(WARN.encode() + b"\n")
    assert files.poll(0.0, frozenset()) == []  # seen once: not settled yet
    due = files.poll(1.0, frozenset())
    assert [(d.rank, len(d.data)) for d in due] == [(5, 1024)] and due[0].data.endswith(WARN.encode() + b"\n")
    assert files.skipped() == [{"name": anon.name, "why": "an NCCL debug file whose rank is not known yet (the pod's dumps show none)"}]
    files.sent(due[0])
    assert files.poll(2.0, frozenset()) == []
    # the pod's dumps show one rank: the unnamed file is that rank's
    assert [d.rank for d in files.poll(3.0, frozenset({2}))] == [2]
    with named.open("ab") as f:
        f.write(b"more\n")
    files.poll(4.0, frozenset())
    assert [d.data[-5:] for d in files.poll(5.0, frozenset())] == [b"more\n"]


def test_links_are_never_followed_and_the_dump_watcher_leaves_nccl_files_alone(tmp_path: Path) -> None:
    secret = tmp_path / "outside"
    secret.write_bytes(b"not yours")
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    os.symlink(secret, dumps / "nccl.1.h.2.txt")
    files = NcclFiles(dumps, max_bytes=1024, stable_seconds=0.0)
    files.poll(0.0, frozenset())
    assert files.poll(1.0, frozenset()) == []
    assert "symbolic link" in files.skipped()[0]["why"]
    watcher = DumpWatcher(dumps, c.DUMP_FILE_PREFIX, 0.0, 30.0)
    watcher.poll(0.0)
    assert watcher.skipped.report() == []


@pytest.mark.slow
def test_the_agent_uploads_the_nccl_file_as_the_ranks_evidence(start_agent: Any, s3: Any, torch_dumps: dict[str, bytes]) -> None:
    agent = start_agent()
    store = S3Store(s3.settings())
    (agent.dump_dir / f"{c.DUMP_FILE_PREFIX}1").write_bytes(torch_dumps["rank1.pickle"])
    (agent.dump_dir / "nccl.trainer-7.4242.txt").write_bytes(f"trainer-7:4242:4260 [0] {WARN}\n".encode())
    key = f"{agent.root}/nccl/1.txt"
    wait_for(lambda: store.exists(key), what="the NCCL file of rank 1")
    assert store.get(key).endswith(WARN.encode() + b"\n")
    assert agent.stop() == 0, agent.log.read_text()
