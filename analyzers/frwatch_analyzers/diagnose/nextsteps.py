"""The two or three probes to run next, chosen by what the culprits did (DESIGN.md: a per-rank step
counter, an "about to call collective" log line with a metadata hash, an assertion that a decision is
identical across ranks), filled with the culprit's call site and nodes. A step never asks for what the
verdict already states (a crashed rank's exit code when the manifest has it)."""

from __future__ import annotations

from ..base.textfmt import op_short, ranks_text
from ..verdict import Category, CulpritKind
from .category import Candidate

#: A crashed rank's steps that only hold while nothing says why it died: :mod:`.causes` replaces them when a
#: log or a container end names the cause.
CRASH_READ_LOGS = (
    "Read the crashed rank's last log lines (kubectl logs --previous) for the exception or the OOM kill "
    "its exit code points at."
)
CRASH_UNSEEN = (
    "If it was killed from outside (OOM, eviction, a lost node), look at the node's memory and events at "
    "that time: a kill leaves no traceback in the rank's own log, only its exit code."
)
CRASH_CHECK_EXIT = (
    "Check the culprit pod's exit code and events (OOMKilled, evicted, crashed) and its last log lines."
)


def next_steps(c: Candidate, sites: list[str], nodes: list[str], exit_known: bool) -> list[str]:
    who = ranks_text(c.culprits) if c.culprits else "the members"
    at = f" at {sites[0]}" if sites else ""
    other = f" and {sites[1]}" if len(sites) > 1 else ""
    node_txt = ", ".join(nodes) if nodes else f"the nodes of {who}"
    name = op_short(c.op)
    kind = c.kind
    unknown = c.states.get("unknown")
    if unknown:
        return [
            f"Collect the dumps of {ranks_text(unknown)} (the files <TORCH_FR_DUMP_TEMP_FILE><rank>, by default "
            "~/.cache/torch/comm_lib_trace_rank_<rank>, on their nodes) and analyze again.",
            f"Read the logs and exit codes of {ranks_text(unknown)}: a rank that crashed says so there.",
        ]
    if kind == CulpritKind.crashed:
        return [CRASH_READ_LOGS if exit_known else CRASH_CHECK_EXIT, CRASH_UNSEEN]
    if kind == CulpritKind.cpu_stuck:
        return [
            f"Look at what {who} is doing on the CPU: py-spy dump --pid <pid> (or faulthandler / "
            "torch.distributed's dump_traceback) shows its Python stack; a data loader, file system or lock "
            "is the usual place.",
            f"Log a per-rank step counter and 'about to call {name}'{at} on every rank: the last line of {who} "
            "shows how far it got.",
        ]
    if kind == CulpritKind.took_another_path:
        return [
            f"Assert that the decision guarding the collective{at} is identical across ranks (all_gather the "
            f"flag or the step's batch count and compare) before the call: {who} took the other branch.",
            f"Log 'about to call <collective>' with a hash of (op, shapes, dtypes){at}{other} on every rank, "
            "with a per-rank step counter: the first line where ranks differ is the bug.",
        ]
    if kind == CulpritKind.extra_call:
        return [
            f"Find why {who} issue an extra collective{at}: log 'about to call <collective>' with a per-rank "
            "step counter on every rank; the extra line is the bug.",
            "Assert that the condition that leads to that call is identical across ranks (all_gather it).",
        ]
    if kind == CulpritKind.gpu_hang:
        return [
            f"Run a GPU health check on {node_txt} (dcgmi diag -r 2, nvidia-smi -q -d ECC,PERFORMANCE) and read "
            "dmesg for XID errors.",
            "Keep the node out of scheduling until it passes (frwatch cordons it when the policy allows).",
            f"If the GPU is clean, log a per-rank step counter around the kernel before {name} on {who}.",
        ]
    if kind == CulpritKind.network_hang:
        return [
            f"Run nccl-tests (all_reduce_perf) across {node_txt} to find the slow or broken link.",
            "Read NIC counters and link state on those nodes (ibstat / ethtool -S, switch port errors).",
            "Re-run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET to see which transport stalls.",
        ]
    if kind == CulpritKind.transport_stall:
        return [
            f"Re-run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET and look at the connections of {who}: some ranks "
            "completed the collective, these did not.",
            f"Run nccl-tests between {node_txt} and the nodes that completed it; do not drain nodes on this "
            "evidence alone (it does not say which node or link stalled).",
        ]
    if c.d is not None and c.d.balance and c.category == Category.size_mismatch:
        return [
            f"Before the collective{at}, all_gather every rank's input and output split sizes and assert that "
            "what rank i sends to rank j is what j expects from i (the split tables are built per rank).",
            "Log the per-rank step counter with the split tables there: the first step where they disagree shows "
            "which rank used a stale or wrong table.",
        ]
    if c.category in (Category.size_mismatch, Category.dtype_mismatch, Category.tensor_count_mismatch):
        what = {Category.size_mismatch: "shapes", Category.dtype_mismatch: "dtypes"}.get(
            c.category, "tensor count"
        )
        return [
            f"Before the collective{at}, all_gather a hash of the tensor {what} and assert it is equal on all "
            f"ranks; {who} differ.",
            "Log the per-rank step counter and the tensor metadata there: find which input made "
            f"{who} build a different tensor (uneven batch, padding, a config read per rank).",
        ]
    if c.category == Category.desync and c.d is not None and c.d.balance:  # the members disagree on the root
        side = "dst" if name == "gather" else "src"
        return [
            f"Log the {side} each rank passes to {name}{at} with a per-rank step counter, and all_gather it before "
            f"the call to assert every rank passes the same root: {who if c.culprits else 'some ranks'} acted as "
            "root where the group's root is another rank.",
            "Check how the root is chosen (a rank-local counter, step or config value that drifted on one rank).",
        ]
    if c.category == Category.desync:
        return [
            f"Log 'about to call <collective>' with a hash of (op, shapes, dtypes){at}{other} on every rank, "
            "with a per-rank step counter: the first line where ranks differ is the bug.",
            f"Assert that the branch choosing between these call sites is identical across ranks (all_gather the "
            f"condition): {who} issued another collective.",
        ]
    if c.category == Category.inconclusive:
        return [
            "Set TORCH_NCCL_ENABLE_TIMING=1 so the next dump shows which ranks started the stuck collective.",
            f"Run nccl-tests across {node_txt} and read the GPUs' health (XID errors) to tell a network hang from "
            "a GPU hang.",
        ]
    return [
        f"Log a per-rank step counter and 'about to call {name}'{at} on every rank: the last line of each rank "
        "shows where it stopped."
    ]
