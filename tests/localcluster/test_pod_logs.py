"""`kubectl logs` against the local cluster: the stand-in kubelet's container output served as pods/log,
with the container, --tail, --limit-bytes and --previous as on a real cluster."""

from __future__ import annotations

from kube import Kube, wait_for

from frwatch_dev.localcluster.cluster import LocalCluster

PODS = "/api/v1/namespaces/{ns}/pods"
# first run: prints, leaves a marker in its emptyDir and fails; the restarted one prints again and succeeds
SCRIPT = (
    "import os, pathlib, sys\n"
    "marker = pathlib.Path(os.environ['DATA'], 'ran')\n"
    "run = 'second' if marker.exists() else 'first'\n"
    "marker.write_text('1')\n"
    "for i in range(5): print(f'{run} line {i}', flush=True)\n"
    "print('to stderr', file=sys.stderr, flush=True)\n"
    "sys.exit(0 if run == 'second' else 1)\n"
)


def _pod(name: str, ns: str) -> dict[str, object]:
    def container(cname: str, script: str) -> dict[str, object]:
        return {"name": cname, "image": "python:3.11", "command": ["python", "-c", script],
                "env": [{"name": "DATA", "value": "/data"}], "volumeMounts": [{"name": "data", "mountPath": "/data"}]}  # fmt: skip

    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"restartPolicy": "OnFailure", "terminationGracePeriodSeconds": 2,
                     "volumes": [{"name": "data", "emptyDir": {}}],
                     "containers": [container("main", SCRIPT), container("quiet", "print('hello from quiet')")]}}  # fmt: skip


def _restarted_and_done(kube: Kube, ns: str) -> dict | None:
    pod = kube.get(PODS.format(ns=ns) + "/logs")
    if not pod or pod["status"].get("phase") != "Succeeded":
        return None
    return pod


def test_kubectl_logs_reads_the_kubelet_s_output(kube: Kube, ns: str, cluster: LocalCluster) -> None:
    kube.create(PODS.format(ns=ns), _pod("logs", ns))
    pod = wait_for(lambda: _restarted_and_done(kube, ns), 60, "the pod to restart once and succeed")
    main = next(s for s in pod["status"]["containerStatuses"] if s["name"] == "main")
    assert main["restartCount"] == 1

    def logs(*args: str) -> str:
        return cluster.kubectl("logs", "-n", ns, "logs", *args).stdout

    assert logs("-c", "main") == "".join(f"second line {i}\n" for i in range(5)) + "to stderr\n"
    assert logs("-c", "main", "--previous") == "".join(f"first line {i}\n" for i in range(5)) + "to stderr\n"
    assert logs("-c", "main", "--tail=2") == "second line 4\nto stderr\n"
    assert logs("-c", "main", "--limit-bytes=8") == "second l"
    assert logs("-c", "quiet") == "hello from quiet\n"

    no_container = cluster.kubectl("logs", "-n", ns, "logs", "-c", "nope", check=False)
    assert no_container.returncode != 0 and "container nope is not valid for pod logs" in no_container.stderr
    no_previous = cluster.kubectl("logs", "-n", ns, "logs", "-c", "quiet", "--previous", check=False)
    assert 'previous terminated container "quiet" in pod "logs" not found' in no_previous.stderr


def test_logs_of_a_pod_not_yet_running_say_it_is_waiting(kube: Kube, ns: str, cluster: LocalCluster) -> None:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nowhere", "namespace": ns},
            "spec": {"nodeSelector": {"no-such": "node"},
                     "containers": [{"name": "c", "image": "python:3.11", "command": ["true"]}]}}  # fmt: skip
    kube.create(PODS.format(ns=ns), body)
    out = cluster.kubectl("logs", "-n", ns, "nowhere", check=False)
    assert out.returncode != 0
    assert 'container "c" in pod "nowhere" is waiting to start: ContainerCreating' in out.stderr, out.stderr


def test_follow_streams_until_the_container_ends(kube: Kube, ns: str, cluster: LocalCluster) -> None:
    script = "import time\nprint('one', flush=True)\ntime.sleep(1.5)\nprint('two', flush=True)\n"
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "talker", "namespace": ns},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "python:3.11", "command": ["python", "-c", script]}]}}  # fmt: skip
    kube.create(PODS.format(ns=ns), body)

    def started() -> dict | None:
        pod = kube.get(PODS.format(ns=ns) + "/talker")
        return pod if pod and pod["status"].get("phase") in ("Running", "Succeeded") else None

    wait_for(started, 30, "the container to start")
    # attached while it runs or after it ended: the whole output either way, and kubectl returns at the end
    followed = cluster.kubectl("logs", "-n", ns, "talker", "-f", timeout=60)
    assert followed.stdout == "one\ntwo\n"
