"""Real torch gloo ranks (4 processes, torch 2.13 CPU) whose stdout/stderr are captured to files next to their
dumps, as ``frwatch analyze DIR`` gets them: the verdict names the exception, its message and line and the
rank that failed first; on the size fault, the receiver's abort names the oversize send."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.report.terminal import render
from frwatch_analyzers.verdict import Category, CauseKind, Verdict
from realdumps import RealDumps

pytestmark = pytest.mark.slow


def _with_logs(real_dumps: RealDumps, scenario: str, out: Path) -> Verdict:
    """The scenario's dumps copied to ``out`` with each rank's captured output as ``rank<R>.log``."""
    result = real_dumps.run(scenario)
    shutil.copytree(result.dump_dir, out)
    for r in result.ranks:
        (out / f"rank{r.rank}.log").write_text(r.log)
    return analyze(str(out), world_size=4)


def test_a_rank_that_raises_mid_step_is_named_with_its_exception_message_and_line(
    real_dumps: RealDumps, tmp_path: Path
) -> None:
    v = _with_logs(real_dumps, "crash", tmp_path / "crash")
    culprit = 2  # scenarios.DEFAULTS: the crash scenario's culprit
    assert v.category == Category.missing_rank and v.missing_dumps == [culprit]
    first = v.causes[0]
    assert (first.rank, first.kind, first.first, first.exception) == (
        culprit,
        CauseKind.exception,
        True,
        "ValueError",
    )
    assert first.message == f"ValueError: corrupt sample in shard {culprit} at step 3: cannot decode record"
    assert first.location.startswith("faulty_training.py:") and first.step == 3
    assert v.headline.startswith(f"rank {culprit} crashed first: ValueError at {first.location} (step 3)")
    assert v.headline.endswith("then ranks 0-1,3 only lost their peer")
    assert {c.rank for c in v.causes if c.kind == CauseKind.peer_lost} == {0, 1, 3}
    report = render(v)
    assert f"rank{culprit}.log" in report and "ValueError: corrupt sample" in report


def test_the_gloo_size_abort_of_the_receiver_names_the_oversize_send(
    real_dumps: RealDumps, tmp_path: Path
) -> None:
    v = _with_logs(real_dumps, "size", tmp_path / "size")
    assert v.category == Category.size_mismatch and v.culprit_ranks == [1]  # Flight Recorder's finding stays
    [receiver] = v.missing_dumps
    abort = v.causes[0]
    assert (abort.rank, abort.kind, abort.exception) == (
        receiver,
        CauseKind.gloo_abort,
        "gloo::EnforceNotMet",
    )
    assert "bytes where" in abort.message and "were expected (a peer sent a larger tensor" in abort.message
    sent, expected = (
        int(x) for x in abort.message.split("received ", 1)[1].split(" were")[0].split(" bytes where ")
    )
    assert sent > expected  # the sender's oversize send, as the receiver saw it
    assert f"rank {receiver} aborted" in v.summary and v.headline.startswith("size mismatch in all_reduce at collective #")
