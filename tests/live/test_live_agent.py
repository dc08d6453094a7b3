"""The real agent process with live watch on: it places the bootstrap in the dump volume, samples the
rank sockets there and serves the latest summaries on GET /live (with the control token)."""

from __future__ import annotations

import time
from pathlib import Path

from fake_worker import fake_worker, fr_answer, handler_for, json_body

from frwatch_dev.testing.agent_process import TOKEN, start_agent
from frwatch_operator import constants as c

WAIT_S = 60.0


def test_the_agent_places_the_bootstrap_and_serves_live_summaries(s3, tmp_path: Path) -> None:
    agent = start_agent(
        tmp_path, s3.env(), FRWATCH_AGENT_LIVE="true", FRWATCH_AGENT_LIVE_PERIOD_SECONDS="0.3"
    )
    try:
        code = agent.dump_dir / c.LIVE_BOOTSTRAP_SUBDIR
        live = agent.dump_dir / c.LIVE_SOCKET_SUBDIR
        assert (code / "sitecustomize.py").is_file() and (code / "frwatch_live_boot.py").is_file()
        assert agent.request("GET", "/live")[0] == 401
        with fake_worker(live / "rank-3.sock", handler_for({"fr_trace_json": json_body(fr_answer(12))})):
            deadline = time.monotonic() + WAIT_S
            while True:
                status, body = agent.request("GET", "/live", TOKEN)
                assert status == 200
                if body["ranks"]:
                    break
                assert time.monotonic() < deadline, "no rank sampled"
                time.sleep(0.2)
        (rank,) = body["ranks"]
        assert body["schema"] == "frwatch.live/v1" and body["pod"] == "llama-worker-0"
        assert rank["rank"] == 3 and rank["groups"][0]["last_enqueued"] == 12
        assert agent.stop() == 0
        assert sorted(p.name for p in agent.dump_dir.iterdir()) == sorted(
            [c.LIVE_BOOTSTRAP_SUBDIR, c.LIVE_SOCKET_SUBDIR]
        )
        assert "dump folder: skipped" not in agent.log.read_text()  # the watcher ignores live watch's folders
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()


def test_live_is_off_unless_asked(s3, tmp_path: Path) -> None:
    agent = start_agent(tmp_path, s3.env())
    try:
        assert agent.request("GET", "/live", TOKEN)[0] == 404
        assert not (agent.dump_dir / c.LIVE_BOOTSTRAP_SUBDIR).exists()
    finally:
        agent.stop()
