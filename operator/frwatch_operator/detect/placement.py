"""Which nodes a tenant chose for its pods (pinned them to). Pure.

A tenant writes its pods' specs and its job's templates: ``spec.nodeName``, a ``kubernetes.io/hostname``
nodeSelector, required node affinity on the hostname label or on ``metadata.name``. A pod placed that way
says nothing against its node: the tenant may have put it on a node another tenant uses, and made its ranks'
dumps accuse that node. Such a node is never probed, counted in fleet memory or cordoned for the job
(DESIGN.md, "Trust boundaries").

The API cannot tell a ``nodeName`` the tenant wrote from one the scheduler bound, so ``nodeName`` is read
from the training job's templates (what the tenant declared), selectors and affinity from the pods and the
templates both. The walk over a job's spec is bounded (depth, objects) and finds the fields wherever a kind
keeps its templates (PyTorchJob, JobSet, TrainJob overrides).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HOSTNAME_LABEL = "kubernetes.io/hostname"
#: How deep and how many objects the walk over a job's spec goes.
MAX_DEPTH = 24
MAX_OBJECTS = 20_000


def _values(term: Mapping[str, Any], keys: tuple[str, ...], field: str) -> set[str]:
    out: set[str] = set()
    for expr in term.get(field) or []:
        if isinstance(expr, Mapping) and expr.get("key") in keys and expr.get("operator") == "In":
            out.update(str(v) for v in expr.get("values") or [] if isinstance(v, str))
    return out


def pod_spec_pins(spec: Mapping[str, Any]) -> set[str]:
    """Nodes a pod spec (or a pod template's spec) chooses by selector or required affinity (not nodeName)."""
    pins: set[str] = set()
    selector = spec.get("nodeSelector")
    if isinstance(selector, Mapping) and isinstance(selector.get(HOSTNAME_LABEL), str):
        pins.add(selector[HOSTNAME_LABEL])
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(node_affinity, Mapping) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    for term in terms if isinstance(terms, list) else []:
        if isinstance(term, Mapping):
            pins |= _values(term, (HOSTNAME_LABEL,), "matchExpressions")
            pins |= _values(term, ("metadata.name",), "matchFields")
    return pins


def pinned_by_pod(pod: Mapping[str, Any]) -> bool:
    """Whether a pod's own spec chose its node (a selector or required affinity naming it)."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    pins = pod_spec_pins(spec) if isinstance(spec, Mapping) else set()
    return bool(pins) and (not node or node in pins)


def job_pins(job: Mapping[str, Any] | None) -> set[str]:
    """Every node a training job's spec names for its pods: ``nodeName`` anywhere in its templates, and
    hostname selectors and required affinity."""
    pins: set[str] = set()
    if not isinstance(job, Mapping):
        return pins
    stack: list[tuple[Any, int]] = [(job.get("spec"), 0)]
    seen = 0
    while stack and seen < MAX_OBJECTS:
        obj, depth = stack.pop()
        seen += 1
        if depth > MAX_DEPTH:
            continue
        if isinstance(obj, Mapping):
            if isinstance(obj.get("nodeName"), str) and obj["nodeName"]:
                pins.add(obj["nodeName"])
            if "nodeSelector" in obj or "affinity" in obj:
                pins |= pod_spec_pins(obj)
            stack.extend((v, depth + 1) for v in obj.values() if isinstance(v, (Mapping, list)))
        elif isinstance(obj, list):
            stack.extend((v, depth + 1) for v in obj if isinstance(v, (Mapping, list)))
    return pins
