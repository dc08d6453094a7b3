"""Live watch, the operator's side (issue 15, policy ``report``), with the real operator against the API
emulator: fake agents (HTTP servers this test runs, one a pod on its own loopback address, all on the
control port the webhook gives the pods) answer ``GET /live`` with summaries made by the real
``live_summary`` code from a gloo-style live Flight Recorder answer. A desync opens the attempt's Incident in
phase Early with the finding and one HangSuspected Event on the job; the attempt's later pod failure joins
that Incident (Early -> Detected and on); a healthy job, pulled several times (the operator's "live round"
log line is the signal), gets neither."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness import Cluster, eventually
from live_answers import fr_answer

from frwatch_analyzers.live.summary import LivePod, summarize_live
from frwatch_dev.ports import free_port
from frwatch_operator import constants as c
from frwatch_operator.agent.auth import PROOF_HEADER, CallChecker, answer_proof
from frwatch_operator.notices import Reason

LIVE = {c.ANN_CAPTURE: c.CAPTURE_ENABLED, c.ANN_LIVE: c.LIVE_ENABLED}


class FakeAgent:
    """A pod's agent's control endpoint: ``GET /live`` signed with the token the webhook gave the pod, its
    answer proven with it (``agentauth``)."""

    def __init__(self, host: str, port: int, pod: str, rank: int, token: str, answer: bytes) -> None:
        self.pod, self.rank, self.token, self.answer = pod, rank, token, answer
        self.pulls = 0
        agent = self
        checker = CallChecker(token)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                nonce = checker.check(self.headers.get("Authorization", ""), "GET", self.path, b"")
                if nonce is None:
                    self.send_error(401)
                    return
                if self.path != "/live":
                    self.send_error(404)
                    return
                live = LivePod(pod=agent.pod, ranks=[summarize_live(agent.answer, agent.rank, now_ns())])
                body = live.model_dump_json(by_alias=True).encode()
                agent.pulls += 1
                self.send_response(200)
                self.send_header(PROOF_HEADER, answer_proof(agent.token, nonce, 200))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def now_ns() -> int:
    return int(datetime.now(UTC).timestamp() * 1e9)


def agent_token(pod: dict[str, Any]) -> str:
    for ctr in (pod["spec"].get("initContainers") or []) + pod["spec"]["containers"]:
        for env in ctr.get("env") or []:
            if env["name"] == "FRWATCH_AGENT_TOKEN":
                return str(env["value"])
    raise AssertionError("the webhook gave the pod no agent token")


def running_at(cluster: Cluster, name: str, ip: str) -> None:
    """The kubelet's part: the pod runs, its IP ``ip`` (each pod its own loopback address)."""
    cluster.running(name)
    status = cluster.pod(name)["status"]
    cluster.set_status(name, {**status, "podIP": ip, "podIPs": [{"ip": ip}]})


@contextmanager
def live_job(
    cluster: Cluster, op: Any, name: str, port: int, base: int, odd_rank: int | None
) -> Iterator[list[FakeAgent]]:
    """A 4-rank live job whose pods run, each with its fake agent (rank ``odd_rank`` broadcasts at seq 30
    where the others all_reduce: a desync; None: healthy)."""
    job = cluster.create_job(name, world=4, annotations=LIVE)
    pods = cluster.create_pods(op, job, 4)
    agents = []
    try:
        for rank, pod in enumerate(pods):
            ip = f"127.0.{base}.{rank + 1}"
            answer = fr_answer(30, {30: "gloo:broadcast"} if rank == odd_rank else None)
            agents.append(FakeAgent(ip, port, pod, rank, agent_token(cluster.pod(pod)), answer))
            running_at(cluster, pod, ip)
        yield agents
    finally:
        for a in agents:
            a.close()


def events(cluster: Cluster, name: str, reason: str) -> list[Any]:
    return [e for e in cluster.events(name) if e.reason == reason]


def test_a_desync_opens_an_early_incident_that_the_failure_joins(
    cluster: Cluster, start_operator: Any
) -> None:
    port = free_port()
    op = start_operator(
        FRWATCH_AGENT_CONTROL_PORT=str(port), FRWATCH_OPERATOR_LIVE_POLL_SECONDS="0.5",
        FRWATCH_OPERATOR_AGENT_TIMEOUT_SECONDS="5",
    )  # fmt: skip
    with live_job(cluster, op, "desync", port, 1, odd_rank=2) as agents:
        early = cluster.incident("Early", timeout=60)
        found = early["status"]["liveFinding"]
        assert (found["kind"], found["processGroup"], found["seq"], found["ranks"], found["peers"]) == (
            "desync",
            "0",
            30,
            [2],
            [0, 1, 3],
        )
        assert "gloo:broadcast" in found["summary"] and early["spec"]["attempt"] == "0"
        [hang] = eventually(
            lambda: events(cluster, "desync", Reason.HANG_SUSPECTED), "the HangSuspected Event", 30
        )
        assert hang.type == "Warning"
        assert f"Incident {early['metadata']['name']} (phase Early)" in hang.message
        assert (
            "desync in" in hang.message
            and "seq 30" in hang.message
            and "rank(s) 2 recorded gloo:broadcast" in hang.message
        )
        assert all(a.pulls >= 1 for a in agents)
        # the attempt's failure joins the same Incident
        pod = agents[2].pod
        cluster.exited(pod, 1)
        cluster.failure_looked_at(op, pod, timeout=60)

        def joined() -> dict[str, Any] | None:
            items = cluster.incidents()
            assert len(items) == 1, [i["metadata"]["name"] for i in items]
            status = items[0].get("status") or {}
            return items[0] if status.get("phase") not in (None, "Early") else None

        after = eventually(joined, "the Early Incident joined by the failure", 60)
        assert after["metadata"]["name"] == early["metadata"]["name"]
        assert after["status"]["liveFinding"] == found
        assert after["status"]["detectedAt"] and after["status"]["collectionDeadline"]
        assert len(events(cluster, "desync", Reason.HANG_SUSPECTED)) == 1
        assert any("joined by the failure" in str(r.get("event")) for r in op.log_records())


def test_a_healthy_live_job_is_pulled_and_left_quiet(cluster: Cluster, start_operator: Any) -> None:
    port = free_port()
    op = start_operator(FRWATCH_AGENT_CONTROL_PORT=str(port), FRWATCH_OPERATOR_LIVE_POLL_SECONDS="0.5")
    with live_job(cluster, op, "healthy", port, 2, odd_rank=None) as agents:
        prefix = f"live round of job {cluster.namespace}/healthy attempt 0: 4 agent(s) pulled, 0 unreachable"

        def rounds() -> list[str] | None:
            found = [str(r["event"]) for r in op.log_records() if str(r.get("event", "")).startswith(prefix)]
            return found if len(found) >= 3 else None

        lines = eventually(rounds, "three live rounds that pulled every agent", 60)
        assert all(line.endswith("finding(s): none") for line in lines)
        assert all(a.pulls >= 3 for a in agents)
        assert cluster.incidents() == []
        assert events(cluster, "healthy", Reason.HANG_SUSPECTED) == []
