"""A small asyncio client of a Kubernetes API (the emulator, or any server without auth) for the stand-ins.

The stand-in controllers (kubelet, Job controller, training operator) talk to the API only over HTTP,
as real controllers do, so they see exactly what kubectl and the frwatch operator see:

    api = Api("http://127.0.0.1:PORT")
    pods = Informer(api, "/api/v1/pods", wake)     # list + watch, a local cache, ``wake`` set on change
    await api.patch("/api/v1/namespaces/ns/pods/p/status", {"status": {...}})
    await api.event(involved, "Normal", "Started", "Started container x", component="kubelet")
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

import aiohttp

logger = logging.getLogger(__name__)

Obj = dict[str, Any]


class ApiStatusError(Exception):
    """The API answered an error Status."""

    def __init__(self, code: int, body: Any, what: str) -> None:
        self.code = code
        self.body = body
        message = body.get("message") if isinstance(body, Mapping) else str(body)[:300]
        super().__init__(f"{what}: HTTP {code}: {message}")


def now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ns_path(group: str, version: str, plural: str, namespace: str | None = None, name: str = "") -> str:
    """The URL path of a collection (or an object when ``name``), e.g. ``ns_path("", "v1", "pods", "ns")``."""
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    return f"{path}/{name}" if name else path


def path_of(obj: Mapping[str, Any], plural: str) -> str:
    """The URL path of a stored object (from its apiVersion and metadata)."""
    api_version = str(obj.get("apiVersion") or "v1")
    group, _, version = api_version.rpartition("/")
    meta = obj.get("metadata") or {}
    return ns_path(group, version, plural, meta.get("namespace") or None, str(meta["name"]))


class Api:
    """JSON over HTTP to one API server. Open with ``async with Api(url) as api`` (or ``await api.open()``)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None

    async def open(self) -> Api:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5))
        return self

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Api:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("Api is not open: use `async with Api(url) as api`")
        return self._session

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
        params: Mapping[str, str] | None = None, timeout: float = 30.0,
    ) -> Any:  # fmt: skip
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        async with self.session.request(
            method, self.url + path, data=data, headers=headers, params=params,
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as resp:  # fmt: skip
            text = await resp.text()
            try:
                doc = json.loads(text) if text else None
            except ValueError:
                doc = text
            if resp.status >= 400:
                raise ApiStatusError(resp.status, doc, f"{method} {path}")
            return doc

    async def get(self, path: str) -> Obj | None:
        """The object, or None when it does not exist."""
        try:
            return await self.request("GET", path)  # type: ignore[no-any-return]
        except ApiStatusError as exc:
            if exc.code == 404:
                return None
            raise

    async def list(self, path: str, label_selector: str = "") -> list[Obj]:
        params = {"labelSelector": label_selector} if label_selector else None
        doc = await self.request("GET", path, params=params)
        return list(doc.get("items") or [])

    async def create(self, path: str, body: Obj) -> Obj:
        return await self.request("POST", path, body)  # type: ignore[no-any-return]

    async def patch(self, path: str, patch: Any, kind: str = "merge") -> Obj | None:
        """Merge (default), strategic or json patch; None when the object is gone."""
        types = {
            "merge": "application/merge-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "json": "application/json-patch+json",
        }
        try:
            return await self.request("PATCH", path, patch, content_type=types[kind])  # type: ignore[no-any-return]
        except ApiStatusError as exc:
            if exc.code == 404:
                return None
            raise

    async def delete(self, path: str, grace_seconds: int | None = None, propagation: str = "") -> bool:
        """True when it was there."""
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        if propagation:
            body["propagationPolicy"] = propagation
        try:
            await self.request("DELETE", path, body)
        except ApiStatusError as exc:
            if exc.code == 404:
                return False
            raise
        return True

    async def event(
        self, involved: Mapping[str, Any], type_: str, reason: str, message: str, *, component: str,
        host: str = "",
    ) -> None:  # fmt: skip
        """A core/v1 Event about ``involved`` (never raises: events are best effort)."""
        meta = involved.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        stamp = now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion"),
                "kind": involved.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": component, **({"host": host} if host else {})},
            "reportingComponent": component,
            "reportingInstance": host or component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await self.create(ns_path("", "v1", "events", namespace), body)
        except Exception as exc:
            logger.debug("event %s on %s not posted: %s", reason, meta.get("name"), exc)


class Informer:
    """List + watch one collection into a cache (``items``: key -> object); sets ``wake`` on every change.

    Re-lists after a 410 Gone or a dropped connection, as client-go's reflector does. ``synced`` is set
    after the first list.
    """

    def __init__(self, api: Api, path: str, wake: asyncio.Event, label_selector: str = "") -> None:
        self.api = api
        self.path = path
        self.wake = wake
        self.label_selector = label_selector
        self.items: dict[tuple[str, str], Obj] = {}
        self.synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @staticmethod
    def key(obj: Mapping[str, Any]) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"informer {self.path}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def values(self) -> list[Obj]:
        return list(self.items.values())

    async def _run(self) -> None:
        while True:
            try:
                rv = await self._list()
                await self._watch(rv)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.debug("informer %s: %s; re-listing", self.path, exc)
                await asyncio.sleep(0.5)

    async def _list(self) -> str:
        params = {"labelSelector": self.label_selector} if self.label_selector else None
        doc = await self.api.request("GET", self.path, params=params)
        api_version, kind = doc.get("apiVersion"), str(doc.get("kind") or "").removesuffix("List")
        # built-in lists carry no apiVersion/kind on their items; watch events do: make both alike
        items = [{"apiVersion": api_version, "kind": kind, **o} for o in doc.get("items") or []]
        self.items = {self.key(o): o for o in items}
        self.synced.set()
        self.wake.set()
        return str((doc.get("metadata") or {}).get("resourceVersion") or "")

    async def _watch(self, rv: str) -> None:
        while True:
            params = {
                "watch": "true",
                "resourceVersion": rv,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "300",
            }
            if self.label_selector:
                params["labelSelector"] = self.label_selector
            async with self.api.session.get(
                self.api.url + self.path, params=params, timeout=aiohttp.ClientTimeout(total=None, sock_read=400)
            ) as resp:  # fmt: skip
                if resp.status >= 400:
                    raise ApiStatusError(resp.status, await resp.text(), f"watch {self.path}")
                async for line in resp.content:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        raise ApiStatusError(int(obj.get("code") or 500), obj, f"watch {self.path}")
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if kind == "BOOKMARK":
                        continue
                    if kind == "DELETED":
                        self.items.pop(self.key(obj), None)
                    else:
                        self.items[self.key(obj)] = obj
                    self.wake.set()
