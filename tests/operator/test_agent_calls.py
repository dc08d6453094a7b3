"""No job holds another's work (issue 25): the live loop runs each job's round on a thread of the job's own,
so a round stuck on hostile agents delays no other job's rounds and skips only its own turns; an ask to a
hanging agent ends at its total deadline; a look-alike's answer is refused and its pod never called again."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from live_round_fakes import FakeKube, deps_of

from frwatch_operator.agent.client import ask_to_dump
from frwatch_operator.handlers import agent_calls
from frwatch_operator.handlers import live as live_handler
from frwatch_operator.live.shards import AllOfLeader


def test_a_job_whose_round_hangs_delays_no_other_jobs_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    ran: dict[str, int] = {"hostile": 0, "good": 0}

    def round_of(deps: Any, live: Any, namespace: str, name: str, kind: Any, now: float) -> None:
        ran[name] += 1
        if name == "hostile":
            release.wait(30)  # its agents never answer (on main: every job's round waited behind it)

    monkeypatch.setattr(live_handler, "live_round", round_of)
    deps = deps_of(FakeKube(), FRWATCH_OPERATOR_LIVE_POLL_SECONDS="0.05")
    for name in ("good", "hostile"):  # "good" sorts first, "hostile" holds the thread next
        deps.index.upsert_job({"kind": "PyTorchJob", "metadata": {"namespace": "ns", "name": name, "uid": name}})
    live, stop = live_handler.LiveJobs(), threading.Event()
    for name in ("good", "hostile"):
        live.saw(None, {"metadata": {"namespace": "ns", "name": name}}, deleted=False)  # type: ignore[arg-type]
    loop = threading.Thread(target=live_handler._loop, args=(deps, live, stop, AllOfLeader(deps.leader)), daemon=True)
    loop.start()
    try:
        deadline = time.monotonic() + 20
        while ran["good"] < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ran["good"] >= 10, ran
        assert ran["hostile"] == 1  # its round still runs: its own later turns are skipped, not queued
    finally:
        stop.set()
        release.set()
        loop.join(5)


def test_an_ask_to_an_agent_that_never_answers_ends_at_its_total_deadline() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)  # accepts (the kernel does), never reads nor answers: a stopped agent
    try:
        started = time.monotonic()
        result = ask_to_dump("127.0.0.1", listener.getsockname()[1], "k.token", (0,), 1.0)
        took = time.monotonic() - started
    finally:
        listener.close()
    assert "did not answer whole within 1 s" in result.error and took < 2.5, (result, took)


def test_a_refused_pod_is_left_out_of_the_next_calls_and_said_once_on_the_job() -> None:
    from frwatch_operator.detect.pod_failure import PodFacts
    from frwatch_operator.kube.adapter import ObjectRef

    kube = FakeKube()
    deps = deps_of(kube)
    pods = {n: PodFacts(name=n, namespace="ns", uid=f"uid-{n}", pod_ip="127.0.0.9", control_port=1) for n in "ab"}
    job = ObjectRef("kubeflow.org/v1", "PyTorchJob", "ns", "j", "uid1")
    assert set(agent_calls.targets(deps, "ns", "j", pods.values())) == {"a", "b"}
    agent_calls.refused(deps, job, pods, "a", "answered without proof")
    agent_calls.refused(deps, job, pods, "a", "answered without proof")
    assert set(agent_calls.targets(deps, "ns", "j", pods.values())) == {"b"}
    [event] = kube.events
    assert event.reason == "AgentNotAuthenticated" and "pod a" in event.message
