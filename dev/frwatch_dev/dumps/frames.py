"""The Python frames torch records with each entry: the c10d function, its logger wrapper, the user's
call site and the training loop above it (9 frames, innermost first)."""

from __future__ import annotations

from .program import CallSite, Frame

TORCH = "/usr/local/lib/python3.11/site-packages/torch"
C10D = f"{TORCH}/distributed/distributed_c10d.py"

# The torch function the recorder's first frame names, and its line, per op kind.
C10D_FUNCTION: dict[str, tuple[str, int]] = {
    "all_reduce": ("all_reduce", 3245),
    "all_gather": ("all_gather", 4280),
    "_allgather_base": ("all_gather_into_tensor", 4392),
    "all_gather_into_tensor": ("all_gather_into_tensor", 4392),
    "all_gather_uneven": ("all_gather", 4280),
    "all_gather_into_tensor_coalesced": ("all_gather_into_tensor_coalesced", 4460),
    "reduce_scatter": ("reduce_scatter", 4810),
    "reduce_scatter_uneven": ("reduce_scatter", 4810),
    "_reduce_scatter_base": ("reduce_scatter_tensor", 4903),
    "reduce_scatter_tensor": ("reduce_scatter_tensor", 4903),
    "reduce_scatter_tensor_coalesced": ("reduce_scatter_tensor_coalesced", 4960),
    "broadcast": ("broadcast", 3145),
    "reduce": ("reduce", 3378),
    "all_to_all": ("all_to_all", 5102),
    "all_to_all_single": ("all_to_all_single", 5001),
    "barrier": ("barrier", 5349),
    "all_reduce_barrier": ("barrier", 5349),
    "all_reduce_coalesced": ("all_reduce_coalesced", 3520),
    "send": ("send", 2651),
    "recv": ("recv", 2712),
    "coalesced": ("_coalescing_manager", 2488),
    "gather": ("gather", 4621),
    "scatter": ("scatter", 4702),
}

# A distinct user call site per kind of collective (the code path that issues it).
CALL_SITES: dict[str, CallSite] = {
    "all_reduce": ("_sync_gradients", "/workspace/model/ddp_utils.py", 57),
    "all_gather": ("_gather_params", "/workspace/model/fsdp_shard.py", 112),
    "all_gather_uneven": ("_gather_ragged", "/workspace/model/fsdp_shard.py", 120),
    "_allgather_base": ("_unshard", "/workspace/model/fsdp_shard.py", 139),
    "all_gather_into_tensor": ("_unshard", "/workspace/model/fsdp_shard.py", 139),
    "all_gather_into_tensor_coalesced": ("_unshard_many", "/workspace/model/fsdp_shard.py", 150),
    "reduce_scatter": ("_reduce_grads", "/workspace/model/fsdp_shard.py", 188),
    "reduce_scatter_uneven": ("_reduce_ragged", "/workspace/model/fsdp_shard.py", 196),
    "_reduce_scatter_base": ("_reduce_grads_flat", "/workspace/model/fsdp_shard.py", 204),
    "reduce_scatter_tensor": ("_reduce_grads_flat", "/workspace/model/fsdp_shard.py", 204),
    "reduce_scatter_tensor_coalesced": ("_reduce_many", "/workspace/model/fsdp_shard.py", 214),
    "broadcast": ("_broadcast_buffers", "/workspace/model/ddp_utils.py", 91),
    "reduce": ("_reduce_metrics", "/workspace/metrics.py", 44),
    "all_to_all": ("_dispatch_tokens", "/workspace/model/moe.py", 73),
    "all_to_all_single": ("_dispatch_tokens", "/workspace/model/moe.py", 81),
    "barrier": ("_checkpoint_barrier", "/workspace/checkpoint.py", 66),
    "all_reduce_coalesced": ("_sync_small_grads", "/workspace/model/ddp_utils.py", 64),
    "send": ("_send_activations", "/workspace/model/pipeline.py", 120),
    "recv": ("_recv_activations", "/workspace/model/pipeline.py", 131),
    "coalesced": ("_sync_bucketed", "/workspace/model/ddp_utils.py", 77),
    "gather": ("_gather_logits", "/workspace/metrics.py", 58),
    "scatter": ("_scatter_batch", "/workspace/data.py", 39),
}

# The frames between the call site and the interpreter's top: same for every op of the program.
OUTER_FRAMES: tuple[CallSite, ...] = (
    ("train_step", "/workspace/train.py", 142),
    ("run_epoch", "/workspace/train.py", 188),
    ("main", "/workspace/train.py", 231),
    ("wrapper", f"{TORCH}/distributed/elastic/multiprocessing/errors/__init__.py", 355),
    ("<module>", "/workspace/train.py", 240),
)


def stack(call_site: CallSite, kind: str = "all_reduce", *, caller: CallSite | None = None) -> list[Frame]:
    """The 9 Python frames torch records for an op issued at ``call_site`` (innermost first)."""
    function, line = C10D_FUNCTION.get(kind, (kind, 3000))
    name, filename, lineno = call_site
    caller = caller or ("forward_backward", filename.rsplit("/", 1)[0] + "/engine.py", 301)
    frames: list[CallSite] = [
        (function, C10D, line),
        ("wrapper", f"{TORCH}/distributed/c10d_logger.py", 83),
        (name, filename, lineno),
        caller,
        *OUTER_FRAMES,
    ]
    return [{"name": n, "filename": f, "line": ln} for n, f, ln in frames]
