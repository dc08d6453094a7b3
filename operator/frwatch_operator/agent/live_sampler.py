"""The agent's live-watch sampler: every ``period_s`` it reads each rank socket of its pod and keeps the
latest compact summary of each (:class:`frwatch_analyzers.live.summary.LiveRank`).

The sockets are ``<dump dir>/.frwatch-live/rank-<global rank>.sock`` (the bootstrap's, or a program's own
``worker_main()``). A round asks every rank at the same moment (one burst), then summarises the answers
with one :class:`~frwatch_analyzers.trace.summarize.Summarizer` kept across rounds. Per rank and round: ``fr_trace_json`` (timeout ``fr_timeout_s``, at most
``max_fr_bytes`` read), summarised with the analyzer's signatures; and, only when the rank made no progress
since its previous sample, ``dump_traceback`` (timeout ``stack_timeout_s``) so a stalled rank's Python stack
is at hand. torch's ``dump_traceback`` needs the GIL and its server thread waits for it even after the
client gave up; 31 such waits starve the whole server (``docs/live-watch.md``). So after one timed out the
sampler asks again only once the rank's ring moved, or after ``stack_retry_s``.

Faults stay with their rank: a socket that never appears (``expected`` ranks, after ``startup_grace_s``),
that refuses, times out, answers garbage or too much, gives that rank an ``error`` in its summary and one
log line when its condition changes (and one when it recovers); the other ranks are sampled as before.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from frwatch_analyzers.base.limits import MAX_WORLD_SIZE
from frwatch_analyzers.base.safe_text import printable
from frwatch_analyzers.decode.safe_load import DumpError
from frwatch_analyzers.live.summary import LivePod, LiveRank, cut_stack, summarize_live
from frwatch_analyzers.trace.summarize import Summarizer
from frwatch_operator.agent.worker_client import ByteBudget, WorkerAnswer, WorkerCallError, call

logger = logging.getLogger("frwatch.agent.live")

_T = TypeVar("_T")
#: A round asks at most this many ranks at once (a pod runs 8-16; more wait for a free thread).
MAX_CALLS_AT_ONCE = 16

_SOCKET_RE = re.compile(r"rank-(0|[1-9][0-9]{0,6})\.sock")


@dataclass(frozen=True)
class SamplerSettings:
    """How the sampler reads its pod's ranks (the agent's config fills it)."""

    period_s: float = 15.0  #: one round of every rank this often
    fr_timeout_s: float = 5.0  #: a 2000-entry answer took 67 ms median, 0.7 s worst, on a loaded 2-core node
    max_fr_bytes: int = 16 << 20  #: about 475 B an entry: 16 MiB is a 30,000-entry ring
    #: The answers a round holds at once (read together, summarised one at a time): 34 full 2000-entry rings,
    #: or two of the largest; an answer larger than this is read alone. The agent's limit is 256 MiB.
    round_bytes: int = 32 << 20
    stack_timeout_s: float = 2.0
    max_stack_bytes: int = 256 << 10
    stack_retry_s: float = 300.0  #: after a dump_traceback timed out, ask again after this long at the latest
    startup_grace_s: float = 120.0  #: an expected rank without a socket is reported after this long


@dataclass
class _RankState:
    progress: tuple[tuple[str, int], ...] | None = None  #: (group, last enqueued) of the previous sample
    stack_pending_since: float | None = None  #: a dump_traceback timed out then, maybe still waiting
    condition: str = "ok"  #: the last logged condition
    latest: LiveRank | None = None


@dataclass
class LiveSampler:
    live_dir: Path
    pod: str
    settings: SamplerSettings = field(default_factory=SamplerSettings)
    #: The global ranks this pod runs, when known: a rank that never opens its socket is then reported.
    expected: frozenset[int] = frozenset()
    wall_ns: Callable[[], int] = time.time_ns
    monotonic: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._states: dict[int, _RankState] = {}
        self._lock = threading.Lock()
        self._summarizer = Summarizer()  # kept across rounds: its caches warm (one round at a time)
        self._started = self.monotonic()
        self.rounds = 0
        self.round_peak_bytes = 0  #: the most answer bytes the last round held at once

    # --- what the sampler finds -----------------------------------------------------------------------------
    def sockets(self) -> dict[int, Path]:
        out: dict[int, Path] = {}
        try:
            names = os.listdir(self.live_dir)
        except OSError:
            return out
        for name in names:
            m = _SOCKET_RE.fullmatch(name)
            if m and int(m.group(1)) < MAX_WORLD_SIZE:
                out[int(m.group(1))] = self.live_dir / name
        return out

    def latest(self) -> LivePod:
        with self._lock:
            ranks = [s.latest for _, s in sorted(self._states.items()) if s.latest is not None]
        return LivePod(pod=self.pod, ranks=ranks)

    # --- one round --------------------------------------------------------------------------------------------
    def sample_once(self) -> LivePod:
        """One round: every rank's ``fr_trace_json`` asked at the same moment (one burst, not one rank after
        another: in a job whose ranks wait for each other in every collective, reading them in turn delays
        the step once per rank), each answer summarised here as it comes (the answers held at once bounded by
        ``round_bytes``), then the stacks of the ranks that did not move asked together."""
        socks = self.sockets()
        need_stack: list[int] = []
        summaries: dict[int, LiveRank] = {}
        budget = ByteBudget(self.settings.round_bytes)  # a round's own: nothing it holds outlives it

        def take(rank: int, answer: WorkerAnswer | WorkerCallError) -> None:
            try:
                summary = self._summarize(rank, answer)
            finally:
                if isinstance(answer, WorkerAnswer):
                    budget.give(answer.held)
            if summary is not None:
                want, summaries[rank] = self._wants_stack(rank, summary)
                if want:
                    need_stack.append(rank)

        self._together(sorted(socks), lambda r: self._ask_fr(socks[r], budget), take)
        self.round_peak_bytes = budget.peak
        stacks: dict[int, tuple[str | None, str | None, bool]] = {}
        self._together(sorted(need_stack), lambda r: self._ask_stack(socks[r]), stacks.__setitem__)
        for rank, (stack, stack_error, timed_out) in stacks.items():
            if timed_out:
                self._states[rank].stack_pending_since = self.monotonic()
            summaries[rank] = summaries[rank].model_copy(update={"stack": stack, "stack_error": stack_error})
        for rank, summary in sorted(summaries.items()):
            self._record(rank, summary, "ok" if summary.stack_error is None else "stack_timeout")
        if self.monotonic() - self._started >= self.settings.startup_grace_s:
            for rank in sorted(self.expected - set(socks)):
                self._record(
                    rank,
                    LiveRank(
                        rank=rank,
                        sampled_ns=self.wall_ns(),
                        error=f"no socket after "
                        f"{self.settings.startup_grace_s:.0f} s (bootstrap not loaded: python -S/-I, "
                        "an earlier sitecustomize on PYTHONPATH, or torch.distributed never initialised; "
                        "or the rank's torch has no worker server: see its 'frwatch-live:' line)",
                    ),
                    "no_socket",
                )
        self.rounds += 1
        return self.latest()

    @staticmethod
    def _together(ranks: list[int], ask: Callable[[int], _T], then: Callable[[int, _T], None]) -> None:
        """``ask`` for every rank at once (a thread each, at most :data:`MAX_CALLS_AT_ONCE`); ``then`` here, in
        this thread, for each answer as it comes. The calls wait on sockets (no GIL held); ``ask`` never raises."""
        if len(ranks) <= 1:
            for r in ranks:
                then(r, ask(r))
            return
        with ThreadPoolExecutor(
            min(len(ranks), MAX_CALLS_AT_ONCE), thread_name_prefix="frwatch-live"
        ) as pool:
            asked = {pool.submit(ask, r): r for r in ranks}
            for done in as_completed(asked):
                then(asked[done], done.result())

    def _ask_fr(self, path: Path, budget: ByteBudget) -> WorkerAnswer | WorkerCallError:
        s = self.settings
        try:
            answer = call(
                str(path),
                "fr_trace_json",
                timeout_s=s.fr_timeout_s,
                max_bytes=s.max_fr_bytes,
                budget=budget,
            )
        except WorkerCallError as exc:
            return exc
        except OSError as exc:  # no socket to make (out of descriptors): this rank's, never the round's
            return WorkerCallError("unreachable", f"cannot connect: {exc.strerror or exc}")
        if answer.status != 200:
            budget.give(answer.held)
            return WorkerCallError("http", f"fr_trace_json answered HTTP {answer.status}")
        return answer

    def _summarize(self, rank: int, answer: WorkerAnswer | WorkerCallError) -> LiveRank | None:
        """The rank's summary, or None when it could not be read (its error recorded)."""
        if isinstance(answer, WorkerCallError):
            self._record(
                rank,
                LiveRank(rank=rank, sampled_ns=self.wall_ns(), error=f"fr_trace_json: {answer}"),
                answer.kind,
            )
            return None
        try:
            return summarize_live(answer.body, rank, self.wall_ns(), summarizer=self._summarizer)
        except DumpError as exc:
            why = f"fr_trace_json: not a Flight Recorder answer: {printable(str(exc), 200)}"
        except Exception as exc:  # a summariser's fault on one answer is that rank's, never the round's
            logger.exception("live watch: rank %d: its answer could not be summarised", rank)
            self._summarizer = Summarizer()  # its caches may be half-updated
            why = f"fr_trace_json: could not be summarised ({type(exc).__name__}): see the agent's log"
        self._record(rank, LiveRank(rank=rank, sampled_ns=self.wall_ns(), error=why), "garbage")
        return None

    def _wants_stack(self, rank: int, summary: LiveRank) -> tuple[bool, LiveRank]:
        """Whether to ask the rank's stack now: it made no progress since its previous sample and no earlier
        ask is still pending. While one is, the summary keeps that ask's reason (and no "answers again")."""
        state = self._states.setdefault(rank, _RankState())
        progress = tuple((g.name, g.last_enqueued) for g in summary.groups)
        moved = progress != state.progress
        state.progress = progress
        if moved:
            state.stack_pending_since = None
            return False, summary
        if self._may_ask_stack(state):
            return True, summary
        if state.latest is not None and state.latest.stack_error is not None:
            return False, summary.model_copy(update={"stack_error": state.latest.stack_error})
        return False, summary

    def _may_ask_stack(self, state: _RankState) -> bool:
        pending = state.stack_pending_since
        return pending is None or self.monotonic() - pending >= self.settings.stack_retry_s

    def _ask_stack(self, path: Path) -> tuple[str | None, str | None, bool]:
        """(stack, why not, whether it timed out)."""
        s = self.settings
        try:
            answer = call(
                str(path), "dump_traceback", timeout_s=s.stack_timeout_s, max_bytes=s.max_stack_bytes
            )
        except WorkerCallError as exc:
            if exc.kind == "timeout":
                return (
                    None,
                    (
                        f"dump_traceback did not answer within {s.stack_timeout_s:g} s while fr_trace_json did: "
                        "the process holds the GIL (a C call or extension that keeps it)"
                    ),
                    True,
                )
            return None, f"dump_traceback: {exc}", False
        except OSError as exc:  # no socket to make (out of descriptors): this rank's, never the round's
            return None, f"dump_traceback: cannot connect: {exc.strerror or exc}", False
        if answer.status != 200:
            return None, f"dump_traceback answered HTTP {answer.status}", False
        return cut_stack(answer.body.decode("utf-8", errors="replace")), None, False

    def _record(self, rank: int, summary: LiveRank, condition: str) -> None:
        state = self._states.setdefault(rank, _RankState())
        if condition != state.condition:
            if condition == "ok":
                logger.info("live watch: rank %d answers again", rank)
            else:
                logger.warning(
                    "live watch: rank %d: %s (live watch degrades for this rank only)",
                    rank,
                    summary.error or summary.stack_error,
                )
            state.condition = condition
        with self._lock:
            state.latest = summary

    # --- the loop -----------------------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Sample every ``period_s`` until ``stop`` is set; a round's own failure is logged, never raised."""
        while not stop.is_set():
            try:
                self.sample_once()
            except Exception:
                logger.exception("live watch: a sampling round failed")
            stop.wait(self.settings.period_s)


#: The most ranks one pod is expected to run (torchrun's nproc_per_node on the largest nodes is 8-16).
MAX_RANKS_A_POD = 1024


def parse_rank_span(text: str) -> frozenset[int]:
    """The ranks of ``"first-last"`` (the agent's ``live_ranks`` setting); empty for "" or anything else."""
    m = re.fullmatch(r"(0|[1-9][0-9]{0,6})-(0|[1-9][0-9]{0,6})", text.strip())
    if m is None:
        return frozenset()
    first, last = int(m.group(1)), int(m.group(2))
    if not first <= last < MAX_WORLD_SIZE or last - first >= MAX_RANKS_A_POD:
        return frozenset()
    return frozenset(range(first, last + 1))
