"""Run a Job's container as a local process, as a kubelet would: its command, its env (values and
Secret references resolved through the API), nothing else of this test process's environment (no
KUBECONFIG, no AWS_* of ours), and its terminationMessagePath mapped to a file we read after."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

BIN = Path(sys.executable).parent  # the venv's bin: where `frwatch` is installed (the image's PATH)


@dataclass(frozen=True)
class ContainerRun:
    returncode: int
    stdout: str
    stderr: str
    termination_message: str
    env: dict[str, str]
    argv: list[str]


def container_env(container: dict[str, Any], namespace: str, core: client.CoreV1Api) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = item["value"]
            continue
        ref = (item.get("valueFrom") or {}).get("secretKeyRef")
        assert ref is not None, f"unexpected env source {item}"
        try:
            secret = core.read_namespaced_secret(ref["name"], namespace)
        except client.ApiException as exc:
            if exc.status == 404 and ref.get("optional"):
                continue
            raise
        raw = (secret.data or {}).get(ref["key"])
        if raw is None:
            assert ref.get("optional"), f"Secret {ref['name']} has no key {ref['key']}"
            continue
        env[item["name"]] = base64.b64decode(raw).decode()
    return env


def run_container(
    job: dict[str, Any], core: client.CoreV1Api, workdir: Path, timeout: float = 240
) -> ContainerRun:
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    termination = workdir / "termination-log"
    termination.write_text("")
    tmp = workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    argv = [str(termination) if a == container["terminationMessagePath"] else a for a in container["command"]]
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(tmp), "LANG": "C.UTF-8"}
    env.update(container_env(container, job["metadata"]["namespace"], core))
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=workdir)
    return ContainerRun(proc.returncode, proc.stdout, proc.stderr, termination.read_text(), env, argv)


def no_kubernetes_credentials(run: ContainerRun) -> bool:
    return (
        not any(k.startswith("KUBE") for k in run.env)
        and "KUBERNETES_SERVICE_HOST" not in run.env
        and not os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token")
    )
