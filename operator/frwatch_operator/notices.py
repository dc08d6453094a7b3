"""The Events frwatch posts for detection and collection: reason (CamelCase) and a message a person reads
in ``kubectl describe`` (what happened, why, what happens next or what to do). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from frwatch_analyzers.manifest import Manifest
from frwatch_operator import constants as c
from frwatch_operator.incident_naming import next_attempt


@dataclass(frozen=True)
class Notice:
    """One Event to post on an object."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


def capture_untouched(reason: str) -> Notice:
    """The job's opt-in (annotation or policy) is malformed: frwatch leaves it alone."""
    return Notice("Warning", "CaptureConfigInvalid", f"frwatch left this job untouched: {reason}")


def capture_enabled(reason: str) -> Notice:
    return Notice(
        "Normal",
        "CaptureEnabled",
        f"frwatch captures Flight Recorder dumps of pods created from now on ({reason}); "
        "pods that already run are not changed",
    )


def policy_invalid(name: str, problem: str) -> Notice:
    return Notice(
        "Warning",
        "CapturePolicyInvalid",
        f"{c.POLICY_KIND} {name!r} is malformed ({problem}): the jobs it may select are left untouched; "
        "fix the policy",
    )


def incident_opened(incident: str, attempt: str, trigger: str, deadline_s: int) -> Notice:
    """Deterministic for one Incident (its first trigger, its deadline): posted once, even across restarts."""
    following = next_attempt(attempt, attempt)
    bump = f"; pods created from now on belong to attempt {following} (the job's frwatch.io/attempt)" if following else ""
    return Notice(
        "Warning",
        "IncidentOpened",
        f"frwatch opened Incident {incident} for attempt {attempt}: {trigger}. It collects every rank's "
        f"Flight Recorder dump for up to {deadline_s}s{bump} (kubectl get incident {incident})",
    )


def collected(incident: str, manifest: Manifest, url: str) -> Notice:
    missing = [r for r in manifest.ranks if not r.dumped]
    dumped = len(manifest.ranks) - len(missing)
    then = "analysis starts next"
    if not missing:
        return Notice(
            "Normal",
            "DumpsCollected",
            f"Incident {incident}: the dumps of all {dumped} ranks are in {url}; {then}",
        )
    shown = ", ".join(f"rank {r.rank} ({r.why_missing})" for r in missing[:3])
    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    return Notice(
        "Warning",
        "DumpsMissing",
        f"Incident {incident}: {dumped} of {len(manifest.ranks)} ranks dumped by the deadline; missing: "
        f"{shown}{more}. The manifest ({url}/manifest.json) lists them; {then} with the dumps there are",
    )


def spec_out_of_bounds(problem: str) -> Notice:
    """The job's spec claims a world size past frwatch's bound: it is not used as one."""
    return Notice("Warning", "JobSpecOutOfBounds", f"frwatch does not trust this job's rank layout: {problem}")


def evidence_inconsistent(incident: str, issues: list[str], shown: int = 4) -> Notice:
    """What in the store disagreed with what the cluster showed (the cluster's view was used)."""
    listed = "; ".join(issues[:shown]) + (f"; and {len(issues) - shown} more" if len(issues) > shown else "")
    return Notice(
        "Warning",
        "EvidenceInconsistent",
        f"Incident {incident}: the evidence in the store is inconsistent with what the cluster saw: {listed}. "
        "frwatch used only the pods, nodes and exit codes the Kubernetes API showed (kubectl get incident "
        f"{incident} -o yaml: status.observed)",
    )


def attempt_not_captured(attempt: str, following: str, pod: str) -> Notice:
    """The job's current attempt runs without capture (no pod of it was injected): the next one is captured.
    Posted by the replica whose conditional write moved the attempt on (once)."""
    return Notice(
        "Warning",
        "AttemptNotCaptured",
        f"frwatch attempt {attempt} of this job runs without Flight Recorder capture: its pods (e.g. {pod}) were "
        "created before capture was enabled for the job, or while frwatch's webhook could not inject them (it "
        "fails open: down, unreachable, or the job not yet known). A failure of this attempt opens no Incident. "
        f"Pods created from now on belong to attempt {following} and are captured",
    )


def pod_not_captured(pod: str, attempt: str) -> Notice:
    """A pod of an attempt that is otherwise captured was admitted without capture (the webhook missed it)."""
    return Notice(
        "Warning",
        "PodNotCaptured",
        f"pod {pod} was admitted without Flight Recorder capture (frwatch's webhook could not inject it: down, "
        f"unreachable, or the job not yet known; it fails open): attempt {attempt}'s Incident will have no dump "
        "of its ranks",
    )
