"""More replicas of ``frwatch operator`` on the local cluster, as the chart's Deployment runs them, and the
webhook Service in front of them.

``LocalCluster(operator_replicas=N)`` runs replica 0 as before (``cluster.operator``) and replicas 1..N-1
here, each a process with its own webhook, health and metrics ports, restarted when it dies as a
Deployment replaces a pod. Every replica runs with leader election on (``FRWATCH_OPERATOR_LEADER_ELECTION``;
its identity is its host name and pid, new at each start, as a new pod's name is).

:class:`WebhookService` is the ``clientConfig.service`` resolver the emulator's admission calls
(``install_webhook_admission(..., service_urls=...)``): it sends each AdmissionReview to the next replica
that is up and accepts connections, as a Service spreads requests over its ready endpoints. One difference
from a real cluster, on purpose: a dead replica leaves the rotation at once, where a real endpoint is
removed only after its readiness probe fails (requests in between fail open, and frwatch reports the pods
admitted without capture).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from frwatch_dev.ports import free_port

logger = logging.getLogger(__name__)

#: The leader election of local replicas: shorter than the chart's 15/10/2 s so a takeover is quick.
LOCAL_ELECTION = {
    "FRWATCH_OPERATOR_LEADER_ELECTION": "true",
    "FRWATCH_OPERATOR_LEASE_SECONDS": "6",
    "FRWATCH_OPERATOR_RENEW_SECONDS": "4",
    "FRWATCH_OPERATOR_RETRY_SECONDS": "0.5",
}


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


@dataclass
class Replica:
    """One operator process (a pod of the Deployment) and its ports."""

    index: int
    webhook_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0

    def ports_env(self) -> dict[str, str]:
        return {
            "FRWATCH_WEBHOOK_PORT": str(self.webhook_port),
            "FRWATCH_OPERATOR_HEALTH_PORT": str(self.health_port),
            "FRWATCH_OPERATOR_METRICS_PORT": str(self.metrics_port),
        }


Spawn = Callable[[Mapping[str, str], Path], subprocess.Popen[bytes]]


class ExtraReplicas:
    """Replicas 1..count-1 (replica 0 is the cluster's own), started, supervised and stopped together."""

    def __init__(self, count: int, logs_dir: Path, env: Callable[[], Mapping[str, str]], spawn: Spawn) -> None:
        self.replicas = [Replica(i) for i in range(1, count)]
        self._logs_dir, self._env, self._spawn = logs_dir, env, spawn
        self._stopping = False

    def log_path(self, replica: Replica) -> Path:
        return self._logs_dir / f"frwatch-operator-{replica.index}.log"

    def _start(self, replica: Replica) -> None:
        replica.proc = self._spawn({**self._env(), **replica.ports_env()}, self.log_path(replica))

    def start(self, timeout: float = 60) -> None:
        for replica in self.replicas:
            self._start(replica)
        deadline = time.monotonic() + timeout
        for replica in self.replicas:
            while not _answers(replica.webhook_port):
                proc = replica.proc
                if proc is not None and proc.poll() is not None:
                    tail = self.log_path(replica).read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"operator replica {replica.index} exited with {proc.returncode}:\n{tail}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"operator replica {replica.index} did not open its webhook port")
                time.sleep(0.2)
            threading.Thread(target=self._supervise, args=(replica,), name=f"operator-{replica.index}",
                             daemon=True).start()  # fmt: skip

    def _supervise(self, replica: Replica) -> None:
        """Start a dead replica again (a new identity: a new pod), and say so in this process's log."""
        while not self._stopping:
            proc = replica.proc
            if proc is None:
                return
            code = proc.wait()
            if self._stopping:
                return
            replica.restarts += 1
            logger.error("local cluster: operator replica %d exited with %s; restarting it (restart %d)",
                         replica.index, code, replica.restarts)  # fmt: skip
            time.sleep(1.0)
            if not self._stopping:
                self._start(replica)

    def stop(self, stop: Callable[[subprocess.Popen[bytes]], None]) -> None:
        self._stopping = True
        for replica in self.replicas:
            if replica.proc is not None:
                stop(replica.proc)


class WebhookService:
    """The webhook Service: the next replica that is up (round robin), or None when none is."""

    def __init__(self, endpoints: Callable[[], list[tuple[subprocess.Popen[bytes] | None, int]]]) -> None:
        self._endpoints = endpoints
        self._turn = itertools.count()
        #: every routing decision (replica index), for tests and logs
        self.routed: list[int] = []

    def __call__(self, namespace: str, name: str, port: int, path: str) -> str | None:
        endpoints = self._endpoints()
        start = next(self._turn)
        for i in range(len(endpoints)):
            index = (start + i) % len(endpoints)
            proc, webhook_port = endpoints[index]
            if proc is not None and proc.poll() is None and _answers(webhook_port):
                self.routed.append(index)
                return f"http://127.0.0.1:{webhook_port}/{path.lstrip('/')}"
        return None
