"""The cluster demo: the whole chain on the local cluster, from a rank going wrong to a verdict on the job.

It brings the local cluster up (API emulator, SeaweedFS, nodes run by the stand-in kubelet, the
stand-in controllers (Kubeflow Trainer v2, JobSet, the training operator), the real frwatch operator and
its webhook), submits an opted-in 4-rank job (``--kind trainjob|jobset|pytorchjob``, ``job_kinds``) whose
training script has a rank-dependent bug, prints what happens (pods, ranks failing, the Incident capturing
and analysing), then ``kubectl describe <kind>`` and ``kubectl get incidents``, and tears everything down.
Exit 0 when the verdict reached the job the user created.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frwatch_dev.demo.job_kinds import DEFAULT_KIND, KINDS, DemoKind
from frwatch_dev.localcluster.client import Api, ns_path
from frwatch_dev.localcluster.cluster import LocalCluster, operator_available
from frwatch_dev.localcluster.kubectl import KubectlNotFound, kubectl_path
from frwatch_dev.standin_probe import PROBE_ENV
from frwatch_dev.workloads import GPU_HANG, WORKLOAD
from frwatch_operator import constants as c

NAMESPACE = "default"
JOB = "llama"
TIMEOUT_SECONDS = 110.0


@dataclass(frozen=True)
class DemoScenario:
    title: str
    command: list[str]
    nodes: tuple[str, ...]
    note: str = ""


SCENARIOS = {
    "skip": DemoScenario(
        "rank 1 skips its gradient all_reduce at step 4 (a rank-dependent branch)",
        [*WORKLOAD, "--scenario", "skip"],
        ("node-a", "node-b"),
    ),
    "cpu_stuck": DemoScenario(
        "rank 1 blocks in its data loader at step 3 (CPU-stuck, no collective in flight)",
        [*WORKLOAD, "--scenario", "cpu_stuck"],
        ("node-a", "node-b"),
    ),
    "hardware": DemoScenario(
        "the GPU of rank 1 hangs: its all_reduce is scheduled and never starts",
        GPU_HANG,
        ("node-a", "node-b", "node-c", "node-d"),
        "simulated GPU hang: NCCL-style dump fabricated by the workload (gloo on CPU cannot hang a GPU); "
        "the ranks are real torch processes that rendezvous and train first",
    ),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scenario", default="skip", choices=sorted(SCENARIOS), help="the fault (default: %(default)s)"
    )
    p.add_argument(
        "--kind", default=DEFAULT_KIND, choices=sorted(KINDS), help="the job's kind (default: %(default)s)"
    )
    p.add_argument("--keep-logs", action="store_true", help="keep the cluster's logs (default: only when it fails)")
    p.add_argument("--keep-cluster", action="store_true",
                   help="leave the cluster up after the verdict (Ctrl-C stops it): kubectl and the report stay readable")  # fmt: skip
    p.add_argument(
        "--cordon",
        action="store_true",
        help="hardware scenario: really cordon the suspect node (default: remediation on, dry-run: the plan only)",
    )


def _hold(cluster: LocalCluster, kind: DemoKind) -> None:
    """--keep-cluster: say how to reach the cluster and read the report from its store, then wait for Ctrl-C."""
    assert cluster.store is not None
    path = "{.metadata.annotations." + c.ANN_REPORT.replace(".", "\\.") + "}"
    report = cluster.kubectl("get", kind.resource, JOB, "-o", f"jsonpath={path}", check=False).stdout.strip()
    folder = report.rsplit("/", 1)[0] if report.startswith("s3://") else f"s3://{cluster.store.bucket}/..."
    print("\n  the cluster stays up until Ctrl-C. In another shell:")
    print(f"    export KUBECONFIG={cluster.kubeconfig} PATH={Path(sys.executable).parent}:$PATH")
    print(f"    kubectl describe {kind.resource} {JOB}")
    print(f"    AWS_ACCESS_KEY_ID={cluster.store.access_key} AWS_SECRET_ACCESS_KEY={cluster.store.secret_key} "
          f"AWS_ENDPOINT_URL_S3={cluster.store.endpoint} AWS_REGION={cluster.store.region} frwatch analyze {folder}",
          flush=True)  # fmt: skip
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print()


def job_body(kind: DemoKind, scenario: DemoScenario) -> dict[str, Any]:
    return kind.build(JOB, NAMESPACE, scenario.command, len(scenario.nodes))


async def _snapshot(
    url: str, kind: DemoKind
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]]]:
    async with Api(url) as api:
        job = await api.get(ns_path(kind.group, kind.version, kind.plural, NAMESPACE, JOB))
        pods = await api.list(ns_path("", "v1", "pods", NAMESPACE))
        try:
            incidents = await api.list(ns_path(c.GROUP, c.VERSION, c.INCIDENT_PLURAL, NAMESPACE))
        except Exception:
            incidents = []
        return job, pods, incidents


async def _remediation_events(url: str) -> list[dict[str, Any]]:
    async with Api(url) as api:
        events = await api.list(ns_path("", "v1", "events", NAMESPACE))
    return [e for e in events if e.get("reason") == "Remediation" and e["involvedObject"].get("name") == JOB]


def _wait_for_remediation(cluster: LocalCluster, progress: Progress, timeout: float = 60.0) -> None:
    """The remediation step follows the verdict: wait for its Event (a plan, a cordon, or "off")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = cluster.run(_remediation_events(cluster.url))
        if events:
            for event in events:
                progress.say(f"remediation {event['message']}", f"remediation: {event['message']}")
            time.sleep(0.5)  # let the node annotations and the Incident status land with it
            return
        time.sleep(0.5)


class Progress:
    """Prints each change once: pods placed, ranks ending, the Incident's phase, the job's state."""

    def __init__(self, started: float, kind: str = "PyTorchJob") -> None:
        self.started = started
        self.kind = kind
        self.said: set[str] = set()

    def say(self, key: str, text: str) -> None:
        if key not in self.said:
            self.said.add(key)
            print(f"  [{time.monotonic() - self.started:5.1f}s] {text}", flush=True)

    def update(
        self, job: dict[str, Any] | None, pods: list[dict[str, Any]], incidents: list[dict[str, Any]]
    ) -> None:
        for pod in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
            name, spec, status = pod["metadata"]["name"], pod.get("spec") or {}, pod.get("status") or {}
            if name.startswith(JOB) and status.get("phase") == "Running":
                injected = (
                    "with the frwatch agent"
                    if c.ANN_INJECTED in (pod["metadata"].get("annotations") or {})
                    else ""
                )
                self.say(f"run {name}", f"pod {name} running on {spec.get('nodeName')} {injected}".rstrip())
            if name.startswith("frwatch-analyze") and status.get("phase") in ("Running", "Succeeded"):
                self.say(
                    "analyzer",
                    f"analysing: the analyzer Job's pod {name} runs `frwatch analyze` on the evidence in S3",
                )
            for cs in status.get("containerStatuses") or []:
                term = (cs.get("state") or {}).get("terminated")
                if term and name.startswith(JOB):
                    sig = f", signal {term['signal']}" if term.get("signal") else ""
                    self.say(
                        f"end {name}", f"pod {name}: rank process ended, exit code {term['exitCode']}{sig}"
                    )
        for incident in incidents:
            phase = (incident.get("status") or {}).get("phase")
            if phase:
                word = {"Detected": "failure detected", "Collecting": "capturing: collecting every rank's dump",
                        "Analyzing": "dumps collected; analysing"}.get(phase, phase)  # fmt: skip
                self.say(f"incident {phase}", f"Incident {incident['metadata']['name']}: {word}")
        conditions = ((job or {}).get("status") or {}).get("conditions") or []
        if conditions:
            last = conditions[-1]
            self.say(f"job {last['type']}", f"{self.kind} {JOB}: {last['type']} ({last.get('message', '')})")


def run(args: argparse.Namespace) -> int:
    scenario = SCENARIOS[args.scenario]
    kind = KINDS[getattr(args, "kind", DEFAULT_KIND)]
    started = time.monotonic()
    print(
        f"frwatch demo: a 4-rank {kind.kind} ({kind.shape(len(scenario.nodes))}) on a local cluster; "
        f"scenario '{args.scenario}': {scenario.title}"
    )
    if scenario.note:
        print(f"  NOTE: {scenario.note}")
    if not operator_available():
        print("frwatch demo: `frwatch operator` is not in this checkout; nothing to demonstrate")
        return 1
    try:
        kubectl = kubectl_path()
    except KubectlNotFound as exc:
        print(f"frwatch demo: {exc}")
        return 1
    print(f"  kubectl: {kubectl}")
    operator_env = {"FRWATCH_COLLECTION_DEADLINE_SECONDS": "30"}
    if args.scenario == "hardware":
        operator_env["FRWATCH_REMEDIATION_ENABLED"] = "true"
        operator_env["FRWATCH_REMEDIATION_DRY_RUN"] = "false" if args.cordon else "true"
        operator_env.update(PROBE_ENV)  # the dumps only nominate the node: frwatch's probe must find it sick
    print(f"  starting the local cluster (API emulator, SeaweedFS, nodes {', '.join(scenario.nodes)}, "
          "Trainer v2, JobSet and training-operator controllers, frwatch operator) ...", flush=True)  # fmt: skip
    cluster = LocalCluster(nodes=scenario.nodes, operator_env=operator_env, keep_workdir=args.keep_logs)
    with cluster:
        print(
            f"  cluster up in {time.monotonic() - started:.1f}s; every process logs to {cluster.logs_dir}"
            + ("" if args.keep_logs else " (removed at the end unless the demo fails; --keep-logs keeps them)"),
            flush=True,
        )
        print(f"  operator metrics (Prometheus): {cluster.metrics_url}", flush=True)
        if args.scenario == "hardware":
            for node in scenario.nodes:  # stand-in hardware: the probe frwatch runs on the suspect fails
                cluster.break_node(node)
            print("  stand-in hardware: every node's GPU is broken (only a probe on the node sees it)", flush=True)
        print(
            f"  kubectl apply: {kind.kind} {JOB} (annotation {c.ANN_CAPTURE}={c.CAPTURE_ENABLED})", flush=True
        )
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(job_body(kind, scenario)))
        progress = Progress(started, kind.kind)
        verdict = None
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            job, pods, incidents = cluster.run(_snapshot(cluster.url, kind))
            progress.update(job, pods, incidents)
            verdict = ((job or {}).get("metadata", {}).get("annotations") or {}).get(c.ANN_VERDICT)
            if verdict:
                progress.say("verdict", f"verdict on the job: {verdict}")
                _wait_for_remediation(cluster, progress)
                break
            time.sleep(0.5)
        print(f"\n$ kubectl describe {kind.resource} {JOB}\n")
        print(cluster.kubectl("describe", kind.resource, JOB, check=False).stdout)
        print("$ kubectl get incidents\n")
        print(cluster.kubectl("get", "incidents", check=False).stdout)
        if args.scenario == "hardware":
            print("$ kubectl get nodes\n")
            print(cluster.kubectl("get", "nodes", check=False).stdout)
        if getattr(args, "keep_cluster", False):
            _hold(cluster, kind)
        print("  tearing the local cluster down ...", flush=True)
        cluster.keep_workdir = cluster.keep_workdir or not verdict  # a failed run keeps its logs to read
    elapsed = time.monotonic() - started
    if verdict:
        print(f"frwatch demo: done in {elapsed:.0f}s: the verdict reached the job.")
        return 0
    print(
        f"frwatch demo: no verdict on the job after {elapsed:.0f}s; the logs are kept in {cluster.logs_dir} "
        "(operator: frwatch-operator.log)"
    )
    return 1
