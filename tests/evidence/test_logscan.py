"""Each failure shape a rank's log can show, on lines shaped like the real ones (sources in logscan.py)."""

from __future__ import annotations

import calendar

import pytest
from test_causes import TORCHRUN_POD

from frwatch_analyzers.evidence.logscan import Signal, line_time, scan

OOM_TRACEBACK = """\
[rank3]:[W1125 14:39:36.000100 412 torch/distributed/c10d/ProcessGroupNCCL.cpp:1200] step 411 done
[rank3]: Traceback (most recent call last):
[rank3]:   File "/workspace/train.py", line 140, in <module>
[rank3]:     main()
[rank3]:   File "/workspace/train.py", line 88, in train_step
[rank3]:     loss = model(batch).sum()
[rank3]:   File "/usr/local/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1751, in _wrapped_call_impl
[rank3]:     return self._call_impl(*args, **kwargs)
[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB
"""


def _one(text: str) -> Signal:
    signals = scan(text.splitlines(), year=2026)
    assert len(signals) == 1, signals
    return signals[0]


def test_a_cuda_oom_traceback_names_the_exception_the_user_frame_the_step_and_the_time() -> None:
    s = _one(OOM_TRACEBACK)
    assert (s.kind, s.exception, s.location, s.rank, s.primary) == (
        "cuda_oom",
        "torch.OutOfMemoryError",
        "train.py:88",
        3,
        True,
    )
    assert s.message.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert s.step == 411 and s.line == 8
    assert s.time == calendar.timegm((2026, 11, 25, 14, 39, 36, 0, 0, 0)) + 0.0001


def test_a_chained_traceback_keeps_the_last_exception() -> None:
    text = """\
Traceback (most recent call last):
  File "/app/data.py", line 10, in read
KeyError: 'label'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/app/data.py", line 12, in read
    raise ValueError("bad record") from None
ValueError: bad record
"""
    signals = scan(text.splitlines())
    assert [(s.exception, s.location) for s in signals] == [
        ("KeyError", "data.py:10"),
        ("ValueError", "data.py:12"),
    ]


@pytest.mark.parametrize(
    ("line", "kind", "primary"),
    [
        # NVIDIA/nccl#1405
        (
            "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
            "10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
            "nccl_network_error",
            False,
        ),
        (
            "node-1:81:99 [0] NCCL WARN NET/Socket : peer 10.0.0.2<43021> message truncated",
            "nccl_network_error",
            False,
        ),
        (
            "node-1:81:99 [0] misc/socket.cc:49 NCCL WARN ncclInternalError: Internal check failed.",
            "nccl_internal_error",
            False,
        ),
        (
            "node-1:81:99 [0] NCCL WARN ncclRemoteError: A call failed possibly due to a network error or a remote "
            "process exiting prematurely.",
            "nccl_remote_error",
            False,
        ),
        (
            "[rank0]:[E1125 14:49:37.123456 81 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=412, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
            "600023 milliseconds before timing out.",
            "watchdog_timeout",
            False,
        ),
        (
            "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=2213, name=python, GPU has fallen off the bus.",
            "xid",
            True,
        ),
        (
            "NVRM: Xid (PCI:0000:b7:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) "
            "has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
            "xid",
            True,
        ),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_illegal_address", True),
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "cuda_ecc", True),
        (
            "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] "
            "no error",
            "gloo_connect",
            True,
        ),
        # torch 2.13 gloo, observed (the crash and size workloads)
        (
            "detail='[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
            "[127.0.0.1]:52945. This is typically caused by a remote worker crashing.'",
            "peer_lost",
            False,
        ),
        ("Fatal Python error: Segmentation fault", "segfault", True),
    ],
)
def test_failure_lines_are_classified(line: str, kind: str, primary: bool) -> None:
    s = _one(line)
    assert (s.kind, s.primary) == (kind, primary)
    assert s.message


def test_the_gloo_receive_size_abort_names_both_sizes() -> None:
    # What torch 2.13's gloo prints on the receiver of a larger send (observed with the size workload).
    text = (
        "terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
        "  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] "
        "op.preamble.length <= op.nbytes. 116 vs 108. Received data size doesn't match expected size. Is there a "
        "distributed collective mismatch in your code?\n"
    )
    s = _one(text)
    assert (s.kind, s.exception, s.location, s.line) == (
        "gloo_abort",
        "gloo::EnforceNotMet",
        "pair.cc:456",
        1,
    )
    assert "received 116 bytes where 108 were expected" in s.message


def test_a_lost_peer_traceback_is_a_consequence() -> None:
    text = """\
Traceback (most recent call last):
  File "/app/train.py", line 50, in sync
    dist.all_reduce(grad)
torch.distributed.DistBackendError: [../third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer
"""
    s = _one(text)
    assert (s.kind, s.primary, s.location) == ("peer_lost", False, "train.py:50")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("2026-11-25T14:39:37.250Z Traceback", (2026, 11, 25, 14, 39, 37, 0.25)),
        ("2026-11-25T14:39:37.123456789Z kubelet timestamps", (2026, 11, 25, 14, 39, 37, 0.123456789)),
        ("2026-11-25 15:39:37,500 INFO train: step 3", (2026, 11, 25, 15, 39, 37, 0.5)),
        ("2026-11-25T16:39:37+02:00 local time", (2026, 11, 25, 14, 39, 37, 0.0)),
        ("[E1125 14:39:37.500000 81 ProcessGroupNCCL.cpp:616] x", (2026, 11, 25, 14, 39, 37, 0.5)),
        # torch 2.13's c10 logging prints nanoseconds (observed: the size workload's peers)
        (
            "[rank1]:[W1125 14:57:15.411173114 TCPStore.cpp:125] [c10d] recvValue failed",
            (2026, 11, 25, 14, 57, 15, 0.411173114),
        ),
    ],
)
def test_times_of_the_common_log_prefixes(line: str, expected: tuple[int, ...]) -> None:
    *date, frac = expected
    want = calendar.timegm((*date, 0, 0, 0)) + frac
    got = line_time(line, 2026)
    assert got is not None and abs(got - want) < 1e-6


def test_no_time_and_impossible_times_are_none() -> None:
    assert line_time("ValueError: at 12:00", 2026) is None
    assert line_time("2026-13-45T99:00:00Z", 2026) is None


def test_a_log_repeating_one_warning_keeps_a_bounded_number_of_signals() -> None:
    lines = ["h:1:2 [0] NCCL WARN NET/IB : Got completion from peer with status=12"] * 10_000
    assert len(scan(lines)) == 64


def test_a_hostile_long_line_costs_linear_time() -> None:
    # A line the reader already cut to MAX_LINE_CHARS; patterns are anchored or bounded.
    line = "Traceback (most recent call last):" + ' File "' * 600
    assert scan([line, '  File "' + "a" * 4000, "x" * 4096]) == []


def test_torchruns_root_cause_names_the_rank_it_saw_fail_first() -> None:
    # torch.distributed.elastic's ChildFailedError summary, as printed by torchrun (its format, quoted in
    # public issue threads).
    text = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2023-08-01_01:06:47
  host      : r1n2a6000
  rank      : 4 (local_rank: 4)
  exitcode  : -9 (pid: 208585)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 208585
============================================================
"""
    s = _one(text)
    assert (s.kind, s.rank, s.primary) == ("killed", 4, True)
    assert (
        s.message
        == "torchrun: rank 4 failed first with exit code -9 (Signal 9 (SIGKILL) received by PID 208585)"
    )
    assert s.time == calendar.timegm((2023, 8, 1, 1, 6, 47, 0, 0, 0))
    assert s.exit_code == -9


def test_torchruns_own_traceback_is_not_a_signal_and_its_summary_is() -> None:
    """The launcher's ChildFailedError traceback (torch 2.13's, from a real run) only reports its child:
    the summary after it is the signal, with the exit code (1: the rank raised)."""
    text = TORCHRUN_POD[TORCHRUN_POD.index("Traceback", 1) :]  # from torchrun's own traceback on
    s = _one(text)
    assert (s.kind, s.rank, s.exit_code, s.exception) == ("exit_code", 2, 1, "")
