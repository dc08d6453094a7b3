"""A rank's trace, the value the map step makes of one dump (:mod:`.summarize`) and every later step reads:
:class:`RankTrace`, per group a :class:`PgTrace` (its sequence numbers, signatures, and the detail of the
entries it keeps, :class:`TailEntry`), its point-to-point entries (:class:`P2PEntry`) and what each
signature stands for (:class:`EntrySig`)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

#: Members of a group: a range when contiguous (compact to pickle and to hash), else a tuple.
Ranks = range | tuple[int, ...]
Shapes = tuple[tuple[int, ...], ...]

STATE_CODES = {"scheduled": 0, "started": 1, "completed": 2}
STATE_NAMES = {v: k for k, v in STATE_CODES.items()}


@dataclass(frozen=True)
class EntrySig:
    """What a rank recorded at one sequence number, without times and states: the thing ranks must agree
    on. For a collective whose sizes may differ by rank (``varying``), only the number of tensors stays."""

    op: str
    input_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_sizes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    call_site: tuple[tuple[str, str, int], ...]  # (name, filename, line), innermost user frame first
    parts: int = 1  # >1: coalesced entries that share the sequence number
    varying: bool = False  # sizes left out by the collective's rule: see the per-rank counts


@dataclass(slots=True)
class TailEntry:
    """Full detail of one of the entries a rank's summary keeps for a group."""

    seq: int
    record_id: int
    sig: int
    state: int  # STATE_CODES; -1 unknown
    retired: bool | None
    created_ns: int
    started_ns: int
    completed_ns: int
    splits: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # all_to_all lists: elements per peer


@dataclass
class PgTrace:
    """One rank's record of one process group."""

    name: str
    desc: str
    seqs: array[int]  # sorted collective_seq_ids the rank holds (its ring-buffer window)
    sigs: array[int]  # signature digest per seq
    plain: array[int]  # the same without the call site: compared when some ranks' dumps have no frames (JSON)
    created: array[int]  # time_created_ns per seq (0 unknown)
    # the first entries not completed, then the last TAIL entries, by seq (read-only: a summary's are rows of
    # one column, tail_rows.TailRows)
    tail: Sequence[TailEntry]
    config_ranks: Ranks | None  # from pg_config when it is sane, else None (a range when contiguous)
    last_enqueued: int  # from pg_status when present, else the last seq held
    last_started: int
    last_completed: int  # from pg_status when present, else derived from states/retired
    status_known: bool
    first_record_id: int = -1
    seq_digest: bytes = b""  # digest of (seqs, sigs): ranks with equal digests behaved identically
    plain_digest: bytes = b""  # digest of (seqs, plain)
    backend: str = ""  # the profiling names' prefix ("nccl", "gloo"): each backend has its own recorder
    var_seqs: array[int] = field(default_factory=lambda: array("q"))  # entries whose sizes may differ by rank
    var_in: array[int] = field(default_factory=lambda: array("q"))  # their input elements
    var_out: array[int] = field(default_factory=lambda: array("q"))  # their output elements


@dataclass
class P2PEntry:
    pg: str
    p2p_seq: int
    kind: str  # "send" | "recv"
    src: int  # group-local, as the profiling name says
    dst: int
    sig: int
    state: int
    record_id: int
    created_ns: int


@dataclass
class RankTrace:
    """Everything the reduce step needs from one rank's dump."""

    rank: int
    file: str
    fmt: str
    version: str
    backend: str  # "nccl", "gloo", ... from profiling names
    entries: int
    pgs: dict[str, PgTrace]
    p2p: list[P2PEntry]
    sig_details: dict[int, EntrySig] = field(default_factory=dict)  # only signatures new to this worker
    has_states: bool = False  # NCCL-style started/completed states present
    has_frames: bool = False
    last_record_id: int = -1
    has_timing: bool = False  # some entry was seen 'started' (TORCH_NCCL_ENABLE_TIMING)
    first_record_id: int = -1
    dumped_ns: int = 0  # the latest timestamp in the summary: close to when the dump was taken
    world_ranks: tuple[int, int] | None = None  # (lowest, highest) rank of an unnamed pg_config entry (gloo)
    files: list[str] = field(default_factory=list)  # every file merged into this trace (merge.py)


def compact_ranks(ranks: list[int]) -> Ranks:
    """A member list as a ``range`` when it is one, contiguous or strided (the usual cases: a TP group
    ``range(8k, 8k + 8)``, a DP group ``range(k, world, 8)``; 16k ranks pickle and hash as three ints, not
    16k), else a tuple. Members lists are per rank and per group: a list each would be O(ranks^2)."""
    if len(ranks) > 1 and ranks[1] > ranks[0]:
        step = ranks[1] - ranks[0]
        if (ranks[-1] - ranks[0]) % step == 0 and len(ranks) == (ranks[-1] - ranks[0]) // step + 1:
            members = range(ranks[0], ranks[-1] + 1, step)
            if ranks == list(members):
                return members
    elif len(ranks) == 1:
        return range(ranks[0], ranks[0] + 1)
    return tuple(ranks)
