"""An audit log of the Kubernetes API calls a client makes: a recording proxy in front of an API server.

Point the client under test (the operator) at the proxy instead of the server; every request is
forwarded unchanged (watches stream through) and recorded as an :class:`AuditEntry` (who, verb, group,
resource, subresource, namespace, name, status). ``localcluster/rbac.py`` then checks the entries
against RBAC rules (e.g. the chart's rendered ClusterRole and Role)::

    proxy = start_audit_proxy(k8s_api.url)
    proxy.write_kubeconfig(path, user="frwatch-operator")   # the token names the caller in the log
    ... run the operator with KUBECONFIG=path ...
    entries = proxy.entries_for("frwatch-operator")
    proxy.stop()

It stands apart from the emulator (it only forwards HTTP), so it records the same calls in front of a
real API server reachable over plain HTTP (e.g. ``kubectl proxy``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from frwatch_dev.localcluster.apiserver import kubeconfig, parse_route
from frwatch_dev.localcluster.threaded_server import serve_in_thread

#: Hop-by-hop headers a proxy must not forward (RFC 9110 7.6.1), plus those aiohttp recomputes.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "content-encoding",
    }
)
_TRUE = frozenset({"1", "t", "T", "true", "True", "TRUE"})


@dataclass(frozen=True)
class AuditEntry:
    """One API request, in RBAC's terms (the fields a ``PolicyRule`` matches on)."""

    user: str  #: the bearer token (the proxy's kubeconfig names the caller with it)
    user_agent: str
    verb: str  #: get, list, watch, create, update, patch, delete, deletecollection
    api_group: str  #: "" for the core group
    version: str
    resource: str  #: plural, e.g. "pods"
    subresource: str  #: e.g. "status"; "" for the object itself
    namespace: str  #: "" for a cluster-scoped call (or a call across all namespaces)
    name: str  #: "" for collection calls
    non_resource_url: str  #: set (and the resource fields empty) for /api, /apis, /version, /healthz ...
    status: int  #: the upstream's HTTP status

    @property
    def resource_path(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def audit_entry(
    method: str, path: str, query: dict[str, str], headers: dict[str, str], status: int
) -> AuditEntry:
    """Classify one request as the API server's authorizer does (request info -> verb and resource)."""
    auth = headers.get("authorization", "")
    user = auth.split(" ", 1)[1] if auth.lower().startswith("bearer ") else ""
    agent = headers.get("user-agent", "")
    route = parse_route(path.rstrip("/"))
    if route is None:
        return AuditEntry(user, agent, method.lower(), "", "", "", "", "", "", path, status)
    is_watch = route.watch_path or query.get("watch", "") in _TRUE
    if method == "GET":
        verb = "watch" if is_watch else ("get" if route.name else "list")
    elif method == "POST":
        verb = "create"
    elif method == "PUT":
        verb = "update"
    elif method == "PATCH":
        verb = "patch"
    elif method == "DELETE":
        verb = "delete" if route.name else "deletecollection"
    else:
        verb = method.lower()
    return AuditEntry(
        user,
        agent,
        verb,
        route.group,
        route.version,
        route.plural,
        route.subresource,
        route.namespace or "",
        route.name or "",
        "",
        status,
    )


class AuditProxy:
    """The aiohttp application: forward, record."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.entries: list[AuditEntry] = []
        self._lock = threading.Lock()
        self._session: aiohttp.ClientSession | None = None
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self._forward)
        self.app.on_cleanup.append(self._close)

    async def _close(self, _: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10), auto_decompress=False
            )
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        body = await request.read()
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=headers,
            data=body if body else None,
            allow_redirects=False,
        ) as upstream:
            self._record(request, upstream.status)
            response = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in _HOP},
            )
            await response.prepare(request)
            with contextlib.suppress(ConnectionError, aiohttp.ClientPayloadError):
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
            with contextlib.suppress(ConnectionError):
                await response.write_eof()
            return response

    def _record(self, request: web.Request, status: int) -> None:
        entry = audit_entry(
            request.method,
            request.path,
            dict(request.query),
            {k.lower(): v for k, v in request.headers.items()},
            status,
        )
        with self._lock:
            self.entries.append(entry)


@dataclass
class AuditProxyHandle:
    """A running proxy (a thread of this process with its own event loop)."""

    url: str
    proxy: AuditProxy
    loop: asyncio.AbstractEventLoop
    _thread: threading.Thread
    _runner: web.AppRunner

    @property
    def entries(self) -> list[AuditEntry]:
        """A snapshot of every request recorded so far."""
        with self.proxy._lock:
            return list(self.proxy.entries)

    def entries_for(self, user: str) -> list[AuditEntry]:
        """The requests made with bearer token ``user`` (see :meth:`write_kubeconfig`)."""
        return [e for e in self.entries if e.user == user]

    def clear(self) -> None:
        with self.proxy._lock:
            self.proxy.entries.clear()

    def write_kubeconfig(self, path: str | Path, user: str, namespace: str = "default") -> Path:
        """A kubeconfig pointing at the proxy whose token is ``user`` (so the log tells callers apart)."""
        config: dict[str, Any] = kubeconfig(self.url, namespace)
        config["users"][0]["user"]["token"] = user
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(config, indent=2) + "\n")
        return target

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(timeout=15)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=15)

    def __enter__(self) -> AuditProxyHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_audit_proxy(upstream: str, host: str = "127.0.0.1", port: int = 0) -> AuditProxyHandle:
    """Start a recording proxy to ``upstream`` (an API server URL over HTTP); ``port=0`` picks a free one."""
    proxy = AuditProxy(upstream)
    served = serve_in_thread(lambda: proxy.app, host, port, name="frwatch-audit-proxy", what="the audit proxy")
    return AuditProxyHandle(f"http://{host}:{served.port}", proxy, served.loop, served.thread, served.runner)
