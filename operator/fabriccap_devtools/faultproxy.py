"""A fault-injecting proxy between a Kubernetes client (the operator) and a real API server.

The client talks plain HTTP to the proxy on 127.0.0.1 (``FaultProxy.kubeconfig`` writes a
kubeconfig for it); the proxy forwards each request to the API server over HTTPS with the
credentials it was given, so the server, its audit log and RBAC see that identity, and streams
the answer back as it comes (a watch stays a watch). Rules decide what happens on the way.
Where controlplane/relay.py (and the e2e harness's ``Relay``) cut the network as a whole, this
works per request, at the HTTP level: the faults a broken proxy, load balancer or API server
would make.

A rule matches requests by verb and path and says what to do with them:

    verb    watch, list, get, create, update, patch, delete (what the API server would call
            the request), or a group: read (get, list, watch), write (the others), * (all)
    path    a substring of the request path: "/api/v1/nodes", "fabriccapabilities/x/status"
    times   apply to this many matching requests, then the rule is spent (None: no limit)
    seconds apply for this long after the rule is added, then it is spent (None: until removed)

Rules are tried in the order they were added; the first live match acts, and a request no
rule matches passes. The actions (``Action`` subclasses, and their JSON ``kind``):

    Pass()                          forward untouched: lets some requests through before a broader rule
    Status(code, message)           answer an API ``Status`` error with that HTTP code; ``retry_after``
                                    adds the header (a 429 from priority and fairness)
    Delay(seconds)                  wait, then forward
    Truncate(after_bytes, abort)    forward, but end the answer after that many bytes of its body:
                                    cleanly (a well-formed chunked end, mid-JSON) or, with abort,
                                    by dropping the connection
    Inject(lines, after_lines)      forward a watch, writing these lines (each a JSON text, or any
                                    text) into the stream after that many of the server's lines
    Silent()                        answer 200 and then nothing, holding the connection open: a
                                    watch that is accepted and never speaks, a LIST that never ends
    Slow(step_bytes, interval)      forward, but at most step_bytes every interval seconds (a slow-loris)
    Drop()                          close the connection without an answer

In process (the e2e tests):

    proxy = FaultProxy(load_kubeconfig("operator.kubeconfig")).start()   # a thread of its own
    proxy.kubeconfig(tmp / "via-proxy.kubeconfig")                       # the operator uses this
    rule = proxy.add(Rule("watch", "/api/v1/nodes", Silent()))
    proxy.add(Rule("write", "/status", Status(500), times=1))
    proxy.remove(rule); proxy.clear()
    proxy.requests(verb="watch", path="/api/v1/nodes")                   # what passed, and how
    proxy.stop()

Out of process (``python -m fabriccap_devtools.faultproxy --kubeconfig K --write-kubeconfig OUT``),
the same through HTTP on the proxy's own port, under a prefix never forwarded:

    POST   /_faultproxy/rules       {"verb": "watch", "path": "/api/v1/nodes",
                                     "action": {"kind": "inject", "lines": ["[]"]}, "times": 1}
                                    -> {"id": 3}
    GET    /_faultproxy/rules       the live rules
    DELETE /_faultproxy/rules       every rule;   DELETE /_faultproxy/rules/3   one
    GET    /_faultproxy/requests    what the proxy forwarded or answered, oldest first

It listens on 127.0.0.1 only and never answers a client it cannot attribute: it is a test
tool with the upstream identity's full rights.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import aiohttp
import yaml
from aiohttp import web

from fabriccap.kube.credentials import Credentials, load_kubeconfig

CONTROL_PREFIX = "/_faultproxy"
READ_SIZE = 64 * 1024
MAX_RECORDED = 10_000
VERB_GROUPS = {
    "*": frozenset({"get", "list", "watch", "create", "update", "patch", "delete"}),
    "read": frozenset({"get", "list", "watch"}),
    "write": frozenset({"create", "update", "patch", "delete"}),
}
# Headers that describe one hop, or that the proxy rewrites (it streams decompressed bytes).
HOP_HEADERS = frozenset(
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
        "authorization",
    }
)


# --- actions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    kind: ClassVar[str] = ""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class Pass(Action):
    kind: ClassVar[str] = "pass"


@dataclass(frozen=True)
class Status(Action):
    kind: ClassVar[str] = "status"
    code: int
    message: str = ""
    retry_after: int | None = None


@dataclass(frozen=True)
class Delay(Action):
    kind: ClassVar[str] = "delay"
    seconds: float


@dataclass(frozen=True)
class Truncate(Action):
    kind: ClassVar[str] = "truncate"
    after_bytes: int
    abort: bool = False


@dataclass(frozen=True)
class Inject(Action):
    kind: ClassVar[str] = "inject"
    lines: tuple[str, ...]
    after_lines: int = 0


@dataclass(frozen=True)
class Silent(Action):
    kind: ClassVar[str] = "silent"


@dataclass(frozen=True)
class Slow(Action):
    kind: ClassVar[str] = "slow"
    step_bytes: int = 1
    interval: float = 0.5


@dataclass(frozen=True)
class Drop(Action):
    kind: ClassVar[str] = "drop"


ACTIONS: dict[str, type[Action]] = {
    action.kind: action for action in (Pass, Status, Delay, Truncate, Inject, Silent, Slow, Drop)
}


def action_from_json(document: Any) -> Action:
    if not isinstance(document, dict) or document.get("kind") not in ACTIONS:
        raise ValueError(f"an action is an object with a kind among {sorted(ACTIONS)}")
    fields = {key: value for key, value in document.items() if key != "kind"}
    if "lines" in fields:
        fields["lines"] = tuple(str(line) for line in fields["lines"])
    try:
        return ACTIONS[document["kind"]](**fields)
    except TypeError as error:
        raise ValueError(f"action {document['kind']}: {error}") from None


# --- rules -----------------------------------------------------------------------------------


@dataclass
class Rule:
    verb: str
    path: str
    action: Action
    times: int | None = None
    seconds: float | None = None
    id: int = 0
    added: float = 0.0
    applied: int = 0

    def __post_init__(self) -> None:
        if self.verb not in VERB_GROUPS and not any(self.verb in verbs for verbs in VERB_GROUPS.values()):
            raise ValueError(f"verb {self.verb!r}: one of {sorted(VERB_GROUPS['*'])}, read, write or *")

    def matches(self, verb: str, path: str) -> bool:
        return verb in VERB_GROUPS.get(self.verb, frozenset({self.verb})) and self.path in path

    def live(self, now: float) -> bool:
        if self.times is not None and self.applied >= self.times:
            return False
        return self.seconds is None or now - self.added < self.seconds

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "verb": self.verb,
            "path": self.path,
            "action": self.action.to_json(),
            "times": self.times,
            "seconds": self.seconds,
            "applied": self.applied,
        }

    @classmethod
    def from_json(cls, document: Any) -> Rule:
        if not isinstance(document, dict):
            raise ValueError("a rule is a JSON object")
        return cls(
            verb=str(document.get("verb", "*")),
            path=str(document.get("path", "")),
            action=action_from_json(document.get("action")),
            times=document.get("times"),
            seconds=document.get("seconds"),
        )


@dataclass
class Request:
    """One request the proxy saw (recorded as it comes): what it was, and what was done with it."""

    verb: str
    method: str
    path: str
    query: dict[str, str]
    action: str  # the acting rule's action kind ("pass" when none matched)
    # The HTTP status answered, once the answer has begun; None: not yet, or the connection was
    # dropped before the answer ended (Drop, Truncate with abort, an upstream that broke).
    status: int | None = None


def request_verb(method: str, path: str, query: dict[str, str]) -> str:
    """The verb the API server would log for a request (its RequestInfo, simplified)."""
    if method in ("POST",):
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete"
    if query.get("watch") in ("true", "1"):
        return "watch"
    parts = [part for part in path.split("/") if part]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return "get"  # /version, /openapi, /healthz...
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # a namespaced resource
    return "list" if len(rest) == 1 else "get"


# --- the proxy -------------------------------------------------------------------------------


@dataclass
class FaultProxy:
    """See the module's docstring. ``upstream``: where the API server is and who to be there."""

    upstream: Credentials
    host: str = "127.0.0.1"
    port: int = 0
    _rules: list[Rule] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _seen: deque[Request] = field(default_factory=lambda: deque(maxlen=MAX_RECORDED))
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _stopping: asyncio.Event | None = None
    _session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- rules (thread-safe: the tests call these from their own thread)

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            rule.id = next(self._ids)
            rule.added = time.monotonic()
            self._rules.append(rule)
        return rule

    def remove(self, rule: Rule | int) -> None:
        wanted = rule if isinstance(rule, int) else rule.id
        with self._lock:
            self._rules = [kept for kept in self._rules if kept.id != wanted]

    def clear(self) -> None:
        with self._lock:
            self._rules = []

    def rules(self) -> list[Rule]:
        now = time.monotonic()
        with self._lock:
            return [rule for rule in self._rules if rule.live(now)]

    def requests(self, verb: str | None = None, path: str = "") -> list[Request]:
        with self._lock:
            return [seen for seen in self._seen if (verb is None or seen.verb == verb) and path in seen.path]

    def _acting(self, verb: str, path: str) -> Action:
        now = time.monotonic()
        with self._lock:
            self._rules = [rule for rule in self._rules if rule.live(now)]
            for rule in self._rules:
                if rule.matches(verb, path):
                    rule.applied += 1
                    return rule.action
        return Pass()

    def _record(self, request: web.Request, verb: str, action: Action) -> Request:
        seen = Request(verb, request.method, request.path, dict(request.query), action.kind)
        with self._lock:
            self._seen.append(seen)
        return seen

    # -- a kubeconfig for clients of the proxy

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig that reaches the API server through this proxy (no credentials: the
        proxy holds them)."""
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "via-faultproxy", "cluster": {"server": self.url}}],
            "users": [{"name": "via-faultproxy", "user": {}}],
            "contexts": [
                {"name": "via-faultproxy", "context": {"cluster": "via-faultproxy", "user": "via-faultproxy"}}
            ],
            "current-context": "via-faultproxy",
        }
        path.write_text(yaml.safe_dump(document))
        return path

    # -- serving

    async def serve(self, ready: threading.Event | None = None) -> None:
        """Serve until ``stop``; in the caller's event loop."""
        self._stopping = asyncio.Event()
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.upstream.ssl_context(), limit=0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=True,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A client that goes away cancels its handler: a silent watch is not held forever.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0, handler_cancellation=True)
        await runner.setup()
        # Bound here, so that port 0 gives the port actually taken.
        listener = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        self.port = int(listener.getsockname()[1])
        await web.SockSite(runner, listener).start()
        if ready is not None:
            ready.set()
        try:
            await self._stopping.wait()
        finally:
            await runner.cleanup()
            await self._session.close()

    def start(self) -> FaultProxy:
        """Serve from a thread of its own (with its own event loop); returns once listening."""
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(self.serve(ready))
            except BaseException as error:  # reported to the starting thread
                failed.append(error)
                ready.set()
            finally:
                self._loop.close()

        self._thread = threading.Thread(target=run, name="faultproxy", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the fault proxy did not start within 30 s")
        if failed:
            raise RuntimeError(f"the fault proxy could not start: {failed[0]}")
        return self

    def stop(self) -> None:
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended already
                loop.call_soon_threadsafe(stopping.set)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith(CONTROL_PREFIX):
            return await self._control(request)
        query = dict(request.query)
        verb = request_verb(request.method, request.path, query)
        action = self._acting(verb, request.path)
        seen = self._record(request, verb, action)
        response, answered = await self._act(request, action, seen)
        seen.status = response.status if answered else None
        return response

    @staticmethod
    def _hang_up(request: web.Request) -> None:
        """Close the client's connection where it is: no answer, or no end to the one begun.
        aiohttp then fails to finish the response quietly (a ConnectionError it expects)."""
        if request.transport is not None:
            request.transport.close()

    async def _act(self, request: web.Request, action: Action, seen: Request) -> tuple[web.StreamResponse, bool]:
        """The response, and whether it reached its end (False: the connection was dropped)."""
        if isinstance(action, Status):
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": action.message or f"injected by the fault proxy: HTTP {action.code}",
                "code": action.code,
            }
            headers = {"Retry-After": str(action.retry_after)} if action.retry_after is not None else None
            return web.json_response(status, status=action.code, headers=headers), True
        if isinstance(action, Drop):
            self._hang_up(request)
            return web.Response(), False
        if isinstance(action, Silent):
            response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            await response.prepare(request)
            seen.status = response.status
            assert self._stopping is not None
            await self._stopping.wait()  # until the client goes (cancelling this) or the proxy stops
            return response, True
        if isinstance(action, Delay):
            await asyncio.sleep(action.seconds)
        return await self._forward(request, action, seen)

    async def _forward(self, request: web.Request, action: Action, seen: Request) -> tuple[web.StreamResponse, bool]:
        assert self._session is not None
        await self.upstream.refresh_async()
        headers = {name: value for name, value in request.headers.items() if name.lower() not in HOP_HEADERS}
        headers.update(self.upstream.headers())
        body = await request.read()
        async with self._session.request(
            request.method,
            self.upstream.server + request.path_qs,
            data=body or None,
            headers=headers,
            server_hostname=self.upstream.tls_server_name,
            allow_redirects=False,
        ) as upstream:
            response = web.StreamResponse(
                status=upstream.status,
                headers={name: value for name, value in upstream.headers.items() if name.lower() not in HOP_HEADERS},
            )
            await response.prepare(request)
            seen.status = response.status
            try:
                if isinstance(action, Inject):
                    await self._stream_injecting(upstream, response, action)
                elif isinstance(action, Truncate):
                    if await self._stream_truncated(upstream, response, action.after_bytes) and action.abort:
                        self._hang_up(request)
                        return response, False
                elif isinstance(action, Slow):
                    await self._stream_slowly(upstream, response, action)
                else:
                    async for chunk in upstream.content.iter_any():
                        await response.write(chunk)
            except (aiohttp.ClientError, TimeoutError):
                self._hang_up(request)  # the upstream broke mid-answer: so does ours
                return response, False
            except ConnectionError:
                return response, False  # the client went away
            return response, True

    @staticmethod
    async def _stream_truncated(upstream: aiohttp.ClientResponse, response: web.StreamResponse, limit: int) -> bool:
        """Forward at most ``limit`` bytes; True when the answer was cut."""
        sent = 0
        async for chunk in upstream.content.iter_any():
            if sent + len(chunk) >= limit:
                await response.write(chunk[: limit - sent])
                return True
            await response.write(chunk)
            sent += len(chunk)
        return False

    @staticmethod
    async def _stream_injecting(upstream: aiohttp.ClientResponse, response: web.StreamResponse, action: Inject) -> None:
        injected = b"".join(line.encode() + b"\n" for line in action.lines)
        if action.after_lines <= 0:
            await response.write(injected)
            injected = b""
        passed, buffer = 0, b""
        async for chunk in upstream.content.iter_any():
            if not injected:
                await response.write(chunk)
                continue
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                await response.write(line + b"\n")
                passed += 1
                if injected and passed >= action.after_lines:
                    await response.write(injected)
                    injected = b""
            if not injected and buffer:
                await response.write(buffer)
                buffer = b""
        if buffer:
            await response.write(buffer)

    @staticmethod
    async def _stream_slowly(upstream: aiohttp.ClientResponse, response: web.StreamResponse, action: Slow) -> None:
        async for chunk in upstream.content.iter_any():
            for start in range(0, len(chunk), max(action.step_bytes, 1)):
                await response.write(chunk[start : start + max(action.step_bytes, 1)])
                await asyncio.sleep(action.interval)

    async def _control(self, request: web.Request) -> web.StreamResponse:
        tail = request.path.removeprefix(CONTROL_PREFIX).strip("/")
        if tail == "rules" and request.method == "GET":
            return web.json_response([rule.to_json() for rule in self.rules()])
        if tail == "rules" and request.method == "POST":
            try:
                rule = self.add(Rule.from_json(await request.json()))
            except ValueError as error:
                return web.json_response({"error": str(error)}, status=400)
            return web.json_response({"id": rule.id}, status=201)
        if tail == "rules" and request.method == "DELETE":
            self.clear()
            return web.json_response({})
        if tail.startswith("rules/") and request.method == "DELETE" and tail[6:].isdigit():
            self.remove(int(tail[6:]))
            return web.json_response({})
        if tail == "requests" and request.method == "GET":
            return web.json_response([asdict(seen) for seen in self.requests()])
        return web.json_response({"error": f"no such control endpoint: {request.method} {request.path}"}, status=404)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1") or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: listen on a loopback HOST:PORT (127.0.0.1:0 picks a port)")
    return host, int(port)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fabriccap_devtools.faultproxy", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--kubeconfig", required=True, help="how to reach the API server, and as whom")
    parser.add_argument("--context", default=None)
    parser.add_argument("--listen", type=_address, default=("127.0.0.1", 0), help="loopback HOST:PORT")
    parser.add_argument("--write-kubeconfig", type=Path, required=True, help="where to write the clients' kubeconfig")
    parser.add_argument("--rules", type=Path, default=None, help="a JSON list of rules to start with")
    args = parser.parse_args(argv)
    proxy = FaultProxy(load_kubeconfig(args.kubeconfig, args.context), host=args.listen[0], port=args.listen[1])
    if args.rules is not None:
        for document in json.loads(args.rules.read_text()):
            proxy.add(Rule.from_json(document))

    async def run() -> None:
        ready = threading.Event()
        serving = asyncio.create_task(proxy.serve(ready))
        while not ready.is_set() and not serving.done():
            await asyncio.sleep(0.05)
        proxy.kubeconfig(args.write_kubeconfig)
        print(f"fault proxy at {proxy.url} -> {proxy.upstream.server}; control at {proxy.url}{CONTROL_PREFIX}/rules")
        sys.stdout.flush()
        await serving

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
