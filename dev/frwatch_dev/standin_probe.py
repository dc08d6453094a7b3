"""The local cluster's stand-in for a node health check (``dcgmi diag -r 1`` on a real GPU node).

    python -m frwatch_dev.standin_probe

Healthy (exit 0) unless the node it runs on has a stand-in hardware fault (``LocalCluster.break_node``: the
kubelet passes it in ``FRWATCH_DEV_NODE_FAULT``); then it says the fault and exits 1, as a failing diagnostic
does. It reads nothing a tenant writes. Set it as the operator's probe:
``FRWATCH_REMEDIATION_PROBE_IMAGE=ghcr.io/frwatch/frwatch:0.1.0`` and
``FRWATCH_REMEDIATION_PROBE_COMMAND=["python", "-m", "frwatch_dev.standin_probe"]``.
"""

from __future__ import annotations

import os
import sys

from frwatch_dev.localcluster.kubelet import FAULT_ENV

#: The operator settings that make the stand-in the probe (the local e2e tests use them).
PROBE_ENV = {
    "FRWATCH_REMEDIATION_PROBE_IMAGE": "ghcr.io/frwatch/frwatch:0.1.0",
    "FRWATCH_REMEDIATION_PROBE_COMMAND": '["python", "-m", "frwatch_dev.standin_probe"]',
}


def main() -> int:
    node = os.environ.get("NODE_NAME", "?")
    fault = os.environ.get(FAULT_ENV, "")
    if fault:
        print(f"node {node}: diagnostic FAILED: {fault}", flush=True)
        return 1
    print(f"node {node}: diagnostic passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
