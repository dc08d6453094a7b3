"""The operator's live judgement (pure): summaries pulled from every agent of one attempt -> the finding to
report, each once; stragglers never reported; an agent that failed leaves out only its ranks; the top frame
of a stall's laggard; and the Incident's explicit Early -> Detected transition."""

from __future__ import annotations

import json

from fake_worker import fr_answer

from frwatch_analyzers.live.summary import LivePod, LiveRank, summarize_live
from frwatch_analyzers.live.watch import LiveKind
from frwatch_operator.capture.optin import defaults
from frwatch_operator.config import load_config
from frwatch_operator.live.judge import LiveJudge, early_status, join_early, live_finding, top_frame
from frwatch_operator.resources import CaptureSettings, IncidentPhase, IncidentStatus

STACK = """Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
  File "/data/.frwatch-python/frwatch_live_boot.py", line 80 in _serve

Current thread 0x00007f0000000000 (most recent call first):
  File "/app/train.py", line 40 in load_batch
  File "/app/train.py", line 77 in main
  File "/app/train.py", line 90 in <module>
"""


def rank(r: int, last: int, ops: dict[int, str] | None = None, stack: str | None = None) -> LiveRank:
    s = summarize_live(json.dumps(fr_answer(last, ops)).encode(), r, 0)
    return s.model_copy(update={"stack": stack})


def pods(*ranks: LiveRank) -> dict[str, LivePod | str]:
    """Two ranks a pod, as a 2-process-per-node job's agents serve them."""
    out: dict[str, LivePod | str] = {}
    for r in ranks:
        name = f"pod-{r.rank // 2}"
        prev = out.get(name)
        held = prev.ranks if isinstance(prev, LivePod) else []
        out[name] = LivePod(pod=name, ranks=[*held, r])
    return out


def test_a_desync_is_reported_once_across_rounds() -> None:
    judge = LiveJudge(range(4), stall_after_s=60)
    bad = pods(rank(0, 30), rank(1, 30, {30: "gloo:broadcast"}), rank(2, 30), rank(3, 30))
    first = judge.judge(bad, now=0.0)
    assert first.report is not None
    assert (first.report.kind, first.report.seq, first.report.ranks) == (LiveKind.desync, 30, [1])
    again = judge.judge(bad, now=15.0)
    assert again.report is None and [f.kind for f in again.findings] == [LiveKind.desync]


def test_a_healthy_attempt_reports_nothing() -> None:
    judge = LiveJudge(range(4), stall_after_s=60)
    for i, t in enumerate(range(0, 300, 15)):
        result = judge.judge(pods(*(rank(r, 10 + i) for r in range(4))), now=float(t))
        assert result.report is None and result.findings == [], t


def test_a_stall_is_reported_after_the_threshold_with_its_stack() -> None:
    judge = LiveJudge(range(4), stall_after_s=60)
    for t in (0.0, 30.0):
        result = judge.judge(pods(rank(0, 21), rank(1, 20, stack=STACK), rank(2, 21), rank(3, 21)), now=t)
        assert result.report is None
    result = judge.judge(pods(rank(0, 21), rank(1, 20, stack=STACK), rank(2, 21), rank(3, 21)), now=60.0)
    assert result.report is not None and result.report.kind is LiveKind.stall and result.report.ranks == [1]
    found = live_finding(result.report, "2026-11-25T16:00:00.000Z")
    assert found.top_frames == ['rank 1: File "/app/train.py", line 40 in load_batch']
    assert (found.kind, found.seq, found.peers) == ("stall", 21, [0, 2, 3])


def test_an_agent_that_failed_degrades_only_its_ranks() -> None:
    judge = LiveJudge(range(4), stall_after_s=60)
    pulled = pods(rank(0, 30), rank(1, 30, {30: "gloo:broadcast"}))
    pulled["pod-1"] = "10.0.0.2:8099 unreachable (timed out)"
    result = judge.judge(pulled, now=0.0)
    assert result.unreachable == {"pod-1": "10.0.0.2:8099 unreachable (timed out)"}
    # a tie while ranks 2 and 3 are unread is held (they may break it) for the watch's settle time ...
    assert result.report is None
    # ... then the two readable ranks of pod-0 still judge each other: a tie, undecided, still a desync
    result = judge.judge(pulled, now=judge.watch.settle_s)
    assert result.report is not None and result.report.kind is LiveKind.desync
    assert result.report.ranks == [0, 1] and result.report.peers == []


def test_the_top_frame_skips_the_bootstrap_and_thread_machinery() -> None:
    assert top_frame(STACK) == 'File "/app/train.py", line 40 in load_batch'
    only = 'Thread 0x1 (most recent call first):\n  File "/usr/lib/python3.11/threading.py", line 3 in wait\n'
    assert top_frame(only) == 'File "/usr/lib/python3.11/threading.py", line 3 in wait'
    assert top_frame("garbage\n\x00") == ""


def settings() -> CaptureSettings:
    return defaults(load_config({}))


def test_the_failure_joins_an_early_incident_and_keeps_the_finding() -> None:
    judge = LiveJudge(range(4), stall_after_s=60)
    result = judge.judge(
        pods(rank(0, 30), rank(1, 30, {30: "gloo:broadcast"}), rank(2, 30), rank(3, 30)), 0.0
    )
    assert result.report is not None
    early = early_status(live_finding(result.report, "t0"), 4)
    assert early.phase is IncidentPhase.EARLY and early.wire()["phase"] == "Early"
    joined = join_early(
        IncidentStatus.model_validate(early.wire()), trigger="pod p-1: container pytorch exited 1",
        detected_at="t1", deadline="t2", expected_ranks=4, settings=settings(),
    )  # fmt: skip
    assert joined is not None
    assert (joined.phase, joined.detected_at, joined.collection_deadline) == (
        IncidentPhase.DETECTED,
        "t1",
        "t2",
    )
    assert joined.live_finding == early.live_finding and joined.settings == settings()
    assert "exited 1" in joined.message


def test_only_an_early_incident_is_joined() -> None:
    for phase in (
        IncidentPhase.DETECTED,
        IncidentPhase.COLLECTING,
        IncidentPhase.ANALYZING,
        IncidentPhase.REPORTED,
    ):
        status = IncidentStatus(phase=phase)
        assert (
            join_early(
                status, trigger="x", detected_at="t", deadline="t", expected_ranks=None, settings=settings()
            )
            is None
        )


def test_the_top_frame_is_the_main_threads_before_a_programs_helper_thread() -> None:
    """Seen with real ranks: the workload's dump watcher (a threading.Thread polling in time.sleep) is listed
    first; the main thread, stuck in its data loader, is where the rank is."""
    helper_first = """Thread 0x00007f0000000002 (most recent call first):
  File "/app/dump_on_failure.py", line 252 in _watch
  File "/usr/lib/python3.11/threading.py", line 982 in run
  File "/usr/lib/python3.11/threading.py", line 1045 in _bootstrap_inner
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Thread 0x00007f0000000000 (most recent call first):
  File "/app/faulty_training.py", line 346 in load_batch
  File "/app/faulty_training.py", line 435 in train_step
  File "<frozen runpy>", line 88 in _run_code
  File "<frozen runpy>", line 198 in _run_module_as_main
"""
    assert top_frame(helper_first) == 'File "/app/faulty_training.py", line 346 in load_batch'
