"""Server-side ``Table`` output (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``): what
``kubectl get`` prints. Built-in kinds get the columns of their real printers (the parts frwatch's
users look at: a pod's status, a node's SchedulingDisabled); a CRD gets its additionalPrinterColumns.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable
from typing import Any

from frwatch_dev.localcluster.resources import PrinterColumn, ResourceType

Obj = dict[str, Any]
Cell = Callable[[Obj], Any]


def human_duration(seconds: float) -> str:
    """kubectl's age format: 45s, 3m12s, 47m, 5h3m, 20h, 3d4h, 25d, 2y30d."""
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y{days % 365}d"


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<invalid>"
    return human_duration((datetime.datetime.now(tz=datetime.UTC) - then).total_seconds())


def _g(obj: Any, *path: str | int) -> Any:
    for part in path:
        if isinstance(part, int):
            obj = obj[part] if isinstance(obj, list) and len(obj) > part else None
        else:
            obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


# -- a small JSONPath: .a.b, escaped dots (.a.frwatch\.io/x), ['key'], [N], [*], [?(@.k=="v")] --------

_STEP = re.compile(
    r"""\.((?:\\.|[^.\[\\])+)|\[\s*'([^']*)'\s*\]|\[\s*"([^"]*)"\s*\]|\[(-?\d+|\*)\]"""
    r"""|\[\?\(@\.([\w.]+)\s*==\s*['"]([^'"]*)['"]\)\]|\[(-?\d*):(-?\d*)\]"""
)


def jsonpath(obj: Any, path: str) -> list[Any]:
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    nodes = [obj]
    pos = 0
    while pos < len(path):
        match = _STEP.match(path, pos)
        if match is None:
            return []
        pos = match.end()
        name = match.group(1)
        key = name.replace("\\.", ".") if name is not None else (match.group(2) or match.group(3))
        nxt: list[Any] = []
        for node in nodes:
            if key is not None:
                if isinstance(node, dict) and key in node:
                    nxt.append(node[key])
            elif match.group(4) is not None:
                if isinstance(node, list):
                    index = match.group(4)
                    nxt.extend(
                        node if index == "*" else node[int(index) :][:1] if int(index) >= -len(node) else []
                    )
            elif match.group(7) is not None or match.group(8) is not None:
                if isinstance(node, list):
                    lo, hi = match.group(7), match.group(8)
                    nxt.extend(node[int(lo) if lo else None : int(hi) if hi else None])
            elif isinstance(node, list):
                field, want = match.group(5), match.group(6)
                nxt.extend(item for item in node if str(_g(item, *field.split("."))) == want)
        nodes = nxt
    return nodes


def _column_cell(col: PrinterColumn) -> Cell:
    def cell(obj: Obj) -> Any:
        values = jsonpath(obj, col.json_path)
        if not values:
            return None
        value = (
            values[0]
            if len(values) == 1
            else ",".join(v if isinstance(v, str) else json.dumps(v) for v in values)
        )
        if col.type == "date" and isinstance(value, str):
            return _age(value)
        if col.type in ("integer", "number", "boolean") or isinstance(value, str):
            return value
        return json.dumps(value)

    return cell


# -- built-in printers --------------------------------------------------------------------------


def _pod_status(pod: Obj) -> str:
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for cs in status.get("initContainerStatuses") or []:
        state = cs.get("state") or {}
        if _g(state, "terminated", "exitCode") not in (None, 0):
            return f"Init:{_g(state, 'terminated', 'reason') or 'Error'}"
        if _g(state, "waiting", "reason") and _g(state, "waiting", "reason") != "PodInitializing":
            return f"Init:{_g(state, 'waiting', 'reason')}"
    for cs in reversed(status.get("containerStatuses") or []):
        state = cs.get("state") or {}
        if _g(state, "waiting", "reason"):
            reason = state["waiting"]["reason"]
        elif _g(state, "terminated", "reason"):
            reason = state["terminated"]["reason"]
        elif "terminated" in state:
            code = _g(state, "terminated", "exitCode")
            reason = f"ExitCode:{code}" if code is not None else "Error"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod_ready(pod: Obj) -> str:
    statuses = _g(pod, "status", "containerStatuses") or []
    total = len(_g(pod, "spec", "containers") or [])
    return f"{sum(1 for cs in statuses if cs.get('ready'))}/{total}"


def _node_status(node: Obj) -> str:
    ready = next((c for c in _g(node, "status", "conditions") or [] if c.get("type") == "Ready"), None)
    text = (
        "Unknown"
        if ready is None
        else {"True": "Ready", "False": "NotReady"}.get(ready.get("status"), "Unknown")
    )
    if _g(node, "spec", "unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(node: Obj) -> str:
    labels = _g(node, "metadata", "labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    return ",".join(r for r in roles if r) or "<none>"


def _job_status(job: Obj) -> str:
    for cond in _g(job, "status", "conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed", "Suspended"):
            return str(cond["type"])
    return "Running"


def _event_object(ev: Obj) -> str:
    inv = ev.get("involvedObject") or ev.get("regarding") or {}
    return f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}"


def _age_cell(obj: Obj) -> str:
    return _age(_g(obj, "metadata", "creationTimestamp"))


_S, _I, _D = "string", "integer", "date"
Column = tuple[str, str, int, Cell]  # name, type, priority, cell

_PRINTERS: dict[tuple[str, str], list[Column]] = {
    ("", "pods"): [
        ("Ready", _S, 0, _pod_ready),
        ("Status", _S, 0, _pod_status),
        (
            "Restarts",
            _I,
            0,
            lambda p: sum(cs.get("restartCount", 0) for cs in _g(p, "status", "containerStatuses") or []),
        ),
        ("Age", _S, 0, _age_cell),
        ("IP", _S, 1, lambda p: _g(p, "status", "podIP") or "<none>"),
        ("Node", _S, 1, lambda p: _g(p, "spec", "nodeName") or "<none>"),
    ],
    ("", "nodes"): [
        ("Status", _S, 0, _node_status),
        ("Roles", _S, 0, _node_roles),
        ("Age", _S, 0, _age_cell),
        ("Version", _S, 0, lambda n: _g(n, "status", "nodeInfo", "kubeletVersion") or ""),
    ],
    ("", "namespaces"): [
        ("Status", _S, 0, lambda n: _g(n, "status", "phase") or ""),
        ("Age", _S, 0, _age_cell),
    ],
    ("", "events"): [
        (
            "Last Seen",
            _S,
            0,
            lambda e: _age(
                e.get("lastTimestamp") or e.get("eventTime") or _g(e, "metadata", "creationTimestamp")
            ),
        ),
        ("Type", _S, 0, lambda e: e.get("type", "")),
        ("Reason", _S, 0, lambda e: e.get("reason", "")),
        ("Object", _S, 0, _event_object),
        ("Message", _S, 0, lambda e: str(e.get("message") or e.get("note") or "").strip()),
    ],
    ("batch", "jobs"): [
        ("Status", _S, 0, _job_status),
        (
            "Completions",
            _S,
            0,
            lambda j: f"{_g(j, 'status', 'succeeded') or 0}/{_g(j, 'spec', 'completions') or 1}",
        ),
        ("Age", _S, 0, _age_cell),
    ],
    ("", "configmaps"): [
        ("Data", _I, 0, lambda c: len(c.get("data") or {}) + len(c.get("binaryData") or {})),
        ("Age", _S, 0, _age_cell),
    ],
    ("", "secrets"): [
        ("Type", _S, 0, lambda s: s.get("type", "Opaque")),
        ("Data", _I, 0, lambda s: len(s.get("data") or {}) + len(s.get("stringData") or {})),
        ("Age", _S, 0, _age_cell),
    ],
    ("", "services"): [
        ("Type", _S, 0, lambda s: _g(s, "spec", "type") or "ClusterIP"),
        ("Cluster-IP", _S, 0, lambda s: _g(s, "spec", "clusterIP") or "<none>"),
        (
            "Port(s)",
            _S,
            0,
            lambda s: (
                ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in _g(s, "spec", "ports") or [])
                or "<none>"
            ),
        ),
        ("Age", _S, 0, _age_cell),
    ],
    ("apiextensions.k8s.io", "customresourcedefinitions"): [
        ("Created At", _D, 0, lambda c: _g(c, "metadata", "creationTimestamp")),
    ],
}
_PRINTERS[("events.k8s.io", "events")] = _PRINTERS[("", "events")]


def _columns(rt: ResourceType) -> list[Column]:
    if rt.printer_columns is not None:
        return [(c.name, c.type, c.priority, _column_cell(c)) for c in rt.printer_columns]
    return _PRINTERS.get((rt.group, rt.plural), [("Age", _S, 0, _age_cell)])


def table(
    rt: ResourceType,
    objects: list[Obj],
    resource_version: int,
    include_object: str = "Metadata",
    with_headers: bool = True,
) -> Obj:
    """A meta.k8s.io/v1 Table of ``objects``; rows carry the object or its metadata as asked."""
    columns = _columns(rt)
    name_first = not (rt.group in ("", "events.k8s.io") and rt.plural == "events")
    defs = (
        [
            {
                "name": "Name",
                "type": "string",
                "format": "name",
                "description": "Name of the object",
                "priority": 0,
            }
        ]
        if name_first
        else []
    )
    defs += [
        {"name": name, "type": typ, "format": "", "description": name, "priority": prio}
        for name, typ, prio, _ in columns
    ]
    rows = []
    for obj in objects:
        cells = ([obj["metadata"]["name"]] if name_first else []) + [cell(obj) for _, _, _, cell in columns]
        row: Obj = {"cells": cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(row)
    result: Obj = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": str(resource_version)},
        "rows": rows,
    }
    result["columnDefinitions"] = defs if with_headers else []
    return result
