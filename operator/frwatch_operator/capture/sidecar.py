"""The frwatch agent container the webhook injects into each pod of an opted-in job. Pure.

A native sidecar (an init container with ``restartPolicy: Always``) running ``frwatch agent`` with its
environment: the job attempt and the store (literal values), the pod identity (downward API), the
pod's IP to listen on (``status.podIP``), the S3 keys from the optional Secret ``s3.credentials_secret``
of the job's namespace, and its control token (:mod:`frwatch_operator.capture.agent_keys`), when the operator has
a key.

It passes the Pod Security Standard **restricted** on its own, whatever the pod sets: no privilege
escalation, every capability dropped, a non-root user (the image's uid :data:`IMAGE_UID`, so kubelet's
``runAsNonRoot`` check needs no numeric ``USER`` in the image), the ``RuntimeDefault`` seccomp profile; a
read-only root filesystem; its only volume is the shared ``emptyDir`` (a type the profile allows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frwatch_operator import constants as c
from frwatch_operator.config import Config, env_name
from frwatch_operator.resources import CaptureSettings

#: The uid and gid of the image's ``frwatch`` user (Dockerfile: ``USER 65532:65532``; the chart's
#: securityContext and the analyzer Job use the same).
IMAGE_UID = 65532
#: The agent's securityContext: the restricted profile's requirements, plus a read-only root filesystem.
SECURITY_CONTEXT: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": IMAGE_UID,
    "runAsGroup": IMAGE_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
    "readOnlyRootFilesystem": True,
}


@dataclass(frozen=True)
class JobContext:
    """The job attempt a pod belongs to (from the webhook's job index)."""

    kind: str
    name: str
    uid: str
    attempt: str


def downward(field_path: str) -> dict[str, Any]:
    return {"valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def identity_env() -> list[dict[str, Any]]:
    """Pod identity through the downward API (names from the config loader)."""
    return [
        {"name": c.ENV_POD_NAME, **downward("metadata.name")},
        {"name": c.ENV_POD_NAMESPACE, **downward("metadata.namespace")},
        {"name": c.ENV_POD_UID, **downward("metadata.uid")},
        {"name": c.ENV_NODE_NAME, **downward("spec.nodeName")},
    ]


def agent_container(
    settings: CaptureSettings, config: Config, job: JobContext, token: str | None
) -> dict[str, Any]:
    """The frwatch agent sidecar (native: an init container with restartPolicy Always)."""
    literal = {
        env_name("s3", "bucket"): settings.bucket,
        env_name("s3", "prefix"): settings.prefix,
        env_name("s3", "region"): config.s3.region,
        env_name("s3", "addressing_style"): config.s3.addressing_style,
        env_name("fr", "dump_dir"): config.fr.dump_dir,
        env_name("fr", "file_prefix"): config.fr.file_prefix,
        env_name("agent", "control_port"): str(config.agent.control_port),
        env_name("agent", "stable_seconds"): str(config.agent.stable_seconds),
        env_name("agent", "drain_seconds"): str(config.agent.drain_seconds),
        env_name("agent", "upload_backoff_max_seconds"): str(config.agent.upload_backoff_max_seconds),
        env_name("evidence", "nccl_max_bytes"): str(config.evidence.nccl_max_bytes),
        env_name(None, "log_level"): config.log_level,
        c.ENV_JOB_KIND: job.kind,
        c.ENV_JOB_NAME: job.name,
        c.ENV_JOB_UID: job.uid,
        c.ENV_JOB_ATTEMPT: job.attempt,
    }
    if config.s3.endpoint_url:
        literal[env_name("s3", "endpoint_url")] = config.s3.endpoint_url
    if token:
        literal[env_name("agent", "token")] = token
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in literal.items()]
    env += identity_env()
    env.append({"name": c.ENV_AGENT_CONTROL_ADDR, **downward("status.podIP")})
    if config.s3.credentials_secret:  # empty: keyless, the pod's ServiceAccount identity (boto3's chain)
        env += [
            {
                "name": var,
                "valueFrom": {
                    "secretKeyRef": {"name": config.s3.credentials_secret, "key": var, "optional": True}
                },
            }
            for var in (c.ENV_AWS_ACCESS_KEY_ID, c.ENV_AWS_SECRET_ACCESS_KEY)
        ]
    return {
        "name": c.AGENT_CONTAINER,
        "image": config.agent.image,
        "args": ["agent"],
        "restartPolicy": "Always",
        "env": env,
        "ports": [
            {"name": c.AGENT_CONTROL_PORT_NAME, "containerPort": config.agent.control_port, "protocol": "TCP"}
        ],
        "resources": settings.agent_resources.wire(),
        "volumeMounts": [{"name": c.DUMP_VOLUME, "mountPath": config.fr.dump_dir}],
        "securityContext": dict(SECURITY_CONTEXT),
    }


def is_ours(container: Any) -> bool:
    """Whether a container named ``frwatch-agent`` is the agent frwatch injects (a partial earlier
    injection), not a user's container that happens to bear the name."""
    return (
        isinstance(container, Mapping)
        and container.get("name") == c.AGENT_CONTAINER
        and container.get("args") == ["agent"]
        and container.get("restartPolicy") == "Always"
    )
