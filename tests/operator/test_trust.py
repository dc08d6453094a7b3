"""Trust boundaries on the operator's side (issue 10), the pure parts: a job spec is data, never a loop
bound; what the store says is checked against what the cluster showed; names are escaped where written."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime

import pytest

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_analyzers.base.safe_text import printable
from frwatch_analyzers.store.layout import AttemptKey
from frwatch_analyzers.store.pod_record import StoredPodRecord, parse_pod_record
from frwatch_analyzers.verdict import Category, RankGroup, Status, Verdict
from frwatch_operator.collect.progress import (
    check_records,
    out_of_range,
    read_listing,
)
from frwatch_operator.config import Config
from frwatch_operator.detect.job_failure import current_attempt
from frwatch_operator.detect.pod_failure import PodFacts, attempt_of
from frwatch_operator.errors import FatalError
from frwatch_operator.incident.naming import incident_body, storage_url, valid_attempt
from frwatch_operator.incident.observed_facts import ClusterView, observe, parse_ranges, ranges_text
from frwatch_operator.incident.record import Incident
from frwatch_operator.kinds.job_kind import PYTORCHJOB
from frwatch_operator.remediation.breaker import BreakerState
from frwatch_operator.remediation.cordon_policy import Rules, plan_cordons
from frwatch_operator.resources import OBSERVED_PODS_MAX, IncidentObserved, ObservedPod
from frwatch_operator.verdict.evidence_check import check_verdict
from frwatch_operator.webhook import JobIndex, mutate_pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def job(nproc: object, workers: object = 3) -> dict:
    return {"spec": {"nprocPerNode": nproc,
                     "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": workers}}}}  # fmt: skip


def worker(index: int) -> dict:
    return {"metadata": {"labels": {"training.kubeflow.org/replica-type": "worker",
                                    "training.kubeflow.org/replica-index": str(index)}}}  # fmt: skip


# --- a job spec is data, never a loop bound ---------------------------------------------------------------


def test_a_spec_claiming_5_million_processes_per_node_is_out_of_bounds_and_costs_nothing():
    started = time.perf_counter()
    layout = PYTORCHJOB.layout(job("5000000"))
    assert layout.world_size is None and layout.nproc_per_node is None
    assert "4 pod(s) x nprocPerNode '5000000' = 20000000 ranks" in layout.problem
    assert str(MAX_WORLD_SIZE) in layout.problem
    assert PYTORCHJOB.ranks_of(worker(2), layout) == range(0)
    assert time.perf_counter() - started < 0.1  # nothing the size of the claim was built


def test_absurd_numbers_anywhere_in_the_spec_are_bounded_never_parsed_whole():
    for spec in (job("9" * 100_000), job(10**30), job("4", workers="1" * 5000), job("4", workers=10**9)):
        layout = PYTORCHJOB.layout(spec)
        assert layout.world_size is None and layout.problem, spec["spec"]["nprocPerNode"]
    sane = PYTORCHJOB.layout(job("8"))
    assert sane.world_size == 32 and not sane.problem
    assert PYTORCHJOB.ranks_of(worker(2), sane) == range(24, 32)
    assert PYTORCHJOB.ranks_of(worker(MAX_WORLD_SIZE), sane) == range(0)


def test_a_pod_of_another_kind_that_shares_the_label_is_never_waited_for():
    pod = {"metadata": {"name": "p", "namespace": "ns", "labels": {"training.kubeflow.org/job-name": "llama"},
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "llama",
                                             "uid": "u1", "controller": True}]}}  # fmt: skip
    assert PYTORCHJOB.owned_elsewhere(pod)
    config = Config.model_validate({"webhook": {"job_wait_seconds": 5}})
    started = time.perf_counter()
    mutation = asyncio.run(mutate_pod(pod, "ns", JobIndex(), config))
    assert mutation.ops == [] and time.perf_counter() - started < 2  # not the 5 s job wait
    mine = {"metadata": {"ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                              "uid": "u1", "controller": True}]}}  # fmt: skip
    assert not PYTORCHJOB.owned_elsewhere(mine) and not PYTORCHJOB.owned_elsewhere(mine, "u1")
    assert PYTORCHJOB.owned_elsewhere(mine, "another-uid")
    assert not PYTORCHJOB.owned_elsewhere({"metadata": {}})  # no controller: not ruled out


# --- attempts never reach keys unless they are numbers --------------------------------------------------------


def test_an_attempt_that_is_not_a_number_never_reaches_an_object_key():
    assert valid_attempt("0") and valid_attempt("12")
    for bad in ("..", "../x", "0/../../y", "", "1" * 19, "\x1b[31m", "1\n", None, 3):
        assert not valid_attempt(bad), bad

    def pod(value: str) -> dict:
        return {"spec": {"initContainers": [{"name": "frwatch-agent",
                                             "env": [{"name": "FRWATCH_JOB_ATTEMPT", "value": value}]}]}}  # fmt: skip

    assert attempt_of(pod("3")) == "3"
    assert attempt_of(pod("..")) is None
    assert attempt_of({"metadata": {"labels": {"jobset.sigs.k8s.io/restart-attempt": "../0"}}}) is None
    assert current_attempt({"metadata": {"annotations": {"frwatch.io/attempt": "../../x"}}}) == ""
    assert current_attempt({"metadata": {}}) == "0"


# --- ranks as ranges; the cluster's view, bounded ---------------------------------------------------------------


def test_rank_ranges_are_compact_round_trip_and_cut_on_the_safe_side():
    assert ranges_text(range(0, 5_000_000)) == "0-4999999"
    assert ranges_text((5, 0, 1, 2, 9)) == "0-2,5,9"
    assert parse_ranges("0-2,5,9") == (range(0, 3), range(5, 6), range(9, 10))
    cut = ranges_text(tuple(range(0, 4000, 2)))
    assert len(cut) <= 256 and cut.endswith("…")
    assert all(r.stop <= 4000 for r in parse_ranges(cut))
    assert parse_ranges("x-3,5-2,99999999999-1,7") == (range(7, 8),)


def facts(name: str, node: str, ranks: range) -> PodFacts:
    return PodFacts(name=name, namespace="ns", job="llama", attempt="0", node=node, ranks=ranks)


def test_observed_pods_are_merged_and_bounded():
    first = observe(None, [facts("p0", "node-a", range(0, 8)), facts("p1", "node-b", range(8, 16))], {})
    assert [p.ranks for p in first.pods] == ["0-7", "8-15"] and first.nodes == ["node-a", "node-b"]
    again = observe(first, [facts("p1", "", range(8, 16))], {})  # after a restart: p0 not in memory
    assert [p.name for p in again.pods] == ["p0", "p1"] and again.pods[1].node == "node-b"
    record = StoredPodRecord(pod="p1", node="node-b", ranks=(8, 9))
    assert observe(first, [facts("p1", "node-b", range(8, 16))], {"p1": record}).pods[1].ranks == "8-9"
    many = observe(None, [facts(f"p{i:05}", f"n{i}", range(i, i + 1)) for i in range(OBSERVED_PODS_MAX + 5)], {})
    assert len(many.pods) == OBSERVED_PODS_MAX and many.truncated
    view = ClusterView.of(first)
    assert view.node_of(3) == "node-a" and view.node_of(15) == "node-b" and view.node_of(16) == ""


def test_store_records_are_checked_against_the_cluster():
    pods = [facts("llama-master-0", "node-a", range(0, 1)), facts("llama-worker-0", "node-b", range(1, 2))]
    records = {
        "llama-master-0": StoredPodRecord(pod="llama-master-0", node="node-a", ranks=(0,)),
        "llama-worker-0": StoredPodRecord(pod="llama-worker-0", node="victim-node", ranks=(1,)),
        "ghost": StoredPodRecord(pod="ghost", node="victim-node-2", ranks=(2,)),
    }
    kept, issues = check_records(pods, records)
    assert set(kept) == {"llama-master-0", "llama-worker-0"} and kept["llama-worker-0"].node == "node-b"
    assert any("'victim-node', the cluster ran it on node-b" in i for i in issues)
    assert any("pods/ghost.json names a pod the cluster never showed" in i for i in issues)
    key = AttemptKey("frwatch", "ns", "llama", "uid", "0")
    listing = read_listing(key, [key.rank(0), key.rank(7), f"{key.root}/ranks/{'9' * 23}.pickle"])
    assert set(listing.rank_keys) == {0, 7}
    issues = out_of_range(listing, world_size=2)
    assert any("past every world size" in i for i in issues) and any("rank(s) 7" in i for i in issues)


def test_pod_records_are_read_with_bounds():
    assert parse_pod_record(b"[" * 100_000 + b"]" * 100_000) is None
    assert parse_pod_record(b" " * (2 * 1024 * 1024)) is None
    odd = parse_pod_record(json.dumps({"pod": "p", "node": ["x"], "ranks": [1, True, -1, "2", 10**12, 3]}).encode())
    assert odd is not None and odd.ranks == (1, 3) and odd.node == ""


# --- the verdict is evidence, never authority ------------------------------------------------------------------


def verdict(suspects: list[str], groups: list[list[str]], culprits: list[int]) -> Verdict:
    return Verdict(status=Status.problem, category=Category.gpu_hang, hardware_class=True, headline="gpu hang",
                   culprit_ranks=culprits, suspect_nodes=suspects,
                   groups=[RankGroup(ranks=[i], label="x", nodes=n) for i, n in enumerate(groups)])  # fmt: skip


OBSERVED = IncidentObserved(
    pods=[ObservedPod(name=f"p{i}", node=f"node-{i}", ranks=str(i)) for i in range(4)],
    nodes=[f"node-{i}" for i in range(4)],
)


def test_a_forged_verdict_keeps_only_nodes_the_cluster_saw_and_decoys_do_not_dilute_the_share():
    decoys = [f"decoy-{i}" for i in range(20)]
    forged = verdict(["victim-a", "victim-b", "node-1"], [["node-0", *decoys], ["node-1"]], culprits=[1])
    checked = check_verdict(forged, OBSERVED)
    assert checked.verdict.suspect_nodes == ["node-1"]
    assert checked.verdict.groups[0].nodes == ["node-0"]
    assert checked.job_nodes == ("node-0", "node-1", "node-2", "node-3")
    assert any("'victim-a', 'victim-b'" in i and "ran no pod of this attempt" in i for i in checked.issues)
    assert any("20 node(s) the cluster never ran this attempt on" in i for i in checked.issues)
    # two suspects of four observed nodes: 50% > 25%, whatever the decoys (which never count)
    two = check_verdict(verdict(["node-1", "node-2"], [[*decoys]], culprits=[1, 2]), OBSERVED)
    plan = plan_cordons(verdict=two.verdict, incident="ns/i", job_nodes=two.job_nodes, nodes={},
                        breaker=BreakerState(), cluster_nodes=100, rules=Rules(enabled=True, dry_run=False),
                        now=NOW)  # fmt: skip
    assert plan.decisions == () and "2 of the job's 4 nodes are suspects (50% > 25%)" in plan.summary


def test_a_verdict_naming_a_node_where_no_culprit_ran_keeps_nothing_and_no_record_confirms_nothing():
    checked = check_verdict(verdict(["node-2"], [], culprits=[1]), OBSERVED)
    assert checked.verdict.suspect_nodes == [] and "where no culprit rank ran" in checked.issues[0]
    blind = check_verdict(verdict(["node-1"], [], culprits=[1]), None)
    assert blind.verdict.suspect_nodes == [] and blind.job_nodes == () and "older frwatch" in blind.issues[0]
    honest = check_verdict(verdict(["node-1"], [["node-1"]], culprits=[1]), OBSERVED)
    assert honest.issues == () and honest.verdict.suspect_nodes == ["node-1"]


def test_names_with_escapes_are_written_escaped():
    assert printable("node-\x1b[31mred\x1b[0m\nEvil: x") == "node-\\x1b[31mred\\x1b[0m\\nEvil: x"
    assert printable("a\u202eb\udcff") == "a\\u202eb\\udcff"
    assert printable("plain node-1, ünïcode") == "plain node-1, ünïcode"


def test_repeated_failures_of_one_namespace_cannot_walk_the_cluster():
    """Every failure opens a new Incident: the per-namespace cap counts the cordons of all of them."""
    from datetime import timedelta

    from frwatch_operator.remediation.breaker import CordonRecord
    from frwatch_operator.remediation.cordon_policy import Action, NodeView, SkipReason

    rules = Rules(enabled=True, dry_run=False, max_nodes_per_incident=2, breaker_share=1.0)
    earlier = BreakerState(cordons=(CordonRecord("node-0", "team-a/llama-1", NOW - timedelta(hours=3)),
                                    CordonRecord("node-1", "team-a/llama-2", NOW - timedelta(hours=2))))  # fmt: skip
    one = check_verdict(verdict(["node-2"], [], culprits=[2]), OBSERVED)

    def plan(incident: str, state: BreakerState) -> tuple[str, str]:
        p = plan_cordons(verdict=one.verdict, incident=incident, job_nodes=[f"n{i}" for i in range(8)],
                         nodes={"node-2": NodeView("node-2")}, breaker=state, cluster_nodes=100, rules=rules,
                         now=NOW)  # fmt: skip
        (d,) = p.decisions
        return d.action.value, d.code

    assert plan("team-a/llama-3", earlier) == (Action.SKIP.value, SkipReason.NAMESPACE_CAP.value)
    assert plan("team-b/other-1", earlier) == (Action.CORDON.value, "")
    aged = BreakerState(cordons=tuple(CordonRecord(r.node, r.incident, r.at - timedelta(days=1))
                                      for r in earlier.cordons))  # fmt: skip
    assert plan("team-a/llama-3", aged) == (Action.CORDON.value, "")


# --- an Incident is driven only on its own attempt's root ------------------------------------------------------
def _incident(storage: str) -> dict[str, object]:
    job = {"metadata": {"name": "llama", "uid": "u-1", "namespace": "team"}}
    body = incident_body(job=job, api_version="kubeflow.org/v1", kind="PyTorchJob", attempt="3", trigger="t",
                         storage=storage)  # fmt: skip
    body["metadata"]["uid"] = "i-1"  # type: ignore[index]
    return body


def test_an_incident_is_driven_only_on_its_own_attempt_root() -> None:
    key = AttemptKey("frwatch/x", "team", "llama", "u-1", "3")
    inc = Incident.of(_incident(storage_url("fr-dumps", key))).checked()
    assert inc.attempt_key == key and inc.bucket == "fr-dumps"
    for other, says in (
        ("s3://fr-dumps/frwatch/team/llama/u-1/4", "is not this attempt's root"),  # another attempt's evidence
        ("s3://fr-dumps/frwatch/team/other/u-1/3", "is not this attempt's root"),
        ("s3://fr-dumps/llama/u-1/3", "storageUrl"),
        ("s3://fr-dumps/", "storageUrl"),
        ("https://fr-dumps/frwatch/team/llama/u-1/3", "storageUrl"),
    ):
        with pytest.raises(FatalError, match=says):
            Incident.of(_incident(other)).checked()
