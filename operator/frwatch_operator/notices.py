"""The Events frwatch posts: :class:`Notice` (the one Event type: the object it is about, an
:class:`ObjectRef`, is chosen by the caller), :class:`Reason` (every reason frwatch gives, the REASON column of ``kubectl describe``), and the
notices of detection and collection, with a message a person reads (what happened, why, what happens next
or what to do); the verdict loop's are in ``verdict.report`` and ``remediation.apply``. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from frwatch_analyzers.store.manifest import Manifest
from frwatch_operator import constants as c
from frwatch_operator.incident.naming import next_attempt


class Reason(StrEnum):
    """Event reasons (the REASON column of ``kubectl describe``); some are condition reasons too."""

    # opt-in and admission (on the job, the policy, the pod)
    CAPTURE_ENABLED = "CaptureEnabled"  #: the job is captured from now on (job)
    #: this attempt ended at the same earliest branch as the one before; the repeat policy is report or dry-run
    SAME_BUG_AGAIN = "SameBugAgain"
    #: the same bug twice: frwatch suspended the job so no further attempt burns its GPUs (job, Incident)
    RESTART_STOPPED = "RestartStopped"
    CAPTURE_CONFIG_INVALID = "CaptureConfigInvalid"  #: a malformed opt-in: the job is left untouched (job)
    POLICY_INVALID = "CapturePolicyInvalid"  #: a malformed CapturePolicy (the policy)
    CAPTURE_AT_RISK = "CaptureAtRisk"  #: a pod injected with something that may keep it from dumping (pod)
    CAPTURE_NOT_INJECTED = "CaptureNotInjected"  #: a pod of a captured job admitted without capture (pod)
    ATTEMPT_NOT_CAPTURED = "AttemptNotCaptured"  #: the job's current attempt runs without capture (job)
    POD_NOT_CAPTURED = "PodNotCaptured"  #: a pod of a captured attempt the webhook missed (job)
    #: a pod's control port answered without proof of the pod's agent token: not the agent frwatch injected;
    #: frwatch no longer calls it (job)
    AGENT_NOT_AUTHENTICATED = "AgentNotAuthenticated"
    # detection and collection (on the job, the Incident)
    INCIDENT_OPENED = "IncidentOpened"  #: a failure opened the attempt's Incident (job)
    #: live watch saw a desync or a stall while every rank still runs: the attempt's Incident opened Early (job)
    HANG_SUSPECTED = "HangSuspected"
    #: policy dumpAndAnalyze/abort: every rank asked to dump its live buffer, the Incident collects now (job)
    LIVE_DUMP_REQUESTED = "LiveDumpRequested"
    #: policy abort: the job was suspended after its live verdict (job)
    LIVE_ABORTED = "LiveAborted"
    #: policy abort: the job was not suspended (no verdict, or the suspend was refused): why (job)
    LIVE_ABORT_SKIPPED = "LiveAbortSkipped"
    #: an attempt live watch suspected ended without a failure seen: its Early Incident is Cleared (job)
    LIVE_CLEARED = "HangCleared"
    #: The job ended and frwatch opens no Incident for it: it succeeded (captured: nothing to capture), or
    #: it failed without capture (not opted in, or opted out); Normal, once per job (job).
    NO_INCIDENT = "NoIncident"
    SPEC_OUT_OF_BOUNDS = "JobSpecOutOfBounds"  #: the job's rank layout is not trusted (job)
    #: The job's spec or status stops capture or ranks (a TrainJob's runtime missing, ...) (job)
    JOB_SPEC_PROBLEM = "JobSpecProblem"
    RANKS_UNKNOWN = "RanksUnknown"  #: a pod whose global ranks cannot be derived: it gets none (job)
    POD_LABELS_MISSING = "PodLabelsMissing"  #: a pod lacks labels its job's controller always sets (job)
    DUMPS_COLLECTED = "DumpsCollected"  #: every rank's dump is in the store (job)
    DUMPS_MISSING = "DumpsMissing"  #: collection ended with ranks missing (job)
    #: What the store (or the verdict) said that the cluster contradicts: what was dropped (job, Incident;
    #: also the reason of the EvidenceConsistent condition).
    EVIDENCE_INCONSISTENT = "EvidenceInconsistent"
    #: Evidence beyond Flight Recorder the operator may not read (pods/log, a node's Events): the grant to add
    #: (job). Logs of pods deleted first are said in the Incident's LogsCollected condition, not here.
    EVIDENCE_FORBIDDEN = "EvidenceForbidden"
    # the verdict loop (on the job, the Incident, nodes)
    ANALYZER_STARTED = "AnalyzerStarted"  #: the analyzer Job was created (on the Incident)
    DIAGNOSED = "Diagnosed"  #: the verdict's line and where the report is (job, Incident)
    SUSPECTS = "SuspectsNamed"  #: hardware-class: culprit ranks and their (suspect) nodes (job)
    CULPRITS = "CulpritsNamed"  #: software: culprit ranks, what they did and where they ran, no suspect (job)
    NEXT_STEPS = "NextSteps"  #: the targeted probes the analyzer recommends (job)
    ANALYSIS_FAILED = "AnalysisFailed"  #: no verdict: why (job, Incident)
    #: the source step: the code copied from the training image and report.html rendered with it, or why the
    #: report stays without code (Incident)
    SOURCE_REPORT = "SourceReport"
    REMEDIATION = "Remediation"  #: the cordon plan: done, dry-run or skipped, with reasons (job, Incident)
    NODE_CORDONED = "FrwatchCordoned"  #: on a node frwatch cordoned (and on the job)
    NODE_WOULD_CORDON = "FrwatchWouldCordon"  #: dry-run: the node frwatch would have cordoned
    NODE_CORDON_SKIPPED = "FrwatchCordonSkipped"  #: a suspect node left alone, and why
    NODE_CORDON_FAILED = "FrwatchCordonFailed"  #: the cordon was refused by the API (changed, forbidden)
    #: a verdict names the node as a suspect: nominated, with what corroborates it or that nothing does (node)
    NODE_NOMINATED = "FrwatchNominated"
    #: a probe Job frwatch ran on a nominated node ended: passed, failed (corroborates) or inconclusive (node)
    NODE_PROBED = "FrwatchProbed"
    #: No cordon: the circuit breaker's ConfigMap cannot be read or stored (its namespace missing, RBAC);
    #: what a person must create or grant (job, Incident; also the Remediated condition's reason).
    BREAKER_UNAVAILABLE = "BreakerStateUnavailable"


EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class ObjectRef:
    """The object an Event is about."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> ObjectRef:
        meta = body.get("metadata") or {}
        return cls(
            str(body.get("apiVersion") or ""), str(body.get("kind") or ""), str(meta.get("namespace") or ""),
            str(meta.get("name") or ""), str(meta.get("uid") or ""),
        )  # fmt: skip


@dataclass(frozen=True)
class Notice:
    """One Event to post: the object it is about is chosen by the caller."""

    type: EventType
    reason: Reason
    message: str
    #: Distinguishes Events of one reason about one object (e.g. the node): part of the verdict loop's
    #: Event names.
    key: str = ""


def capture_untouched(reason: str) -> Notice:
    """The job's opt-in (annotation or policy) is malformed: frwatch leaves it alone."""
    return Notice("Warning", Reason.CAPTURE_CONFIG_INVALID, f"frwatch left this job untouched: {reason}")


def capture_enabled(reason: str) -> Notice:
    return Notice(
        "Normal",
        Reason.CAPTURE_ENABLED,
        f"frwatch captures Flight Recorder dumps of pods created from now on ({reason}); "
        "pods that already run are not changed",
    )


def policy_invalid(name: str, problem: str) -> Notice:
    return Notice(
        "Warning",
        Reason.POLICY_INVALID,
        f"{c.POLICY_KIND} {name!r} is malformed ({problem}): the jobs it may select are left untouched; "
        "fix the policy",
    )


def incident_opened(incident: str, attempt: str, trigger: str, deadline_s: int) -> Notice:
    """Deterministic for one Incident (its first trigger, its deadline): posted once, even across restarts."""
    following = next_attempt(attempt, attempt)
    bump = f"; pods created from now on belong to attempt {following} (the job's frwatch.io/attempt)" if following else ""
    return Notice(
        "Warning",
        Reason.INCIDENT_OPENED,
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
            Reason.DUMPS_COLLECTED,
            f"Incident {incident}: the dumps of all {dumped} ranks are in {url}; {then}",
        )
    shown = ", ".join(f"rank {r.rank} ({r.why_missing})" for r in missing[:3])
    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    return Notice(
        "Warning",
        Reason.DUMPS_MISSING,
        f"Incident {incident}: {dumped} of {len(manifest.ranks)} ranks dumped by the deadline; missing: "
        f"{shown}{more}. The manifest ({url}/manifest.json) lists them; {then} with the dumps there are",
    )


def no_incident(end: str, why: str) -> Notice:
    """The job ended (``end``: Succeeded or Failed) and frwatch opens no Incident for it, because ``why``.
    Deterministic for one job: posted once, even across restarts."""
    return Notice("Normal", Reason.NO_INCIDENT, f"this job {end}: frwatch opens no Incident for it ({why})")


def spec_out_of_bounds(problem: str) -> Notice:
    """The job's spec claims a world size past frwatch's bound: it is not used as one."""
    return Notice("Warning", Reason.SPEC_OUT_OF_BOUNDS, f"frwatch does not trust this job's rank layout: {problem}")


def evidence_inconsistent(incident: str, issues: list[str], shown: int = 4) -> Notice:
    """What in the store disagreed with what the cluster showed (the cluster's view was used)."""
    listed = "; ".join(issues[:shown]) + (f"; and {len(issues) - shown} more" if len(issues) > shown else "")
    return Notice(
        "Warning",
        Reason.EVIDENCE_INCONSISTENT,
        f"Incident {incident}: the evidence in the store is inconsistent with what the cluster saw: {listed}. "
        "frwatch used only the pods, nodes and exit codes the Kubernetes API showed (kubectl get incident "
        f"{incident} -o yaml: status.observed)",
    )


def attempt_not_captured(attempt: str, following: str, pod: str) -> Notice:
    """The job's current attempt runs without capture (no pod of it was injected): the next one is captured.
    Posted by the replica whose conditional write moved the attempt on (once)."""
    return Notice(
        "Warning",
        Reason.ATTEMPT_NOT_CAPTURED,
        f"frwatch attempt {attempt} of this job runs without Flight Recorder capture: its pods (e.g. {pod}) were "
        "created before capture was enabled for the job, or while frwatch's webhook could not inject them (it "
        "fails open: down, unreachable, or the job not yet known). A failure of this attempt opens no Incident. "
        f"Pods created from now on belong to attempt {following} and are captured",
    )


def pod_not_captured(pod: str, attempt: str) -> Notice:
    """A pod of an attempt that is otherwise captured was admitted without capture (the webhook missed it)."""
    return Notice(
        "Warning",
        Reason.POD_NOT_CAPTURED,
        f"pod {pod} was admitted without Flight Recorder capture (frwatch's webhook could not inject it: down, "
        f"unreachable, or the job not yet known; it fails open): attempt {attempt}'s Incident will have no dump "
        "of its ranks",
    )


def evidence_forbidden(incident: str, what: str, fix: str) -> Notice:
    """The API refused a read of evidence beyond Flight Recorder (pods/log, the Events naming a node): the
    analysis goes on without it; what to grant. One per Incident and kind of read (deterministic message)."""
    return Notice(
        "Warning",
        Reason.EVIDENCE_FORBIDDEN,
        f"Incident {incident}: frwatch may not read {what}, so the analysis goes on without it: {fix}",
    )


def job_spec_problem(problem: str) -> Notice:
    """Something in the job's spec or status keeps frwatch (or the job's controller) from working."""
    return Notice("Warning", Reason.JOB_SPEC_PROBLEM, f"frwatch: {problem}")


def ranks_unknown(pod: str, problem: str) -> Notice:
    """A pod whose ranks cannot be derived: it gets no rank (never a guessed one)."""
    return Notice(
        "Warning",
        Reason.RANKS_UNKNOWN,
        f"pod {pod}: its global ranks cannot be derived ({problem}); frwatch gives it (and every pod of the job "
        "with the same problem) no rank: only the dumps its agent uploads say which ranks it held",
    )


def pod_labels_missing(pod: str, problem: str) -> Notice:
    return Notice("Warning", Reason.POD_LABELS_MISSING, f"pod {pod}: {problem}")


#: What policy report does after a finding (hang_suspected's default).
REPORT_NEXT = "the job is left running, and if this attempt fails its Incident collects the dumps as usual"


def hang_suspected(
    incident: str, attempt: str, summary: str, frames: list[str], then: str = REPORT_NEXT
) -> Notice:
    """Live watch found a desync or a stall in ``attempt`` while it runs (the Incident opened Early);
    ``then``: what frwatch does next (the job's live policy)."""
    where = f" Where the laggards are: {'; '.join(frames)}." if frames else ""
    return Notice(
        "Warning",
        Reason.HANG_SUSPECTED,
        f"frwatch live watch, attempt {attempt}: {summary}.{where} Incident {incident} (phase Early) holds it; "
        f"{then} (kubectl get incident {incident} -o yaml)"[:1024],
    )


def live_dump_requested(incident: str, attempt: str, asked: str) -> Notice:
    """Policy dumpAndAnalyze: every rank of the running attempt was asked for its live buffer."""
    return Notice(
        "Normal",
        Reason.LIVE_DUMP_REQUESTED,
        f"frwatch live watch, attempt {attempt}: every rank's live Flight Recorder buffer asked while the job "
        f"runs ({asked}); Incident {incident} collects and analyses them now"[:1024],
    )


def live_aborted(incident: str, attempt: str, how: str, verdict: str) -> Notice:
    """Policy abort: the job was stopped after its live verdict."""
    return Notice(
        "Warning",
        Reason.LIVE_ABORTED,
        f"frwatch live watch, attempt {attempt}: {how} after the verdict of Incident {incident}: {verdict}. "
        "Its GPUs are freed; the job is kept (resume it by setting the suspend field back to false)"[:1024],
    )


def live_abort_skipped(incident: str, attempt: str, why: str) -> Notice:
    """Policy abort: the job was left running."""
    return Notice(
        "Warning",
        Reason.LIVE_ABORT_SKIPPED,
        f"frwatch live watch, attempt {attempt}: the job is left running ({why}); Incident {incident}"[:1024],
    )


def live_cleared(incident: str, attempt: str, how: str) -> Notice:
    """An attempt live watch suspected ended without failing."""
    return Notice(
        "Normal",
        Reason.LIVE_CLEARED,
        f"frwatch live watch, attempt {attempt}: {how}; Incident {incident} is Cleared (live watch's finding "
        "stays in it)"[:1024],
    )


def agent_not_authenticated(pod: str, why: str) -> Notice:
    """A pod's control port answered without proof of its agent token: frwatch stops calling it."""
    return Notice(
        "Warning",
        Reason.AGENT_NOT_AUTHENTICATED,
        f"pod {pod}: {why}; frwatch calls this pod's agent no more (its dumps written to the shared folder are "
        "still uploaded only if the injected agent runs)"[:1024],
    )
