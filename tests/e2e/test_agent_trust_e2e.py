"""The agent is who frwatch injected, and no job holds another's work (issue 25, items 4 and 5), end to end.

The tenant's pod template arrives with ``frwatch.io/injected: "true"`` (on main it skipped the injection) and
a container of its own named ``frwatch-agent`` declaring the control port: the attack's fake agent. What the
fake does (``FAKE``, plain Python in the pod):

* where frwatch injected the pod (its containers then carry ``FRWATCH_POD_NAME``), the tenant, who owns its
  pod, turns on the agent beside it: ``freeze`` stops it (SIGSTOP: its port accepts and never answers),
  ``drip``/``answer`` kill it and take its port (on a real cluster: ``shareProcessNamespace`` and the
  agent's uid; here every pod's processes are the machine's, found by the agent's pod IP in
  ``/proc/<pid>/environ``);
* on the port it holds, ``drip`` answers one byte every 1.5 s, forever; ``answer`` answers at once a
  200 with a body, as a forger would. Each request's head is printed (the test reads whether a token was
  ever in it).

Measured (printed): the good job's live rounds while it hangs and the time from its failure to its verdict,
without and with eight hostile jobs. On main the hostile agents took every live round and kopf's workers
(another job: no live round, no verdict in 150 s).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from datetime import datetime

import pytest
from e2e_helpers import WORKLOAD, Obj, Target, wait_for

from frwatch_operator import constants as c
from frwatch_operator.config import env_name

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: The fake agent (see the module docstring). Env: POD_IP (downward API), CTL_PORT (the port the tenant
#: declares; an injected pod's agent's own port wins), ATTACK (freeze | drip | answer).
FAKE = r"""
import os, signal, socket, sys, threading, time
ip, port, attack = os.environ["POD_IP"], int(os.environ["CTL_PORT"]), os.environ["ATTACK"]
def agents():
    mark = ("FRWATCH_AGENT_CONTROL_ADDR=" + ip + "\0").encode()
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                env = open("/proc/" + d + "/environ", "rb").read()
            except OSError:
                continue
            if mark in env:
                yield int(d), env
if "FRWATCH_POD_NAME" in os.environ:  # frwatch injected this pod: its agent runs beside this container
    while True:
        found = list(agents())
        if found:
            for part in found[0][1].split(b"\0"):
                if part.startswith(b"FRWATCH_AGENT_CONTROL_PORT="):
                    port = int(part.split(b"=", 1)[1])
            try:
                socket.create_connection((ip, port), timeout=1).close()
                break
            except OSError:
                pass
        time.sleep(0.2)
    if attack == "freeze":
        for pid, _ in agents():
            os.kill(pid, signal.SIGSTOP)
        print("froze the injected agent", flush=True)
        time.sleep(10**6)
server = None
while server is None:
    for pid, _ in agents():
        os.kill(pid, signal.SIGKILL)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((ip, port))
        s.listen(64)
        server = s
    except OSError:
        s.close()
        time.sleep(0.01)
print("holding the control port", port, flush=True)
def serve(conn):
    try:
        head = conn.recv(65536)
        print("request:", repr(head[:3000]), flush=True)
        if attack == "answer":
            body = b'{"asked": [0], "failed": {}, "schema": "frwatch.live/v1", "pod": "x", "ranks": []}'
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            return
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"{" * 1000000:
            conn.sendall(bytes([byte]))
            time.sleep(1.5)
    except OSError:
        pass
    finally:
        conn.close()
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""
#: The port the tenant's fake declares (on main, the operator called it there).
FAKE_PORT = 18089
LIVE = {c.ANN_CAPTURE: c.CAPTURE_ENABLED, c.ANN_LIVE: c.LIVE_ENABLED}


def submit_hostile(target: Target, attack: str, *, fail_after_s: int | None) -> str:
    """A one-pod job whose template pre-sets ``frwatch.io/injected`` and brings its own ``frwatch-agent``;
    its training container fails after ``fail_after_s`` (None: runs on)."""
    name = f"hostile-{attack[:5]}-{uuid.uuid4().hex[:6]}"
    train = f"import time, sys; time.sleep({fail_after_s}); sys.exit(1)" if fail_after_s else "import time; time.sleep(3600)"
    fake = {
        "name": c.AGENT_CONTAINER, "image": target.image, "command": ["python", "-c", FAKE],
        "ports": [{"name": c.AGENT_CONTROL_PORT_NAME, "containerPort": FAKE_PORT, "protocol": "TCP"}],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "CTL_PORT", "value": str(FAKE_PORT)}, {"name": "ATTACK", "value": attack},
                {"name": c.ENV_JOB_ATTEMPT, "value": "0"}],
    }  # fmt: skip
    template = {
        "metadata": {"annotations": {c.ANN_INJECTED: "true"}},
        "spec": {"containers": [{"name": "pytorch", "image": target.image, "command": ["python", "-c", train]}, fake]},
    }
    body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": target.namespace, "annotations": LIVE},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "Never", "template": template}}}}  # fmt: skip
    target.custom.create_namespaced_custom_object("kubeflow.org", "v1", target.namespace, "pytorchjobs", body)
    return name


@pytest.fixture
def jobs(target: Target) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        target.delete_job(name)


def the_pod(target: Target, name: str) -> Obj:
    return wait_for(lambda: (p := target.pods(name)) and p[0].get("status", {}).get("podIP") and p[0], 120,
                    f"{name}'s pod running")  # type: ignore[no-any-return]  # fmt: skip


def fake_log(target: Target, pod: Obj) -> str:
    names = [x["name"] for x in pod["spec"]["containers"]]
    fake = c.LOOKALIKE_CONTAINER if c.LOOKALIKE_CONTAINER in names else c.AGENT_CONTAINER
    try:
        return str(target.core.read_namespaced_pod_log(pod["metadata"]["name"], target.namespace, container=fake))
    except Exception:  # not started yet
        return ""


def env_of(container: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def test_a_pod_arriving_injected_with_its_own_agent_is_injected_and_the_look_alike_gets_no_token(
    target: Target, jobs: list[str]
) -> None:
    jobs.append(name := submit_hostile(target, "answer", fail_after_s=None))
    pod = the_pod(target, name)
    annotations = pod["metadata"]["annotations"]
    assert annotations.get(c.ANN_INJECTED) != "true" and annotations.get(c.ANN_AGENT_ID), annotations
    inits = pod["spec"].get("initContainers") or []
    assert [x["name"] for x in inits] == [c.AGENT_CONTAINER], "frwatch's agent was not injected"
    token = env_of(inits[0])[env_name("agent", "token")]
    [renamed] = [x for x in pod["spec"]["containers"] if x["name"] == c.LOOKALIKE_CONTAINER]
    # no token; the tenant's FRWATCH_JOB_ATTEMPT gone (what it has of frwatch's is a training container's)
    assert env_name("agent", "token") not in env_of(renamed) and c.ENV_JOB_ATTEMPT not in env_of(renamed)
    assert c.AGENT_CONTROL_PORT_NAME not in [p.get("name") for p in renamed.get("ports") or []]
    # the fake takes the port and answers at once: refused, said on the job, and called no more
    wait_for(lambda: target.events(name, "AgentNotAuthenticated"), 90, "AgentNotAuthenticated on the job")
    calls = fake_log(target, pod).count("request:")
    time.sleep(10)  # five more live rounds (every 2 s)
    log = fake_log(target, pod)
    assert 1 <= calls == log.count("request:"), log[-2000:]
    assert "Authorization: Frwatch t=" in log and token not in log and token.split(".")[1] not in log
    assert "Bearer" not in log


def verdict_latency(target: Target, name: str) -> float:
    """Seconds from the job's first failed container (its finishedAt) to its verdict annotation."""
    target.wait_verdict(name, timeout=240)
    seen = time.time()
    ends = [datetime.fromisoformat(str(s["state"]["terminated"]["finishedAt"]).replace("Z", "+00:00")).timestamp()
            for p in target.pods(name) for s in (p.get("status") or {}).get("containerStatuses") or []
            if (s.get("state") or {}).get("terminated", {}).get("exitCode") not in (None, 0)]  # fmt: skip
    assert ends, "no failed container"
    return seen - min(ends)


def live_rounds(target: Target, name: str) -> int:
    """The job's live rounds that read at least one rank (the operator logs one line a round)."""
    pattern = rf"live round of job {re.escape(target.namespace)}/{re.escape(name)} attempt \S+: \d+ agent\(s\) " \
        r"pulled, \d+ unreachable, (\d+) rank\(s\) read"
    return sum(1 for read in re.findall(pattern, target.operator_log()) if int(read) > 0)


def good_job(target: Target, jobs: list[str]) -> tuple[int, float]:
    """A live job whose rank 1 skips a collective and hangs 20 s before gloo times out: its live rounds
    until it failed, and how long its verdict took after the failure."""
    name = target.submit([*WORKLOAD, "--scenario", "skip", "--timeout-s", "20"], prefix="good", annotations=LIVE,
                         env={"PYTHONPATH": ""})  # the webhook appends the live bootstrap to a literal one
    jobs.append(name)
    latency = verdict_latency(target, name)
    pods = target.pods(name)  # admitted with capture (on main, under attack, they were not)
    assert pods and all(c.AGENT_CONTAINER in [x["name"] for x in p["spec"].get("initContainers") or []] for p in pods)
    return live_rounds(target, name), latency


def test_hostile_agents_in_eight_jobs_stall_no_other_job(target: Target, jobs: list[str]) -> None:
    rounds_before, latency_before = good_job(target, jobs)
    hostile = [submit_hostile(target, "freeze" if i % 2 else "drip", fail_after_s=20) for i in range(8)]
    jobs.extend(hostile)
    pods = [the_pod(target, name) for name in hostile]
    wait_for(lambda: all("froze" in (log := fake_log(target, p)) or "holding" in log for p in pods), 120,
             "every fake agent in place")  # fmt: skip
    rounds_during, latency_during = good_job(target, jobs)
    print(f"good job without the attack: {rounds_before} live rounds, verdict {latency_before:.1f} s after the "
          f"failure; with 8 hostile jobs: {rounds_during} live rounds, verdict {latency_during:.1f} s")  # fmt: skip
    log = target.operator_log()
    # the attack was made: the hostile agents were called, and each call was cut at its deadline
    assert any(f"live round of job {target.namespace}/{h}" in log for h in hostile), "no hostile job was pulled"
    assert "did not answer whole within" in log
    assert rounds_during >= max(3, rounds_before // 2), (rounds_before, rounds_during)
    assert latency_during <= 2 * latency_before + 30, (latency_before, latency_during)
