"""A small async Kubernetes client: raw JSON in and out, nothing more. Requests and their
answers go over kube.exchanges' pooled connections; watches, streams and anything through a
proxy over aiohttp.

Why not kubernetes_asyncio: importing it costs ~35 MB of resident memory (its generated
models; kopf imports them too when the package is present), a third of the operator's budget,
and the operator never uses a model: objects become facts right away.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import contextlib
import re
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit

import aiohttp
import orjson
from yarl import URL

from fabriccap import __version__
from fabriccap.core.text import clean_text
from fabriccap.kube.credentials import Credentials, load_credentials_async
from fabriccap.kube.errors import KubeError, ResponseTooLargeError, UnreachableError, WatchLineError
from fabriccap.kube.exchanges import ConnectionPool, MalformedAnswerError
from fabriccap.kube.media import JSON, MERGE_PATCH
from fabriccap.kube.paths import DEFAULT_PAGE_SIZE, LEASES
from fabriccap.kube.unread import LineRule

# How every answer and watch line is decoded. orjson decodes a pod as an API server serves it
# (6.3 KB) in under half of json.loads's time, and decoding was the largest part of the 100k
# start left; it costs about 1 MiB of RSS (docs/performance.md, "Answers and watch lines
# decoded with orjson"). Stricter than json.loads where no API server writes: NaN, Infinity, a
# lone surrogate escape and invalid UTF-8 are refused (a ValueError, as any other malformed
# text), and so is nesting past 1,024 levels; an integer past 64 bits reads as a float.
decode_json: Callable[[bytes], Any] = orjson.loads
# How every request body is encoded: orjson, in a tenth of json.dumps's time (a status: 0.9
# against 12 us; json.dumps was 0.5 s of the 100,000-node start's 20,000 writes). A key that is
# not a string is a TypeError; a float NaN would be written as null, but nothing the operator
# writes holds a float (its CRD has no number field; Events and Leases count in integers).
encode_json: Callable[[Any], bytes] = orjson.dumps
# A watch line longer than this is not a Kubernetes object: the stream is ended (and resumed)
# instead of buffering without bound. etcd stores an object of at most 1.5 MiB (its default
# --max-request-bytes), and its JSON can be at most about six times that (Go's encoder writes
# each of <, > and & in a string as a six-byte \u escape). A line is held in pieces and then
# joined, twice its size for a moment, so the bound is kept near what can be real: 64 MiB let
# one hostile line take 128 MiB, all of the operator's memory target at 10,000 nodes.
MAX_WATCH_LINE_BYTES = 16 * 1024 * 1024
# Watches are asked to end after a minute and are resumed right away: on a quiet cluster the
# API server sends no BOOKMARK while nothing changes, so a stream that is silent for longer
# than this (90 s) is stalled (a partition, a dead connection), and is dropped and resumed.
DEFAULT_WATCH_SECONDS = 60
DEFAULT_WATCH_READ_TIMEOUT = 90.0
# Of an error answer to a streamed GET, only this much is read: its Status message is short.
MAX_ERROR_BODY_BYTES = 64 * 1024
# An API server's error message, as shown (a validation error lists every field it refused).
MAX_API_MESSAGE_CHARS = 1024

# asyncio gives every TLS connection a receive buffer of ``SSLProtocol.max_size``, 256 KiB,
# allocated zeroed (so resident at once) when the connection opens, and reads the socket into
# it. The operator holds a connection per watch and more for a round's writes and reads, and
# opens them all again when the API server comes back. At 10,000 nodes, 64 KiB instead took
# 2.4 MiB off the RSS after the start and 3.4 MiB off a forced relist's highest, with the same
# start (docs/performance.md, "A TLS connection's receive buffer"). Nothing is lost: a read
# takes what is there, up to the buffer, and the next read takes the rest; a TLS record is
# at most 16 KiB.
TLS_RECEIVE_BUFFER_BYTES = 64 * 1024
# A streaming list that has brought this much is a large collection's (the Nodes, the Pods):
# its connection receives into a wider buffer from then on, which takes fewer socket reads (the
# 100,000-node listing: 81.7 s at 64 KiB, 72.4 s at 256 KiB), and is closed when the stream
# ends, so the wider buffer is not kept in the pool for the next request. Only a listing: a
# watch busy under churn kept widened raised the churn's peak. 128 KiB, not asyncio's 256: the
# 100k start was the same within a second, and the real 10,000-node relist's highest 0.6 MiB
# lower, under its 128 MiB target again (docs/performance.md).
BUSY_STREAM_BYTES = 1024 * 1024
BUSY_STREAM_RECEIVE_BYTES = 128 * 1024

# Who the API server sees writing: a write without a fieldManager is recorded under the
# User-Agent's product ("fabriccap"), and audit logs and priority-and-fairness debugging show it.
USER_AGENT = f"fabriccap/{__version__}"
# Connections kept for requests and their answers. Streams (watches, log reads, and requests
# through a proxy) are not held to a number: a watch holds its connection for minutes, and with
# a cap of 32 the informers past the 32nd (many plugin namespaces) never got a stream, and their
# kinds went stale. Each of those users bounds itself: one watch per informer, the log reader's
# max_concurrent_reads, and the callers of the request methods.
MAX_CONNECTIONS = 32
# The leader's requests on its Lease go on connections of their own (exchanges.RESERVED_SLOTS):
# a renewal queued behind a round's writes could miss its renew deadline.
LEASES_PREFIX = f"/apis/{LEASES.api_version}/"

_LINE_BREAK = re.compile("[\r\n]")

ErrorHook = Callable[[str, int], None]  # (verb, HTTP status or 0 when there was no answer)
READ_CHUNK_BYTES = 64 * 1024


async def _read_body(response: aiohttp.ClientResponse, what: str, limit: int | None) -> bytes:
    """The response body, or ResponseTooLargeError once it passes ``limit`` bytes: what a
    bounded read holds at most is the limit and one chunk, however large the answer."""
    if limit is None:
        return await response.read()
    if response.content_length is not None:
        if response.content_length > limit:
            raise ResponseTooLargeError.past(what, limit, length=response.content_length)
        return await response.read()  # aiohttp reads no more than the length it was told
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(READ_CHUNK_BYTES):
        size += len(chunk)
        if size > limit:
            raise ResponseTooLargeError.past(what, limit)
        chunks.append(chunk)
    return b"".join(chunks)


class ChunkReader(Protocol):
    async def readchunk(self) -> tuple[bytes, bool]: ...


async def watch_lines(content: ChunkReader, path: str) -> AsyncIterator[bytes]:
    """A watch stream's lines, one at a time as each completes, each with its newline.

    The body is taken as the HTTP parser delivered it (``readchunk``: up to one HTTP chunk, and
    an API server writes a watch about an event per chunk), not as ``iter_any`` gives it (all
    that has arrived, joined into one bytes of up to a TLS read), and the lines are not split
    out all at once: a line is copied out of its piece once, a piece that is one whole line is
    the line (a whole slice of a bytes is that bytes), and only the line being handled is held.
    A line is kept with its newline for that: JSON reads it as whitespace. A line longer than
    MAX_WATCH_LINE_BYTES, or a stream that ends inside one, is a WatchLineError."""
    head: list[bytes] = []  # the pieces of a line not yet ended
    held = 0
    while True:
        piece, chunk_ended = await content.readchunk()
        if not piece:
            if chunk_ended:  # only where an HTTP chunk ended: aiohttp's end is (b"", False)
                continue
            break
        start = 0
        while (end := piece.find(b"\n", start) + 1) > 0:
            if head:
                head.append(piece[start:end])
                line = b"".join(head)
                head.clear()
                held = 0
            else:
                line = piece[start:end]
            start = end
            yield line
        if start < len(piece):
            rest = piece[start:]
            held += len(rest)
            if held > MAX_WATCH_LINE_BYTES:
                raise WatchLineError(f"watch {path}: an event over {MAX_WATCH_LINE_BYTES} bytes", "oversized line")
            head.append(rest)
    if not all(piece.isspace() for piece in head):
        # Ended cleanly in the middle of an event: something cut the stream.
        raise WatchLineError(f"watch {path}: the stream ended inside an event ({held} bytes)", "truncated line")


def _widen_receive_buffer(response: aiohttp.ClientResponse, limit: int = BUSY_STREAM_RECEIVE_BYTES) -> None:
    """The response's TLS connection receives into ``limit`` bytes from its next read on, and
    is closed when the response is done, not kept in the pool with that buffer. Nothing
    without TLS (plain HTTP has no such buffer)."""
    connection = response.connection
    # asyncio keeps the TLS protocol behind its transport, and reads its max_size at every read
    # through the instance (typeshed calls it a class variable: one instance's is set here).
    tls = getattr(connection.transport if connection is not None else None, "_ssl_protocol", None)
    if connection is None or connection.protocol is None or not isinstance(tls, asyncio.sslproto.SSLProtocol):
        return
    tls.max_size = limit  # type: ignore[misc]
    # aiohttp closes, rather than pools, a connection whose handler is to close, whenever the
    # response releases it (at the stream's end, before the caller has seen its last line).
    connection.protocol.force_close()


def bound_tls_receive_buffers(limit: int = TLS_RECEIVE_BUFFER_BYTES) -> None:
    """Every TLS connection this process opens from now on receives into ``limit`` bytes.
    Process-wide (asyncio has no per-connection setting), so the operator's kopf connections
    get it too; the operator calls it once, as it starts."""
    asyncio.sslproto.SSLProtocol.max_size = limit


async def _error_body(response: aiohttp.ClientResponse) -> bytes:
    """A refused stream's body, up to MAX_ERROR_BODY_BYTES: a Status is short, and what a front
    end sends in its place may not end. A read gives what has come so far, so it is repeated
    up to the bound or the end (one read alone cut a Status in two)."""
    chunks: list[bytes] = []
    size = 0
    while size < MAX_ERROR_BODY_BYTES and (chunk := await response.content.read(MAX_ERROR_BODY_BYTES - size)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _api_message(status: int, raw: bytes) -> str:
    """What an error answer says, as one bounded line for an error and the log: a Status's
    message may quote what a request carried, and a front end's page is anything."""
    try:
        body = decode_json(raw)
        if isinstance(body, dict) and body.get("message"):
            return clean_text(body["message"], MAX_API_MESSAGE_CHARS)
    except ValueError:
        pass
    return clean_text(raw.decode(errors="replace").strip(), 200) or f"HTTP {status}"


class KubeClient:
    def __init__(self, credentials: Credentials, on_error: ErrorHook | None = None, compression: bool = True) -> None:
        self.credentials = credentials
        # Large answers (a page of a paged LIST) gzip-compressed, as client-go asks by default:
        # less to carry from a remote API server, CPU on both ends to pay for it.
        self.compression = compression
        # Called for every failed request (fabriccap_api_errors_total): a 403 or 429 retry loop
        # must be visible without reading logs.
        self.on_error = on_error
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool | None = None
        self._exchanges: ConnectionPool | None = None
        self._server = urlsplit(credentials.server)
        # The request target begins with the server URL's own path (a proxying front end's).
        self._target_prefix = self._server.path.rstrip("/")
        # The Host is the URL's host and port, never user information before them (RFC 9110, 7.2).
        host = self._server.netloc.rpartition("@")[2]
        self._request_lines = f"Host: {host}\r\nUser-Agent: {USER_AGENT}\r\n" + (
            "Accept-Encoding: gzip\r\n" if compression else ""
        )

    def _failed(self, verb: str, status: int) -> None:
        if self.on_error is not None:
            self.on_error(verb, status)

    @property
    def server(self) -> str:
        return self.credentials.server

    def _url(self, path: str) -> URL:
        # Paths come from kube.paths, every segment already percent-encoded: taken as they are.
        # yarl would otherwise decode and resolve them again (`/a/%2E%2E/b` becomes `/b`).
        return URL(self.server + path, encoded=True)

    def _tls(self) -> ssl.SSLContext | bool:
        if self._ssl is None:
            self._ssl = self.credentials.ssl_context()
        return self._ssl

    def _connection(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._tls(), limit=0),  # no cap: see MAX_CONNECTIONS
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
                headers={"User-Agent": USER_AGENT},
            )
        return self._session

    def _pool(self) -> ConnectionPool:
        if self._exchanges is None:
            tls = self._tls()
            self._exchanges = ConnectionPool(
                host=self._server.hostname or "",
                port=self._server.port or (443 if self._server.scheme == "https" else 80),
                tls=tls if isinstance(tls, ssl.SSLContext) else None,
                server_hostname=self.credentials.tls_server_name,
                limit=MAX_CONNECTIONS,
                accept_gzip=self.compression,
            )
        return self._exchanges

    async def close(self) -> None:
        if self._exchanges is not None:
            self._exchanges.close()
            self._exchanges = None
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        deadline: float,
        max_body_bytes: int | None = None,
        accept: str = JSON,
    ) -> tuple[int, bytes]:
        """One exchange, all of it (the credentials' refresh, the wait for a connection, the
        answer) before ``deadline`` (the loop's clock): a write's deadline is where the
        leader's write window ends, and an exec plugin's refresh may take a minute."""
        loop = asyncio.get_running_loop()
        await self._refreshed(method, path, deadline)
        try:
            async with asyncio.timeout_at(deadline):
                headers = {"Accept": accept, **self.credentials.headers()}
                data = None
                if body is not None:
                    headers["Content-Type"] = content_type
                    data = encode_json(body)
                params = {key: str(value) for key, value in (query or {}).items()}
                if self.credentials.proxy is not None:
                    left = max(deadline - loop.time(), 0.001)
                    return await self._send_through_proxy(method, path, params, data, headers, left, max_body_bytes)
                request = self._request(method, path, params, data, headers)
                return await self._pool().exchange(
                    method,
                    request,
                    f"{method} {path}",
                    max_body_bytes,
                    reserved=path.startswith(LEASES_PREFIX),
                    not_after=deadline,
                )
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as error:
            raise self._unreachable(method, error) from None
        except MalformedAnswerError as error:
            self._failed(method, 0)
            raise KubeError(f"{method} {path}: the Kubernetes API at {self.server} answered: {error}") from None

    async def _refreshed(self, method: str, path: str, deadline: float, *, force: bool = False) -> None:
        """The credentials refreshed if they are due (``force``: whether or not), before ``deadline``."""
        if not self.credentials.needs_refresh(force):
            return  # the common case, every request: no timer to arm and cancel
        try:
            async with asyncio.timeout_at(deadline):
                await self.credentials.refresh_async(force=force)
        except TimeoutError:
            self._failed(method, 0)
            raise KubeError(
                f"{method} {path}: the credentials were not refreshed before the request's deadline"
            ) from None

    def _request(
        self, method: str, path: str, params: Mapping[str, str], data: bytes | None, headers: Mapping[str, str]
    ) -> bytes:
        """A request's bytes as they go on the wire. Paths come from kube.paths, every segment
        already percent-encoded; the query is encoded here."""
        target = self._target_prefix + path + (f"?{urlencode(params)}" if params else "")
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        if data is not None:
            lines += f"Content-Length: {len(data)}\r\n"
        # What the caller or a kubeconfig gave must not end the line it is on (header injection).
        if _LINE_BREAK.search(target) or " " in target or any(_LINE_BREAK.search(value) for value in headers.values()):
            raise KubeError(f"{method} {path}: a line break or space in the request's target or headers")
        head = f"{method} {target} HTTP/1.1\r\n{self._request_lines}{lines}\r\n"
        try:
            encoded = head.encode("ascii")
        except UnicodeEncodeError:
            raise KubeError(f"{method} {path}: the request's target or headers are not ASCII") from None
        return encoded + data if data is not None else encoded

    async def _send_through_proxy(
        self,
        method: str,
        path: str,
        params: Mapping[str, str],
        data: bytes | None,
        headers: Mapping[str, str],
        timeout: float,
        max_body_bytes: int | None,
    ) -> tuple[int, bytes]:
        try:
            async with self._connection().request(
                method,
                self._url(path),
                params=params,
                data=data,
                headers=headers,
                proxy=self.credentials.proxy,
                server_hostname=self.credentials.tls_server_name,
                timeout=aiohttp.ClientTimeout(total=timeout),
                skip_auto_headers=() if self.compression else ("Accept-Encoding",),
            ) as response:
                return response.status, await _read_body(response, f"{method} {path}", max_body_bytes)
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            raise self._unreachable(method, error) from None

    def _unreachable(self, method: str, error: BaseException) -> KubeError:
        """A request that got no answer, counted as one (HTTP status 0)."""
        self._failed(method, 0)
        return UnreachableError(f"cannot reach the Kubernetes API at {self.server}: {error or type(error).__name__}")

    async def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float = 60.0,
        max_body_bytes: int | None = None,
        accept: str = JSON,
    ) -> Any:
        """One request; ``max_body_bytes`` bounds the answer read (ResponseTooLargeError beyond)."""
        # One deadline for the request and its retry: ``timeout`` bounds the caller's wait whole.
        deadline = asyncio.get_running_loop().time() + timeout
        status, raw = await self._send(method, path, query, body, content_type, deadline, max_body_bytes, accept)
        if status == 401 and self.credentials.rotating:
            await self._refreshed(method, path, deadline, force=True)  # a rotated or expired token: once more
            status, raw = await self._send(method, path, query, body, content_type, deadline, max_body_bytes, accept)
        if status >= 400:
            self._failed(method, status)
            raise KubeError(f"{method} {path}: {status} {_api_message(status, raw)}", status)
        try:
            return decode_json(raw) if raw else None
        except ValueError:
            raise KubeError(f"{method} {path}: the answer is not JSON ({len(raw)} bytes)") from None

    async def get(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        max_body_bytes: int | None = None,
        accept: str = JSON,
    ) -> Any:
        return await self.request("GET", path, query, max_body_bytes=max_body_bytes, accept=accept)

    async def list_pages(self, path: str, page_size: int = DEFAULT_PAGE_SIZE) -> AsyncIterator[dict[str, Any]]:
        """LIST in pages so a large cluster never sits in memory as one response."""
        continue_token: str | None = None
        while True:
            query: dict[str, Any] = {"limit": page_size}
            if continue_token:
                query["continue"] = continue_token
            page = await self.get(path, query)
            if not isinstance(page, dict) or not isinstance(page.get("items") or [], list):
                raise KubeError(f"LIST {path}: the answer is not a list of objects")
            kind = str(page.get("kind", "List")).removesuffix("List")
            for item in page.get("items") or []:
                if isinstance(item, dict):
                    item.setdefault("kind", kind)
            yield page
            metadata = page.get("metadata")
            continue_token = metadata.get("continue") if isinstance(metadata, dict) else None
            if not continue_token:
                return

    async def list_items(self, path: str, page_size: int = DEFAULT_PAGE_SIZE) -> AsyncIterator[dict[str, Any]]:
        async for page in self.list_pages(path, page_size):
            for item in page.get("items") or []:
                yield item

    async def watch(
        self,
        path: str,
        resource_version: str,
        timeout_seconds: int = DEFAULT_WATCH_SECONDS,
        read_timeout: float = DEFAULT_WATCH_READ_TIMEOUT,
        on_open: Callable[[], None] | None = None,
        field_selector: str | None = None,
        send_initial_events: bool = False,
        unread: LineRule | None = None,
    ) -> AsyncGenerator[Any, None]:
        """Watch events, one parsed JSON line at a time, until the server ends the stream.

        A line is yielded as it decodes, whatever it holds: checking that it is an event of the
        watched kind is the caller's (``informers.read_event``). A line that does not decode
        raises WatchLineError. ``on_open`` is called once the API server has accepted the
        watch: contact, not progress (nothing has been received yet). ``send_initial_events``
        asks for a streaming list (the current objects as ADDED events, then a BOOKMARK
        annotated ``k8s.io/initial-events-end``; WatchList, Kubernetes 1.27+, on by default
        from 1.34): with ``resource_version`` "" a consistent read, as a LIST without a version is.
        A line ``unread`` says need not be decoded is yielded as its ``UnreadEvent``.
        """
        await self.credentials.refresh_async()
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if send_initial_events:
            params["sendInitialEvents"] = "true"
            params["resourceVersionMatch"] = "NotOlderThan"
            if not resource_version:
                del params["resourceVersion"]
        if field_selector:
            params["fieldSelector"] = field_selector
        try:
            async with self._connection().get(
                self._url(path),
                params=params,
                headers={"Accept": JSON, **self.credentials.headers()},
                proxy=self.credentials.proxy,
                server_hostname=self.credentials.tls_server_name,
                # No total limit: the server ends the stream; a silent stall is caught by this.
                timeout=aiohttp.ClientTimeout(total=None, connect=30, sock_connect=30, sock_read=read_timeout),
            ) as response:
                if response.status >= 400:
                    raw = await _error_body(response)
                    self._failed("WATCH", response.status)
                    raise KubeError(
                        f"WATCH {path}: {response.status} {_api_message(response.status, raw)}", response.status
                    )
                if on_open is not None:
                    on_open()
                received, widen = 0, send_initial_events
                async for line in watch_lines(response.content, path):
                    if widen and (received := received + len(line)) > BUSY_STREAM_BYTES:
                        widen = False
                        _widen_receive_buffer(response)
                    if line.isspace():
                        continue
                    if unread is not None and (stand_in := unread.unread(line)) is not None:
                        yield stand_in
                        continue
                    try:
                        event = decode_json(line)
                    except ValueError:
                        # A garbled stream: end it; the caller resumes from the last version.
                        raise WatchLineError(
                            f"watch {path}: malformed event ({len(line)} bytes)", "undecodable line"
                        ) from None
                    yield event
        except (aiohttp.ClientError, OSError, TimeoutError, asyncio.IncompleteReadError) as error:
            self._failed("WATCH", 0)
            raise KubeError(f"watch {path} broken: {error or type(error).__name__}") from None

    @contextlib.asynccontextmanager
    async def stream(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        *,
        max_bytes: int,
        chunk_bytes: int = 64 * 1024,
        timeout: float = 60.0,
        read_timeout: float = 30.0,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """A GET whose body is taken chunk by chunk (at most ``chunk_bytes`` each, ``max_bytes``
        in all, whatever the server sends), for bodies that are not JSON and may be large: a
        pod's log. Leaving the block early drops the connection instead of reading the rest.
        An answer of 400 or more is a KubeError carrying the API server's message."""
        await self.credentials.refresh_async()
        params = {key: str(value) for key, value in (query or {}).items()}
        try:
            async with self._connection().get(
                self.server + path,
                params=params,
                headers=self.credentials.headers(),
                proxy=self.credentials.proxy,
                server_hostname=self.credentials.tls_server_name,
                timeout=aiohttp.ClientTimeout(total=timeout, sock_connect=30, sock_read=read_timeout),
            ) as response:
                if response.status >= 400:
                    raw = await _error_body(response)
                    self._failed("GET", response.status)
                    raise KubeError(
                        f"GET {path}: {response.status} {_api_message(response.status, raw)}", response.status
                    )

                async def chunks() -> AsyncIterator[bytes]:
                    left = max_bytes
                    while left > 0:
                        chunk = await response.content.read(min(chunk_bytes, left))
                        if not chunk:
                            return
                        left -= len(chunk)
                        yield chunk

                try:
                    yield chunks()
                finally:
                    if not response.content.at_eof():
                        response.close()  # the rest is not wanted: drop it, do not read it
        except (aiohttp.ClientError, OSError, TimeoutError, asyncio.IncompleteReadError) as error:
            self._failed("GET", 0)
            raise KubeError(f"GET {path} broken: {error or type(error).__name__}") from None

    async def create(self, path: str, body: Mapping[str, Any]) -> Any:
        return await self.request("POST", path, body=body)

    async def merge_patch(self, path: str, patch: Mapping[str, Any]) -> Any:
        return await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        return await self.request("DELETE", path, body=body)


async def connect(kubeconfig: str | None = None, context: str | None = None) -> KubeClient:
    return KubeClient(await load_credentials_async(kubeconfig, context))
