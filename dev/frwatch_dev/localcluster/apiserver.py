"""A Kubernetes API server emulator over real HTTP, for tests and the local cluster.

In-process (a background thread with its own event loop)::

    handle = start_apiserver()            # 127.0.0.1, a free port
    handle.write_kubeconfig(path)         # for kubectl, the kubernetes client and kopf
    ...
    handle.stop()

As a process: ``python -m frwatch_dev.localcluster.apiserver --port 6443 --kubeconfig PATH``.

It serves built-in kinds (core/v1, batch/v1, apps/v1, coordination, rbac, admissionregistration,
events.k8s.io) and whatever CRDs are created, with GET/LIST/WATCH/CREATE/PUT/PATCH/DELETE, label and
field selectors, server-side Tables for kubectl, and Status errors. No authentication, no scheduling,
no controllers: the local cluster adds those it needs. Admission on CREATE is a hook
(``ApiServer.admission_hooks``): ``localcluster/admission.py`` calls mutating webhooks through it.

Over 400 lines by choice: the HTTP surface (every verb, selectors, watches, Status errors, server-side Tables)
is one routing table read as one; the state is ``storage.py``, admission ``admission.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import random
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from aiohttp import web

from frwatch_dev.localcluster import discovery, openapi, podlogs, selectors, tables
from frwatch_dev.localcluster.errors import ApiError
from frwatch_dev.localcluster.resources import ResourceType
from frwatch_dev.localcluster.storage import Store
from frwatch_dev.localcluster.threaded_server import serve_in_thread
from frwatch_dev.localcluster.watching import WatchFilter

Obj = dict[str, Any]
T = TypeVar("T")
#: An admission step on CREATE (the local cluster's mutating webhooks, ``localcluster/admission.py``):
#: ``(type, namespace, body, dry_run) -> (body to store, warnings)``; raises ``ApiError`` to deny.
AdmissionHook = Callable[[ResourceType, str, Obj, bool], Awaitable[tuple[Obj, list[str]]]]

_TRUE = frozenset({"1", "t", "T", "true", "True", "TRUE"})
#: a watch without timeoutSeconds ends after this many seconds (the real server: 30-60 min)
DEFAULT_WATCH_TIMEOUT = 1800.0
#: how often an idle watch that allows bookmarks gets one
BOOKMARK_INTERVAL = 5.0


@dataclass(frozen=True)
class Route:
    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    subresource: str
    watch_path: bool  # the legacy /watch/ prefix


def parse_route(path: str) -> Route | None:
    """Split a resource URL; None when ``path`` is not a resource URL."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    watch_path = bool(rest) and rest[0] == "watch"
    if watch_path:
        rest = rest[1:]
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else ""
    return Route(group, version, plural, namespace, name, sub, watch_path)


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(body).encode(), status=status, content_type="application/json")


def _warned(response: web.Response, warnings: list[str]) -> web.Response:
    for warning in warnings:  # as the real server: `Warning: 299 - "text"`
        text = warning.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{text}"')
    return response


def _wants(request: web.Request, what: str) -> bool:
    return any(f"as={what}" in part.replace(" ", "") for part in request.headers.get("Accept", "").split(","))


class ApiServer:
    """The aiohttp application over one ``Store``."""

    def __init__(self, store: Store | None = None, bookmark_interval: float = BOOKMARK_INTERVAL) -> None:
        self.store = store or Store()
        self.bookmark_interval = bookmark_interval
        self._changed = asyncio.Event()
        self._stopping = asyncio.Event()
        self.store.add_listener(self._notify)
        #: run in order on every CREATE before it is stored (empty: no admission, as before)
        self.admission_hooks: list[AdmissionHook] = []
        #: where the kubelet keeps container output (``podlogs``), for ``pods/log``; None: no kubelet
        self.pod_logs_dir: Path | None = None
        #: group-version -> (the types it was built from, its OpenAPI v3 document)
        self._openapi_cache: dict[str, tuple[str, Obj | None]] = {}
        self.app = web.Application(client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self._dispatch)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def stop_watches(self) -> None:
        self._stopping.set()
        self._notify()

    # -- dispatch -------------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._serve(request)
        except ApiError as exc:
            return _json(exc.status(), exc.code)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # the server must answer, as a real one does, with a 500 Status
            return _json(ApiError(500, "InternalError", f"{type(exc).__name__}: {exc}").status(), 500)

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if request.method == "GET":
            doc = self._discovery(path, request)
            if doc is not None:
                return doc
        route = parse_route(path)
        if route is None:
            raise ApiError.no_route()
        rt = self.store.type_for(route.group, route.version, route.plural)
        if rt is None:
            raise ApiError.no_route()
        namespace = route.namespace if rt.namespaced else None
        if route.namespace is not None and not rt.namespaced:
            raise ApiError.no_route()
        query = request.query
        dry_run = "All" in query.getall("dryRun", [])
        method = request.method
        if method == "GET":
            if query.get("watch") in _TRUE or route.watch_path:
                return await self._watch(request, rt, namespace, route.name)
            if route.name is None:
                return self._list(request, rt, namespace)
            if route.subresource == "log" and rt.plural == "pods" and not rt.group:
                return await self._pod_log(request, rt, namespace or "", route.name)
            if route.subresource and route.subresource not in rt.subresources:
                raise ApiError.no_route()
            obj = self.store.get(rt, namespace or "", route.name)
            return self._object_response(request, rt, obj)
        if method == "POST" and route.name is None:
            body = await self._body(request)
            warnings = self._check_fields(request, rt, body)
            body, admitted = await self._admit(rt, namespace or "", body, dry_run)
            obj = self.store.create(rt, namespace or "", body, dry_run=dry_run)
            return _warned(_json(obj, 201), warnings + admitted)  # admission warnings are relayed too
        if method == "PUT" and route.name is not None:
            body = await self._body(request)
            warnings = self._check_fields(request, rt, body)
            obj = self.store.replace(rt, namespace or "", route.name, body, route.subresource, dry_run=dry_run)
            return _warned(_json(obj), warnings)
        if method == "PATCH" and route.name is not None:
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            body = await self._body(request)
            # a JSON patch names paths, not fields: the real server checks it after applying; not done here
            warnings = [] if content_type == "application/json-patch+json" else self._check_fields(request, rt, body)
            obj = self.store.patch(
                rt, namespace or "", route.name, content_type, body, route.subresource, dry_run=dry_run
            )
            return _warned(_json(obj), warnings)
        if method == "DELETE":
            return await self._delete(request, rt, namespace, route.name, dry_run)
        raise ApiError.method_not_allowed()

    def _check_fields(self, request: web.Request, rt: ResourceType, body: Any) -> list[str]:
        """Server-side field validation (``fieldValidation``: Strict refuses unknown fields, Warn, the
        default, warns of them, Ignore says nothing), against the schemas ``openapi.py`` serves."""
        try:
            directive = openapi.field_validation(request.query.get("fieldValidation"))
        except ValueError as exc:
            raise ApiError.bad_request(str(exc)) from exc
        if directive == "Ignore":
            return []
        unknown = openapi.unknown_fields(rt, body)
        if unknown and directive == "Strict":
            raise ApiError.bad_request(openapi.strict_decoding_message(rt, unknown))
        return [f'unknown field "{name}"' for name in unknown]

    async def _admit(self, rt: ResourceType, namespace: str, body: Any, dry_run: bool) -> tuple[Any, list[str]]:
        warnings: list[str] = []
        if not isinstance(body, dict):
            return body, warnings  # the store answers the 400
        for hook in self.admission_hooks:
            body, said = await hook(rt, namespace, body, dry_run)
            warnings += said
        return body, warnings

    def _discovery(self, path: str, request: web.Request) -> web.StreamResponse | None:
        types = self.store.types()
        if path == "/version":
            return _json(discovery.VERSION)
        if path == "/openapi/v3" or path.startswith("/openapi/v3/"):
            return self._openapi(path.removeprefix("/openapi/v3").strip("/"), types)
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if path == "/api":
            return _json(discovery.api_versions(f"{request.host}"))
        if path == "/apis":
            return _json(discovery.api_group_list(types))
        if path == "/":
            paths = ["/api", "/api/v1", "/apis", "/version", "/healthz"]
            paths += sorted({f"/apis/{rt.group}/{rt.version}" for rt in types if rt.group})
            return _json({"paths": paths})
        parts = [p for p in path.split("/") if p]
        doc: Obj | None = None
        if len(parts) == 2 and parts[0] == "api":
            doc = discovery.api_resource_list(types, "", parts[1])
        elif len(parts) == 2 and parts[0] == "apis":
            doc = discovery.api_group(types, parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = discovery.api_resource_list(types, parts[1], parts[2])
        else:
            return None
        if doc is None:
            raise ApiError.no_route()
        return _json(doc)

    def _openapi(self, gv: str, types: list[ResourceType]) -> web.Response:
        """``/openapi/v3`` (the index, each document's URL carrying its hash) or one group-version's document."""
        if gv:
            doc = self._openapi_document(gv, types)
            if doc is None:
                raise ApiError.no_route()
            return _json(doc)
        index = {}
        for path in sorted({openapi.gv_path(rt) for rt in types}):
            doc = self._openapi_document(path, types)
            if doc is not None:
                index[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={openapi.document_hash(doc)}"}
        return _json({"paths": index})

    def _openapi_document(self, gv: str, types: list[ResourceType]) -> Obj | None:
        chosen = [rt for rt in types if openapi.gv_path(rt) == gv]
        key = json.dumps(
            [[rt.group, rt.version, rt.plural, rt.kind, rt.namespaced, rt.subresources, rt.schema] for rt in chosen],
            sort_keys=True,
        )
        cached = self._openapi_cache.get(gv)
        if cached is None or cached[0] != key:
            cached = (key, openapi.group_version_document(chosen, gv))
            self._openapi_cache[gv] = cached
        return cached[1]

    async def _body(self, request: web.Request) -> Any:
        if request.headers.get("Content-Type", "").startswith("application/vnd.kubernetes.protobuf"):
            raise ApiError.unsupported_media_type(
                "the frwatch API emulator reads JSON only, not protobuf: create built-in objects from a file "
                "(kubectl create -f / kubectl apply -f) instead of kubectl's imperative `create <kind>`"
            )
        raw = await request.read()
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ApiError.bad_request(f"the request body is not valid JSON: {exc}") from exc

    def _predicate(self, request: web.Request, rt: ResourceType, name: str | None) -> Callable[[Obj], bool]:
        labels = selectors.parse_label_selector(request.query.get("labelSelector"))
        fields = selectors.parse_field_selector(request.query.get("fieldSelector"), rt.supports_field)
        if name is not None:
            fields += (selectors.FieldRequirement("metadata.name", False, name),)

        def predicate(obj: Obj) -> bool:
            return selectors.labels_match(labels, obj) and selectors.fields_match(fields, obj)

        return predicate

    # -- reads ----------------------------------------------------------------------------------

    def _object_response(self, request: web.Request, rt: ResourceType, obj: Obj) -> web.Response:
        if _wants(request, "Table"):
            return _json(
                tables.table(
                    rt, [obj], self.store.resource_version, request.query.get("includeObject", "Metadata")
                )
            )
        if _wants(request, "PartialObjectMetadata"):
            return _json(
                {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
            )
        return _json(obj)

    def _list(self, request: web.Request, rt: ResourceType, namespace: str | None) -> web.Response:
        items, rv = self.store.list_objects(rt, namespace, self._predicate(request, rt, None))
        meta: Obj = {"resourceVersion": str(rv)}
        limit = int(request.query.get("limit") or 0)
        start = 0
        if request.query.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(request.query["continue"]))
                start = int(token["start"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ApiError.bad_request(f"continue key is not valid: {exc}") from exc
        if start or limit:
            end = start + limit if limit else len(items)
            if end < len(items):
                meta["continue"] = base64.urlsafe_b64encode(
                    json.dumps({"start": end, "rv": rv}).encode()
                ).decode()
                meta["remainingItemCount"] = len(items) - end
            items = items[start:end]
        if _wants(request, "Table"):
            doc = tables.table(rt, items, rv, request.query.get("includeObject", "Metadata"))
            doc["metadata"] = meta
            return _json(doc)
        if _wants(request, "PartialObjectMetadataList"):
            return _json(
                {
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                    "items": [
                        {
                            "kind": "PartialObjectMetadata",
                            "apiVersion": "meta.k8s.io/v1",
                            "metadata": i["metadata"],
                        }
                        for i in items
                    ],
                }
            )
        if not rt.custom:  # built-in lists carry no apiVersion/kind on their items
            items = [{k: v for k, v in i.items() if k not in ("apiVersion", "kind")} for i in items]
        return _json(
            {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta, "items": items}
        )

    async def _watch(
        self, request: web.Request, rt: ResourceType, namespace: str | None, name: str | None
    ) -> web.StreamResponse:
        query = request.query
        flt = WatchFilter(rt, namespace, self._predicate(request, rt, name))
        as_table = _wants(request, "Table")
        include = query.get("includeObject", "Metadata")
        bookmarks = query.get("allowWatchBookmarks") in _TRUE
        send_initial = query.get("sendInitialEvents") in _TRUE
        timeout = (
            float(query["timeoutSeconds"])
            if query.get("timeoutSeconds")
            else (DEFAULT_WATCH_TIMEOUT * (1 + random.random()))  # noqa: S311
        )
        rv_text = query.get("resourceVersion", "")
        if rv_text and not rv_text.isdigit():
            raise ApiError.bad_request(f"invalid resource version: {rv_text!r}")

        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        headers_sent = False

        async def send(kind: str, obj: Obj) -> None:
            nonlocal headers_sent
            if as_table and kind in ("ADDED", "MODIFIED", "DELETED"):
                obj = tables.table(
                    rt, [obj], int(obj["metadata"]["resourceVersion"]), include, with_headers=not headers_sent
                )
                headers_sent = True
            await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")

        def bookmark(rv: int, initial_end: bool = False) -> Obj:
            meta: Obj = {"resourceVersion": str(rv)}
            if initial_end:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}

        try:
            if not rv_text or rv_text == "0" or send_initial:
                items, cursor = self.store.list_objects(rt, namespace, flt.predicate)
                for obj in items:
                    await send("ADDED", obj)
                if send_initial:
                    await send("BOOKMARK", bookmark(cursor, initial_end=True))
            else:
                cursor = int(rv_text)
            deadline = time.monotonic() + timeout
            next_bookmark = time.monotonic() + self.bookmark_interval
            while not self._stopping.is_set():
                changed = self._changed
                try:
                    changes = self.store.changes_since(cursor)
                except ApiError as exc:
                    await send("ERROR", exc.status())
                    break
                for change in changes:
                    event = flt.event_for(change)
                    if event is not None:
                        await send(*event)
                    cursor = change.rv
                now = time.monotonic()
                if now >= deadline:
                    break
                if bookmarks and now >= next_bookmark:
                    await send("BOOKMARK", bookmark(max(cursor, self.store.resource_version)))
                    next_bookmark = now + self.bookmark_interval
                wait = min(deadline, next_bookmark if bookmarks else deadline) - now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout=max(wait, 0.01))
        except (ConnectionResetError, ConnectionError):
            return response
        with contextlib.suppress(ConnectionError):
            await response.write_eof()
        return response

    async def _pod_log(self, request: web.Request, rt: ResourceType, namespace: str, name: str) -> web.StreamResponse:
        """``GET pods/{name}/log``: the kubelet's file for the container instance asked for (``podlogs``)."""
        pod = self.store.get(rt, namespace, name)
        query = request.query
        container = podlogs.choose_container(pod, query.get("container"))
        if self.pod_logs_dir is None or not (pod.get("spec") or {}).get("nodeName"):
            raise ApiError.bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        path = podlogs.log_file(self.pod_logs_dir, pod, container, query.get("previous") in _TRUE)
        data = podlogs.read(path, query)
        if query.get("follow") not in _TRUE or query.get("previous") in _TRUE:
            return web.Response(body=data, content_type="text/plain")
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        limit = podlogs.limit_of(query)
        sent, offset = len(data), path.stat().st_size
        with contextlib.suppress(ConnectionError):
            await response.write(data)
            while (limit is None or sent < limit) and not self._stopping.is_set():
                current = self._find(rt, namespace, name)
                with open(path, "rb") as f:
                    f.seek(offset)
                    more = f.read()
                offset += len(more)
                if more:
                    more = more[: limit - sent] if limit is not None else more
                    sent += len(more)
                    await response.write(more)
                elif current is None or podlogs.instance_ended(current, container, path):
                    break
                else:
                    await asyncio.sleep(0.2)
            await response.write_eof()
        return response

    def _find(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        try:
            return self.store.get(rt, namespace, name)
        except ApiError:
            return None

    # -- deletes --------------------------------------------------------------------------------

    async def _delete(
        self, request: web.Request, rt: ResourceType, namespace: str | None, name: str | None, dry_run: bool
    ) -> web.Response:
        options = await self._body(request) or {}
        if not isinstance(options, dict):
            raise ApiError.bad_request("the DeleteOptions must be a JSON object")
        if request.query.get("propagationPolicy"):
            options["propagationPolicy"] = request.query["propagationPolicy"]
        dry_run = dry_run or "All" in (options.get("dryRun") or [])
        if name is None:
            deleted = self.store.delete_collection(rt, namespace, self._predicate(request, rt, None), dry_run)
            return _json(
                {
                    "kind": f"{rt.kind}List",
                    "apiVersion": rt.api_version,
                    "metadata": {"resourceVersion": str(self.store.resource_version)},
                    "items": deleted,
                }
            )
        obj, removed = self.store.delete(rt, namespace or "", name, options, dry_run=dry_run)
        code = 200 if removed else 202
        if self.store.returns_deleted_object(rt) or not removed:
            return _json(obj, code)
        details = {"name": name, "kind": rt.plural, "uid": obj["metadata"].get("uid")}
        if rt.group:
            details["group"] = rt.group
        return _json(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details},
            code,
        )


# -- running it ---------------------------------------------------------------------------------


def kubeconfig(url: str, namespace: str = "default") -> Obj:
    """A kubeconfig for the emulator (no TLS; a dummy token, which the emulator does not check)."""
    name = "frwatch-local"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {"token": "frwatch-local-emulator"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }


@dataclass
class ApiServerHandle:
    """A running emulator (in a thread of this process)."""

    url: str
    server: ApiServer
    loop: asyncio.AbstractEventLoop
    _thread: threading.Thread
    _runner: web.AppRunner
    _stopped: bool = field(default=False)

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 0

    @property
    def store(self) -> Store:
        """Direct access: only touch it through ``call`` (the store lives in the server's loop)."""
        return self.server.store

    def call(self, fn: Callable[[Store], T]) -> T:
        """Run ``fn(store)`` in the server's loop and return its result (for test set-up and inspection)."""

        async def run() -> T:
            return fn(self.server.store)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=30)

    def write_kubeconfig(self, path: str | Path, namespace: str = "default") -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(kubeconfig(self.url, namespace), indent=2) + "\n")
        return target

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True

        async def shutdown() -> None:
            self.server.stop_watches()
            await self._runner.cleanup()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout=15)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=15)

    def __enter__(self) -> ApiServerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_apiserver(
    host: str = "127.0.0.1",
    port: int = 0,
    bookmark_interval: float = BOOKMARK_INTERVAL,
    history_limit: int = 20_000,
) -> ApiServerHandle:
    """Start the emulator in a background thread; ``port=0`` picks a free one (see ``handle.url``).

    ``bookmark_interval``: seconds between BOOKMARK events on an idle watch that allows them.
    ``history_limit``: changes kept for watches resuming from an old resourceVersion (older: 410 Gone).
    """
    servers: list[ApiServer] = []

    def app() -> web.Application:  # made in the server's thread, its loop current
        servers.append(ApiServer(Store(history_limit), bookmark_interval))
        return servers[0].app

    served = serve_in_thread(app, host, port, name="frwatch-apiserver", what="the API emulator")
    return ApiServerHandle(
        url=f"http://{host}:{served.port}",
        server=servers[0],
        loop=served.loop,
        _thread=served.thread,
        _runner=served.runner,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m frwatch_dev.localcluster.apiserver",
        description="Serve a Kubernetes API emulator over HTTP (loopback).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig", help="write a kubeconfig for the emulator to this path")
    args = parser.parse_args(argv)
    handle = start_apiserver(args.host, args.port)
    if args.kubeconfig:
        handle.write_kubeconfig(args.kubeconfig)
    print(f"frwatch API emulator serving at {handle.url}", flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    handle.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
