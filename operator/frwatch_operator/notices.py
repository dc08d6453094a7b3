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
    bump = f"; pods created from now on belong to attempt {following}" if following else ""
    return Notice(
        "Warning",
        "IncidentOpened",
        f"frwatch opened Incident {incident} for attempt {attempt}: {trigger}. It collects every rank's "
        f"Flight Recorder dump for up to {deadline_s}s{bump} (kubectl get incident {incident})",
    )


def collected(incident: str, manifest: Manifest, url: str, analysis_wired: bool) -> Notice:
    missing = [r for r in manifest.ranks if not r.dumped]
    dumped = len(manifest.ranks) - len(missing)
    then = "analysis starts next" if analysis_wired else "analysis is not wired in this frwatch yet"
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
