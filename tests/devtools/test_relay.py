"""The API server relay of real nodes (fabriccap_devtools.controlplane.relay), on 127.0.0.1 only."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import pytest

from fabriccap_devtools.controlplane import relay
from fabriccap_devtools.controlplane.processes import free_ports


@pytest.mark.parametrize(
    ("text", "expected"),
    [("198.18.1.1:443", ("198.18.1.1", 443)), ("127.0.0.1:6443", ("127.0.0.1", 6443)), ("::1:80", ("::1", 80))],
)
def test_parse_address_splits_at_the_last_colon(text: str, expected: tuple[str, int]) -> None:
    assert relay.parse_address(text) == expected


@pytest.mark.parametrize("text", ["198.18.1.1", ":443", "host:", "host:http", "host:0", "host:65536"])
def test_parse_address_refuses_what_is_not_host_and_port(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        relay.parse_address(text)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Echoes everything, then says how much it got once the client half-closes."""
    total = 0
    while data := await reader.read(65536):
        total += len(data)
        writer.write(data)
        await writer.drain()
    writer.write(f"got {total}".encode())
    await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def _relayed(upstream_port: int) -> AsyncIterator[tuple[str, int]]:
    listen = ("127.0.0.1", free_ports(1)[0])
    task = asyncio.create_task(relay.relay(listen, ("127.0.0.1", upstream_port)))
    try:
        for _ in range(200):
            with contextlib.suppress(OSError):
                _, probe = await asyncio.open_connection(*listen)
                probe.close()
                break
            await asyncio.sleep(0.01)
        yield listen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_bytes_pass_both_ways_and_a_half_close_reaches_the_upstream() -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    async with server, _relayed(server.sockets[0].getsockname()[1]) as listen:
        reader, writer = await asyncio.open_connection(*listen)
        payload = bytes(range(256)) * 4096  # 1 MiB: more than one read on each side
        writer.write(payload)
        await writer.drain()
        writer.write_eof()
        # The echo answers its tally only after it saw EOF: the relay passed the half-close on
        # and kept the other direction open for the answer.
        received = await asyncio.wait_for(reader.read(), 10)
        writer.close()
    assert received == payload + f"got {len(payload)}".encode()


async def test_no_upstream_closes_the_client_connection() -> None:
    async with _relayed(free_ports(1)[0]) as listen:
        reader, writer = await asyncio.open_connection(*listen)
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()


def test_wait_listening_stops_early_when_the_relay_is_gone() -> None:
    assert relay.wait_listening(("127.0.0.1", free_ports(1)[0]), 30.0, lambda: False) is False


def test_wait_listening_sees_a_listener() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert relay.wait_listening(listener.getsockname(), 5.0)
