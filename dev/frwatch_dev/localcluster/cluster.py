"""The local cluster: everything frwatch runs on, started and stopped by one call.

    with LocalCluster() as cluster:                 # or LocalCluster(...).start() ... .stop()
        cluster.kubectl("apply", "-f", "job.yaml")
        cluster.kubeconfig                          # for kubectl, the kubernetes client, kopf

From a shell::

    python -m frwatch_dev.localcluster.cluster up      # prints `export KUBECONFIG=...`; Ctrl-C stops
    python -m frwatch_dev.localcluster.cluster down    # stops the one `up` started (another shell)
(``updown.py``: several clusters can run side by side; ``down`` stops the right one.)

What runs (every process's output in ``cluster.logs_dir``):

* the Kubernetes API emulator (HTTP, loopback) with mutating admission webhooks (``admission.py``) and
  Pod Security admission by namespace label (``podsecurity.py``);
* SeaweedFS (``objectstore.py``), its keys in the Secret ``frwatch-s3`` of each prepared namespace;
* CRDs: PyTorchJob, JobSet, TrainJob, TrainingRuntime, ClusterTrainingRuntime (``crds/``) and frwatch's own
  (``<checkout>/crds/*.yaml``, if any); the ``torch-distributed`` ClusterTrainingRuntime Trainer v2 ships
  (``runtimes/``); the JobSet webhook's defaults at admission;
* nodes ``node-a``, ``node-b`` (default) run by the stand-in kubelet and scheduler (``kubelet.py``), the
  Job controller (``jobcontroller.py``), the training operator (``training_operator.py``), the JobSet
  controller (``jobset_controller.py``) and the Trainer v2 controller (``trainer_controller.py``), in a
  background thread of this process;
* the real frwatch operator (``frwatch operator``) as a subprocess, configured by env: the emulator
  (``KUBECONFIG``), S3, a plain-HTTP webhook on a free loopback port that a
  ``MutatingWebhookConfiguration`` (``frwatch-local``) points at, its ``/healthz`` and ``/metrics`` on
  free loopback ports too (``cluster.health_url``, ``cluster.metrics_url``: clusters side by side never
  collide). Skipped, with the reason in
  ``cluster.operator_status``, while ``frwatch_operator.main`` does not exist. With
  ``operator_replicas=N`` (N > 1), N operator processes with leader election, behind a webhook Service
  (``replicas.py``).

About 500 lines by choice: the one call that starts and stops everything, in the order the parts depend on
each other; each part it starts is its own module.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from frwatch_dev.localcluster.admission import install_webhook_admission
from frwatch_dev.localcluster.apiserver import ApiServerHandle, start_apiserver
from frwatch_dev.localcluster.client import Api, ApiStatusError, ns_path
from frwatch_dev.localcluster.identity import IdentityWebhook, install_identity_webhook
from frwatch_dev.localcluster.jobcontroller import JobController
from frwatch_dev.localcluster.jobset_controller import JobSetController, install_jobset_webhook
from frwatch_dev.localcluster.kubectl import kubectl_path
from frwatch_dev.localcluster.kubelet import Kubelet, NodeSpec
from frwatch_dev.localcluster.objectstore import ObjectStore
from frwatch_dev.localcluster.podsecurity import install_pod_security
from frwatch_dev.localcluster.replicas import LOCAL_ELECTION, ExtraReplicas, WebhookService
from frwatch_dev.localcluster.trainer_controller import TrainerController
from frwatch_dev.localcluster.training_operator import TrainingOperator
from frwatch_dev.ports import free_port
from frwatch_operator import constants as c

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
#: frwatch's own CRDs in a checkout (dev/frwatch_dev/localcluster -> <checkout>/crds)
CHECKOUT_CRDS = HERE.parents[2] / "crds"
DEFAULT_NODES = ("node-a", "node-b")
#: the webhooks of the local MutatingWebhookConfiguration and the pod label each selects on (Exists)
WEBHOOK_POD_LABELS = (
    ("inject.frwatch.io", c.KF_LABEL_JOB_NAME),
    ("inject-jobset.frwatch.io", "jobset.sigs.k8s.io/jobset-name"),
)
#: the job kinds' CRDs the local cluster installs (``crds/<name>.yaml``)
LOCAL_CRDS = ("pytorchjob", "jobset", "trainjob", "trainingruntime", "clustertrainingruntime")
MWC_NAME = "frwatch-local"
#: the operator's own namespace (the chart's): the remediation breaker keeps its ConfigMap there
OPERATOR_NAMESPACE = "frwatch-system"
S3_SECRET = "frwatch-s3"  # noqa: S105 - a Secret's name
#: where the operator's /healthz and /metrics listen (its default, all interfaces, is for a pod)
LISTEN_ADDR = "127.0.0.1"


def operator_available() -> bool:
    """Whether ``frwatch operator`` exists in this checkout (its module ``frwatch_operator.main``)."""
    return importlib.util.find_spec("frwatch_operator.main") is not None


class _LoopThread:
    """An asyncio loop in a daemon thread, for the stand-in controllers and helper servers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="frwatch-localcluster", daemon=True)
        self.tasks: list[asyncio.Task[Any]] = []
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        self.loop.close()

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=timeout)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        async def create() -> None:
            task = asyncio.get_running_loop().create_task(coro, name=name)
            task.add_done_callback(_log_end)
            self.tasks.append(task)

        self.call(create())

    def stop(self) -> None:
        async def cancel() -> None:
            for task in self.tasks:
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.call(cancel(), timeout=60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


def _log_end(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("local cluster task %s died: %r", task.get_name(), task.exception())


class LocalCluster:
    """The emulator, SeaweedFS, nodes with the stand-ins, CRDs and (when it exists) the frwatch operator."""

    def __init__(
        self,
        workdir: Path | None = None,
        nodes: Sequence[str | NodeSpec] = DEFAULT_NODES,
        *,
        start_operator: bool = True,
        operator_env: Mapping[str, str] | None = None,
        namespaces: Sequence[str] = ("default",),
        keep_workdir: bool = False,
        operator_replicas: int = 1,
        store_keys: bool = True,
        store_identities: Sequence[dict[str, object]] = (),
        identity_roles: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """``operator_env``: extra ``FRWATCH_*`` settings for the operator (e.g. remediation);
        ``namespaces``: prepared at start (``prepare_namespace``); ``keep_workdir``: leave logs behind;
        ``operator_replicas``: more than 1 runs that many operators with leader election (``replicas.py``).
        Keyless store access: ``store_keys=False`` puts the store's keys in no Secret and not in the operator's
        env; ``store_identities`` are more SeaweedFS identities, and ``identity_roles`` (role ARN -> env) turns
        on the pod identity stand-in (``identity.py``)."""
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="frwatch-localcluster-"))
        self.logs_dir = self.workdir / "logs"
        self.kubeconfig = self.workdir / "kubeconfig"
        self.nodes = list(nodes)
        self.start_operator = start_operator
        self.operator_env = dict(operator_env or {})
        self.namespaces = list(namespaces)
        self.keep_workdir = keep_workdir
        self.store_keys = store_keys
        self.store_identities = tuple(store_identities)
        self.identity_roles = dict(identity_roles or {})
        self.identity: IdentityWebhook | None = None
        self.webhook_port = free_port()
        #: the operator's /healthz and /metrics, on loopback free ports (two clusters side by side never collide)
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.apiserver: ApiServerHandle | None = None
        self.store: ObjectStore | None = None
        self.kubelet: Kubelet | None = None
        self.operator: subprocess.Popen[bytes] | None = None
        self.operator_status = "not started"
        self.operator_restarts = 0  #: times the supervisor restarted a dead operator
        #: replicas 1.. of the operator (replica 0 is ``operator``), and the webhook Service over all of them
        self.replicas = ExtraReplicas(operator_replicas, self.logs_dir, self.frwatch_env, self._spawn_replica)
        self.webhook_service = WebhookService(self._webhook_endpoints)
        self._stopping = False
        self._loop: _LoopThread | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.apiserver is None:
            raise RuntimeError("the local cluster is not started")
        return self.apiserver.url

    @property
    def metrics_url(self) -> str:
        """The operator's Prometheus metrics (``GET``)."""
        return f"http://{LISTEN_ADDR}:{self.metrics_port}/metrics"

    @property
    def health_url(self) -> str:
        """The operator's liveness endpoint (kopf's ``/healthz``)."""
        return f"http://{LISTEN_ADDR}:{self.health_port}/healthz"

    def start(self) -> LocalCluster:
        started = time.monotonic()
        try:
            self.logs_dir.mkdir(parents=True, exist_ok=True)
            self.apiserver = start_apiserver()
            self.apiserver.write_kubeconfig(self.kubeconfig)
            self.apiserver.server.pod_logs_dir = self.logs_dir / "pods"  # `kubectl logs` reads the kubelet's files
            install_webhook_admission(self.apiserver, service_urls=self.webhook_service)
            install_pod_security(self.apiserver)  # after the webhooks, as the real plugin judges the result
            install_jobset_webhook(self.apiserver)
            if self.identity_roles:
                self.identity = install_identity_webhook(self.apiserver, self.identity_roles)
            self.store = ObjectStore(self.workdir / "seaweedfs", log_path=self.logs_dir / "seaweedfs.log",
                                     identities=self.store_identities)  # fmt: skip
            self.store.start()
            self._loop = _LoopThread()
            self._loop.call(self._install_crds())
            for namespace in dict.fromkeys([*self.namespaces, OPERATOR_NAMESPACE]):
                self.prepare_namespace(namespace)
            self.kubelet = Kubelet(
                self.url,
                self.nodes,
                self.workdir / "nodes",
                logs_dir=self.logs_dir / "pods",
            )
            jobs = JobController(self.url)
            training = TrainingOperator(self.url)
            jobsets = JobSetController(self.url)
            trainer = TrainerController(self.url)
            self._loop.spawn(self.kubelet.run(), "kubelet")
            self._loop.spawn(jobs.run(), "job-controller")
            self._loop.spawn(training.run(), "training-operator")
            self._loop.spawn(jobsets.run(), "jobset-controller")
            self._loop.spawn(trainer.run(), "trainer-controller")
            ready = [self.kubelet.ready, jobs.ready, training.ready, jobsets.ready, trainer.ready]
            self._loop.call(_wait_all(ready, 30))
            if self.start_operator:
                self._start_operator()
            else:
                self.operator_status = "not started (start_operator=False)"
        except BaseException:
            self.stop()
            raise
        logger.info("local cluster up in %.1fs at %s", time.monotonic() - started, self.url)
        return self

    def stop(self) -> None:
        self._stopping = True
        self.replicas.stop(lambda proc: _stop_process(proc, 10))
        if self.operator is not None:
            _stop_process(self.operator, 10)
            self.operator = None
        if self._loop is not None:
            self._loop.stop()
            self._loop = None
        if self.apiserver is not None:
            self.apiserver.stop()
            self.apiserver = None
        if self.store is not None:
            self.store.stop()
            self.store = None
        if self._own_workdir and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- set-up --------------------------------------------------------------------------------------

    async def _install_crds(self) -> None:
        files = [HERE / "crds" / f"{name}.yaml" for name in LOCAL_CRDS]
        if CHECKOUT_CRDS.is_dir():
            files += sorted(CHECKOUT_CRDS.glob("*.yaml"))
        async with Api(self.url) as api:
            for path in files:
                for doc in yaml.safe_load_all(path.read_text()):
                    if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                        await _create_or_keep(
                            api, ns_path("apiextensions.k8s.io", "v1", "customresourcedefinitions"), doc
                        )
            for path in sorted((HERE / "runtimes").glob("*.yaml")):
                runtime = yaml.safe_load(path.read_text())
                await _create_or_keep(
                    api, ns_path("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes"), runtime
                )

    def prepare_namespace(self, namespace: str) -> None:
        """Create ``namespace`` (if absent) with the Secret frwatch's agent reads there: its S3 keys
        (``frwatch-s3``; on a real cluster, or per-namespace credentials). Its control token needs no
        Secret: the webhook injects one derived from the operator's key ring."""
        assert self.store is not None and self._loop is not None

        def b64(text: str) -> str:
            return base64.b64encode(text.encode()).decode()

        async def run() -> None:
            async with Api(self.url) as api:
                await _create_or_keep(
                    api,
                    "/api/v1/namespaces",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                )
                assert self.store is not None
                if not self.store_keys:
                    return
                for name, data in (
                    (
                        S3_SECRET,
                        {
                            "AWS_ACCESS_KEY_ID": self.store.access_key,
                            "AWS_SECRET_ACCESS_KEY": self.store.secret_key,
                        },
                    ),
                ):
                    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                            "metadata": {"name": name, "namespace": namespace},
                            "data": {k: b64(v) for k, v in data.items()}}  # fmt: skip
                    await _create_or_keep(api, ns_path("", "v1", "secrets", namespace), body)

        self._loop.call(run())

    def frwatch_env(self) -> dict[str, str]:
        """The operator's configuration (``FRWATCH_*``, ``AWS_*``, ``KUBECONFIG``) for this cluster."""
        assert self.store is not None
        store = {k: v for k, v in self.store.env().items() if self.store_keys or not k.startswith("AWS_")}
        return {
            "KUBECONFIG": str(self.kubeconfig),
            **store,
            "FRWATCH_S3_CREDENTIALS_SECRET": S3_SECRET,
            "FRWATCH_REMEDIATION_BREAKER_NAMESPACE": OPERATOR_NAMESPACE,
            "FRWATCH_AGENT_KEY_NAMESPACE": OPERATOR_NAMESPACE,
            "FRWATCH_OPERATOR_LISTEN_ADDR": LISTEN_ADDR,
            "FRWATCH_OPERATOR_HEALTH_PORT": str(self.health_port),
            "FRWATCH_OPERATOR_METRICS_PORT": str(self.metrics_port),
            "FRWATCH_WEBHOOK_ADDR": "127.0.0.1",
            "FRWATCH_WEBHOOK_PORT": str(self.webhook_port),
            "FRWATCH_WEBHOOK_INSECURE": "true",
            "FRWATCH_WEBHOOK_HOST": "127.0.0.1",
            "FRWATCH_WEBHOOK_JOB_WAIT_SECONDS": "2",
            "FRWATCH_AGENT_STABLE_SECONDS": "0.3",
            "FRWATCH_AGENT_DRAIN_SECONDS": "5",
            **(LOCAL_ELECTION | {"FRWATCH_OPERATOR_LEASE_NAMESPACE": OPERATOR_NAMESPACE} if self.replicas.replicas else {}),
            **self.operator_env,
        }

    def register_webhook(self, url: str, name: str = MWC_NAME, *, service: Mapping[str, Any] | None = None) -> None:
        """A MutatingWebhookConfiguration that sends pod CREATEs of training jobs (PyTorchJob's pods; JobSet's,
        which TrainJob's are too: one webhook per label, as objectSelectors cannot say "or") to ``url``
        (the operator's webhook, or a standalone one), or to a ``clientConfig.service`` (the replicas' webhook
        Service), failing open as frwatch's chart does."""
        assert self._loop is not None
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": webhook_name,
                "clientConfig": {"service": dict(service)} if service else {"url": url},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                "objectSelector": {"matchExpressions": [{"key": label, "operator": "Exists"}]},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            } for webhook_name, label in WEBHOOK_POD_LABELS],
        }  # fmt: skip

        async def run() -> None:
            async with Api(self.url) as api:
                path = ns_path("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
                if await api.get(f"{path}/{name}") is not None:
                    await api.delete(f"{path}/{name}")
                await api.create(path, body)

        self._loop.call(run())

    def serve_webhook(self, serve: Callable[[], contextlib.AbstractAsyncContextManager[str]]) -> str:
        """Run a webhook server (e.g. ``lambda: webhook.serve(index, config)``) in the cluster's loop until
        the cluster stops, and register it; returns its URL. For runs without the operator."""
        assert self._loop is not None
        ready: asyncio.Future[str] = self._loop.loop.create_future()

        async def hold() -> None:
            async with serve() as url:
                ready.set_result(url)
                await asyncio.Event().wait()

        self._loop.spawn(hold(), "webhook")

        async def wait() -> str:
            return await asyncio.wait_for(ready, 30)

        url = str(self._loop.call(wait()))
        self.register_webhook(f"{url}/inject")
        return url

    def launch_operator(self, operator_env: Mapping[str, str], *, register_webhook: bool = True) -> None:
        """Start the operator now, in a cluster made with ``start_operator=False`` (e.g. once a chart rendered
        for this cluster's store is applied), with ``operator_env`` over the local settings.
        ``register_webhook=False``: the caller applies its own MutatingWebhookConfiguration (a chart's), whose
        ``clientConfig.service`` the emulator routes to this operator."""
        self.operator_env = dict(operator_env)
        self._start_operator(register_webhook=register_webhook)

    def _start_operator(self, *, register_webhook: bool = True) -> None:
        if not operator_available():
            self.operator_status = (
                "skipped: `frwatch operator` does not exist yet (no module frwatch_operator.main); "
                "the cluster runs without it"
            )
            logger.warning("local cluster: %s", self.operator_status)
            return
        proc = self._spawn_operator()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = (self.logs_dir / "frwatch-operator.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"`frwatch operator` exited with {proc.returncode}:\n{tail}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.webhook_port), timeout=0.5),
            ):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(
                f"`frwatch operator` did not open its webhook port {self.webhook_port} within 60 s"
            )
        from frwatch_operator.webhook import HANDLER_ID

        self.replicas.start()
        self.operator_status = f"running (pid {proc.pid})"
        threading.Thread(target=self._supervise_operator, name="operator-supervisor", daemon=True).start()
        if not register_webhook:
            return
        service = {"namespace": OPERATOR_NAMESPACE, "name": "frwatch-webhook", "port": 443, "path": f"/{HANDLER_ID}"}
        self.register_webhook(f"http://127.0.0.1:{self.webhook_port}/{HANDLER_ID}",
                              service=service if self.replicas.replicas else None)  # fmt: skip

    def _webhook_endpoints(self) -> list[tuple[subprocess.Popen[bytes] | None, int]]:
        return [(self.operator, self.webhook_port), *((r.proc, r.webhook_port) for r in self.replicas.replicas)]

    def operator_pids(self) -> list[int]:
        """The pids of the operator processes running now (replica 0 first)."""
        return [p.pid for p, _ in self._webhook_endpoints() if p is not None and p.poll() is None]

    def _spawn_replica(self, env: Mapping[str, str], log_path: Path) -> subprocess.Popen[bytes]:
        frwatch = Path(sys.executable).parent / "frwatch"
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                [str(frwatch), "operator"], env={**_base_env(), **env}, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def _spawn_operator(self) -> subprocess.Popen[bytes]:
        frwatch = Path(sys.executable).parent / "frwatch"
        env = {**_base_env(), **self.frwatch_env()}
        log = open(self.logs_dir / "frwatch-operator.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            [str(frwatch), "operator"], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        log.close()
        restarted = f", restarted {self.operator_restarts}x" if self.operator_restarts else ""
        self.operator_status = f"running (pid {proc.pid}{restarted})"
        self.operator = proc  # published last: whoever sees the new process sees its status and count too
        return proc

    def _supervise_operator(self) -> None:
        """Restart the operator if it dies, as a Deployment would (it resumes from the Incidents' status),
        and say so loudly: the exit code and the log tail go to this process's log."""
        while True:
            proc = self.operator
            if proc is None:
                return
            code = proc.wait()
            if self.operator is not proc or self._stopping:
                return
            tail = (self.logs_dir / "frwatch-operator.log").read_text(errors="replace")[-2000:]
            self.operator_restarts += 1
            logger.error(
                "local cluster: `frwatch operator` exited with %s; restarting it (restart %d). Log tail:\n%s",
                code,
                self.operator_restarts,
                tail,
            )
            time.sleep(1.0)
            if self._stopping:
                return
            self._spawn_operator()

    # -- for users and tests -------------------------------------------------------------------------

    def break_node(self, node: str, fault: str = "Xid 79: GPU has fallen off the bus") -> None:
        """A stand-in hardware fault on ``node``: containers started there from now on see it, and the stand-in
        probe (``frwatch_dev.standin_probe``) fails on it. Nothing in the API changes (no condition, no Event):
        only a health check that runs on the node finds it, as with a real broken GPU."""
        assert self.kubelet is not None
        self.kubelet.faults[node] = fault

    def kubectl(
        self, *args: str, check: bool = True, stdin: str | None = None, timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster (``--kubeconfig``); raises with its stderr on failure when ``check``."""
        proc = subprocess.run(
            [kubectl_path(), f"--kubeconfig={self.kubeconfig}", *args], input=stdin, capture_output=True,
            text=True, timeout=timeout, env={**os.environ, "KUBECACHEDIR": str(self.workdir / "kubectl-cache")},
        )  # fmt: skip
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def api(self) -> contextlib.AbstractAsyncContextManager[Api]:
        """An async client of the cluster (``async with cluster.api() as api``)."""
        return Api(self.url)

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 120) -> Any:
        """Run a coroutine in the cluster's loop (e.g. one using ``cluster.api()``) and return its result."""
        assert self._loop is not None
        return self._loop.call(coro, timeout=timeout)


async def _wait_all(events: Sequence[asyncio.Event], timeout: float) -> None:
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), timeout)


async def _create_or_keep(api: Api, path: str, body: dict[str, Any]) -> None:
    try:
        await api.create(path, body)
    except ApiStatusError as exc:
        if exc.code != 409:
            raise


def _base_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH")
    return {k: os.environ[k] for k in keep if k in os.environ}


def _stop_process(proc: subprocess.Popen[bytes], grace: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


if __name__ == "__main__":
    from frwatch_dev.localcluster.updown import main

    sys.exit(main())
