"""The agent as a real process for tests and benchmarks: start it on a folder against a store, talk to its
control endpoint, stop it, read its peak memory; and large dumps of the real schema to feed it."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frwatch_dev.dumps import pickle_bytes, world
from frwatch_operator.agent.auth import sign_call

TOKEN = "s3cret-token"


class AgentProcess:
    def __init__(self, proc: subprocess.Popen[str], port: int, root: str, dump_dir: Path, log: Path) -> None:
        self.proc, self.port, self.root, self.dump_dir, self.log = proc, port, root, dump_dir, log

    def request(self, method: str, path: str, token: str | None = None, body: Any = None,
                raw: bytes | None = None) -> tuple[int, Any]:  # fmt: skip
        data = raw if raw is not None else json.dumps(body).encode() if body is not None else None
        # signed as the operator signs its calls (agentauth): the token itself is never sent
        headers = {"Authorization": sign_call(token, method, path, data or b"")[0]} if token is not None else {}
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, headers=headers, method=method
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                got = resp.read()
                return resp.status, json.loads(got) if got.startswith(b"{") else got.decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def peak_rss_mib(self) -> float:
        """The process's peak resident memory so far (``VmHWM``), read from /proc while it runs."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmHWM in /proc/<pid>/status")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


def start_agent(
    workdir: Path, store_env: Mapping[str, str], n: int = 0, *, data_limit_bytes: int | None = None,
    dump_dir: Path | None = None, log: Path | None = None, **env_overrides: str,
) -> AgentProcess:  # fmt: skip
    """``frwatch agent`` on ``dump_dir`` (``workdir/dumps``) uploading to the store of ``store_env``, its log
    in ``log`` (``workdir/agent<n>.log``); ``env_overrides`` on top of a test pod's identity and fast
    passes. ``data_limit_bytes``: RLIMIT_DATA of the process (its heap and every private
    writable mapping, thread stacks included: stricter than a container's memory limit, which counts
    only pages touched)."""
    dump_dir = dump_dir or workdir / "dumps"
    dump_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("FRWATCH_", "AWS_"))},
        **store_env,
        "FRWATCH_S3_PREFIX": "frwatch",
        "FRWATCH_POD_NAME": "llama-worker-0", "FRWATCH_POD_NAMESPACE": "team", "FRWATCH_POD_NODE": "node-a",
        "FRWATCH_POD_UID": "pod-uid", "FRWATCH_JOB_NAME": "llama", "FRWATCH_JOB_UID": str(uuid.uuid4()),
        "FRWATCH_JOB_ATTEMPT": "0", "FRWATCH_FR_DUMP_DIR": str(dump_dir),
        "FRWATCH_AGENT_CONTROL_ADDR": "127.0.0.1", "FRWATCH_AGENT_CONTROL_PORT": "0",
        "FRWATCH_AGENT_TOKEN": TOKEN, "FRWATCH_AGENT_STABLE_SECONDS": "0.3",
        "FRWATCH_AGENT_SCAN_INTERVAL_SECONDS": "0.1", "FRWATCH_AGENT_UPLOAD_BACKOFF_INITIAL_SECONDS": "0.2",
        "FRWATCH_AGENT_UPLOAD_BACKOFF_MAX_SECONDS": "1", "FRWATCH_AGENT_DRAIN_SECONDS": "10",
        **env_overrides,
    }  # fmt: skip

    def limit() -> None:
        if data_limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (data_limit_bytes, data_limit_bytes))

    log = log or workdir / f"agent{n}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "frwatch_operator.cli", "agent"],
        env=env, text=True, stdout=subprocess.PIPE, stderr=log.open("w"), preexec_fn=limit,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"agent exited before listening:\n{log.read_text()}"
    hello = json.loads(line)
    return AgentProcess(proc, int(hello["port"]), hello["root"], dump_dir, log)


def big_dump(nbytes: int, rank: int = 0) -> bytes:
    """A pickled dump of the real schema of about ``nbytes`` (a ring buffer far above the default 2000
    entries, every entry distinct), the way torch pickles it (protocol 2, frames shared)."""
    base = world(1).all_reduce(steps=200).dumps()[0]
    template = base["entries"][-1]
    per_entry = len(pickle_bytes({**base, "entries": [dict(template, record_id=i) for i in range(1000)]}))
    per_entry = max(1, (per_entry - len(pickle_bytes({**base, "entries": []}))) // 1000)
    count = max(1, nbytes // per_entry)
    t0 = int(template["time_created_ns"])
    entries = [
        dict(template, record_id=i, collective_seq_id=i + 1, time_created_ns=t0 + i * 40_000_000 + rank)
        for i in range(count)
    ]
    return pickle_bytes({**base, "entries": entries})
