"""Every dump of every rank is used by content, never by file name; the world is known from every sane
source; dumps that prove nothing are never called healthy; stragglers are named."""

from __future__ import annotations

from pathlib import Path

from frwatch_analyzers.analyze import analyze, analyze_dumps
from frwatch_analyzers.store.manifest import Manifest, RankRecord
from frwatch_analyzers.verdict import Category, CulpritKind, Status, StragglerKind
from frwatch_dev.dumps import json_bytes, pickle_bytes, world


def _manifest(n: int) -> Manifest:
    return Manifest(
        world_size=n,
        ranks=[
            RankRecord(rank=r, pod=f"job-worker-{r}", node=f"node-{r // 2}", dumped=True) for r in range(n)
        ],
    )


# --- two dumps of one rank --------------------------------------------------------------------------------
def test_an_earlier_dump_is_superseded_by_the_later_whatever_the_names(tmp_path: Path) -> None:
    w = world(4).all_reduce(steps=12).rank(1).stops_at(13)
    early = w.dumps(upto=6)[1]
    for folder, (late_name, early_name) in {
        "a": ("rank_1", "rank_1.json"),
        "b": ("rank_1.json", "rank_1"),
    }.items():
        d = tmp_path / folder
        d.mkdir()
        for r, dump in w.dumps().items():
            if r != 1:
                (d / f"rank_{r}").write_bytes(pickle_bytes(dump))
        (d / late_name).write_bytes(
            pickle_bytes(w.dumps()[1]) if late_name == "rank_1" else json_bytes(w.dumps()[1])
        )
        (d / early_name).write_bytes(
            json_bytes(early) if early_name.endswith(".json") else pickle_bytes(early)
        )
        v = analyze(str(d), world_size=4)
        assert v.category == Category.missing_rank and v.culprit_ranks == [1], v.headline
        roles = {Path(f.file).name: f.role for f in v.dump_files}
        assert roles == {late_name: "used", early_name: "superseded"}, roles
        assert "records 0-5" in next(f.note for f in v.dump_files if f.role == "superseded")


def test_a_second_recorder_is_merged_and_its_groups_kept_apart() -> None:
    gpu = world(4).all_reduce(steps=8).rank(2).stops_at(8)
    cpu = world(4, backend="gloo").all_reduce(steps=5, tensors=[[16]])
    files = [(f"nccl_trace_rank_{r}", r, d) for r, d in gpu.dumps().items()]
    files += [(f"gloo_trace_rank_{r}", r, d) for r, d in cpu.dumps().items()]
    v = analyze_dumps(files)
    assert v.category == Category.missing_rank and v.culprit_ranks == [2]
    assert v.earliest_branch is not None and v.earliest_branch.process_group.name == "0"
    assert {f.role for f in v.dump_files} == {"used", "merged"} and len(v.dump_files) == 8
    pgs = {k for g in v.groups for k in g.last_enqueued}
    assert pgs == {"0@gloo", "0@nccl"}, pgs  # one name, two recorders numbering their own collectives


def test_two_dumps_of_one_recorder_that_disagree_are_explained_not_dropped() -> None:
    good = world(4).all_reduce(steps=6).all_gather(steps=2)
    other = world(4).all_reduce(steps=6).broadcast(steps=2)
    files = [(f"r{r}", r, d) for r, d in good.dumps().items()] + [("r1-other", 1, other.dumps()[1])]
    v = analyze_dumps(files)
    roles = {f.file: f.role for f in v.dump_files}
    assert sorted(roles.values()) == ["conflict", "used"], roles
    assert "disagree at pg 0 #7" in v.summary, v.summary


def test_a_copy_of_a_dump_is_named_identical() -> None:
    dumps = world(4).all_reduce(steps=6).dumps()
    v = analyze_dumps([(f"r{r}", r, d) for r, d in dumps.items()] + [("r3-retry", 3, dumps[3])])
    assert v.status == Status.healthy
    assert sorted(f.role for f in v.dump_files) == ["identical", "used"]


# --- the world -----------------------------------------------------------------------------------------------
def test_a_rank_missing_at_the_top_is_noticed_from_gloos_broken_pg_config() -> None:
    # rank 3 of 4 left no dump; gloo's pg_config names no group but lists the world: {'': {'ranks': '[0, 1, 2, 3]'}}
    dumps = world(4, backend="gloo").all_reduce(steps=6).rank(3).stops_at(6).without_dump(3).dumps()
    v = analyze_dumps(dumps)
    assert v.world_size == 4 and v.missing_dumps == [3]
    assert v.category == Category.missing_rank and v.culprit_ranks == [3]
    assert v.culprit_kind == CulpritKind.crashed


def test_dumps_with_no_entries_are_no_dump_never_healthy() -> None:
    dumps = world(4).all_reduce(steps=3).dumps()
    for d in dumps.values():
        d["entries"] = []
    v = analyze_dumps(dumps)
    assert v.status == Status.inconclusive and v.category == Category.no_dump
    assert "hold no entries" in v.headline


def test_a_missing_rank_with_collectives_in_flight_is_never_healthy() -> None:
    dumps = world(4).all_reduce(steps=6).rank(0).stops_at(6).without_dump(0).dumps()
    v = analyze_dumps(dumps, world_size=4)
    assert v.status == Status.problem and v.culprit_ranks == [0] and v.culprit_kind == CulpritKind.crashed


# --- decided by evidence ---------------------------------------------------------------------------------------
def test_a_two_member_tie_is_decided_by_states_not_guessed() -> None:
    v = analyze_dumps(world(2).all_reduce(steps=10).rank(1).stops_at(11).dumps())
    assert v.culprit_ranks == [1] and v.culprit_kind == CulpritKind.cpu_stuck
    assert "guess" not in v.headline and "not in the dumps" not in v.headline


def test_a_silent_mismatch_is_not_called_an_extra_call() -> None:
    w = world(4).all_reduce(steps=10).rank(1).sizes_at(4, [[3_276_800, 2]], hangs=False)
    v = analyze_dumps(w.dumps())
    assert v.category == Category.size_mismatch and v.culprit_ranks == [1] and v.findings[0].silent
    assert "extra" not in v.culprit_detail and "skipped" not in v.culprit_detail
    assert v.culprit_kind == CulpritKind.mismatched_call


def test_a_hang_inside_a_subgroup_is_not_blamed_on_ranks_blocked_in_it() -> None:
    w = (
        world(4, queued=2)
        .group("tp", ranks=[2, 3])
        .repeat(8, lambda s: s.all_reduce(group="tp").all_reduce())
        .rank(3)
        .not_started_at(6, group="tp")
    )
    v = analyze_dumps(w.dumps(), manifest=_manifest(4))
    assert v.category == Category.gpu_hang and v.culprit_ranks == [3] and v.hardware_class
    assert v.earliest_branch is not None and v.earliest_branch.process_group.desc == "tp"
    assert v.suspect_nodes == ["node-1"]
    assert any(c.process_group == "0" for c in v.consequences)


def test_a_software_finding_names_where_the_culprit_ran_not_a_suspect_node() -> None:
    v = analyze_dumps(
        world(4).all_reduce(steps=6).rank(1).op_at(4, "broadcast").dumps(), manifest=_manifest(4)
    )
    assert v.suspect_nodes == [] and v.culprit_nodes == ["node-0"]
    assert v.culprit_kind == CulpritKind.mismatched_call and len(v.short) <= 120


# --- stragglers --------------------------------------------------------------------------------------------------
def test_a_late_rank_is_named_in_a_healthy_set_with_its_share_and_node() -> None:
    v = analyze_dumps(world(8).all_reduce(steps=40).rank(5).late_by(35).dumps(), manifest=_manifest(8))
    assert v.status == Status.healthy
    [s] = v.stragglers
    assert (s.rank, s.kind, s.nodes) == (5, StragglerKind.late_enqueue, ["node-2"])
    assert 30 < s.median_ms < 40 and s.share > 0.9
    assert "rank 5 enqueues its collectives 35 ms after its peers" in v.summary


def test_a_slow_rank_is_named_in_a_hang_too() -> None:
    w = world(8).all_reduce(steps=40).rank(6).slow_by(20).rank(2).stops_at(41)
    v = analyze_dumps(w.dumps())
    assert v.culprit_ranks == [2]
    assert [(s.rank, s.kind) for s in v.stragglers] == [(6, StragglerKind.slow_start)]


def test_no_straggler_when_every_rank_is_a_little_late_alike() -> None:
    # the builder staggers ranks by 8 us each: a ramp, nobody stands out
    assert analyze_dumps(world(64).all_reduce(steps=30).dumps()).stragglers == []


def test_alike_ranks_samples_leave_out_the_unknown_times_per_column() -> None:
    from array import array

    from frwatch_analyzers.align.stragglers import _add

    created: dict[int, tuple[array[int], array[int]]] = {}
    start_delay: dict[int, tuple[array[int], array[int]]] = {}
    q = lambda *xs: array("q", xs)  # noqa: E731
    # rank 2 never created it (0), rank 3 never started it (0): rank 1's and 3's creation, rank 1's delay
    _add(created, 7, q(1, 2, 3), q(100, 0, 300), start_delay, q(150, 250, 0))
    assert created == {7: (q(1, 3), q(100, 300))} and start_delay == {7: (q(1,), q(50))}
    _add(created, 7, q(4), q(400), start_delay, q(420))  # appended to the same seq
    assert created == {7: (q(1, 3, 4), q(100, 300, 400))} and start_delay == {7: (q(1, 4), q(50, 20))}
    _add(created, 8, q(5, 6), q(0, 0), start_delay, q(1, 2))  # nothing known: nothing added
    _add(created, 9, q(5), q(10), start_delay, q(0))  # created only
    assert 8 not in created and 8 not in start_delay and created[9] == (q(5), q(10)) and 9 not in start_delay


# --- most members absent ------------------------------------------------------------------------------------------
def test_most_members_absent_and_idle_are_the_culprits_when_the_few_did_what_the_group_always_does() -> None:
    w = world(4).all_reduce(steps=10)
    for r in (0, 1, 2):
        w = w.rank(r).stops_at(11)
    v = analyze_dumps(w.dumps())
    assert v.culprit_ranks == [0, 1, 2] and v.culprit_kind == CulpritKind.cpu_stuck, v.headline


def test_most_members_absent_the_few_issued_a_call_the_group_never_issues() -> None:
    w = world(4).all_reduce(steps=10)
    for r in (0, 1, 2):
        w = w.rank(r).stops_at(11)
    v = analyze_dumps(w.rank(3).extra_at(11, "broadcast").dumps())
    assert v.culprit_ranks == [3] and v.culprit_kind == CulpritKind.extra_call, v.headline
    assert "never issued before" in v.culprit_detail


def test_a_rank_that_left_no_dump_while_nobody_waited_on_it_is_never_healthy() -> None:
    """Real 3-rank gloo crash runs end this way when the dump request reaches the survivors between two
    collectives: they agree and none is in flight, and rank 2 left nothing. A job that lost a rank did not
    succeed: inconclusive, naming the rank (its log and exit, when read, name the cause)."""
    dumps = world(3, backend="gloo").all_reduce(steps=4).without_dump(2).dumps()
    v = analyze_dumps(dumps, world_size=3)
    assert v.missing_dumps == [2] and v.culprit_ranks == []
    assert v.status == Status.inconclusive and v.category == Category.inconclusive
    assert "rank 2 left no dump" in v.headline and "rank 2 left no dump" in v.short
    assert "healthy" not in v.short
