"""Pydantic models of frwatch's custom resources (group ``frwatch.io``, version ``v1alpha1``).

``CapturePolicy`` (namespaced): which jobs (PyTorchJob, TrainJob, JobSet) of its namespace get Flight Recorder capture, and with
which settings. ``Incident`` (namespaced, owned by the job): one captured failure of one job attempt.

Every field is documented where it is declared: the CRD YAML in ``crds/`` is generated from / checked
against these models (``model_json_schema()``). Field names are the wire (camelCase) names through
aliases; Python code uses snake_case and ``populate_by_name``.

Over 400 lines by choice: every CRD field is documented where it is declared and the CRDs are generated from
these models, with the enums of the Incident's phases, condition types and condition reasons; one module keeps
the API of ``frwatch.io/v1alpha1`` in one view.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from frwatch_operator.repeat_resources import IncidentRepeat, RepeatPolicy, RepeatPolicyName
from frwatch_operator.wire import ComputeResources as ComputeResources
from frwatch_operator.wire import Wire as _Wire

# --- shared pieces (the base and ComputeResources: frwatch_operator.wire) ---------------------------------


class LabelSelectorRequirement(_Wire):
    """One set-based requirement of a label selector (Kubernetes semantics)."""

    key: str = Field(description="The label key the requirement applies to.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="In/NotIn need non-empty values; Exists/DoesNotExist need none."
    )
    values: list[str] = Field(default_factory=list, description="The values for In/NotIn.")

    @model_validator(mode="after")
    def _values_fit_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"matchExpressions key {self.key!r}: operator {self.operator} needs values")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"matchExpressions key {self.key!r}: operator {self.operator} takes no values")
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies this requirement."""
        present = self.key in labels
        match self.operator:
            case "In":
                return present and labels[self.key] in self.values
            case "NotIn":
                return not present or labels[self.key] not in self.values
            case "Exists":
                return present
            case _:
                return not present


class LabelSelector(_Wire):
    """A Kubernetes label selector over the job's labels (a PyTorchJob, TrainJob or JobSet: every kind frwatch
    follows). Empty selects every job of the namespace."""

    match_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels the job must carry with exactly these values."
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, description="Set-based requirements; all must hold (AND with matchLabels)."
    )

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set is selected (an empty selector selects everything)."""
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        return all(req.matches(labels) for req in self.match_expressions)


# --- CapturePolicy --------------------------------------------------------------------------------------


class AnalyzerSpec(_Wire):
    """How the analyzer Job of an incident runs."""

    image: str | None = Field(
        default=None, description="Analyzer container image; unset: the operator's default."
    )
    resources: ComputeResources | None = Field(
        default=None, description="Analyzer container resources; unset: the operator's default."
    )
    deadline_seconds: int | None = Field(
        default=None, ge=10, description="activeDeadlineSeconds of the analyzer Job (seconds)."
    )


class RemediationPolicy(_Wire):
    """What frwatch may do to nodes after a hardware-class verdict. Anything unset takes the operator default,
    and the operator's global switch wins: a policy cannot enable remediation the operator has disabled."""

    enabled: bool | None = Field(default=None, description="Allow cordoning suspect nodes for these jobs.")
    dry_run: bool | None = Field(default=None, description="Record what would be done without doing it.")
    max_nodes_per_incident: int | None = Field(
        default=None, ge=0, description="At most this many nodes cordoned for one incident."
    )


class LivePolicyName(StrEnum):
    """What live watch does when it finds a desync or a stall while the job runs (issue 15)."""

    REPORT = "report"  #: an Incident in phase Early and a Warning Event on the job
    #: and every rank's live Flight Recorder buffer collected now, analysed, the verdict on the job
    DUMP_AND_ANALYZE = "dumpAndAnalyze"
    #: and then the job suspended (its pods deleted): only where the operator allows it (liveWatch.abortAllowed)
    ABORT = "abort"


class LiveWatchPolicy(_Wire):
    """Live watch for the selected jobs. Unset fields take the operator's defaults; a job's own annotations
    (``frwatch.io/live``, ``frwatch.io/live-policy``) win over these."""

    enabled: bool | None = Field(
        default=None,
        description="Sample every rank while the job runs (as the annotation frwatch.io/live: enabled does).",
    )
    policy: LivePolicyName | None = Field(
        default=None,
        description="What a finding does: report (an Early Incident and an Event), dumpAndAnalyze (also the "
        "verdict from every rank's live buffer, before the watchdog fires) or abort (also suspend the job "
        "after the verdict; only where the operator allows it, else dumpAndAnalyze).",
    )


class CapturePolicySpec(_Wire):
    """Opt the selected jobs of this namespace (any kind frwatch follows) into capture, with these settings.

    Unset fields take the operator's defaults. A job annotated ``frwatch.io/capture: disabled`` is never
    captured; when several policies select one job, the oldest (then by name) wins and the others are
    named in the decision's reason.
    """

    job_selector: LabelSelector = Field(
        default_factory=LabelSelector,
        description="Which jobs (PyTorchJobs, TrainJobs, JobSets: by their labels) this policy opts in.",
    )
    buffer_size: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Flight Recorder ring size in entries (TORCH_FR_BUFFER_SIZE); 2000 is recommended.",
    )
    bucket: str | None = Field(default=None, min_length=3, description="S3 bucket for dumps and reports.")
    prefix: str | None = Field(default=None, description="Key prefix inside the bucket.")
    collection_deadline_seconds: int | None = Field(
        default=None,
        ge=5,
        le=86_400,
        description="How long (seconds) to wait for every rank's dump after a failure is detected.",
    )
    analyzer: AnalyzerSpec = Field(default_factory=AnalyzerSpec, description="The analyzer Job's settings.")
    agent_resources: ComputeResources | None = Field(
        default=None, description="Resources of the injected frwatch agent sidecar."
    )
    remediation: RemediationPolicy = Field(
        default_factory=RemediationPolicy, description="Node remediation for these jobs."
    )
    repeat: RepeatPolicy = Field(
        default_factory=RepeatPolicy,
        description="What two consecutive attempts failing at the same earliest branch do to the next restart.",
    )
    live_watch: LiveWatchPolicy = Field(
        default_factory=LiveWatchPolicy, description="Live watch (desyncs and stalls named while the job runs)."
    )


class CaptureSettings(_Wire):
    """The effective settings for one opted-in job: the operator's defaults overlaid with its CapturePolicy
    (:mod:`frwatch_operator.capture.optin`). An Incident keeps the ones it opened with (``status.settings``), so a
    policy edited meanwhile changes nothing of an Incident under way."""

    model_config = ConfigDict(frozen=True)

    buffer_size: int = Field(description="Flight Recorder ring size in entries (TORCH_FR_BUFFER_SIZE).")
    bucket: str = Field(description="S3 bucket of the dumps and the report.")
    prefix: str = Field(description="Key prefix inside the bucket.")
    collection_deadline_seconds: int = Field(description="How long to wait for every rank's dump (seconds).")
    analyzer_image: str = Field(description="The analyzer Job's container image.")
    analyzer_resources: ComputeResources = Field(description="The analyzer container's resources.")
    analyzer_deadline_seconds: int = Field(description="activeDeadlineSeconds of the analyzer Job (seconds).")
    agent_resources: ComputeResources = Field(description="Resources of the injected agent sidecar.")
    remediation_enabled: bool = Field(description="Whether suspect nodes may be cordoned.")
    remediation_dry_run: bool = Field(description="Record what would be done without doing it.")
    max_nodes_per_incident: int = Field(description="At most this many nodes cordoned for one incident.")
    repeat_policy: RepeatPolicyName = Field(
        default=RepeatPolicyName.REPORT,
        description="What the same bug in two consecutive attempts does (before the job's own annotation).",
    )
    repeat_dry_run: bool = Field(default=True, description="Only say what repeatPolicy suspend or fail would do.")
    live_enabled: bool = Field(default=False, description="Live watch on (before the job's own annotation).")
    live_policy: LivePolicyName = Field(
        default=LivePolicyName.REPORT, description="What a live finding does (before the job's own annotation)."
    )
    torch_version: str = Field(
        default="",
        description="The torch version the job declared (annotation frwatch.io/torch-version); empty: its image "
        "or the operator's default decides which Flight Recorder variable names are set.",
    )


# --- Incident -------------------------------------------------------------------------------------------


class IncidentPhase(StrEnum):
    """Where an incident is in its life; progress is driven from this persisted value."""

    #: live watch (issue 15) found a desync or a stall while every rank still runs (policy ``report``): the
    #: finding is in ``liveFinding``; nothing is collected; the attempt's later failure moves it to Detected
    EARLY = "Early"
    DETECTED = "Detected"  #: a failure was seen; nothing collected yet
    COLLECTING = "Collecting"  #: waiting for every rank's dump, asking live agents, up to the deadline
    ANALYZING = "Analyzing"  #: manifest written; the analyzer Job runs
    REPORTED = "Reported"  #: verdict stored and surfaced on the job
    FAILED = "Failed"  #: frwatch itself could not finish (see message); the job is untouched
    #: live watch's Early finding was not followed by a failure: the attempt succeeded (or the job was deleted
    #: or moved to another attempt) with the Incident still Early; the finding is kept (see message)
    CLEARED = "Cleared"


class JobRef(_Wire):
    """The training job an incident belongs to."""

    api_version: str = Field(default="kubeflow.org/v1", description="apiVersion of the job.")
    kind: str = Field(default="PyTorchJob", description="Kind of the job: PyTorchJob, TrainJob or JobSet.")
    name: str = Field(description="Name of the job (same namespace as the incident).")
    uid: str = Field(description="uid of the job: a recreated job with the same name is another job.")


class IncidentSpec(_Wire):
    """What failed: set once when the incident is opened, never changed."""

    job_ref: JobRef = Field(description="The failed job.")
    attempt: str = Field(description="The job attempt that failed (same string as in the S3 layout).")
    trigger: str = Field(
        default="", description="What was seen first: e.g. 'pod x exited 1', 'dump of rank 3'."
    )
    storage_url: str = Field(
        default="", description="s3:// URL of this attempt's evidence root (ranks/, pods/, manifest.json)."
    )


class IncidentCounts(_Wire):
    """Ranks of the attempt and how many dumps reached the store."""

    expected_ranks: int | None = Field(default=None, ge=0, description="World size, when known.")
    dumped_ranks: int = Field(default=0, ge=0, description="Ranks whose dump is in the store.")
    missing_ranks: int | None = Field(default=None, ge=0, description="expected - dumped, when known.")


class ConditionType(StrEnum):
    """The conditions of an Incident (``status.conditions[].type``)."""

    WORLD_SIZE = "WorldSize"  #: False: the job's spec claims a world size frwatch does not take
    COLLECTED = "Collected"  #: collection ended; the reason says how (every rank dumped, the deadline, ...)
    EVIDENCE_CONSISTENT = "EvidenceConsistent"  #: whether the store's evidence agreed with the cluster
    #: Whether every training container's log reached the store (False: which were unavailable, and why:
    #: a pod deleted before its log was read, pods/log forbidden); never a failed Incident.
    LOGS_COLLECTED = "LogsCollected"
    #: The hand-off from collection to analysis: True once the analyzer Job was asked for (or, reason
    #: NothingToAlign, the exits the cluster showed are the verdict).
    ANALYSIS_REQUESTED = "AnalysisRequested"
    ANALYZED = "Analyzed"  #: the analyzer Job's progress, then the verdict (or why there is none)
    REMEDIATED = "Remediated"  #: what the cordon policy did
    #: True: this attempt ended at the same earliest branch as the one before (the same bug twice); the message
    #: says what the repeat policy did to the next restart and the command that resumes the job
    SAME_BUG_AGAIN = "SameBugAgain"
    #: False: pods of the attempt whose global ranks cannot be derived (named in the message; they got none)
    RANKS_KNOWN = "RanksKnown"
    #: False: the job's spec, status or pods say something that stops capture or ranks (named in the message)
    JOB_INPUT_VALID = "JobInputValid"


class ConditionReason(StrEnum):
    """The reasons frwatch writes in an Incident's conditions (``status.conditions[].reason``), by condition
    type. ``Analyzed`` False may also carry the analyzer Job's own failure reason, passed through from its
    ``Failed`` condition (Kubernetes' e.g. ``DeadlineExceeded``, ``BackoffLimitExceeded``)."""

    # WorldSize
    SPEC_OUT_OF_BOUNDS = "SpecOutOfBounds"  #: False: the world size the job's spec claims is not taken
    # RanksKnown / JobInputValid: bad input seen for the job (the message names each pod or problem)
    RANKS_UNKNOWN = "RanksUnknown"  #: False: pods whose global ranks cannot be derived (they got none)
    BAD_INPUT = "BadInput"  #: False: the job's spec, status or pods say something that stops capture or ranks
    # Collected: how collection ended
    ALL_RANKS_DUMPED = "AllRanksDumped"  #: every rank's dump is in the store
    #: The ranks without a dump all had their pod end (settled) before the deadline.
    ALL_RANKS_ACCOUNTED = "AllRanksAccounted"
    #: No rank dumped and every rank's pod ended with a failed exit: a crash before any collective hung,
    #: nothing to align (the verdict loop runs no analyzer Job for it).
    EVERY_RANK_EXITED = "EveryRankExited"
    DEADLINE_REACHED = "DeadlineReached"  #: the deadline passed with ranks still missing
    # EvidenceConsistent
    MATCHES_CLUSTER = "MatchesCluster"  #: True: the store's records agree with the cluster
    #: False: what the store (or the verdict) said that the cluster contradicts (also an Event reason).
    EVIDENCE_INCONSISTENT = "EvidenceInconsistent"
    # LogsCollected: the training containers' logs (never a failed Incident)
    LOGS_STORED = "LogsStored"  #: True: every training container's log is in the store
    LOGS_UNAVAILABLE = "LogsUnavailable"  #: False: some are not (a pod deleted first, ...: the message says)
    LOGS_FORBIDDEN = "LogsForbidden"  #: False: the operator may not read pods/log (RBAC)
    # AnalysisRequested: the hand-off from collection to analysis
    REQUESTED = "Requested"  #: the analyzer Job was asked for
    NOTHING_TO_ALIGN = "NothingToAlign"  #: collection ended EveryRankExited: the exits are the verdict
    # Analyzed
    ANALYZER_JOB_NOT_CREATED = "AnalyzerJobNotCreated"  #: Unknown: created on a later pass
    ANALYZER_RUNNING = "AnalyzerRunning"  #: Unknown: the analyzer Job runs
    DIAGNOSED = "Diagnosed"  #: True: the verdict is on the job (also an Event reason)
    API_REFUSED = "ApiRefused"  #: False: given up on after API refusals
    ANALYZER_JOB_GONE = "AnalyzerJobGone"  #: False: the analyzer Job vanished before its verdict was read
    ANALYZER_OVERDUE = "AnalyzerOverdue"  #: False: the Job did not finish long past its deadline
    VERDICT_MISSING = "VerdictMissing"  #: False: the analyzer ended without a verdict in the store
    VERDICT_MALFORMED = "VerdictMalformed"  #: False: the stored verdict does not parse
    VERDICT_TOO_LARGE = "VerdictTooLarge"  #: False: the stored verdict is past the size this operator reads
    #: False: the stored verdict is not the one the analyzer Job wrote (its digest, in the Job's termination
    #: message, does not match the bytes in the store: replaced after the analyzer wrote it)
    VERDICT_NOT_BOUND = "VerdictNotBound"
    # Remediated: what the cordon policy did
    REMEDIATION_OFF = "RemediationOff"  #: remediation is off
    DRY_RUN = "DryRun"  #: dry-run: the plan is recorded, no node touched
    CORDONED = "Cordoned"  #: True: a suspect node was cordoned
    NO_CORDON = "NoCordon"  #: False: no node cordoned (software fault, opt-out, cap ...: the message says)
    #: False: the circuit breaker's ConfigMap cannot be read or stored (also an Event reason).
    BREAKER_STATE_UNAVAILABLE = "BreakerStateUnavailable"


class Condition(_Wire):
    """A Kubernetes-style condition."""

    type: str = Field(description="e.g. Collected, Analyzed, Remediated.")
    status: Literal["True", "False", "Unknown"] = Field(description="Whether the condition holds.")
    reason: str = Field(default="", description="CamelCase machine-readable reason.")
    message: str = Field(default="", description="What a person reads.")
    last_transition_time: str = Field(default="", description="RFC 3339 time of the last status change.")


class ApiRefusals(_Wire):
    """Consecutive verdict-loop passes the API refused for good (403 forbidden, 422 invalid, a required object
    missing): retried with a growing wait until the operator's give-up time, then the Incident ends Failed.
    Gone again after a pass that went through."""

    count: int = Field(ge=1, description="How many passes in a row were refused.")
    first_at: str = Field(description="RFC 3339: when the first of them was refused.")
    next_pass_at: str = Field(description="RFC 3339: no pass before this time (the backoff).")
    give_up_at: str = Field(description="RFC 3339: a pass refused after this time ends the Incident Failed.")
    last_error: str = Field(
        description="The last refusal: the call, the HTTP status, and what to grant or fix."
    )


#: At most this many pods are kept in ``status.observed`` (a 16k-rank job of 8 ranks a pod has 2048); past
#: it the list is cut and ``truncated`` says so: a node left out can never be cordoned (the safe side).
OBSERVED_PODS_MAX = 4096
#: Longest Kubernetes object name (a pod or a node).
NAME_MAX = 253


class ContainerExit(_Wire):
    """How a container of an observed pod ended, as the pod's status said."""

    container: str = Field(max_length=NAME_MAX, description="Container name.")
    exit_code: int | None = Field(default=None, description="Exit code, when it terminated.")
    reason: str = Field(default="", max_length=64, description="e.g. Error, OOMKilled, Completed.")
    finished_at: str = Field(
        default="", max_length=40, description="RFC 3339: when its current termination happened (empty: unknown)."
    )


class ObservedPod(_Wire):
    """One pod of the attempt, as the operator saw it through the Kubernetes API (never from the store)."""

    name: str = Field(max_length=NAME_MAX, description="Pod name.")
    node: str = Field(default="", max_length=NAME_MAX, description="spec.nodeName; empty: never scheduled.")
    ranks: str = Field(
        default="",
        max_length=256,
        description="Global ranks it held, as ranges ('0-7', '8-15,17'): from the job spec's layout, or the "
        "ranks its agent dumped when the spec cannot tell; empty: unknown.",
    )
    exits: list[ContainerExit] = Field(
        default_factory=list, max_length=8, description="How its training containers ended (first 8)."
    )
    deleted: bool = Field(default=False, description="The pod was deleted before collection ended.")
    pinned: bool = Field(
        default=False,
        description="The pod's own spec chose its node (a kubernetes.io/hostname nodeSelector, or required node "
        "affinity on the hostname or metadata.name): the tenant's choice is no evidence against that node.",
    )


class IncidentObserved(_Wire):
    """What the cluster showed of the attempt: the facts a cordon may rest on (bounded in size)."""

    pods: list[ObservedPod] = Field(
        default_factory=list, max_length=OBSERVED_PODS_MAX, description="The attempt's pods (first 4096)."
    )
    nodes: list[str] = Field(
        default_factory=list,
        max_length=OBSERVED_PODS_MAX,
        description="Every node that ran one of the attempt's pods: the only nodes frwatch may cordon for it.",
    )
    truncated: bool = Field(default=False, description="More pods were seen than the list holds.")


#: Nodes one Incident nominates, at most.
NOMINATIONS_MAX = 16


class NodeNomination(_Wire):
    """A node the verdict names as a suspect: nominated. Only evidence no tenant can write corroborates it (a
    probe frwatch ran there failing, the node's own health agents, or jobs of several namespaces naming it);
    without it the node is recorded here, annotated and told in an Event, never cordoned."""

    node: str = Field(max_length=NAME_MAX, description="The nominated node.")
    pinned: bool = Field(
        default=False,
        description="A pod of the attempt was pinned to it by the tenant (spec.nodeName in the job's templates, "
        "a hostname selector or affinity): not evidence against it; never probed, counted or cordoned for it.",
    )
    namespaces: int = Field(
        default=0, ge=0, description="Namespaces whose jobs nominated the node within the window (this one included)."
    )
    signal: str = Field(
        default="", max_length=300,
        description="What the node's own health agents say (a condition or an Event in namespace default); empty: nothing.",
    )  # fmt: skip
    probe_job: str = Field(default="", max_length=NAME_MAX, description="The probe Job frwatch ran on the node.")
    probe: str = Field(
        default="", max_length=16,
        description="The probe's result: Running, Failed (the node is sick: corroborates), Passed, Inconclusive "
        "(it never ran, or was gone); empty: no probe.",
    )  # fmt: skip
    probe_detail: str = Field(default="", max_length=300, description="The probe's own words (its termination message).")
    corroborated: str = Field(
        default="", max_length=300, description="What corroborates the nomination; empty: nominated only (never cordoned)."
    )


#: Longest ``status.suspects`` (the Suspects column of ``kubectl get incidents``).
SUSPECTS_MAX = 64


class IncidentVerdict(_Wire):
    """The verdict as people read it, kept with the Incident: Events are deleted after an hour, this is not.
    Bounded: the full verdict (every rank, the evidence) stays in the store (``reportUrl``)."""

    headline: str = Field(default="", max_length=1024, description="The verdict's full line.")
    short: str = Field(
        default="", max_length=120, description="The verdict in at most 120 characters (frwatch.io/verdict)."
    )
    kind: str = Field(
        default="",
        max_length=32,
        description="What the culprits did (the analyzer's culprit_kind: took_another_path, cpu_stuck, "
        "extra_call, mismatched_call, crashed, gpu_hang, network_hang, transport_stall, unknown); empty: none "
        "named.",
    )
    kind_text: str = Field(
        default="",
        max_length=64,
        description="The kind in words, with a crashed rank's exit (e.g. 'CPU-stuck', 'crashed (exit 1, Error)').",
    )
    culprits: str = Field(default="", max_length=256, description="The culprit ranks, e.g. 'rank 1', 'ranks 0-3,7'.")
    ran_on: str = Field(
        default="",
        max_length=512,
        description="Where the culprits ran, from what the cluster showed (e.g. 'rank 1 ran on node-b'). Suspect "
        "nodes only when hardwareClass is true.",
    )
    next_steps: list[str] = Field(
        default_factory=list, max_length=3, description="What to do next (at most 3, each at most 512 characters)."
    )
    report_url: str = Field(default="", max_length=2048, description="s3:// URL of the full report.")


class IncidentLiveFinding(_Wire):
    """What live watch found while the job ran (``frwatch_analyzers.live.watch``): why the Incident opened
    Early."""

    kind: str = Field(description="desync or stall.")
    process_group: str = Field(default="", description="The process group (its name in Flight Recorder).")
    seq: int = Field(default=0, description="The sequence number where members disagree, or that laggards never enqueued.")
    ranks: list[int] = Field(default_factory=list, description="The culprits: minority (desync) or laggards (stall).")
    peers: list[int] = Field(default_factory=list, description="The other members.")
    for_seconds: float = Field(default=0.0, description="How long the gap had been seen (stall).")
    top_frames: list[str] = Field(
        default_factory=list, description="Per culprit rank, the top frame of its Python stack (stall), e.g. 'rank 1: File \"x.py\", line 3 in f'."
    )
    summary: str = Field(default="", max_length=2048, description="The finding in words.")
    seen_at: str = Field(default="", description="RFC 3339: when the operator first saw it.")
    dumped_at: str = Field(
        default="",
        description="RFC 3339: when live watch's policy (dumpAndAnalyze, abort) asked every rank for its live "
        "buffer and moved the Incident on; empty: it did not (policy report, or the attempt's failure came first).",
    )


class IncidentStatus(_Wire):
    """Everything the operator knows and has done; a restarted operator resumes from here."""

    phase: IncidentPhase = Field(default=IncidentPhase.DETECTED, description="Current phase.")
    counts: IncidentCounts = Field(default_factory=IncidentCounts, description="Rank and dump counts.")
    detected_at: str = Field(default="", description="RFC 3339: when the failure was detected.")
    live_finding: IncidentLiveFinding | None = Field(
        default=None, description="What live watch found while every rank still ran (phase Early and after)."
    )
    collection_deadline: str = Field(default="", description="RFC 3339: when collection stops waiting.")
    collected_at: str = Field(default="", description="RFC 3339: when the manifest was written.")
    analyzed_at: str = Field(default="", description="RFC 3339: when the verdict was stored.")
    analyzer_job: str = Field(default="", description="Name of the analyzer batch/v1 Job.")
    analyzer_namespace: str = Field(
        default="", description="Namespace of the analyzer Job (empty: the Incident's, as older frwatch ran it)."
    )
    analysis_step: str = Field(
        default="",
        description="Sub-step of Analyzing when the analysis fans out: Map (the Indexed map Job runs), Reduce "
        "(the analyzer Job reduces the summaries); of the source step: SourceCopy (the copy Job runs in the "
        "Incident's namespace), Source (the render Job runs in the analyzer's); empty: the one analyzer Job.",
    )
    analyzer_map_job: str = Field(
        default="", description="Name of the Indexed map Job of a fanned-out analysis (beside analyzerJob)."
    )
    analyzer_source_job: str = Field(
        default="",
        description="Name of the source step's Job (analyzer.sourceFromImage): once the verdict is on the job, "
        "analysisStep is SourceCopy while a Job in the Incident's namespace copies the code the branch names "
        "from the training image, then Source while a Job in the analyzer's namespace renders report.html with "
        "it; the phase is Reported when it ends.",
    )
    source_report: str = Field(
        default="",
        max_length=1024,
        description="The source step's outcome: report.html shows the code (what was copied), or why it does "
        "not (the verdict stands either way); empty: no source step.",
    )
    category: str = Field(default="", description="The verdict's category (analyzer Category value).")
    hardware_class: bool | None = Field(default=None, description="The verdict's hardware_class.")
    suspect_ranks: list[int] = Field(default_factory=list, description="Culprit global ranks.")
    suspect_nodes: list[str] = Field(default_factory=list, description="Nodes of the culprit ranks.")
    suspects: str = Field(
        default="",
        max_length=SUSPECTS_MAX,
        description="suspectRanks and suspectNodes in a few words for `kubectl get incidents` (the Suspects "
        "column), e.g. 'rank 1 on node-b', 'ranks 0-3 on node-a,node-b', '40 ranks on 12 nodes'; at most "
        "64 characters; empty: nobody named, or a software finding (no node is suspect; the Culprits column, "
        "verdict.culprits, names its ranks).",
    )
    report_url: str = Field(default="", description="s3:// URL of report.txt.")
    report_html_url: str = Field(default="", description="s3:// URL of report.html (the HTML report).")
    verdict: IncidentVerdict | None = Field(
        default=None, description="The verdict in words (headline, short, kind, culprits, where they ran, next steps)."
    )
    observed: IncidentObserved | None = Field(
        default=None,
        description="The attempt's pods, nodes, ranks and exits as the Kubernetes API showed them; what "
        "frwatch acts on (the store's manifest, pod records and verdict are evidence, never authority).",
    )
    manifest_etag: str = Field(
        default="",
        max_length=64,
        description="ETag (MD5) of the manifest.json frwatch is writing or wrote: one found in the store with "
        "another ETag was not frwatch's (it is replaced, and that is recorded).",
    )
    api_refusals: ApiRefusals | None = Field(
        default=None, description="Set while the API refuses the verdict loop's calls (see ApiRefusals)."
    )
    verdict_digest: str = Field(
        default="",
        max_length=64,
        description="sha256 of the verdict.json the analyzer Job wrote (from its termination message): the verdict "
        "acted on is the one with these bytes; empty: none bound (nothing is cordoned).",
    )
    nominations: list[NodeNomination] = Field(
        default_factory=list, max_length=NOMINATIONS_MAX,
        description="The suspect nodes nominated, and what corroborates each (only a corroborated node is cordoned).",
    )  # fmt: skip
    settings: CaptureSettings | None = Field(
        default=None,
        description="The job's effective capture settings, fixed when the incident opened: the collection "
        "deadline, the analyzer Job and remediation of this incident follow them, whatever its CapturePolicy "
        "says later.",
    )
    repeat: IncidentRepeat | None = Field(
        default=None, description="The same bug as the previous attempt? And what was done to the next restart."
    )
    conditions: list[Condition] = Field(default_factory=list, description="Collected, Analyzed, Remediated.")
    message: str = Field(
        default="", description="One line a person reads: the verdict or why frwatch failed."
    )
