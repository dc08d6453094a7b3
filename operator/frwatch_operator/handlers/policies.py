"""CapturePolicies -> the job index (opt-in by selector), and an Event on a malformed policy. No finalizers."""

from __future__ import annotations

from typing import Any

import kopf
from pydantic import ValidationError

from frwatch_operator import constants as c
from frwatch_operator import notices
from frwatch_operator.handlers.deps import Deps
from frwatch_operator.kube.adapter import ObjectRef
from frwatch_operator.resources import CapturePolicySpec


def on_policy(deps: Deps, event_type: str | None, body: dict[str, Any]) -> None:
    meta = body.get("metadata") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    if event_type == "DELETED":
        deps.index.delete_policy(ns, name)
        return
    deps.index.upsert_policy(body)
    try:
        CapturePolicySpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        problem = f"spec.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
        ref = ObjectRef.of({"apiVersion": f"{c.GROUP}/{c.VERSION}", "kind": c.POLICY_KIND, **body})
        deps.kube.post_event(ref, notices.policy_invalid(name, problem))


def register(registry: kopf.OperatorRegistry, deps: Deps) -> None:
    @kopf.on.event(c.GROUP, c.VERSION, c.POLICY_PLURAL, id="frwatch-policies", registry=registry)
    def policy_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        on_policy(deps, type, dict(body))
