"""Flight Recorder combined with the logs, the container ends and the nodes: who failed first and why, and
when a node's own signals make a verdict hardware-class."""

from __future__ import annotations

from frwatch_analyzers.analyze import analyze_dumps
from frwatch_analyzers.evidence.causes import log_causes, with_causes
from frwatch_analyzers.evidence.logtext import decode_tail
from frwatch_analyzers.evidence.read import Gathered, LogFile
from frwatch_analyzers.report.terminal import render
from frwatch_analyzers.store.manifest import ContainerEnd, Manifest, PodRecord
from frwatch_analyzers.store.node_record import NodeCondition, NodeEvent, NodeRecord
from frwatch_analyzers.verdict import Category, CauseKind, CulpritKind, Status, Verdict
from frwatch_dev.dumps import world

YEAR = 2026


def _manifest(n: int, ended: dict[int, ContainerEnd] | None = None) -> Manifest:
    ended = ended or {}
    pods = [
        PodRecord(pod=f"job-worker-{r}", node=f"gpu-{r}", ranks=[r], ended=[ended[r]] if r in ended else [])
        for r in range(n)
    ]
    return Manifest(world_size=n, pods=pods)


def _log(rank: int, text: str, pod: str = "") -> LogFile:
    return LogFile(
        f"logs/job-worker-{rank}/trainer.txt",
        (rank,),
        decode_tail(text.encode()),
        pod or f"job-worker-{rank}",
        "trainer",
        "tail",
    )


def _missing_rank_3() -> Verdict:
    dumps = world(8).all_reduce(steps=5).rank(3).stops_at(5).dumps()
    dumps.pop(3)
    return analyze_dumps(dumps, world_size=8, manifest=_manifest(8))


def _inconclusive_hang() -> Verdict:
    """Every gloo rank waits in the same all_reduce: the dumps alone cannot say who or what."""
    v = analyze_dumps(
        world(8, backend="gloo").all_reduce(steps=5).all_started_none_completed_at(5).dumps(),
        world_size=8,
        manifest=_manifest(8),
    )
    assert v.status == Status.inconclusive and not v.hardware_class
    return v


OOM = """\
2026-11-25T14:39:35.100000Z step 412 loss 1.25
2026-11-25T14:39:36.000000Z [rank3]: Traceback (most recent call last):
2026-11-25T14:39:36.000000Z [rank3]:   File "/workspace/train.py", line 88, in train_step
2026-11-25T14:39:36.000000Z [rank3]:     loss = model(batch).sum()
2026-11-25T14:39:36.000000Z [rank3]:   File "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1751, in _call_impl
2026-11-25T14:39:36.000000Z [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789)
"""


def _peer_lost(rank: int, at: str) -> LogFile:
    return _log(
        rank,
        f"{at} [rank{rank}]: RuntimeError: [pair.cc:537] Read error [10.0.0.3]:5555: Connection reset by peer\n",
    )


def test_the_first_rank_to_fail_names_the_headline_with_its_exception_line_step_and_lead() -> None:
    logs = [_log(3, OOM)] + [_peer_lost(r, "2026-11-25T14:39:36.400000Z") for r in (0, 1, 2, 4, 5, 6, 7)]
    v = with_causes(_missing_rank_3(), Gathered(logs=logs), _manifest(8), year=YEAR)
    assert v.headline == (
        "rank 3 crashed first: torch.OutOfMemoryError at train.py:88 (step 412), 0.4 s before ranks 0-2,4-7 "
        "lost their peer"
    )
    first = v.causes[0]
    assert (first.rank, first.kind, first.first, first.exception, first.location) == (
        3,
        CauseKind.cuda_oom,
        True,
        "torch.OutOfMemoryError",
        "train.py:88",
    )
    assert first.time == "2026-11-25T14:39:36Z" and first.step == 412 and first.line == 6
    assert (first.pod, first.node, first.source) == ("job-worker-3", "gpu-3", "logs/job-worker-3/trainer.txt")
    assert {c.rank for c in v.causes if c.kind == CauseKind.peer_lost} == {0, 1, 2, 4, 5, 6, 7}
    assert v.category == Category.missing_rank and v.culprit_ranks == [3] and not v.hardware_class
    assert len(v.short) <= 120 and v.short.startswith("rank 3 crashed: torch.OutOfMemoryError at train.py:88")
    # the secret in the message never reaches the verdict or the report
    text = v.model_dump_json() + render(v)
    assert "hf_AbCdEf" not in text and "HF_TOKEN=[masked]" in text
    assert "Log around it (logs/job-worker-3/trainer.txt, line 6):" in render(v)


def test_without_times_the_one_rank_with_a_cause_is_named_and_no_lead_is_claimed() -> None:
    crash = 'Traceback (most recent call last):\n  File "/app/train.py", line 9, in step\nValueError: bad shard 3\n'
    logs = [_log(3, crash), _peer_lost(0, ""), _peer_lost(1, "")]
    v = with_causes(_missing_rank_3(), Gathered(logs=logs), _manifest(8), year=YEAR)
    assert v.headline == "rank 3 crashed first: ValueError at train.py:9; then ranks 0-1 only lost their peer"
    assert "ValueError: bad shard 3" in v.summary


def test_a_sigkilled_rank_is_named_as_killed_with_its_exit_code_and_the_step_its_log_last_named() -> None:
    m = _manifest(8, {3: ContainerEnd(container="trainer", exit_code=137, reason="Error", signal=9)})
    last_words = _log(3, "rank 3: step 2: done\nrank 3: step 3: loading a batch\n")
    v = with_causes(_missing_rank_3(), Gathered(logs=[last_words]), m, year=YEAR)
    assert v.headline.startswith(
        "rank 3 was killed: container trainer ended with exit code 137 (Error), signal 9 (step 3)"
    )
    assert v.causes[0].kind == CauseKind.killed and v.causes[0].source == "manifest.json"


def test_an_oom_killed_container_is_named_as_such() -> None:
    m = _manifest(8, {3: ContainerEnd(container="trainer", exit_code=137, reason="OOMKilled")})
    v = with_causes(_missing_rank_3(), Gathered(), m, year=YEAR)
    assert v.causes[0].kind == CauseKind.oom_killed and v.headline.startswith("rank 3 was OOM-killed")


NCCL_NET = (
    "job-worker-5:81:99 [5] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.0.0.6<54862> "
    "with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
)
XID_NODE = NodeRecord(
    node="gpu-5",
    events=(
        NodeEvent(
            type="Warning",
            reason="XidError",
            count=3,
            source_component="nvsentinel",
            message="NVRM: Xid (PCI:0000:3b:00): 79, pid=2213, GPU has fallen off the bus.",
        ),
    ),
    read_at="2026-11-25T14:45:00Z",
)


def test_an_nccl_network_error_and_an_xid_event_on_its_node_make_an_inconclusive_hang_hardware_class() -> (
    None
):
    v = with_causes(
        _inconclusive_hang(),
        Gathered(logs=[_log(5, NCCL_NET)], nodes={"gpu-5": XID_NODE}),
        _manifest(8),
        year=YEAR,
    )
    assert v.hardware_class and v.suspect_nodes == ["gpu-5"]
    assert (v.status, v.category, v.culprit_ranks, v.culprit_kind) == (
        Status.problem,
        Category.network_hang,
        [5],
        CulpritKind.network_hang,
    )
    signal = next(c for c in v.causes if c.kind == CauseKind.node_event)
    assert signal.node == "gpu-5" and signal.source == "nodes/gpu-5.json" and "Xid" in signal.message
    assert v.headline.startswith("hardware suspected: node gpu-5 reports Event XidError x3")
    assert "while rank 5 there logged NCCL WARN NET/IB" in v.headline
    report = render(v)
    assert "  - node gpu-5 node_event: Event XidError x3: NVRM: Xid (PCI:0000:3b:00): 79" in report
    assert "  - rank 5 nccl_network_error: NCCL WARN NET/IB : Got completion from peer" in report
    assert "(from nodes/gpu-5.json)" in v.summary and v.next_steps[0].startswith("Check node gpu-5")


def test_the_same_log_and_a_sick_node_that_is_no_suspect_change_nothing() -> None:
    before = _inconclusive_hang()
    other = XID_NODE.model_copy(update={"node": "gpu-2"})
    v = with_causes(
        before, Gathered(logs=[_log(5, NCCL_NET)], nodes={"gpu-2": other}), _manifest(8), year=YEAR
    )
    assert (v.status, v.category, v.hardware_class, v.suspect_nodes, v.headline) == (
        before.status,
        before.category,
        False,
        [],
        before.headline,
    )
    assert [c.kind for c in v.causes] == [CauseKind.nccl_network_error]  # the log is still shown as evidence


def test_an_unhealthy_gpu_condition_on_the_crashed_ranks_node_is_the_signal_named() -> None:
    sick = NodeRecord(
        node="gpu-3",
        conditions=(
            NodeCondition(type="Ready", status="True"),
            NodeCondition(type="GpuHealthy", status="False"),
            NodeCondition(type="GpuXidError", status="True", reason="XidCritical", message="Xid 48 on GPU 3"),
        ),
    )
    crash = "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
    v = with_causes(
        _missing_rank_3(), Gathered(logs=[_log(3, crash)], nodes={"gpu-3": sick}), _manifest(8), year=YEAR
    )
    conditions = [c for c in v.causes if c.kind == CauseKind.node_condition]
    assert [c.message for c in conditions] == ["condition GpuXidError=True (XidCritical): Xid 48 on GPU 3"]
    assert v.hardware_class and v.suspect_nodes == ["gpu-3"] and v.category == Category.missing_rank
    assert v.headline.startswith("rank 3 crashed: RuntimeError: CUDA error: uncorrectable ECC error")


def test_healthy_nodes_raise_nothing() -> None:
    calm = NodeRecord(
        node="gpu-3",
        conditions=(
            NodeCondition(type="Ready", status="True"),
            NodeCondition(type="MemoryPressure", status="False"),
        ),
        events=(NodeEvent(type="Normal", reason="NodeReady", message="Node gpu-3 status is now: NodeReady"),),
    )
    v = with_causes(_missing_rank_3(), Gathered(nodes={"gpu-3": calm}), _manifest(8), year=YEAR)
    assert not v.hardware_class and v.causes == []


def test_an_xid_line_a_process_printed_is_evidence_but_raises_nothing() -> None:
    printed = (
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=2213, name=python, GPU has fallen off the bus.\n" + NCCL_NET
    )
    before = _inconclusive_hang()
    v = with_causes(before, Gathered(logs=[_log(5, printed)]), _manifest(8), year=YEAR)
    assert not v.hardware_class and v.category == before.category and v.suspect_nodes == []
    assert CauseKind.xid in {c.kind for c in v.causes}


def test_a_healthy_job_that_logged_a_caught_exception_stays_healthy() -> None:
    healthy = analyze_dumps(world(4).all_reduce(steps=5).dumps(), world_size=4, manifest=_manifest(4))
    caught = 'Traceback (most recent call last):\n  File "/app/io.py", line 3, in read\nValueError: bad row, skipped\n'
    v = with_causes(healthy, Gathered(logs=[_log(1, caught)]), _manifest(4), year=YEAR)
    assert (v.status, v.category, v.headline) == (healthy.status, healthy.category, healthy.headline)
    # a cause needs a consequence: rank 1's dump shows it took part in every collective, so nothing stopped it
    assert v.causes == []
    assert "rank 1's ValueError at io.py:3 (logs/job-worker-1/trainer.txt, line 3)" in v.summary
    assert "completed every collective its peers did" in v.summary


def test_a_pod_log_of_several_ranks_is_split_by_torchruns_line_prefixes() -> None:
    pods = [
        PodRecord(pod="job-worker-0", node="gpu-0", ranks=[0, 1, 2, 3]),
        PodRecord(pod="job-worker-1", node="gpu-1", ranks=[4, 5, 6, 7]),
    ]
    m = Manifest(world_size=8, pods=pods)
    text = (
        "[default2]:Traceback (most recent call last):\n"
        '[default2]:  File "/app/train.py", line 7, in step\n'
        "[default2]:AssertionError: loss is nan\n"
        "[default0]:RuntimeError: Connection reset by peer\n"
    )
    log = LogFile(
        "logs/job-worker-1/trainer.txt", (4, 5, 6, 7), decode_tail(text.encode()), "job-worker-1", "trainer"
    )
    dumps = world(8).all_reduce(steps=5).rank(6).stops_at(5).dumps()
    dumps.pop(6)
    v = with_causes(analyze_dumps(dumps, world_size=8, manifest=m), Gathered(logs=[log]), m, year=YEAR)
    assert [(c.rank, c.kind, c.node) for c in v.causes] == [
        (6, CauseKind.exception, "gpu-1"),
        (4, CauseKind.peer_lost, "gpu-1"),
    ]
    assert v.headline == "rank 6 crashed first: AssertionError at train.py:7; then rank 4 only lost its peer"


def test_a_sigabrt_container_end_is_an_abort_and_the_log_says_more_when_it_has_it() -> None:
    m = _manifest(8, {3: ContainerEnd(container="pytorch", exit_code=134, reason="Error")})
    alone = with_causes(_missing_rank_3(), Gathered(), m, year=YEAR)
    assert alone.causes[0].kind == CauseKind.aborted and alone.headline.startswith(
        "rank 3 aborted: container pytorch"
    )
    abort = (
        "terminate called after throwing an instance of 'gloo::EnforceNotMet'\n  what():  [enforce fail at "
        "/x/gloo/transport/tcp/pair.cc:456] op.preamble.length <= op.nbytes. 116 vs 108. Received data size "
        "doesn't match expected size.\n"
    )
    told = with_causes(_missing_rank_3(), Gathered(logs=[_log(3, abort)]), m, year=YEAR)
    assert told.causes[0].kind == CauseKind.gloo_abort and told.causes[0].first
    assert told.headline.startswith("rank 3 aborted: gloo aborted the process: received 116 bytes where 108")


#: A torchrun pod of ranks 2 and 3 (torch 2.13, no ``--tee``: the ranks' lines carry no prefix) whose rank 2
#: raised: its traceback, then torchrun's own ChildFailedError traceback and summary (a real run's, trimmed).
TORCHRUN_POD = """\
Traceback (most recent call last):
  File "/app/faulty_training.py", line 591, in main
    trainer.run()
  File "/app/faulty_training.py", line 376, in load_batch
    raise ValueError(f"corrupt sample in shard {rank} at step {step}: cannot decode record")
ValueError: corrupt sample in shard 2 at step 3: cannot decode record
W1126 03:15:27.915000 1150 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 1187 closing \
signal SIGTERM
E1126 03:15:27.935000 1150 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) \
local_rank: 0 (pid: 1185) of binary: /usr/bin/python
Traceback (most recent call last):
  File "/usr/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
faulty_training FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-26_03:15:27
  host      : job-node-0-1
  rank      : 3 (local_rank: 1)
  exitcode  : -15 (pid: 1187)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 1187
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_03:15:27
  host      : job-node-0-1
  rank      : 2 (local_rank: 0)
  exitcode  : 1 (pid: 1185)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def _torchrun_pods() -> Manifest:
    pods = [
        PodRecord(pod="job-node-0-0", node="node-a", ranks=[0, 1]),
        PodRecord(pod="job-node-0-1", node="node-b", ranks=[2, 3]),
    ]
    return Manifest(world_size=4, pods=pods)


def _torchrun_log(ranks: tuple[int, ...] = (2, 3)) -> LogFile:
    return LogFile(
        "logs/job-node-0-1/node.txt",
        ranks,
        decode_tail(TORCHRUN_POD.encode()),
        "job-node-0-1",
        "node",
        "tail",
    )


def test_an_unprefixed_traceback_in_a_torchrun_pod_is_the_rank_its_summary_names_and_torchruns_own_is_none() -> (
    None
):
    m = _torchrun_pods()
    dumps = world(4, backend="gloo").all_reduce(steps=4).rank(2).stops_at(4).dumps()
    dumps.pop(2)
    v = with_causes(
        analyze_dumps(dumps, world_size=4, manifest=m), Gathered(logs=[_torchrun_log()]), m, year=YEAR
    )
    assert [(c.rank, c.kind, c.exception, c.location, c.step) for c in v.causes] == [
        (2, CauseKind.exception, "ValueError", "faulty_training.py:376", 3)
    ]  # torchrun's ChildFailedError is the launcher reporting rank 2, not a cause of its own
    assert v.category == Category.missing_rank and v.culprit_ranks == [2]
    assert v.headline == "rank 2 crashed: ValueError at faulty_training.py:376 (step 3)"


def test_the_peers_having_retired_the_collective_the_dead_rank_never_issued_is_still_that_rank_missing() -> (
    None
):
    """gloo retires a collective that failed because a member died as if it completed: every surviving rank
    idle at #4, so Flight Recorder alone is inconclusive; the logs say rank 2 crashed first, without a dump."""
    m = _torchrun_pods()
    dumps = world(4, backend="gloo").all_reduce(steps=4).dumps()
    dumps.pop(2)
    fr_only = analyze_dumps(dumps, world_size=4, manifest=m)
    assert fr_only.category == Category.inconclusive and fr_only.missing_dumps == [2]
    v = with_causes(fr_only, Gathered(logs=[_torchrun_log()]), m, year=YEAR)
    assert (v.category, v.status, v.culprit_ranks, v.culprit_kind) == (
        Category.missing_rank, Status.problem, [2], CulpritKind.crashed,
    )  # fmt: skip
    assert v.headline == "rank 2 crashed: ValueError at faulty_training.py:376 (step 3)"
    caught = with_causes(fr_only, Gathered(logs=[_log(0, "step 3\nValueError: bad batch\n")]), m, year=YEAR)
    assert caught.category == Category.inconclusive  # a rank that dumped failing first says nothing of rank 2


def test_a_line_naming_a_rank_its_pod_does_not_hold_is_no_ones() -> None:
    """A ``[rank2]:`` line in the log of a pod the manifest gives rank 3 alone is not pinned on rank 3."""
    m = _torchrun_pods()
    text = '[rank2]:Traceback (most recent call last):\n[rank2]:  File "/app/t.py", line 7, in f\n[rank2]:ValueError: bad\n'
    log = LogFile("logs/job-node-0-1/node.txt", (3,), decode_tail(text.encode()), "job-node-0-1", "node")
    [cause] = log_causes(log, m, YEAR)
    assert (cause[0].rank, cause[0].exception) == (None, "ValueError")
