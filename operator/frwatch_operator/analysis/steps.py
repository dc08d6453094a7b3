"""What one pass of the Analyzing phase did (:class:`Step`) and saw (:class:`Observed`).

Shared by :mod:`.analyzing` (the phase's entry points and endings) and :mod:`.analysis_jobs` (creating
its Jobs); no logic here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: How soon to look at a running analyzer Job again (seconds).
POLL_SECONDS = 5.0


@dataclass(frozen=True)
class Observed:
    """What one call saw happen, for the operator's metrics (nothing here drives the Incident)."""

    #: The analyzer Job's end, seen in this call: ``succeeded``, ``failed`` or ``deadline`` ("": none).
    analyzer_job: str = ""
    #: The verdict stored and surfaced in this call: its category ("": none) and hardware_class.
    category: str = ""
    hardware_class: bool = False
    seconds_since_detection: float = 0.0
    cordoned: int = 0  #: nodes cordoned (spec.unschedulable set) in this call
    would_cordon: int = 0  #: nodes a dry-run plan would have cordoned
    skipped: tuple[str, ...] = ()  #: a SkipReason code for each suspect node left alone
    breaker_tripped: bool | None = None  #: the circuit breaker as stored (None: not read)
    #: what the repeat policy did in this call (``restart_policy.RepeatAction``; "" or "none": nothing)
    repeat_action: str = ""
    gpu_hours_not_spent: float = 0.0  #: GPU-hours a further attempt would have burnt, when the job was suspended


@dataclass(frozen=True)
class Step:
    """What one call did: the Incident status merge patch to write ({}: nothing), and what comes next."""

    status: dict[str, Any] = field(default_factory=dict)
    #: The Analyzing phase is over (Reported or Failed): stop calling advance_analysis.
    done: bool = False
    #: Still analyzing: call advance_analysis again after this many seconds.
    retry_after: float | None = None
    #: What happened, for the metrics (the caller records it once the status is written).
    observed: Observed = field(default_factory=Observed)
