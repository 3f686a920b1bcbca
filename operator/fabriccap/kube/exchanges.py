"""Requests and their answers over pooled HTTP/1.1 connections: the client's short exchanges.

Why not aiohttp for these: the 100,000-node start makes about 22,500 of them (12,500 owner
reads, 5,000 creates, 5,000 statuses) on one core, and aiohttp's request machinery cost about
0.1 ms of CPU each beyond the exchange itself: a 14 KB Node read and decoded over TLS took 184-216
us through aiohttp and takes 99-105 us through this path (docs/performance.md, "Stop 58: short
exchanges without aiohttp"). Watches, streaming lists and log streams stay on aiohttp, and so
does every request through a proxy.

What it reads is what a Kubernetes API server writes: a status line, headers, and a body whose
length is given (Content-Length) or chunked, gzip if asked for, within a bound (the caller's,
else DEFAULT_MAX_BODY_BYTES). Anything else is a MalformedAnswerError, and its connection is
closed, never reused: a body ended only by the connection's close among them (see _answer).

HTTP/1.1 pairs an answer with its request by order alone, so a connection goes back to the pool
only when nothing is left in it after its answer, and is taken from the pool only when nothing
came on it while it was idle: a byte too many would answer the next request, and every one after.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
import zlib
from dataclasses import dataclass, field

from fabriccap.kube.errors import ResponseTooLargeError

# An answer's status line and headers together; more is not an API server's answer. It is also
# the stream reader's bound for any one line, a chunk's size line included, and the bound of a
# chunked body's trailers together (an API server sends none).
MAX_HEAD_BYTES = 64 * 1024
LINE_TOO_LONG = f"its status line and headers, or a chunk's size line, are longer than {MAX_HEAD_BYTES} bytes"
# An answer's body, decompressed, when its caller sets no bound of its own. The largest an API
# server gives on this path is a LIST page: 250 Nodes (~3-5 MB, kube.paths.DEFAULT_PAGE_SIZE)
# or 500 pods; even 500 Nodes that list many images are 10-20 MB, and one object's JSON is at
# most ~9 MiB (1.5 MiB in etcd, each <, > and & escaped in six bytes). 64 MiB is three times
# the largest page: a real page refused would fail its kind's every listing, so the margin is
# wide. A hostile answer takes about twice this for a moment (read, then joined or inflated).
# A caller that reads more (a benchmark's unpaged LIST of a whole collection) passes its own.
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
# Interim (1xx) answers before the final one: an API server sends none unasked; a front end a
# 103 Early Hints or two. Go's net/http client takes 5 (max1xxResponses), and so does this.
MAX_INTERIM_ANSWERS = 5
# A connection idle this long is closed rather than reused: a server may close an idle
# connection just as a request goes out on it (aiohttp's keepalive_timeout, the same 15 s).
IDLE_SECONDS = 15.0
# Sent again on a fresh connection when a reused one was closed before any byte of the answer
# came: the methods that change nothing, as Go's net/http replays (client-go's transport;
# Request.isReplayable). Not PUT or DELETE, though RFC 9110 (9.2.2) calls them idempotent: the
# request may have arrived and been applied, and against a Kubernetes API server the same PUT
# again (with the resourceVersion it read) answers 409 and the same DELETE 404, for writes that
# succeeded; the leader's renewal is such a PUT. Every write's caller retries it as it sees fit.
REPLAYABLE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Slots beside the ``limit`` all others share, for the requests a caller marks ``reserved``
# (KubeClient: those on Leases, the leader's election): queued behind the others (the write
# lanes, the lookups, workload Events, and the held condition Events a round sends at once, one
# task per object: thousands at 5,000 pools), a renewal could outlast the renew deadline (10 s)
# unsent, and the leader step down while the API server answers. The caller's timeout still
# counts the wait for a slot: a write's ends where the leader's write window does
# (controller/leader.py), and no write may go out after it. Two: the elector's step and its
# Lease watch's read may be in flight together.
RESERVED_SLOTS = 2
# Answers without a body whatever their headers say (RFC 9112, 6.3).
BODILESS_STATUSES = frozenset({204, 304})
_CONTROL = re.compile(rb"[\r\n\x00]")


class MalformedAnswerError(Exception):
    """What came back is not an HTTP/1.1 answer this reader accepts."""


class _UnansweredError(ConnectionResetError):
    """A connection closed before any byte of the answer: the request may not have arrived."""


def _holds_nothing(reader: asyncio.StreamReader) -> bool:
    """Whether nothing received on the connection is still unread. asyncio keeps what came in
    ``_buffer`` (private, the same since Python 3.4, and no public way to ask); a reader without
    one is taken to hold something: its connection is not reused (slower, never wrong)."""
    buffer = getattr(reader, "_buffer", None)
    return isinstance(buffer, bytearray) and not buffer


@dataclass(slots=True)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    loop: asyncio.AbstractEventLoop
    idle_since: float = 0.0

    def reusable(self, now: float) -> bool:
        """Open, not idle too long, and nothing came on it while it was idle: an answer nobody
        asked for (a front end's 408 as it closes, or worse) would be taken for the next one's
        (Go's net/http closes such a connection too: "Unsolicited response received on idle
        HTTP channel")."""
        return (
            not self.reader.at_eof()
            and not self.writer.is_closing()
            and now - self.idle_since < IDLE_SECONDS
            and _holds_nothing(self.reader)
        )

    def close(self) -> None:
        if self.loop.is_closed():  # a client closed after its loop: the loop's close ended it
            return
        self.writer.transport.abort()  # nothing left to say on it: no TLS close_notify to wait for


@dataclass(slots=True)
class _Head:
    status: int
    length: int | None  # Content-Length; None when chunked, or when there is none
    chunked: bool
    keep_alive: bool
    gzipped: bool = False


@dataclass
class ConnectionPool:
    """At most ``limit`` exchanges at once with one server, and RESERVED_SLOTS more for those a
    caller reserves them for, on connections kept between them."""

    host: str
    port: int
    tls: ssl.SSLContext | None
    server_hostname: str | None = None
    limit: int = 32
    # Whether the requests ask for gzip (Accept-Encoding is the caller's to send): a gzip body
    # is decompressed, within the same bound; asked or not, any other encoding is refused.
    accept_gzip: bool = False
    _idle: list[_Connection] = field(default_factory=list, init=False)
    _slots: asyncio.Semaphore = field(init=False)
    _reserved_slots: asyncio.Semaphore = field(init=False)
    _closed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.limit)
        self._reserved_slots = asyncio.Semaphore(RESERVED_SLOTS)

    async def exchange(
        self,
        method: str,
        request: bytes,
        what: str,
        max_body_bytes: int | None,
        *,
        reserved: bool = False,
        not_after: float | None = None,
    ) -> tuple[int, bytes]:
        """Sends ``request`` (its whole bytes) and reads the answer: (status, body). Raises
        OSError (a ConnectionResetError when the connection closed before any answer, after one
        more try on a new connection if the method is replayable and the closed one was reused),
        TimeoutError (under the caller's timeout), asyncio.IncompleteReadError or
        MalformedAnswerError when there is no answer to give, ResponseTooLargeError past
        ``max_body_bytes`` (None: DEFAULT_MAX_BODY_BYTES). Nothing is sent at or after
        ``not_after`` (the loop's clock): a task resumed after a long stall of the loop runs
        before the timer that would cancel it, and a write would go out past its deadline."""
        limit = DEFAULT_MAX_BODY_BYTES if max_body_bytes is None else max_body_bytes
        async with self._reserved_slots if reserved else self._slots:
            connection, reused = await self._take()
            try:
                try:
                    _in_time(not_after, what)
                    answer = await _send(connection, method, request, what, limit, self.accept_gzip)
                except _UnansweredError:
                    if not reused or method not in REPLAYABLE_METHODS:
                        raise
                    connection.close()
                    connection = await self._open()
                    _in_time(not_after, what)
                    answer = await _send(connection, method, request, what, limit, self.accept_gzip)
            except BaseException:
                connection.close()
                raise
            status, body, keep_alive = answer
            # Bytes after the answer (a body longer than its Content-Length, a 204 with one)
            # belong to no request: the connection goes, not to the next request.
            if keep_alive and not self._closed and _holds_nothing(connection.reader):
                connection.idle_since = time.monotonic()
                self._idle.append(connection)
            else:
                connection.close()
            return status, body

    async def _take(self) -> tuple[_Connection, bool]:
        """The most recently used idle connection that can still be used, else a new one."""
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if connection.reusable(now):
                return connection, True
            connection.close()
        return await self._open(), False

    async def _open(self) -> _Connection:
        reader, writer = await asyncio.open_connection(
            self.host,
            self.port,
            ssl=self.tls,
            server_hostname=(self.server_hostname or self.host) if self.tls is not None else None,
            limit=MAX_HEAD_BYTES,
        )
        return _Connection(reader, writer, asyncio.get_running_loop())

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()


def _in_time(not_after: float | None, what: str) -> None:
    if not_after is not None and asyncio.get_running_loop().time() >= not_after:
        raise TimeoutError(f"{what}: its deadline passed before it was sent")


async def _send(
    connection: _Connection, method: str, request: bytes, what: str, limit: int, accept_gzip: bool
) -> tuple[int, bytes, bool]:
    """One exchange on ``connection``: (status, body, whether the connection may be reused)."""
    try:
        connection.writer.write(request)
        await connection.writer.drain()
        head_bytes = await connection.reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if error.partial:
            raise
        raise _UnansweredError("the server closed the connection before answering") from error
    except (ConnectionResetError, BrokenPipeError) as error:
        if not _holds_nothing(connection.reader):
            raise  # part of an answer came: the request arrived
        raise _UnansweredError(f"the server closed the connection before answering ({error})") from error
    except asyncio.LimitOverrunError:
        raise MalformedAnswerError(LINE_TOO_LONG) from None
    try:
        status, body, keep_alive, gzipped = await _answer(
            connection.reader, parse_head(head_bytes), method, what, limit
        )
    except asyncio.LimitOverrunError:
        raise MalformedAnswerError(LINE_TOO_LONG) from None
    if gzipped:
        if not accept_gzip:
            raise MalformedAnswerError("a gzip answer, not asked for")
        body = _gunzip(body, what, limit)
    return status, body, keep_alive


async def _answer(
    reader: asyncio.StreamReader, head: _Head, method: str, what: str, limit: int
) -> tuple[int, bytes, bool, bool]:
    """(status, body as sent, whether the connection may be reused, whether the body is gzip)."""
    interim = 0
    while 100 <= head.status < 200:  # an interim answer (103 Early Hints): the final one follows
        if head.status == 101:  # the connection would now speak something else: nobody asked
            raise MalformedAnswerError("101 Switching Protocols, not asked for")
        interim += 1
        if interim > MAX_INTERIM_ANSWERS:  # else a server could keep the reader busy till the timeout
            raise MalformedAnswerError(f"more than {MAX_INTERIM_ANSWERS} interim (1xx) answers")
        head = parse_head(await reader.readuntil(b"\r\n\r\n"))
    if method == "HEAD" or head.status in BODILESS_STATUSES:
        return head.status, b"", head.keep_alive, False
    if head.chunked:
        return head.status, await _read_chunked(reader, what, limit), head.keep_alive, head.gzipped
    if head.length is None:
        # A body ended by the connection's close (RFC 9112, 6.3) cannot be told from one cut
        # short: a TLS connection cut without close_notify and a server killed mid-answer (its
        # kernel closes the socket cleanly) end it just as the last byte does, and asyncio says
        # the same of both. An API server frames every HTTP/1.1 answer (Go's net/http: a length
        # or chunked), and so does every server the tests and tools put in front of this client
        # (aiohttp's chunks what has no length, the log stub chunks all it passes on).
        raise MalformedAnswerError("neither a Content-Length nor chunked: where its body ends could not be told")
    if head.length > limit:
        raise ResponseTooLargeError.past(what, limit, length=head.length)
    return head.status, await reader.readexactly(head.length), head.keep_alive, head.gzipped


def _gunzip(body: bytes, what: str, limit: int) -> bytes:
    """A gzip body decompressed; past ``limit`` bytes of it, ResponseTooLargeError (a small
    answer can decompress to a great deal: 48 KB of gzip to 50 MB). Never more than one byte
    past the bound is made: zlib stops there."""
    inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
    try:
        plain = inflater.decompress(body, limit + 1)
    except zlib.error as error:
        raise MalformedAnswerError(f"its gzip body is not gzip ({error})") from None
    if len(plain) > limit:
        raise ResponseTooLargeError.past(what, limit, decompressed=True)
    if not inflater.eof:
        raise MalformedAnswerError("its gzip body ends early")
    if inflater.unused_data:  # a second gzip member, or anything: not what an API server sends
        raise MalformedAnswerError("its gzip body goes on after its end")
    return plain


def parse_head(raw: bytes) -> _Head:
    """An answer's status line and headers (ending in the blank line), as far as the body's
    framing and the connection's reuse need them."""
    lines = raw[:-4].split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code = rest[:3]
    if (
        version not in (b"HTTP/1.1", b"HTTP/1.0")
        or len(code) != 3
        or not code.isdigit()
        or rest[3:4] not in (b"", b" ")
        or not b"100" <= code <= b"599"
    ):
        raise MalformedAnswerError(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
    lengths: set[bytes] = set()
    gzipped = False
    codings: list[bytes] | None = None
    connection_options: list[bytes] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        # CR, LF or NUL in a field is refused (RFC 9110, 5.5): a bare LF ends a line for some
        # readers, so another reader of the same bytes could see another header there.
        if not colon or not name or name != name.strip() or _CONTROL.search(line):
            raise MalformedAnswerError(f"not a header line: {line[:80]!r}")
        name = name.lower()
        if name == b"content-length":
            lengths.add(value.strip())
        elif name == b"transfer-encoding":
            codings = (codings or []) + [coding.strip().lower() for coding in value.split(b",")]
        elif name == b"content-encoding" and (encoding := value.strip().lower()) not in (b"", b"identity"):
            if encoding != b"gzip" or gzipped:  # gzip once: a second would be left undone
                raise MalformedAnswerError(f"an answer in an encoding not asked for: {value.strip()[:40]!r}")
            gzipped = True
        elif name == b"connection":
            connection_options.extend(option.strip().lower() for option in value.split(b","))
    keep_alive = b"close" not in connection_options and (version == b"HTTP/1.1" or b"keep-alive" in connection_options)
    if codings is not None:
        # An API server chunks and codes nothing else in transfer (gzip is a Content-Encoding):
        # anything else would come back still coded. Chunked frames the body whatever a
        # Content-Length says, but such an answer's connection is not reused (RFC 9112, 6.3:
        # it may be a response split), nor an HTTP/1.0 answer's that has one (6.1).
        if codings != [b"chunked"]:
            raise MalformedAnswerError(f"a Transfer-Encoding other than chunked: {b', '.join(codings)[:40]!r}")
        reused = keep_alive and not lengths and version == b"HTTP/1.1"
        return _Head(int(code), None, True, reused, gzipped)
    if len(lengths) > 1:
        raise MalformedAnswerError("Content-Length given more than once, with different values")
    if lengths:
        (length,) = lengths
        if not length.isdigit() or len(length) > 18:
            raise MalformedAnswerError(f"not a Content-Length: {length[:40]!r}")
        return _Head(int(code), int(length), False, keep_alive, gzipped)
    return _Head(int(code), None, False, keep_alive, gzipped)  # no framing: refused, unless it has no body


async def _read_chunked(reader: asyncio.StreamReader, what: str, limit: int) -> bytes:
    """A chunked body, held to ``limit`` with its framing: each chunk's size line (extensions
    and all) and its CRLF count too, or 1-byte chunks with 64 KiB of extension each would keep
    the reader busy until the timeout, within any bound on the data alone."""
    chunks: list[bytes] = []
    size = 0
    while True:
        raw_size_line = await reader.readuntil(b"\r\n")
        size_line = raw_size_line[:-2].partition(b";")[0].strip(b" \t")
        if not size_line or len(size_line) > 15 or size_line.strip(b"0123456789abcdefABCDEF"):
            raise MalformedAnswerError(f"not a chunk size: {size_line[:40]!r}")
        chunk_size = int(size_line, 16)
        if chunk_size == 0:
            trailers = 0  # not used, but read to the end: what follows is the next answer
            while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
                trailers += len(line)
                if trailers > MAX_HEAD_BYTES:
                    raise MalformedAnswerError(f"its trailers are longer than {MAX_HEAD_BYTES} bytes")
            return b"".join(chunks)
        size += len(raw_size_line) + chunk_size + 2
        if size > limit:
            raise ResponseTooLargeError.past(what, limit)
        chunks.append(await reader.readexactly(chunk_size))
        if await reader.readexactly(2) != b"\r\n":
            raise MalformedAnswerError("a chunk does not end where its size says")
