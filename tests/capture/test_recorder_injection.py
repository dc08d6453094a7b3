"""Injection and collection for every recorder (issue 28 item 3): torch's renamed variables follow the job's
torch (no deprecation warning where the version is known), torchcomms' own variables are set beside them,
through the real webhook HTTP path; the agent collects torchcomms' files (static and dynamic names) and
several files of one rank. torchcomms cannot run here: its file names are those its source writes
(frwatch_operator.capture.recorder_env cites the lines); the dump contents are fabricated from its source."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from builders import env_of, job, pod

from frwatch_dev.dumps import json_bytes, pickle_bytes, world
from frwatch_dev.dumps.recorders import as_recorder
from frwatch_dev.testing.admission import review
from frwatch_dev.testing.webhook_thread import KEYS, WebhookThread, webhook_config
from frwatch_operator import constants as c
from frwatch_operator.agent.dumpfiles import DumpWatcher
from frwatch_operator.capture import recorder_env as tc
from frwatch_operator.webhook import JobIndex

OLD = {c.ENV_FR_BUFFER_SIZE_OLD, c.ENV_FR_DUMP_TEMP_FILE_OLD}
NEW = {c.ENV_FR_BUFFER_SIZE, c.ENV_FR_DUMP_TEMP_FILE}


@pytest.fixture
def server():
    idx = JobIndex()
    idx.upsert_job(job("j215", annotations={c.ANN_TORCH_VERSION: "2.15.0"}))
    idx.upsert_job(job("j25", annotations={c.ANN_TORCH_VERSION: "2.5"}))
    idx.upsert_job(job("jany"))
    with WebhookThread(idx, webhook_config(), KEYS) as srv:
        yield srv


def _inject(server: WebhookThread, p: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    req = review(p)
    resp = server.post(req)["response"]
    patch = json.loads(base64.b64decode(resp["patch"]))
    out = jsonpatch.apply_patch(copy.deepcopy(req["request"]["object"]), patch)
    return env_of(out["spec"]["containers"][0]), resp.get("warnings", [])


@pytest.mark.parametrize(
    ("job_name", "torch_new", "torch_old"),
    [("j215", True, False), ("j25", False, True), ("jany", True, True)],
)
def test_each_torch_gets_the_names_it_reads_and_torchcomms_its_own(server, job_name, torch_new, torch_old):
    env, warnings = _inject(server, pod(job_name))
    assert bool(env.keys() >= NEW) is torch_new and bool(OLD & env.keys()) is torch_old
    dump_dir = webhook_config().fr.dump_dir
    assert env[tc.ENV_TC_BUFFER_SIZE] == env.get(c.ENV_FR_BUFFER_SIZE, env.get(c.ENV_FR_BUFFER_SIZE_OLD))
    assert env[tc.ENV_TC_DUMP_TEMP_FILE] == f"{dump_dir.rstrip('/')}/{tc.TC_FILE_PREFIX}"
    # torchcomms' prefix is not torch's: a rank's two recorders never write one file
    assert env[tc.ENV_TC_DUMP_TEMP_FILE] != env.get(
        c.ENV_FR_DUMP_TEMP_FILE, env.get(c.ENV_FR_DUMP_TEMP_FILE_OLD)
    )
    assert env[tc.ENV_TC_DYNAMIC_FILE_NAME] == "0"
    assert not any("torchcomm" in w.lower() for w in warnings)


def test_a_users_torchcomms_values_are_kept_and_the_losing_ones_warned(server):
    env, warnings = _inject(
        server,
        pod(
            "j215",
            env=[
                {"name": tc.ENV_TC_BUFFER_SIZE, "value": "0"},
                {"name": tc.ENV_TC_DUMP_TEMP_FILE, "value": "/home/me/.cache/tc_"},
                {"name": tc.ENV_TC_DYNAMIC_FILE_NAME, "value": "1"},
            ],
        ),
    )
    assert (env[tc.ENV_TC_BUFFER_SIZE], env[tc.ENV_TC_DUMP_TEMP_FILE], env[tc.ENV_TC_DYNAMIC_FILE_NAME]) == (
        "0",
        "/home/me/.cache/tc_",
        "1",
    )
    text = "\n".join(warnings)
    assert "turns torchcomms' Flight Recorder off" in text
    assert "outside the shared dump folder" in text and tc.ENV_TC_DUMP_TEMP_FILE in text
    assert "no rank appended" in text


def _settled(w: DumpWatcher) -> list[tuple[int, str]]:
    w.poll(0.0)
    return sorted((d.rank, d.path.name) for d in w.poll(1.0))


def test_the_agent_collects_torchcomms_files_and_several_files_a_rank(tmp_path: Path) -> None:
    dumps = world(2).all_reduce(steps=3).dumps()
    torch_file = pickle_bytes(as_recorder(dumps, "nccl2", "hook")[0])
    tc0 = pickle_bytes(as_recorder(dumps, "ncclx", "torchcomms")[0])
    tc1 = json_bytes(as_recorder(dumps, "ncclx", "torchcomms")[1])
    p = c.DUMP_FILE_PREFIX
    (tmp_path / f"{p}0").write_bytes(torch_file)
    (tmp_path / f"{tc.TC_FILE_PREFIX}0").write_bytes(tc0)  # <TORCHCOMM_FR_DUMP_TEMP_FILE><rank>
    (tmp_path / f"{tc.TC_FILE_PREFIX}1.step_1200").write_bytes(tc1)  # a dynamic name keeping <prefix><rank>
    (tmp_path / f"{tc.TC_FILE_PREFIX}x").write_bytes(tc1)  # a dynamic name with no rank: not collectable
    (tmp_path / f"{tc.TC_FILE_PREFIX}01").write_bytes(tc1)  # no leading zero, as for torch's names
    w = DumpWatcher(tmp_path, p, stable_seconds=0.0, corrupt_after_seconds=30.0)
    assert _settled(w) == [
        (0, f"{p}0"),
        (0, f"{tc.TC_FILE_PREFIX}0"),
        (1, f"{tc.TC_FILE_PREFIX}1.step_1200"),
    ]
    why = {s["name"]: s["why"] for s in w.skipped.report()}
    assert set(why) == {f"{tc.TC_FILE_PREFIX}x", f"{tc.TC_FILE_PREFIX}01"}


def test_a_fabricated_torchcomms_set_collected_by_the_agent_is_analyzed(tmp_path: Path) -> None:
    """What the agent's watcher hands out of a torchcomms job (fabricated from torchcomms' source: rank 3
    never issued the 7th all_reduce) is what ``frwatch analyze`` needs: the verdict names rank 3."""
    from frwatch_analyzers.cli import main

    dumps = as_recorder(
        world(4, queued=1).all_reduce(steps=6).rank(3).stops_at(7).dumps(), "ncclx", "torchcomms"
    )
    src = tmp_path / "pod"
    src.mkdir()
    for r, d in dumps.items():
        (src / f"{tc.TC_FILE_PREFIX}{r}").write_bytes(pickle_bytes(d))
    handed = DumpWatcher(src, c.DUMP_FILE_PREFIX, stable_seconds=0.0, corrupt_after_seconds=30.0)
    handed.poll(0.0)
    store = tmp_path / "store"
    store.mkdir()
    for d in handed.poll(1.0):
        (store / f"rank_{d.rank}.pickle").write_bytes(d.path.read_bytes())
    assert sorted(p.name for p in store.iterdir()) == [f"rank_{r}.pickle" for r in range(4)]
    out = tmp_path / "v.json"
    main([str(store), "--format", "json", "--out", str(out)])
    v = json.loads(out.read_text())
    assert (v["category"], v["culprit_ranks"]) == ("missing_rank", [3]), v["headline"]
