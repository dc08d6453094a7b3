"""`frwatch demo`: the README's first command.

Default: the whole chain on a local cluster (``cluster_demo``): an opted-in 4-rank job with a
rank-dependent bug, captured, analysed, the verdict on the job (``--scenario skip|cpu_stuck|hardware``;
``--kind trainjob|jobset|pytorchjob``, default trainjob: Kubeflow Trainer v2, what new installs run).
``--local``: no cluster, the analyzer's half only: real rank processes, their dumps, the analysis.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from frwatch_dev.workloads.scenarios import Scenario

from . import cluster_demo, local
from .job_kinds import DEFAULT_KIND, KINDS


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="frwatch demo", description=__doc__.split("\n")[0])
    p.add_argument(
        "--scenario",
        default="skip",
        help=f"the fault; cluster: {', '.join(sorted(cluster_demo.SCENARIOS))}; "
        f"--local: {', '.join(s.value for s in Scenario)} (default: %(default)s)",
    )
    p.add_argument(
        "--kind", default=None, choices=sorted(KINDS),
        help=f"cluster: the job's kind (default: {DEFAULT_KIND}, Kubeflow Trainer v2)",
    )  # fmt: skip
    p.add_argument(
        "--cordon", action="store_true", help="hardware scenario: really cordon (default: dry-run)"
    )
    p.add_argument(
        "--local", action="store_true", help="no cluster: rank processes, dumps and the analysis only"
    )
    p.add_argument("--world-size", type=int, default=4, help="--local: rank processes (default: %(default)s)")
    p.add_argument("--keep", type=Path, help="--local: keep the dumps in this folder")
    p.add_argument("--keep-logs", action="store_true", help="cluster: keep the logs (default: only when it fails)")
    p.add_argument("--keep-cluster", action="store_true",
                   help="cluster: leave it up after the verdict (Ctrl-C stops it), to run kubectl and read the report")  # fmt: skip
    args = p.parse_args(argv)
    if args.local:
        if args.kind is not None:
            p.error("--kind needs a cluster: --local runs the ranks as local processes, with no job object "
                    "(drop --local to run the job as a TrainJob, JobSet or PyTorchJob)")  # fmt: skip
        if args.scenario not in {s.value for s in Scenario}:
            p.error(f"--local --scenario must be one of {', '.join(s.value for s in Scenario)}")
        return local.run(args)
    if args.scenario not in cluster_demo.SCENARIOS:
        p.error(f"--scenario must be one of {', '.join(sorted(cluster_demo.SCENARIOS))} (or use --local)")
    args.kind = args.kind or DEFAULT_KIND
    return cluster_demo.run(args)
