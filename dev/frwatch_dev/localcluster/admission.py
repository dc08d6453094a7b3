"""Mutating admission webhooks for the API emulator, called as a real API server calls them.

    install_webhook_admission(handle)         # every CREATE now goes through the webhooks

On each CREATE the emulator reads the ``MutatingWebhookConfiguration`` objects it stores (kopf writes
one when its ``settings.admission.managed`` is set; a chart or a test can create one), picks the
webhooks whose rules (operations, apiGroups, apiVersions, resources), ``namespaceSelector`` and
``objectSelector`` match, POSTs an ``admission.k8s.io/v1`` AdmissionReview to each in name order,
applies the JSONPatch each returns, relays its warnings, and honours ``failurePolicy`` (``Ignore``:
an unreachable or broken webhook is skipped; ``Fail``, the default: the create fails with a 500)
and ``timeoutSeconds`` (default 10). A webhook that answers ``allowed: false`` denies the create.

Differences from a real API server, on purpose: ``clientConfig.url`` may be plain ``http://`` on
loopback (a real server requires HTTPS; ``caBundle`` is not checked), and a ``clientConfig.service``
is reached only through the ``service_urls`` resolver given to :func:`install_webhook_admission`.
Not done: validating webhooks, ``reinvocationPolicy``, ``matchConditions``, ``matchPolicy``.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import aiohttp

from frwatch_dev.localcluster.errors import ApiError
from frwatch_dev.localcluster.patching import json_patch
from frwatch_dev.localcluster.resources import ResourceType
from frwatch_dev.localcluster.storage import Store

if TYPE_CHECKING:
    from frwatch_dev.localcluster.apiserver import ApiServerHandle

logger = logging.getLogger(__name__)

Obj = dict[str, Any]
#: (namespace, name, port, path) of a clientConfig.service -> a URL, or None when unknown
ServiceResolver = Callable[[str, str, int, str], str | None]

_MWC = ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
_USER = {"username": "system:frwatch-local-cluster", "groups": ["system:masters", "system:authenticated"]}


def _selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels, matchExpressions) against labels; absent or {} matches all."""
    if not isinstance(selector, Mapping):
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _listed(values: Any, value: str) -> bool:
    return isinstance(values, list) and ("*" in values or value in values)


def rule_matches(rule: Mapping[str, Any], rt: ResourceType, operation: str) -> bool:
    """One RuleWithOperations against a resource type and an operation (``resources`` may be ``*``)."""
    resources = rule.get("resources") or []
    scope = rule.get("scope", "*")
    if (scope == "Namespaced" and not rt.namespaced) or (scope == "Cluster" and rt.namespaced):
        return False
    return (
        _listed(rule.get("operations"), operation)
        and _listed(rule.get("apiGroups"), rt.group)
        and _listed(rule.get("apiVersions"), rt.version)
        and ("*" in resources or rt.plural in resources or "*/*" in resources)
    )


def matching_webhooks(
    store: Store, rt: ResourceType, namespace: str, obj: Mapping[str, Any], operation: str = "CREATE"
) -> list[tuple[str, Obj]]:
    """(configuration name, webhook) of every mutating webhook that applies, in the server's order."""
    mwc_type = store.type_for(*_MWC)
    if mwc_type is None:
        return []
    configs, _ = store.list_objects(mwc_type, None)
    ns_labels: Mapping[str, str] = {}
    if namespace:
        ns_type = store.type_for("", "v1", "namespaces")
        if ns_type is not None:
            try:
                ns_labels = {
                    **(store.get(ns_type, "", namespace)["metadata"].get("labels") or {}),
                    "kubernetes.io/metadata.name": namespace,
                }
            except ApiError:
                ns_labels = {"kubernetes.io/metadata.name": namespace}
    obj_labels = (obj.get("metadata") or {}).get("labels") or {}
    found = []
    for config in sorted(configs, key=lambda c: str(c["metadata"]["name"])):
        for hook in config.get("webhooks") or []:
            if not any(rule_matches(r, rt, operation) for r in hook.get("rules") or []):
                continue
            if rt.namespaced and not _selector_matches(hook.get("namespaceSelector"), ns_labels):
                continue
            if not _selector_matches(hook.get("objectSelector"), obj_labels):
                continue
            found.append((str(config["metadata"]["name"]), hook))
    return found


def review_request(
    rt: ResourceType, namespace: str, obj: Obj, dry_run: bool, operation: str = "CREATE"
) -> Obj:
    """The AdmissionReview a real API server sends for a create."""
    meta = obj.get("metadata") or {}
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    gvr = {"group": rt.group, "version": rt.version, "resource": rt.plural}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": str(meta.get("name") or ""),
            "namespace": namespace,
            "operation": operation,
            "userInfo": _USER,
            "object": obj,
            "oldObject": None,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


class WebhookAdmission:
    """The admission hook (``ApiServer.admission_hooks``): calls the matching mutating webhooks."""

    def __init__(self, store: Store, service_urls: ServiceResolver | None = None) -> None:
        self.store = store
        self.service_urls = service_urls
        #: every call made, for tests and logs: (webhook name, url, outcome)
        self.calls: list[tuple[str, str, str]] = []

    def _url(self, hook: Mapping[str, Any]) -> str:
        client = hook.get("clientConfig") or {}
        if client.get("url"):
            return str(client["url"])
        svc = client.get("service") or {}
        if svc and self.service_urls is not None:
            url = self.service_urls(
                str(svc.get("namespace") or ""), str(svc.get("name") or ""), int(svc.get("port") or 443),
                str(svc.get("path") or "/"),
            )  # fmt: skip
            if url:
                return url
        raise RuntimeError(
            f"clientConfig {dict(client)!r} names no url and no service the local cluster can route to "
            "(give the webhook a clientConfig.url, or a service_urls resolver to install_webhook_admission)"
        )

    async def __call__(
        self, rt: ResourceType, namespace: str, body: Obj, dry_run: bool
    ) -> tuple[Obj, list[str]]:
        hooks = matching_webhooks(self.store, rt, namespace, body)
        if not hooks:
            return body, []
        obj = copy.deepcopy(body)
        if rt.namespaced and namespace:
            obj.setdefault("metadata", {}).setdefault("namespace", namespace)
        warnings: list[str] = []
        for config_name, hook in hooks:
            name = str(hook.get("name") or config_name)
            ignore = hook.get("failurePolicy", "Fail") == "Ignore"
            try:
                obj, said = await self._call(name, hook, rt, namespace, obj, dry_run)
                warnings += said
            except ApiError:
                raise
            except Exception as exc:
                self.calls.append((name, "", f"error: {exc}"))
                if ignore:
                    logger.warning("webhook %s failed (failurePolicy Ignore): %s", name, exc)
                    continue
                raise ApiError(
                    500, "InternalError", f'Internal error occurred: failed calling webhook "{name}": {exc}'
                ) from exc
        return obj, warnings

    async def _call(
        self, name: str, hook: Mapping[str, Any], rt: ResourceType, namespace: str, obj: Obj, dry_run: bool
    ) -> tuple[Obj, list[str]]:
        url = self._url(hook)
        review = review_request(rt, namespace, obj, dry_run)
        timeout = aiohttp.ClientTimeout(total=float(hook.get("timeoutSeconds") or 10))
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, json=review) as resp,
        ):
            if resp.status != 200:
                raise RuntimeError(f"the webhook answered HTTP {resp.status}: {(await resp.text())[:200]}")
            answer = await resp.json(content_type=None)
        response = answer.get("response") if isinstance(answer, Mapping) else None
        if not isinstance(response, Mapping):
            raise RuntimeError("the webhook's answer has no AdmissionReview response")
        if response.get("uid") != review["request"]["uid"]:
            raise RuntimeError(
                f"expected response.uid={review['request']['uid']!r}, got {response.get('uid')!r}"
            )
        warnings = [str(w) for w in response.get("warnings") or []]
        if not response.get("allowed"):
            status = response.get("status") or {}
            self.calls.append((name, url, "denied"))
            raise ApiError(
                int(status.get("code") or 400),
                str(status.get("reason") or "BadRequest"),
                f'admission webhook "{name}" denied the request: {status.get("message") or "no reason given"}',
            )
        if response.get("patch"):
            if response.get("patchType") != "JSONPatch":
                raise RuntimeError(f"unsupported patchType {response.get('patchType')!r}")
            ops = json.loads(base64.b64decode(str(response["patch"])))
            try:
                obj = json_patch(obj, ops)
            except ApiError as exc:
                raise RuntimeError(f"its JSONPatch does not apply: {exc}") from exc
            self.calls.append((name, url, f"patched ({len(ops)} ops)"))
        else:
            self.calls.append((name, url, "allowed"))
        return obj, warnings


def install_webhook_admission(
    handle: ApiServerHandle, service_urls: ServiceResolver | None = None
) -> WebhookAdmission:
    """Make the emulator call mutating webhooks on every CREATE (idempotent per handle)."""
    for hook in handle.server.admission_hooks:
        if isinstance(hook, WebhookAdmission):
            return hook
    admission = WebhookAdmission(handle.server.store, service_urls)

    async def install() -> None:
        handle.server.admission_hooks.append(admission)

    asyncio.run_coroutine_threadsafe(install(), handle.loop).result(timeout=10)
    return admission
