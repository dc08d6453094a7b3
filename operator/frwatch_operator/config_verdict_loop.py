"""The verdict loop's settings: the analyzer batch/v1 Job (:class:`AnalyzerSettings`) and remediation
(:class:`RemediationSettings`). Two sections of :class:`~frwatch_operator.config.Config`, read from
``FRWATCH_ANALYZER_*`` and ``FRWATCH_REMEDIATION_*`` like every other (:func:`~frwatch_operator.config.load_config`);
kept apart from ``config`` only for size. Pure.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from frwatch_operator.resources import ComputeResources


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AnalyzerSettings(_Section):
    """The analyzer batch/v1 Job."""

    image: str = Field(
        default="ghcr.io/frwatch/frwatch:0.1.0", description="Image that runs `frwatch analyze`."
    )
    image_pull_secrets: str = Field(
        default="",
        description="Comma-separated names of Secrets the analyzer Job's pod pulls its image with (its "
        "spec.template.spec.imagePullSecrets); each must exist in the analyzer Jobs' namespace.",
    )
    resources: ComputeResources = Field(
        default=ComputeResources(requests={"cpu": "500m", "memory": "512Mi"}, limits={"memory": "4Gi"}),
        description="Container resources (JSON in the env var).",
    )
    deadline_seconds: int = Field(default=900, ge=10, description="activeDeadlineSeconds of the Job.")

    @property
    def pull_secrets(self) -> list[str]:
        """``image_pull_secrets`` as a list of names."""
        return [n.strip() for n in self.image_pull_secrets.split(",") if n.strip()]

    namespace: str = Field(
        default="frwatch-system",
        min_length=1,
        description="Namespace the analyzer Jobs run in: the operator's own (the chart's release namespace), "
        "never the tenant's, so no tenant can read its credentials or change its pod. RBAC: create/get/"
        "delete Jobs there.",
    )
    credentials_secret: str = Field(
        default="",
        description="Secret in that namespace with the analyzer's S3 keys (AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY): read the attempt's evidence, write only verdict.json, report.txt, "
        "report.html and summaries/ (the fan-out's map pods; docs/install.md shows the policy); empty: s3.credentials_secret.",
    )
    service_account: str = Field(
        default="",
        description="ServiceAccount the analyzer Jobs' pods run under (in ``namespace``; it must exist there): "
        "keyless store access (IRSA, EKS Pod Identity, GKE Workload Identity) comes from it. Empty: the "
        "namespace's default. No API token is mounted either way.",
    )
    allow_policy_image: bool = Field(
        default=False,
        description="Whether a CapturePolicy (written by a namespace's users) may choose the analyzer image; "
        "off: the operator's image always runs.",
    )
    backoff_limit: int = Field(
        default=1, ge=0, le=10, description="backoffLimit of the Job: pod retries (a lost node, an S3 hiccup)."
    )
    ranks_per_pod: int = Field(
        default=4096,
        ge=0,
        le=1 << 20,
        description="Fan-out: an analysis of more ranks than this (the Incident's expected world size) first "
        "runs an Indexed map Job of ceil(ranks / ranksPerPod) pods, each summarising its shard's dumps into "
        "the store, then the analyzer Job reduces the summaries; 0: always the one analyzer Job.",
    )
    ttl_seconds_after_finished: int = Field(
        default=3600,
        ge=0,
        description="ttlSecondsAfterFinished: the finished Job and its pod are deleted after this many seconds "
        "(the verdict stays in S3; the operator reads the outcome long before).",
    )
    source_from_image: bool = Field(
        default=False,
        description="The source step: once the verdict is on the job, a copy Job in the training job's own "
        "namespace copies the source files the branch's frames name from its image (an init container running "
        "that image's Python; no credentials, no service-account token) and hands them over through a "
        "presigned URL for one key; then a render Job in analyzer.namespace renders report.html with the code "
        "around each call site and the condition where the paths part (analysis.source_job). The tenant's "
        "image never runs in analyzer.namespace. Off: report.html says what it would need. Needs the chart's "
        "RBAC for Jobs in the training jobs' namespaces (analyzer.sourceFromImage).",
    )
    source_deadline_seconds: int = Field(
        default=300,
        ge=30,
        le=3600,
        description="activeDeadlineSeconds of the source step's copy Job (in the training job's namespace): "
        "pulling the training image, copying and handing over; its presigned URL expires a minute later.",
    )
    source_python: str = Field(
        default="python3",
        min_length=1,
        max_length=256,
        description="The training image's Python the source step's copier runs with (a name on the image's "
        "PATH, or an absolute path).",
    )


class RemediationSettings(_Section):
    """Node cordoning after a hardware-class verdict. Off, and dry-run, unless turned on."""

    enabled: bool = Field(
        default=False, description="Global switch; a CapturePolicy cannot override it to on."
    )
    dry_run: bool = Field(
        default=True, description="Record the cordon it would do (Events) without doing it."
    )
    max_nodes_per_incident: int = Field(
        default=2, ge=0, description="Cap of nodes cordoned for one incident."
    )
    breaker_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Stop cordoning once this share of nodes was cordoned in the window.",
    )
    breaker_window_seconds: int = Field(
        default=300, ge=1, description="The circuit breaker's window (seconds)."
    )
    max_suspect_share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="More suspects than this share of the job's nodes means fabric/software: never cordon.",
    )
    max_nodes_per_namespace: int = Field(
        default=2,
        ge=0,
        description="Cap of nodes cordoned for all the incidents of one namespace within "
        "namespace_window_seconds: repeated failures of a tenant's jobs cannot walk the cluster.",
    )
    namespace_window_seconds: int = Field(
        default=86_400, ge=1, description="The per-namespace cap's window (seconds)."
    )
    repeat_dry_run: bool = Field(
        default=True,
        description="The same bug in two consecutive attempts of a job (repeat policy suspend or fail): only say "
        "what would be done to the job (Event, Incident condition), without suspending it. A CapturePolicy "
        "can force it on, never off.",
    )
    breaker_namespace: str = Field(
        default="frwatch-system",
        description="Namespace of the breaker's ConfigMap (the operator's own; RBAC: get/create/update there).",
    )
    breaker_configmap: str = Field(
        default="frwatch-remediation-breaker",
        description="ConfigMap holding the circuit breaker's state, so a restarted operator keeps it. "
        "A person resets a tripped breaker by setting its data.status to CLOSED.",
    )
    action: Literal["cordon", "nvsentinel", "none"] = Field(
        default="cordon",
        description="What a corroborated suspect node gets: cordon (frwatch sets spec.unschedulable), nvsentinel "
        "(a MaintenanceRequest for NVIDIA NVSentinel to act on; RBAC: create maintenancerequests."
        "nvsentinel.dgxc.nvidia.com), none (nominated and corroborated, told, nothing else).",
    )
    probe_image: str = Field(
        default="",
        description="Image of the health check frwatch runs on a nominated node (e.g. an image with dcgmi); "
        "empty: no probe (only the node's health agents and other namespaces corroborate).",
    )
    probe_command: list[str] = Field(
        default_factory=list,
        description='The probe\'s command (JSON list, e.g. ["dcgmi", "diag", "-r", "1"]): exit 0 says healthy, '
        "any other exit says the node is sick (that corroborates the nomination).",
    )
    probe_resources: ComputeResources = Field(
        default=ComputeResources(),
        description='The probe container\'s resources (JSON, e.g. {"limits": {"nvidia.com/gpu": "8"}}).',
    )
    probe_deadline_seconds: int = Field(
        default=300, ge=10, description="activeDeadlineSeconds of a probe Job; a probe still running then failed."
    )
    corroborating_namespaces: int = Field(
        default=2,
        ge=2,
        description="Namespaces whose jobs must nominate the same node within nomination_window_seconds for "
        "that to corroborate it (one tenant's jobs never do).",
    )
    nomination_window_seconds: int = Field(
        default=86_400, ge=60, description="How long a nomination is remembered for fleet corroboration (seconds)."
    )
    nominations_configmap: str = Field(
        default="frwatch-node-nominations",
        description="ConfigMap (in breaker_namespace) holding the fleet's nominations: node, namespace, "
        "incident, when.",
    )
