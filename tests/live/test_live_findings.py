"""Live findings from summaries (pure): desync at once, stall after the threshold with the laggard's
stack, nothing for a slow but healthy rank, stragglers by the analyzer's rule, unreadable ranks left out."""

from __future__ import annotations

import json

from fake_worker import T0, fr_answer

from frwatch_analyzers.live.summary import MAX_LIVE_MEMBERS, LiveRank, summarize_live
from frwatch_analyzers.live.watch import LiveKind, LiveWatch

WORLD = range(4)


def sample(rank: int, last: int, ops: dict[int, str] | None = None, *, stack: str | None = None, t0: int = T0,
           at_s: float = 0.0) -> LiveRank:  # fmt: skip
    s = summarize_live(json.dumps(fr_answer(last, ops, t0=t0)).encode(), rank, int(at_s * 1e9))
    return s.model_copy(update={"stack": stack})


def round_of(lasts: dict[int, int], at_s: float, stacks: dict[int, str] | None = None) -> list[LiveRank]:
    return [sample(r, last, at_s=at_s, stack=(stacks or {}).get(r)) for r, last in lasts.items()]


def test_a_desync_is_found_in_the_first_round_that_holds_it() -> None:
    watch = LiveWatch(WORLD)
    samples = [sample(r, 30) for r in (0, 2, 3)] + [sample(1, 30, {30: "gloo:broadcast"})]
    report = watch.observe(samples, now=0.0)
    (f,) = report.findings
    assert (f.kind, f.process_group, f.seq, f.ranks, f.peers) == (LiveKind.desync, "0", 30, [1], [0, 2, 3])
    assert "gloo:broadcast" in f.summary and "gloo:all_reduce" in f.summary


def test_a_member_read_just_before_it_enqueued_is_waited_for_and_named_a_peer() -> None:
    """The agents sample their pods at different moments: rank 0 is read one collective before the seq where
    rank 1 parts. Judging then would leave rank 0 out of the peers (or, with fewer members, flip the
    majority); the finding comes in the round where rank 0 has enqueued it (the 2026-11 CI run's race)."""
    watch = LiveWatch(WORLD)
    early = [sample(0, 29), sample(1, 30, {30: "gloo:broadcast"}), sample(2, 30), sample(3, 30)]
    assert watch.observe(early, now=0.0).findings == []
    later = [sample(0, 30), sample(1, 31, {30: "gloo:broadcast"}), sample(2, 30), sample(3, 30)]
    (f,) = watch.observe(later, now=5.0).findings
    assert (f.seq, f.ranks, f.peers) == (30, [1], [0, 2, 3]) and "had not enqueued" not in f.summary


def test_a_member_still_short_of_the_seq_is_judged_without_after_settling() -> None:
    watch = LiveWatch(WORLD, settle_s=10)
    samples = [sample(0, 29), sample(1, 30, {30: "gloo:broadcast"}), sample(2, 30), sample(3, 30)]
    for t in (0.0, 5.0):
        assert watch.observe(samples, now=t).findings == [], t
    (f,) = watch.observe(samples, now=10.0).findings
    assert (f.seq, f.ranks, f.peers) == (30, [1], [2, 3])
    assert "ranks 0 had not enqueued seq 30" in f.summary, f.summary


def test_a_member_not_read_yet_is_waited_for_then_named_unread_after_settling() -> None:
    """Early in a job an agent may not have sampled its pod yet: rank 0 is not read at all."""
    samples = [sample(1, 30, {30: "gloo:broadcast"}), sample(2, 30), sample(3, 30)]
    watch = LiveWatch(WORLD, settle_s=10)
    assert watch.observe(samples, now=0.0).findings == []
    (f,) = watch.observe([sample(0, 30), *samples], now=2.0).findings
    assert (f.ranks, f.peers) == ([1], [0, 2, 3]) and "could not be read" not in f.summary
    watch = LiveWatch(WORLD, settle_s=10)
    for t in (0.0, 5.0):
        assert watch.observe(samples, now=t).findings == [], t
    (f,) = watch.observe(samples, now=10.0).findings
    assert (f.ranks, f.peers) == ([1], [2, 3]) and "ranks 0 could not be read" in f.summary, f.summary


def test_entries_seen_while_waiting_are_kept_when_the_tail_moves_on() -> None:
    """Rank 1's tail holds seq 30 only in the first round (its buffer moved on); rank 0 gets there later."""
    watch = LiveWatch(range(3))
    assert watch.observe([sample(0, 29), sample(1, 30, {30: "gloo:broadcast"}), sample(2, 30)], now=0.0).findings == []
    moved_on = sample(1, 80, {30: "gloo:broadcast"})
    assert all(e.seq != 30 for g in moved_on.groups for e in g.tail)
    (f,) = watch.observe([sample(0, 30), moved_on, sample(2, 30)], now=3.0).findings
    assert (f.seq, f.ranks, f.peers) == (30, [1], [0, 2]) and "gloo:broadcast" in f.summary


def test_a_tie_of_two_members_is_undecided() -> None:
    report = LiveWatch(range(2)).observe([sample(0, 9), sample(1, 9, {9: "gloo:all_gather"})], now=0.0)
    (f,) = report.findings
    assert f.ranks == [0, 1] and f.peers == [] and "undecided" in f.summary


def test_a_stall_is_named_after_the_threshold_with_the_laggards_stack() -> None:
    watch = LiveWatch(WORLD, stall_after_s=60)
    stack = 'File "train.py", line 40 in load_batch'
    for t in (0, 15, 30, 45):
        report = watch.observe(round_of({0: 21, 1: 20, 2: 21, 3: 21}, t, {1: stack}), now=t)
        assert report.findings == [], t
    report = watch.observe(round_of({0: 21, 1: 20, 2: 21, 3: 21}, 60, {1: stack}), now=60)
    (f,) = report.findings
    assert (f.kind, f.seq, f.ranks, f.peers, f.for_s) == (LiveKind.stall, 21, [1], [0, 2, 3], 60.0)
    assert f.stacks == {1: stack}


def test_a_slow_but_healthy_rank_is_no_finding() -> None:
    """Rank 1 is always one collective behind when sampled, but moves every round."""
    watch = LiveWatch(WORLD, stall_after_s=60)
    for i, t in enumerate(range(0, 600, 15)):
        last = 10 + i
        report = watch.observe(round_of({0: last + 1, 1: last, 2: last + 1, 3: last + 1}, t), now=t)
        assert report.findings == [], t


def test_a_rank_whose_own_progress_moves_elsewhere_is_not_stalled_here() -> None:
    watch = LiveWatch(range(2), stall_after_s=60)
    for t in range(0, 200, 15):
        lag = sample(1, 20)
        busy = lag.model_copy(
            update={
                "groups": [*lag.groups, lag.groups[0].model_copy(update={"name": "9", "last_enqueued": t})]
            }
        )
        report = watch.observe([sample(0, 21), busy], now=t)
    assert [f.kind for f in report.findings] == []


def test_an_unreadable_rank_is_left_out_and_said() -> None:
    watch = LiveWatch(range(3), stall_after_s=60)
    for t in (0, 30, 60, 90):
        report = watch.observe(
            [sample(0, 21), sample(1, 21), LiveRank(rank=2, sampled_ns=0, error="fr_trace_json: refused")],
            now=t,
        )
    assert report.findings == [] and report.unreadable == {2: "fr_trace_json: refused"}


def test_a_rank_consistently_late_to_enqueue_is_a_straggler() -> None:
    late = 2_000_000_000  # 2 s behind on every collective
    samples = [sample(r, 40, t0=T0 + (late if r == 3 else r * 1000)) for r in WORLD]
    report = LiveWatch(WORLD).observe(samples, now=0.0)
    assert report.findings == []
    assert [(s.rank, s.kind.value) for s in report.stragglers] == [(3, "late_enqueue")]


def test_a_big_groups_members_stay_home_and_it_is_still_judged() -> None:
    """NCCL lists every member of the default group in pg_config: above MAX_LIVE_MEMBERS the summary leaves
    them out (O(ranks^2) on the wire otherwise) and the judge infers them, as for gloo; a desync is found."""
    def summary(rank: int, world: int, ops: dict[int, str] | None = None):  # type: ignore[no-untyped-def]
        answer = fr_answer(30, ops)
        answer["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": json.dumps(list(range(world)))}}
        return summarize_live(json.dumps(answer).encode(), rank, 1)

    assert summary(0, 8).groups[0].members == list(range(8))
    world = MAX_LIVE_MEMBERS + 44
    ranks = [summary(r, world, {30: "gloo:broadcast"} if r == 7 else None) for r in range(world)]
    assert all(r.groups[0].members is None for r in ranks)
    assert len(ranks[0].model_dump_json()) < 4000
    (f,) = LiveWatch(range(world)).observe(ranks, now=0.0).findings
    assert (f.kind, f.seq, f.ranks) == (LiveKind.desync, 30, [7]) and len(f.peers) == world - 1
