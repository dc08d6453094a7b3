"""A rank's live progress, as an agent samples it from torch's worker server (live watch, issue 15).

``summarize_live(answer, rank, ...)`` turns one ``fr_trace_json`` answer (the rank's live Flight Recorder
buffer, JSON, hostile input) into a compact :class:`LiveRank`: per process group the last enqueued /
started / completed sequence numbers and the last :data:`LIVE_TAIL` entries with their signatures. The
signatures are the analyzer's own (:class:`~.summarize.Summarizer`, the collective rules of :mod:`.rules`):
the same bytes on every rank for what must agree, so the operator compares summaries of different pods
directly. Live answers carry no frames (torch's JSON has none), so signatures hold no call site.

Bounds: the answer is decoded by :func:`.safe_load.decode` (JSON, depth- and size-checked by the caller's
read bound) and summarised by the analyzer's bounded summariser; at most :data:`MAX_LIVE_GROUPS` groups and
:data:`LIVE_TAIL` entries a group travel; texts are printable and cut.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..base.safe_text import printable
from ..decode.safe_load import DumpError, decode
from ..trace.summarize import STATE_NAMES, Summarizer

#: The entries a group's summary keeps: enough for the straggler rule (8 compared) and a desync window.
LIVE_TAIL = 16
#: The process groups a rank's summary keeps (the most recently active first).
MAX_LIVE_GROUPS = 64
#: The largest member list a group's summary carries. A bigger group's members are left to the operator's
#: inference (the default group: the world; another: the ranks that report it), as for gloo's broken
#: pg_config: NCCL lists every member of the default group, and 8000 ranks each sending 8000 members made
#: one job's round 320 KB a pod and 5.3 GB in the operator (``benchmarks/bench_live_operator.py``).
MAX_LIVE_MEMBERS = 256
#: The longest Python stack text kept (the part nearest the call: the end of each thread is kept whole).
MAX_STACK_CHARS = 8192
LIVE_SCHEMA = "frwatch.live/v1"

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class LiveSig(BaseModel):
    """What a signature stands for, for the finding's words (the signature is what is compared)."""

    model_config = _FROZEN
    op: str
    #: Sizes and dtypes as recorded (sizes left out when the collective's rule lets them differ by rank).
    input_sizes: list[list[int]] = Field(default_factory=list)
    input_dtypes: list[str] = Field(default_factory=list)


class LiveEntry(BaseModel):
    """One recorded collective of one group, as the rank holds it now."""

    model_config = _FROZEN
    seq: int
    #: The analyzer's signature (16 hex digits): equal across ranks when what must agree agrees.
    sig: str
    #: ``time_created_ns`` on the rank's wall clock (0 unknown): when it was enqueued.
    created_ns: int = 0
    state: str = ""
    #: False: in flight when sampled (gloo's only in-flight signal).
    retired: bool | None = None


class LiveGroup(BaseModel):
    model_config = _FROZEN
    name: str
    desc: str = ""
    #: Members from pg_config when it is sane (gloo's is not: then None, the operator infers them).
    members: list[int] | None = None
    last_enqueued: int
    last_started: int
    last_completed: int
    tail: list[LiveEntry]


class LiveRank(BaseModel):
    """One sample of one rank. ``error`` set: the rank could not be read this time (``groups`` empty)."""

    model_config = _FROZEN
    rank: int
    #: The agent's wall clock when the sample was taken (ns since the epoch).
    sampled_ns: int
    groups: list[LiveGroup] = Field(default_factory=list)
    #: What each signature of the tails stands for.
    signatures: dict[str, LiveSig] = Field(default_factory=dict)
    #: Where every Python thread of the rank was (torch's dump_traceback), when the agent asked.
    stack: str | None = None
    #: Why the rank or its stack could not be read (one line), else None.
    error: str | None = None
    stack_error: str | None = None


class LivePod(BaseModel):
    """What an agent serves about its pod's ranks: the latest sample of each."""

    model_config = _FROZEN
    schema_: str = Field(default=LIVE_SCHEMA, alias="schema")
    pod: str
    ranks: list[LiveRank]


def _sig_hex(sig: int) -> str:
    return f"{sig & 0xFFFFFFFFFFFFFFFF:016x}"


def summarize_live(
    answer: bytes,
    rank: int,
    sampled_ns: int,
    tail: int = LIVE_TAIL,
    summarizer: Summarizer | None = None,
) -> LiveRank:
    """The summary of one rank's live buffer. Raises :class:`DumpError` for an answer that is no dump.

    ``summarizer``: one kept across a sampler's rounds (its caches warm: a ring that moved by a few entries
    is mostly what the last round saw, and the compiled loop takes nearly every entry); a new one if None.
    Not thread-safe: one caller at a time."""
    if not answer.lstrip().startswith(b"{"):
        raise DumpError("not a JSON Flight Recorder answer")
    if b'"entries"' not in answer:  # before init_process_group torch answers without entries
        return LiveRank(rank=rank, sampled_ns=sampled_ns)
    dump, _ = decode(answer)
    summarizer = summarizer if summarizer is not None else Summarizer()
    trace = summarizer.summarize(dump, rank, f"live:{rank}", "json")
    # every signature of this answer, whether emitted by an earlier round (a warm summarizer emits each once)
    details = summarizer.details
    groups: list[LiveGroup] = []
    sigs: dict[str, LiveSig] = {}
    for pg in trace.pgs.values():
        entries = []
        for t in pg.tail[-tail:]:
            key = _sig_hex(t.sig)
            d = details.get(t.sig)
            if key not in sigs and d is not None:
                sigs[key] = LiveSig(
                    op=printable(d.op, 80),
                    input_sizes=[list(s[:8]) for s in d.input_sizes[:8]] if not d.varying else [],
                    input_dtypes=[printable(x, 40) for x in d.input_dtypes[:8]],
                )
            entries.append(
                LiveEntry(
                    seq=t.seq,
                    sig=key,
                    created_ns=t.created_ns,
                    state=STATE_NAMES.get(t.state, ""),
                    retired=t.retired,
                )
            )
        groups.append(
            LiveGroup(
                name=printable(pg.name, 120),
                desc=printable(pg.desc, 120),
                members=list(pg.config_ranks)
                if pg.config_ranks is not None and len(pg.config_ranks) <= MAX_LIVE_MEMBERS
                else None,
                last_enqueued=pg.last_enqueued,
                last_started=pg.last_started,
                last_completed=pg.last_completed,
                tail=entries,
            )
        )
    groups.sort(key=lambda g: max((e.created_ns for e in g.tail), default=0), reverse=True)
    groups = groups[:MAX_LIVE_GROUPS]
    kept = {e.sig for g in groups for e in g.tail}
    return LiveRank(
        rank=rank,
        sampled_ns=sampled_ns,
        groups=groups,
        signatures={k: v for k, v in sigs.items() if k in kept},
    )


def cut_stack(text: str) -> str:
    """A stack text a person reads, printable and at most :data:`MAX_STACK_CHARS` (the end kept)."""
    clean = "\n".join(printable(line, 300) for line in text.splitlines())
    return clean if len(clean) <= MAX_STACK_CHARS else "...\n" + clean[-MAX_STACK_CHARS:]
