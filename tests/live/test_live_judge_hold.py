"""The operator's judge holds an undecided desync (a tie) while ranks of the world are not read yet: seen with
real ranks, a skip at seq 5 judged "undecided between ranks 0 and 1" while ranks 2 and 3 had not been
sampled yet; a round later every rank is read and rank 1 alone is named."""

from __future__ import annotations

import json

from fake_worker import fr_answer

from frwatch_analyzers.live.summary import LivePod, summarize_live
from frwatch_operator.live.judge import LiveJudge

SKIP = {5: "gloo:broadcast"}


def pods(ranks: list[int]) -> dict[str, LivePod | str]:
    return {f"p{r}": LivePod(pod=f"p{r}", ranks=[summarize_live(json.dumps(fr_answer(5, SKIP if r == 1 else None)).encode(), r, 0)])
            for r in ranks}  # fmt: skip


def test_a_tie_while_ranks_are_unread_waits_for_them() -> None:
    judge = LiveJudge(range(4), stall_after_s=60)
    first = judge.judge(pods([0, 1]), 100.0)
    assert first.report is None and first.findings == []  # seen, held
    second = judge.judge(pods([0, 1, 2, 3]), 102.0)
    assert second.report is not None and second.report.ranks == [1] and second.report.peers == [0, 2, 3]
    assert judge.judge(pods([0, 1, 2, 3]), 104.0).report is None  # reported once


def test_a_tie_is_reported_once_the_unread_ranks_stay_unread_past_the_settle_time() -> None:
    judge = LiveJudge(range(4), stall_after_s=60)
    assert judge.judge(pods([0, 1]), 100.0).report is None
    settle = judge.watch.settle_s
    assert judge.judge(pods([0, 1]), 100.0 + settle / 2).report is None
    late = judge.judge(pods([0, 1]), 100.0 + settle)
    assert late.report is not None and late.report.ranks == [0, 1] and late.report.peers == []


def test_a_tie_with_every_rank_read_is_reported_at_once() -> None:
    judge = LiveJudge(range(2), stall_after_s=60)
    now = judge.judge(pods([0, 1]), 100.0)
    assert now.report is not None and now.report.ranks == [0, 1]
