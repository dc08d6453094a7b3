"""A small real training job (torch, gloo, CPU) whose culprit rank goes wrong in a named way.

Run one process per rank, as a PyTorchJob pod's container runs it::

    python -m frwatch_dev.workloads.faulty_training --scenario skip [--steps 8] [--culprit 1] [--timeout-s 4]

It reads the Kubeflow env (`RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`; without `RANK`, the global rank
is `PET_NODE_RANK * PET_NPROC_PER_NODE + LOCAL_RANK`), trains a tiny MLP with hand-written data-parallel
gradient sync, and plays the bug of `--scenario` (see `scenarios.Scenario`). Flight Recorder is on
(`TORCH_FR_BUFFER_SIZE`, default 2000) and every rank dumps as `dump_on_failure` describes.

Each collective is called from its own named function, so the Flight Recorder `frames` of the buggy path
differ from the good path exactly where a real bug's would: a different code path (extra call, other
collective) shows another function; a wrong tensor passed to the right call shows the same call site.

Each rank prints one line saying what it did, and exits 0 (trained to the end), 1 (a collective failed
and the rank dumped, or a Python crash), or dies of SIGABRT (torn down after dumping, or killed by gloo).

Over 400 lines by choice: one runnable training program, each collective in its own named function so the
Flight Recorder frames differ where a real bug's would; the scenarios are ``scenarios.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import sys
import time
import traceback
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from frwatch_dev.workloads.say import say
from frwatch_dev.workloads.scenarios import (
    DEFAULT_CHECK_EVERY,
    DEFAULT_STEPS,
    DEFAULTS,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    MOE_FAMILY,
    Scenario,
    moe_splits,
)
from frwatch_operator.constants import (
    ENV_FR_BUFFER_SIZE,
    ENV_FR_BUFFER_SIZE_OLD,
    ENV_LOCAL_RANK,
    ENV_MASTER_ADDR,
    ENV_MASTER_PORT,
    ENV_PET_NODE_RANK,
    ENV_PET_NPROC_PER_NODE,
    ENV_RANK,
    ENV_WORLD_SIZE,
)

# torch's import warns when numpy is absent; the workload needs no numpy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.distributed_c10d import _set_pg_timeout as _old_set_pg_timeout  # noqa: E402

#: torch 2.14 names it ``set_timeout`` and warns on the old name (a FutureWarning in every rank's log);
#: torch 2.8 to 2.13 have only ``_set_pg_timeout``.
_set_pg_timeout: Callable[..., None] = getattr(dist, "set_timeout", _old_set_pg_timeout)

from frwatch_dev.workloads.dump_on_failure import (  # noqa: E402
    DumpFormat,
    DumpWatcher,
    WatcherSettings,
    dump_prefix_from,
)

LOG_TAG = "faulty_training"
IN_FEATURES, HIDDEN, OUT_FEATURES = 8, 16, 4
BATCH = 16
LEARNING_RATE = 0.05
INIT_TIMEOUT_S = 120.0


# --- where this rank is ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankEnv:
    """This rank's place in the job, from the env a PyTorchJob gives its pods."""

    rank: int
    world_size: int
    master_addr: str
    master_port: int

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> RankEnv:
        missing = [n for n in (ENV_WORLD_SIZE, ENV_MASTER_ADDR, ENV_MASTER_PORT) if not environ.get(n)]
        if missing:
            raise ValueError(
                f"missing {', '.join(missing)}: run this as a PyTorchJob replica, or set RANK, WORLD_SIZE,"
                " MASTER_ADDR and MASTER_PORT as the Kubeflow training operator does"
            )
        try:
            if environ.get(ENV_RANK):
                rank = int(environ[ENV_RANK])
            elif environ.get(ENV_PET_NODE_RANK):
                nproc = int(environ.get(ENV_PET_NPROC_PER_NODE) or "1")
                rank = int(environ[ENV_PET_NODE_RANK]) * nproc + int(environ.get(ENV_LOCAL_RANK) or "0")
            else:
                raise ValueError(f"neither {ENV_RANK} nor {ENV_PET_NODE_RANK} is set: which rank is this?")
            world_size = int(environ[ENV_WORLD_SIZE])
            port = int(environ[ENV_MASTER_PORT])
        except ValueError as exc:
            raise ValueError(f"bad rank environment: {exc}") from exc
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside WORLD_SIZE={world_size}")
        return cls(rank=rank, world_size=world_size, master_addr=environ[ENV_MASTER_ADDR], master_port=port)


@dataclass(frozen=True)
class RunConfig:
    """The command line, validated."""

    scenario: Scenario
    steps: int
    check_every: int
    culprit: int
    fault_step: int
    timeout_s: float
    watchdog_s: float
    teardown_grace_s: float
    linger_s: float
    max_runtime_s: float
    fmt: DumpFormat
    json_ranks: frozenset[int]
    ondemand_at_step: int = 0
    late_rank: int | None = None
    #: every rank waits this long in its data loader each step (a paced job that runs long enough to watch)
    step_pause_s: float = 0.0
    #: this rank waits ``slow_pause_s`` instead (a slow but healthy rank), when given
    slow_rank: int | None = None
    slow_pause_s: float = 0.0
    #: this rank's torch has no worker server (live watch cannot reach it), when given
    no_worker_server_rank: int | None = None
    rotate_root: bool = False  # the mixture-of-experts exchange gathers to and scatters from rank (step-1) % N

    def pause_for(self, rank: int) -> float:
        return self.slow_pause_s if rank == self.slow_rank else self.step_pause_s

    def format_for(self, rank: int) -> DumpFormat:
        return DumpFormat.JSON if rank in self.json_ranks else self.fmt


def parse_args(argv: Sequence[str] | None) -> RunConfig:
    parser = argparse.ArgumentParser(
        prog="python -m frwatch_dev.workloads.faulty_training",
        description="A tiny real torch gloo training job whose culprit rank goes wrong in a named way.",
    )
    parser.add_argument("--scenario", required=True, choices=[s.value for s in Scenario])
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="training steps (default 8)")
    parser.add_argument(
        "--check-every", type=int, default=DEFAULT_CHECK_EVERY, help="control broadcast every N steps"
    )
    parser.add_argument("--culprit", type=int, default=None, help="the rank with the bug (scenario default)")
    parser.add_argument("--fault-step", type=int, default=None, help="the step the bug strikes (default)")
    parser.add_argument("--timeout-s", type=float, default=4.0, help="gloo process-group timeout (default 4)")
    parser.add_argument(
        "--watchdog-s",
        type=float,
        default=None,
        help="dump while a collective is still blocked after this long (default: timeout - 1s, at least half)",
    )
    parser.add_argument("--teardown-grace-s", type=float, default=2.0, help="after a signalled dump")
    parser.add_argument("--linger-s", type=float, default=0.5, help="a failed rank waits so peers see it")
    parser.add_argument("--max-runtime-s", type=float, default=600.0, help="safety net: dump and abort")
    parser.add_argument("--format", choices=[f.value for f in DumpFormat], default=DumpFormat.PICKLE.value)
    parser.add_argument("--json-ranks", default="", help="comma-separated ranks that dump JSON anyway")
    parser.add_argument(
        "--ondemand-at-step",
        type=int,
        default=0,
        help="after this step every rank also writes an on-demand JSON dump (<prefix><rank>.json), as a live "
        "sample or an operator's on-demand request leaves before the failure dump",
    )
    parser.add_argument(
        "--late-rank",
        type=int,
        default=None,
        help="at the fault step this rank waits in its data loader until a peer asked every rank to dump, then "
        "goes on: a rank the machine made late (it must still dump where it blocks, not on its way there)",
    )
    parser.add_argument(
        "--step-pause-s", type=float, default=0.0, help="every rank waits this long in its data loader each step (and the culprit says when its fault "
        "strikes)"
    )
    parser.add_argument("--slow-rank", type=int, default=None, help="this rank waits --slow-pause-s instead")
    parser.add_argument("--slow-pause-s", type=float, default=0.0, help="the slow rank's wait each step")
    parser.add_argument(
        "--no-worker-server-rank", type=int, default=None,
        help="this rank's torch has no c10d _WorkerServer (an older or trimmed build: removed from the process "
        "before init), so live watch cannot reach it",
    )  # fmt: skip
    parser.add_argument(
        "--rotate-root", action="store_true",
        help="the mixture-of-experts exchange's gather and scatter root rotates: rank (step - 1) %% N at each step",
    )  # fmt: skip
    args = parser.parse_args(argv)
    scenario = Scenario(args.scenario)
    defaults = DEFAULTS[scenario]
    if args.steps < 1 or args.check_every < 1 or args.timeout_s <= 0:
        parser.error("--steps, --check-every and --timeout-s must be positive")
    if args.step_pause_s < 0 or args.slow_pause_s < 0:
        parser.error("--step-pause-s and --slow-pause-s must not be negative")
    try:
        json_ranks = frozenset(int(r) for r in args.json_ranks.split(",") if r.strip())
    except ValueError:
        parser.error(f"--json-ranks wants comma-separated ranks, got {args.json_ranks!r}")
    return RunConfig(
        scenario=scenario,
        steps=args.steps,
        check_every=args.check_every,
        culprit=defaults.culprit if args.culprit is None else args.culprit,
        fault_step=defaults.fault_step if args.fault_step is None else args.fault_step,
        timeout_s=args.timeout_s,
        watchdog_s=max(args.timeout_s - 1.0, args.timeout_s / 2)
        if args.watchdog_s is None
        else args.watchdog_s,
        teardown_grace_s=args.teardown_grace_s,
        linger_s=args.linger_s,
        max_runtime_s=args.max_runtime_s,
        fmt=DumpFormat(args.format),
        json_ranks=json_ranks,
        ondemand_at_step=max(0, args.ondemand_at_step),
        late_rank=args.late_rank,
        step_pause_s=args.step_pause_s,
        slow_rank=args.slow_rank,
        slow_pause_s=args.slow_pause_s,
        no_worker_server_rank=args.no_worker_server_rank,
        rotate_root=args.rotate_root,
    )


# --- what this rank did, for its one log line -------------------------------------------------------------------
@dataclass
class Progress:
    step: int = 0
    call: str = "init"
    in_collective: bool = False
    #: time.monotonic() when the current collective was enqueued (Flight Recorder holds its entry), else None
    in_flight_since: float | None = None
    #: the rank's own code is stuck outside any collective (the cpu_stuck culprit's loader): it stays there
    stuck: bool = False
    issued: dict[str, int] = field(default_factory=dict)  #: collectives issued per process group
    started: float = field(default_factory=time.monotonic)

    def enter(self, call: str, group: str) -> None:
        self.call = call
        self.in_collective = True
        self.issued[group] = self.issued.get(group, 0) + 1

    def enqueued(self, work: dist.Work | None) -> None:
        """The collective was enqueued (its FR entry is recorded): wait for it, as a blocking call does."""
        self.in_flight_since = time.monotonic()
        if work is not None:
            work.wait()

    def leave(self) -> None:
        self.in_collective = False
        self.in_flight_since = None

    def at_rest(self) -> bool:
        """Is the rank where it will stay: inside a collective Flight Recorder recorded, or stuck outside one?
        A rank on its way between two collectives is not (a peer's dump request waits for it)."""
        return self.in_flight_since is not None or self.stuck


PROGRESS = Progress()


def log_line(
    env: RankEnv, cfg: RunConfig, outcome: str, exit_code: str, watcher: DumpWatcher | None, detail: str = ""
) -> None:
    seqs = ",".join(f"{g}:{n}" for g, n in sorted(PROGRESS.issued.items()))
    role = "culprit" if env.rank == cfg.culprit and cfg.scenario is not Scenario.HEALTHY else "peer"
    line = (
        f"{LOG_TAG} rank={env.rank} world={env.world_size} scenario={cfg.scenario.value} role={role}"
        f" outcome={outcome} step={PROGRESS.step} call={PROGRESS.call} issued={seqs or '-'}"
        f" dump={watcher.dumped if watcher and watcher.dumped else '-'}"
        f" dump_reason={watcher.dump_reason if watcher and watcher.dumped else '-'} exit={exit_code} elapsed={time.monotonic() - PROGRESS.started:.1f}s"
    )
    if detail:
        line += f" detail={' '.join(detail.split())[:200]!r}"
    say(line)


# --- the collectives, each in a named function (their frames are the call sites FR records) ---------------------
def broadcast_parameters(flat_params: torch.Tensor) -> None:
    PROGRESS.enter("broadcast_parameters", "default_pg")
    PROGRESS.enqueued(dist.broadcast(flat_params, src=0, async_op=True))
    PROGRESS.leave()


def sync_gradients(bucket: torch.Tensor) -> None:
    PROGRESS.enter("sync_gradients", "default_pg")
    PROGRESS.enqueued(dist.all_reduce(bucket, async_op=True))
    PROGRESS.leave()


def clip_gradients_globally(bucket: torch.Tensor) -> None:
    """The extra_same_shape bug's extra call: an all_reduce of the gradient shape from another call site."""
    PROGRESS.enter("clip_gradients_globally", "default_pg")
    PROGRESS.enqueued(dist.all_reduce(bucket, async_op=True))
    PROGRESS.leave()


def gather_gradients(bucket: torch.Tensor, world_size: int) -> None:
    """The type bug: an all_gather where the others all_reduce."""
    PROGRESS.enter("gather_gradients", "default_pg")
    gathered = [torch.empty_like(bucket) for _ in range(world_size)]
    PROGRESS.enqueued(dist.all_gather(gathered, bucket, async_op=True))
    PROGRESS.leave()


def sync_tensor_parallel(partial: torch.Tensor, group: dist.ProcessGroup, name: str) -> None:
    PROGRESS.enter("sync_tensor_parallel", name)
    PROGRESS.enqueued(dist.all_reduce(partial, group=group, async_op=True))
    PROGRESS.leave()


def dispatch_tokens(tokens: torch.Tensor, out_rows: list[int], in_rows: list[int]) -> torch.Tensor:
    """A mixture-of-experts dispatch: uneven all_to_all_single (in_rows[j] rows to rank j)."""
    PROGRESS.enter("dispatch_tokens", "default_pg")
    received = torch.empty(sum(out_rows), tokens.shape[1])
    PROGRESS.enqueued(
        dist.all_to_all_single(
            received, tokens, output_split_sizes=out_rows, input_split_sizes=in_rows, async_op=True
        )
    )
    PROGRESS.leave()
    return received


def gather_routing_counts(counts: torch.Tensor, world_size: int, rank: int, root: int) -> None:
    PROGRESS.enter("gather_routing_counts", "default_pg")
    gathered = [torch.empty_like(counts) for _ in range(world_size)] if rank == root else None
    PROGRESS.enqueued(dist.gather(counts, gathered, dst=root, async_op=True))
    PROGRESS.leave()


def scatter_capacities(capacity: torch.Tensor, world_size: int, rank: int, root: int = 0) -> None:
    PROGRESS.enter("scatter_capacities", "default_pg")
    chunks = [torch.full_like(capacity, float(r)) for r in range(world_size)] if rank == root else None
    PROGRESS.enqueued(dist.scatter(capacity, chunks, src=root, async_op=True))
    PROGRESS.leave()


def agree_to_continue(stop: torch.Tensor) -> None:
    PROGRESS.enter("agree_to_continue", "default_pg")
    PROGRESS.enqueued(dist.broadcast(stop, src=0, async_op=True))
    PROGRESS.leave()


def gather_final_metrics(metrics: torch.Tensor, world_size: int) -> None:
    PROGRESS.enter("gather_final_metrics", "default_pg")
    gathered = [torch.empty_like(metrics) for _ in range(world_size)]
    PROGRESS.enqueued(dist.all_gather(gathered, metrics, async_op=True))
    PROGRESS.leave()


def finish_barrier() -> None:
    PROGRESS.enter("finish_barrier", "default_pg")
    PROGRESS.enqueued(dist.barrier(async_op=True))
    PROGRESS.leave()


# --- the training ----------------------------------------------------------------------------------------------
def load_batch(step: int, rank: int, stuck: bool, crash: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's shard of step `step`; the cpu_stuck culprit's loader hangs, the crash culprit's raises."""
    PROGRESS.stuck = stuck
    while stuck:
        time.sleep(1.0)  # a data-loader worker waiting on a dead file system
    if crash:
        raise ValueError(f"corrupt sample in shard {rank} at step {step}: cannot decode record")
    gen = torch.Generator().manual_seed(1000 * rank + step)
    inputs = torch.randn(BATCH, IN_FEATURES, generator=gen)
    return inputs, inputs[:, :OUT_FEATURES].sin()


class Trainer:
    def __init__(self, env: RankEnv, cfg: RunConfig) -> None:
        self.env = env
        self.cfg = cfg
        torch.manual_seed(env.rank)  # different starts: the initial broadcast makes them equal
        self.model = torch.nn.Sequential(
            torch.nn.Linear(IN_FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT_FEATURES)
        )
        self.params = list(self.model.parameters())
        self.tp_group: dist.ProcessGroup | None = None
        self.on_demand: Callable[[], object] | None = None  # writes an on-demand dump (--ondemand-at-step)
        #: waits (up to the seconds given) until a peer asked every rank to dump (--late-rank)
        self.dump_requested: Callable[[float], object] | None = None
        self.tp_name = ""
        self.last_loss = 0.0

    def is_culprit_at(self, step: int) -> bool:
        return self.env.rank == self.cfg.culprit and step == self.cfg.fault_step

    def setup(self) -> None:
        if self.cfg.scenario is Scenario.SUBGROUP:
            if self.env.world_size % 2:
                raise ValueError("the subgroup scenario needs an even world size (pairs of ranks)")
            for first in range(0, self.env.world_size, 2):
                name = f"tensor_parallel_{first // 2}"
                group = dist.new_group(
                    ranks=[first, first + 1], timeout=timedelta(seconds=INIT_TIMEOUT_S), group_desc=name
                )
                if self.env.rank in (first, first + 1):
                    _set_pg_timeout(timedelta(seconds=self.cfg.timeout_s), group)
                    self.tp_group, self.tp_name = group, name
        flat = torch.nn.utils.parameters_to_vector(self.params).detach()
        broadcast_parameters(flat)
        torch.nn.utils.vector_to_parameters(flat, self.params)

    def run(self) -> None:
        for step in range(1, self.cfg.steps + 1):
            PROGRESS.step = step
            self.train_step(step)
            if step == self.cfg.ondemand_at_step and self.on_demand is not None:
                self.on_demand()
            if step % self.cfg.check_every == 0:
                stop = torch.zeros(1, dtype=torch.int64)
                agree_to_continue(stop)
        PROGRESS.step = self.cfg.steps
        gather_final_metrics(torch.tensor([self.last_loss, float(self.cfg.steps)]), self.env.world_size)
        finish_barrier()

    def train_step(self, step: int) -> None:
        bug = self.is_culprit_at(step)
        if bug and self.cfg.scenario is Scenario.KILLED:
            say(f"rank {self.env.rank}: step {step}: loading a batch")
            os.kill(os.getpid(), signal.SIGKILL)  # no handler runs, nothing is dumped or printed after
        PROGRESS.call = "load_batch"
        if self.env.rank == self.cfg.late_rank and step == self.cfg.fault_step and self.dump_requested:
            self.dump_requested(self.cfg.max_runtime_s)  # late: the peers hang and ask for dumps first
        if pause := self.cfg.pause_for(self.env.rank):
            time.sleep(pause)  # a paced (or slow but healthy) data loader
        if bug and self.cfg.step_pause_s and self.cfg.scenario is not Scenario.HEALTHY:  # paced: say it (e2e)
            say(f"rank {self.env.rank}: step {step}: the {self.cfg.scenario.value} fault strikes at"
                f" {time.time():.3f}")  # fmt: skip
        inputs, targets = load_batch(
            step,
            self.env.rank,
            stuck=bug and self.cfg.scenario is Scenario.CPU_STUCK,
            crash=bug and self.cfg.scenario is Scenario.CRASH,
        )
        for p in self.params:
            p.grad = None
        hidden = self.model[1](self.model[0](inputs))
        if self.tp_group is not None:
            self.tensor_parallel_sync(hidden, step)
        if self.cfg.scenario in MOE_FAMILY:
            self.moe_exchange(hidden, step, bug)
        loss = torch.nn.functional.mse_loss(self.model[2](hidden), targets)
        loss.backward()  # type: ignore[no-untyped-call]
        self.last_loss = float(loss.detach())
        self.sync_and_update(step, bug)

    def moe_exchange(self, hidden: torch.Tensor, step: int, bug: bool) -> None:
        """Route this rank's tokens to the others (uneven by rank and step), report the routing counts to
        rank 0, receive this step's capacity: each rank records other sizes by design."""
        n, me = self.env.world_size, self.env.rank
        m = moe_splits(n, step)
        in_rows = [m[me][j] for j in range(n)]
        out_rows = [m[j][me] for j in range(n)]
        if bug and self.cfg.scenario is Scenario.MOE_BAD_SPLIT:
            out_rows[(me + 1) % n] += 3  # the bug: a stale capacity table for one peer
        tokens = hidden.detach()[:1].expand(sum(in_rows), -1).contiguous()
        dispatch_tokens(tokens, out_rows, in_rows)
        usual = (step - 1) % n if self.cfg.rotate_root else 0
        root = me if bug and self.cfg.scenario is Scenario.GATHER_ROOT else usual
        gather_routing_counts(torch.tensor(in_rows, dtype=torch.float32), n, me, root)
        scatter_capacities(torch.zeros(2), n, me, usual)

    def tensor_parallel_sync(self, hidden: torch.Tensor, step: int) -> None:
        """Sum the pair's partial activations (a stand-in for a tensor-parallel layer's all_reduce)."""
        assert self.tp_group is not None
        if self.is_culprit_at(step):
            return  # the bug: a rank-local "already reduced" flag skips this rank's subgroup all_reduce
        partial = hidden.detach().sum(dim=0)
        sync_tensor_parallel(partial, self.tp_group, self.tp_name)

    def gradient_bucket(self, bug: bool) -> torch.Tensor:
        """The flat gradients this rank syncs; the buggy variants build a wrong tensor for the same call."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        bucket = torch.cat([g.reshape(-1) for g in grads])
        if not bug:
            return bucket
        if self.cfg.scenario is Scenario.SIZE:
            return torch.cat([bucket, torch.zeros(HIDDEN)])  # a rank-local extra head's gradients
        if self.cfg.scenario is Scenario.DTYPE:
            return bucket.double()  # a rank-local precision setting
        if self.cfg.scenario is Scenario.SILENT_SHAPE:
            return bucket.reshape(4, -1)  # same numel, other shape
        if self.cfg.scenario is Scenario.SILENT_DTYPE:
            return bucket.view(torch.int32)  # same bytes, other dtype: summed as integers
        return bucket

    def sync_and_update(self, step: int, bug: bool) -> None:
        scenario = self.cfg.scenario
        bucket = self.gradient_bucket(bug)
        if bug and scenario is Scenario.SKIP:
            pass  # the bug: a rank-local overflow check skips this step's gradient sync
        elif bug and scenario is Scenario.TYPE:
            gather_gradients(bucket, self.env.world_size)
        else:
            sync_gradients(bucket)
            if bug and scenario is Scenario.EXTRA_SAME_SHAPE:
                clip_gradients_globally(bucket)  # the bug: only this rank clips through a global reduction
        summed = bucket.view(torch.float32) if bucket.dtype == torch.int32 else bucket.float()
        summed = summed.reshape(-1)[: sum(p.numel() for p in self.params)] / self.env.world_size
        with torch.no_grad():
            offset = 0
            for p in self.params:
                p.sub_(LEARNING_RATE * summed[offset : offset + p.numel()].view_as(p))
                offset += p.numel()


# --- the process ---------------------------------------------------------------------------------------------
def silence_core_dumps() -> None:
    """A SIGABRT (ours or gloo's) must not leave a core file in the pod or the working folder."""
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def keep_inductor_unloaded() -> None:
    """Spare each rank ~1 s of CPU: the first FR dump otherwise imports torch._inductor (and torch._dynamo).

    FR's frame symbolizer looks up `torch._inductor.codecache` (to map frames of inductor-generated code);
    through `torch.__getattr__` that lookup imports the whole compiler stack, which is the "first dump is
    slow" cost. This job compiles nothing: a bare module in its place makes the lookup fail fast, and the
    dump's frames are the same (the workload tests check they name the workload's functions).
    """
    if "torch._inductor" not in sys.modules and "_inductor" not in vars(torch):
        vars(torch)["_inductor"] = types.ModuleType(
            "torch._inductor", "not loaded: this job compiles nothing"
        )


def finish(code: int) -> None:
    """End now, without running torch's and gloo's teardown (it can abort after a failed collective)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    try:
        env = RankEnv.from_environ(os.environ)
    except ValueError as exc:
        say(f"{LOG_TAG}: {exc}", sys.stderr)
        return EXIT_USAGE
    if not 0 <= cfg.culprit < env.world_size:
        say(f"{LOG_TAG}: --culprit {cfg.culprit} is outside WORLD_SIZE={env.world_size}", sys.stderr)
        return EXIT_USAGE
    silence_core_dumps()
    keep_inductor_unloaded()
    if env.rank == cfg.no_worker_server_rank:
        del torch._C._distributed_c10d._WorkerServer  # before anyone could serve
    if ENV_FR_BUFFER_SIZE not in os.environ and ENV_FR_BUFFER_SIZE_OLD not in os.environ:
        os.environ[ENV_FR_BUFFER_SIZE] = "2000"  # FR reads it when the first process group is created
    # Rendezvous and gloo's pair connections get a long timeout (ranks of a loaded machine start seconds
    # apart); collectives then get the short one, as a job's watchdog timeout would be.
    dist.init_process_group(
        "gloo", rank=env.rank, world_size=env.world_size, timeout=timedelta(seconds=INIT_TIMEOUT_S)
    )
    _set_pg_timeout(timedelta(seconds=cfg.timeout_s))
    watcher = DumpWatcher(
        WatcherSettings(
            rank=env.rank,
            prefix=dump_prefix_from(os.environ),
            fmt=cfg.format_for(env.rank),
            store_addr=(env.master_addr, env.master_port),
            watchdog_s=cfg.watchdog_s,
            teardown_grace_s=cfg.teardown_grace_s,
            max_runtime_s=cfg.max_runtime_s,
        ),
        in_flight_since=lambda: PROGRESS.in_flight_since,
        at_rest=PROGRESS.at_rest,
        on_teardown=lambda why: log_line(env, cfg, "torn_down", "SIGABRT", watcher, why),
    )
    watcher.start()
    trainer = Trainer(env, cfg)
    trainer.on_demand = watcher.dump_on_demand
    trainer.dump_requested = watcher.asked.wait
    try:
        trainer.setup()
        watcher.warm_up()
        trainer.run()
    except Exception as exc:
        watcher.claim_exit()
        if not PROGRESS.in_collective:  # a Python crash: the process dies without a dump, as a real one does
            watcher.exiting()
            traceback.print_exc()
            log_line(env, cfg, "crashed", str(EXIT_FAILED), None, f"{type(exc).__name__}: {exc}")
            finish(EXIT_FAILED)
        watcher.request_everyone_dumps()
        watcher.dump("collective raised")
        time.sleep(cfg.linger_s)  # peers blocked in the same collective dump before our exit closes the pairs
        watcher.exiting()
        log_line(env, cfg, "collective_failed", str(EXIT_FAILED), watcher, str(exc))
        finish(EXIT_FAILED)
    watcher.wait_until_retired()
    watcher.dump("finished")
    watcher.exiting()
    dist.destroy_process_group()
    log_line(env, cfg, "finished", str(EXIT_OK), watcher)
    finish(EXIT_OK)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
