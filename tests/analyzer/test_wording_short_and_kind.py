"""The verdict's words where people look: the culprit's kind, a short form that fits ``kubectl describe``,
and next steps that fit what the culprit did (issue 11)."""

from __future__ import annotations

from frwatch_analyzers.analyze import analyze_dumps
from frwatch_analyzers.store.manifest import ContainerEnd, Manifest, PodRecord, RankRecord
from frwatch_analyzers.verdict import CulpritKind, Status
from frwatch_dev.dumps import world
from frwatch_dev.dumps.corpus import cases


def test_every_verdict_of_the_corpus_has_a_kind_and_a_short_form() -> None:
    for case in cases()[::7]:
        v = analyze_dumps(case.files(), world_size=case.world_size)
        assert 0 < len(v.short) <= 120, (case.name, v.short)
        if v.status == Status.problem:
            assert v.culprit_kind is not None, case.name
        if v.culprit_kind in (CulpritKind.gpu_hang, CulpritKind.network_hang):
            assert v.hardware_class
        else:
            assert not v.hardware_class and not v.suspect_nodes, case.name


def test_a_cpu_stuck_rank_is_sent_to_its_python_stack_not_to_a_branch_decision() -> None:
    v = analyze_dumps(world(4).all_reduce(steps=6).rank(1).stops_at(7).dumps())
    assert v.culprit_kind == CulpritKind.cpu_stuck
    assert v.short.startswith("rank 1 CPU-stuck")
    assert "py-spy" in v.next_steps[0]
    assert not any("decision" in s for s in v.next_steps)


def test_a_rank_that_took_another_path_gets_an_assertion_on_the_decision() -> None:
    w = world(4).repeat(6, lambda s: s.all_reduce().all_gather().barrier()).rank(2).skips(10)
    v = analyze_dumps(w.dumps())
    assert v.culprit_kind == CulpritKind.took_another_path, v.culprit_detail
    assert "identical across ranks" in v.next_steps[0]


def test_a_crash_whose_exit_code_is_known_is_not_sent_to_check_it() -> None:
    manifest = Manifest(
        world_size=4,
        ranks=[RankRecord(rank=r, pod=f"job-worker-{r}", node="node-a", dumped=r != 3) for r in range(4)],
        pods=[
            PodRecord(
                pod="job-worker-3",
                node="node-a",
                ranks=[3],
                ended=[ContainerEnd(container="pytorch", exit_code=137, reason="OOMKilled")],
            )
        ],
    )
    v = analyze_dumps(world(4).all_reduce(steps=6).rank(3).stops_at(6).without_dump(3).dumps(), manifest=manifest)
    assert v.culprit_kind == CulpritKind.crashed
    assert "exit code 137 OOMKilled" in v.culprit_detail
    assert "exit 137" in v.short
    assert not any("exit code and events" in s for s in v.next_steps), v.next_steps
