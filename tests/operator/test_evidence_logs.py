"""Container logs into the attempt's prefix: which logs are read when, a log of many MB or of 1 MB lines cut
to its tail through the real pods/log (``tailLines``/``limitBytes`` over HTTP, the emulator serving the
kubelet's files), binary and ANSI bytes kept as the API gave them, a deleted pod recorded as unavailable,
pods/log forbidden said once in a Warning naming the grant."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from frwatch_analyzers.store.layout import AttemptKey, parse_key
from frwatch_analyzers.store.manifest import ContainerLog
from frwatch_dev.localcluster import podlogs
from frwatch_operator.collect import evidence as evidence_collection
from frwatch_operator.collect.container_logs import FORBIDDEN, POD_DELETED, narrow, notes, summary, targets
from frwatch_operator.config import EvidenceSettings
from frwatch_operator.detect.pod_failure import ContainerRun, PodFacts, pod_facts
from frwatch_operator.errors import ApiRefusedError
from frwatch_operator.kube.adapter import LOG_GRANT, Kube, ObjectRef
from frwatch_operator.kube.api_errors import api_error
from frwatch_operator.store.s3 import S3Store

SETTINGS = EvidenceSettings(log_tail_lines=2000, log_max_bytes=64 * 1024)


# --- which logs, when (pure) ---------------------------------------------------------------------------------
def _facts(*runs: ContainerRun, deleted: bool = False) -> PodFacts:
    return PodFacts(name="job-worker-0", namespace="ns", uid="u1", runs=runs, deleted=deleted)


def test_an_ended_container_is_read_once_and_a_running_one_only_when_collection_ends() -> None:
    ended = ContainerRun("pytorch", state="terminated", message="Traceback ...\nValueError: bad batch")
    got = {(t.variant, t.final) for t in targets(_facts(ended), ending=False)}
    assert got == {("tail", True), ("termination", True)}
    running = ContainerRun("pytorch", state="running")
    assert targets(_facts(running), ending=False) == []
    assert [(t.variant, t.final) for t in targets(_facts(running), ending=True)] == [("tail", False)]


def test_a_restarted_container_gives_its_previous_instance_and_that_ones_message() -> None:
    restarted = ContainerRun("pytorch", restart_count=2, state="running", last_message="killed")
    got = [(t.variant, t.instance, t.message) for t in targets(_facts(restarted), ending=False)]
    assert got == [("previous", 1, ""), ("termination", 1, "killed")]


def test_a_deleted_pod_gives_only_the_message_its_status_showed_and_unusable_names_nothing() -> None:
    assert targets(_facts(ContainerRun("pytorch", state="terminated"), deleted=True), ending=True) == []
    said = _facts(ContainerRun("pytorch", state="terminated", message="OOM in step 7"), deleted=True)
    assert [(t.variant, t.message) for t in targets(said, ending=True)] == [("termination", "OOM in step 7")]
    assert targets(_facts(ContainerRun("a.b", state="terminated"), ContainerRun("../x", state="terminated")), ending=True) == []


def test_pod_facts_keep_each_training_containers_run_and_message() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
           "spec": {"containers": [{"name": "pytorch"}], "initContainers": [{"name": "frwatch-agent"}]},
           "status": {"containerStatuses": [{"name": "pytorch", "restartCount": 1,
                                             "state": {"terminated": {"exitCode": 137, "message": "x" * 9000}},
                                             "lastState": {"terminated": {"exitCode": 1, "message": "first"}}}]}}  # fmt: skip
    (run,) = pod_facts(pod).runs
    assert (run.name, run.restart_count, run.state, run.last_message) == ("pytorch", 1, "terminated", "first")
    assert len(run.message) == 4096


# --- the tail within the cap (pure, against a log held here) ---------------------------------------------------
def _server(log: bytes) -> Any:
    """What pods/log answers: the first ``limit`` bytes of the last ``lines`` lines (the emulator's rule,
    which is the API server's)."""
    calls: list[tuple[int, int]] = []

    def fetch(lines: int, limit: int) -> bytes:
        calls.append((lines, limit))
        return podlogs.read_bytes(log, {"tailLines": str(lines), "limitBytes": str(limit)})

    fetch.calls = calls  # type: ignore[attr-defined]
    return fetch


def test_a_log_of_many_mb_keeps_its_last_bytes() -> None:
    log = b"".join(b"step %07d loss 0.1234 lr 3e-4 .........................................\n" % i for i in range(120_000))
    assert len(log) > 8_000_000
    fetch = _server(log)
    tail = narrow(fetch, 2000, 64 * 1024)
    assert tail.cut and len(tail.data) == 64 * 1024 and log.endswith(tail.data)
    assert tail.reads == 1  # 2000 lines of 70 bytes fit in one window


def test_lines_of_a_megabyte_are_stored_capped_and_the_window_narrows_to_fit() -> None:
    big = b"A" * (1 << 20)
    log = b"start\n" + big + b"\n" + big + b"\nlast line: RuntimeError: boom\n"
    fetch = _server(log)
    tail = narrow(fetch, 2000, 64 * 1024)
    assert tail.cut and len(tail.data) <= 64 * 1024
    assert tail.data.endswith(b"last line: RuntimeError: boom\n")
    assert all(limit == 4 * 64 * 1024 for _, limit in fetch.calls)  # never more than 4x the cap asked for
    assert tail.reads <= 12


def test_one_line_longer_than_the_window_keeps_what_the_api_gives() -> None:
    log = b"B" * (2 << 20)  # no newline at all
    tail = narrow(_server(log), 2000, 64 * 1024)
    assert tail.cut and len(tail.data) == 64 * 1024


def test_binary_and_ansi_bytes_are_kept_as_given() -> None:
    log = bytes(range(256)) * 4 + b"\x1b[31mERROR\x1b[0m \xff\xfe not utf-8\n"
    tail = narrow(_server(log), 2000, 64 * 1024)
    assert tail.data == log and not tail.cut


def test_notes_say_which_logs_are_missing_and_why() -> None:
    alive = PodFacts(name="a", namespace="ns", runs=(ContainerRun("pytorch", state="terminated"),))
    gone = PodFacts(name="b", namespace="ns", deleted=True, runs=(ContainerRun("pytorch", state="terminated"),))
    stored = {("a", "pytorch", "tail"): ContainerLog(container="pytorch", key="k", bytes=3)}
    by_pod = notes([alive, gone], stored, {})
    assert by_pod["a"] == [stored[("a", "pytorch", "tail")]]
    assert by_pod["b"] == [ContainerLog(container="pytorch", unavailable=POD_DELETED)]
    ok, reason, message = summary(by_pod)
    assert (ok, reason) == (False, "LogsUnavailable") and "b/pytorch: unavailable: the pod was deleted" in message
    assert notes([gone], {}, {}, forbidden=True)["b"][0].unavailable == FORBIDDEN
    message_only = {("b", "pytorch", "termination"): ContainerLog(container="pytorch", variant="termination", key="t")}
    assert [x.unavailable for x in notes([gone], message_only, {})["b"]] == ["", POD_DELETED]


# --- through the API and the store --------------------------------------------------------------------------
@pytest.fixture
def kubelet_logs(k8s_api: Any, tmp_path: Path) -> Iterator[Path]:
    """The emulator serves pods/log from this folder (the stand-in kubelet's layout) for the test."""
    folder = tmp_path / "pod-logs"
    folder.mkdir()
    before = k8s_api.server.pod_logs_dir
    k8s_api.server.pod_logs_dir = folder
    yield folder
    k8s_api.server.pod_logs_dir = before


def _pod(core: client.CoreV1Api, ns: str, name: str, logs: Path, instances: list[bytes], message: str) -> dict[str, Any]:
    body = {"metadata": {"name": name, "namespace": ns},
            "spec": {"nodeName": "node-a", "containers": [{"name": "pytorch", "image": "t"}],
                     "initContainers": [{"name": "frwatch-agent", "image": "a", "restartPolicy": "Always"}]}}  # fmt: skip
    pod = core.api_client.sanitize_for_serialization(core.create_namespaced_pod(ns, body))
    folder = podlogs.container_dir(logs, ns, name, pod["metadata"]["uid"], "pytorch")
    folder.mkdir(parents=True)
    for i, data in enumerate(instances):  # none: the kubelet wrote nothing yet
        (folder / f"{i}.log").write_bytes(data)
    last = max(0, len(instances) - 1)
    status = {"phase": "Failed", "containerStatuses": [{
        "name": "pytorch", "restartCount": last, "ready": False, "image": "t", "imageID": "",
        "state": {"terminated": {"exitCode": 137, "reason": "Error", "message": message}},
        **({"lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}} if last else {})}]}  # fmt: skip
    core.patch_namespaced_pod_status(name, ns, {"status": status})
    return core.api_client.sanitize_for_serialization(core.read_namespaced_pod(name, ns))  # type: ignore[no-any-return]


def _where(ns: str, job: str) -> evidence_collection.Where:
    key = AttemptKey("frwatch", ns, job, "uid-1", "0")
    return evidence_collection.Where(key, "frwatch", ObjectRef("kubeflow.org/v1", "PyTorchJob", ns, job, "uid-1"), f"{job}-0")


def test_logs_of_a_restarted_container_reach_the_store_through_pods_log(
    op_api: client.ApiClient, k8s_namespace: str, kubelet_logs: Path, store: S3Store
) -> None:
    core, ns = client.CoreV1Api(op_api), k8s_namespace
    first = b"".join(b"first run line %d\n" % i for i in range(10)) + b"Traceback (most recent call last):\nValueError: bad\n"
    second = b"\x1b[32mstarting\x1b[0m\n" + os.urandom(2048) + b"\n" + b"C" * (1 << 20) + b"\nKilled\n"
    pod = _pod(core, ns, "logs-worker-0", kubelet_logs, [first, second], "killed by SIGKILL")
    where = _where(ns, "logs")
    stored = evidence_collection.read_logs(Kube(op_api), store, SETTINGS, where, [pod_facts(pod)], ending=False)
    assert stored == 3
    prefix = where.key.root + "/logs/logs-worker-0/"
    assert store.get(prefix + "pytorch.previous.txt") == first  # small: whole, as given
    tail = store.get(prefix + "pytorch.txt")
    assert tail == b"Killed\n"  # the lines after a line longer than the window: the tail that fits
    assert store.get(prefix + "pytorch.termination.txt") == b"killed by SIGKILL"
    kinds = {parse_key(where.key.root, k).variant for k in store.list(prefix)}  # type: ignore[union-attr]
    assert kinds == {"tail", "previous", "termination"}
    # read once: a second pass asks the API for nothing
    assert evidence_collection.read_logs(Kube(op_api), store, SETTINGS, where, [pod_facts(pod)], ending=False) == 0
    by_pod = evidence_collection.final_logs(Kube(op_api), store, SETTINGS, where, [pod_facts(pod)], [])
    assert {(x.variant, x.cut) for x in by_pod["logs-worker-0"]} == {("tail", True), ("previous", False), ("termination", False)}
    assert {x.bytes for x in by_pod["logs-worker-0"] if x.variant == "tail"} == {len(b"Killed\n")}
    evidence_collection.forget(where.key)


def test_a_pod_deleted_before_its_log_was_read_is_recorded_unavailable(
    op_api: client.ApiClient, k8s_namespace: str, kubelet_logs: Path, store: S3Store
) -> None:
    core, ns = client.CoreV1Api(op_api), k8s_namespace
    pod = _pod(core, ns, "gone-worker-0", kubelet_logs, [b"hello\n"], "")
    core.delete_namespaced_pod("gone-worker-0", ns, grace_period_seconds=0)
    where = _where(ns, "gone")
    facts = pod_facts(pod)  # what the watch showed before the delete
    assert evidence_collection.read_logs(Kube(op_api), store, SETTINGS, where, [facts], ending=False) == 0
    deleted = pod_facts(pod, deleted=True)
    by_pod = evidence_collection.final_logs(Kube(op_api), store, SETTINGS, where, [deleted], [])
    assert by_pod == {"gone-worker-0": [ContainerLog(container="pytorch", unavailable=POD_DELETED)]}
    assert store.list(where.key.root + "/") == []
    evidence_collection.forget(where.key)


class _Forbidden(Kube):
    """pods/log refused as an API server without the grant answers it (403), through the one translation."""

    reads = 0

    def read_pod_log(self, namespace: str, pod: str, container: str, **_: Any) -> bytes:
        self.reads += 1
        raise api_error(f"get pods/log {namespace}/{pod} container {container}", 403, "pods \"x\" is forbidden", LOG_GRANT)


def test_pods_log_forbidden_is_one_warning_naming_the_grant(
    op_api: client.ApiClient, k8s_namespace: str, kubelet_logs: Path, store: S3Store
) -> None:
    core, ns = client.CoreV1Api(op_api), k8s_namespace
    pods = [pod_facts(_pod(core, ns, f"nolog-worker-{i}", kubelet_logs, [b"x\n"], "")) for i in range(3)]
    where = _where(ns, "nolog")
    kube = _Forbidden(op_api)
    evidence_collection.read_logs(kube, store, SETTINGS, where, pods, ending=False)
    first = kube.reads  # the reads already under way when the first refusal came (log_readers at once)
    assert 1 <= first <= 3
    evidence_collection.read_logs(kube, store, SETTINGS, where, pods, ending=True)
    assert kube.reads == first  # no more reads once refused
    by_pod = evidence_collection.final_logs(kube, store, SETTINGS, where, pods, [])
    assert all(x.unavailable == FORBIDDEN for xs in by_pod.values() for x in xs) and len(by_pod) == 3
    events = [e for e in core.list_namespaced_event(ns).items if e.reason == "EvidenceForbidden"]
    assert len(events) == 1 and events[0].type == "Warning"
    assert "pods/log" in events[0].message and "verbs [get]" in events[0].message
    with pytest.raises(ApiRefusedError):
        kube.read_pod_log(ns, "x", "pytorch")
    evidence_collection.forget(where.key)


def test_a_log_not_there_yet_is_read_again_on_the_next_pass_while_the_pod_exists(
    op_api: client.ApiClient, k8s_namespace: str, kubelet_logs: Path, store: S3Store
) -> None:
    core, ns = client.CoreV1Api(op_api), k8s_namespace
    pod = _pod(core, ns, "late-worker-0", kubelet_logs, [], "")  # the kubelet has no output of it yet: a 400
    where = _where(ns, "late")
    facts = pod_facts(pod)
    assert evidence_collection.read_logs(Kube(op_api), store, SETTINGS, where, [facts], ending=False) == 0
    waiting = evidence_collection.final_logs(Kube(op_api), store, SETTINGS, where, [facts], [])
    assert "is waiting to start" in waiting["late-worker-0"][0].unavailable  # the API's own words, kept
    folder = podlogs.container_dir(kubelet_logs, ns, "late-worker-0", pod["metadata"]["uid"], "pytorch")
    (folder / "0.log").write_bytes(b"now it wrote\n")
    assert evidence_collection.read_logs(Kube(op_api), store, SETTINGS, where, [facts], ending=False) == 1
    assert store.get(where.key.log("late-worker-0", "pytorch")) == b"now it wrote\n"
    evidence_collection.forget(where.key)
