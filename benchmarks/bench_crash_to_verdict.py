"""From a failure to the verdict on the job, on the local cluster: how long after the ranks ended does
``frwatch.io/verdict`` appear?

    .venv/bin/python benchmarks/bench_crash_to_verdict.py [--deadline 120] [--cases all_exit,one_crash,all_dump]

Cases (4-rank PyTorchJobs, opted in, one local cluster for all of them):

- ``all_exit``: every rank exits 1 at start (``python -c "... sys.exit(1)"``): a crash before any collective.
- ``one_crash``: the workload's ``crash`` scenario: rank 1 raises in its data loader and exits 1 without a
  dump; the other ranks time out in the collective it never joined and dump.
- ``all_dump``: the ``skip`` scenario: every rank dumps (the reference).

For each it prints: seconds from the last rank's container end (as observed by polling every 0.2 s) to the
verdict annotation; from the job's submission to the verdict; the Collected condition's reason; whether an
analyzer Job ran; and the verdict. ``--deadline`` is the collection deadline (the chart's default: 120 s).
It uses only the local cluster's public API and the Kubernetes API, so the same script measures an older
checkout (run it with that checkout's ``.venv/bin/python``).
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

from kubernetes import client, config

from bench_jobs import submit
from frwatch_dev.localcluster.cluster import LocalCluster
from frwatch_dev.workloads import WORKLOAD
from frwatch_operator import constants as c

NAMESPACE = "bench"
CASES = {
    "all_exit": ["python", "-c", "import sys; print('bad learning rate: -1', file=sys.stderr); sys.exit(1)"],
    "one_crash": [*WORKLOAD, "--scenario", "crash"],
    "all_dump": [*WORKLOAD, "--scenario", "skip"],
}


def ended(pod: Any) -> bool:
    states = [s.state for s in (pod.status.container_statuses or []) if s.name == "pytorch"]
    return bool(states) and all(s.terminated is not None for s in states)


def measure(api: client.ApiClient, case: str, timeout: float) -> dict[str, Any]:
    name = f"{case.replace('_', '-')}-{uuid.uuid4().hex[:5]}"
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    submitted = time.monotonic()
    submit(api, NAMESPACE, name, CASES[case])
    last_end: float | None = None
    while time.monotonic() - submitted < timeout:
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"{c.KF_LABEL_JOB_NAME}={name}").items
        if last_end is None and len(pods) == 4 and all(ended(p) for p in pods):
            last_end = time.monotonic()
        job = custom.get_namespaced_custom_object("kubeflow.org", "v1", NAMESPACE, "pytorchjobs", name)
        verdict = (job["metadata"].get("annotations") or {}).get(c.ANN_VERDICT)
        if verdict:
            now = time.monotonic()
            incidents = custom.list_namespaced_custom_object(c.GROUP, c.VERSION, NAMESPACE, c.INCIDENT_PLURAL)["items"]
            status = next(i["status"] for i in incidents if i["spec"]["jobRef"]["name"] == name)
            collected = next((x["reason"] for x in status.get("conditions") or [] if x["type"] == "Collected"), "?")
            return {
                "case": case, "after_end": now - last_end if last_end is not None else None,
                "after_submit": now - submitted, "collected": collected,
                "analyzer_job": bool(status.get("analyzerJob")), "verdict": verdict,
            }  # fmt: skip
        time.sleep(0.2)
    return {"case": case, "after_end": None, "after_submit": None, "collected": "timeout", "analyzer_job": None,
            "verdict": ""}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--deadline", type=int, default=120, help="collection deadline (seconds)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    args = parser.parse_args()
    env = {"FRWATCH_COLLECTION_DEADLINE_SECONDS": str(args.deadline)}
    with LocalCluster(nodes=("node-a", "node-b"), namespaces=(NAMESPACE,), operator_env=env) as cluster:
        api = config.new_client_from_config(str(cluster.kubeconfig))
        print(f"{'case':<10} {'end->verdict':>13} {'submit->verdict':>16}  {'collected':<17} analyzer  verdict")
        for case in [x for x in args.cases.split(",") if x]:
            r = measure(api, case, timeout=args.deadline + 240)
            end = f"{r['after_end']:.1f} s" if r["after_end"] is not None else "-"
            sub = f"{r['after_submit']:.1f} s" if r["after_submit"] is not None else "-"
            print(f"{r['case']:<10} {end:>13} {sub:>16}  {r['collected']:<17} {r['analyzer_job']!s:<9} "
                  f"{r['verdict'][:100]}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
