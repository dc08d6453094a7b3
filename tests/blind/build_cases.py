"""Regenerates the fabricated blind cases (tests/blind/cases/<name>/): dumps plus truth.json.

    .venv/bin/python tests/blind/build_cases.py            # rewrites every fabricated case, byte-identical
    .venv/bin/python tests/blind/build_cases.py --check    # fails if a committed fabricated case differs

Built from PyTorch's source and real runs only, by someone who has not read frwatch's analyzer, its tests or
its conformance corpus (issue 24). The dump format is `dumpmaker.py`'s (torch 2.13, version "2.10"). Cases
made by real torch gloo ranks (`gloo_runs.py`) are kept as files and are not touched here; their truth.json
names the command that made them.

Truth fields: status, category, culprit_ranks (empty where none is singled out), earliest_branch
({pg: uid, seq, op} or null), hardware_class, principle (issue 24's number), rationale, source; `accept`
lists the other values torch's semantics leave open for a field, where there are any, and why.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dumpmaker import Group, Rank, write_json, write_pickle

GLOO_CPP = "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp"
CASES = Path(__file__).resolve().parent / "cases"
WORLD = 4
DEFAULT = Group("0", "default_pg", [0, 1, 2, 3])
PGNCCL = "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
FRCPP = "torch/csrc/distributed/c10d/FlightRecorder.cpp"
FRTEST = "test/distributed/flight_recorder/test_fr_analysis.py"

Truth = dict[str, Any]
BUILDERS: dict[str, Callable[[Path], Truth]] = {}


def case(fn: Callable[[Path], Truth]) -> Callable[[Path], Truth]:
    BUILDERS[fn.__name__] = fn
    return fn


def ranks(n: int = WORLD, **kw: Any) -> list[Rank]:
    groups = kw.pop("groups", [DEFAULT])
    return [Rank(r, [g for g in groups if r in g.ranks], **kw) for r in range(n)]


def save(folder: Path, rs: list[Rank], *, fmt: str = "pickle", skip: tuple[int, ...] = ()) -> None:
    for r in rs:
        if r.rank in skip:
            continue
        if fmt == "json":
            write_json(folder / f"nccl_trace_rank_{r.rank}", r.dump())
        else:
            write_pickle(folder / f"nccl_trace_rank_{r.rank}", r.dump())


def truth(st: str, cat: str, culprits: list[int], branch: tuple[str, int, str] | None, hw: bool,
          principle: int, rationale: str, source: str, **accept: Any) -> Truth:
    t: Truth = {
        "status": st,
        "category": cat,
        "culprit_ranks": culprits,
        "earliest_branch": None if branch is None else {"pg": branch[0], "seq": branch[1], "op": branch[2]},
        "hardware_class": hw,
        "principle": principle,
        "rationale": rationale,
        "source": source,
        "made_by": "tests/blind/build_cases.py",
    }
    if accept:
        t["accept"] = accept
    return t


# ---- 1. rooted collectives on NCCL ------------------------------------------------------------------

# How a non-root's undefined tensor is recorded. MEASURED: what torch 2.13 gives (tests/blind/undefined_tensor_probe.cpp
# built against the venv's torch: an undefined at::Tensor has sizes() [0] and c10::toString(dtype) "UNKNOWN_SCALAR");
# BRIEF: sizes [] and dtype "Undefined", as issue 24 words it (torch's test_fr_analysis uses [[]] with dtype "").
MEASURED = ([0], "UNKNOWN_SCALAR")
BRIEF: tuple[list[int], str] = ([], "Undefined")


def _gather(r: Rank, root: int, n: int = 256, undefined: tuple[list[int], str] = BRIEF, **kw: Any) -> None:
    if r.rank == root:
        r.coll("gather", [[n]], [[n]] * WORLD, line=120, **kw)
    else:
        r.coll("gather", [[n]], [undefined[0]], out_dtypes=[undefined[1]], line=120, **kw)


def _scatter(r: Rank, root: int, n: int = 256, undefined: tuple[list[int], str] = BRIEF, **kw: Any) -> None:
    if r.rank == root:
        r.coll("scatter", [[n]] * WORLD, [[n]], line=124, **kw)
    else:
        r.coll("scatter", [undefined[0]], [[n]], in_dtypes=[undefined[1]], line=124, **kw)


@case
def nccl_gather_rotating_root_healthy(folder: Path) -> Truth:
    rs = ranks()
    for step in range(6):
        for r in rs:
            r.coll("all_reduce", [[1024]], line=101)
            _gather(r, step % WORLD)
    save(folder, rs)
    return truth("healthy", "healthy", [], None, False, 1,
                 "gather's root rotates 0,1,2,3; each non-root records one undefined tensor as output in the "
                 "brief's form (output_sizes [[]], dtype Undefined; torch 2.13 itself writes [[0]] and "
                 "UNKNOWN_SCALAR, see nccl_rooted_undefined_as_measured_healthy), the root the full list",
                 f"{PGNCCL} ProcessGroupNCCL::gather (non-root: outputs.emplace_back()); {FRTEST} "
                 "test_match_one_event (gather e11 vs e12 FULLY_MATCHED)")


@case
def nccl_scatter_rotating_root_timing_healthy(folder: Path) -> Truth:
    rs = ranks(timing=True)
    for step in range(6):
        for r in rs:
            r.coll("all_reduce", [[1024]], line=101)
            _scatter(r, (step * 3) % WORLD)
    save(folder, rs)
    return truth("healthy", "healthy", [], None, False, 1,
                 "scatter's root rotates (0,3,2,1,...); non-roots record one undefined input tensor; timing on, "
                 "every entry completed with duration_ms",
                 f"{PGNCCL} ProcessGroupNCCL::scatter (non-root: inputs.emplace_back()); {FRCPP} dump_entries")


@case
def nccl_rooted_undefined_as_measured_healthy(folder: Path) -> Truth:
    rs = ranks()
    for step in range(6):
        for r in rs:
            r.coll("all_reduce", [[1024]], line=101)
            _gather(r, (step + 1) % WORLD, undefined=MEASURED)
            _scatter(r, step % WORLD, undefined=MEASURED)
    save(folder, rs)
    return truth("healthy", "healthy", [], None, False, 1,
                 "gather and scatter with rotating roots, the non-roots' undefined tensor recorded as torch 2.13 "
                 "records it: sizes [0], dtype 'UNKNOWN_SCALAR' (FlightRecorder::record takes tensor.sizes() and "
                 "c10::toString(dtype) unguarded; measured with undefined_tensor_probe.cpp against torch 2.13)",
                 f"{FRCPP} FlightRecorder::record (input.sizes(), dtype().toScalarType()); "
                 "c10/core/UndefinedTensorImpl.cpp; c10/core/impl/SizesAndStrides.h")


@case
def nccl_gather_two_roots(folder: Path) -> Truth:
    rs = ranks()
    for _ in range(5):
        for r in rs:
            r.coll("all_reduce", [[1024]], line=101)
            _gather(r, 0, undefined=MEASURED)
    # step 5: rank 2 calls gather with dst=2 while 0, 1, 3 use dst=0 (seq 12)
    for r in rs:
        r.coll("all_reduce", [[1024]], line=101)
        if r.rank == 2:
            r.coll("gather", [[256]], [[256]] * WORLD, line=120, state="scheduled")
        else:
            _gather(r, 0, undefined=MEASURED, state="completed" if r.rank in (1, 3) else "scheduled")
        r.coll("all_reduce", [[1024]], line=101, state="scheduled")
    save(folder, rs)
    return truth("problem", "desync", [2], ("0", 12, "nccl:gather"), False, 1,
                 "at seq 12 ranks 0 and 2 both record the root's full output list; every earlier gather had "
                 "root 0 on all ranks, so rank 2 departs from its own and the group's history; the non-roots "
                 "1 and 3 (sends to 0) completed, 0 and 2 wait for sends that never come",
                 f"{PGNCCL} ProcessGroupNCCL::gather; torch/csrc/cuda/nccl.cpp gather (root recvs, others send)",
                 category=["desync", "size_mismatch"],
                 why="a root disagreement is a collective-argument mismatch; its trace is a size difference")


# ---- 2. not retired does not mean in flight -----------------------------------------------------------

@case
def gloo_unretired_then_completed_healthy(folder: Path) -> Truth:
    rs = ranks(backend="gloo", timeout_ms=1800000, comm_lib_version="")
    for step in range(10):
        for r in rs:
            late = r.rank in (1, 3) and step == 3
            r.coll("all_reduce", [[128]], line=101, retired=not late)
            r.coll("broadcast", [[8]], line=104)
    save(folder, rs)
    return truth("healthy", "healthy", [], None, False, 2,
                 "gloo: ranks 1 and 3 keep all_reduce seq 7 retired=False while all 13 later entries of the "
                 "same group are retired and pg_status says last_completed == last_enqueued == 20: seq 7 is done",
                 "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp AsyncWork::finishWorkGloo (retire runs on the "
                 "gloo worker thread after the future completes); issue 24 principle 2 (2 of 4 healthy runs)")


@case
def nccl_coalesced_healthy(folder: Path) -> Truth:
    rs = ranks(timing=True)
    for _ in range(5):
        for r in rs:
            r.coll("all_reduce", [[4096]], line=101)
            r.coalesced([("all_reduce", [[2048]]), ("all_reduce", [[512]]), ("all_reduce", [[64]])])
    save(folder, rs)
    return truth("healthy", "healthy", [], None, False, 2,
                 "each _coalescing_manager region records its ops with no events (scheduled, retired=False "
                 "forever) and one nccl:coalesced entry with the region's state (completed); same seq per region",
                 f"{PGNCCL} ProcessGroupNCCL::startCoalescing/endCoalescing and collective() (record with nullptr "
                 f"events while coalescing_state_); {FRTEST} testBuildDB case 3")


@case
def gloo_unretired_early_then_real_skip(folder: Path) -> Truth:
    rs = ranks(backend="gloo", timeout_ms=1800000, comm_lib_version="")
    for step in range(7):
        for r in rs:
            r.coll("all_reduce", [[128]], line=101, retired=not (r.rank == 0 and step == 2))
            r.coll("all_gather", [[8]], [[32]], line=104)
    for r in rs:
        if r.rank != 2:
            r.coll("all_reduce", [[128]], line=101, state="scheduled")
    save(folder, rs)
    return truth("problem", "missing_rank", [2], ("0", 15, "gloo:all_reduce"), False, 2,
                 "gloo: rank 0's all_reduce #5 stays retired=False though its 10 later entries completed (not in "
                 "flight); the hang is at #15, which 0, 1, 3 enqueued and rank 2 never did",
                 f"{GLOO_CPP} AsyncWork::finishWorkGloo; issue 24 principle 2")


# ---- 3. p2p chains ------------------------------------------------------------------------------------

def _pipeline_step(r: Rank, *, recv: str = "completed", send: str | None = "completed", size: list[int] | None
                   = None, send_size: list[int] | None = None, ar: str | None = "completed") -> None:
    size = size or [8, 256]
    if r.rank > 0:
        r.p2p("recv", r.rank - 1, size, state=recv, line=150)
    if r.rank < WORLD - 1 and send is not None:
        r.p2p("send", r.rank + 1, send_size or size, state=send, line=154)
    if ar is not None:
        r.coll("all_reduce", [[4096]], line=160, state=ar)


@case
def p2p_recv_scheduled_sender_started(folder: Path) -> Truth:
    rs = ranks(timing=True)
    for _ in range(5):
        for r in rs:
            _pipeline_step(r)
    a, b, c, d = rs
    _pipeline_step(a, ar="started")
    _pipeline_step(b, send="started", ar="started")
    _pipeline_step(c, recv="scheduled", send=None, ar=None)
    _pipeline_step(d, recv="started", ar=None)
    save(folder, rs)
    return truth("problem", "gpu_hang", [2], ("0", 11, "nccl:recv 2<-1"), True, 3,
                 "timing on: rank 1's send 1->2 started, rank 2's recv 2<-1 still scheduled (its stream never "
                 "reached it); rank 2 never posted send 2->3, so rank 3's started recv is a consequence",
                 f"{PGNCCL} ProcessGroupNCCL::pointToPoint (p2p_seq_id, 'nccl:recv {{rank}}<-{{src}}'); "
                 f"{FRCPP} state from start/end events",
                 seq=[11, 12], why="p2p_seq_id counts per rank: 11 on rank 2's recv, 12 on rank 1's send")


@case
def p2p_both_started_none_completed(folder: Path) -> Truth:
    rs = ranks(timing=True)
    for _ in range(5):
        for r in rs:
            _pipeline_step(r)
    a, b, c, d = rs
    _pipeline_step(a, ar="started")
    _pipeline_step(b, send="started", ar="started")
    _pipeline_step(c, recv="started", send=None, ar=None)
    _pipeline_step(d, recv="started", ar=None)
    save(folder, rs)
    return truth("problem", "network_hang", [], ("0", 11, "nccl:recv 2<-1"), True, 3,
                 "timing on: send 1->2 and recv 2<-1 both started, neither completed, every earlier transfer "
                 "completed: the link between 1 and 2 stalls; rank 3's recv and the all_reduce are consequences",
                 f"{PGNCCL} ProcessGroupNCCL::pointToPoint; {FRCPP} state", seq=[11, 12],
                 why="p2p_seq_id counts per rank: 11 on rank 2's recv, 12 on rank 1's send")


@case
def p2p_shape_changed_on_sender(folder: Path) -> Truth:
    rs = ranks()
    for _ in range(4):
        for r in rs:
            _pipeline_step(r)
    a, b, c, d = rs
    _pipeline_step(a, ar="scheduled")
    _pipeline_step(b, send="scheduled", send_size=[8, 512], ar="scheduled")
    _pipeline_step(c, recv="scheduled", send=None, ar=None)
    _pipeline_step(d, recv="scheduled", ar=None)
    save(folder, rs)
    return truth("problem", "size_mismatch", [1], ("0", 10, "nccl:send 1->2"), False, 3,
                 "step 4: rank 1 sends [8, 512] to 2, which posts recv [8, 256] as in every earlier transfer of "
                 "the pair (1 sent [8, 256] four times before): the sender departs; NCCL hangs on the count mismatch",
                 f"{PGNCCL} ProcessGroupNCCL::send/recv (inputs and outputs = the tensor)", seq=[9, 10],
                 why="p2p_seq_id counts per rank: 9 on rank 2's recv, 10 on rank 1's send")


@case
def p2p_chain_sender_never_posted(folder: Path) -> Truth:
    rs = ranks()
    for _ in range(5):
        for r in rs:
            _pipeline_step(r)
    a, b, c, d = rs
    _pipeline_step(a, ar="scheduled")
    _pipeline_step(b, send=None, ar=None)  # received from 0, never posted send 1->2 (CPU stuck)
    _pipeline_step(c, recv="scheduled", send=None, ar=None)
    _pipeline_step(d, recv="scheduled", ar=None)
    save(folder, rs)
    return truth("problem", "missing_rank", [1], ("0", 11, "nccl:recv 2<-1"), False, 3,
                 "rank 1 completed its recv from 0 and never enqueued send 1->2; rank 2 waits in recv 2<-1 and "
                 "so never posts send 2->3, rank 3 waits in its recv: the chain's root is rank 1",
                 f"{PGNCCL} ProcessGroupNCCL::pointToPoint (record at enqueue)", seq=[11, 12],
                 why="rank 2's recv is p2p_seq_id 11; rank 1's missing send would have been 12")


# ---- 4. never enqueued in group A while peers wait -----------------------------------------------------

@case
def nccl_subgroup_never_enqueued(folder: Path) -> Truth:
    dp = Group("1", "data_parallel", [0, 1, 2, 3])
    rs = ranks(groups=[DEFAULT, dp])
    for _ in range(7):
        for r in rs:
            r.coll("all_reduce", [[512]], line=101)
            r.coll("all_gather", [[128]], [[512]], pg="1", line=105)
    for r in rs:
        r.coll("all_reduce", [[512]], line=101)
        if r.rank == 3:
            r.coll("all_reduce", [[512]], line=101, state="scheduled")  # skipped pg 1, went on
        else:
            r.coll("all_gather", [[128]], [[512]], pg="1", line=105, state="scheduled")
    save(folder, rs)
    return truth("problem", "missing_rank", [3], ("1", 8, "nccl:all_gather"), False, 4,
                 "ranks 0-2 wait in pg 1's all_gather #8; rank 3 never enqueued it and is waiting in pg 0's "
                 "all_reduce #9, which 0-2 cannot reach: rank 3 is the culprit, not the ones waiting for it",
                 f"{FRCPP} record (per-group collective_seq_id, process-wide record_id order)")


@case
def gloo_subgroups_pg_config_empty(folder: Path) -> Truth:
    a, b = Group("1", "undefined", [0, 1]), Group("2", "undefined", [2, 3])
    rs = ranks(groups=[DEFAULT, a, b], backend="gloo", timeout_ms=1800000, comm_lib_version="")
    for _ in range(5):
        for r in rs:
            r.coll("all_reduce", [[64]], line=101)
            r.coll("all_reduce", [[16]], pg="1" if r.rank < 2 else "2", line=106)
    for r in rs:
        r.coll("all_reduce", [[64]], line=101)
        if r.rank == 0:
            r.coll("all_reduce", [[16]], pg="1", line=106, state="scheduled")
        elif r.rank == 1:
            r.coll("all_reduce", [[64]], line=101, state="scheduled")  # skipped its pair's all_reduce
        else:
            r.coll("all_reduce", [[16]], pg="2", line=106)
            r.coll("all_reduce", [[64]], line=101, state="scheduled")
    save(folder, rs)
    return truth("problem", "missing_rank", [1], ("1", 6, "gloo:all_reduce"), False, 4,
                 "gloo, pg_config {'': {'ranks': '[]'}} and desc 'undefined' (real torch 2.13 behaviour with "
                 "subgroups): rank 0 waits in pg 1 #6; its only peer rank 1 never enqueued it and waits in pg 0 "
                 "#7 with 2 and 3; membership of pg 1 must come from the entries",
                 "real torch 2.13 gloo dump (FACTS.md 1; _dump_fr_trace_json of a run with new_group); "
                 "torch/distributed/distributed_c10d.py new_group (group_desc default 'undefined')")


# ---- 5. partial evidence ------------------------------------------------------------------------------

@case
def garbage_file_others_wait(folder: Path) -> Truth:
    rs = ranks()
    for _ in range(8):
        for r in rs:
            r.coll("all_reduce", [[2048]], line=101)
    for r in rs:
        r.coll("all_reduce", [[2048]], line=101, state="scheduled")
    save(folder, rs, skip=(2,))
    (folder / "nccl_trace_rank_2").write_bytes(b"\x80\x02}q\x00(X\x07\x00\x00\x00versionq\x01X\x04\x00\x002.1"
                                               + b"\x00" * 64 + b"upload interrupted\n")
    return truth("inconclusive", "inconclusive", [], ("0", 9, "nccl:all_reduce"), False, 5,
                 "ranks 0, 1, 3 enqueued all_reduce #9 and wait (timing off); rank 2's file is a truncated "
                 "pickle: what rank 2 issued is unknown, so no rank can be named",
                 "issue 24 principle 5; torch's dump is written whole by the recorder (FlightRecorder dump)",
                 status=["inconclusive", "problem"], category=["inconclusive", "missing_rank"],
                 culprit_ranks=[[], [2]],
                 why="naming rank 2 as 'no usable dump' is fair if the verdict says it is unknown, not missing")


@case
def garbage_file_with_dtype_mismatch(folder: Path) -> Truth:
    rs = ranks()
    for _ in range(5):
        for r in rs:
            r.coll("all_reduce", [[2048]], line=101)
            r.coll("broadcast", [[16]], line=108)
    for r in rs:
        r.coll("all_reduce", [[2048]], dtype="BFloat16" if r.rank == 1 else "Float", line=101,
               state="scheduled")
    save(folder, rs, skip=(3,))
    (folder / "nccl_trace_rank_3").write_text("rank 3: no space left on device\n")
    return truth("problem", "dtype_mismatch", [1], ("0", 11, "nccl:all_reduce"), False, 5,
                 "rank 1's all_reduce #11 is BFloat16 where it and every peer always used Float; rank 3's file "
                 "is text, named as a bad file, while the mismatch stands on the other three",
                 f"{FRCPP} dump_entries (input_dtypes via c10::toString); {FRTEST} COLLECTIVE_DTYPE_MISMATCH")


# ---- 6. no culprit where none is singled out ----------------------------------------------------------

@case
def network_hang_all_started(folder: Path) -> Truth:
    rs = ranks(timing=True)
    for _ in range(11):
        for r in rs:
            r.coll("all_reduce", [[8192]], line=101)
    for r in rs:
        r.coll("all_reduce", [[8192]], line=101, state="started")
        r.coll("all_reduce", [[8192]], line=101, state="scheduled")
    save(folder, rs)
    return truth("problem", "network_hang", [], ("0", 12, "nccl:all_reduce"), True, 6,
                 "timing on: all_reduce #12 started on all four ranks, completed on none; #13 scheduled "
                 "everywhere behind it proves nothing",
                 f"{FRCPP} state (started needs the start event: TORCH_NCCL_ENABLE_TIMING)")


@case
def network_hang_in_subgroup(folder: Path) -> Truth:
    tp0, tp1 = Group("1", "tp", [0, 1]), Group("2", "tp", [2, 3])
    rs = ranks(timing=True, groups=[DEFAULT, tp0, tp1])
    for _ in range(4):
        for r in rs:
            r.coll("all_gather", [[256]], [[512]], pg="1" if r.rank < 2 else "2", line=112)
            r.coll("all_reduce", [[1024]], line=101)
    for r in rs:
        if r.rank < 2:
            r.coll("all_gather", [[256]], [[512]], pg="1", line=112)
            r.coll("all_reduce", [[1024]], line=101, state="started")
        else:
            r.coll("all_gather", [[256]], [[512]], pg="2", line=112, state="started")
            r.coll("all_reduce", [[1024]], line=101, state="scheduled")
    save(folder, rs)
    return truth("problem", "network_hang", [], ("2", 5, "nccl:all_gather"), True, 6,
                 "pg 2 (ranks 2, 3) all_gather #5 started on both, completed on neither; pg 0's all_reduce #5 "
                 "(started on 0, 1; scheduled on 2, 3 behind the stuck stream) is a consequence, not a GPU hang",
                 f"{FRCPP} state; per-group seq (ProcessGroupNCCL seqCollective_)")


# ---- 7. all_to_all -----------------------------------------------------------------------------------

SPLITS = [  # SPLITS[step][i][j]: rows sent by rank i to rank j
    [[4, 1, 2, 5], [3, 3, 0, 6], [1, 7, 2, 2], [2, 2, 8, 0]],
    [[0, 6, 3, 3], [5, 1, 1, 4], [2, 2, 6, 1], [4, 0, 3, 5]],
    [[2, 2, 2, 2], [1, 4, 4, 3], [6, 0, 1, 5], [3, 5, 0, 2]],
    [[7, 0, 1, 1], [2, 2, 5, 0], [0, 3, 3, 3], [1, 6, 2, 4]],
    [[1, 1, 6, 2], [0, 5, 2, 2], [4, 4, 0, 1], [3, 0, 5, 3]],
    [[3, 2, 1, 4], [2, 6, 0, 3], [5, 6, 2, 4], [1, 1, 4, 4]],
]


@case
def all_to_all_uneven_healthy(folder: Path) -> Truth:
    rs = ranks()
    for sp in SPLITS:
        for r in rs:
            i = r.rank
            r.coll("all_to_all", [[sp[i][j], 64] for j in range(WORLD)],
                   [[sp[j][i], 64] for j in range(WORLD)], line=130)
            r.coll("all_reduce", [[1024]], line=101)
    save(folder, rs)
    return truth("healthy", "healthy", [], None, False, 7,
                 "all_to_all with uneven splits: every rank records other sizes, and what i sends to j always "
                 "equals what j expects from i",
                 f"{PGNCCL} ProcessGroupNCCL::alltoall; FACTS.md 5 (fr_trace "
                 "test_all_to_all_single_uneven_splits_are_not_a_mismatch)")


@case
def all_to_all_single_uneven_healthy(folder: Path) -> Truth:
    rs = ranks(timing=True)
    for sp in SPLITS:
        for r in rs:
            i = r.rank
            r.coll("all_to_all", [[sum(sp[i]), 64]], [[sum(sp[j][i] for j in range(WORLD)), 64]], line=131)
    save(folder, rs)
    return truth("healthy", "healthy", [], None, False, 7,
                 "all_to_all_single with uneven splits: totals differ by rank and step, the group's input and "
                 "output totals balance at every seq",
                 f"{PGNCCL} ProcessGroupNCCL::alltoall_base (records the one input and output tensor)")


@case
def all_to_all_misconfigured_split(folder: Path) -> Truth:
    rs = ranks()
    for sp in SPLITS[:5]:
        for r in rs:
            i = r.rank
            r.coll("all_to_all", [[sp[i][j], 64] for j in range(WORLD)],
                   [[sp[j][i], 64] for j in range(WORLD)], line=130)
            r.coll("all_reduce", [[1024]], line=101)
    sp = SPLITS[5]
    for r in rs:
        i = r.rank
        ins = [[sp[i][j], 64] for j in range(WORLD)]
        if i == 2:
            ins[1] = [7, 64]  # rank 2 sends 7 rows to rank 1, which expects 6
        r.coll("all_to_all", ins, [[sp[j][i], 64] for j in range(WORLD)], line=130, state="scheduled")
    save(folder, rs)
    return truth("problem", "size_mismatch", [2], ("0", 11, "nccl:all_to_all"), False, 7,
                 "all_to_all #11: rank 2's input splits sum to 18 rows but its peers' output splits expect 17 "
                 "from it (rank 1 expects 6, rank 2 sends 7); every other rank's inputs match what peers expect",
                 f"{PGNCCL} ProcessGroupNCCL::alltoall (per-peer send/recv in one group)")


# ---- 9. every dump of a rank --------------------------------------------------------------------------

@case
def second_dump_named_final(folder: Path) -> Truth:
    rs = ranks()
    early = None
    for step in range(4):
        for r in rs:
            r.coll("all_reduce", [[4096]], line=101)
            r.coll("all_gather", [[256]], [[1024]], line=105)
        if step == 2:
            early = rs[0].dump()  # an on-demand dump of rank 0 at step 2
    for r in rs:
        if r.rank == 0:
            r.coll("broadcast", [[4096]], line=140, state="scheduled")
        else:
            r.coll("all_reduce", [[4096]], line=101, state="scheduled")
    save(folder, rs, skip=(0,))
    assert early is not None
    write_pickle(folder / "nccl_trace_rank_0", early)
    write_pickle(folder / "nccl_trace_rank_0.final", rs[0].dump())
    return truth("problem", "desync", [0], ("0", 9, "nccl:all_reduce"), False, 9,
                 "rank 0 has two dumps: nccl_trace_rank_0 (on demand, ends at seq 6) and nccl_trace_rank_0.final "
                 "(the later one, record ids to 8): at seq 9 rank 0 issued broadcast where 1-3 issued all_reduce",
                 "FACTS.md 5 (more than one file per rank; TORCH_FR_DUMP_TEMP_FILE prefix + rank); issue 24 "
                 "principle 9")


@case
def second_dump_dot1_is_the_timeout_dump(folder: Path) -> Truth:
    rs = ranks(timing=True)
    early = None
    for step in range(8):
        for r in rs:
            r.coll("all_reduce", [[8192]], line=101)
        if step == 4:
            early = rs[2].dump()
    for r in rs:
        r.coll("all_reduce", [[8192]], line=101, state="scheduled" if r.rank == 2 else "started")
        r.coll("all_reduce", [[8192]], line=101, state="scheduled")
    save(folder, rs, skip=(2,))
    assert early is not None
    write_pickle(folder / "nccl_trace_rank_2", early)
    write_pickle(folder / "nccl_trace_rank_2.1", rs[2].dump())
    return truth("problem", "gpu_hang", [2], ("0", 9, "nccl:all_reduce"), True, 9,
                 "rank 2 has nccl_trace_rank_2 (on demand, ends at #5, all completed) and nccl_trace_rank_2.1 (the "
                 "timeout dump): at #9 rank 2 is scheduled while 0, 1, 3 started it (timing on)",
                 "FACTS.md 5 (two dumps of a rank; TORCH_FR_DUMP_DYNAMIC_FILE_NAME); issue 24 principle 9")


OOM_LOG = """[rank3]: step 7
[rank3]: Traceback (most recent call last):
[rank3]:   File "/workspace/train.py", line 240, in <module>
[rank3]:     main()
[rank3]:   File "/workspace/train.py", line 211, in main
[rank3]:     train_step(model, batch)
[rank3]:   File "/workspace/train.py", line 96, in train_step
[rank3]:     loss = model(batch).loss
[rank3]:            ^^^^^^^^^^^^
[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of \
79.15 GiB of which 1.02 GiB is free. Of the allocated memory 75.90 GiB is allocated by PyTorch.
"""
RETRY_LOG = """[rank1]: step 3
[rank1]: WARNING metrics push failed, retrying in 5 s
Traceback (most recent call last):
  File "/workspace/metrics.py", line 41, in push
    conn.request("POST", "/metrics/job/train", body)
ConnectionResetError: [Errno 104] Connection reset by peer
[rank1]: step 4
[rank1]: metrics push ok
[rank1]: step 5
[rank1]: step 6
[rank1]: step 7
/workspace/train.py:88: UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly
"""


@case
def log_oom_crash_no_dump(folder: Path) -> Truth:
    rs = ranks()
    for _ in range(7):
        for r in rs:
            r.coll("all_reduce", [[8192]], line=101)
    for r in rs:
        r.coll("all_reduce", [[8192]], line=101, state="scheduled")
    save(folder, rs, skip=(3,))
    (folder / "rank3.log").write_text(OOM_LOG)
    (folder / "rank1.log").write_text(RETRY_LOG)
    return truth("problem", "missing_rank", [3], ("0", 8, "nccl:all_reduce"), False, 8,
                 "0-2 wait in all_reduce #8; rank 3 left no dump and its log ends in an uncaught "
                 "torch.OutOfMemoryError in the forward pass: the cause, tied to the rank that stopped; rank 1's "
                 "retried ConnectionResetError and the UserWarning are noise",
                 "issue 24 principle 8; torchrun's [rankN]: prefixed tracebacks (torch/distributed/elastic)")


# ---- 10. timing on and off, coalesced, ring wrap ----------------------------------------------------

@case
def gpu_hang_timing_on(folder: Path) -> Truth:
    rs = ranks(timing=True)
    for _ in range(6):
        for r in rs:
            r.coll("all_reduce", [[8192]], line=101)
    for r in rs:
        r.coll("all_reduce", [[8192]], line=101, state="scheduled" if r.rank == 1 else "started")
        r.coll("all_reduce", [[8192]], line=101, state="scheduled")
    save(folder, rs)
    return truth("problem", "gpu_hang", [1], ("0", 7, "nccl:all_reduce"), True, 10,
                 "timing on: all_reduce #7 started on 0, 2, 3 and still scheduled on 1 (a kernel before it on "
                 "rank 1's stream never finished); #8 scheduled everywhere is a consequence",
                 f"{FRCPP} state from the start event (TORCH_NCCL_ENABLE_TIMING=1)")


@case
def gpu_hang_timing_on_json(folder: Path) -> Truth:
    t = gpu_hang_timing_on(folder)
    for p in folder.glob("nccl_trace_rank_*"):
        p.unlink()
    rs = ranks(timing=True)
    for _ in range(6):
        for r in rs:
            r.coll("all_reduce", [[8192]], line=101)
    for r in rs:
        r.coll("all_reduce", [[8192]], line=101, state="scheduled" if r.rank == 1 else "started")
        r.coll("all_reduce", [[8192]], line=101, state="scheduled")
    save(folder, rs, fmt="json")
    t["rationale"] = "the same as gpu_hang_timing_on, written as _dump_fr_trace_json writes it (no frames, 0 times)"
    return t


@case
def all_scheduled_timing_off(folder: Path) -> Truth:
    rs = ranks()
    for _ in range(6):
        for r in rs:
            r.coll("all_reduce", [[8192]], line=101)
    for r in rs:
        r.coll("all_reduce", [[8192]], line=101, state="scheduled")
        r.coll("all_reduce", [[8192]], line=101, state="scheduled")
    save(folder, rs)
    return truth("inconclusive", "inconclusive", [], ("0", 7, "nccl:all_reduce"), False, 10,
                 "timing off: the same hang as gpu_hang_timing_on, but no start events, so #7 is 'scheduled' on "
                 "every rank: all enqueued it, none completed; a GPU hang on any rank and a network hang look alike",
                 f"{FRCPP} state ('started' only with a start event; TORCH_NCCL_ENABLE_TIMING off by default)",
                 status=["inconclusive", "problem"],
                 why="a hang is shown (problem) but its cause is not: either status is defensible")


@case
def coalesced_size_mismatch(folder: Path) -> Truth:
    rs = ranks()
    for _ in range(4):
        for r in rs:
            r.coll("all_reduce", [[4096]], line=101)
            r.coalesced([("all_reduce", [[2048]]), ("all_reduce", [[2048]]), ("all_reduce", [[64]])])
    for r in rs:
        r.coll("all_reduce", [[4096]], line=101)
        second = [[1024]] if r.rank == 3 else [[2048]]
        r.coalesced([("all_reduce", [[2048]]), ("all_reduce", second), ("all_reduce", [[64]])], state="scheduled")
    save(folder, rs)
    return truth("problem", "size_mismatch", [3], ("0", 10, "nccl:all_reduce"), False, 10,
                 "coalesced region #10: rank 3's second all_reduce is [1024] where it and every peer always had "
                 "[2048]; the region's nccl:coalesced entry stays scheduled on all",
                 f"{PGNCCL} startCoalescing/endCoalescing; {FRTEST} testBuildDB cases 3-6",
                 op=["nccl:all_reduce", "nccl:coalesced"], why="the region's seq holds both names")


def _wrapped(mutate_last: bool) -> list[Rank]:
    side = Group("1", "pp_pair", [0, 1])
    rs = ranks(groups=[DEFAULT, side], buffer=24)
    for _ in range(20):
        for r in rs:
            r.coll("all_reduce", [[1024]], line=101)
            if r.rank < 2:
                r.coll("all_gather", [[64]], [[128]], pg="1", line=118)
                r.coll("all_gather", [[64]], [[128]], pg="1", line=119)
    for r in rs:
        if mutate_last and r.rank == 2:
            continue
        r.coll("all_reduce", [[1024]], line=101, state="scheduled" if mutate_last else "completed")
    return rs


@case
def ring_wrapped_differently_healthy(folder: Path) -> Truth:
    save(folder, _wrapped(False))
    return truth("healthy", "healthy", [], None, False, 10,
                 "buffer of 24 entries: ranks 0 and 1 (also in pg 1) hold only pg 0 #14-21, ranks 2 and 3 hold "
                 "all of pg 0 #1-21; windows differ, every entry completed",
                 "FACTS.md 1 (ring wraps; align by (pg, collective_seq_id)); FlightRecorder.hpp max_entries_")


@case
def ring_wrapped_missing_rank(folder: Path) -> Truth:
    save(folder, _wrapped(True))
    return truth("problem", "missing_rank", [2], ("0", 21, "nccl:all_reduce"), False, 10,
                 "rings wrapped differently (24 entries; ranks 0, 1 hold only pg 0 #14 on); 0, 1, 3 wait in pg 0 "
                 "all_reduce #21, rank 2 completed #20 and never enqueued #21",
                 "FACTS.md 1 (ring wraps); FlightRecorder.hpp (ring of max_entries_, record ids keep counting)")


# ---- real torch 2.13 gloo runs (kept as files; `--import-real RUNS` copies a fresh set in) -------------

RUN = ".venv/bin/python tests/blind/gloo_runs.py {scenario} RUNS/{scenario}"
GLOO = "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp"
REAL: dict[str, tuple[str, tuple[str, ...], Truth]] = {
    "gloo_real_healthy_handled_traceback": ("healthy_logs", ("*",), truth(
        "healthy", "healthy", [], None, False, 8,
        "real 4-rank gloo job that finished (all exit 0, 36 entries each); rank1.log holds a caught and printed "
        "ConnectionResetError traceback (a metrics push) and every log a UserWarning: neither is a cause",
        "real run: gloo_runs.py healthy_logs (traceback.print_exc in an except block; warnings.warn)")),
    "gloo_real_cpu_stuck_rank3_noisy_logs": ("cpu_stuck_rank3", ("*",), truth(
        "problem", "missing_rank", [3], ("0", 11, "gloo:all_reduce"), False, 8,
        "real gloo: rank 3 sleeps before step 5's all_reduce (#11); 0-2 enqueued #11 and time out; rank 3's "
        "dump ends at #10. rank0.log's UserWarning and handled KeyError traceback are noise; rank 3's later "
        "'Connection closed by peer' is a consequence",
        "real run: gloo_runs.py cpu_stuck_rank3")),
    "gloo_real_subgroup_skip_desc_undefined": ("subgroup_skip", ("*",), truth(
        "problem", "missing_rank", [2], ("1", 5, "gloo:all_reduce"), False, 4,
        "real gloo: subgroup [1, 2, 3] from new_group (desc 'undefined', pg_config {'': {'ranks': '[]'}} on "
        "members); rank 2 never enqueued the subgroup's all_reduce #5 and waits in pg 0 #6 with rank 0, "
        "while 1 and 3 wait in pg 1 #5",
        "real run: gloo_runs.py subgroup_skip; distributed_c10d.new_group")),
    "gloo_real_one_dump_of_four": ("cpu_stuck_rank3", ("nccl_trace_rank_0",), truth(
        "inconclusive", "inconclusive", [], None, False, 5,
        "only rank 0's dump of a 4-rank job (the cpu_stuck_rank3 run): rank 0 waits in all_reduce #11; what "
        "ranks 1-3 issued is unknown, so no rank can be said to have skipped it",
        "real run: gloo_runs.py cpu_stuck_rank3, rank 0's file alone",
        category=["inconclusive", "no_dump"], why="one dump leaves nothing to compare")),
    "gloo_real_rooted_rotating_healthy": ("rooted_rotating", ("nccl_trace_rank_*",), truth(
        "healthy", "healthy", [], None, False, 1,
        "real gloo: gather and scatter with the root rotating over 0-3; the root records [[4, 16]], the others "
        "[] (gloo writes no undefined tensor); every run exited 0",
        f"real run: gloo_runs.py rooted_rotating; {GLOO} gather/scatter")),
    "gloo_real_gather_two_roots": ("two_roots", ("nccl_trace_rank_*",), truth(
        "problem", "desync", [2], ("0", 12, "gloo:gather"), False, 1,
        "real gloo: gather's root is 0 at every step, but at step 5 (#12) rank 2 passes dst=2: two roots at one "
        "seq; rank 2 departs from its own and the group's history",
        f"real run: gloo_runs.py two_roots; {GLOO} gather",
        category=["desync", "size_mismatch"],
        why="a root disagreement is a collective-argument mismatch; its trace is a size difference")),
    "gloo_real_all_to_all_single_uneven_healthy": ("a2a_uneven", ("nccl_trace_rank_*",), truth(
        "healthy", "healthy", [], None, False, 7,
        "real gloo: all_to_all_single with uneven splits that balance; per-rank sizes differ by design",
        f"real run: gloo_runs.py a2a_uneven; {GLOO} alltoall_base")),
}


def import_real(runs: Path) -> None:
    for name, (scenario, patterns, t) in REAL.items():
        src = runs / scenario
        if not src.is_dir():
            print(f"{name}: {src} missing, skipped")
            continue
        folder = CASES / name
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for pattern in patterns:
            for f in sorted(src.glob(pattern)):
                if f.is_file() and f.name != "FLAG":
                    shutil.copy2(f, folder / f.name)
        t = dict(t, made_by=RUN.format(scenario=scenario))
        (folder / "truth.json").write_text(json.dumps(t, indent=2) + "\n")
        print(f"{name}: {sorted(p.name for p in folder.iterdir())}")


def build(names: list[str] | None = None, root: Path = CASES) -> dict[str, Truth]:
    out = {}
    for name, fn in BUILDERS.items():
        if names and name not in names:
            continue
        folder = root / name
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        t = fn(folder)
        (folder / "truth.json").write_text(json.dumps(t, indent=2) + "\n")
        out[name] = t
    return out


def main() -> int:
    args = sys.argv[1:]
    if args and args[0] == "--import-real":
        import_real(Path(args[1]))
        return 0
    if args and args[0] == "--check":
        with tempfile.TemporaryDirectory() as tmp:
            build(root=Path(tmp))
            made = {p.relative_to(tmp): p.read_bytes() for p in Path(tmp).rglob("*") if p.is_file()}
        have = {p.relative_to(CASES): p.read_bytes() for n in BUILDERS for p in (CASES / n).rglob("*")
                if p.is_file()}
        bad = sorted(str(p) for p in set(made) | set(have) if made.get(p) != have.get(p))
        print("differs:" if bad else "fabricated cases are up to date", *bad, sep="\n  ")
        return 1 if bad else 0
    for name, t in build(args or None).items():
        print(f"{name}: {t['status']} {t['category']} {t['culprit_ranks']} {t['earliest_branch']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
