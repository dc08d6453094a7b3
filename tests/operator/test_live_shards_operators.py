"""Live watch sharded over two real operator processes (``FRWATCH_OPERATOR_LIVE_SHARDS=2``) against the API
emulator, with fake agents (as in ``test_live_watch``): each replica holds one shard Lease; each of two live
jobs (one per shard, by the sha256 of its uid) is pulled by exactly one replica, the holder of its shard (the
operators' "live round of job ..." log lines are the signal); when the holder of one job's shard stops, the
other replica takes that shard over and a desync that then appears in the job is reported once: one Early
Incident, one HangSuspected Event."""

from __future__ import annotations

import re
from contextlib import ExitStack
from typing import Any

from harness import Cluster, eventually
from live_answers import fr_answer
from test_live_watch import LIVE, FakeAgent, agent_token, events, running_at

from frwatch_dev.ports import free_port
from frwatch_operator.live.shards import shard_of
from frwatch_operator.notices import Reason

#: Short Leases so that a handover takes seconds (a free shard beyond a replica's share: 2 leases).
TIMES = {"FRWATCH_OPERATOR_LEASE_SECONDS": "10", "FRWATCH_OPERATOR_RENEW_SECONDS": "6",
         "FRWATCH_OPERATOR_RETRY_SECONDS": "1"}  # fmt: skip
TAKES = re.compile(r"leader election: (\S+) now runs the live rounds of shard (\d+)/2")


def shards_run(op: Any) -> list[int]:
    """The shards ``op`` has started to run, from its log, in order."""
    return [int(m[2]) for r in op.log_records() if (m := TAKES.match(str(r.get("event", ""))))]


def rounds(op: Any, namespace: str, job: str) -> list[str]:
    prefix = f"live round of job {namespace}/{job} attempt 0:"
    return [str(r["event"]) for r in op.log_records() if str(r.get("event", "")).startswith(prefix)]


def test_two_replicas_split_the_live_jobs_by_shard_and_one_takes_over_the_other(
    cluster: Cluster, start_operator: Any
) -> None:
    port = free_port()
    ns = cluster.namespace

    def operator(me: str) -> Any:
        return start_operator(
            FRWATCH_AGENT_CONTROL_PORT=str(port), FRWATCH_OPERATOR_LIVE_POLL_SECONDS="0.5",
            FRWATCH_OPERATOR_AGENT_TIMEOUT_SECONDS="5", FRWATCH_OPERATOR_LIVE_SHARDS="2",
            FRWATCH_OPERATOR_REPLICAS="2", FRWATCH_OPERATOR_LEADER_ELECTION="true",
            FRWATCH_OPERATOR_LEASE_NAMESPACE=ns, FRWATCH_OPERATOR_IDENTITY=me, **TIMES,
        )  # fmt: skip

    a, b = operator("a"), operator("b")
    # each takes its share (one shard) at once; the other shard is not taken by a replica that holds its
    # share until it has been free for 2 leases (20 s): b is up long before
    def one_each() -> bool:
        return len(set(shards_run(a))) == 1 and len(set(shards_run(b))) == 1

    eventually(one_each, "each replica holding one shard", 60)
    holder = {shards_run(a)[0]: a, shards_run(b)[0]: b}
    assert set(holder) == {0, 1}, (shards_run(a), shards_run(b))

    # two live jobs, one in each shard (jobs are made until both shards have one; extra ones get no pods)
    jobs: dict[int, dict[str, Any]] = {}
    for n in range(40):
        job = cluster.create_job(f"live-{n}", world=4, annotations=LIVE)
        jobs.setdefault(shard_of(job["metadata"]["uid"], 2), job)
        if len(jobs) == 2:
            break
    assert set(jobs) == {0, 1}
    with ExitStack() as stack:
        agents: dict[int, list[FakeAgent]] = {}
        for shard, job in jobs.items():
            pods = cluster.create_pods(a, job, 4)
            agents[shard] = []
            for rank, pod in enumerate(pods):
                ip = f"127.0.{shard + 5}.{rank + 1}"
                agent = FakeAgent(ip, port, pod, rank, agent_token(cluster.pod(pod)), fr_answer(30))
                stack.callback(agent.close)
                agents[shard].append(agent)
                running_at(cluster, pod, ip)
        names = {shard: job["metadata"]["name"] for shard, job in jobs.items()}

        def pulled_three_times() -> bool:
            return all(len(rounds(holder[s], ns, names[s])) >= 3 for s in (0, 1))

        eventually(pulled_three_times, "three live rounds of each job by its shard's holder", 60)
        for shard, name in names.items():  # exactly one replica judges each job: its shard's holder
            other = b if holder[shard] is a else a
            assert rounds(other, ns, name) == [], (shard, name)
            assert all(line.endswith("finding(s): none") for line in rounds(holder[shard], ns, name))

        # the holder of shard 0 stops (a clean stop releases its Lease); the other replica takes shard 0 over
        gone, stays = holder[0], holder[1]
        assert gone.stop() == 0
        eventually(lambda: 0 in shards_run(stays), "the remaining replica running shard 0 too", 90)
        before = len(rounds(stays, ns, names[0]))
        eventually(lambda: len(rounds(stays, ns, names[0])) > before, "a live round of job 0 by its new holder", 60)
        assert all(line.endswith("finding(s): none") for line in rounds(stays, ns, names[0]))
        # now rank 2 of job 0 broadcasts where its peers all_reduce at seq 30: the new holder's fresh judge
        # reports it, once
        agents[0][2].answer = fr_answer(30, {30: "gloo:broadcast"})
        early = cluster.incident("Early", timeout=60)
        found = early["status"]["liveFinding"]
        assert (found["kind"], found["seq"], found["ranks"]) == ("desync", 30, [2])
        assert early["metadata"]["ownerReferences"][0]["uid"] == jobs[0]["metadata"]["uid"]
        eventually(lambda: events(cluster, names[0], Reason.HANG_SUSPECTED), "the HangSuspected Event", 30)
        # later rounds see the same desync and report nothing more: wait for three of them, then count
        seen = len(rounds(stays, ns, names[0]))
        eventually(lambda: len(rounds(stays, ns, names[0])) >= seen + 3, "three more live rounds of job 0", 60)
        assert len(cluster.incidents()) == 1
        assert len(events(cluster, names[0], Reason.HANG_SUSPECTED)) == 1
        assert rounds(stays, ns, names[1])  # shard 1 still runs on its holder
