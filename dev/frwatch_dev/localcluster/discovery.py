"""Legacy (non-aggregated) discovery documents: /api, /api/v1, /apis, /apis/G, /apis/G/V, /version.

kubectl asks for aggregated discovery first and falls back to these when the answer is plain
``application/json``.
"""

from __future__ import annotations

from typing import Any

from frwatch_dev.localcluster.resources import ResourceType

VERSION = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.0-frwatch-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _group_versions(types: list[ResourceType]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for rt in types:
        if rt.group and rt.version not in groups.setdefault(rt.group, []):
            groups[rt.group].append(rt.version)
    return groups


def api_versions(address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(types: list[ResourceType]) -> dict[str, Any]:
    groups = _group_versions(types)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(name, versions) for name, versions in groups.items()],
    }


def api_group(types: list[ResourceType], group: str) -> dict[str, Any] | None:
    versions = _group_versions(types).get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def api_resource_list(types: list[ResourceType], group: str, version: str) -> dict[str, Any] | None:
    chosen = [rt for rt in types if rt.group == group and rt.version == version]
    if not chosen:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [entry for rt in chosen for entry in rt.discovery_entries()],
    }
