"""WATCH: the real client's Watch, raw spellings of watch=, resuming, timeouts, bookmarks, 410 Gone."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from emulator_helpers import pod
from kubernetes import client, config, watch

from frwatch_dev.localcluster import ApiServerHandle, start_apiserver


def collect(stream: Iterator[dict[str, Any]], count: int) -> list[tuple[str, str, str]]:
    out = []
    for event in stream:
        obj = event["raw_object"]
        out.append((event["type"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
        if len(out) == count:
            break
    return out


def test_watch_sends_existing_objects_then_changes_with_namespace(
    core: client.CoreV1Api, k8s_namespace: str
) -> None:
    core.create_namespaced_pod(k8s_namespace, pod("before"))
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_pod, k8s_namespace, timeout_seconds=10)

    def writes() -> None:
        core.create_namespaced_pod(k8s_namespace, {"metadata": {"name": "after"}, "spec": {"containers": []}})
        core.patch_namespaced_pod("after", k8s_namespace, {"metadata": {"labels": {"x": "y"}}})
        core.delete_namespaced_pod("after", k8s_namespace)

    first = collect(stream, 1)
    threading.Thread(target=writes).start()
    rest = collect(stream, 3)
    w.stop()
    ns = k8s_namespace
    assert first + rest == [
        ("ADDED", ns, "before"),
        ("ADDED", ns, "after"),
        ("MODIFIED", ns, "after"),
        ("DELETED", ns, "after"),
    ]


def test_watch_from_an_old_resource_version_replays_what_followed(
    core: client.CoreV1Api, k8s_namespace: str
) -> None:
    start = core.list_namespaced_config_map(k8s_namespace).metadata.resource_version
    core.create_namespaced_config_map(k8s_namespace, {"metadata": {"name": "a"}})
    core.patch_namespaced_config_map("a", k8s_namespace, {"data": {"k": "v"}})
    core.create_namespaced_config_map(k8s_namespace, {"metadata": {"name": "b"}})
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_config_map, k8s_namespace, resource_version=start, timeout_seconds=5
    )
    events = collect(stream, 3)
    w.stop()
    assert [(t, n) for t, _, n in events] == [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b")]


def test_timeout_seconds_ends_the_stream(core: client.CoreV1Api, k8s_namespace: str) -> None:
    events = list(watch.Watch().stream(core.list_namespaced_pod, k8s_namespace, timeout_seconds=1))
    assert events == []  # the server closed the stream; the client returned


@pytest.mark.parametrize("spelling", ["true", "True", "1"])
def test_every_spelling_of_watch_is_a_watch(
    k8s_api: ApiServerHandle, core: client.CoreV1Api, k8s_namespace: str, spelling: str
) -> None:
    core.create_namespaced_pod(k8s_namespace, pod("p"))
    url = f"{k8s_api.url}/api/v1/namespaces/{k8s_namespace}/pods?watch={spelling}&timeoutSeconds=5"
    with urllib.request.urlopen(url, timeout=10) as resp:
        event = json.loads(resp.readline())
    assert (event["type"], event["object"]["metadata"]["name"], event["object"]["kind"]) == (
        "ADDED",
        "p",
        "Pod",
    )


def test_an_object_leaving_the_selector_is_deleted_for_the_watcher(
    core: client.CoreV1Api, k8s_namespace: str
) -> None:
    core.create_namespaced_pod(k8s_namespace, pod("p", labels={"frwatch.io/capture": "enabled"}))
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_pod,
        k8s_namespace,
        label_selector="frwatch.io/capture=enabled",
        timeout_seconds=10,
    )
    assert collect(stream, 1) == [("ADDED", k8s_namespace, "p")]
    core.patch_namespaced_pod(
        "p", k8s_namespace, {"metadata": {"labels": {"frwatch.io/capture": "disabled"}}}
    )
    core.patch_namespaced_pod("p", k8s_namespace, {"metadata": {"labels": {"frwatch.io/capture": "enabled"}}})
    assert collect(stream, 2) == [("DELETED", k8s_namespace, "p"), ("ADDED", k8s_namespace, "p")]
    w.stop()


@pytest.fixture
def small_server() -> Iterator[tuple[ApiServerHandle, client.ApiClient]]:
    handle = start_apiserver(bookmark_interval=0.2, history_limit=10)
    configuration = client.Configuration()
    configuration.host = handle.url
    try:
        yield handle, client.ApiClient(configuration)
    finally:
        handle.stop()


def test_bookmarks_carry_the_current_resource_version(
    small_server: tuple[ApiServerHandle, client.ApiClient],
) -> None:
    _, api = small_server
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_pod("default").metadata.resource_version
    w = watch.Watch()
    for event in w.stream(
        core.list_namespaced_pod,
        "default",
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=5,
    ):
        assert event["type"] == "BOOKMARK"
        assert event["raw_object"]["metadata"]["resourceVersion"] == rv
        break
    w.stop()


def test_a_too_old_resource_version_is_410_gone(
    small_server: tuple[ApiServerHandle, client.ApiClient],
) -> None:
    handle, api = small_server
    core = client.CoreV1Api(api)
    old = core.list_namespaced_config_map("default").metadata.resource_version
    for i in range(20):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    url = f"{handle.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={old}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        event = json.loads(resp.readline())
    assert event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")


def test_kubeconfig_from_the_fixture_is_what_the_client_loads(k8s_api: ApiServerHandle) -> None:
    configuration = client.Configuration()
    config.load_kube_config(client_configuration=configuration)  # $KUBECONFIG, set by tests/conftest.py
    assert configuration.host == k8s_api.url
