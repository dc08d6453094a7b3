"""The two or three targeted probes to run next, per category (DESIGN.md: a per-rank step counter, an
"about to call collective" log line with a metadata hash, an assertion that a decision is identical across
ranks), filled with the culprit's call site and nodes."""

from __future__ import annotations

from .textfmt import op_short, ranks_text
from .verdict import Category


def next_steps(
    category: Category, culprits: list[int], sites: list[str], nodes: list[str], op: str
) -> list[str]:
    who = ranks_text(culprits)
    at = f" at {sites[0]}" if sites else ""
    other = f" and {sites[1]}" if len(sites) > 1 else ""
    node_txt = ", ".join(nodes) if nodes else f"the nodes of {who}"
    name = op_short(op)
    if category == Category.missing_rank:
        return [
            f"Log a per-rank step counter and 'about to call {name}'{at} on every rank; the last line of {who} "
            "shows where it stopped (py-spy dump --pid on a live culprit shows its stack now).",
            f"Assert that the decision guarding the collective{at} is identical across ranks "
            "(all_gather the flag or the step's batch count and compare) before the call.",
            "Check the culprit pod's exit code and events (OOMKilled, evicted, crashed) if it left no dump.",
        ]
    if category == Category.desync:
        return [
            f"Log 'about to call <collective>' with a hash of (op, shapes, dtypes){at}{other} on every rank, "
            "with a per-rank step counter: the first line where ranks differ is the bug.",
            f"Assert that the branch choosing between these call sites is identical across ranks "
            f"(all_gather the condition) — {who} took the other path.",
        ]
    if category in (Category.size_mismatch, Category.dtype_mismatch):
        what = "shapes" if category == Category.size_mismatch else "dtypes"
        return [
            f"Before the collective{at}, all_gather a hash of the tensor {what} and assert it is equal on all "
            f"ranks; {who} differ.",
            "Log the per-rank step counter and the tensor metadata there: find which input made "
            f"{who} build a different tensor (uneven batch, padding, a config read per rank).",
        ]
    if category == Category.gpu_hang:
        return [
            f"Run a GPU health check on {node_txt} (dcgmi diag -r 2, nvidia-smi -q -d ECC,PERFORMANCE) and read "
            "dmesg for XID errors.",
            "Keep the node out of scheduling until it passes (frwatch cordons it when the policy allows).",
            f"If the GPU is clean, log a per-rank step counter around the kernel before {name} on {who}.",
        ]
    if category == Category.network_hang:
        return [
            f"Run nccl-tests (all_reduce_perf) across {node_txt} to find the slow or broken link.",
            "Read NIC counters and link state on those nodes (ibstat / ethtool -S, switch port errors).",
            "Re-run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET to see which transport stalls.",
        ]
    if category == Category.no_dump:
        return [
            "Make sure Flight Recorder is on (TORCH_FR_BUFFER_SIZE > 0) and TORCH_NCCL_DUMP_ON_TIMEOUT=1.",
            "Do not set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (pytorch#121055: no dump is written).",
        ]
    return []
