"""What untrusted input may cost the analyzer: one file, one worker, one job attempt.

Dumps, manifests and file names are hostile input (DESIGN.md, "Trust boundaries"). Every bound here holds
while decoding, not after: a worker process decodes and summarises each file under an address-space limit
the kernel enforces, and the parent kills a worker that overruns its time. The defaults come from real
dumps (torch 2.13, measured; what each hostile class costs: ``benchmarks/bench_hostile.py``); a flag of
``frwatch analyze`` changes each one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

MIB = 1 << 20

#: Dump files larger than this are refused unread. A real 2000-entry dump is 0.25 MB with Python frames
#: and 0.36 MB with C++ stacks as well (torch 2.13 gloo, ``TORCH_FR_CPP_STACK=1``): 32 MB holds a ring
#: buffer about 100 times the recommended 2000 entries.
DEFAULT_MAX_FILE_BYTES = 32 * MIB

#: Memory a worker may map beyond what it held when it started. A real dump decodes to about 10 times its
#: size: a 31 MB dump of the real schema (150k entries) peaks at 336 MB RSS while it is decoded and
#: summarised, a third of this budget. A pickle's memo alone can ask for gigabytes from a few bytes; past
#: this budget the decoder gets a MemoryError and the file is named.
DEFAULT_WORKER_MEMORY_BYTES = 1024 * MIB

#: Seconds one file may take to decode and summarise, plus ``FILE_SECONDS_PER_MB`` for each MB it holds.
#: A 31 MB dump takes about 2.4 s here on a loaded machine (26 s allowed); a 0.4 MB one about 20 ms (10 s).
#: Shared-reference bombs hashed while decoding run past it.
DEFAULT_FILE_SECONDS = 10.0
FILE_SECONDS_PER_MB = 0.5

#: Seconds for the whole map step. Past it, files not read yet are named and the verdict is made from the
#: rest; under the analyzer Job's default deadline (900 s), so a verdict is written before the Job is killed.
DEFAULT_DEADLINE_SECONDS = 600.0

#: Ranks and world sizes must be below this. The largest training jobs run so far hold about 100k GPUs;
#: a rank of 2**18 or more, in a file name, a ``pg_config``, a manifest, a job spec or a control request, is
#: not a real job. The one rank bound of frwatch: the agent, the operator and the analyzer all use it.
MAX_WORLD_SIZE = 1 << 18

#: Files one location may list (two a rank: a job using gloo and NCCL leaves two dumps per rank).
MAX_FILES = 2 * MAX_WORLD_SIZE

#: manifest.json is about 300 bytes a rank: 64 MB holds the largest world allowed.
MAX_MANIFEST_BYTES = 64 * MIB

#: Process groups one dump may hold (3D/4D parallelism uses tens to hundreds).
MAX_GROUPS = 1 << 14

#: User frames kept for a call site (the innermost ones; real Python stacks hold 3 to 30).
MAX_CALL_SITE_FRAMES = 128


@dataclass(frozen=True)
class Limits:
    """The bounds one analysis runs under (defaults above)."""

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    worker_memory_bytes: int = DEFAULT_WORKER_MEMORY_BYTES
    file_seconds: float = DEFAULT_FILE_SECONDS
    deadline_seconds: float = DEFAULT_DEADLINE_SECONDS

    def seconds_for(self, size: int) -> float:
        """The time budget of a file of ``size`` bytes."""
        return self.file_seconds + FILE_SECONDS_PER_MB * size / MIB


#: Where a container's memory limit is read: cgroup v2, then v1.
CGROUP_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")

#: Memory kept for the parent (listing, summaries, the diagnosis) when workers are fitted under a limit.
PARENT_RESERVE_BYTES = 512 * MIB


def container_memory(paths: Sequence[str] = CGROUP_MEMORY_LIMITS) -> int | None:
    """The memory limit of this process's container, in bytes (None: no limit, or not known)."""
    for path in paths:
        try:
            with open(path) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text == "max":
            return None
        if text.isdigit():
            value = int(text)
            return value if value < 1 << 60 else None  # cgroup v1 writes a huge number for "no limit"
    return None


def fit(limits: Limits, jobs: int, memory: int | None) -> tuple[Limits, int]:
    """Workers that fit a container of ``memory`` bytes: each keeps its budget when it can (fewer workers
    run), and a single worker gets what the parent leaves when even one full budget does not fit. Without a
    known limit, nothing changes: the kernel's OOM killer would otherwise end a worker frwatch could have
    bounded itself."""
    if memory is None:
        return limits, jobs
    room = max(memory - PARENT_RESERVE_BYTES, 64 * MIB)
    if room < limits.worker_memory_bytes:
        return replace(limits, worker_memory_bytes=room), 1
    return limits, max(1, min(jobs, room // limits.worker_memory_bytes))
