"""The dump builder (frwatch_dev.dumps): real schema, and faults land where they say."""

from __future__ import annotations

import json
import pickletools
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from frwatch_analyzers.decode.safe_load import decode
from frwatch_dev.dumps import Dump, json_view, pickle_bytes, stack, world
from frwatch_dev.ports import free_port

PLAIN = (dict, list, tuple, str, int, float, bool, type(None))


def _load(data: bytes) -> Any:
    """A dump through the analyzer's refusing unpickler (the one safe unpickler)."""
    return decode(data)[0]


def _last(dump: Dump) -> dict[str, Any]:
    last: dict[str, Any] = dump["entries"][-1]
    return last


def _at(dump: Dump, seq: int, pg: str = "0") -> list[dict[str, Any]]:
    return [e for e in dump["entries"] if e["process_group"][0] == pg and e["collective_seq_id"] == seq]


def _shape(value: Any) -> Any:
    """Keys and types of a dump, values dropped: what a parser of the format depends on."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        inner = {repr(_shape(v)) for v in value}
        return (type(value).__name__, sorted(inner))
    return type(value).__name__


# ----- real torch dumps -----------------------------------------------------------------------

_RANK_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import torch, torch.distributed as dist
    rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    sub = dist.new_group([0, 1])
    for _ in range(3):
        dist.all_reduce(torch.ones(4, 3))
    dist.all_gather([torch.zeros(2) for _ in range(world)], torch.ones(2))
    dist.broadcast(torch.ones(5, dtype=torch.float64), 0)
    dist.all_reduce(torch.ones(2, dtype=torch.int32), group=sub)
    dist.barrier()
    c10d = torch._C._distributed_c10d
    open(f"{out}/rank{rank}.pkl", "wb").write(c10d._dump_fr_trace())
    open(f"{out}/rank{rank}.json", "wb").write(c10d._dump_fr_trace_json())
    dist.destroy_process_group()
    """
)


@pytest.fixture(scope="module")
def real_gloo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two real gloo ranks (torch 2.13 CPU) dump their Flight Recorder: pickle and JSON of rank 1."""
    out = tmp_path_factory.mktemp("real_gloo")
    script = out / "rank.py"
    script.write_text(_RANK_SCRIPT)
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(r), "2", port, str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r in range(2)
    ]
    for p in procs:
        output, _ = p.communicate(timeout=180)
        assert p.returncode == 0, output.decode(errors="replace")[-2000:]
    raw = (out / "rank1.pkl").read_bytes()
    return {"raw": raw, "pickle": _load(raw), "json": json.loads((out / "rank1.json").read_bytes())}


def _builder_gloo() -> dict[int, Dump]:
    return (
        world(2, backend="gloo")
        .group("sub", ranks=[0, 1])
        .all_reduce(steps=3)
        .all_gather()
        .broadcast(dtype="Double")
        .all_reduce(group="sub", dtype="Int")
        .barrier()
        .dumps()
    )


@pytest.mark.slow
def test_gloo_flavour_has_the_keys_and_types_of_a_real_dump(real_gloo: dict[str, Any]) -> None:
    real, built = real_gloo["pickle"], _builder_gloo()[1]
    assert _shape(built) == _shape(real)
    assert list(built) == list(real)
    assert list(built["entries"][0]) == list(real["entries"][0])
    assert built["version"] == real["version"] == "2.10"
    assert built["pg_config"] == real["pg_config"]  # the broken gloo pg_config, subgroup flavour
    assert [e["profiling_name"] for e in built["entries"]] == [e["profiling_name"] for e in real["entries"]]
    assert [(e["pg_id"], e["collective_seq_id"], e["op_id"]) for e in built["entries"]] == [
        (e["pg_id"], e["collective_seq_id"], e["op_id"]) for e in real["entries"]
    ]


@pytest.mark.slow
def test_nccl_flavour_has_the_real_keys_plus_duration(real_gloo: dict[str, Any]) -> None:
    real = real_gloo["pickle"]
    built = world(2).group("sub", ranks=[0, 1]).all_reduce(steps=3).all_reduce(group="sub").dumps()[1]
    assert list(built) == list(real)
    real_keys = list(real["entries"][0])
    for entry in built["entries"]:
        keys = [k for k in entry if k != "duration_ms"]
        assert keys == real_keys
        assert list(entry).index("duration_ms") == real_keys.index("time_created_ns") + 1
        for key in real_keys:
            if real["entries"][0][key] is not None:
                assert type(entry[key]) is type(real["entries"][0][key]), key
    assert _shape(built["pg_status"]) == _shape(real["pg_status"])
    assert _shape(built["entries"][0]["frames"][0]) == _shape(real["entries"][0]["frames"][0])


@pytest.mark.slow
def test_pickle_and_json_encodings_match_torch(real_gloo: dict[str, Any]) -> None:
    built = _builder_gloo()[1]
    data = pickle_bytes(built)
    assert data[:2] == real_gloo["raw"][:2] == b"\x80\x02"  # protocol 2
    opcodes = {op.name for op, _, _ in pickletools.genops(data)}
    real_opcodes = {op.name for op, _, _ in pickletools.genops(real_gloo["raw"])}
    # Python writes one-element lists and dicts with APPEND/SETITEM where torch writes MARK..APPENDS
    assert opcodes <= real_opcodes | {"LONG_BINPUT", "LONG_BINGET", "APPEND", "SETITEM", "BINFLOAT"}
    assert "GLOBAL" not in opcodes and "STACK_GLOBAL" not in opcodes
    as_json = json.loads(json.dumps(json_view(built), sort_keys=True))
    assert _shape(as_json) == _shape(real_gloo["json"])
    assert list(as_json) == list(real_gloo["json"])
    assert list(as_json["entries"][0]) == list(real_gloo["json"]["entries"][0])


@pytest.mark.slow
def test_torch_fr_trace_reads_nccl_flavour_and_names_the_missing_rank(tmp_path: Path) -> None:
    world(4).all_reduce(steps=10).rank(3).stops_at(11).write(tmp_path)
    torchfrtrace = Path(sys.executable).parent / "torchfrtrace"
    out = subprocess.run(
        [str(torchfrtrace), str(tmp_path), "-p", "nccl_trace_rank_"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "Not all ranks joining collective, sequence number: 11" in out.stderr
    assert "missing ranks: {3}" in out.stderr


# ----- faults land where they say -------------------------------------------------------------


def test_a_healthy_world_completes_everything_with_nine_frames() -> None:
    dumps = world(4).all_reduce(steps=10).dumps()
    assert sorted(dumps) == [0, 1, 2, 3]
    for d in dumps.values():
        assert [e["collective_seq_id"] for e in d["entries"]] == list(range(1, 11))
        assert {e["state"] for e in d["entries"]} == {"completed"}
        assert all(e["retired"] and isinstance(e["duration_ms"], float) for e in d["entries"])
        assert all(len(e["frames"]) == 9 for e in d["entries"])
        assert d["pg_status"] == {
            "0": {
                "last_enqueued_collective": 10,
                "last_started_collective": 10,
                "last_completed_collective": 10,
            }
        }
        assert d["pg_config"] == {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}}


def test_dumps_hold_only_plain_types_and_load_without_globals(tmp_path: Path) -> None:
    w = (
        world(3)
        .group("tp", ranks=[0, 1])
        .all_reduce(steps=2, group="tp")
        .send(0, 2)
        .coalesced(["all_reduce"] * 2)
    )

    def walk(v: Any) -> None:
        assert isinstance(v, PLAIN), type(v)
        if isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    for rank, d in w.dumps().items():
        walk(d)
        assert _load(pickle_bytes(d)) == d, rank


def test_rank_stops_at_leaves_peers_started_in_that_seq() -> None:
    dumps = world(8).all_reduce(steps=40).rank(7).stops_at(41).dumps()
    culprit = dumps[7]
    assert _last(culprit)["collective_seq_id"] == 40 and _last(culprit)["state"] == "completed"
    assert culprit["pg_status"]["0"]["last_enqueued_collective"] == 40
    for r in range(7):
        last = _last(dumps[r])
        assert (last["collective_seq_id"], last["state"], last["retired"]) == (41, "started", False)
        assert last["time_discovered_started_ns"] and last["time_discovered_completed_ns"] is None
        assert "duration_ms" not in last
        assert dumps[r]["pg_status"]["0"] == {
            "last_enqueued_collective": 41,
            "last_started_collective": 41,
            "last_completed_collective": 40,
        }


def test_op_at_is_a_desync_that_hangs_there() -> None:
    dumps = world(8).all_reduce(steps=40).rank(3).op_at(12, "all_gather").dumps()
    for r, d in dumps.items():
        last = _last(d)
        assert last["collective_seq_id"] == 12 and last["state"] == "started"
        expected = "nccl:all_gather" if r == 3 else "nccl:all_reduce"
        assert last["profiling_name"] == expected
    assert dumps[3]["entries"][-1]["output_sizes"] == [[8 * 524_288]]


def test_sizes_and_dtype_faults_hang_or_corrupt_silently() -> None:
    hung = world(4).all_reduce(steps=20).rank(2).sizes_at(5, [[10]]).dumps()
    assert _last(hung[2])["input_sizes"] == [[10]] and _last(hung[2])["collective_seq_id"] == 5
    assert _last(hung[0])["input_sizes"] == [[6_553_600]] and _last(hung[0])["state"] == "started"

    w = world(4).all_reduce(steps=20).rank(1).sizes_at(5, [[3276800, 2]], hangs=False)
    silent = w.rank(2).dtype_at(7, "BFloat16", hangs=False).dumps()
    assert _at(silent[1], 5)[0]["input_sizes"] == [[3276800, 2]]
    assert _at(silent[2], 7)[0]["input_dtypes"] == ["BFloat16"] == _at(silent[2], 7)[0]["output_dtypes"]
    assert _at(silent[0], 7)[0]["input_dtypes"] == ["Float"]
    assert all(
        _last(d)["collective_seq_id"] == 20 and _last(d)["state"] == "completed" for d in silent.values()
    )


def test_call_site_at_changes_only_that_entry_on_that_rank() -> None:
    site = ("_sync_gradients_on_eval", "/workspace/eval.py", 12)
    dumps = world(4).all_reduce(steps=10).rank(1).call_site_at(6, site).dumps()
    six = _at(dumps[1], 6)[0]["frames"]
    assert len(six) == 9 and six[2] == {"name": site[0], "filename": site[1], "line": site[2]}
    assert six[0]["name"] == "all_reduce" and six[3:] == _at(dumps[0], 6)[0]["frames"][3:]
    assert _at(dumps[1], 5)[0]["frames"] == _at(dumps[0], 6)[0]["frames"]
    assert _last(dumps[0])["collective_seq_id"] == 10  # no hang by default

    full = stack(("other", "/workspace/other.py", 3), "all_reduce")
    dumps = world(2).all_reduce(steps=3).rank(0).call_site_at(2, full).dumps()
    assert _at(dumps[0], 2)[0]["frames"] == full


def test_distinct_code_paths_have_distinct_call_sites() -> None:
    d = world(4).group("tp", ranks=[0, 1]).all_reduce().all_gather().all_reduce(group="tp").dumps()[0]
    sites = [tuple(e["frames"][2].values()) for e in d["entries"]]
    assert len(set(sites)) == 3


def test_not_started_at_is_a_gpu_hang() -> None:
    dumps = world(8).all_reduce(steps=20).rank(4).not_started_at(13).dumps()
    stuck = _last(dumps[4])
    assert (stuck["collective_seq_id"], stuck["state"], stuck["time_discovered_started_ns"]) == (
        13,
        "scheduled",
        None,
    )
    assert dumps[4]["pg_status"]["0"]["last_started_collective"] == 12
    assert all(_last(dumps[r])["state"] == "started" for r in range(8) if r != 4)


def test_all_started_none_completed_is_a_network_hang() -> None:
    dumps = world(4).all_reduce(steps=20).all_started_none_completed_at(9).dumps()
    for d in dumps.values():
        assert (_last(d)["collective_seq_id"], _last(d)["state"]) == (9, "started")
        assert d["pg_status"]["0"]["last_completed_collective"] == 8


def test_subgroups_have_their_own_seq_and_block_across_groups() -> None:
    w = (
        world(4)
        .group("tp", ranks=[0, 1])
        .group("tp2", ranks=[2, 3])
        .repeat(5, lambda s: s.all_reduce(group="tp").all_reduce(group="tp2").all_gather())
        .rank(1)
        .stops_at(4, group="tp")
    )
    dumps = w.dumps()
    assert _last(dumps[0])["process_group"] == ("1", "tp") and _last(dumps[0])["collective_seq_id"] == 4
    assert _last(dumps[0])["state"] == "started"
    # rank 1 never reached tp seq 4, so it never reached the default group's seq 4 either: 2 and 3 wait there
    assert (
        _last(dumps[1])["process_group"] == ("0", "default_pg") and _last(dumps[1])["collective_seq_id"] == 3
    )
    for r in (2, 3):
        assert (_last(dumps[r])["process_group"][0], _last(dumps[r])["collective_seq_id"]) == ("0", 4)
        assert _last(dumps[r])["state"] == "started"
    assert dumps[0]["pg_config"]["1"] == {"name": "1", "desc": "tp", "ranks": "[0, 1]"}
    assert "1" not in dumps[2]["pg_config"] and dumps[2]["pg_config"]["2"]["ranks"] == "[2, 3]"
    assert {e["pg_id"] for e in dumps[2]["entries"] if e["process_group"][0] == "2"} == {1}  # rank-local


def test_p2p_names_and_per_rank_p2p_seq_ids() -> None:
    dumps = world(3).send(1, 2, steps=2).send(0, 2).all_reduce().dumps()
    sends = [e for e in dumps[1]["entries"] if e["is_p2p"]]
    assert [(e["profiling_name"], e["p2p_seq_id"]) for e in sends] == [
        ("nccl:send 1->2", 1),
        ("nccl:send 1->2", 2),
    ]
    recvs = [(e["profiling_name"], e["p2p_seq_id"]) for e in dumps[2]["entries"] if e["is_p2p"]]
    assert recvs == [("nccl:recv 2<-1", 1), ("nccl:recv 2<-1", 2), ("nccl:recv 2<-0", 3)]
    assert [(e["profiling_name"], e["p2p_seq_id"]) for e in dumps[0]["entries"] if e["is_p2p"]] == [
        ("nccl:send 0->2", 1)
    ]
    assert all(e["collective_seq_id"] == 0 for e in sends)
    assert _last(dumps[0])["collective_seq_id"] == 1


def test_p2p_to_a_stopped_rank_stays_started() -> None:
    dumps = world(3).all_reduce(steps=2).send(0, 2).rank(2).stops_at(2).dumps()
    assert _last(dumps[2])["collective_seq_id"] == 1
    assert _last(dumps[0])["collective_seq_id"] == 2 and _last(dumps[0])["state"] == "started"
    assert not any(e["is_p2p"] for e in dumps[0]["entries"])  # blocked before it


def test_coalesced_ops_share_a_seq_and_end_in_a_coalesced_entry() -> None:
    d = world(2).all_reduce().coalesced(["all_reduce", "all_reduce", "all_reduce"]).dumps()[0]
    group = _at(d, 2)
    assert [e["profiling_name"] for e in group] == ["nccl:all_reduce"] * 3 + ["nccl:coalesced"]
    assert [e["op_id"] for e in group] == [2, 3, 4, 5]
    assert [e["state"] for e in group] == ["scheduled"] * 3 + ["completed"]
    assert not any(e["retired"] for e in group[:3]) and group[3]["retired"]

    named = world(2).coalesced(["all_reduce"] * 2, end="allreduce_coalesced").dumps()[0]["entries"]
    assert named[-1]["profiling_name"] == "nccl:allreduce_coalesced"

    batch = world(2).batch_isend_irecv([(0, 1), (1, 0)]).dumps()[1]["entries"]
    assert [(e["profiling_name"], e["p2p_seq_id"], e["is_p2p"]) for e in batch] == [
        ("nccl:recv 1<-0", 1, True),
        ("nccl:send 1->0", 1, True),
        ("nccl:coalesced", 1, True),
    ]


def test_ring_buffer_wrap_gives_ranks_different_windows() -> None:
    w = (
        world(4, buffer_size=50)
        .group("tp", ranks=[0, 1])
        .repeat(40, lambda s: s.all_reduce().all_reduce(group="tp"))
    )
    dumps = w.dumps()
    assert all(len(d["entries"]) == 50 for d in dumps.values() if d is not dumps[2] and d is not dumps[3])
    assert len(dumps[2]["entries"]) == 40  # never wrapped
    assert dumps[0]["entries"][0]["record_id"] == 30 and dumps[2]["entries"][0]["record_id"] == 0
    default0 = [e["collective_seq_id"] for e in dumps[0]["entries"] if e["process_group"][0] == "0"]
    assert default0 == list(range(16, 41))  # rank 0 holds the default group's seq 16..40 only


def test_without_dump_and_the_gloo_quirks() -> None:
    dumps = world(4, backend="gloo").all_reduce(steps=5).rank(2).stops_at(5).without_dump(2).dumps()
    assert sorted(dumps) == [0, 1, 3]
    d = dumps[0]
    assert {e["state"] for e in d["entries"]} == {"scheduled"}
    assert all(e["time_discovered_started_ns"] is None for e in d["entries"])
    assert all("duration_ms" not in e and e["p2p_seq_id"] == 0 for e in d["entries"])
    assert [e["retired"] for e in d["entries"]] == [True] * 4 + [False]
    assert d["pg_status"]["0"] == {
        "last_enqueued_collective": 5,
        "last_started_collective": -1,
        "last_completed_collective": 4,
    }
    assert d["pg_config"] == {"": {"name": "", "desc": "", "ranks": "[0, 1, 2, 3]"}}
    assert d["comm_lib_version"] == "" and _last(d)["profiling_name"] == "gloo:all_reduce"
    with pytest.raises(ValueError, match="no point-to-point"):
        world(2, backend="gloo").send(0, 1)


def test_worlds_are_values_a_fault_does_not_leak_into_the_base() -> None:
    base = world(4).all_reduce(steps=10)
    faulty = base.rank(1).stops_at(5)
    assert _last(base.dumps()[1])["collective_seq_id"] == 10
    assert _last(faulty.dumps()[1])["collective_seq_id"] == 4


def test_helpful_errors() -> None:
    with pytest.raises(KeyError, match="declare it first"):
        world(2).all_reduce(group="tp")
    with pytest.raises(ValueError, match="not a member"):
        world(4).group("tp", ranks=[0, 1]).all_reduce(group="tp").rank(3).stops_at(1, group="tp")
    with pytest.raises(ValueError, match="has no collective"):
        world(2).rank(0).stops_at(3).dumps()


def test_write_pickle_and_json_files(tmp_path: Path) -> None:
    w = world(3).all_reduce(steps=4).rank(1).stops_at(4).without_dump(2)
    paths = w.write(tmp_path / "p")
    assert [p.name for p in paths] == ["nccl_trace_rank_0", "nccl_trace_rank_1"]
    assert _load(paths[0].read_bytes()) == w.dumps()[0]

    paths = w.write(tmp_path / "j", fmt="json", prefix="rank", suffix=".json")
    assert [p.name for p in paths] == ["rank0.json", "rank1.json"]
    j = json.loads(paths[0].read_text())
    assert "frames" not in j["entries"][0] and j["nccl_comm_state"] == {}
    assert j["entries"][-1]["time_discovered_completed_ns"] == 0
    assert j["entries"][-1]["process_group"] == ["0", "default_pg"]
    assert j["pg_status"]["0"]["last_enqueued_collective"] == "4"
