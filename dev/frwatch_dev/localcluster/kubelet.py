"""A stand-in kubelet and scheduler: pods of the API emulator run as local processes on named nodes.

    kubelet = Kubelet(api_url, ["node-a", "node-b"], state_dir)
    await kubelet.run()          # until cancelled; then every process it started is stopped

What it does, as the real ones do (talking to the API over HTTP only):

* **nodes**: registers a ``Node`` per name (labels ``kubernetes.io/hostname``, ``kubernetes.io/os``, the
  ones given; ``Ready``; capacity) and keeps it Ready;
* **scheduling**: binds each pending pod without ``spec.nodeName`` to one of its nodes that is Ready,
  not cordoned (``spec.unschedulable``), matches ``nodeSelector`` and whose ``NoSchedule``/``NoExecute``
  taints the pod tolerates, the node with the fewest live pods first; otherwise the pod stays
  Pending with ``PodScheduled=False/Unschedulable`` and a ``FailedScheduling`` Event. A pod that names
  its node is run there without the scheduler (as in Kubernetes: cordons do not stop it);
* **running**: per pod a folder with its volumes (``emptyDir``, ``hostPath``, ``secret``, ``configMap``;
  others: an empty folder), a pod IP of its own on loopback (``127.<10+node index>.x.y``); init
  containers in order (an executable not found ends the container ``StartError``, exit 128, as a
  real runtime does), native sidecars (``restartPolicy: Always`` init containers) started first and
  kept running (a sidecar's ``startupProbe.tcpSocket`` passed before later containers start, as Kubernetes
  waits for it; other probe kinds are not run), then the containers, each a process (own session) with the env the kubelet builds
  (``podspec.container_env``: envFrom, env, downward API, Secret and ConfigMap refs), paths
  rewritten to the pod's folders (``podspec``) and pod DNS names of its own subdomain to loopback
  (``poddns``); restarts per ``restartPolicy`` with a doubling
  back-off (``CrashLoopBackOff``); when the containers are done, sidecars get SIGTERM; phase
  Pending/Running/Succeeded/Failed, conditions, container states (running; terminated with exitCode,
  reason ``Completed``/``Error``, ``signal``, the termination message), ``restartCount`` and
  ``lastState`` through ``pods/status``; Events (Scheduled, Started, Killing, BackOff, Failed);
* **deleting**: a pod that disappears (or gets a ``deletionTimestamp``) has its processes sent SIGTERM,
  then SIGKILL after ``terminationGracePeriodSeconds`` (capped by ``max_grace``).

What it does not: images (see ``podspec``), resource limits and ``OOMKilled``, probes (a running
container is ready), networking beyond loopback (every pod shares the host's ports: a server in a pod
binds its pod IP, from the downward API ``status.podIP``), ephemeral containers, ``kubectl exec``. Each container instance's output is a file in ``logs_dir``
(``podlogs``: the real kubelet's layout), which the emulator serves as ``kubectl logs``.

Over 400 lines by choice: scheduling, the pod's lifecycle (init containers, sidecars, restarts and back-off,
deletion) and its status act on one pod's record together; the pod spec's translation is ``podspec.py``, the
logs ``podlogs.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frwatch_dev.localcluster import poddns, podlogs, podspec
from frwatch_dev.localcluster.client import Api, Informer, now, ns_path

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

COMPONENT = "kubelet"
SCHEDULER = "default-scheduler"
HOST_IP = "127.0.0.1"
#: Pod IPs a node has: 127.<10+i>.<0-249>.<1-250>.
_POD_IPS = 250 * 250
#: images whose entrypoint the kubelet knows (the repository, without tag): the frwatch image runs `frwatch`
DEFAULT_ENTRYPOINTS: Mapping[str, Sequence[str]] = {"ghcr.io/frwatch/frwatch": ("frwatch",)}
#: What a container started on a node with a stand-in hardware fault sees (``Kubelet.faults``).
FAULT_ENV = "FRWATCH_DEV_NODE_FAULT"
#: every pod's network is the host's loopback: gloo must use it
DEFAULT_NODE_ENV: Mapping[str, str] = {"GLOO_SOCKET_IFNAME": "lo"}


@dataclass(frozen=True)
class NodeSpec:
    """A node the kubelet registers and runs pods for."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass
class ContainerRun:
    spec: Obj
    role: str  # "init" | "sidecar" | "main"
    log_dir: Path  #: one file per instance in it (``podlogs``)
    term_path: Path
    proc: subprocess.Popen[bytes] | None = None
    restart_count: int = 0
    started_at: str = ""
    state: Obj = field(default_factory=lambda: {"waiting": {"reason": "PodInitializing"}})
    last_state: Obj = field(default_factory=dict)
    not_before: float = 0.0
    backoff: float = 0.0
    completed: bool = False  # an init container that ended with 0
    term_sent: bool = False
    startup_ok: bool = False  # a sidecar's startupProbe passed (or it has none we run)

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")

    @property
    def log_path(self) -> Path:
        """This instance's output (``kubectl logs``; the one before it is ``--previous``)."""
        return self.log_dir / f"{self.restart_count}.log"

    @property
    def running(self) -> bool:
        return self.proc is not None

    @property
    def terminated(self) -> Obj | None:
        value = self.state.get("terminated")
        return value if isinstance(value, dict) else None

    def status(self) -> Obj:
        out: Obj = {
            "name": self.name,
            "image": str(self.spec.get("image") or ""),
            "imageID": "",
            "ready": self.running,
            "started": self.running,
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }
        if self.proc is not None:
            out["containerID"] = f"local://{self.proc.pid}"
        elif self.terminated and self.terminated.get("containerID"):
            out["containerID"] = self.terminated["containerID"]
        return out


@dataclass
class PodRun:
    namespace: str
    name: str
    uid: str
    node: str
    ip: str
    dir: Path
    pod: Obj
    inits: list[ContainerRun]
    mains: list[ContainerRun]
    volumes: dict[str, str] = field(default_factory=dict)
    started: str = field(default_factory=now)
    phase: str = "Pending"
    init_failed: bool = False
    finishing: bool = False
    finish_deadline: float = 0.0
    deleting: bool = False
    delete_deadline: float = 0.0
    last_status: Obj | None = None
    volumes_ready: bool = False

    @property
    def restart_policy(self) -> str:
        return str((self.pod.get("spec") or {}).get("restartPolicy") or "Always")

    @property
    def grace(self) -> float:
        value = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        return 30.0 if value is None else float(value)

    def containers(self) -> list[ContainerRun]:
        return self.inits + self.mains

    @property
    def sidecars(self) -> list[ContainerRun]:
        return [c for c in self.inits if c.role == "sidecar"]


def _tcp_startup_probe(spec: Mapping[str, Any], ip: str) -> bool:
    """Whether a container's ``startupProbe.tcpSocket`` (port by number or by the name of one of its ports)
    connects now; True when it has no such probe."""
    probe = (spec.get("startupProbe") or {}).get("tcpSocket")
    if not isinstance(probe, Mapping):
        return True
    port = probe.get("port")
    if isinstance(port, str) and not port.isdigit():
        port = next((p.get("containerPort") for p in spec.get("ports") or [] if p.get("name") == port), None)
    try:
        with socket.create_connection((ip, int(port)), timeout=0.2):  # type: ignore[arg-type]
            return True
    except (OSError, TypeError, ValueError):
        return False


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


class Kubelet:
    """The kubelet of several local nodes plus the scheduler that binds pods to them."""

    def __init__(
        self,
        api_url: str,
        nodes: Sequence[str | NodeSpec],
        state_dir: Path,
        *,
        logs_dir: Path | None = None,
        python: str = sys.executable,
        entrypoints: Mapping[str, Sequence[str]] = DEFAULT_ENTRYPOINTS,
        node_env: Mapping[str, str] = DEFAULT_NODE_ENV,
        tick_seconds: float = 0.1,
        backoff_initial: float = 1.0,
        backoff_max: float = 10.0,
        max_grace: float = 30.0,
    ) -> None:
        self.api_url = api_url
        self.nodes = [n if isinstance(n, NodeSpec) else NodeSpec(n) for n in nodes]
        self.state_dir = Path(state_dir)
        self.logs_dir = Path(logs_dir) if logs_dir else self.state_dir / "logs"
        self.python = python
        self.entrypoints = dict(entrypoints)
        self.node_env = dict(node_env)
        self.tick = tick_seconds
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.max_grace = max_grace
        self.bin_dir = str(Path(python).parent)
        self.path_env = os.pathsep.join(
            [self.bin_dir, "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        )
        self.runs: dict[tuple[str, str], PodRun] = {}
        #: Stand-in hardware faults: node -> what is broken there (``break_node``). Every container started on
        #: such a node sees it in ``FRWATCH_DEV_NODE_FAULT``, as a real health check sees a broken GPU; the
        #: stand-in probe (``frwatch_dev.standin_probe``) fails on it.
        self.faults: dict[str, str] = {}
        # Each kubelet starts its pod IPs at a random place of its node's 62,500 (127.<10+i>.0.1-127.<10+i>.249.250):
        # local clusters run side by side on one machine (the tests, the demo, a developer's), and pods of two
        # clusters numbered from the same start bound the same IP and port (an agent died on "address already
        # in use" while another suite's cluster ran).
        self._ips: dict[str, int] = {n.name: random.randrange(_POD_IPS) for n in self.nodes}  # noqa: S311
        self._unschedulable_said: dict[str, str] = {}
        self._api: Api | None = None
        self.ready = asyncio.Event()

    # -- the loop ----------------------------------------------------------------------------------

    async def run(self) -> None:
        wake = asyncio.Event()
        async with Api(self.api_url) as api:
            self._api = api
            pods = Informer(api, "/api/v1/pods", wake)
            nodes = Informer(api, "/api/v1/nodes", wake)
            try:
                for node in self.nodes:
                    await self._register(api, node)
                pods.start()
                nodes.start()
                await pods.synced.wait()
                await nodes.synced.wait()
                self.ready.set()
                last_heartbeat = time.monotonic()
                while True:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(wake.wait(), timeout=self.tick)
                    wake.clear()
                    try:
                        await self._schedule(api, pods, nodes)
                        await self._sync(api, pods)
                        if time.monotonic() - last_heartbeat > 20:
                            last_heartbeat = time.monotonic()
                            for node in self.nodes:
                                await self._heartbeat(api, node, nodes)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        logger.exception("kubelet loop error")
                        await asyncio.sleep(0.5)
            finally:
                await pods.stop()
                await nodes.stop()
                self.kill_all()
                self._api = None

    def kill_all(self, grace: float = 5.0) -> None:
        """Stop every process this kubelet started: SIGTERM, then SIGKILL after ``grace`` seconds."""
        procs = [c.proc for r in self.runs.values() for c in r.containers() if c.proc is not None]
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
            _signal_group(proc, signal.SIGKILL)  # anything it left in its group

    # -- nodes -------------------------------------------------------------------------------------

    def _node_body(self, node: NodeSpec) -> Obj:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node.name,
                "labels": {
                    "kubernetes.io/hostname": node.name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "node.kubernetes.io/instance-type": "frwatch-local",
                    **node.labels,
                },
            },
            "spec": {},
            "status": self._node_status(node),
        }

    def _node_status(self, node: NodeSpec) -> Obj:
        stamp = now()
        capacity = {
            "cpu": str(os.cpu_count() or 1),
            "memory": "8Gi",
            "pods": "110",
            "ephemeral-storage": "20Gi",
        }
        return {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "frwatch local kubelet is posting ready status",
                 "lastHeartbeatTime": stamp, "lastTransitionTime": stamp},
                *[{"type": t, "status": "False", "reason": f"KubeletHasSufficient{r}", "message": f"kubelet has sufficient {r.lower()}",
                   "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
                  for t, r in (("MemoryPressure", "Memory"), ("DiskPressure", "Disk"), ("PIDPressure", "PID"))],
            ],
            "addresses": [{"type": "InternalIP", "address": HOST_IP}, {"type": "Hostname", "address": node.name}],
            "capacity": capacity,
            "allocatable": capacity,
            "nodeInfo": {"kubeletVersion": "v1.36.0-frwatch-local", "operatingSystem": "linux", "architecture": "amd64",
                         "containerRuntimeVersion": "frwatch-local://processes", "osImage": "frwatch local cluster",
                         "kernelVersion": os.uname().release, "kubeProxyVersion": "", "machineID": node.name,
                         "systemUUID": node.name, "bootID": node.name},
        }  # fmt: skip

    async def _register(self, api: Api, node: NodeSpec) -> None:
        path = ns_path("", "v1", "nodes", None, node.name)
        if await api.get(path) is None:
            await api.create(ns_path("", "v1", "nodes"), self._node_body(node))
        else:
            await api.patch(path + "/status", {"status": self._node_status(node)})

    async def _heartbeat(self, api: Api, node: NodeSpec, nodes: Informer) -> None:
        if ("", node.name) not in nodes.items:
            await self._register(api, node)  # deleted by someone: a kubelet re-registers its node
            return
        await api.patch(
            ns_path("", "v1", "nodes", None, node.name) + "/status", {"status": self._node_status(node)}
        )

    # -- scheduling --------------------------------------------------------------------------------

    async def _schedule(self, api: Api, pods: Informer, nodes: Informer) -> None:
        mine = {n.name for n in self.nodes}
        pending = [
            p for p in pods.values()
            if not (p.get("spec") or {}).get("nodeName")
            and (p.get("status") or {}).get("phase", "Pending") == "Pending"
            and not p["metadata"].get("deletionTimestamp")
            and (p.get("spec") or {}).get("schedulerName", SCHEDULER) == SCHEDULER
        ]  # fmt: skip
        if not pending:
            return
        load = {name: 0 for name in mine}
        for p in pods.values():
            node = (p.get("spec") or {}).get("nodeName")
            if node in load and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                load[node] += 1
        candidates = [n for n in nodes.values() if n["metadata"]["name"] in mine]
        pending.sort(key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
        for pod in pending:
            meta = pod["metadata"]
            reasons: dict[str, int] = {}
            fitting = []
            for node in candidates:
                why = podspec.fits(pod, node)
                if why is None:
                    fitting.append(node["metadata"]["name"])
                else:
                    reasons[why] = reasons.get(why, 0) + 1
            path = ns_path("", "v1", "pods", meta["namespace"], meta["name"])
            if not fitting:
                message = f"0/{len(candidates)} nodes are available: " + ", ".join(
                    f"{count} {why}" for why, count in sorted(reasons.items())
                ) + "."  # fmt: skip
                if self._unschedulable_said.get(meta["uid"]) != message:
                    self._unschedulable_said[meta["uid"]] = message
                    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": message, "lastTransitionTime": now(), "lastProbeTime": None}  # fmt: skip
                    await api.patch(
                        path + "/status", {"status": {"phase": "Pending", "conditions": [condition]}}
                    )
                    await api.event(pod, "Warning", "FailedScheduling", message, component=SCHEDULER)
                continue
            chosen = min(fitting, key=lambda n: (load[n], n))
            load[chosen] += 1
            self._unschedulable_said.pop(meta["uid"], None)
            if await api.patch(path, {"spec": {"nodeName": chosen}}) is None:
                continue
            pod.setdefault("spec", {})["nodeName"] = chosen  # the informer catches up; don't bind it twice
            await api.event(
                pod, "Normal", "Scheduled", f"Successfully assigned {meta['namespace']}/{meta['name']} to {chosen}",
                component=SCHEDULER,
            )  # fmt: skip

    # -- running pods ------------------------------------------------------------------------------

    async def _sync(self, api: Api, pods: Informer) -> None:
        mine = {n.name for n in self.nodes}
        seen: set[tuple[str, str]] = set()
        for pod in pods.values():
            meta, spec = pod["metadata"], pod.get("spec") or {}
            if spec.get("nodeName") not in mine:
                continue
            key = (meta["namespace"], meta["name"])
            run = self.runs.get(key)
            if run is not None and run.uid != meta["uid"]:
                continue  # the old pod of that name is still being stopped; start the new one after
            if run is None:
                if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or meta.get(
                    "deletionTimestamp"
                ):
                    continue  # finished before this kubelet saw it (e.g. a previous kubelet)
                run = self._new_run(pod)
                self.runs[key] = run
            seen.add(key)
            run.pod = pod
            if meta.get("deletionTimestamp") and not run.deleting:
                self._begin_delete(api, run)
        for key, run in list(self.runs.items()):
            if key not in seen and not run.deleting:
                self._begin_delete(api, run)
            if run.deleting:
                if self._step_delete(run):
                    del self.runs[key]
                    shutil.rmtree(run.dir, ignore_errors=True)
                continue
            await self._step(api, run)
            await self._report(api, run)

    def _new_run(self, pod: Obj) -> PodRun:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        node = spec["nodeName"]
        index = [n.name for n in self.nodes].index(node)
        self._ips[node] = n = (self._ips[node] + 1) % _POD_IPS
        ip = f"127.{10 + index}.{n // 250}.{n % 250 + 1}"
        # short: the pod's processes see these host paths, and a Unix socket in a volume (live watch's
        # <dump dir>/.frwatch-live/rank-<r>.sock) must fit in 107 bytes (the namespace and name did not)
        pod_dir = self.state_dir / "pods" / meta["uid"][:8]
        for sub in ("volumes", "termination", "home", "tmp"):
            (pod_dir / sub).mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(parents=True, exist_ok=True)

        def container(c: Obj, role: str) -> ContainerRun:
            logs = podlogs.container_dir(self.logs_dir, meta["namespace"], meta["name"], meta["uid"], c["name"])
            return ContainerRun(spec=c, role=role, log_dir=logs, term_path=pod_dir / "termination" / c["name"])

        inits = [
            container(c, "sidecar" if podspec.is_sidecar(c) else "init")
            for c in spec.get("initContainers") or []
        ]
        mains = [container(c, "main") for c in spec.get("containers") or []]
        if not inits:
            for c in mains:
                c.state = {"waiting": {"reason": "ContainerCreating"}}
        return PodRun(meta["namespace"], meta["name"], meta["uid"], node, ip, pod_dir, pod, inits, mains)

    async def _lookup_all(
        self, api: Api, run: PodRun, containers: Sequence[Obj]
    ) -> dict[tuple[str, str], Obj | None]:
        wanted: set[tuple[str, str]] = set()
        for c in containers:
            for source in c.get("envFrom") or []:
                for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                    if source.get(key):
                        wanted.add((kind, str(source[key].get("name") or "")))
            for item in c.get("env") or []:
                src = item.get("valueFrom") or {}
                for kind, key in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                    if src.get(key):
                        wanted.add((kind, str(src[key].get("name") or "")))
        out: dict[tuple[str, str], Obj | None] = {}
        for kind, name in wanted:
            plural = "secrets" if kind == "Secret" else "configmaps"
            out[(kind, name)] = await api.get(ns_path("", "v1", plural, run.namespace, name))
        return out

    async def _prepare_volumes(self, api: Api, run: PodRun) -> None:
        for vol in (run.pod.get("spec") or {}).get("volumes") or []:
            name = str(vol.get("name"))
            if "hostPath" in vol:
                run.volumes[name] = str(vol["hostPath"].get("path") or "/")
                continue
            folder = run.dir / "volumes" / name
            folder.mkdir(parents=True, exist_ok=True)
            run.volumes[name] = str(folder)
            for kind, key, plural, ref_name in (
                ("Secret", "secret", "secrets", "secretName"),
                ("ConfigMap", "configMap", "configmaps", "name"),
            ):
                source = vol.get(key)
                if source is None:
                    continue
                obj = await api.get(ns_path("", "v1", plural, run.namespace, str(source.get(ref_name) or "")))
                if obj is None:
                    if not source.get("optional"):
                        await api.event(run.pod, "Warning", "FailedMount",
                                        f'MountVolume.SetUp failed for volume "{name}" : {kind.lower()} "{source.get(ref_name)}" not found '
                                        "(the local kubelet mounts it empty)", component=COMPONENT, host=run.node)  # fmt: skip
                    continue
                data = podspec.decode_data({**obj, "kind": kind})
                items = source.get("items")
                chosen = {i["key"]: i.get("path", i["key"]) for i in items} if items else {k: k for k in data}
                for k, rel in chosen.items():
                    if k in data:
                        target = folder / rel
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_text(data[k])
        run.volumes_ready = True

    def _mounts(self, run: PodRun, c: ContainerRun) -> list[podspec.Mount]:
        mounts = []
        for m in c.spec.get("volumeMounts") or []:
            host = run.volumes.get(str(m.get("name")))
            if host is None:
                continue
            if m.get("subPath"):
                host = str(Path(host) / str(m["subPath"]))
                Path(host).mkdir(parents=True, exist_ok=True)
            mounts.append(podspec.Mount(str(m.get("mountPath") or ""), host))
        term = str(c.spec.get("terminationMessagePath") or podspec.DEFAULT_TERMINATION_MESSAGE_PATH)
        mounts.append(podspec.Mount(term, str(c.term_path)))
        return mounts

    async def _start(self, api: Api, run: PodRun, c: ContainerRun) -> None:
        spec = c.spec
        try:
            refs = await self._lookup_all(api, run, [spec])

            def lookup(kind: str, name: str) -> Mapping[str, str] | None:
                obj = refs.get((kind, name))
                return None if obj is None else podspec.decode_data({**obj, "kind": kind})

            env_pod = podspec.container_env(run.pod, spec, pod_ip=run.ip, host_ip=HOST_IP, lookup=lookup)
            mounts = self._mounts(run, c)
            env = {
                "PATH": self.path_env, "HOSTNAME": run.name, "HOME": str(run.dir / "home"),
                "TMPDIR": str(run.dir / "tmp"), "LANG": "C.UTF-8", **self.node_env,
                **({FAULT_ENV: self.faults[run.node]} if run.node in self.faults else {}),
            }  # fmt: skip
            env.update({k: poddns.resolve(podspec.rewrite_path(v, mounts), run.pod) for k, v in env_pod.items()})
            argv = podspec.argv_for(
                spec, env, mounts, python=self.python, entrypoints=self.entrypoints,
                which=lambda name: shutil.which(name, path=self.path_env),
            )  # fmt: skip
        except podspec.ExecutableNotFound as exc:  # as a real runtime: the start fails, the container ends
            stamp = now()
            c.state = {"terminated": {"exitCode": 128, "reason": "StartError", "message": str(exc),
                                      "startedAt": "1970-01-01T00:00:00Z", "finishedAt": stamp}}  # fmt: skip
            await api.event(run.pod, "Warning", "Failed", f"Error: {exc}", component=COMPONENT, host=run.node)
            return
        except podspec.ContainerConfigError as exc:
            c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}
            c.not_before = time.monotonic() + 2.0
            await api.event(run.pod, "Warning", "Failed", f"Error: {exc}", component=COMPONENT, host=run.node)
            return
        cwd = run.dir / "home"
        if spec.get("workingDir"):
            wanted = Path(podspec.rewrite_path(str(spec["workingDir"]), mounts))
            if wanted.is_dir():
                cwd = wanted
        # as the real kubelet: an empty file at terminationMessagePath (the program opens it, need not create it)
        c.term_path.parent.mkdir(parents=True, exist_ok=True)
        c.term_path.write_bytes(b"")
        c.log_path.parent.mkdir(parents=True, exist_ok=True)
        logger.info("%s/%s %s on %s: %s (output: %s)", run.namespace, run.name, c.name, run.node, argv, c.log_path)
        with open(c.log_path, "ab") as log:
            c.proc = subprocess.Popen(
                argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        c.started_at = now()
        c.term_sent = False
        c.state = {"running": {"startedAt": c.started_at}}
        await api.event(
            run.pod, "Normal", "Started", f"Started container {c.name}", component=COMPONENT, host=run.node
        )

    def _poll(self, c: ContainerRun) -> bool:
        """True when the container's process just ended (its state is then ``terminated``)."""
        if c.proc is None:
            return False
        code = c.proc.poll()
        if code is None:
            return False
        _signal_group(c.proc, signal.SIGKILL)  # what it left behind in its session goes with it
        exit_code, reason, sig = podspec.exit_reason(code)
        file_text = None
        with contextlib.suppress(OSError):
            file_text = c.term_path.read_text(errors="replace")
        log_tail = None
        with contextlib.suppress(OSError), open(c.log_path, "rb") as f:
            f.seek(max(f.seek(0, os.SEEK_END) - 16384, 0))
            log_tail = f.read().decode(errors="replace")
        policy = str(c.spec.get("terminationMessagePolicy") or "File")
        terminated: Obj = {
            "exitCode": exit_code, "reason": reason, "startedAt": c.started_at, "finishedAt": now(),
            "containerID": f"local://{c.proc.pid}",
        }  # fmt: skip
        if sig is not None:
            terminated["signal"] = sig
        message = podspec.termination_message(file_text, log_tail, exit_code, policy)
        if message:
            terminated["message"] = message
        c.state = {"terminated": terminated}
        c.proc = None
        return True

    async def _schedule_restart(self, api: Api, run: PodRun, c: ContainerRun) -> None:
        c.backoff = self.backoff_initial if c.backoff == 0 else min(c.backoff * 2, self.backoff_max)
        c.not_before = time.monotonic() + c.backoff
        c.last_state = c.state
        c.restart_count += 1
        c.state = {"waiting": {"reason": "CrashLoopBackOff",
                               "message": f"back-off {c.backoff:g}s restarting failed container={c.name} pod={run.name}_{run.namespace}({run.uid})"}}  # fmt: skip
        await api.event(run.pod, "Warning", "BackOff", f"Back-off restarting failed container {c.name} in pod {run.name}",
                        component=COMPONENT, host=run.node)  # fmt: skip

    async def _step(self, api: Api, run: PodRun) -> None:
        if run.phase in ("Succeeded", "Failed"):
            return
        if not run.volumes_ready:
            await self._prepare_volumes(api, run)
        clock = time.monotonic()
        for c in run.containers():
            self._poll(c)
        if run.finishing:
            self._step_finish(run, clock)
            return
        # init containers, in order; sidecars start and stay up
        inits_done = True
        for c in run.inits:
            if c.role == "sidecar":
                if not c.running:
                    if c.terminated is not None:
                        await self._schedule_restart(api, run, c)
                    if c.not_before <= clock:
                        await self._start(api, run, c)
                if c.running and not c.startup_ok:
                    c.startup_ok = _tcp_startup_probe(c.spec, run.ip)
                if not (c.running and c.startup_ok) and not c.restart_count:  # later ones wait for its start
                    inits_done = False
                    break
                continue
            if c.completed:
                continue
            inits_done = False
            if c.running or c.not_before > clock:
                break
            term = c.terminated
            if term is None:
                await self._start(api, run, c)
            elif term["exitCode"] == 0:
                c.completed = True
                inits_done = True
                continue
            elif run.restart_policy == "Never":
                run.init_failed = True
                self._begin_finish(run)
                return
            else:
                await self._schedule_restart(api, run, c)
            break
        if not inits_done:
            for c in run.mains:
                if "waiting" in c.state and c.state["waiting"].get("reason") == "ContainerCreating":
                    c.state = {"waiting": {"reason": "PodInitializing"}}
            return
        policy = run.restart_policy
        for c in run.mains:
            if c.running or c.not_before > clock:
                continue
            term = c.terminated
            if term is None:
                await self._start(api, run, c)
            elif policy == "Always" or (policy == "OnFailure" and term["exitCode"] != 0):
                await self._schedule_restart(api, run, c)
        if run.phase == "Pending" and any(c.running or c.restart_count for c in run.mains):
            run.phase = "Running"
        mains_ended = all(c.terminated is not None for c in run.mains)
        mains_ok = all(c.terminated and c.terminated["exitCode"] == 0 for c in run.mains)
        if policy != "Always" and mains_ended and (policy == "Never" or mains_ok):
            self._begin_finish(run)

    def _begin_finish(self, run: PodRun) -> None:
        """The containers are done: stop the sidecars (last started, first stopped)."""
        run.finishing = True
        run.finish_deadline = time.monotonic() + min(run.grace, self.max_grace)
        for c in reversed(run.sidecars):
            if c.proc is not None:
                _signal_group(c.proc, signal.SIGTERM)
                c.term_sent = True
        self._step_finish(run, time.monotonic())

    def _step_finish(self, run: PodRun, clock: float) -> None:
        alive = [c for c in run.containers() if c.proc is not None]
        if alive and clock < run.finish_deadline:
            return
        for c in alive:
            _signal_group(c.proc, signal.SIGKILL)  # type: ignore[arg-type]
            c.proc.wait()  # type: ignore[union-attr]
            self._poll(c)
        ok = not run.init_failed and all(c.terminated and c.terminated["exitCode"] == 0 for c in run.mains)
        run.phase = "Succeeded" if ok else "Failed"

    def _begin_delete(self, api: Api, run: PodRun) -> None:
        run.deleting = True
        run.delete_deadline = time.monotonic() + min(run.grace, self.max_grace)
        for c in run.mains + [c for c in run.inits if c.role == "init"]:
            if c.proc is not None:
                _signal_group(c.proc, signal.SIGTERM)
                c.term_sent = True
        if any(c.proc is not None for c in run.containers()):
            task = asyncio.get_running_loop().create_task(
                api.event(run.pod, "Normal", "Killing", "Stopping containers (pod deleted)", component=COMPONENT, host=run.node)
            )  # fmt: skip
            task.add_done_callback(lambda _t: None)

    def _step_delete(self, run: PodRun) -> bool:
        """True when every process of the pod is gone."""
        clock = time.monotonic()
        for c in run.containers():
            if c.proc is not None and c.proc.poll() is not None:
                _signal_group(c.proc, signal.SIGKILL)
                c.proc = None
        mains_alive = any(c.proc is not None for c in run.mains if c.role != "sidecar")
        if not mains_alive:
            for c in reversed(run.sidecars):
                if c.proc is not None and not c.term_sent:
                    _signal_group(c.proc, signal.SIGTERM)
                    c.term_sent = True
        if clock >= run.delete_deadline:
            for c in run.containers():
                if c.proc is not None:
                    _signal_group(c.proc, signal.SIGKILL)
                    c.proc.wait()
                    c.proc = None
        return all(c.proc is None for c in run.containers())

    # -- status --------------------------------------------------------------------------------------

    def status_of(self, run: PodRun) -> Obj:
        inits_done = all(c.completed or c.role == "sidecar" for c in run.inits) and all(
            c.running or c.terminated is not None for c in run.sidecars
        )
        ready = run.phase == "Running" and all(c.running for c in run.mains)

        def cond(type_: str, ok: bool, reason: str = "") -> Obj:
            out: Obj = {"type": type_, "status": "True" if ok else "False", "lastProbeTime": None,
                        "lastTransitionTime": run.started}  # fmt: skip
            if reason and not ok:
                out["reason"] = reason
            return out

        terminal = run.phase in ("Succeeded", "Failed")
        return {
            "phase": run.phase,
            "conditions": [
                cond("PodReadyToStartContainers", not terminal),
                cond("Initialized", inits_done or terminal, "ContainersNotInitialized"),
                cond("Ready", ready, "PodCompleted" if terminal else "ContainersNotReady"),
                cond("ContainersReady", ready, "PodCompleted" if terminal else "ContainersNotReady"),
                cond("PodScheduled", True),
            ],
            "hostIP": HOST_IP,
            "hostIPs": [{"ip": HOST_IP}],
            "podIP": run.ip,
            "podIPs": [{"ip": run.ip}],
            "startTime": run.started,
            "qosClass": "BestEffort",
            "initContainerStatuses": [c.status() for c in run.inits],
            "containerStatuses": [c.status() for c in run.mains],
        }

    async def _report(self, api: Api, run: PodRun) -> None:
        status = self.status_of(run)
        if status == run.last_status:
            return
        path = ns_path("", "v1", "pods", run.namespace, run.name) + "/status"
        if await api.patch(path, {"status": status}) is not None:
            run.last_status = status
