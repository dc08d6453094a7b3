"""The agent as a real process facing hostile input: links and impossible ranks in its folder, bad control
requests, an attempt that would escape its prefix. Each is refused with a reason; nothing is uploaded
that should not be, and nothing crashes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from frwatch_dev.dumps import pickle_bytes, world
from frwatch_dev.testing.agent_process import TOKEN
from frwatch_dev.testing.polling import wait_for
from frwatch_operator import constants as c
from frwatch_operator.store.s3 import S3Store

P = c.DUMP_FILE_PREFIX


@pytest.mark.slow
def test_links_and_impossible_ranks_are_never_uploaded_and_are_reported(start_agent, s3, tmp_path: Path):
    agent = start_agent()
    store = S3Store(s3.settings())
    token_file = tmp_path / "token"  # what the issue saw uploaded as a rank's dump
    token_file.write_text("the agent's credentials")
    dump = pickle_bytes(world(2).all_reduce(steps=3).dumps()[1])
    (agent.dump_dir / f"{P}0").symlink_to(token_file)
    (agent.dump_dir / f"{P}{'1' * 23}").write_bytes(dump)
    os.mkfifo(agent.dump_dir / f"{P}2")
    (agent.dump_dir / f"{P}1").write_bytes(dump)
    wait_for(lambda: store.exists(f"{agent.root}/ranks/1.pickle"), 30, "the good dump")
    record = wait_for(
        lambda: (r := json.loads(store.get(f"{agent.root}/pods/llama-worker-0.json")))["skipped"] and r,
        30,
        "the skipped names in the pod record",
    )
    why = {s["name"]: s["why"] for s in record["skipped"]}
    assert why[f"{P}0"] == "a symbolic link (never followed)"
    assert why[f"{P}2"] == "a FIFO"
    assert why[f"{P}{'1' * 23}"].startswith("rank number 111") and "beyond the limit" in why[f"{P}{'1' * 23}"]
    assert store.list(f"{agent.root}/ranks/") == [f"{agent.root}/ranks/1.pickle"]
    status, body = agent.request("GET", "/status", TOKEN)
    assert status == 200 and {s["name"] for s in body["skipped"]} == set(why)
    log = agent.log.read_text()
    assert f"skipped {P}0: a symbolic link" in log
    assert agent.stop() == 0


def test_bad_control_requests_get_a_4xx_with_the_reason_never_a_500(start_agent):
    agent = start_agent()
    cases: list[tuple[bytes, int, str]] = [
        (b"[" * 100_000 + b"]" * 100_000, 413, ""),  # 200 KB: refused before it is read whole
        (b'{"ranks": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", 400, "ranks"),  # deep, under the size bound
        (b"[" * 8_000 + b"]" * 8_000, 400, ""),  # nested deeper than the decoder goes
        (b'{"ranks": [Infinity]}', 400, "Infinity"),
        (b'{"ranks": [NaN]}', 400, "NaN"),
        (b'{"ranks": [1e400]}', 400, "ranks"),
        (b'{"ranks": [1.5]}', 400, "ranks"),
        (b'{"ranks": [true]}', 400, "ranks"),
        (b'{"ranks": [-1]}', 400, "ranks"),
        (b'{"ranks": [' + b"9" * 4000 + b"]}", 400, ""),  # an integer too long to convert, or too large
        (b'{"ranks": "0"}', 400, "ranks"),
        (b'{"ranks": [0], "then": "x"}', 400, "unknown field"),
        (b"\xff\xfe", 400, ""),
        (b"not json", 400, "not JSON"),
    ]
    for body, code, said in cases:
        status, text = agent.request("POST", "/dump", TOKEN, raw=body)
        assert status == code, (body[:40], status, text)
        assert said in str(text), (body[:40], text)
    # the call's MAC covers its body: a body past the bound is refused before it is read whole, auth or not;
    # one within it is read (at most MAX_BODY_BYTES) and refused with a wrong signature, never parsed
    assert agent.request("POST", "/dump", "wrong", raw=b"[" * 100_000)[0] == 413
    assert agent.request("POST", "/dump", "wrong", raw=b"not json")[0] == 401
    status, body = agent.request("POST", "/dump", TOKEN, body={"ranks": [0]})
    assert status == 200 and body == {"asked": [], "failed": {"0": "no pipe file for this rank in this pod"}}
    assert agent.request("GET", "/healthz")[0] == 200
    assert "Traceback" not in agent.log.read_text()
    assert agent.stop() == 0


@pytest.mark.parametrize("attempt", ["..", "../other-job", "a/b", "", " 0"])
def test_an_attempt_that_is_no_key_segment_stops_the_agent_with_the_reason(attempt: str, tmp_path: Path):
    """frwatch.io/attempt goes into object keys: '..' or '/' would escape the attempt's prefix (or fail
    every upload, retried forever). The agent refuses to start and says which variable is wrong."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("FRWATCH_")},
        "FRWATCH_POD_NAME": "p", "FRWATCH_POD_NAMESPACE": "team", "FRWATCH_JOB_NAME": "llama",
        "FRWATCH_JOB_UID": "u-1", "FRWATCH_JOB_ATTEMPT": attempt, "FRWATCH_FR_DUMP_DIR": str(tmp_path),
    }  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "frwatch_operator.cli", "agent"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert c.ENV_JOB_ATTEMPT in proc.stderr
