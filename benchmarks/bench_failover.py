"""Two operator replicas on the local cluster: what killing the leader mid-incident costs.

    .venv/bin/python benchmarks/bench_failover.py [--runs 1]

For each run: a 4-rank PyTorchJob whose rank 1 skips a collective (every rank dumps). Once its Incident
is under way (Collecting or Analyzing), the Lease's holder is SIGKILLed (no goodbye: its Lease must
expire, 6 s with the local cluster's timings). The script prints the seconds from the kill until another
replica holds the Lease, from the kill until the verdict is on the job, and the Incident's count
(always 1) and analyzer Job count (always 1). A control job without a kill gives the verdict time from
the Incident's start without failover.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
import uuid
from typing import Any

from kubernetes import client, config

from bench_jobs import submit
from frwatch_dev.localcluster.cluster import OPERATOR_NAMESPACE, LocalCluster
from frwatch_dev.workloads import WORKLOAD
from frwatch_operator import constants as c

NAMESPACE = "bench"
LEASE = "frwatch-leader"
SKIP = [*WORKLOAD, "--scenario", "skip"]


def holder(api: client.ApiClient) -> str:
    lease = client.CoordinationV1Api(api).read_namespaced_lease(LEASE, OPERATOR_NAMESPACE)
    return str(lease.spec.holder_identity or "")


def incidents(api: client.ApiClient, job: str) -> list[dict[str, Any]]:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(c.GROUP, c.VERSION, NAMESPACE, c.INCIDENT_PLURAL)
    return [i for i in items["items"] if i["spec"]["jobRef"]["name"] == job]


def verdict(api: client.ApiClient, job: str) -> str:
    body = client.CustomObjectsApi(api).get_namespaced_custom_object("kubeflow.org", "v1", NAMESPACE, "pytorchjobs", job)
    return str((body["metadata"].get("annotations") or {}).get(c.ANN_VERDICT) or "")


def until(check: Any, timeout: float = 300) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic()
        time.sleep(0.1)
    raise SystemExit("timed out")


def run(cluster: LocalCluster, api: client.ApiClient, kill: bool) -> dict[str, Any]:
    job = f"{'kill' if kill else 'control'}-{uuid.uuid4().hex[:5]}"
    submit(api, NAMESPACE, job, SKIP)
    underway = until(lambda: any((i.get("status") or {}).get("phase") in ("Collecting", "Analyzing")
                                 for i in incidents(api, job)))  # fmt: skip
    out: dict[str, Any] = {"job": job}
    if kill:
        leader = holder(api)
        pid = int(leader.rsplit("-", 1)[1])
        assert pid in cluster.operator_pids(), leader
        os.killpg(pid, signal.SIGKILL)
        underway = time.monotonic()
        out["new_leader_after"] = until(lambda: holder(api) not in ("", leader)) - underway
    out["verdict_after"] = until(lambda: verdict(api, job)) - underway
    [incident] = incidents(api, job)
    batch = client.BatchV1Api(api).list_namespaced_job(OPERATOR_NAMESPACE).items
    uid = incident["metadata"]["uid"]
    out["analyzer_jobs"] = sum((j.metadata.annotations or {}).get(c.ANN_INCIDENT_UID) == uid for j in batch)
    out["incidents"] = len(incidents(api, job))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with LocalCluster(nodes=("node-a", "node-b"), namespaces=(NAMESPACE,), operator_replicas=2,
                      operator_env={"FRWATCH_COLLECTION_DEADLINE_SECONDS": "30"}) as cluster:  # fmt: skip
        api = config.new_client_from_config(str(cluster.kubeconfig))
        until(lambda: holder(api), 60)
        for _ in range(args.runs):
            control = run(cluster, api, kill=False)
            print(f"control (no kill): verdict {control['verdict_after']:.1f} s after the Incident got under way; "
                  f"{control['incidents']} Incident, {control['analyzer_jobs']} analyzer Job", flush=True)  # fmt: skip
            killed = run(cluster, api, kill=True)
            print(f"leader killed: another replica leads {killed['new_leader_after']:.1f} s after the kill, "
                  f"verdict {killed['verdict_after']:.1f} s after it; {killed['incidents']} Incident, "
                  f"{killed['analyzer_jobs']} analyzer Job", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
