"""The verdict: the analyzer's contract with the operator, the CLI and people (DESIGN.md, "The verdict").

A verdict is data with evidence. It is schema-versioned; `verdict.schema.json` beside this module is
generated from these models (``frwatch analyze --schema``) and a test keeps the two equal.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "frwatch.io/verdict/v1"


class Status(StrEnum):
    """Whether the dumps show a problem."""

    healthy = "healthy"
    problem = "problem"
    inconclusive = "inconclusive"


class Category(StrEnum):
    """The root-cause category: one per verdict, named after the earliest branching point."""

    #: Every member agrees on every collective and nothing is stuck.
    healthy = "healthy"
    #: Some members never enqueued the collective the others wait in: skipped, CPU-stuck or crashed.
    missing_rank = "missing_rank"
    #: Different collective type, order or call site at the same sequence number.
    desync = "desync"
    #: Same collective, different element counts or shapes.
    size_mismatch = "size_mismatch"
    #: Same collective, different dtypes.
    dtype_mismatch = "dtype_mismatch"
    #: Same collective, a different number of tensors (or of ops inside a coalesced region).
    tensor_count_mismatch = "tensor_count_mismatch"
    #: Scheduled but never started on a rank while its peers started it: a kernel before it never finished.
    gpu_hang = "gpu_hang"
    #: Every member started the collective, none completed: the transport (NIC, switch, link) is the suspect.
    network_hang = "network_hang"
    #: Completed on some members, still in it on others: a partial transport stall. Not hardware-class: the
    #: dumps do not say which node or link stalled (not a GPU hang: the stalled ranks took part).
    transport_stall = "transport_stall"
    #: No usable dump at all: nothing to compare.
    no_dump = "no_dump"
    #: The dumps do not support a conclusion (say why in ``summary``).
    inconclusive = "inconclusive"


class CulpritKind(StrEnum):
    """What the culprit ranks did, in the words people use. Drives the short verdict and the next steps."""

    #: Skipped the collective the others wait in: it moved on to a later collective (a rank-dependent branch).
    took_another_path = "took_another_path"
    #: Idle outside any collective when it dumped: stuck on the CPU side (data loading, I/O, a lock, a loop).
    cpu_stuck = "cpu_stuck"
    #: Issued a collective its peers never issue: its #s+1 is the others' #s.
    extra_call = "extra_call"
    #: Issued a different collective (type, sizes, dtypes, tensor count or call site) at the same point.
    mismatched_call = "mismatched_call"
    #: Left no dump while its peers waited for it: the process died (exit code and reason when known).
    crashed = "crashed"
    #: A collective scheduled on it but never started while its peers started it: a GPU kernel never finished.
    gpu_hang = "gpu_hang"
    #: Every member started the collective and none completed it: the transport stopped moving data.
    network_hang = "network_hang"
    #: Completed on some members, still running on others: a partial transport stall, not a GPU hang.
    transport_stall = "transport_stall"
    #: The evidence does not say what the culprits did.
    unknown = "unknown"


#: Categories whose evidence points at a GPU, a NIC or a node rather than at the program.
HARDWARE_CATEGORIES = frozenset({Category.gpu_hang, Category.network_hang})


class Frame(BaseModel):
    """One Python frame of an entry's call stack, innermost first as torch records it."""

    model_config = ConfigDict(frozen=True)
    name: str
    filename: str
    line: int


class ProcessGroupRef(BaseModel):
    """A process group as the dumps name it. ``ranks`` are global ranks (inferred when pg_config is broken)."""

    name: str
    desc: str = ""
    ranks: list[int] = Field(default_factory=list)


class Branch(BaseModel):
    """The earliest point where members of a process group stop agreeing."""

    process_group: ProcessGroupRef
    seq: int = Field(description="collective_seq_id (p2p_seq_id for point-to-point) in that group")
    op: str = Field(description="the collective most members recorded there, e.g. 'gloo:all_reduce'")
    p2p: bool = False


class StragglerKind(StrEnum):
    """How a straggler is late."""

    #: Enqueues its collectives later than the group's median (CPU side: data loading, Python, I/O).
    late_enqueue = "late_enqueue"
    #: Starts its collectives later than its peers although enqueued on time (its GPU or stream is slow).
    slow_start = "slow_start"


class Straggler(BaseModel):
    """A rank consistently behind its peers over many collectives of one process group."""

    rank: int
    kind: StragglerKind
    process_group: str
    median_ms: float = Field(description="its median delay behind the group's median, in milliseconds")
    share: float = Field(description="the share of the compared collectives on which it was late (0-1)")
    compared: int = Field(description="how many collectives were compared (the last ones of each rank)")
    nodes: list[str] = Field(default_factory=list)
    summary: str = ""


class DumpFile(BaseModel):
    """One input file of a rank that left more than one, and what was done with it."""

    file: str
    rank: int
    role: str = Field(
        description="used | merged (another recorder, or older entries) | superseded | identical | conflict"
    )
    backend: str = ""
    groups: list[str] = Field(default_factory=list)
    entries: int = 0
    record_ids: list[int] = Field(default_factory=list, description="[first, last] record id it holds")
    dumped_at_ns: int = Field(default=0, description="the latest timestamp inside it")
    note: str = ""


class EntryView(BaseModel):
    """What one rank recorded at a sequence number: the facts a person compares."""

    ranks: list[int] = Field(description="the ranks that recorded exactly this")
    op: str | None = Field(default=None, description="None: these ranks never enqueued this sequence number")
    input_sizes: list[list[int]] = Field(default_factory=list)
    input_dtypes: list[str] = Field(default_factory=list)
    output_sizes: list[list[int]] = Field(default_factory=list)
    output_dtypes: list[str] = Field(default_factory=list)
    state: str | None = None
    call_site: list[Frame] = Field(default_factory=list, description="user frames, innermost first")
    files: list[str] = Field(
        default_factory=list, description="the files these records come from, when a rank left more than one"
    )


class Evidence(BaseModel):
    """The entries that prove a finding, grouped by what the ranks recorded."""

    process_group: str
    seq: int
    views: list[EntryView]
    note: str = ""


class RankGroup(BaseModel):
    """Ranks that behaved the same: same last enqueued / completed collective in every group."""

    ranks: list[int]
    label: str = Field(description="what these ranks did, in a few words")
    last_enqueued: dict[str, int] = Field(default_factory=dict, description="per process group name")
    last_completed: dict[str, int] = Field(default_factory=dict, description="per process group name")
    in_flight: dict[str, str] = Field(
        default_factory=dict, description="per process group: the op the ranks were blocked in, if any"
    )
    nodes: list[str] = Field(default_factory=list)


class Finding(BaseModel):
    """A disagreement found at one point. The first is the root; the rest are its consequences."""

    category: Category
    process_group: str
    seq: int
    op: str
    ranks: list[int] = Field(description="the odd ranks at this point")
    summary: str
    explained_by: str | None = Field(default=None, description="why this follows from the earliest finding")
    silent: bool = Field(default=False, description="did not hang: wrong results instead (silent corruption)")


class TimelineCell(BaseModel):
    """What a lane of ranks recorded at one sequence number of a group (op None: never enqueued it)."""

    seq: int
    op: str | None = None
    state: str = ""
    detail: str = Field(default="", description="input sizes and dtypes, short")
    site: str = Field(default="", description="the innermost user frame: 'fn at file.py:42'")


class TimelineLane(BaseModel):
    """Ranks of one group that recorded the same thing at every sequence number drawn."""

    ranks: list[int]
    cells: list[TimelineCell]
    culprit: bool = False
    no_dump: bool = False
    nodes: list[str] = Field(default_factory=list, description="where these ranks ran (at most 16 named)")
    nodes_total: int = 0


class GroupTimeline(BaseModel):
    """The last collectives of one process group, one lane per behaviour (for the HTML report)."""

    process_group: str = Field(description="the group's key")
    label: str
    members: int
    seqs: list[int]
    branch_seq: int | None = Field(default=None, description="the earliest branch, when it is in this group")
    lanes: list[TimelineLane]
    lanes_omitted: int = 0


class Place(BaseModel):
    """Where a run of ranks a person looks for ran (from the manifest; empty when unknown)."""

    role: str = Field(description="culprit | no dump | straggler")
    ranks: list[int]
    pod: str = ""
    node: str = ""


class FileProblem(BaseModel):
    """An input file that could not be used, and why. The analysis goes on without it."""

    file: str
    reason: str
    rank: int | None = None


class CauseKind(StrEnum):
    """What a log, a container's end or a node says happened (evidence beyond Flight Recorder)."""

    #: A Python exception ended the rank (type, message and the innermost user frame).
    exception = "exception"
    #: CUDA ran out of memory (``torch.OutOfMemoryError``).
    cuda_oom = "cuda_oom"
    #: CUDA reported an illegal memory access (a kernel bug, or a sick GPU).
    cuda_illegal_address = "cuda_illegal_address"
    #: CUDA reported an uncorrectable ECC error: the GPU's memory.
    cuda_ecc = "cuda_ecc"
    #: gloo aborted the process (``gloo::EnforceNotMet``), e.g. on a receive larger than posted.
    gloo_abort = "gloo_abort"
    #: gloo could not connect its peers (``Gloo connectFullMesh failed``).
    gloo_connect = "gloo_connect"
    #: An NCCL WARN of a network error (``NET/IB`` completion errors, sockets).
    nccl_network_error = "nccl_network_error"
    #: An NCCL WARN or error of ``ncclInternalError``.
    nccl_internal_error = "nccl_internal_error"
    #: ``ncclRemoteError``: a peer exited or the network failed (a consequence on this rank).
    nccl_remote_error = "nccl_remote_error"
    #: An NCCL WARN of a timeout.
    nccl_timeout = "nccl_timeout"
    #: Any other NCCL WARN.
    nccl_warn = "nccl_warn"
    #: The collective watchdog timed out waiting (a consequence of another rank's absence).
    watchdog_timeout = "watchdog_timeout"
    #: The rank lost a peer (connection closed or reset): a consequence of another rank's failure.
    peer_lost = "peer_lost"
    #: An NVIDIA driver Xid line (a GPU error the kernel logged).
    xid = "xid"
    #: The process died of a segmentation fault (exit 139, SIGSEGV).
    segfault = "segfault"
    #: The kernel's OOM killer ended the container (OOMKilled, exit 137).
    oom_killed = "oom_killed"
    #: The process was killed (SIGKILL, exit 137) from outside.
    killed = "killed"
    #: The process aborted (SIGABRT, exit 134): a C++ ``terminate`` (e.g. gloo's enforce) or ``abort()``.
    aborted = "aborted"
    #: The process was terminated (SIGTERM, exit 143), usually by the launcher tearing the job down.
    terminated = "terminated"
    #: The container exited non-zero with no other sign of why.
    exit_code = "exit_code"
    #: A node condition that says the node is unhealthy (GPU health, node-problem-detector, not Ready).
    node_condition = "node_condition"
    #: A recent Event naming the node that reports a GPU or hardware error (e.g. an Xid Event).
    node_event = "node_event"


class Cause(BaseModel):
    """One piece of evidence beyond Flight Recorder about why a rank stopped, and where it was read."""

    rank: int | None = Field(default=None, description="the global rank it is about (None: a node's signal)")
    kind: CauseKind
    message: str = Field(description="what the evidence says, secrets masked, at most a few hundred characters")
    exception: str = Field(default="", description="the exception type, for an exception")
    location: str = Field(default="", description="file:line of the innermost user frame, when known")
    time: str = Field(default="", description="when it happened (RFC 3339, UTC), when the evidence says")
    step: int | None = Field(default=None, description="the training step the log last named before it")
    source: str = Field(description="the file, object or record it was read from")
    line: int | None = Field(default=None, description="its line in the tail of the source that was read")
    pod: str = ""
    node: str = ""
    primary: bool = Field(
        default=False, description="a cause rather than a consequence of another rank's failure"
    )
    first: bool = Field(default=False, description="the first rank to fail (the prime suspect)")
    excerpt: list[str] = Field(default_factory=list, description="a few log lines around it, secrets masked")


class Verdict(BaseModel):
    """The analyzer's answer for one job attempt."""

    schema_version: str = SCHEMA_VERSION
    status: Status
    category: Category
    hardware_class: bool = Field(
        default=False, description="True only where the evidence points at a GPU, a NIC or a node"
    )
    headline: str = Field(description="one line a person reads: what happened, where, who")
    summary: str = Field(default="", description="a few sentences: what the evidence says and does not")
    earliest_branch: Branch | None = None
    culprit_ranks: list[int] = Field(default_factory=list)
    culprit_detail: str = Field(
        default="", description="what the culprits did: took another path, stuck, crashed, unknown"
    )
    culprit_kind: CulpritKind | None = Field(
        default=None, description="what the culprits did, as a kind (None: no culprit, e.g. healthy)"
    )
    short: str = Field(
        default="",
        description="the verdict in at most 120 characters (kubectl describe shows it whole); empty: use headline",
    )
    suspect_nodes: list[str] = Field(
        default_factory=list, description="nodes to check for hardware: set only for hardware-class findings"
    )
    culprit_nodes: list[str] = Field(
        default_factory=list,
        description="where the culprit ranks ran (any finding): not a hardware suspicion",
    )
    world_size: int | None = None
    ranks_seen: list[int] = Field(default_factory=list)
    missing_dumps: list[int] = Field(default_factory=list)
    bad_files: list[FileProblem] = Field(default_factory=list)
    groups: list[RankGroup] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list, description="every disagreement, earliest first")
    consequences: list[Finding] = Field(default_factory=list, description="findings explained by the root")
    evidence: list[Evidence] = Field(default_factory=list)
    next_steps: list[str] = Field(default_factory=list)
    stragglers: list[Straggler] = Field(
        default_factory=list, description="ranks consistently late to enqueue or to start, healthy or not"
    )
    dump_files: list[DumpFile] = Field(
        default_factory=list, description="every file of the ranks that left more than one, and its use"
    )
    stats: dict[str, float] = Field(default_factory=dict, description="files, entries, seconds")
    timelines: list[GroupTimeline] = Field(
        default_factory=list, description="per process group, the last collectives of each lane of ranks"
    )
    timelines_omitted: int = Field(default=0, description="process groups left without a timeline")
    places: list[Place] = Field(
        default_factory=list,
        description="pods and nodes of the culprits, the ranks without a dump, stragglers",
    )
    causes: list[Cause] = Field(
        default_factory=list,
        description="evidence beyond Flight Recorder (logs, container ends, nodes): why ranks stopped, first first",
    )


    def made_inconclusive(self, headline: str, summary: str, short: str) -> Verdict:
        """This verdict with what the evidence cannot rule out said: inconclusive, its words replaced (``short``
        cut to 120 characters), everything else (branch, culprits, evidence) kept."""
        return self.model_copy(
            update={
                "status": Status.inconclusive,
                "category": Category.inconclusive,
                "headline": headline,
                "summary": summary,
                "short": short[:120],
            }
        )
