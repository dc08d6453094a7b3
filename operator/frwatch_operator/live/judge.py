"""The operator's live judgement of one job attempt (live watch, issue 15, policy ``report``). Pure: no I/O,
no clock of its own.

:class:`LiveJudge` is fed, once a round, what was pulled from every agent of the attempt (a
:class:`~frwatch_analyzers.live.summary.LivePod` per pod, or why that pod's agent could not be read) and the
time; it runs :class:`~frwatch_analyzers.live.watch.LiveWatch` and answers :class:`Round`: the finding to
report now (a desync or a stall: stragglers stay informational), at most one a round, each finding
(``kind, group, seq``) reported once for the life of the judge. The ranks of an agent that failed this
round are simply absent: live watch degrades for them only.

Also the Incident's side of it: :func:`live_finding` (the finding as the Incident's ``status.liveFinding``),
:func:`early_status` (the status of an Incident opened Early) and :func:`join_early` (the explicit
transition ``Early -> Detected`` when the attempt's failure comes, keeping the finding).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from frwatch_analyzers.live.summary import LivePod
from frwatch_analyzers.live.watch import LiveFinding, LiveReport, LiveWatch
from frwatch_analyzers.verdict import Straggler
from frwatch_operator.resources import (
    CaptureSettings,
    IncidentCounts,
    IncidentLiveFinding,
    IncidentPhase,
    IncidentStatus,
)

#: The top frames an Incident and an Event name (one a culprit rank).
MAX_FRAMES = 8
_FRAME = re.compile(r'^\s*File "[^"]*", line \d+ in \S+')
#: Frames of threads that are never where a rank is stuck (the bootstrap's, Python's thread machinery).
_NOT_THE_RANK = ("threading.py", "frwatch_live_boot.py", "sitecustomize.py")


@dataclass(frozen=True)
class Round:
    """What one round decided."""

    #: The finding to report now (never one reported before), else None.
    report: LiveFinding | None
    #: Every finding this round (reported now, before, or not yet).
    findings: list[LiveFinding]
    stragglers: list[Straggler]
    #: Ranks left out this round and why (their agent could not be read, or the rank itself).
    unreadable: dict[int, str]
    #: Pods whose agent could not be read this round, and why.
    unreachable: dict[str, str] = field(default_factory=dict)


class LiveJudge:
    """One job attempt's judge: keeps LiveWatch's memory across rounds and what was already reported. (A
    desync is judged once its group's members have been read at its sequence number, or after the watch's
    ``settle_s``: :class:`~frwatch_analyzers.live.watch.LiveWatch` holds it.)"""

    def __init__(self, world: Iterable[int], stall_after_s: float) -> None:
        self.watch = LiveWatch(world, stall_after_s=stall_after_s)
        self.reported: set[tuple[str, str, int]] = set()

    def judge(self, pulled: Mapping[str, LivePod | str], now: float) -> Round:
        """One round: ``pulled`` maps each pod to its agent's answer, or to why it could not be read."""
        samples = [r for answer in pulled.values() if isinstance(answer, LivePod) for r in answer.ranks]
        unreachable = {pod: why for pod, why in pulled.items() if isinstance(why, str)}
        report: LiveReport = self.watch.observe(samples, now)
        new = [f for f in report.findings if f.key not in self.reported]
        chosen = new[0] if new else None
        if chosen is not None:
            self.reported.add(chosen.key)
        return Round(chosen, report.findings, report.stragglers, report.unreadable, unreachable)


def top_frame(stack: str) -> str:
    """The innermost frame of the rank's own thread in a ``dump_traceback`` text (faulthandler lists each
    thread most recent call first): the main thread's (the one a ``threading`` thread's ``_bootstrap`` did
    not start) when its top is not Python's thread machinery or frwatch's bootstrap; else the first frame of
    the first thread whose top is not; else the first frame; "" when there is none. The main thread first:
    a program's helper thread (a watchdog polling in ``time.sleep``) is listed before it when it ran last."""
    threads: list[list[str]] = []
    new_thread = True
    for line in stack.splitlines():
        if not line.startswith(" "):
            new_thread = True
            continue
        if _FRAME.match(line):
            if new_thread:
                threads.append([])
                new_thread = False
            threads[-1].append(line.strip())
    firsts = [t[0] for t in threads]
    mains = [t[0] for t in threads if not ("threading.py" in t[-1] and "in _bootstrap" in t[-1])]
    for f in [*mains, *firsts]:
        if not any(name in f for name in _NOT_THE_RANK):
            return f[:300]
    return firsts[0][:300] if firsts else ""


def live_finding(finding: LiveFinding, seen_at: str) -> IncidentLiveFinding:
    """The finding as an Incident's ``status.liveFinding``."""
    frames = [f"rank {r}: {top}" for r, s in sorted(finding.stacks.items()) if (top := top_frame(s))]
    return IncidentLiveFinding(
        kind=finding.kind.value,
        process_group=finding.process_group[:120],
        seq=finding.seq,
        ranks=finding.ranks[:1024],
        peers=finding.peers[:1024],
        for_seconds=finding.for_s,
        top_frames=frames[:MAX_FRAMES],
        summary=finding.summary[:2048],
        seen_at=seen_at,
    )


def early_status(found: IncidentLiveFinding, expected_ranks: int | None) -> IncidentStatus:
    """The first status of an Incident that live watch opened: phase Early, the finding, no deadline (nothing
    is collected while the job runs)."""
    return IncidentStatus(
        phase=IncidentPhase.EARLY,
        counts=IncidentCounts(expected_ranks=expected_ranks),
        live_finding=found,
        message=f"live watch: {found.summary}"[:1024],
    )


def join_early(
    status: IncidentStatus,
    *,
    trigger: str,
    detected_at: str,
    deadline: str,
    expected_ranks: int | None,
    settings: CaptureSettings,
) -> IncidentStatus | None:
    """The attempt's failure joins the Incident live watch opened: ``Early -> Detected`` (collection then runs
    as for any Incident), the finding kept. None when the Incident is not Early (already joined, or opened by
    the failure itself): nothing to change."""
    if status.phase is not IncidentPhase.EARLY:
        return None
    return status.model_copy(
        update={
            "phase": IncidentPhase.DETECTED,
            "detected_at": detected_at,
            "collection_deadline": deadline,
            "counts": IncidentCounts(expected_ranks=expected_ranks or status.counts.expected_ranks),
            "settings": settings,
            "message": f"detected: {trigger} (live watch saw it first: see liveFinding)"[:1024],
        }
    )
