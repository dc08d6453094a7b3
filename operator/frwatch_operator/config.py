"""The one typed configuration of the operator, its webhook and the agent.

Loaded once at start by :func:`load_config` from the process environment and passed in; nothing else in
frwatch reads ``os.environ``. Side-effecting features default to the safe side (remediation off, dry-run on).

Environment names are derived from the model, never spelled twice: field ``f`` of section ``s`` is read
from ``FRWATCH_<S>_<F>`` (upper case), e.g. ``FRWATCH_S3_BUCKET``, ``FRWATCH_FR_BUFFER_SIZE``,
``FRWATCH_REMEDIATION_ENABLED``. Values are strings as in a pod spec; structured fields (resources) take
JSON. S3 credentials come from the usual ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` /
``AWS_SESSION_TOKEN``; unset, boto3's default chain applies. :func:`env_names` lists every name.

Every setting (unit, default, bound, reason) is one documented field of one model; the env-var names are
derived from them and the chart's environment is checked against them. For size, the verdict loop's two
sections (the analyzer Job, remediation) are in ``config_verdict_loop`` and the agent's three in
``config_agent``; all are re-exported here.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from frwatch_operator import constants as c
from frwatch_operator.config_agent import AgentSettings, JobIdentity, PodIdentity
from frwatch_operator.config_verdict_loop import AnalyzerSettings, RemediationSettings
from frwatch_operator.errors import FatalError

__all__ = [
    "AWS_ENV", "ENV_PREFIX", "AgentSettings", "AnalyzerSettings", "CollectionSettings", "Config", "EvidenceSettings",
    "FlightRecorderSettings", "JobIdentity", "OperatorSettings", "PodIdentity", "RemediationSettings", "S3Settings",
    "WebhookSettings", "env_name", "env_names", "load_config",
]

ENV_PREFIX = "FRWATCH_"
#: Config field -> the conventional AWS variable it is read from (not FRWATCH_-prefixed).
AWS_ENV = {
    "access_key_id": "AWS_ACCESS_KEY_ID",
    "secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "session_token": "AWS_SESSION_TOKEN",
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class S3Settings(_Section):
    """Where evidence is stored. Used by the agent (uploads) and the operator (manifest, verdict)."""

    endpoint_url: str | None = Field(
        default=None,
        description="S3 endpoint URL (e.g. http://seaweedfs:8333); unset: AWS's regional endpoint.",
    )
    bucket: str = Field(default="frwatch", description="Default bucket (a CapturePolicy may override it).")
    prefix: str = Field(default="frwatch", description="Default key prefix inside the bucket.")
    region: str = Field(default="us-east-1", description="Region name for request signing.")
    addressing_style: Literal["path", "virtual", "auto"] = Field(
        default="path", description="Path-style works with every S3-compatible store (SeaweedFS, MinIO)."
    )
    access_key_id: SecretStr | None = Field(default=None, description="From AWS_ACCESS_KEY_ID.")
    secret_access_key: SecretStr | None = Field(default=None, description="From AWS_SECRET_ACCESS_KEY.")
    session_token: SecretStr | None = Field(default=None, description="From AWS_SESSION_TOKEN.")
    credentials_secret: str = Field(
        default="frwatch-s3",
        description="Secret (keys AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) the webhook maps into the "
        "agent's env, in the job's namespace; an optional ref: absent, boto3's default chain applies. Empty: "
        "no Secret is referenced (keyless: the pod's ServiceAccount identity).",
    )
    connect_timeout_seconds: float = Field(
        default=2.0, gt=0, description="Seconds; short so an outage is seen fast."
    )
    read_timeout_seconds: float = Field(default=10.0, gt=0, description="Seconds per request.")
    max_attempts: int = Field(
        default=2, ge=1, description="botocore attempts per call; frwatch retries above it."
    )


class WebhookSettings(_Section):
    """The mutating admission webhook (Pod CREATE). It fails open: any internal error admits the pod as is."""

    addr: str = Field(default="0.0.0.0", description="Listen address.")  # noqa: S104 - served inside the pod
    port: int = Field(default=9443, ge=1, le=65535, description="Listen port.")
    host: str | None = Field(
        default=None, description="Host name the API server uses (the Service's DNS name)."
    )
    cert_file: str | None = Field(default=None, description="TLS certificate (PEM); unset: kopf self-signs.")
    key_file: str | None = Field(default=None, description="TLS private key (PEM).")
    insecure: bool = Field(default=False, description="Serve plain HTTP: tests and local runs only.")
    job_wait_seconds: float = Field(
        default=0.5,
        ge=0,
        le=5,
        description="Seconds to wait for the job index to learn a just-created job before admitting its pod "
        "untouched (pods can arrive right after their job). Kept far below the API server's 10 s timeout.",
    )
    # tls.mode=operator: the operator makes, keeps and rotates its own CA and certificate
    # (frwatch_operator.capture.webhook_tls; RBAC: get/create/update of certs_secret in namespace, get/patch of
    # configuration_name).
    manage_certs: bool = Field(
        default=False,
        description="Make the webhook's CA and serving certificate, keep them in certs_secret, serve them "
        "from certs_dir and patch the caBundle of configuration_name (tls.mode=operator). Excludes "
        "cert_file/key_file and insecure.",
    )
    service_name: str = Field(
        default="",
        description="The webhook Service's name: the certificate names <svc>.<ns>.svc[.cluster.local].",
    )
    namespace: str = Field(
        default="",
        description="The webhook Service's namespace, the operator's own: certs_secret lives there.",
    )
    certs_secret: str = Field(
        default="frwatch-webhook-certs",
        description="Secret holding the CA and the serving certificate, shared by every replica and restart.",
    )
    certs_dir: str = Field(
        default="/var/run/frwatch/webhook-certs",
        description="Writable folder (an emptyDir: the root filesystem is read-only) for the served tls.pem.",
    )
    configuration_name: str = Field(
        default="frwatch", description="MutatingWebhookConfiguration whose caBundle the operator patches."
    )
    ca_validity_days: int = Field(default=3650, ge=2, description="Lifetime of the CA (days).")
    cert_validity_days: int = Field(
        default=365, ge=1, description="Lifetime of the serving certificate (days)."
    )
    cert_renew_before_days: int = Field(
        default=30,
        ge=0,
        description="Re-issue the serving certificate when less than this is left (days). The CA is replaced "
        "when less than cert_validity_days + cert_renew_before_days is left.",
    )
    certs_check_seconds: float = Field(
        default=3600.0,
        gt=0,
        description="Seconds between two checks of the Secret and the caBundle while running (renewal, "
        "another replica's rotation, a caBundle reset by an upgrade).",
    )

    @property
    def certs_file(self) -> str:
        """The file served with manage_certs (certificate then key); start-up sets cert_file/key_file to it."""
        return f"{self.certs_dir.rstrip('/')}/tls.pem"

    @model_validator(mode="after")
    def _one_way_to_serve_tls(self) -> WebhookSettings:
        if not self.manage_certs:
            return self
        if self.insecure or {self.cert_file, self.key_file} - {None, self.certs_file}:
            raise ValueError(
                "FRWATCH_WEBHOOK_MANAGE_CERTS=true makes its own certificate: unset FRWATCH_WEBHOOK_INSECURE, "
                "FRWATCH_WEBHOOK_CERT_FILE and FRWATCH_WEBHOOK_KEY_FILE"
            )
        if not (self.service_name and self.namespace):
            raise ValueError(
                "FRWATCH_WEBHOOK_MANAGE_CERTS=true needs FRWATCH_WEBHOOK_SERVICE_NAME and FRWATCH_WEBHOOK_NAMESPACE "
                "(the certificate's DNS names)"
            )
        if self.cert_renew_before_days >= self.cert_validity_days:
            raise ValueError(
                "FRWATCH_WEBHOOK_CERT_RENEW_BEFORE_DAYS must be below FRWATCH_WEBHOOK_CERT_VALIDITY_DAYS"
            )
        if self.ca_validity_days <= self.cert_validity_days + self.cert_renew_before_days:
            raise ValueError(
                "FRWATCH_WEBHOOK_CA_VALIDITY_DAYS must exceed FRWATCH_WEBHOOK_CERT_VALIDITY_DAYS + "
                "FRWATCH_WEBHOOK_CERT_RENEW_BEFORE_DAYS (else the CA would be replaced at every check)"
            )
        return self


class FlightRecorderSettings(_Section):
    """Defaults for the Flight Recorder variables injected into training containers."""

    buffer_size: int = Field(
        default=2000, ge=1, description="Ring entries per process group (torch's recommendation)."
    )
    dump_dir: str = Field(
        default=c.DUMP_MOUNT_PATH, description="Shared emptyDir mount path in every container."
    )
    file_prefix: str = Field(
        default=c.DUMP_FILE_PREFIX, description="Dump file name prefix; the file is <prefix><rank>."
    )
    dump_on_timeout: bool = Field(default=True, description="Set TORCH_NCCL_DUMP_ON_TIMEOUT=1.")
    volume_size_limit: str = Field(default="2Gi", description="sizeLimit of the dump emptyDir.")
    torch_version: str = Field(
        default="any",
        description="The torch version assumed for a job that does not say (annotation frwatch.io/torch-version) "
        "and whose image does not name it: from 2.9 the Flight Recorder variables are set under their new names "
        "only, before 2.9 under the old ones only (what that torch reads without a warning); 'any' (the "
        "default): both, so no torch loses its dumps, at the price of one deprecation warning a rank from 2.9 on "
        "(frwatch_operator.capture.torch_env_names).",
    )

    @property
    def path_prefix(self) -> str:
        """The value of TORCH_FR_DUMP_TEMP_FILE: ``<dump_dir>/<file_prefix>``."""
        return f"{self.dump_dir.rstrip('/')}/{self.file_prefix}"


class EvidenceSettings(_Section):
    """Evidence beyond Flight Recorder: container logs and node records (the operator), the NCCL debug file
    (the webhook sets it, the agent uploads it). Stored as the API or the file gave them: the analyzer masks
    secrets before anything reaches an annotation, an Event or the report; the store holds the raw text."""

    log_tail_lines: int = Field(
        default=2000, ge=1, le=100000,
        description="Lines asked of each training container's log (pods/log tailLines), at collection time.",
    )
    log_max_bytes: int = Field(
        default=256 * 1024, ge=1024, le=16 * 1024 * 1024,
        description="Bytes kept of each container log (its tail; the previous instance's and the termination "
        "message's too): a log of many MB is cut to its last log_max_bytes. The API is asked for at most "
        "4x this (limitBytes) per request.",
    )
    log_readers: int = Field(
        default=8, ge=1, le=64,
        description="Container logs read at once (threads): when collection ends every running container's "
        "log is read, and pods/log goes through each node's kubelet.",
    )
    nccl_debug: bool = Field(
        default=True,
        description="The webhook sets NCCL_DEBUG=WARN and NCCL_DEBUG_FILE into the dump folder in training "
        "containers, never over a value the user set; the agent uploads the file as nccl/<rank>.txt.",
    )
    nccl_max_bytes: int = Field(
        default=1024 * 1024, ge=1024, le=64 * 1024 * 1024,
        description="Bytes the agent keeps of an NCCL debug file (its tail).",
    )
    max_nodes: int = Field(
        default=64, ge=0, le=4096,
        description="Node records (conditions and recent Events naming the node: nodes/<node>.json) written "
        "per Incident, the nodes of failed pods and of ranks without a dump first (RBAC: get nodes, list "
        "events). 0: none.",
    )
    node_events_max: int = Field(
        default=256, ge=1, le=256, description="Events read per node (the most recent are kept)."
    )


class CollectionSettings(_Section):
    """How long the operator waits for dumps after a failure."""

    deadline_seconds: int = Field(
        default=120, ge=5, description="Seconds from detection until collection stops."
    )


class OperatorSettings(_Section):
    """The operator process: which namespaces it watches and how it drives open Incidents."""

    namespaces: str = Field(
        default="",
        description="Comma-separated namespaces (or kopf glob patterns) to watch; empty: the whole cluster.",
    )
    job_kinds: str = Field(
        default=",".join(c.JOB_KINDS),
        description="Comma-separated job kinds to follow: PyTorchJob (kubeflow.org/v1), TrainJob "
        "(trainer.kubeflow.org/v1alpha1), JobSet (jobset.x-k8s.io/v1alpha2). A kind whose CRD is not installed "
        "is logged at start and watched once it is; RBAC (the chart) covers the kinds listed only.",
    )

    @model_validator(mode="after")
    def _known_job_kinds(self) -> OperatorSettings:
        wanted = [k.strip() for k in self.job_kinds.split(",") if k.strip()]
        unknown = [k for k in wanted if k not in c.JOB_KINDS]
        if unknown or not wanted:
            raise ValueError(
                f"FRWATCH_OPERATOR_JOB_KINDS={self.job_kinds!r}: "
                + (f"unknown kind(s) {', '.join(unknown)}" if unknown else "no kind")
                + f"; supported: {', '.join(c.JOB_KINDS)}"
            )
        return self

    incident_poll_seconds: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Seconds between two passes over an open Incident (list S3, ask agents, update status).",
    )
    ask_agents_after_seconds: float = Field(
        default=5.0,
        ge=0,
        description="Seconds after detection before live agents are asked to dump the ranks still missing "
        "(ranks normally dump by themselves first).",
    )
    agent_timeout_seconds: float = Field(
        default=2.0, gt=0, description="Seconds one call to an agent's control endpoint may take in all (connect, "
        "send, the answer's headers and body): a total deadline, not per read."
    )
    live_poll_seconds: float = Field(
        default=15.0, gt=0, le=600,
        description="Live watch (frwatch.io/live): seconds between two pulls of every live job's agents' /live.",
    )
    live_stall_after_seconds: float = Field(
        default=60.0, gt=0,
        description="Live watch: a gap between a group's members (and the laggards' stale progress) seen this "
        "long is a stall.",
    )
    live_policy: Literal["report", "dumpAndAnalyze", "abort"] = Field(
        default="report",
        description="Live watch: what a finding does unless the job's CapturePolicy (liveWatch.policy) or its "
        "annotation frwatch.io/live-policy says otherwise: report, dumpAndAnalyze or abort.",
    )
    live_abort_allowed: bool = Field(
        default=False,
        description="Live watch: whether the policy abort may suspend a job after its live verdict; false: abort "
        "acts as dumpAndAnalyze (and says so).",
    )
    live_shards: int = Field(
        default=1, ge=1, le=1000,
        description="Live watch: how many shards the live rounds are split into by job (sha256 of the job's uid), "
        "each a Lease <live_lease_prefix>-<i> in lease_namespace held by one replica; 1: the leader runs every "
        "job's rounds. RBAC: get, create, update those Leases.",
    )
    live_lease_prefix: str = Field(
        default="frwatch-live",
        description="Live watch: the shard Leases' names, <prefix>-<i> (the chart's: <fullname>-live).",
    )
    replicas: int = Field(
        default=1, ge=1,
        description="How many operator replicas run (the chart's replicaCount): a replica takes at most "
        "ceil(live_shards / replicas) live shards while another replica takes the rest.",
    )
    refused_backoff_seconds: float = Field(
        default=10.0,
        gt=0,
        description="After a verdict-loop pass the API refused for good (403, 422, a missing object), "
        "the next pass waits this long, doubling after each refused pass up to refused_backoff_max_seconds. "
        "Transient errors (5xx, timeouts, 409 conflicts) are retried at once instead.",
    )
    refused_backoff_max_seconds: float = Field(
        default=300.0, gt=0, description="Cap of the wait between two refused verdict-loop passes (seconds)."
    )
    refused_give_up_seconds: float = Field(
        default=1800.0,
        ge=0,
        description="Seconds from the first refused pass after which the Incident ends Failed (reason "
        "ApiRefused, one Warning Event naming the call and what to grant or fix); time for a person to fix "
        "RBAC or a CRD. 0: fail at the first refusal.",
    )
    listen_addr: str = Field(
        default="0.0.0.0",  # noqa: S104 - probed and scraped inside the cluster
        description="Listen address of the liveness endpoint (/healthz) and the metrics (/metrics).",
    )
    health_port: int = Field(
        default=8080,
        ge=0,
        le=65535,
        description="Port of kopf's liveness endpoint GET /healthz (the Deployment's livenessProbe); 0: off.",
    )
    metrics_port: int = Field(
        default=9090,
        ge=0,
        le=65535,
        description="Port of the Prometheus metrics GET /metrics (frwatch_operator.metrics); 0: off.",
    )
    leader_election: bool = Field(
        default=False,
        description="Elect one replica to drive the Incidents (a coordination.k8s.io Lease; every replica "
        "watches and serves the webhook). Needed with more than one replica; RBAC: get, create, update leases "
        "in lease_namespace.",
    )
    lease_namespace: str = Field(
        default="frwatch-system", description="Namespace of the leader election's Lease (the release namespace)."
    )
    lease_name: str = Field(
        default="frwatch-leader", description="Name of the leader election's Lease (the chart's: <fullname>-leader)."
    )
    identity: str = Field(
        default="",
        description="This replica's name in the Lease (the chart: the pod's name); empty: host name and pid.",
    )
    lease_seconds: float = Field(
        default=15.0, gt=0, description="A Lease not renewed for this long (seconds) may be taken over."
    )
    renew_seconds: float = Field(
        default=10.0,
        gt=0,
        description="The leader stops driving when its last renewal is this old (seconds; below lease_seconds).",
    )
    retry_seconds: float = Field(
        default=2.0, gt=0, description="Seconds between two election rounds (renewals; below renew_seconds)."
    )


class NotifySettings(_Section):
    """Notices to the people on call when a verdict lands (frwatch_operator.verdict.notifier): off unless a URL is set."""

    webhook_url: SecretStr | None = Field(
        default=None,
        description="Webhook URL that takes Slack-compatible JSON ({\"text\": ...}); from a Secret (the chart's "
        "notifications.webhookSecret). Unset: no notices.",
    )
    max_age_seconds: int = Field(
        default=3600, ge=60, description="Announce only verdicts stored this recently (no flood of old news after "
        "an upgrade or a leader change).",
    )  # fmt: skip
    attempts: int = Field(default=3, ge=1, le=10, description="Tries per notice (a 2xx ends them; 4xx but 429 too).")
    timeout_seconds: float = Field(default=5.0, gt=0, le=60, description="Total deadline of one try.")
    queue_size: int = Field(default=100, ge=1, le=10_000, description="Notices waiting at most; more are dropped.")


class Config(BaseModel):
    """Everything frwatch is configured with. Build with :func:`load_config`; pass it in; never mutate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    log_level: str = Field(default="INFO", description="Python log level name.")
    s3: S3Settings = Field(default_factory=S3Settings)
    webhook: WebhookSettings = Field(default_factory=WebhookSettings)
    fr: FlightRecorderSettings = Field(default_factory=FlightRecorderSettings)
    collection: CollectionSettings = Field(default_factory=CollectionSettings)
    evidence: EvidenceSettings = Field(default_factory=EvidenceSettings)
    operator: OperatorSettings = Field(default_factory=OperatorSettings)
    analyzer: AnalyzerSettings = Field(default_factory=AnalyzerSettings)
    remediation: RemediationSettings = Field(default_factory=RemediationSettings)
    agent: AgentSettings = Field(default_factory=AgentSettings)
    notify: NotifySettings = Field(default_factory=NotifySettings)
    pod: PodIdentity = Field(default_factory=PodIdentity)
    job: JobIdentity = Field(default_factory=JobIdentity)


def env_name(section: str | None, field: str) -> str:
    """The environment variable of a config field (``None`` section: a top-level field)."""
    if section == "s3" and field in AWS_ENV:
        return AWS_ENV[field]
    parts = [section, field] if section else [field]
    return ENV_PREFIX + "_".join(parts).upper()


def env_names() -> dict[str, str]:
    """Every environment variable the config reads -> dotted field path (for docs and the chart)."""
    names: dict[str, str] = {}
    for name, info in Config.model_fields.items():
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            for field in sub.model_fields:
                names[env_name(name, field)] = f"{name}.{field}"
        else:
            names[env_name(None, name)] = name
    return names


def _is_structured(annotation: Any) -> bool:
    """Whether the env var holds JSON: a model, a dict or a list (``list[str]`` included)."""
    annotation = typing.get_origin(annotation) or annotation
    return isinstance(annotation, type) and issubclass(annotation, BaseModel | dict | list)


def load_config(environ: Mapping[str, str]) -> Config:
    """Build the config from an environment mapping (pass ``os.environ`` at the entry point).

    Raises :class:`FatalError` naming the variable and what is wrong with its value.
    """
    raw: dict[str, Any] = {}
    for var, path in env_names().items():
        if var not in environ:
            continue
        value: Any = environ[var]
        section, _, field = path.partition(".")
        if field:
            section_model = Config.model_fields[section].annotation
            assert isinstance(section_model, type) and issubclass(section_model, BaseModel)
            if _is_structured(section_model.model_fields[field].annotation):
                try:
                    value = json.loads(value)
                except json.JSONDecodeError as exc:
                    raise FatalError(
                        f'{var}: not JSON ({exc}); expected e.g. {{"requests": {{"cpu": "1"}}}}'
                    ) from exc
            raw.setdefault(section, {})[field] = value
        else:
            raw[section] = value
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = [str(p) for p in err["loc"]]
            if len(loc) == 1 and loc[0] in raw:  # a section's own check: its message names the variables
                problems.append(str(err["msg"]).removeprefix("Value error, "))
                continue
            var = env_name(loc[0], loc[1]) if len(loc) >= 2 else env_name(None, loc[0])
            problems.append(f"{var}={_shown(environ.get(var))}: {err['msg']}")
        raise FatalError("invalid frwatch configuration: " + "; ".join(problems)) from exc


def _shown(value: str | None) -> str:
    if value is None:
        return "(unset)"
    return repr(value if len(value) <= 60 else value[:57] + "...")
