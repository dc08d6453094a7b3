"""``frwatch operator`` as a subprocess for the tests: start (until its webhook listens), SIGTERM or SIGKILL,
its log and JSON log records, its /healthz and /metrics, and an AdmissionReview sent to its webhook over
real HTTP, as the API server sends it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frwatch_dev.testing.admission import patched, review


@dataclass
class OperatorProcess:
    """``frwatch operator`` as a subprocess (its own session, so a stop reaches its whole group)."""

    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def webhook_port(self) -> int:
        return int(self.env["FRWATCH_WEBHOOK_PORT"])

    def start(self, timeout: float = 30.0) -> OperatorProcess:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "frwatch_operator.cli", "operator"], env=self.env, stdout=log, stderr=log,
            start_new_session=True,
        )  # fmt: skip
        log.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"operator exited {self.proc.returncode}:\n{self.log()[-3000:]}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.webhook_port), 0.2),
            ):
                return self
            time.sleep(0.1)
        raise AssertionError(f"operator's webhook never listened:\n{self.log()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye (a crash or an OOM kill)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait(timeout=10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def get(self, port_env: str, path: str) -> tuple[int, str]:
        """GET ``path`` on the operator's port named by ``port_env`` (its env): (status, body)."""
        url = f"http://127.0.0.1:{self.env[port_env]}{path}"
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def healthz(self) -> tuple[int, str]:
        """kopf's liveness endpoint, as the kubelet's livenessProbe calls it."""
        return self.get("FRWATCH_OPERATOR_HEALTH_PORT", "/healthz")

    def metrics(self) -> dict[str, float]:
        """One Prometheus scrape of ``/metrics``: ``'name{labels}'`` -> value (the text format's samples)."""
        status, text = self.get("FRWATCH_OPERATOR_METRICS_PORT", "/metrics")
        assert status == 200, text
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples

    def log_records(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log().splitlines():
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    out.append(obj)
        return out

    def admit(self, pod: dict[str, Any], namespace: str) -> dict[str, Any]:
        """Send the pod through the operator's mutating webhook (a real AdmissionReview over HTTP, as the
        API server does on Pod CREATE) and return the pod with the patch applied."""
        body = review(pod, namespace)
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.webhook_port}/frwatch-inject", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"}, method="POST",
        )  # fmt: skip
        with urllib.request.urlopen(req, timeout=10) as resp:
            answer = json.loads(resp.read())["response"]
        return patched(pod, answer)
