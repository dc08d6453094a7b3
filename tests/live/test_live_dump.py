"""The agent's live dump (policy dumpAndAnalyze): each running rank's live buffer written as its dump, with its
stack; a rank that cannot be dumped is named, the others are dumped; the real agent uploads them."""

from __future__ import annotations

import json
import time
from pathlib import Path

from fake_worker import fake_worker, fr_answer, handler_for, http, json_body

from frwatch_analyzers.decode.safe_load import decode
from frwatch_dev.testing.agent_process import TOKEN, start_agent
from frwatch_operator import constants as c
from frwatch_operator.agent.live_dump import KnownStack, dump_live
from frwatch_operator.store.s3 import S3Store

STACK = b'Thread 0x1 (most recent call first):\n  File "train.py", line 9 in step\n'
WAIT_S = 60.0


def stack_body() -> bytes:
    return http(200, STACK)


def test_each_rank_is_dumped_from_its_live_buffer_with_its_stack(tmp_path: Path) -> None:
    live, dumps = tmp_path / "live", tmp_path / "dumps"
    live.mkdir(), dumps.mkdir()
    good = handler_for({"fr_trace_json": json_body(fr_answer(12)), "dump_traceback": stack_body})
    garbage = handler_for({"fr_trace_json": lambda: http(200, b"<html>")})
    early = handler_for({"fr_trace_json": json_body({"version": "2.10", "pg_status": {}})})
    with (
        fake_worker(live / "rank-0.sock", good) as asked0,
        fake_worker(live / "rank-1.sock", good) as asked1,
        fake_worker(live / "rank-2.sock", garbage),
        fake_worker(live / "rank-3.sock", early),
    ):
        sockets = {r: live / f"rank-{r}.sock" for r in range(4)}
        known = {0: KnownStack(), 1: KnownStack(pending=True)}
        dumped, failed = dump_live(
            sockets, [0, 1, 2, 3, 5], dumps, "trace_", lambda r: known.get(r, KnownStack())
        )
    assert dumped == [0, 1]
    assert "fr_trace_json" in failed["2"] and "no Flight Recorder ring" in failed["3"]
    assert "no live socket" in failed["5"]
    assert asked0 == ["fr_trace_json", "dump_traceback"]
    assert asked1 == [
        "fr_trace_json"
    ]  # the sampler's dump_traceback may still wait for the GIL: not asked again
    assert sorted(p.name for p in dumps.iterdir()) == ["trace_0", "trace_1"]  # no temporary file left
    dump, fmt = decode((dumps / "trace_0").read_bytes())  # what the analyzer reads
    assert fmt == "json" and len(dump["entries"]) == len(fr_answer(12)["entries"])
    assert 'File "train.py", line 9 in step' in dump["frwatch_live"]["stack"]
    other, _ = decode((dumps / "trace_1").read_bytes())
    assert other["frwatch_live"]["stack"] is None and "GIL" in other["frwatch_live"]["stack_error"]


def test_the_real_agent_uploads_the_live_dumps(s3, tmp_path: Path) -> None:
    agent = start_agent(
        tmp_path, s3.env(), FRWATCH_AGENT_LIVE="true", FRWATCH_AGENT_LIVE_PERIOD_SECONDS="0.3"
    )
    try:
        live = agent.dump_dir / c.LIVE_SOCKET_SUBDIR
        assert agent.request("POST", "/live-dump", body={"ranks": [3]})[0] == 401
        good = handler_for({"fr_trace_json": json_body(fr_answer(12)), "dump_traceback": stack_body})
        with fake_worker(live / "rank-3.sock", good):
            status, body = agent.request("POST", "/live-dump", TOKEN, body={"ranks": [3]})
            assert status == 200 and body == {"asked": [3], "failed": {}}, body
            store = S3Store(s3.settings())
            key = f"{agent.root}/ranks/3.json"
            deadline = time.monotonic() + WAIT_S
            while not store.exists(key):  # the uploader's own pace: waited on, with a generous bound
                assert time.monotonic() < deadline, f"nothing uploaded: {agent.log.read_text()[-2000:]}"
                time.sleep(0.2)
        stored = json.loads(store.get(key))
        assert (
            stored["frwatch_live"]["source"] == "fr_trace_json"
            and "train.py" in stored["frwatch_live"]["stack"]
        )
        assert len(stored["entries"]) == len(fr_answer(12)["entries"])
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()


def test_live_dump_is_off_unless_live_watch_is(s3, tmp_path: Path) -> None:
    agent = start_agent(tmp_path, s3.env())
    try:
        assert agent.request("POST", "/live-dump", TOKEN, body={})[0] == 404
    finally:
        agent.stop()
