"""The repeat policy's CRD fields (issue 29): ``CapturePolicy.spec.repeat`` and ``Incident.status.repeat``, kept
apart from :mod:`frwatch_operator.resources` (which imports them into its models; ``scripts/gen_crds.py`` reads
them through it). The decision they carry is :mod:`frwatch_operator.remediation.restart_policy`'s."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from frwatch_operator.wire import Wire as _Wire


class RepeatPolicyName(StrEnum):
    """What frwatch does when two consecutive attempts of one job end at the same earliest branch (the same
    bug twice: :mod:`frwatch_operator.remediation.restart_policy`)."""

    REPORT = "report"  #: say so (Incident condition SameBugAgain, an Event), leave the job alone (the default)
    #: and suspend the job (its controller deletes the running attempt's pods and starts no other)
    SUSPEND = "suspend"
    #: as suspend (none of the three kinds has a field that fails a running job), and the job annotated
    #: frwatch.io/restart-stopped with the category for a failure policy to read
    FAIL = "fail"


class RepeatPolicy(_Wire):
    """What the same bug twice does to the job's next restart. Unset fields take the operator's defaults; the
    job's own annotation ``frwatch.io/repeat-policy`` wins over ``policy``; the operator's dry-run
    (``remediation.repeatDryRun``, on by default) wins over both."""

    policy: RepeatPolicyName | None = Field(
        default=None,
        description="report (an Event and an Incident condition only), suspend (suspend the job: TrainJob and "
        "JobSet spec.suspend, PyTorchJob spec.runPolicy.suspend) or fail (the same, and the job annotated "
        "frwatch.io/restart-stopped for a failure policy).",
    )
    dry_run: bool | None = Field(
        default=None, description="Only say what suspend or fail would do (true forces it; false cannot undo the operator's)."
    )


class IncidentRepeat(_Wire):
    """Whether this attempt failed the way the one before did, and what the repeat policy did about it."""

    branch_key: str = Field(
        default="", max_length=2048,
        description="What makes two failures the same bug: category, process group, op, call sites at the earliest "
        "branch, culprit kind and ranks; empty: the verdict cannot stop a restart (healthy, inconclusive, "
        "hardware-class, or no call site).",
    )  # fmt: skip
    previous_incident: str = Field(default="", description="The previous attempt's Incident compared with.")
    same: bool = Field(default=False, description="Both attempts ended at the same earliest branch.")
    policy: str = Field(default="", description="report, suspend or fail: the policy in force.")
    action: str = Field(
        default="", description="none, reported, dry-run (would suspend) or suspended: what was done to the job."
    )
    resume: str = Field(default="", max_length=512, description="The kubectl command that resumes the job.")
    gpus: int = Field(default=0, ge=0, description="GPUs the job requests in all (pods x GPUs a pod).")
    attempt_seconds: float = Field(
        default=0.0, ge=0, description="How long an attempt ran until the watchdog, from this job's two failures."
    )
    gpu_hours_not_spent: float = Field(
        default=0.0, ge=0, description="gpus x attemptSeconds / 3600: what a further attempt would have burnt."
    )
