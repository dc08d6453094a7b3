"""The background step loop the leader election and the live shards share (``frwatch_operator.repeating``):
it steps until stopped, a stop wakes its wait and waits for the step under way, and stop is safe anytime."""

from __future__ import annotations

import threading

from frwatch_operator.repeating import Repeating


def test_it_steps_again_and_again_until_stopped_then_never_again() -> None:
    steps: list[int] = []
    three = threading.Event()

    def step() -> None:
        steps.append(len(steps))
        if len(steps) == 3:
            three.set()

    r = Repeating(step, 0.01, "test-repeating")
    r.start()
    assert three.wait(60), "three steps never came"
    r.stop()
    assert r._thread is not None and not r._thread.is_alive()
    after = len(steps)
    r.stop()  # twice is fine
    assert len(steps) == after >= 3


def test_stop_wakes_a_long_wait_and_waits_for_the_step_under_way() -> None:
    started, release, ended = threading.Event(), threading.Event(), threading.Event()
    calls: list[None] = []

    def step() -> None:
        calls.append(None)
        started.set()
        assert release.wait(60)
        ended.set()

    r = Repeating(step, 3600.0, "test-repeating")  # the wait after the first step is an hour
    r.start()
    assert started.wait(60)
    stopper = threading.Thread(target=r.stop)
    stopper.start()
    release.set()
    stopper.join(120)
    # stop returned only after the step ended, and woke the hour's wait instead of sitting it out
    assert not stopper.is_alive() and ended.is_set()
    assert r._thread is not None and not r._thread.is_alive()
    assert len(calls) == 1


def test_stop_before_start_is_a_no_op() -> None:
    r = Repeating(lambda: None, 1.0, "test-repeating")
    r.stop()
    assert r._thread is None
