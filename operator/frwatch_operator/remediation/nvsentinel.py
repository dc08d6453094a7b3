"""The hand-off to NVIDIA NVSentinel (``remediation.action: nvsentinel``): a ``MaintenanceRequest`` instead
of frwatch's own cordon. Pure.

NVSentinel (ADR-049, its ``docs/designs/049-maintenance-request.md``) takes outside requests through a
cluster-scoped ``MaintenanceRequest`` (group ``nvsentinel.dgxc.nvidia.com``, version ``v1``, short name
``mr``): its ``spec.healthEvent`` is emitted into NVSentinel's pipeline as authored, so NVSentinel's own
quarantine (cordon), drain and remediation rules decide what happens, under its circuit breaker; deleting the
request emits the healthy event that clears it. NVSentinel's admission webhook requires
``healthEvent.nodeName`` (an existing node), ``version`` (1) and ``isHealthy: false``, and rejects changes to
``spec.healthEvent`` after creation. The request's name is derived from the incident and the node, so
creating it twice finds the first (409).

frwatch hands over only a node it would have cordoned: nominated and corroborated by evidence no tenant can
write, and allowed by its own caps and breaker. The fields set here are checked against NVSentinel's
published schema in ``tests/verdictloop/test_nvsentinel_request.py``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from frwatch_operator import constants as c
from frwatch_operator.kube.names import fit_name, label_value
from frwatch_operator.verdict.report import one_line

GROUP = "nvsentinel.dgxc.nvidia.com"
VERSION = "v1"
PLURAL = "maintenancerequests"
KIND = "MaintenanceRequest"
#: The health event's ``checkName``: the clearing event NVSentinel emits on deletion names the same check.
CHECK_NAME = "FrwatchCorroboratedHang"
AGENT = "frwatch"


def request_name(incident: str, node: str) -> str:
    """One request per incident (``namespace/name``) and node."""
    digest = hashlib.sha256(f"{incident}/{node}".encode()).hexdigest()[:10]
    return fit_name(f"frwatch-{label_value(node)[:40]}-{digest}")


def maintenance_request(*, node: str, incident: str, reason: str, evidence: str) -> dict[str, Any]:
    """The MaintenanceRequest asking NVSentinel to take ``node`` out of service for ``incident``."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": request_name(incident, node),
            "labels": {c.LABEL_MANAGED_BY: c.EVENT_COMPONENT},
            "annotations": {c.ANN_CORDON_INCIDENT: incident, c.ANN_CORDON_EVIDENCE: evidence},
        },
        "spec": {
            "healthEvent": {
                "version": 1,
                "agent": AGENT,
                "componentClass": "Node",
                "checkName": CHECK_NAME,
                "nodeName": node,
                "isHealthy": False,
                "isFatal": True,
                "recommendedAction": "NONE",
                "message": one_line(f"frwatch incident {incident}: {reason}", 512),
                "metadata": {"frwatchIncident": incident, "frwatchEvidence": evidence[:512]},
            }
        },
    }
