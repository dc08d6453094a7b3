"""A log cause needs a consequence: a warning is never one, and an exception its rank went on after (a later
step in its own lines, its container exiting 0, a healthy verdict's dump of it) is handled, not a cause.
Warning lines are torch 2.13's format as printed by a real run (tests/evidence/handled_ranks.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from frwatch_analyzers.analyze import analyze_dumps
from frwatch_analyzers.diagnose.nextsteps import CRASH_UNSEEN
from frwatch_analyzers.evidence.causes import with_causes
from frwatch_analyzers.evidence.logscan import scan, went_on
from frwatch_analyzers.evidence.logtext import decode_tail
from frwatch_analyzers.evidence.read import Gathered, LogFile
from frwatch_analyzers.store.manifest import ContainerEnd, Manifest, PodRecord
from frwatch_analyzers.verdict import CauseKind
from frwatch_dev.dumps import world

YEAR = 2026

CAUGHT = """\
step 1 loss 1.000
step 2 loss 0.500
retrying later
Traceback (most recent call last):
  File "/app/metrics.py", line 30, in push
    raise ValueError("metrics endpoint answered 502")
ValueError: metrics endpoint answered 502
step 3 loss 0.333
"""


def _lines(text: str) -> list[str]:
    return decode_tail(text.encode()).lines


def _crashed_rank_3(n: int = 4) -> object:
    dumps = world(n).all_reduce(steps=5).rank(3).stops_at(5).dumps()
    dumps.pop(3)
    return analyze_dumps(dumps, world_size=n)


def test_a_user_warning_is_no_signal_whatever_its_text_says() -> None:
    text = (
        "/app/train.py:15: UserWarning: CUDA out of memory on the first try, retrying with a smaller batch\n"
        "  warnings.warn(\n"
        "[rank1]:/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py:4631: UserWarning: "
        "Connection reset by peer while probing the store; retrying\n"
    )
    assert scan(_lines(text)) == []


def test_a_warning_raised_as_an_exception_is_no_cause() -> None:
    text = (
        'Traceback (most recent call last):\n  File "/app/t.py", line 3, in f\nDeprecationWarning: old API\n'
    )
    assert scan(_lines(text)) == []


def test_an_exception_followed_by_a_later_step_of_its_rank_went_on() -> None:
    lines = _lines(CAUGHT)
    [sig] = scan(lines)
    assert sig.exception == "ValueError" and sig.primary
    assert went_on(lines, sig, unprefixed=True) == "it went on to step 3 (line 8)"
    # an unprefixed line of a log of several ranks may be anyone's: it proves nothing about this rank
    assert went_on(lines, sig, unprefixed=False) == ""


def test_another_ranks_later_step_is_not_this_ranks_going_on() -> None:
    text = (
        "[rank2]:Traceback (most recent call last):\n"
        '[rank2]:  File "/app/train.py", line 7, in step\n'
        "[rank2]:AssertionError: loss is nan\n"
        "[rank0]:step 5 loss 0.1\n"
    )
    lines = _lines(text)
    [sig] = scan(lines)
    assert went_on(lines, sig, unprefixed=False) == ""
    assert went_on([*lines, "[rank2]:step 5 loss 0.1"], sig, unprefixed=False).startswith(
        "it went on to step 5"
    )


def test_the_crashed_ranks_exception_stays_its_cause_and_a_peers_handled_one_is_none() -> None:
    v = _crashed_rank_3()
    crash = (
        "Traceback (most recent call last):\n  File \"/app/train.py\", line 88, in step\nKeyError: 'shard'\n"
    )
    logs = [
        LogFile("rank1.log", (1,), decode_tail(CAUGHT.encode())),
        LogFile("rank3.log", (3,), decode_tail(crash.encode())),
    ]
    out = with_causes(v, Gathered(logs=logs), None, year=YEAR)  # type: ignore[arg-type]
    assert [(c.rank, c.kind, c.first) for c in out.causes] == [(3, CauseKind.exception, True)]
    assert out.headline == "rank 3 crashed: KeyError at train.py:88"
    assert (
        "rank 1's ValueError at metrics.py:30 (rank1.log, line 7): it went on to step 3 (line 8)."
        in out.summary
    )


def test_an_exception_of_a_container_that_exited_0_is_handled() -> None:
    v = _crashed_rank_3()
    m = Manifest(
        world_size=4,
        pods=[
            PodRecord(
                pod=f"p{r}", node=f"n{r}", ranks=[r], ended=[ContainerEnd(container="trainer", exit_code=0)]
            )
            if r == 1
            else PodRecord(pod=f"p{r}", node=f"n{r}", ranks=[r])
            for r in range(4)
        ],
    )
    caught = 'Traceback (most recent call last):\n  File "/app/io.py", line 3, in read\nValueError: bad row\n'
    log = LogFile("logs/p1/trainer.txt", (1,), decode_tail(caught.encode()), "p1", "trainer", "tail")
    out = with_causes(v, Gathered(logs=[log]), m, year=YEAR)  # type: ignore[arg-type]
    assert out.causes == [] and "its container exited 0" in out.summary
    assert out.culprit_ranks == [3] and "crashed first" not in out.headline


def test_once_the_log_names_the_exception_the_next_steps_no_longer_say_the_cause_cannot_be_seen() -> None:
    v = _crashed_rank_3()
    assert CRASH_UNSEEN in v.next_steps  # type: ignore[attr-defined]
    crash = (
        "Traceback (most recent call last):\n  File \"/app/train.py\", line 88, in step\nKeyError: 'shard'\n"
    )
    out = with_causes(
        v, Gathered(logs=[LogFile("rank3.log", (3,), decode_tail(crash.encode()))]), None, year=YEAR
    )  # type: ignore[arg-type]
    assert CRASH_UNSEEN not in out.next_steps and not any("cannot see why" in s for s in out.next_steps)
    assert out.next_steps[0] == (
        "Start at train.py:88: rank 3 raised KeyError: 'shard' there (rank3.log, line 3); the others only waited "
        "for it."
    )


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_an_exception_logged_before_the_ranks_own_later_collectives_did_not_stop_it() -> None:
    """Rank 1 logged a traceback 10 s before the last collective its own recorder holds (same wall clock, a
    zoned time): it went on. Rank 3, without a dump, raised after it: rank 3 is the one that failed first."""
    dumps = world(4).all_reduce(steps=5).rank(3).stops_at(5).dumps()
    dumps.pop(3)
    v = analyze_dumps(dumps, world_size=4)
    last = max(e["time_created_ns"] for e in dumps[1]["entries"])
    early = f"{_iso(last - 10_000_000_000)} "
    handled = "".join(early + line + "\n" for line in CAUGHT.splitlines()[2:7])
    at = _iso(last + 500_000_000)
    crash = (
        f"{at} Traceback (most recent call last):\n"
        f'{at}   File "/app/train.py", line 88, in step\n'
        f"{at} ValueError: corrupt sample\n"
    )
    logs = [
        LogFile("rank1.log", (1,), decode_tail(handled.encode())),
        LogFile("rank3.log", (3,), decode_tail(crash.encode())),
    ]
    recorded = {r: max(e["time_created_ns"] for e in d["entries"]) for r, d in dumps.items()}
    out = with_causes(v, Gathered(logs=logs), None, year=YEAR, recorded_ns=recorded)
    assert [(c.rank, c.first) for c in out.causes] == [(3, True)]
    assert out.headline.startswith("rank 3 crashed: ValueError at train.py:88")
    assert (
        "rank 1's ValueError at metrics.py:30 (rank1.log, line 5): its dump records collectives 10.0 s"
        in out.summary
    )
    # a time without its zone (glog's local time) is never compared with the recorder's epoch times
    local = handled.replace("Z ", " ")
    out = with_causes(v, Gathered(logs=[LogFile("rank1.log", (1,), decode_tail(local.encode()))]), None, year=YEAR,
                      recorded_ns=recorded)  # fmt: skip
    assert [(c.rank, c.kind) for c in out.causes] == [(1, CauseKind.exception)]
