"""kube.exchanges against a real socket server on 127.0.0.1 that answers with scripted bytes:
the framings an API server uses, connection reuse and its limits, and answers that are not HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import itertools
import json
import socket
import struct
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from types import EllipsisType

import pytest

from fabriccap.kube import credentials as kube
from fabriccap.kube.client import MAX_API_MESSAGE_CHARS, USER_AGENT, KubeClient
from fabriccap.kube.errors import KubeError, ResponseTooLargeError
from fabriccap.kube.exchanges import (
    IDLE_SECONDS,
    MAX_HEAD_BYTES,
    MAX_INTERIM_ANSWERS,
    ConnectionPool,
    MalformedAnswerError,
)

OK_JSON = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"a": "bc"}'
GET = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n"
POST = b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}"
# The longest a test waits for what should come at once: what never comes fails it, not the run.
WAIT_SECONDS = 5.0


class Closing(bytes):
    """An answer after which the server closes the connection."""


# What the server does with a request: the bytes to answer (then the connection's close, if
# Closing), None to close the connection unanswered, or ... to never answer.
Answer = bytes | EllipsisType | None


@dataclass
class Scripted:
    """A server that answers each request with the next of ``answers``, and records what came."""

    answers: list[Answer]
    requests: list[tuple[int, bytes]] = field(default_factory=list)  # (connection number, head)
    connections: int = 0
    open_now: int = 0
    most_open: int = 0
    port: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                self.requests.append((number, head + await reader.readexactly(length)))
                answer = self.answers.pop(0)
                if answer is None:
                    return
                if answer is ...:
                    await asyncio.sleep(3600)
                assert isinstance(answer, bytes)
                writer.write(answer)
                await writer.drain()
                if isinstance(answer, Closing):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.open_now -= 1
            writer.close()


async def _serving(script: Scripted) -> asyncio.Server:
    server = await asyncio.start_server(script.serve, "127.0.0.1", 0)
    script.port = server.sockets[0].getsockname()[1]
    return server


Serve = Callable[[list[Answer]], Awaitable[Scripted]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[asyncio.Server] = []

    async def start(answers: list[Answer]) -> Scripted:
        script = Scripted(list(answers))
        servers.append(await _serving(script))
        return script

    yield start
    for server in servers:
        server.close()


def _pool(script: Scripted, limit: int = 32) -> ConnectionPool:
    return ConnectionPool(host="127.0.0.1", port=script.port, tls=None, limit=limit)


async def test_a_content_length_answer_is_read_and_its_connection_kept_for_the_next(serve: Serve) -> None:
    script = await serve([OK_JSON, OK_JSON])
    pool = _pool(script)
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert [number for number, _ in script.requests] == [1, 1]
    pool.close()


async def test_a_chunked_answer_with_extensions_and_trailers_is_joined(serve: Serve) -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4;name=value\r\n{"a"\r\n7\r\n: "bc"}\r\n0\r\nX-Trailer: 1\r\n\r\n'
    )
    script = await serve([chunked, OK_JSON])
    pool = _pool(script)
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert [number for number, _ in script.requests] == [1, 1]  # read to its very end: reusable
    pool.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}",
        # Chunked and a Content-Length (RFC 9112, 6.3: perhaps a response split); chunked in an
        # HTTP/1.0 answer (6.1: faulty framing). Each is read as chunked, its connection dropped.
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    ],
    ids=["connection-close", "http-1.0", "chunked-and-length", "chunked-in-http-1.0"],
)
async def test_an_answer_that_ends_its_connection_is_not_reused(serve: Serve, answer: bytes) -> None:
    script = await serve([answer, OK_JSON])
    pool = _pool(script)
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b"{}")
    await pool.exchange("GET", GET, "GET /x", None)
    assert [number for number, _ in script.requests] == [1, 2]
    pool.close()


@pytest.mark.parametrize(
    "answer",
    [
        # Cut: a server killed mid-answer, or a TLS connection cut without close_notify, ends
        # the body just as its last byte would. It was taken whole: (200, b'{"items": [{"n": 1}').
        b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{"items": [{"n": 1}',
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"x" * 200_000,
        b"HTTP/1.0 200 OK\r\n\r\n{}",
    ],
    ids=["cut", "whole", "http-1.0"],
)
async def test_an_answer_whose_body_only_the_close_would_end_is_refused(serve: Serve, answer: bytes) -> None:
    """Where such a body ends cannot be told from where it was cut; an API server always frames."""
    script = await serve([Closing(answer), OK_JSON])
    pool = _pool(script)
    with pytest.raises(MalformedAnswerError, match="neither a Content-Length nor chunked"):
        await pool.exchange("GET", GET, "GET /x", None)
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert [number for number, _ in script.requests] == [1, 2]
    pool.close()


async def test_interim_answers_are_skipped_and_bodiless_statuses_read_nothing(serve: Serve) -> None:
    early_hints = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" * MAX_INTERIM_ANSWERS
    script = await serve([early_hints + OK_JSON, b"HTTP/1.1 204 No Content\r\n\r\n", OK_JSON])
    pool = _pool(script)
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert await pool.exchange("DELETE", GET, "DELETE /x", None) == (204, b"")
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert {number for number, _ in script.requests} == {1}
    pool.close()


async def test_a_reused_connection_closed_unanswered_is_retried_fresh_only_for_a_method_that_changes_nothing(
    serve: Serve,
) -> None:
    script = await serve([OK_JSON, None, OK_JSON, OK_JSON, None, OK_JSON, None, OK_JSON, None])
    pool = _pool(script)
    await pool.exchange("GET", GET, "GET /x", None)
    # The server drops the kept connection on the next request: the GET goes again on a new one.
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert [number for number, _ in script.requests] == [1, 1, 2]
    # A write may have been received and applied: it is not sent twice, the caller hears of it.
    # A PUT sent again would answer 409 for the renewal that succeeded, a DELETE 404.
    for method in ("POST", "PUT", "DELETE"):
        await pool.exchange("GET", GET, "GET /x", None)
        with pytest.raises(ConnectionResetError, match="closed the connection before answering"):
            await pool.exchange(method, POST, f"{method} /x", None)
    assert [number for number, _ in script.requests] == [1, 1, 2, 2, 2, 3, 3, 4, 4]
    pool.close()


async def test_a_connection_reset_after_part_of_the_answer_is_not_taken_for_no_answer() -> None:
    """The request arrived (the server began its answer): not sent again, even a GET."""
    requests: list[bytes] = []

    async def answer_in_part_then_reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            requests.append(head)
            if len(requests) == 1:
                writer.write(OK_JSON)
                continue
            writer.write(b"HTTP/1.1 200 OK\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)  # the part of the head is read before the reset comes
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()  # a reset, not a close
            return

    server = await asyncio.start_server(answer_in_part_then_reset, "127.0.0.1", 0)
    pool = ConnectionPool(host="127.0.0.1", port=server.sockets[0].getsockname()[1], tls=None)
    try:
        await pool.exchange("GET", GET, "GET /x", None)
        with pytest.raises(ConnectionResetError) as raised:
            await pool.exchange("GET", GET, "GET /x", None)
        assert "before answering" not in str(raised.value)
        assert len(requests) == 2
    finally:
        pool.close()
        server.close()


@pytest.mark.parametrize(
    "extra",
    [
        b'HTTP/1.1 200 OK\r\nContent-Length: 18\r\n\r\n{"forged":"stale"}',
        b"x",
    ],
    ids=["an-answer", "a-byte"],
)
@pytest.mark.parametrize(
    "answer",
    [OK_JSON, b"HTTP/1.1 204 No Content\r\n\r\n", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 2\r\n\r\n"],
    ids=["body-longer-than-its-length", "204-with-a-body", "304-with-a-body"],
)
async def test_bytes_after_an_answer_answer_no_request(serve: Serve, answer: bytes, extra: bytes) -> None:
    """HTTP/1.1 pairs answers with requests by order: with bytes left after an answer, its
    connection is dropped, or they would answer the next request (and that one's, the next)."""
    script = await serve([answer + extra, b'HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{"n": 2}\n', OK_JSON])
    pool = _pool(script)
    first = await pool.exchange("GET", GET, "GET /x", None)
    assert first[0] in (200, 204, 304)
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"n": 2}\n')
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert [number for number, _ in script.requests] == [1, 2, 2]
    pool.close()


async def test_an_answer_nobody_asked_for_on_an_idle_connection_drops_it() -> None:
    """What comes on a connection while it is idle (a front end's 408 as it closes, or worse)
    is no request's answer: the next request goes on a new connection, and hears its own."""
    connections: list[int] = []

    async def answer_then_speak_unasked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections) + 1)
        number = connections[-1]
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while await reader.readuntil(b"\r\n\r\n"):
                body = b'{"connection": %d}' % number
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                if number == 1:
                    await asyncio.sleep(0.05)
                    writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}")
                    await writer.drain()

    server = await asyncio.start_server(answer_then_speak_unasked, "127.0.0.1", 0)
    pool = ConnectionPool(host="127.0.0.1", port=server.sockets[0].getsockname()[1], tls=None)
    try:
        assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"connection": 1}')
        await asyncio.sleep(0.3)  # the unasked answer comes while the connection is idle
        assert await pool.exchange("POST", POST, "POST /x", None) == (200, b'{"connection": 2}')
        assert connections == [1, 2]
    finally:
        pool.close()
        server.close()


async def test_a_retry_closed_unanswered_too_is_the_callers_error(serve: Serve) -> None:
    script = await serve([OK_JSON, None, None])
    pool = _pool(script)
    await pool.exchange("GET", GET, "GET /x", None)
    with pytest.raises(ConnectionResetError, match="closed the connection before answering"):
        await pool.exchange("GET", GET, "GET /x", None)
    assert [number for number, _ in script.requests] == [1, 1, 2]  # once more, not again and again


async def test_a_new_connection_closed_unanswered_is_an_error_not_a_retry(serve: Serve) -> None:
    script = await serve([None, OK_JSON])
    pool = _pool(script)
    with pytest.raises(ConnectionResetError, match="closed the connection before answering"):
        await pool.exchange("GET", GET, "GET /x", None)
    assert len(script.requests) == 1


async def test_an_idle_connection_past_its_time_is_not_reused(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    script = await serve([OK_JSON, OK_JSON])
    pool = _pool(script)
    clock = itertools.count(1000.0, IDLE_SECONDS)  # each reading IDLE_SECONDS after the last
    monkeypatch.setattr("fabriccap.kube.exchanges.time.monotonic", lambda: next(clock))
    await pool.exchange("GET", GET, "GET /x", None)
    await pool.exchange("GET", GET, "GET /x", None)
    assert [number for number, _ in script.requests] == [1, 2]
    pool.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n" + b"x" * 101,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n"
        + b"x" * 64
        + b"\r\n40\r\n"
        + b"x" * 64
        + b"\r\n0\r\n\r\n",
        # Five bytes of data, each in a chunk of its own with a kilobyte of extension: the
        # framing counts, or the reader is kept busy until the timeout within any bound.
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"1;e=" + b"x" * 1000 + b"\r\n{\r\n" for _ in range(5))
        + b"0\r\n\r\n",
    ],
    ids=["content-length", "chunked", "chunk-extensions"],
)
async def test_an_answer_past_the_bound_is_not_read_and_its_connection_not_kept(serve: Serve, answer: bytes) -> None:
    script = await serve([answer, OK_JSON])
    pool = _pool(script)
    with pytest.raises(ResponseTooLargeError, match=r"GET /x: the answer is .*100"):
        await pool.exchange("GET", GET, "GET /x", 100)
    assert await pool.exchange("GET", GET, "GET /x", 100) == (200, b'{"a": "bc"}')
    assert [number for number, _ in script.requests] == [1, 2]
    pool.close()


def _gzip_bomb(plain_bytes: int) -> bytes:
    """Zeros, ``plain_bytes`` of them once decompressed: about a thousandth of that on the wire."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    zeros = bytes(1024 * 1024)
    packed = [packer.compress(zeros) for _ in range(plain_bytes // len(zeros))]
    return b"".join(packed) + packer.flush()


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1000001\r\n\r\n", "the answer is 1000001 bytes"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"".join(b"10000\r\n" + b"x" * 0x10000 + b"\r\n" for _ in range(16))
            + b"0\r\n\r\n",
            "more than 1000000 bytes; not read further",
        ),
        (None, "more than 1000000 bytes decompressed"),
    ],
    ids=["content-length", "chunked", "gzip-bomb"],
)
async def test_without_a_bound_of_its_own_an_answer_is_held_to_the_default(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, answer: bytes | None, named: str
) -> None:
    """A caller that sets no bound gets DEFAULT_MAX_BODY_BYTES (here made 1 MB), and a gzip body
    is never inflated past it: 48 MB of zeros in 48 KB of gzip came whole before."""
    monkeypatch.setattr("fabriccap.kube.exchanges.DEFAULT_MAX_BODY_BYTES", 1_000_000)
    if answer is None:
        bomb = _gzip_bomb(48 * 1024 * 1024)
        answer = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (len(bomb), bomb)
    script = await serve([answer, OK_JSON])
    pool = ConnectionPool(host="127.0.0.1", port=script.port, tls=None, accept_gzip=True)
    tracemalloc.start()
    try:
        # Bounded: without a bound, the reader waited for all 1,000,001 bytes announced.
        async with asyncio.timeout(WAIT_SECONDS):
            with pytest.raises(ResponseTooLargeError, match=named):
                await pool.exchange("GET", GET, "GET /x", None)
        _, highest = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert highest < 4_000_000  # the bound, what came, and a little: not what it inflates to
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert [number for number, _ in script.requests] == [1, 2]
    pool.close()


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        (b"HTTP/2 200\r\n\r\n", "status line"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "status line"),
        (b"ICY 200 OK\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", "more than once"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n{}", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\n folded: value\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\n{}", "encoding not asked for"),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}", "gzip answer, not asked for"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", "chunk does not end"),
        (b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n", "longer than"),
        (b"HTTP/1.1 099 X\r\nContent-Length: 2\r\n\r\n{}", "status line"),
        (b"HTTP/1.1 999 X\r\nContent-Length: 2\r\n\r\n{}", "status line"),
        (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n" + OK_JSON, "Switching Protocols"),
        # A bare LF ends a line for some readers: this reader would not see the Content-Length.
        (b"HTTP/1.1 200 OK\r\nX: a\nContent-Length: 5\r\nContent-Length: 2\r\n\r\n{}", "header line"),
        (b"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 2\r\n\r\n{}", "header line"),
        # Transfer codings an API server does not use: the body would come back still coded.
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "other than chunked"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", "other than chunked"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\n{}", "other than chunked"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\x0b2\r\n{}\r\n0\r\n\r\n", "chunk size"),
        # What a server could send on and on, each part within the bounds, until the timeout.
        (b"HTTP/1.1 103 Early Hints\r\n\r\n" * (MAX_INTERIM_ANSWERS + 1) + OK_JSON, "interim"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n"
            + (b"X-Trailer: " + b"t" * 1000 + b"\r\n") * 66
            + b"\r\n",
            "trailers are longer than",
        ),
    ],
)
async def test_what_is_not_an_api_servers_answer_is_named_and_its_connection_dropped(
    serve: Serve,
    answer: bytes,
    named: str,
) -> None:
    script = await serve([answer, OK_JSON])
    pool = _pool(script)
    with pytest.raises(MalformedAnswerError, match=named):
        await pool.exchange("GET", GET, "GET /x", None)
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert [number for number, _ in script.requests] == [1, 2]
    pool.close()


def _gzip_answer(body: bytes, chunked: bool = False) -> bytes:
    packed = gzip.compress(body, compresslevel=1)
    if chunked:
        framed = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (packed[:10], packed[10:])) + b"0\r\n\r\n"
        return b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + framed
    return b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (len(packed), packed)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_gzip_answer_asked_for_is_decompressed_within_the_bound(serve: Serve, chunked: bool) -> None:
    items = b'{"items": [' + b",".join(b'{"n": %d}' % index for index in range(20_000)) + b"]}"
    script = await serve([_gzip_answer(items, chunked), _gzip_answer(items, chunked), OK_JSON])
    pool = ConnectionPool(host="127.0.0.1", port=script.port, tls=None, accept_gzip=True)
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, items)
    # 20 KB of gzip that would be 250 KB: the bound is on what it decompresses to.
    with pytest.raises(ResponseTooLargeError, match="more than 100000 bytes decompressed"):
        await pool.exchange("GET", GET, "GET /x", 100_000)
    assert await pool.exchange("GET", GET, "GET /x", 100_000) == (200, b'{"a": "bc"}')
    pool.close()


@pytest.mark.parametrize(
    ("packed", "named", "coded"),
    [
        (b"not gzip at all", "not gzip", b"gzip"),
        (gzip.compress(b'{"a": 1}' * 1000)[:-20], "ends early", b"gzip"),
        # Two members, or anything after the one: only the first would be read.
        (gzip.compress(b'{"a": ') + gzip.compress(b"1}"), "goes on after its end", b"gzip"),
        (gzip.compress(b"{}") + b"{}", "goes on after its end", b"gzip"),
        # Coded twice: once undone, the body would still be gzip.
        (gzip.compress(gzip.compress(b"{}")), "encoding not asked for", b"gzip\r\nContent-Encoding: gzip"),
    ],
    ids=["garbage", "truncated", "two-members", "bytes-after", "coded-twice"],
)
async def test_a_gzip_body_that_does_not_decompress_is_named(
    serve: Serve, packed: bytes, named: str, coded: bytes
) -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        coded,
        len(packed),
        packed,
    )
    script = await serve([answer])
    pool = ConnectionPool(host="127.0.0.1", port=script.port, tls=None, accept_gzip=True)
    with pytest.raises(MalformedAnswerError, match=named):
        await pool.exchange("GET", GET, "GET /x", None)
    pool.close()


async def test_a_request_cut_by_its_timeout_leaves_its_connection_closed(serve: Serve) -> None:
    script = await serve([..., OK_JSON])
    pool = _pool(script)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await pool.exchange("GET", GET, "GET /x", None)
    assert await pool.exchange("GET", GET, "GET /x", None) == (200, b'{"a": "bc"}')
    assert [number for number, _ in script.requests] == [1, 2]  # an answer late on 1 is never read
    pool.close()


async def test_a_reserved_request_is_not_queued_behind_the_others(serve: Serve) -> None:
    """The leader's renewal has slots of its own: behind a full pool (here 2 requests hang, a
    third waits) it goes at once, where it waited out its renew deadline unsent."""
    lease_put = (
        b"PUT /apis/coordination.k8s.io/v1/namespaces/ops/leases/l HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}"
    )
    script = await serve([..., ..., OK_JSON, OK_JSON])
    pool = _pool(script, limit=2)
    others = [asyncio.create_task(pool.exchange("PATCH", POST, "PATCH /x", None)) for _ in range(3)]
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            while len(script.requests) < 2:
                await asyncio.sleep(0.01)
            assert await pool.exchange("PUT", lease_put, "PUT lease", None, reserved=True) == (200, b'{"a": "bc"}')
        assert len(script.requests) == 3 and script.requests[2][1].startswith(b"PUT ")
        assert not any(task.done() for task in others)  # the third still waits for a slot
    finally:
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        pool.close()


async def test_the_wait_for_a_slot_counts_in_the_callers_timeout_and_nothing_goes_after_it(serve: Serve) -> None:
    """A write's timeout ends where the leader's write window does: one that waited for a slot
    until then is not sent late."""
    script = await serve([..., OK_JSON])
    pool = _pool(script, limit=1)
    holding = asyncio.create_task(pool.exchange("GET", GET, "GET /x", None))
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            while not script.requests:
                await asyncio.sleep(0.01)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await pool.exchange("PATCH", POST, "PATCH /x", None)
        holding.cancel()
        await asyncio.gather(holding, return_exceptions=True)
        await asyncio.sleep(0.1)
        assert len(script.requests) == 1
    finally:
        holding.cancel()
        pool.close()


async def test_at_most_limit_connections_are_open_at_once(serve: Serve) -> None:
    script = await serve([OK_JSON] * 40)
    pool = _pool(script, limit=3)
    await asyncio.gather(*(pool.exchange("GET", GET, "GET /x", None) for _ in range(40)))
    assert script.most_open == 3 and script.connections == 3
    pool.close()


# --- through KubeClient --------------------------------------------------------------------


async def test_the_client_writes_its_target_query_and_headers_as_a_server_expects(serve: Serve) -> None:
    script = await serve([OK_JSON, OK_JSON])
    credentials = kube.Credentials(server=f"http://127.0.0.1:{script.port}/front/", token="t0ken")
    async with KubeClient(credentials) as client:
        assert await client.get("/api/v1/pods", {"labelSelector": "a in (b,c)", "limit": 5}) == {"a": "bc"}
        await client.merge_patch("/api/v1/nodes/n%2F1", {"x": 1})
    get, patch = (head for _, head in script.requests)
    assert get.startswith(b"GET /front/api/v1/pods?labelSelector=a+in+%28b%2Cc%29&limit=5 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{script.port}\r\nUser-Agent: {USER_AGENT}\r\n".encode() in get
    assert b"Authorization: Bearer t0ken\r\n" in get and b"Accept: application/json\r\n" in get
    assert b"Accept-Encoding: gzip\r\n" in get  # as client-go asks
    assert patch.startswith(b"PATCH /front/api/v1/nodes/n%2F1 HTTP/1.1\r\n")
    assert b"Content-Type: application/merge-patch+json\r\nContent-Length: 7\r\n\r\n" in patch
    assert patch.endswith(b'\r\n\r\n{"x":1}')


async def test_the_host_header_carries_no_user_information_from_the_server_url(serve: Serve) -> None:
    script = await serve([OK_JSON])
    credentials = kube.Credentials(server=f"http://someone:secret@127.0.0.1:{script.port}")
    async with KubeClient(credentials) as client:
        await client.get("/api")
    ((_, head),) = script.requests
    assert f"\r\nHost: 127.0.0.1:{script.port}\r\n".encode() in head
    assert b"secret" not in head


async def test_a_client_without_compression_does_not_ask_for_gzip_nor_take_it(serve: Serve) -> None:
    script = await serve([OK_JSON, _gzip_answer(b"{}")])
    async with KubeClient(kube.Credentials(server=f"http://127.0.0.1:{script.port}"), compression=False) as client:
        assert await client.get("/api") == {"a": "bc"}
        with pytest.raises(KubeError, match="gzip answer, not asked for"):
            await client.get("/api")
    assert all(b"Accept-Encoding" not in head for _, head in script.requests)


@pytest.mark.parametrize(
    ("token", "path"),
    [("t0ken\r\nX-Injected: 1", "/api/v1/pods"), ("t0ken", "/api/v1/pods HTTP/1.1\r\nX: y"), ("tökén", "/api")],
    ids=["token", "path", "not-ascii"],
)
async def test_what_would_end_a_line_of_the_request_is_refused_unsent(serve: Serve, token: str, path: str) -> None:
    script = await serve([OK_JSON])
    credentials = kube.Credentials(server=f"http://127.0.0.1:{script.port}", token=token)
    async with KubeClient(credentials) as client:
        with pytest.raises(KubeError, match=r"line break or space|not ASCII"):
            await client.get(path)
    assert script.requests == []


async def test_a_malformed_answer_is_a_kube_error_naming_the_request_and_counted(serve: Serve) -> None:
    script = await serve([b"SSH-2.0-OpenSSH_9.6\r\n\r\n"])
    failed: list[tuple[str, int]] = []
    credentials = kube.Credentials(server=f"http://127.0.0.1:{script.port}")
    async with KubeClient(credentials, on_error=lambda verb, status: failed.append((verb, status))) as client:
        with pytest.raises(
            KubeError, match=r"GET /api: the Kubernetes API at .* answered: not an HTTP/1.1 status line"
        ):
            await client.get("/api")
    assert failed == [("GET", 0)]


def _status_answer(code: int, message: str, padding: int = 0) -> bytes:
    body = json.dumps({"kind": "Status", "code": code, "message": message, "padding": "x" * padding}).encode()
    return b"HTTP/1.1 %d Error\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        code,
        len(body),
        body,
    )


async def test_an_api_servers_error_message_is_one_bounded_line(serve: Serve) -> None:
    """A Status's message may quote what the request carried: shown as one line, bounded."""
    script = await serve([_status_answer(422, "line one\nline two \x1b[31m" + "y" * 5_000)])
    async with KubeClient(kube.Credentials(server=f"http://127.0.0.1:{script.port}")) as client:
        with pytest.raises(KubeError) as raised:
            await client.get("/api")
    shown = str(raised.value)
    assert "line one line two" in shown
    assert "\n" not in shown and "\x1b" not in shown
    assert len(shown) < MAX_API_MESSAGE_CHARS + 200


async def test_a_watch_refused_with_a_large_body_reads_only_the_start_of_it(serve: Serve) -> None:
    """A watch's error answer is a Status, not a stream: its start is read, not all it claims
    to be (ten GB here, of which the server sends one MB before it closes)."""
    start = b'{"kind":"Status","code":500,"message":"refused","padding":"' + b"x" * 1_000_000
    answer = b"HTTP/1.1 500 Error\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n" + start
    script = await serve([Closing(answer)])
    async with KubeClient(kube.Credentials(server=f"http://127.0.0.1:{script.port}")) as client:
        with pytest.raises(KubeError, match=r"WATCH /api/v1/nodes: 500 ") as raised:
            async for _ in client.watch("/api/v1/nodes", "1"):
                pass
    assert raised.value.status == 500
    assert len(str(raised.value)) < 400  # its start, not JSON once cut, shown bounded


async def test_nothing_is_sent_after_its_deadline(serve: Serve) -> None:
    """A task resumed after a long stall of the loop (a CPU-bound round) runs before the timer
    that would cancel it: a write checked against its window went out after it."""
    script = await serve([OK_JSON])
    pool = _pool(script)
    past = asyncio.get_running_loop().time() - 0.001
    with pytest.raises(TimeoutError, match="deadline passed"):
        await pool.exchange("PATCH", POST, "PATCH /x", None, not_after=past)
    await asyncio.sleep(0.1)
    assert script.requests == []
    pool.close()
