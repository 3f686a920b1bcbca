"""How a watch stream's body becomes lines (``kube.client.watch_lines``), whatever its pieces."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

import pytest

from fabriccap.kube import client
from fabriccap.kube.client import watch_lines
from fabriccap.kube.errors import WatchLineError


class Pieces:
    """A body as aiohttp's StreamReader hands it over: ``readchunk`` gives one piece at a time,
    (b"", True) where an HTTP chunk's end is all it has (as after a piece that ended one), and
    (b"", False) at the end of the body."""

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self.answers = iter([answer for piece in pieces for answer in ((piece, True), (b"", True))])

    async def readchunk(self) -> tuple[bytes, bool]:
        return next(self.answers, (b"", False))


async def lines_of(pieces: Sequence[bytes]) -> list[bytes]:
    return [line async for line in watch_lines(Pieces(pieces), "/api/v1/pods")]


def cut(body: bytes, rng: random.Random, most: int) -> list[bytes]:
    pieces, at = [], 0
    while at < len(body):
        size = rng.randint(1, most)
        pieces.append(body[at : at + size])
        at += size
    return pieces


def a_body(rng: random.Random) -> bytes:
    events = []
    for index in range(200):
        if rng.random() < 0.05:
            events.append(b"\n")  # a blank line
            continue
        pod = {"type": "ADDED", "object": {"metadata": {"name": f"p-{index}"}, "data": "x" * rng.randint(0, 3000)}}
        events.append(json.dumps(pod).encode() + b"\n")
    return b"".join(events)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("most", [1, 7, 700, 9000])
async def test_the_lines_are_the_bodys_whatever_its_pieces(seed: int, most: int) -> None:
    rng = random.Random(seed)
    body = a_body(rng)
    lines = await lines_of(cut(body, rng, most))
    assert [line.removesuffix(b"\n") for line in lines] == body.split(b"\n")[:-1]
    assert all(line.endswith(b"\n") for line in lines)


async def test_a_piece_that_is_a_whole_line_is_not_copied() -> None:
    first, second = b'{"type":"ADDED"}\n', b'{"type":"MODIFIED"}\n'
    lines = await lines_of([first, second, first + second])
    assert lines[0] is first and lines[1] is second
    assert lines[2:] == [first, second]


async def test_a_stream_that_ends_inside_a_line_is_a_truncated_line() -> None:
    with pytest.raises(WatchLineError) as caught:
        await lines_of([b'{"type":"ADDED"}\n{"type": "ADD', b'ED", "obj'])
    assert caught.value.cause == "truncated line"
    assert "(22 bytes)" in str(caught.value)


async def test_whitespace_after_the_last_line_is_not_a_line() -> None:
    assert await lines_of([b'{"type":"ADDED"}\n', b"  ", b"\r"]) == [b'{"type":"ADDED"}\n']


async def test_a_line_longer_than_the_bound_ends_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "MAX_WATCH_LINE_BYTES", 100)
    assert await lines_of([b"x" * 60, b"y" * 40 + b"\n"]) == [b"x" * 60 + b"y" * 40 + b"\n"]
    with pytest.raises(WatchLineError) as caught:
        await lines_of([b"x" * 60, b"y" * 41, b"\n"])
    assert caught.value.cause == "oversized line"


ETCD_MAX_OBJECT_BYTES = 1536 * 1024  # etcd's default --max-request-bytes
# The JSON of such an object at its largest: every byte a '<', which Go's encoder writes escaped.
LARGEST_REAL_LINE_BYTES = ETCD_MAX_OBJECT_BYTES * len("\\u003c")


async def test_the_bound_reads_the_largest_line_an_object_can_make_and_refuses_one_no_object_can() -> None:
    """64 MiB admitted a line no API server can send, and a hostile one held twice that joined."""
    piece = 64 * 1024
    real = LARGEST_REAL_LINE_BYTES + piece
    lines = await lines_of([b"x" * piece] * (real // piece) + [b"\n"])
    assert [len(line) for line in lines] == [real // piece * piece + 1]
    too_long = 2 * LARGEST_REAL_LINE_BYTES
    with pytest.raises(WatchLineError) as caught:
        await lines_of([b"x" * piece] * (too_long // piece) + [b"\n"])
    assert caught.value.cause == "oversized line"
