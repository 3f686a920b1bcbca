"""A small fake Kubernetes API server on 127.0.0.1, for unit tests of the client, the informers
and the publisher: paged LISTs, scripted WATCH streams, failures on demand, and writes.

A write to a collection it serves behaves like the API server's (POST creates with a uid and
a resourceVersion and ignores ``status``, which a FabricCapability is then served with as its
CRD's default says; a merge PATCH of an object or of its ``/status``;
DELETE; each seen by open watches); a write anywhere else is only recorded. Every request is
recorded, so tests can assert on what was sent and how often.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import itertools
import json
import socket
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from aiohttp import web

from fabriccap.kube.client import KubeClient
from fabriccap.kube.credentials import Credentials
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from fabriccap_devtools.reference.fabriccapability import crd_status_default

WAIT_SECONDS = 5.0

Body = dict[str, Any]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


# The CRD's status default, read once: every test's fake would otherwise parse the CRD (~40 ms).
_status_default = functools.cache(crd_status_default)


@dataclass
class Collection:
    kind: str
    items: list[Body]
    resource_version: str


@dataclass
class WatchResponse:
    """One scripted answer to a WATCH: an HTTP error, or events sent at once (then kept open, or closed)."""

    status: int = 200
    events: Sequence[Body] = ()
    close: bool = False
    chunks: Sequence[bytes] = ()  # raw bytes written as they are, after the events
    message: str = ""  # an error's message (default: "scripted HTTP <status>")


@dataclass
class LogScript:
    """How the fake answers a pods/log GET: an HTTP error, or chunks streamed one by one
    (made lazily, so a gigabyte is never held), honouring ``limitBytes`` as the kubelet does
    unless told not to; ``gate`` holds the stream after its first chunk until it is set, and
    ``silent`` sends the headers and then nothing."""

    status: int = 200
    chunks: Callable[[], Iterable[bytes]] = lambda: ()
    honour_limit: bool = True
    gate: asyncio.Event | None = None
    silent: bool = False
    message: str = ""


@dataclass
class FakeApi:
    collections: dict[str, Collection] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str], str]] = field(default_factory=list)  # method, path, query, auth
    watch_script: dict[str, deque[WatchResponse]] = field(default_factory=dict)
    list_failures: dict[str, deque[int]] = field(default_factory=dict)
    # Failures of single-object GETs, by path, consumed one per request.
    get_failures: dict[str, deque[int]] = field(default_factory=dict)
    streams: dict[str, list[asyncio.Queue[Body | None]]] = field(default_factory=dict)
    bodies: list[tuple[str, str, Any]] = field(default_factory=list)  # method, content type, body of writes
    accepts: list[tuple[str, str]] = field(default_factory=list)  # path, Accept header of every request
    required_token: str | None = None
    # (method, path) -> HTTP codes to answer the next writes with, one each
    write_failures: dict[tuple[str, str], deque[int]] = field(default_factory=dict)
    # HTTP code -> the message a scripted failure carries (the API server's own words)
    failure_messages: dict[int, str] = field(default_factory=dict)
    # (method, path) -> a gate that writes to it wait for (a slow API server, on cue)
    write_gates: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)
    url: str = ""
    # Streaming lists (WATCH with sendInitialEvents=true): off by default, answered 422 as
    # Kubernetes 1.33 does with the WatchList gate off, so the operator lists in pages.
    streaming_lists: bool = False
    # Streaming lists to cut short (the stream ends before the initial-events-end bookmark).
    streaming_lists_cut: int = 0
    # Streaming lists to leave silent (the headers, then nothing until the client goes), and
    # HTTP statuses to answer the next ones with, one each.
    streaming_lists_silent: int = 0
    streaming_list_refusals: deque[int] = field(default_factory=deque)
    # A raw line the next streaming list sends first, one per list.
    streaming_list_first_lines: deque[bytes] = field(default_factory=deque)
    _versions: Any = field(default_factory=lambda: itertools.count(1000))
    # collection path -> the status an object created there is served with (the CRD's default).
    status_defaults: dict[str, Body] = field(
        default_factory=lambda: {FABRIC_CAPABILITIES.collection(): copy.deepcopy(_status_default())}
    )
    # pods/log paths (or "path?container=NAME", first) -> how to answer; the queries of the
    # reads, and how many ran at once.
    logs: dict[str, LogScript] = field(default_factory=dict)
    log_reads: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    log_streams: int = 0
    most_log_streams: int = 0

    def serve(self, path: str, kind: str, items: Sequence[Body], resource_version: str) -> None:
        self.collections[path] = Collection(kind, [copy.deepcopy(item) for item in items], resource_version)

    def script(self, path: str, *responses: WatchResponse) -> None:
        self.watch_script.setdefault(path, deque()).extend(responses)

    def lists(self, path: str) -> list[dict[str, str]]:
        return [query for method, p, query, _ in self.requests if p == path and "watch" not in query]

    def watches(self, path: str) -> list[dict[str, str]]:
        """The watches of ``path`` (streaming lists apart: ``streaming_list_requests``)."""
        return [
            query
            for method, p, query, _ in self.requests
            if p == path and query.get("watch") == "true" and "sendInitialEvents" not in query
        ]

    def streaming_list_requests(self, path: str) -> list[dict[str, str]]:
        return [query for method, p, query, _ in self.requests if p == path and "sendInitialEvents" in query]

    async def emit(self, path: str, *events: Body) -> None:
        """Send events on the newest open watch stream of ``path``."""
        await eventually(lambda: bool(self.streams.get(path)), f"a watch stream on {path}")
        for sent in events:
            self.streams[path][-1].put_nowait(sent)

    async def close_stream(self, path: str) -> None:
        await eventually(lambda: bool(self.streams.get(path)), f"a watch stream on {path}")
        self.streams[path][-1].put_nowait(None)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        self.requests.append((request.method, request.path, query, request.headers.get("Authorization", "")))
        self.accepts.append((request.path, request.headers.get("Accept", "")))
        if self.required_token is not None and request.headers.get("Authorization") != f"Bearer {self.required_token}":
            return status_response(401, "Unauthorized")
        if request.method != "GET":
            body = await request.json() if request.can_read_body else None
            self.bodies.append((request.method, request.content_type, body))
            gate = self.write_gates.get((request.method, request.path))
            if gate is not None:
                await gate.wait()
            failures = self.write_failures.get((request.method, request.path))
            if failures:
                code = failures.popleft()
                return status_response(code, self.failure_messages.get(code, f"scripted HTTP {code}"))
            return self._write(request.method, request.path, body, _field_manager(request))
        if request.path.endswith("/log"):
            script = self.logs.get(f"{request.path}?container={query.get('container')}") or self.logs.get(request.path)
            if script is not None:
                return await self._log(request, script, query)
        get_failures = self.get_failures.get(request.path)
        if get_failures:
            code = get_failures.popleft()
            return status_response(code, f"scripted HTTP {code}")
        collection = self.collections.get(request.path)
        if collection is None:
            parent, _, name = request.path.rpartition("/")
            if parent in self.collections and query.get("watch") != "true":  # GET of one object
                found = self.objects(parent).get(name)
                if found is None:
                    return status_response(404, f'{self.collections[parent].kind.lower()}s "{name}" not found')
                return web.json_response(found)
            return status_response(404, f"the server could not find the requested resource ({request.path})")
        if query.get("watch") == "true" and "sendInitialEvents" in query:
            if not self.streaming_lists:
                return status_response(
                    422, "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
                )
            if self.streaming_list_refusals:
                status = self.streaming_list_refusals.popleft()
                return status_response(status, f"scripted HTTP {status}")
            return await self._streaming_list(request, collection)
        if query.get("watch") == "true":
            return await self._watch(request, request.path)
        failures = self.list_failures.get(request.path)
        if failures:
            return status_response(failures.popleft(), "etcdserver: request timed out")
        return self._list(collection, query)

    def _list(self, collection: Collection, query: Mapping[str, str]) -> web.Response:
        items = collection.items
        if "fieldSelector" in query:  # only metadata.name=NAME, as the operator's nudge asks
            field, _, wanted = query["fieldSelector"].partition("=")
            assert field == "metadata.name", f"the fake selects by metadata.name only, not {field}"
            items = [item for item in items if item["metadata"]["name"] == wanted]
        limit = int(query.get("limit", "0")) or len(items)
        start = int(query["continue"].removeprefix("page-")) if "continue" in query else 0
        end = start + limit
        metadata = {"resourceVersion": collection.resource_version}
        if end < len(items):
            metadata["continue"] = f"page-{end}"
        return web.json_response(
            {
                "apiVersion": "v1",
                "kind": f"{collection.kind}List",
                "metadata": metadata,
                "items": items[start:end],
            }
        )

    # -- writes, for served collections

    def objects(self, path: str) -> dict[str, Body]:
        """The objects of a served collection, by name."""
        return {item["metadata"]["name"]: item for item in self.collections[path].items}

    def writes(self, method: str | None = None) -> list[tuple[str, str, Any]]:
        return [entry for entry in self.bodies if method is None or entry[0] == method]

    def _write(self, method: str, path: str, body: Any, manager: str = "") -> web.Response:
        collection_path, name, subresource = self._locate(method, path)
        collection = self.collections.get(collection_path)
        if collection is None:
            return web.json_response({"kind": "Status", "status": "Success"})
        version = str(next(self._versions))
        if method == "POST":
            created = {key: copy.deepcopy(value) for key, value in (body or {}).items() if key != "status"}
            if collection_path in self.status_defaults:
                created["status"] = copy.deepcopy(self.status_defaults[collection_path])
            metadata = created.setdefault("metadata", {})
            if _position(collection.items, metadata.get("name")) is not None:
                return status_response(409, f"{collection.kind} {metadata.get('name')} already exists")
            metadata.update(
                {"uid": f"uid-{version}", "resourceVersion": version, "generation": 1, "creationTimestamp": "now"}
            )
            _manage(metadata, manager, "", "f:metadata")
            collection.items.append(created)
            collection.resource_version = version
            self._broadcast(collection_path, "ADDED", created)
            return web.json_response(created, status=201)
        index = _position(collection.items, name)
        if index is None:
            return status_response(404, f"{collection_path}/{name} not found")
        current = collection.items[index]
        if method == "DELETE":
            # DeleteOptions' uid precondition, answered as the API server answers it (409).
            wanted = ((body or {}).get("preconditions") or {}).get("uid")
            if wanted is not None and wanted != current["metadata"].get("uid"):
                return status_response(409, f"Precondition failed: UID in precondition: {wanted}")
            del collection.items[index]
            self._broadcast(
                collection_path, "DELETED", {**current, "metadata": {**current["metadata"], "resourceVersion": version}}
            )
            return web.json_response({"kind": "Status", "status": "Success"})
        if method == "PUT":
            sent_version = ((body or {}).get("metadata") or {}).get("resourceVersion")
            if sent_version is not None and sent_version != current["metadata"].get("resourceVersion"):
                return status_response(409, f"the object has been modified ({sent_version} is not current)")
            replaced = copy.deepcopy(body or {})
            replaced["metadata"] = {**current["metadata"], **replaced.get("metadata", {}), "resourceVersion": version}
            collection.items[index] = replaced
            collection.resource_version = version
            self._broadcast(collection_path, "MODIFIED", replaced)
            return web.json_response(replaced)
        if method == "PATCH":
            patch = dict(body or {})
            if subresource == "status":
                updated = {**current, "status": merge_patch(current.get("status"), patch.get("status"))}
            else:
                patch.pop("status", None)
                updated = merge_patch(current, patch)
            updated["metadata"] = {**updated["metadata"], "resourceVersion": version}
            if subresource == "status":
                _manage(updated["metadata"], manager, "status", "f:status")
            collection.items[index] = updated
            collection.resource_version = version
            self._broadcast(collection_path, "MODIFIED", updated)
            return web.json_response(updated)
        return status_response(405, f"{method} is not supported here")

    def _locate(self, method: str, path: str) -> tuple[str, str, str]:
        """(collection path, object name, subresource) of a write."""
        if method == "POST":
            return path, "", ""
        parts = path.rstrip("/").split("/")
        if parts[-1] == "status" and "/".join(parts[:-2]) in self.collections:
            return "/".join(parts[:-2]), parts[-2], "status"
        return "/".join(parts[:-1]), parts[-1], ""

    def _broadcast(self, path: str, event_type: str, body: Body) -> None:
        for queue in self.streams.get(path, []):
            queue.put_nowait({"type": event_type, "object": copy.deepcopy(body)})

    async def _streaming_list(self, request: web.Request, collection: Collection) -> web.StreamResponse:
        """Every item as ADDED, then the initial-events-end bookmark, then the end of the stream
        (a real one goes on with the changes; the operator closes it at the bookmark and watches
        from its version)."""
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        if self.streaming_lists_silent > 0:
            self.streaming_lists_silent -= 1
            await asyncio.Event().wait()  # until the client goes
        try:
            if self.streaming_list_first_lines:
                await response.write(self.streaming_list_first_lines.popleft() + b"\n")
            for item in collection.items:
                served = {"kind": collection.kind, **item}
                await response.write(json.dumps({"type": "ADDED", "object": served}).encode() + b"\n")
            if self.streaming_lists_cut > 0:
                self.streaming_lists_cut -= 1
                await response.write_eof()
                return response
            end = bookmark(collection.resource_version)
            end["object"]["kind"] = collection.kind
            end["object"]["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
            await response.write(json.dumps(end).encode() + b"\n")
            await response.write_eof()
        except (ConnectionResetError, RuntimeError):  # the client went away
            pass
        return response

    def _as_served(self, path: str, sent: Body) -> Body:
        """An event as the API server writes it: its object (but a Status) carries the watched kind."""
        body = sent.get("object")
        collection = self.collections.get(path)
        if collection is None or not isinstance(body, dict) or "kind" in body or sent.get("type") == "ERROR":
            return sent
        return {**sent, "object": {"kind": collection.kind, **body}}

    async def _watch(self, request: web.Request, path: str) -> web.StreamResponse:
        scripted = self.watch_script.get(path)
        response_script = scripted.popleft() if scripted else WatchResponse()
        if response_script.status != 200:
            return status_response(
                response_script.status, response_script.message or f"scripted HTTP {response_script.status}"
            )
        queue: asyncio.Queue[Body | None] = asyncio.Queue()
        self.streams.setdefault(path, []).append(queue)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        try:
            for sent in response_script.events:
                await response.write(json.dumps(self._as_served(path, sent)).encode() + b"\n")
            for chunk in response_script.chunks:
                await response.write(chunk)
                await asyncio.sleep(0.01)  # separate TCP reads
            if not response_script.close:
                while (live := await queue.get()) is not None:
                    await response.write(json.dumps(self._as_served(path, live)).encode() + b"\n")
            await response.write_eof()
        except (ConnectionResetError, RuntimeError):  # the client went away
            pass
        return response

    async def _log(self, request: web.Request, script: LogScript, query: Mapping[str, str]) -> web.StreamResponse:
        self.log_reads.append((request.path, dict(query)))
        if script.status != 200:
            return status_response(script.status, script.message or f"scripted HTTP {script.status}")
        self.log_streams += 1
        self.most_log_streams = max(self.most_log_streams, self.log_streams)
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        try:
            await response.prepare(request)
            if script.silent:
                await asyncio.Event().wait()  # until the client goes
            left = int(query["limitBytes"]) if script.honour_limit and "limitBytes" in query else None
            for number, chunk in enumerate(script.chunks()):
                if left is not None:
                    chunk = chunk[:left]
                    left -= len(chunk)
                if chunk:
                    await response.write(chunk)
                if number == 0 and script.gate is not None:
                    await script.gate.wait()
                if left == 0:
                    break
            await response.write_eof()
        except (ConnectionResetError, RuntimeError):  # the client went away
            pass
        finally:
            self.log_streams -= 1
        return response


def _position(items: Sequence[Body], name: object) -> int | None:
    """Where the object ``name`` is in a collection (a scan that stops there: thousands of
    writes to a collection of thousands must not build a map each)."""
    return next((index for index, item in enumerate(items) if item["metadata"]["name"] == name), None)


def _field_manager(request: web.Request) -> str:
    """The write's field manager, as the API server takes it: ``?fieldManager=``, else the
    User-Agent's product name."""
    return request.query.get("fieldManager") or request.headers.get("User-Agent", "unknown").split("/")[0]


def _manage(metadata: Body, manager: str, subresource: str, owned: str) -> None:
    """Record ``manager``'s write in managedFields, as the API server does for an Update (whole
    seconds; one entry per manager and subresource, the newest time). Only which top-level
    field it wrote is kept: enough to tell who wrote a status last."""
    entries = [
        entry
        for entry in metadata.get("managedFields") or []
        if (entry.get("manager"), entry.get("subresource", "")) != (manager, subresource)
    ]
    entry: Body = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "fabriccap.dev/v1alpha1",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "fieldsType": "FieldsV1",
        "fieldsV1": {owned: {}},
    }
    if subresource:
        entry["subresource"] = subresource
    metadata["managedFields"] = [*entries, entry]


def status_response(code: int, message: str) -> web.Response:
    """An API ``Status`` error body, as the API server sends it."""
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
    return web.json_response(body, status=code)


@asynccontextmanager
async def fake_api() -> AsyncIterator[tuple[FakeApi, KubeClient]]:
    api = FakeApi()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    api.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    client = KubeClient(Credentials(server=api.url))
    try:
        yield api, client
    finally:
        await client.close()
        for queues in api.streams.values():
            for queue in queues:
                queue.put_nowait(None)
        await runner.cleanup()


async def eventually(predicate: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def at(body: Body, resource_version: str) -> Body:
    versioned = copy.deepcopy(body)
    versioned["metadata"]["resourceVersion"] = resource_version
    return versioned


def event(event_type: str, body: Body, resource_version: str) -> Body:
    return {"type": event_type, "object": at(body, resource_version)}


def bookmark(resource_version: str) -> Body:
    """A BOOKMARK; the fake API gives its object the watched kind, as the API server does."""
    return {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": resource_version}}}


def expired() -> Body:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410}
    return {"type": "ERROR", "object": {**status, "message": "too old resource version: 100 (150)"}}


def recorded_sleeps(monkeypatch: pytest.MonkeyPatch, module: ModuleType, pause: float = 0.0) -> list[float]:
    """``module``'s backoff sleeps, recorded and cut to ``pause`` (so no test waits a second)."""
    delays: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        delays.append(delay)
        await real_sleep(pause)

    # Only ``sleep`` differs: timeouts and the loop are the real ones.
    monkeypatch.setattr(module, "asyncio", SimpleNamespace(**{**vars(asyncio), "sleep": sleep}))
    return delays
