"""Read a Job the verdict loop started (the map, analyzer or source Job) and work out where it stands.

One path for the three steps of the Analyzing phase: the Job and its pods as the API serves them, and their
:func:`~.job_outcome.job_outcome` with the overdue limit of the run's deadline plus :data:`OVERDUE_GRACE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from frwatch_operator.analysis.analyzer_job import effective_run
from frwatch_operator.analysis.job_outcome import JobOutcome, job_outcome
from frwatch_operator.config import AnalyzerSettings
from frwatch_operator.kube.ports import KubeActions, Obj
from frwatch_operator.resources import CaptureSettings

#: How long past its activeDeadlineSeconds a Job may stay unfinished before it counts as failed (overdue).
OVERDUE_GRACE = timedelta(minutes=5)


@dataclass(frozen=True)
class JobRead:
    """A Job as read: the object, its pods, and where it stands."""

    job: Obj
    pods: list[Obj]
    outcome: JobOutcome


def read_job(
    kube: KubeActions,
    namespace: str,
    name: str,
    *,
    analyzer: AnalyzerSettings,
    settings: CaptureSettings | None,
    now: datetime,
) -> JobRead | None:
    """The Job ``namespace/name``, its pods and its outcome; None when the Job is gone. ``analyzer`` and
    ``settings`` (the job's effective capture settings, None: the operator's) give the deadline."""
    job = kube.get_batch_job(namespace, name)
    if job is None:
        return None
    pods = kube.list_job_pods(namespace, name)
    deadline = effective_run(analyzer, settings).deadline_seconds
    return JobRead(job, pods, job_outcome(job, pods, now=now, overdue_after=timedelta(seconds=deadline) + OVERDUE_GRACE))
