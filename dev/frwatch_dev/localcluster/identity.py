"""A stand-in for a cloud's pod identity webhook (EKS IRSA's ``pod-identity-webhook``), for keyless store access.

A pod whose ServiceAccount carries ``eks.amazonaws.com/role-arn`` with a role this stand-in knows gets, in every
container and init container (values the pod sets stay), ``AWS_ROLE_ARN`` and that role's credentials as
environment variables. It runs after the mutating webhooks, as EKS's (``pod-identity-webhook``) runs after
``frwatch``'s: the injected agent gets them too.

What a real one injects instead of credentials: ``AWS_WEB_IDENTITY_TOKEN_FILE`` and a projected token, which
boto3 exchanges at STS (AssumeRoleWithWebIdentity) for the role's temporary keys. Here that exchange is skipped:
the role's keys (a SeaweedFS identity of their own) go straight into the environment, where boto3's
environment-variable provider finds them. It shows which pods get which role through which ServiceAccount, and
that frwatch's processes take what boto3's chain finds instead of Secrets; it does not exercise STS.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from frwatch_dev.localcluster.errors import ApiError

if TYPE_CHECKING:
    from frwatch_dev.localcluster.apiserver import ApiServerHandle
    from frwatch_dev.localcluster.resources import ResourceType
    from frwatch_dev.localcluster.storage import Store

Obj = dict[str, Any]
ROLE_ANNOTATION = "eks.amazonaws.com/role-arn"


class IdentityWebhook:
    """The admission hook: role credentials into the pods of annotated ServiceAccounts. ``granted`` records
    (namespace, pod name, role) of each pod it gave a role."""

    def __init__(self, store: Store, roles: Mapping[str, Mapping[str, str]]) -> None:
        self.store = store
        self.roles = {arn: dict(env) for arn, env in roles.items()}
        self.granted: list[tuple[str, str, str]] = []

    def role_of(self, namespace: str, service_account: str) -> str | None:
        """The known role a ServiceAccount is annotated with, else None."""
        sa_type = self.store.type_for("", "v1", "serviceaccounts")
        if sa_type is None:
            return None
        try:
            sa = self.store.get(sa_type, namespace, service_account)
        except ApiError:
            return None
        role = str((sa.get("metadata") or {}).get("annotations", {}).get(ROLE_ANNOTATION) or "")
        return role if role in self.roles else None

    def env_for(self, namespace: str, service_account: str) -> dict[str, str]:
        """What a pod of that ServiceAccount gets ({} for none): also for the operator the test runs itself."""
        role = self.role_of(namespace, service_account)
        return {} if role is None else {"AWS_ROLE_ARN": role, **self.roles[role]}

    async def __call__(self, rt: ResourceType, namespace: str, body: Obj, dry_run: bool) -> tuple[Obj, list[str]]:
        if (rt.group, rt.plural) != ("", "pods"):
            return body, []
        spec = body.get("spec") or {}
        env = self.env_for(namespace, str(spec.get("serviceAccountName") or "default"))
        if not env:
            return body, []
        body = copy.deepcopy(body)
        spec = body["spec"]
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            have = {e.get("name") for e in container.get("env") or []}
            container["env"] = [*(container.get("env") or []),
                                *({"name": k, "value": v} for k, v in env.items() if k not in have)]  # fmt: skip
        meta = body.get("metadata") or {}
        self.granted.append((namespace, str(meta.get("name") or meta.get("generateName") or ""), env["AWS_ROLE_ARN"]))
        return body, []


def install_identity_webhook(handle: ApiServerHandle, roles: Mapping[str, Mapping[str, str]]) -> IdentityWebhook:
    """Add the stand-in to the emulator's admission, after the hooks already installed."""
    hook = IdentityWebhook(handle.server.store, roles)

    async def install() -> None:
        handle.server.admission_hooks.append(hook)

    asyncio.run_coroutine_threadsafe(install(), handle.loop).result(timeout=10)
    return hook
