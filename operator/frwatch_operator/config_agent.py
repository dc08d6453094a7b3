"""The agent's settings: the per-pod sidecar and how the webhook injects it (:class:`AgentSettings`), and who
the agent is (:class:`PodIdentity`, :class:`JobIdentity`, injected by the webhook). Three sections of
:class:`~frwatch_operator.config.Config`, read from ``FRWATCH_AGENT_*``, ``FRWATCH_POD_*``, ``FRWATCH_JOB_*``
like every other (:func:`~frwatch_operator.config.load_config`); kept apart from ``config`` only for size. Pure.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from frwatch_operator.resources import ComputeResources


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentSettings(_Section):
    """The per-pod agent (native sidecar) and how the webhook injects it."""

    image: str = Field(
        default="ghcr.io/frwatch/frwatch:0.1.0", description="Image that runs `frwatch agent`."
    )
    resources: ComputeResources = Field(
        default=ComputeResources(requests={"cpu": "10m", "memory": "64Mi"}, limits={"memory": "256Mi"}),
        description="Sidecar resources (JSON in the env var).",
    )
    scan_interval_seconds: float = Field(default=0.2, gt=0, description="How often the dump dir is scanned.")
    stable_seconds: float = Field(
        default=0.5,
        ge=0,
        description="A file's size and mtime must hold this long before it is read as complete.",
    )
    corrupt_after_seconds: float = Field(
        default=30.0,
        gt=0,
        description="A dump that stays unparseable this long (seconds, size unchanged) is uploaded as is: "
        "a truncated dump is still evidence (the analyzer names it).",
    )
    upload_backoff_initial_seconds: float = Field(default=0.5, gt=0, description="First retry delay.")
    upload_backoff_max_seconds: float = Field(
        default=30.0, gt=0, description="Retry delay cap (exponential)."
    )
    drain_seconds: float = Field(
        default=25.0,
        ge=0,
        description="The agent's grace budget: on SIGTERM it keeps watching and uploading until every dump in "
        "the folder is stored, at most this long (seconds), then exits non-zero if any is left (on disk). "
        "The webhook sets the pod's terminationGracePeriodSeconds above it (raising a lower one).",
    )
    control_addr: str = Field(
        default="0.0.0.0",  # noqa: S104 - the fallback when the pod IP is not given
        description="Control endpoint listen address; the webhook sets it to the pod's IP (downward API "
        "status.podIP), so the agent listens on the pod network only.",
    )
    control_port: int = Field(
        default=8089, ge=0, le=65535, description="Control endpoint port (0: any free)."
    )
    live: bool = Field(
        default=False,
        description="Live watch (issue 15): place the bootstrap in the dump volume and sample the pod's rank "
        "sockets (<dump dir>/.frwatch-live/rank-<rank>.sock); the latest summaries are served on GET /live. "
        "The webhook turns it on for opted-in jobs.",
    )
    live_period_seconds: float = Field(
        default=15.0, gt=0, description="Live watch: one sampling round of every rank this often (seconds)."
    )
    live_ranks: str = Field(
        default="",
        description="Live watch: the global ranks this pod runs, 'first-last' (the webhook computes them from "
        "the rank container's PET_NODE_RANK and PET_NPROC_PER_NODE when both are numbers); a rank of them "
        "without a socket is then reported. Empty: only the sockets present are sampled.",
    )
    token: SecretStr | None = Field(
        default=None,
        description="This pod's agent token, injected by the webhook into this agent only: derived from the "
        "operator's agent key, the pod's namespace, job and frwatch.io/agent-id (frwatch_operator.capture.agent_keys). "
        "Never sent: calls are signed with it and answers proven with it (frwatch_operator.agent.auth). Unset: "
        "every control call is refused (503).",
    )
    key_secret: str = Field(
        default="frwatch-agent-key",
        description="Secret in key_namespace holding the keys agent tokens are derived from; the operator "
        "creates and rotates it (RBAC: get/update of that Secret, create of Secrets, in key_namespace).",
    )
    key_namespace: str = Field(
        default="frwatch-system", description="The operator's own namespace, where key_secret lives."
    )
    key_rotation_days: int = Field(
        default=30,
        ge=0,
        description="A new key every this many days (0: never). The previous key is still accepted, so a "
        "pod's token works for at least this long after the pod was created.",
    )
    key_check_seconds: float = Field(
        default=300.0,
        gt=0,
        description="Seconds between two reads of key_secret (rotation, a key made by another replica). A new "
        "key signs tokens only once it is twice this old, so every replica knows it before a pod carries it.",
    )
    image_pull_secrets: str = Field(
        default="",
        description="Comma-separated names of Secrets the webhook adds to each injected pod's "
        "imagePullSecrets, so the agent's image can be pulled from a private registry. Each must exist in "
        "the job's namespace (frwatch does not copy them there).",
    )

    @property
    def pull_secrets(self) -> list[str]:
        """``image_pull_secrets`` as a list of names."""
        return [n.strip() for n in self.image_pull_secrets.split(",") if n.strip()]
    pipe_timeout_seconds: float = Field(
        default=1.0, gt=0, description="Seconds to wait for a rank to open its pipe."
    )


class PodIdentity(_Section):
    """Who the agent is: injected by the webhook through the downward API."""

    name: str = Field(default="", description="Pod name.")
    namespace: str = Field(default="", description="Pod namespace.")
    uid: str = Field(default="", description="Pod uid.")
    node: str = Field(default="", description="Node name (spec.nodeName).")


class JobIdentity(_Section):
    """Which job attempt the agent's pod belongs to: injected by the webhook as literal values.

    ``attempt``: the JobSet ``restart-attempt`` label of the pod when present, else the attempt the
    operator keeps for the job (annotation ``frwatch.io/attempt``, default "0") when the pod was created.
    """

    kind: str = Field(default="PyTorchJob", description="Job kind.")
    name: str = Field(default="", description="Job name.")
    uid: str = Field(default="", description="Job uid.")
    attempt: str = Field(default="0", description="Job attempt (S3 layout component).")
