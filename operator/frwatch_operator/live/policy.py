"""Which live watch a job gets (issue 15): on or off, and what a finding does. Pure: no I/O.

One path, as capture's settings (:mod:`frwatch_operator.capture.optin`): the operator's default (the chart's
``liveWatch.policy``; live watch itself is off by default) overlaid by the job's CapturePolicy
(``spec.liveWatch``) into :class:`~frwatch_operator.resources.CaptureSettings`, then the job's own annotations
win: ``frwatch.io/live`` (``enabled`` / ``disabled``) and ``frwatch.io/live-policy`` (``report``,
``dumpAndAnalyze``, ``abort``). Precedence job > policy > chart.

A malformed annotation value is never guessed at: ``frwatch.io/live`` other than the two words is ignored
(the policy's choice holds), ``frwatch.io/live-policy`` other than the three is ignored likewise; ``problem``
says it, for one log line. ``abort`` needs the operator's explicit switch (``liveWatch.abortAllowed``, off by
default): without it the job gets ``dumpAndAnalyze`` and ``problem`` says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frwatch_operator import constants as c
from frwatch_operator.resources import CaptureSettings, LivePolicyName


@dataclass(frozen=True)
class LiveChoice:
    """Live watch for one job: on or off, what a finding does, and what was ignored (None: nothing)."""

    enabled: bool
    policy: LivePolicyName
    problem: str | None = None


def _annotations(job: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = job.get("metadata")
    found = meta.get("annotations") if isinstance(meta, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def live_choice(job: Mapping[str, Any], settings: CaptureSettings | None, abort_allowed: bool) -> LiveChoice:
    """The job's live watch, from its annotations over ``settings`` (the chart's default and its
    CapturePolicy's, :func:`frwatch_operator.capture.optin.resolve`); ``settings`` None: capture is off, so is live
    watch (it needs the agent)."""
    if settings is None:
        return LiveChoice(False, LivePolicyName.REPORT)
    annotations = _annotations(job)
    problems: list[str] = []
    enabled = settings.live_enabled
    raw = annotations.get(c.ANN_LIVE)
    if raw is not None:
        word = str(raw).strip()
        if word in (c.LIVE_ENABLED, c.LIVE_DISABLED):
            enabled = word == c.LIVE_ENABLED
        else:
            problems.append(f"{c.ANN_LIVE}={str(raw)[:60]!r} is neither {c.LIVE_ENABLED!r} nor "
                            f"{c.LIVE_DISABLED!r}: ignored")  # fmt: skip
    policy = settings.live_policy
    raw = annotations.get(c.ANN_LIVE_POLICY)
    if raw is not None:
        try:
            policy = LivePolicyName(str(raw).strip())
        except ValueError:
            words = ", ".join(p.value for p in LivePolicyName)
            problems.append(f"{c.ANN_LIVE_POLICY}={str(raw)[:60]!r} is not one of {words}: ignored")
    if policy is LivePolicyName.ABORT and not abort_allowed:
        policy = LivePolicyName.DUMP_AND_ANALYZE
        problems.append(
            "policy abort is not allowed by the operator (liveWatch.abortAllowed): dumpAndAnalyze"
        )
    return LiveChoice(enabled, policy, "; ".join(problems) or None)


def live_requested(job: Mapping[str, Any], settings: CaptureSettings | None) -> bool:
    """Whether the job gets live watch (its pods the bootstrap, its agents the sampler)."""
    return live_choice(job, settings, abort_allowed=False).enabled
