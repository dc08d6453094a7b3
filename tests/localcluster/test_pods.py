"""What the kubelet does with a pod: env (downward API, Secrets), volumes shared by containers, native
sidecars, restarts, exit codes and signals, and deletion (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import base64

from kube import Kube, wait_for

PODS = "/api/v1/namespaces/{ns}/pods"


def pod(name: str, ns: str, **spec: object) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": "t"}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 2, **spec}}  # fmt: skip


def py(name: str, script: str, **extra: object) -> dict[str, object]:
    return {"name": name, "image": "python:3.11", "command": ["python", "-c", script], **extra}


def phase(kube: Kube, ns: str, name: str, *want: str) -> dict[str, object] | None:
    p = kube.get(PODS.format(ns=ns) + "/" + name)
    return p if p and p["status"].get("phase") in want else None


def test_env_volumes_and_a_native_sidecar(kube: Kube, ns: str) -> None:
    kube.create(f"/api/v1/namespaces/{ns}/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                                                     "data": {"k": base64.b64encode(b"s3cr3t").decode()}})  # fmt: skip
    sidecar = py("side", "import os, time, pathlib\nwhile True:\n    pathlib.Path(os.environ['SHARED'], 'beat').write_text('1'); time.sleep(0.1)",
                 restartPolicy="Always", env=[{"name": "SHARED", "value": "/shared"}],
                 volumeMounts=[{"name": "shared", "mountPath": "/shared"}])  # fmt: skip
    main = py(
        "main",
        "import os, pathlib, time\n"
        "for _ in range(100):\n"
        "    if pathlib.Path('/shared/beat'.replace('/shared', os.environ['SHARED'])).exists(): break\n"
        "    time.sleep(0.05)\n"
        "else: raise SystemExit(9)\n"
        "print(os.environ['ME'], os.environ['NODE'], os.environ['IP'], os.environ['SECRET'], os.environ['GREETING'])\n"
        "open(os.environ['TERM_FILE'], 'w').write(' '.join([os.environ['ME'], os.environ['NODE'], os.environ['IP'], "
        "os.environ['SECRET'], os.environ['GREETING']]))",
        env=[
            {"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "GREETING", "value": "hi-$(ME)"},
            {"name": "SHARED", "value": "/shared"},
            {"name": "TERM_FILE", "value": "/dev/termination-log"},
        ],
        volumeMounts=[{"name": "shared", "mountPath": "/shared"}],
    )
    kube.create(PODS.format(ns=ns), pod("p", ns, initContainers=[sidecar], containers=[main],
                                        volumes=[{"name": "shared", "emptyDir": {}}]))  # fmt: skip
    done = wait_for(lambda: phase(kube, ns, "p", "Succeeded", "Failed"), 30, "the pod to end")
    status = done["status"]  # type: ignore[index]
    assert status["phase"] == "Succeeded", status
    msg = status["containerStatuses"][0]["state"]["terminated"]["message"].split()
    assert msg == ["p", done["spec"]["nodeName"], status["podIP"], "s3cr3t", "hi-p"]  # type: ignore[index]
    side = status["initContainerStatuses"][0]
    assert side["name"] == "side" and "terminated" in side["state"]  # stopped once the main container ended


def test_on_failure_restarts_in_place_and_counts(kube: Kube, ns: str) -> None:
    script = "import os, pathlib, sys\np = pathlib.Path(os.environ['HOME'], 'n'); n = int(p.read_text()) if p.exists() else 0\np.write_text(str(n + 1)); sys.exit(0 if n >= 1 else 4)"
    kube.create(PODS.format(ns=ns), pod("r", ns, restartPolicy="OnFailure", containers=[py("main", script)]))
    done = wait_for(lambda: phase(kube, ns, "r", "Succeeded"), 30, "the pod to succeed after a restart")
    cs = done["status"]["containerStatuses"][0]  # type: ignore[index]
    assert cs["restartCount"] == 1
    assert cs["lastState"]["terminated"]["exitCode"] == 4


def test_signal_exit_code_and_deletion(kube: Kube, ns: str) -> None:
    kube.create(
        PODS.format(ns=ns),
        pod("k", ns, containers=[py("main", "import os, signal; os.kill(os.getpid(), signal.SIGABRT)")]),
    )
    done = wait_for(lambda: phase(kube, ns, "k", "Failed"), 30, "the pod to fail")
    term = done["status"]["containerStatuses"][0]["state"]["terminated"]  # type: ignore[index]
    assert (term["exitCode"], term["reason"], term["signal"]) == (134, "Error", 6)

    kube.create(PODS.format(ns=ns), pod("d", ns, containers=[py("main", "import time; time.sleep(120)")]))
    running = wait_for(lambda: phase(kube, ns, "d", "Running"), 30, "the pod to run")
    pid = int(running["status"]["containerStatuses"][0]["containerID"].removeprefix("local://"))  # type: ignore[index]
    kube.delete(PODS.format(ns=ns) + "/d")

    def gone() -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split()[2] == "Z"
        except FileNotFoundError:
            return True

    wait_for(gone, 10, f"process {pid} to be stopped")


def test_an_init_container_fills_an_empty_dir_the_main_container_reads(kube: Kube, ns: str) -> None:
    """As the source step's pod: the init container writes into an emptyDir (and its termination file, which
    the kubelet provides before the start), the main container reads the folder, mounted read-only."""
    copy = py(
        "copy",
        "import sys; open(sys.argv[1] + '/code.py', 'w').write('x = 1'); "
        "f = open(sys.argv[2], 'r+'); f.write('copied 1 of 1 files')",
        args=["/src", "/dev/termination-log"], volumeMounts=[{"name": "src", "mountPath": "/src"}],
    )  # fmt: skip
    main = py(
        "main", "import sys; print(open(sys.argv[1] + '/code.py').read()); sys.exit(0)", args=["/src"],
        volumeMounts=[{"name": "src", "mountPath": "/src", "readOnly": True}],
    )  # fmt: skip
    kube.create(PODS.format(ns=ns), pod("i", ns, initContainers=[copy], containers=[main],
                                        volumes=[{"name": "src", "emptyDir": {"sizeLimit": "1Mi"}}]))  # fmt: skip
    done = wait_for(lambda: phase(kube, ns, "i", "Succeeded", "Failed"), 30, "the pod to end")
    status = done["status"]  # type: ignore[index]
    assert status["phase"] == "Succeeded", status
    init = status["initContainerStatuses"][0]["state"]["terminated"]
    assert (init["exitCode"], init["message"]) == (0, "copied 1 of 1 files"), init


def test_an_executable_not_in_the_image_ends_the_container_start_error(kube: Kube, ns: str) -> None:
    """A real runtime fails the start of a command it cannot find: exit 128, reason StartError (restartPolicy
    Never: the pod fails), never a config error retried for ever."""
    missing = {"name": "copy", "image": "trainer:1", "command": ["frwatch-no-such-python", "-c", "pass"]}
    kube.create(PODS.format(ns=ns), pod("e", ns, initContainers=[missing], containers=[py("main", "pass")]))
    done = wait_for(lambda: phase(kube, ns, "e", "Failed"), 30, "the pod to fail")
    init = done["status"]["initContainerStatuses"][0]["state"]["terminated"]  # type: ignore[index]
    assert (init["exitCode"], init["reason"]) == (128, "StartError"), init
    assert "frwatch-no-such-python" in init["message"] and "executable file not found" in init["message"]
    assert "terminated" not in done["status"]["containerStatuses"][0]["state"]  # type: ignore[index]
