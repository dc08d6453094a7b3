"""The agent's live sampler: compact summaries with the analyzer's signatures, and faults that stay with
their rank (one log line each, the other ranks sampled as before)."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from pathlib import Path

import pytest
from fake_worker import drip, fake_worker, fr_answer, handler_for, http, json_body, never_answers

from frwatch_operator.agent import live_sampler
from frwatch_operator.agent.live_sampler import LiveSampler, SamplerSettings, parse_rank_span
from frwatch_operator.agent.worker_client import ByteBudget

FAST = SamplerSettings(fr_timeout_s=1.0, stack_timeout_s=0.5, startup_grace_s=0.0, stack_retry_s=3600)
STACK = b'Thread 0x1 (most recent call first):\n  File "train.py", line 9 in load_batch\n'


def sock(d: Path, rank: int) -> Path:
    return d / f"rank-{rank}.sock"


def healthy(last: int) -> dict:
    return {"fr_trace_json": json_body(fr_answer(last)), "dump_traceback": lambda: http(200, STACK)}


def test_a_summary_holds_progress_and_the_analyzers_signatures(tmp_path: Path) -> None:
    with (
        fake_worker(sock(tmp_path, 0), handler_for(healthy(30))),
        fake_worker(
            sock(tmp_path, 1),
            handler_for({"fr_trace_json": json_body(fr_answer(30, {30: "gloo:broadcast"}))}),
        ),
    ):
        pod = LiveSampler(tmp_path, "pod-a", FAST).sample_once()
    r0, r1 = pod.ranks
    g0, g1 = r0.groups[0], r1.groups[0]
    assert (g0.name, g0.last_enqueued, g0.last_completed) == ("0", 30, 29)
    assert len(g0.tail) == 16 and g0.tail[-1].seq == 30 and g0.tail[-1].retired is False
    assert g0.tail[-2].sig == g1.tail[-2].sig  # same all_reduce, same signature across ranks
    assert g0.tail[-1].sig != g1.tail[-1].sig
    assert r1.signatures[g1.tail[-1].sig].op == "gloo:broadcast"
    assert len(pod.model_dump_json()) < 8000


def test_a_stack_is_asked_only_when_the_rank_made_no_progress(tmp_path: Path) -> None:
    last = [10]
    answers = {"fr_trace_json": lambda: http(200, json.dumps(fr_answer(last[0])).encode()),
               "dump_traceback": lambda: http(200, STACK)}  # fmt: skip
    with fake_worker(sock(tmp_path, 0), handler_for(answers)) as asked:
        sampler = LiveSampler(tmp_path, "pod-a", FAST)
        assert sampler.sample_once().ranks[0].stack is None  # first sample: nothing to compare with
        last[0] = 12
        assert sampler.sample_once().ranks[0].stack is None  # moved
        stuck = sampler.sample_once().ranks[0]  # did not move: where is it?
    assert "load_batch" in (stuck.stack or "")
    assert asked.count("dump_traceback") == 1


def test_a_round_asks_every_rank_at_the_same_moment(tmp_path: Path) -> None:
    """One burst a round: each stand-in answers only once all four ranks have asked (fr_trace_json), then
    again for their stacks (the ring did not move). A sampler reading ranks one after another never gets
    past the first: its call waits for asks that never come (the barrier breaks, the rank errs)."""
    ranks = 4
    gates = {name: threading.Barrier(ranks, timeout=60) for name in ("fr_trace_json", "dump_traceback")}

    def respond(name: str, conn: socket.socket) -> None:
        gates[name].wait()
        conn.sendall(json_body(fr_answer(30))() if name == "fr_trace_json" else http(200, STACK))

    settings = SamplerSettings(fr_timeout_s=90, stack_timeout_s=90, startup_grace_s=0.0, stack_retry_s=3600)
    with contextlib.ExitStack() as stack:
        for r in range(ranks):
            stack.enter_context(fake_worker(sock(tmp_path, r), respond))
        sampler = LiveSampler(tmp_path, "pod-a", settings)
        first = sampler.sample_once().ranks
        second = sampler.sample_once().ranks  # no progress: every stack asked, again together
    assert [r.error for r in first] == [None] * ranks
    assert [r.groups[0].last_enqueued for r in first] == [30] * ranks
    assert all("load_batch" in (r.stack or "") for r in second)


def test_a_warm_summarizer_keeps_every_signature_across_rounds(tmp_path: Path) -> None:
    """The sampler keeps one Summarizer across rounds (it emits a signature's detail once): each round's
    summary still carries what every signature of its tails stands for."""
    last = [20]
    ops = {18: "gloo:broadcast", 25: "gloo:reduce_scatter"}
    answers = {"fr_trace_json": lambda: http(200, json.dumps(fr_answer(last[0], ops)).encode()),
               "dump_traceback": lambda: http(200, STACK)}  # fmt: skip
    with fake_worker(sock(tmp_path, 0), handler_for(answers)):
        sampler = LiveSampler(tmp_path, "pod-a", FAST)
        rounds = []
        for upto in (20, 20, 26, 30):
            last[0] = upto
            rounds.append(sampler.sample_once().ranks[0])
    for r in rounds:
        tail_sigs = {e.sig for g in r.groups for e in g.tail}
        assert tail_sigs == set(r.signatures)
    assert rounds[0] == rounds[1].model_copy(update={"sampled_ns": rounds[0].sampled_ns, "stack": None})
    assert {s.op for s in rounds[3].signatures.values()} == {
        "gloo:all_reduce",
        "gloo:broadcast",
        "gloo:reduce_scatter",
    }


def padded(last: int, pad: int) -> bytes:
    """A healthy answer of about ``pad`` bytes (torch's answers of a full ring are 940 KB)."""
    return json.dumps({**fr_answer(last), "pad": "x" * pad}).encode()


@pytest.mark.parametrize("fit", [2, 0])
def test_a_round_holds_at_most_its_byte_budget(tmp_path: Path, fit: int) -> None:
    """Four ranks answer 200 KB each; the round may hold ``fit`` of them at once (0: less than one, so each
    is read alone). Every rank is still read, and the answers held at once never pass the budget."""
    body = padded(30, 200_000)
    budget = fit * len(body) + len(body) // 2 if fit else len(body) // 2
    settings = SamplerSettings(fr_timeout_s=60, startup_grace_s=0.0, stack_retry_s=3600, round_bytes=budget)
    with contextlib.ExitStack() as stack:
        for r in range(4):
            stack.enter_context(
                fake_worker(sock(tmp_path, r), handler_for({"fr_trace_json": lambda: http(200, body)}))
            )
        sampler = LiveSampler(tmp_path, "pod-a", settings)
        pod = sampler.sample_once()
    assert [(r.rank, r.error, r.groups[0].last_enqueued) for r in pod.ranks] == [
        (r, None, 30) for r in range(4)
    ]
    assert sampler.round_peak_bytes <= max(budget, len(body))
    assert sampler.round_peak_bytes >= len(body)


def test_the_byte_budget_waits_within_the_deadline() -> None:
    budget = ByteBudget(100)
    assert budget.take(80, time.monotonic() + 5)
    assert not budget.take(30, time.monotonic() + 0.05)  # 110 > 100 while 80 are held: waits, then gives up
    freed = threading.Timer(0.05, budget.give, args=(80,))
    freed.start()
    assert budget.take(30, time.monotonic() + 60)  # taken once the 80 are given back
    freed.join()
    assert (budget.held, budget.peak) == (30, 80)
    budget.give(30)
    assert budget.take(500, time.monotonic())  # more than the whole budget: taken when nothing else is held


def test_an_answer_the_summariser_fails_on_stays_with_its_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = live_sampler.summarize_live

    def flaky(answer: bytes, rank: int, *args: object, **kw: object) -> object:
        if rank == 1:
            raise RuntimeError("a summariser bug")
        return real(answer, rank, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(live_sampler, "summarize_live", flaky)
    with (
        fake_worker(sock(tmp_path, 0), handler_for(healthy(30))),
        fake_worker(sock(tmp_path, 1), handler_for(healthy(30))),
    ):
        sampler = LiveSampler(tmp_path, "pod-a", FAST)
        r0, r1 = sampler.sample_once().ranks
        monkeypatch.setattr(live_sampler, "summarize_live", real)
        again = sampler.sample_once().ranks
    assert r0.error is None and r0.groups[0].last_enqueued == 30
    assert r1.error is not None and "RuntimeError" in r1.error and not r1.groups
    assert [r.error for r in again] == [None, None]
    assert "rank 1: its answer could not be summarised" in caplog.text


def test_faults_stay_with_their_rank_and_are_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock(tmp_path, 4)))  # a killed rank's socket: connect is refused
    dead.close()
    huge = lambda: b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n"  # noqa: E731
    settings = SamplerSettings(
        fr_timeout_s=1.0, stack_timeout_s=0.5, startup_grace_s=0.0, max_fr_bytes=1 << 20
    )
    with (
        fake_worker(sock(tmp_path, 0), handler_for(healthy(20))),
        fake_worker(sock(tmp_path, 1), handler_for({"fr_trace_json": lambda: b"SSH-2.0-OpenSSH\r\n\r\n"})),
        fake_worker(sock(tmp_path, 2), never_answers(release)),
        fake_worker(sock(tmp_path, 3), handler_for({"fr_trace_json": huge})),
        fake_worker(sock(tmp_path, 5), drip),
        fake_worker(
            sock(tmp_path, 6),
            handler_for({"fr_trace_json": lambda: http(200, b'{"version": "2.10", "entries": 7}')}),
        ),
    ):
        sampler = LiveSampler(tmp_path, "pod-a", settings, expected=frozenset({0, 1, 2, 3, 4, 5, 6, 7}))
        with caplog.at_level(logging.INFO, logger="frwatch.agent.live"):
            for _ in range(3):
                pod = sampler.sample_once()
        release.set()
    by_rank = {r.rank: r for r in pod.ranks}
    assert by_rank[0].error is None and by_rank[0].groups[0].last_enqueued == 20
    assert "not an HTTP answer" in (by_rank[1].error or "")
    assert "before the deadline" in (by_rank[2].error or "")
    assert "above the 1048576 allowed" in (by_rank[3].error or "")
    assert "refused" in (by_rank[4].error or "")
    assert "before the deadline" in (by_rank[5].error or "")
    assert "not a Flight Recorder answer" in (by_rank[6].error or "")
    assert "no socket after" in (by_rank[7].error or "")
    lines = [r.getMessage() for r in caplog.records]
    for rank in range(1, 8):
        assert sum(f"rank {rank}:" in line for line in lines) == 1, (rank, lines)
    assert not any("rank 0:" in line for line in lines)


def test_a_stack_that_times_out_is_not_asked_again_until_the_rank_moves(tmp_path: Path) -> None:
    """A GIL holder: fr_trace_json answers, dump_traceback waits. One pending request at most."""
    release = threading.Event()
    last = [10]

    def respond(name: str, conn: socket.socket) -> None:
        if name == "dump_traceback":
            release.wait(60)
            return
        conn.sendall(http(200, json.dumps(fr_answer(last[0])).encode()))

    with fake_worker(sock(tmp_path, 0), respond) as asked:
        sampler = LiveSampler(tmp_path, "pod-a", FAST)
        sampler.sample_once()
        first = sampler.sample_once().ranks[0]
        sampler.sample_once()
        sampler.sample_once()
        assert asked.count("dump_traceback") == 1
        last[0] = 11
        sampler.sample_once()
        sampler.sample_once()
        release.set()
    assert "holds the GIL" in (first.stack_error or "")
    assert asked.count("dump_traceback") == 2


def test_the_rank_span_is_parsed_strictly() -> None:
    assert parse_rank_span("8-11") == frozenset({8, 9, 10, 11})
    for bad in ("", "11-8", "08-9", "0-5000", "a-b", "3", "-1-2", "0-99999999"):
        assert parse_rank_span(bad) == frozenset(), bad


def test_a_gil_holder_is_said_once_and_keeps_its_reason_until_it_moves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """While its dump_traceback is pending the rank's summary keeps saying why (the operator's finding needs
    it) and the log says it once, not every round, and never "answers again" until the rank answers a stack."""
    release = threading.Event()
    last = [10]

    def respond(name: str, conn: socket.socket) -> None:
        if name == "dump_traceback" and not release.is_set():
            release.wait(60)
            return
        conn.sendall(
            http(200, STACK)
            if name == "dump_traceback"
            else http(200, json.dumps(fr_answer(last[0])).encode())
        )

    with fake_worker(sock(tmp_path, 0), respond) as asked:
        sampler = LiveSampler(tmp_path, "pod-a", FAST)
        with caplog.at_level(logging.INFO, logger="frwatch.agent.live"):
            sampler.sample_once()
            held = [sampler.sample_once().ranks[0] for _ in range(5)]
            release.set()
            last[0] = 11
            sampler.sample_once()  # moved: the pending stack is forgotten
            back = sampler.sample_once().ranks[0]  # no progress again: asked, and answered
    assert all("holds the GIL" in (r.stack_error or "") for r in held), [r.stack_error for r in held]
    assert asked.count("dump_traceback") == 2
    assert back.stack_error is None and "load_batch" in (back.stack or "")
    lines = [r.getMessage() for r in caplog.records]
    assert sum("holds the GIL" in line for line in lines) == 1, lines
    assert sum("answers again" in line for line in lines) == 1, lines
