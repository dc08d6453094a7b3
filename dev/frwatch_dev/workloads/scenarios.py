"""The faults the training workload can play, and what each looks like (torch-free).

Observed with torch 2.13.0+cpu, gloo, 4 ranks on loopback (see the workload tests, which pin it):
a different collective type hangs every rank until the gloo timeout; a different numel or a different
byte size makes the rank that receives the larger chunk abort (SIGABRT, no dump) and the others fail at
once with "Connection closed/reset"; same numel with another shape, or same byte size with another
dtype, succeeds silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Scenario(StrEnum):
    """A rank-dependent bug in the training loop (the culprit is one rank, `--culprit`)."""

    #: No bug: every rank trains to the end, dumps at exit and exits 0.
    HEALTHY = "healthy"
    #: At the fault step (a step that ends with the control broadcast) the culprit skips its gradient
    #: all_reduce and goes straight to the broadcast: type mismatch at one seq, every rank hangs.
    SKIP = "skip"
    #: At the fault step the culprit gathers its gradients (all_gather) where the others all_reduce: hangs.
    TYPE = "type"
    #: At the fault step the culprit all_reduces a larger gradient bucket (another numel): a ring
    #: neighbour aborts (SIGABRT, no dump), the others fail at once with a connection error.
    SIZE = "size"
    #: At the fault step the culprit all_reduces its gradients in float64 (other byte size): as `size`.
    DTYPE = "dtype"
    #: At the fault step the culprit blocks in its data loader (Python, no collective in flight):
    #: the others time out in the gradient all_reduce; the culprit dumps on the signal and is torn down.
    CPU_STUCK = "cpu_stuck"
    #: At the fault step the culprit issues one extra all_reduce of the gradient shape from another call
    #: site; every later collective pairs off by one without error until the next control broadcast,
    #: several steps later, where the culprit's all_reduce meets the others' broadcast: hangs.
    EXTRA_SAME_SHAPE = "extra_same_shape"
    #: Tensor-parallel subgroups {0,1},{2,3} (`new_group`): at the fault step the culprit skips its
    #: subgroup all_reduce; its subgroup peer hangs there, everyone else hangs in the global all_reduce.
    SUBGROUP = "subgroup"
    #: At the fault step the culprit all_reduces its gradients as a matrix (same numel): succeeds.
    SILENT_SHAPE = "silent_shape"
    #: At the fault step the culprit all_reduces the bits of its gradients as int32 (same byte size):
    #: succeeds with corrupted gradients.
    SILENT_DTYPE = "silent_dtype"
    #: At the fault step the culprit dies of a Python exception (exit 1, no dump); the others fail at
    #: once with a connection error, dump and exit non-zero.
    CRASH = "crash"
    #: At the fault step the culprit is killed with SIGKILL (as the kernel's OOM killer or a node agent
    #: kills): exit 137, no dump, no traceback, only the lines it printed before; the others fail at once
    #: with a connection error, dump and exit non-zero.
    KILLED = "killed"
    #: No bug, mixture-of-experts style: every step dispatches tokens with an uneven all_to_all_single
    #: (splits differ by rank and by step), gathers routing counts to rank 0 and scatters capacities from
    #: it (with ``--rotate-root``: to and from rank (step - 1) % N, another root every step). Per-rank sizes
    #: differ by design; every rank finishes and exits 0.
    MOE = "moe"
    #: As `moe`, but at the fault step the culprit expects 3 more rows from its next peer than that peer
    #: sends: gloo completes the exchange silently (the extra rows are garbage).
    MOE_BAD_SPLIT = "moe_bad_split"
    #: As `moe`, but at the fault step the culprit gathers to itself while the others gather to rank 0 (or
    #: to the step's root with ``--rotate-root``): two ranks wait as roots, every rank times out.
    GATHER_ROOT = "gather_root"


@dataclass(frozen=True)
class ScenarioDefaults:
    """Where a scenario's bug strikes unless the command line says otherwise."""

    culprit: int
    fault_step: int


#: Steps are numbered from 1; the control broadcast runs after the gradient sync of every 4th step.
DEFAULT_STEPS = 8
DEFAULT_CHECK_EVERY = 4

DEFAULTS: dict[Scenario, ScenarioDefaults] = {
    Scenario.HEALTHY: ScenarioDefaults(culprit=1, fault_step=3),
    Scenario.SKIP: ScenarioDefaults(culprit=1, fault_step=4),
    Scenario.TYPE: ScenarioDefaults(culprit=1, fault_step=3),
    Scenario.SIZE: ScenarioDefaults(culprit=1, fault_step=3),
    Scenario.DTYPE: ScenarioDefaults(culprit=1, fault_step=3),
    Scenario.CPU_STUCK: ScenarioDefaults(culprit=1, fault_step=3),
    Scenario.EXTRA_SAME_SHAPE: ScenarioDefaults(culprit=1, fault_step=1),
    Scenario.SUBGROUP: ScenarioDefaults(culprit=3, fault_step=3),
    Scenario.SILENT_SHAPE: ScenarioDefaults(culprit=1, fault_step=3),
    Scenario.SILENT_DTYPE: ScenarioDefaults(culprit=1, fault_step=3),
    Scenario.CRASH: ScenarioDefaults(culprit=2, fault_step=3),
    Scenario.KILLED: ScenarioDefaults(culprit=2, fault_step=3),
    Scenario.MOE: ScenarioDefaults(culprit=1, fault_step=3),
    Scenario.MOE_BAD_SPLIT: ScenarioDefaults(culprit=1, fault_step=3),
    Scenario.GATHER_ROOT: ScenarioDefaults(culprit=1, fault_step=3),
}

#: The scenarios whose every step also runs the mixture-of-experts exchange (all_to_all_single, gather,
#: scatter).
MOE_FAMILY = frozenset({Scenario.MOE, Scenario.MOE_BAD_SPLIT, Scenario.GATHER_ROOT})


def moe_splits(world_size: int, step: int) -> list[list[int]]:
    """Rows rank i sends to rank j at ``step``: uneven, different for every rank and step."""
    return [[(7 * i + 3 * j + step) % 5 + 1 for j in range(world_size)] for i in range(world_size)]


#: How a rank process ends (besides SIGABRT: torn down by the dump watcher after dumping, imitating NCCL's
#: watchdog, or killed by gloo itself on a size/byte-size mismatch, then without a dump).
EXIT_OK = 0  #: trained to the end, dumped at exit
EXIT_FAILED = 1  #: a collective raised (timeout, peer gone) and the rank dumped; or a Python crash (no dump)
EXIT_USAGE = 2  #: bad arguments or environment
