"""The agent's live-watch sampler: every ``period_s`` it reads each rank socket of its pod and keeps the
latest compact summary of each (:class:`frwatch_analyzers.live_summary.LiveRank`).

The sockets are ``<dump dir>/.frwatch-live/rank-<global rank>.sock`` (the bootstrap's, or a program's own
``worker_main()``). Per rank and round: ``fr_trace_json`` (timeout ``fr_timeout_s``, at most
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
from dataclasses import dataclass, field
from pathlib import Path

from frwatch_analyzers.limits import MAX_WORLD_SIZE
from frwatch_analyzers.live_summary import LivePod, LiveRank, cut_stack, summarize_live
from frwatch_analyzers.safe_load import DumpError
from frwatch_analyzers.safe_text import printable
from frwatch_operator.agent.worker_client import WorkerCallError, call

logger = logging.getLogger("frwatch.agent.live")

_SOCKET_RE = re.compile(r"rank-(0|[1-9][0-9]{0,6})\.sock")


@dataclass(frozen=True)
class SamplerSettings:
    """How the sampler reads its pod's ranks (the agent's config fills it)."""

    period_s: float = 15.0  #: one round of every rank this often
    fr_timeout_s: float = 5.0  #: a 2000-entry answer took 67 ms median, 0.7 s worst, on a loaded 2-core node
    max_fr_bytes: int = 16 << 20  #: about 475 B an entry: 16 MiB is a 30,000-entry ring
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
        self._started = self.monotonic()
        self.rounds = 0

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
        socks = self.sockets()
        for rank, path in sorted(socks.items()):
            self._sample(rank, path)
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

    def _sample(self, rank: int, path: Path) -> None:
        state = self._states.setdefault(rank, _RankState())
        s = self.settings
        try:
            answer = call(str(path), "fr_trace_json", timeout_s=s.fr_timeout_s, max_bytes=s.max_fr_bytes)
            if answer.status != 200:
                raise WorkerCallError("http", f"fr_trace_json answered HTTP {answer.status}")
            summary = summarize_live(answer.body, rank, self.wall_ns())
        except WorkerCallError as exc:
            self._record(
                rank, LiveRank(rank=rank, sampled_ns=self.wall_ns(), error=f"fr_trace_json: {exc}"), exc.kind
            )
            return
        except DumpError as exc:
            why = f"fr_trace_json: not a Flight Recorder answer: {printable(str(exc), 200)}"
            self._record(rank, LiveRank(rank=rank, sampled_ns=self.wall_ns(), error=why), "garbage")
            return
        progress = tuple((g.name, g.last_enqueued) for g in summary.groups)
        moved = progress != state.progress
        state.progress = progress
        if moved:
            state.stack_pending_since = None
        elif self._may_ask_stack(state):
            stack, stack_error = self._stack(rank, path, state)
            summary = summary.model_copy(update={"stack": stack, "stack_error": stack_error})
        elif state.latest is not None and state.latest.stack_error is not None:
            # still no progress, a dump_traceback still pending: still the same reason (and no "answers again")
            summary = summary.model_copy(update={"stack_error": state.latest.stack_error})
        self._record(rank, summary, "ok" if summary.stack_error is None else "stack_timeout")

    def _may_ask_stack(self, state: _RankState) -> bool:
        pending = state.stack_pending_since
        return pending is None or self.monotonic() - pending >= self.settings.stack_retry_s

    def _stack(self, rank: int, path: Path, state: _RankState) -> tuple[str | None, str | None]:
        s = self.settings
        try:
            answer = call(
                str(path), "dump_traceback", timeout_s=s.stack_timeout_s, max_bytes=s.max_stack_bytes
            )
        except WorkerCallError as exc:
            if exc.kind == "timeout":
                state.stack_pending_since = self.monotonic()
                return None, (
                    f"dump_traceback did not answer within {s.stack_timeout_s:g} s while fr_trace_json did: "
                    "the process holds the GIL (a C call or extension that keeps it)"
                )
            return None, f"dump_traceback: {exc}"
        if answer.status != 200:
            return None, f"dump_traceback answered HTTP {answer.status}"
        return cut_stack(answer.body.decode("utf-8", errors="replace")), None

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
