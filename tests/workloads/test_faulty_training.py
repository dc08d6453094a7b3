"""What each scenario of the faulty training workload really produces: 4 real torch gloo ranks a scenario.

These tests pin the observed behaviour of torch 2.13 gloo and its Flight Recorder (FR) that the analyzer
tests stand on: which ranks dump, how each process ends, and where the culprit's entries differ. Default
workload settings: 8 steps, the control broadcast after steps 4 and 8, so a healthy rank issues on
the default group: seq 1 broadcast_parameters, 2-5 sync_gradients, 6 agree_to_continue, 7-10
sync_gradients, 11 agree_to_continue, 12 gather_final_metrics (all_gather), 13 finish_barrier.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from frwatch_analyzers.analyze import analyze
from frwatch_analyzers.decode.safe_load import DumpError
from frwatch_dev.workloads.local_launch import LocalJobResult, rank_environ, run_local_job
from frwatch_dev.workloads.scenarios import Scenario
from frwatch_operator.constants import WORKLOAD_DUMP_FLAG_FILE
from realdumps import RealDumps, load_dump

Dump = dict[str, Any]
WORLD = range(4)
DEFAULT_PG = "0"  # gloo names the default group "0" in entries (pg_config says "": the known quirk)


# --- reading dumps ---------------------------------------------------------------------------------------------
def dumps_of(result: LocalJobResult) -> dict[int, Dump]:
    return {rank: load_dump(path) for rank, path in result.dumps.items()}


def on_group(dump: Dump, group: str = DEFAULT_PG) -> dict[int, dict[str, Any]]:
    """The entries of one process group (by its global name), by collective_seq_id."""
    return {e["collective_seq_id"]: e for e in dump["entries"] if e["process_group"][0] == group}


def last(dump: Dump, group: str = DEFAULT_PG) -> dict[str, Any]:
    entries = on_group(dump, group)
    return entries[max(entries)]


def call_site(entry: dict[str, Any]) -> str:
    """The workload function that called the collective (the first frame in faulty_training.py)."""
    for frame in entry["frames"]:
        if frame["filename"].endswith("faulty_training.py"):
            return str(frame["name"])
    raise AssertionError(f"no workload frame in {entry['frames']}")


def endings(result: LocalJobResult) -> dict[int, str]:
    return {r.rank: r.ended for r in result.ranks}


# --- every scenario -------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("scenario", [s.value for s in Scenario])
def test_every_dump_is_plain_data_and_the_folder_holds_only_dumps(
    real_dumps: RealDumps, scenario: str
) -> None:
    result = real_dumps.run(scenario)
    assert not result.deadline_hit, result.describe()
    assert sorted(os.listdir(result.dump_dir)) == sorted(p.name for p in result.dumps.values())
    assert not (result.dump_dir / WORKLOAD_DUMP_FLAG_FILE).exists()
    for rank, dump in dumps_of(result).items():
        assert dump["version"] == "2.10"
        assert set(dump) == {"version", "pg_config", "comm_lib_version", "pg_status", "entries"}
        assert dump["entries"], f"rank {rank} recorded nothing"
        for entry in dump["entries"]:
            assert entry["state"] == "scheduled"  # gloo: never started/completed
            assert entry["time_discovered_started_ns"] is None and entry["timeout_ms"] == 4000
        for status in dump["pg_status"].values():
            assert status["last_started_collective"] == -1
    for outcome in result.ranks:  # the workload's one line per rank, unless gloo or SIGKILL killed the process
        assert outcome.summary or outcome.signal in ("SIGABRT", "SIGKILL" if scenario == "killed" else ""), outcome.log


def test_the_refusing_unpickler_refuses_a_global(tmp_path: Path) -> None:
    evil = tmp_path / "nccl_trace_rank_0"
    evil.write_bytes(pickle.dumps({"entries": [Path("/etc/passwd")]}))
    with pytest.raises(DumpError, match="global"):
        load_dump(evil)


# --- the scenarios, one by one ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_healthy_every_rank_finishes_and_dumps_everything_retired(real_dumps: RealDumps) -> None:
    result = real_dumps.run("healthy")
    assert endings(result) == dict.fromkeys(WORLD, "exit 0")
    for rank, dump in dumps_of(result).items():
        entries = on_group(dump)
        assert sorted(entries) == list(range(1, 14)), rank
        assert all(e["retired"] for e in dump["entries"]), rank
        # gloo marks the last entry retired and completes its future (wait() returns, the rank dumps) before it
        # moves pg_status's completed counter: a dump right after the last wait can read 12 while 13 is
        # retired (measured once in 1858 under load, CI on a loaded 2-core machine). The analyzer reads such an
        # entry as done (align.in_flight: retired wins over a lagging counter).
        status = dump["pg_status"]["0"]
        assert (status["last_enqueued_collective"], status["last_started_collective"]) == (13, -1), rank
        assert status["last_completed_collective"] in (12, 13), rank
        assert set(dump["pg_status"]) == {"0"}, rank
        assert dump["pg_config"] == {"": {"name": "", "desc": "", "ranks": "[0, 1, 2, 3]"}}  # gloo's quirk
        assert [call_site(entries[s]) for s in (1, 2, 6, 12, 13)] == [
            "broadcast_parameters",
            "sync_gradients",
            "agree_to_continue",
            "gather_final_metrics",
            "finish_barrier",
        ]
        assert [entries[s]["profiling_name"] for s in (1, 2, 12, 13)] == [
            "gloo:broadcast",
            "gloo:all_reduce",
            "gloo:all_gather",
            "gloo:barrier",
        ]


@pytest.mark.slow
def test_skip_the_culprit_meets_its_peers_all_reduce_with_the_next_broadcast(real_dumps: RealDumps) -> None:
    result = real_dumps.run("skip")
    assert endings(result) == dict.fromkeys(WORLD, "exit 1")
    dumps = dumps_of(result)
    assert sorted(dumps) == [0, 1, 2, 3]
    hung = {rank: last(d) for rank, d in dumps.items()}
    assert {rank: e["collective_seq_id"] for rank, e in hung.items()} == dict.fromkeys(WORLD, 5)
    assert all(not e["retired"] for e in hung.values()), "dumped while blocked: the entry is in flight"
    assert (hung[1]["profiling_name"], call_site(hung[1])) == ("gloo:broadcast", "agree_to_continue")
    for rank in (0, 2, 3):
        assert (hung[rank]["profiling_name"], call_site(hung[rank])) == ("gloo:all_reduce", "sync_gradients")


@pytest.mark.slow
def test_skip_a_rank_late_to_the_hang_dumps_where_it_blocks_and_is_no_culprit(real_dumps: RealDumps) -> None:
    """Rank 0 reaches the fault step only after its peers hung and asked every rank to dump (a loaded machine
    once made it that late). It dumps where it blocks, in the all_reduce the others wait in, not idle on its
    way there: dumped idle, it looked CPU-stuck and the analyzer named ranks 0 and 1."""
    result = real_dumps.run("skip", "--late-rank", "0")
    dumps = dumps_of(result)
    assert sorted(dumps) == [0, 1, 2, 3]
    assert "dump_reason=watchdog" not in result.outcome(0).summary  # it dumped when asked, once there
    hung = {rank: last(d) for rank, d in dumps.items()}
    assert {rank: e["collective_seq_id"] for rank, e in hung.items()} == dict.fromkeys(WORLD, 5)
    assert (hung[0]["profiling_name"], call_site(hung[0])) == ("gloo:all_reduce", "sync_gradients")
    assert (hung[1]["profiling_name"], call_site(hung[1])) == ("gloo:broadcast", "agree_to_continue")
    assert analyze(str(result.dump_dir), world_size=4).culprit_ranks == [1]


@pytest.mark.slow
def test_type_the_culprit_gathers_where_the_others_reduce(real_dumps: RealDumps) -> None:
    result = real_dumps.run("type")
    assert endings(result) == dict.fromkeys(WORLD, "exit 1")
    hung = {rank: last(d) for rank, d in dumps_of(result).items()}
    assert {rank: e["collective_seq_id"] for rank, e in hung.items()} == dict.fromkeys(WORLD, 4)
    assert all(not e["retired"] for e in hung.values())
    assert (hung[1]["profiling_name"], call_site(hung[1])) == ("gloo:all_gather", "gather_gradients")
    assert {hung[r]["profiling_name"] for r in (0, 2, 3)} == {"gloo:all_reduce"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "field", "culprit_value"),
    [("size", "input_sizes", [[228]]), ("dtype", "input_dtypes", ["Double"])],
)
def test_size_and_byte_size_mismatch_abort_the_receiving_neighbour_without_a_dump(
    real_dumps: RealDumps, scenario: str, field: str, culprit_value: list[Any]
) -> None:
    """gloo checks the bytes it receives: rank 0, which receives the culprit's larger chunk, aborts in C++
    (SIGABRT, no dump); the others fail at once with a connection error, dump and exit 1."""
    result = real_dumps.run(scenario)
    assert endings(result) == {0: "SIGABRT", 1: "exit 1", 2: "exit 1", 3: "exit 1"}
    assert "Received data size doesn't match expected size" in result.outcome(0).log
    dumps = dumps_of(result)
    assert sorted(dumps) == [1, 2, 3]
    at_fault = {rank: on_group(d)[4] for rank, d in dumps.items()}
    assert at_fault[1][field] == culprit_value
    assert at_fault[2][field] == at_fault[3][field] != culprit_value
    # a wrong tensor through the right call: the call sites are the same line
    assert at_fault[1]["frames"] == at_fault[2]["frames"]


@pytest.mark.slow
def test_cpu_stuck_the_culprit_never_enqueues_dumps_on_the_signal_and_is_torn_down(
    real_dumps: RealDumps,
) -> None:
    result = real_dumps.run("cpu_stuck")
    assert endings(result) == {0: "exit 1", 1: "SIGABRT", 2: "exit 1", 3: "exit 1"}
    assert "outcome=torn_down" in result.outcome(1).summary and "call=load_batch" in result.outcome(1).summary
    dumps = dumps_of(result)
    assert sorted(dumps) == [0, 1, 2, 3]
    assert last(dumps[1])["collective_seq_id"] == 3 and all(e["retired"] for e in dumps[1]["entries"])
    for rank in (0, 2, 3):
        entry = last(dumps[rank])
        assert (entry["collective_seq_id"], entry["retired"], call_site(entry)) == (
            4,
            False,
            "sync_gradients",
        )


@pytest.mark.slow
def test_extra_same_shape_branches_by_call_site_at_seq_3_and_hangs_at_the_next_broadcast(
    real_dumps: RealDumps,
) -> None:
    result = real_dumps.run("extra_same_shape")
    assert endings(result) == dict.fromkeys(WORLD, "exit 1")
    dumps = dumps_of(result)
    at_branch = {rank: on_group(d)[3] for rank, d in dumps.items()}
    assert call_site(at_branch[1]) == "clip_gradients_globally"
    assert {call_site(at_branch[r]) for r in (0, 2, 3)} == {"sync_gradients"}
    same = ("profiling_name", "input_sizes", "input_dtypes", "output_sizes")
    assert all(at_branch[r][k] == at_branch[1][k] for r in (0, 2, 3) for k in same)
    # seq 4 and 5 pair off by one without error; seq 6 is the others' broadcast against the culprit's all_reduce
    hung = {rank: last(d) for rank, d in dumps.items()}
    assert (hung[1]["collective_seq_id"], call_site(hung[1])) == (6, "sync_gradients")
    for rank in (0, 3):
        assert (hung[rank]["collective_seq_id"], call_site(hung[rank])) == (6, "agree_to_continue")
    # gloo's broadcast reached rank 2 from the root without the culprit: rank 2 went on to step 5
    assert (hung[2]["collective_seq_id"], call_site(hung[2])) == (7, "sync_gradients")
    assert on_group(dumps[2])[6]["retired"]
    assert all(not e["retired"] for e in hung.values())


@pytest.mark.slow
def test_subgroup_fault_in_one_pair_blocks_everyone_in_the_default_group(real_dumps: RealDumps) -> None:
    result = real_dumps.run("subgroup")
    assert endings(result) == dict.fromkeys(WORLD, "exit 1")
    dumps = dumps_of(result)
    for rank, dump in dumps.items():
        assert dump["pg_config"] == {"": {"name": "", "desc": "", "ranks": "[]"}}  # membership: from entries
        groups = {(e["pg_id"], tuple(e["process_group"])) for e in dump["entries"]}
        mine = ("1", "tensor_parallel_0") if rank < 2 else ("2", "tensor_parallel_1")
        # pg_id and the pg_status keys are per-process indexes: pg_id 1 names a different group on ranks 2, 3
        assert groups == {(0, ("0", "default_pg")), (1, mine)}
        assert sorted(dump["pg_status"]) == ["0", "1"]
    # inside the pair {2,3}: rank 3 skipped its subgroup all_reduce at step 3; rank 2 hangs in it
    assert last(dumps[2], "2")["collective_seq_id"] == 3 and not last(dumps[2], "2")["retired"]
    assert last(dumps[3], "2")["collective_seq_id"] == 2
    assert call_site(last(dumps[2], "2")) == "sync_tensor_parallel"
    # consequence: ranks 0, 1, 3 hang in the default group's all_reduce that rank 2 never reaches
    for rank in (0, 1, 3):
        entry = last(dumps[rank])
        assert (entry["collective_seq_id"], entry["retired"], call_site(entry)) == (
            4,
            False,
            "sync_gradients",
        )
    assert last(dumps[2])["collective_seq_id"] == 3 and last(dumps[2])["retired"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "field", "culprit_value", "peer_value"),
    [
        ("silent_shape", "input_sizes", [[4, 53]], [[212]]),
        ("silent_dtype", "input_dtypes", ["Int"], ["Float"]),
    ],
)
def test_silent_mismatches_complete_and_show_only_in_the_culprit_entry(
    real_dumps: RealDumps, scenario: str, field: str, culprit_value: list[Any], peer_value: list[Any]
) -> None:
    result = real_dumps.run(scenario)
    assert endings(result) == dict.fromkeys(WORLD, "exit 0")
    dumps = dumps_of(result)
    assert all(last(d)["collective_seq_id"] == 13 for d in dumps.values())
    assert on_group(dumps[1])[4][field] == culprit_value
    assert {str(on_group(dumps[r])[4][field]) for r in (0, 2, 3)} == {str(peer_value)}
    assert all(on_group(d)[5][field] == peer_value for d in dumps.values())  # only step 3 differs


@pytest.mark.slow
def test_crash_the_culprit_dies_without_a_dump_and_its_peers_fail_at_once(real_dumps: RealDumps) -> None:
    result = real_dumps.run("crash")
    assert endings(result) == dict.fromkeys(WORLD, "exit 1")
    assert result.outcome(2).dump is None and "ValueError: corrupt sample" in result.outcome(2).log
    dumps = dumps_of(result)
    assert sorted(dumps) == [0, 1, 3]
    assert all(last(d)["collective_seq_id"] == 4 for d in dumps.values())
    for rank in (0, 1, 3):
        assert "Connection closed by peer" in result.outcome(rank).summary or "Connection reset" in (
            result.outcome(rank).summary
        )


@pytest.mark.slow
def test_killed_the_culprit_dies_of_sigkill_without_a_dump_and_its_peers_fail_at_once(real_dumps: RealDumps) -> None:
    result = real_dumps.run("killed")
    assert endings(result) == {0: "exit 1", 1: "exit 1", 2: "SIGKILL", 3: "exit 1"}
    culprit = result.outcome(2)
    assert culprit.dump is None and culprit.log == "rank 2: step 3: loading a batch\n"  # nothing after the kill
    assert sorted(dumps_of(result)) == [0, 1, 3]


@pytest.mark.slow
def test_a_json_dump_next_to_pickles(real_dumps: RealDumps) -> None:
    result = real_dumps.run("skip", "--json-ranks", "3")
    assert endings(result) == dict.fromkeys(WORLD, "exit 1")
    assert result.dumps[3].read_bytes()[:1] == b"{"
    assert all(result.dumps[r].read_bytes()[:1] == b"\x80" for r in (0, 1, 2))  # pickle protocol 2
    as_json = load_dump(result.dumps[3])
    assert set(as_json) == {
        "version",
        "pg_config",
        "comm_lib_version",
        "pg_status",
        "entries",
        "nccl_comm_state",
    }
    assert as_json["pg_status"]["0"]["last_enqueued_collective"] == "5"  # strings in JSON
    entry = last(as_json)
    assert "frames" not in entry and entry["time_discovered_started_ns"] == 0
    # torch writes a list where the pickle has a tuple; decoding makes it the pickle's (safe_load)
    assert last(json.loads(result.dumps[3].read_bytes()))["process_group"] == ["0", "default_pg"]
    assert entry["process_group"] == ("0", "default_pg")
    assert (entry["collective_seq_id"], entry["profiling_name"], entry["retired"]) == (
        5,
        "gloo:all_reduce",
        False,
    )


# --- the launcher ------------------------------------------------------------------------------------------------
def test_each_rank_gets_a_pytorchjob_pods_env_on_loopback() -> None:
    env = rank_environ({"PATH": "/bin"}, rank=2, world_size=4, port=1234, dump_prefix="/d/nccl_trace_rank_")
    assert {k: env[k] for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PET_NODE_RANK")} == {
        "RANK": "2",
        "WORLD_SIZE": "4",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "1234",
        "PET_NODE_RANK": "2",
    }
    assert env["TORCH_FR_DUMP_TEMP_FILE"] == env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == "/d/nccl_trace_rank_"
    assert env["TORCH_FR_BUFFER_SIZE"] == "2000" and env["GLOO_SOCKET_IFNAME"] == "lo"
    kept = rank_environ({"TORCH_FR_BUFFER_SIZE": "50"}, rank=0, world_size=2, port=1, dump_prefix="/d/p")
    assert kept["TORCH_FR_BUFFER_SIZE"] == "50"


@pytest.mark.slow
def test_the_launcher_kills_a_rank_that_would_hang_forever(tmp_path: Path) -> None:
    """A stuck rank with a teardown grace far longer than the job: once the other rank has ended and the
    stuck one has dumped (the job settled), the launcher kills it (SIGKILL) after end_grace_s. The moment
    is the ranks' own sign, not a time from launch: a loaded machine only moves it later (a fixed 8 s from
    launch was not always enough for torch's import, the rendezvous and the 2 s timeout under load)."""
    result = run_local_job(
        "cpu_stuck",
        2,
        tmp_path,
        timeout_s=2.0,
        extra_args=["--teardown-grace-s", "120"],
        deadline_s=110.0,
        end_grace_s=1.0,
    )
    assert result.outcome(1).killed_at_deadline and result.outcome(1).ended == "killed at deadline"
    assert result.outcome(0).ended == "exit 1" and not result.outcome(0).killed_at_deadline
    assert result.duration_s < 110.0  # ended by the settled job, not by the hard deadline
    assert sorted(result.dumps) == [0, 1]  # the stuck rank dumped on the signal before it was killed


# --- the rank's environment -----------------------------------------------------------------------------------
def test_the_global_rank_is_rank_else_node_rank_times_nproc_plus_local_rank() -> None:
    from frwatch_dev.workloads.faulty_training import RankEnv

    base = {"WORLD_SIZE": "8", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456"}
    assert RankEnv.from_environ({**base, "RANK": "3", "PET_NODE_RANK": "1"}).rank == 3
    pet = {**base, "PET_NODE_RANK": "2", "PET_NPROC_PER_NODE": "2", "LOCAL_RANK": "1"}
    assert RankEnv.from_environ(pet) == RankEnv(
        rank=5, world_size=8, master_addr="job-master-0", master_port=23456
    )
    with pytest.raises(ValueError, match="MASTER_PORT"):
        RankEnv.from_environ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "x"})
    with pytest.raises(ValueError, match="outside WORLD_SIZE=8"):
        RankEnv.from_environ({**base, "RANK": "8"})


def test_the_dump_prefix_prefers_the_new_variable_then_the_old_then_nccls_default() -> None:
    from frwatch_dev.workloads.dump_on_failure import dump_prefix_from

    assert (
        dump_prefix_from({"TORCH_FR_DUMP_TEMP_FILE": "/a/", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/b/"})
        == "/a/"
    )
    assert dump_prefix_from({"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/b/"}) == "/b/"
    assert dump_prefix_from({}) == "/tmp/nccl_trace_rank_"


def test_a_dump_appears_under_its_final_name_only_whole(tmp_path: Path) -> None:
    from frwatch_dev.workloads.dump_on_failure import write_atomically

    target = tmp_path / "sub" / "nccl_trace_rank_7"
    write_atomically(target, b"\x80\x02}q\x00.")
    assert target.read_bytes() == b"\x80\x02}q\x00." and os.listdir(target.parent) == ["nccl_trace_rank_7"]


@pytest.mark.slow
def test_ranks_with_their_own_dump_folders_learn_of_the_failure_through_the_tcpstore(tmp_path: Path) -> None:
    """As pods with their own dump volume: no shared flag file, yet the stuck rank dumps on the signal."""
    result = run_local_job("cpu_stuck", 2, tmp_path, timeout_s=3.0, separate_dirs=True, deadline_s=40.0)
    assert endings(result) == {0: "exit 1", 1: "SIGABRT"}
    assert result.dumps == {r: tmp_path / f"rank{r}" / f"nccl_trace_rank_{r}" for r in (0, 1)}
    assert "dump_reason=watchdog" in result.outcome(0).summary
    assert "dump_reason=peer asked" in result.outcome(1).summary
    assert last(load_dump(result.dumps[1]))["collective_seq_id"] == 3
