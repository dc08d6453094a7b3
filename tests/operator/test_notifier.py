"""The notifier against local receivers: one that answers, one that refuses, one that hangs, one that says
no, one that fails then answers; and the handler side's rules (what is due, what the message says)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from frwatch_dev.testing.notice_receiver import NoticeReceiver
from frwatch_operator.verdict.notice import NOTIFIED_ANNOTATION, TEXT_MAX, Notice, due, notice_of
from frwatch_operator.verdict.notifier import Notifier, SendPolicy

NOW = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


def incident(**status: object) -> dict[str, object]:
    return {
        "metadata": {"name": "job-a-1", "namespace": "team-a", "uid": "u-1", "annotations": {}},
        "spec": {"jobRef": {"kind": "PyTorchJob", "name": "job-a"}, "attempt": "1"},
        "status": {
            "phase": "Reported", "analyzedAt": "2026-11-28T02:59:00Z", "category": "rank_desync",
            "verdict": {"short": "rank 1 skipped all_reduce #7 of pg 0", "reportUrl": "s3://b/p/report.txt"},
            **status,
        },
    }  # fmt: skip


class Outcomes:
    def __init__(self) -> None:
        self.done: list[tuple[str, str]] = []
        self.counted: list[str] = []
        self.event = threading.Event()

    def record(self, notice: Notice, outcome: str) -> None:
        self.done.append((notice.incident_uid, outcome))
        self.event.set()

    def wait(self, seconds: float = 10.0) -> list[tuple[str, str]]:
        assert self.event.wait(seconds), "the notice was never finished"
        return self.done


FAST = SendPolicy(attempts=3, timeout_seconds=0.5, pause_seconds=0.05, queue_size=2)


@pytest.fixture
def outcomes() -> Iterator[Outcomes]:
    yield Outcomes()


def test_a_reported_incident_is_sent_once_as_slack_json(outcomes: Outcomes) -> None:
    receiver = NoticeReceiver((200,))
    notifier = Notifier(receiver.url, FAST, outcomes.record, outcomes.counted.append)
    try:
        notice = notice_of(incident())
        assert notifier.offer(notice)
        assert not notifier.offer(notice) or outcomes.event.is_set()  # queued twice: sent once
        assert outcomes.wait() == [("u-1", "sent")]
        time.sleep(0.2)
        assert not notifier.offer(notice)  # a late watch event from before the Incident was marked
        time.sleep(0.2)
        assert len(receiver.bodies) == 1
        text = str(receiver.bodies[0]["text"])
        assert "PyTorchJob team-a/job-a (attempt 1)" in text
        assert "rank 1 skipped all_reduce #7 of pg 0" in text and "[rank_desync]" in text
        assert "s3://b/p/report.txt" in text and "team-a/job-a-1" in text
        assert outcomes.counted == ["sent"]
    finally:
        notifier.close()
        receiver.close()


def test_a_receiver_that_fails_then_answers_gets_it_on_a_later_try(outcomes: Outcomes) -> None:
    receiver = NoticeReceiver((503, 429, 200))
    notifier = Notifier(receiver.url, FAST, outcomes.record)
    try:
        notifier.offer(notice_of(incident()))
        assert outcomes.wait() == [("u-1", "sent")]
        assert len(receiver.bodies) == 3
    finally:
        notifier.close()
        receiver.close()


def test_a_receiver_that_says_no_is_not_asked_again_and_the_url_is_not_in_the_outcome(outcomes: Outcomes) -> None:
    receiver = NoticeReceiver((403,))
    notifier = Notifier(receiver.url, FAST, outcomes.record, outcomes.counted.append)
    try:
        notifier.offer(notice_of(incident()))
        [(_, outcome)] = outcomes.wait()
        assert outcome == "failed: HTTP 403 from 127.0.0.1" and "SECRET" not in outcome
        assert len(receiver.bodies) == 1 and outcomes.counted == ["failed"]
    finally:
        notifier.close()
        receiver.close()


def test_a_refusing_receiver_costs_bounded_tries(outcomes: Outcomes) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    notifier = Notifier(f"http://127.0.0.1:{port}/x", FAST, outcomes.record)
    try:
        started = time.monotonic()
        notifier.offer(notice_of(incident()))
        [(_, outcome)] = outcomes.wait()
        assert outcome.startswith("failed: ") and "127.0.0.1" in outcome
        assert time.monotonic() - started < 5
    finally:
        notifier.close()


def test_a_hanging_receiver_never_blocks_the_caller_and_each_try_has_a_deadline(outcomes: Outcomes) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # accepts connections (the kernel does), never answers
    policy = SendPolicy(attempts=2, timeout_seconds=0.4, pause_seconds=0.05, queue_size=2)
    notifier = Notifier(f"http://127.0.0.1:{listener.getsockname()[1]}/x", policy, outcomes.record, outcomes.counted.append)
    try:
        started = time.monotonic()
        for uid in ("a", "b", "c", "d"):  # the worker holds one, the queue two: the fourth is dropped
            notifier.offer(Notice(uid, "team-a", uid, "text"))
        assert time.monotonic() - started < 0.2  # offering never waits for the receiver
        assert "dropped" in outcomes.counted
        [(uid, outcome)] = outcomes.wait()  # the first: two tries of 0.4 s each, then given up
        assert uid == "a" and outcome.startswith("failed: ")
        assert 0.7 < time.monotonic() - started < 4
    finally:
        notifier.close(wait_seconds=2)
        listener.close()


def test_only_recent_reported_unannounced_incidents_are_due() -> None:
    assert due(incident(), NOW, 3600)
    assert not due(incident(phase="Analyzing"), NOW, 3600)
    assert not due(incident(verdict=None), NOW, 3600)
    assert not due(incident(analyzedAt=(NOW - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")), NOW, 3600)
    assert not due(incident(analyzedAt=""), NOW, 3600)
    announced = incident()
    announced["metadata"]["annotations"] = {NOTIFIED_ANNOTATION: "sent"}  # type: ignore[index]
    assert not due(announced, NOW, 3600)


def test_the_message_is_bounded_and_free_of_control_characters() -> None:
    body = incident()
    body["status"]["verdict"]["short"] = "x\n\x1b[31m" + "y" * 5000  # type: ignore[index]
    text = notice_of(body).text
    assert len(text) <= TEXT_MAX and "\n" not in text and "\x1b" not in text
    assert json.loads(notice_of(body).body())["text"] == text


def test_markup_the_tenant_wrote_pings_nobody_and_links_nowhere() -> None:
    body = incident()
    body["status"]["verdict"]["short"] = "<!channel> see <https://evil.example|the fix> @here & @all"  # type: ignore[index]
    text = notice_of(body).text
    assert "<" not in text and ">" not in text and "&lt;!channel&gt;" in text
    assert "@here" not in text and "@all" not in text and "@\u200bhere" in text
    assert "&amp;" in text and len(text) <= TEXT_MAX


def test_only_http_urls_are_taken() -> None:
    with pytest.raises(ValueError, match="http"):
        Notifier("file:///etc/passwd", FAST, lambda n, o: None)
