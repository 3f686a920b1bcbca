"""/metrics is no denial-of-service lever (issue 27 item 12, round 3 L24): however many scrapers
come, the exposition is rendered once per interval, off the event loop, for a bounded number of
them at a time; /healthz (its own server, on the same loop) answers while they wait."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import threading
from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest

from fabriccap.controller import metrics as metrics_module
from fabriccap.controller.metrics import OperatorMetrics, accepts_gzip, start_health_server, start_metrics_server
from fabriccap_devtools.controlplane.processes import free_ports
from support.bounded import hang_guard

SCRAPERS = 20
# Bounds on waits that only a defect makes long: the render of the code before the fix blocks
# the event loop, and these turn that into a failure instead of a hang.
RENDER_HOLD_SECONDS = 2.0
HANG_SECONDS = 30.0


class HeldRender:
    """A render that counts its calls and, while ``hold`` is set, waits (up to a bound) until
    the test lets it finish, so scrapes stay in flight for as long as the test looks."""

    def __init__(self, render: Callable[[], bytes]) -> None:
        self.render = render
        self.calls = 0
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> bytes:
        self.calls += 1
        self.started.set()
        self.release.wait(RENDER_HOLD_SECONDS)
        return self.render()


@contextlib.asynccontextmanager
async def healthz() -> AsyncIterator[str]:
    """The operator's /healthz server, on the test's event loop."""
    runner = await start_health_server(lambda: {"alive": True}, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/healthz"
    finally:
        await runner.cleanup()


async def _status_and_body(session: aiohttp.ClientSession, url: str) -> tuple[int, bytes]:
    async with session.get(url) as response:
        return response.status, await response.read()


async def test_concurrent_scrapes_share_one_render_while_healthz_answers() -> None:
    """Without the fix each scrape rendered on the event loop: 20 renders, one after another,
    and nothing else (no watch, no write, no /healthz) ran meanwhile."""
    metrics = OperatorMetrics()
    render = HeldRender(metrics.exposition_gzip)
    metrics.exposition_gzip = render  # type: ignore[method-assign]
    port = free_ports(1)[0]
    runner = await start_metrics_server(metrics, "127.0.0.1", port)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with hang_guard(HANG_SECONDS):
            async with healthz() as health_url, aiohttp.ClientSession() as session:
                scrapes = [asyncio.create_task(_status_and_body(session, url)) for _ in range(SCRAPERS)]
                assert await asyncio.to_thread(render.started.wait, HANG_SECONDS)
                # The render is held in its thread: the scrapes past the bound are answered at once...
                refused = []
                for finished in asyncio.as_completed(scrapes):
                    refused.append(await finished)
                    if len(refused) == SCRAPERS - metrics_module.MAX_CONCURRENT_SCRAPES:
                        break
                assert {status for status, _ in refused} == {503}
                # ... and /healthz answers while the others wait for the render.
                assert (await _status_and_body(session, health_url))[0] == 200
                assert not render.release.is_set()
                render.release.set()
                results = await asyncio.gather(*scrapes)
    finally:
        render.release.set()
        await runner.cleanup()
    served = [body for status, body in results if status == 200]
    assert len(served) == metrics_module.MAX_CONCURRENT_SCRAPES
    assert len(set(served)) == 1 and b"fabriccap_build_info" in served[0]
    assert render.calls == 1


async def test_a_scraper_that_does_not_read_is_cut_off_and_frees_its_slot() -> None:
    """A client that never reads its answer holds a copy of the exposition in the socket's
    buffer, and its slot: both go after the send timeout."""
    metrics = OperatorMetrics()
    big = b"# padding\n" * (2 * 1024 * 1024)  # 20 MB: more than any socket buffer holds
    held = gzip.compress(big)  # the stalled client asks for no gzip: it is sent the 20 MB
    metrics.exposition_gzip = lambda: held  # type: ignore[method-assign]
    port = free_ports(1)[0]
    runner = await start_metrics_server(metrics, "127.0.0.1", port, max_concurrent=1, send_timeout=0.5)
    url = f"http://127.0.0.1:{port}/metrics"
    stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        with hang_guard(HANG_SECONDS):
            await asyncio.to_thread(stalled.connect, ("127.0.0.1", port))
            await asyncio.to_thread(stalled.sendall, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            async with aiohttp.ClientSession() as session:
                statuses: list[int] = []
                while not statuses or statuses[-1] != 200:  # 503 while the stalled one holds the slot
                    statuses.append((await _status_and_body(session, url))[0])
                    await asyncio.sleep(0.1)
        assert set(statuses) <= {200, 503}
        # The stalled connection was closed by the server: reading it to its end terminates.
        stalled.settimeout(HANG_SECONDS)
        received = 0
        while chunk := await asyncio.to_thread(stalled.recv, 1024 * 1024):
            received += len(chunk)
        assert received < len(big)
    finally:
        stalled.close()
        await runner.cleanup()


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_exposition_is_rendered_at_most_once_per_interval() -> None:
    clock = FakeClock()
    renders: list[int] = []
    prepared: list[int] = []

    def render() -> bytes:
        renders.append(len(renders))
        return f"render {len(renders)}\n".encode()

    shared = metrics_module.SharedExposition(render, before_render=lambda: prepared.append(1), max_age=1.0, clock=clock)
    first = await asyncio.gather(*(shared.get() for _ in range(10)))
    assert set(first) == {b"render 1\n"}
    clock.now = 0.9
    assert await shared.get() == b"render 1\n"
    clock.now = 1.0
    assert await shared.get() == b"render 2\n"
    assert (len(renders), len(prepared)) == (2, 2)


async def test_a_render_is_let_go_once_no_scrape_may_be_served_it() -> None:
    renders: list[int] = []

    def render() -> bytes:
        renders.append(1)
        return b"big\n"

    shared = metrics_module.SharedExposition(render, max_age=0.05)
    assert await shared.get() == b"big\n"
    assert shared.held
    await asyncio.sleep(0.3)  # bounded: the window is 0.05 s
    assert not shared.held
    assert await shared.get() == b"big\n"
    assert len(renders) == 2


async def test_a_slow_render_is_reused_for_longer() -> None:
    """A render of 2 s (thousands of pools) is reused for 5 times that, from its start: under
    any flood of scrapes, rendering takes at most a fifth of the time."""
    clock = FakeClock()
    renders: list[float] = []

    def render() -> bytes:
        renders.append(clock.now)
        clock.now += 2.0
        return b"slow\n"

    shared = metrics_module.SharedExposition(render, max_age=1.0, clock=clock)
    await shared.get()
    clock.now = 9.9
    await shared.get()
    assert renders == [0.0]
    clock.now = 10.0
    await shared.get()
    assert renders == [0.0, 10.0]


async def test_a_held_render_is_not_served_once_the_leadership_it_says_has_changed() -> None:
    """A render is held for 5 times its duration (seconds at thousands of pools): one made
    inside the leader's write window served fabriccap_leader 1 for that long after the window
    closed, while another replica could already lead (hostile review 64b F4). The held render
    is served only while fabriccap_leader and fabriccap_publishing read as it did."""
    clock = FakeClock()
    metrics = OperatorMetrics()
    leads = [True]
    metrics.leader.set_function(lambda: 1.0 if leads[0] else 0.0)
    metrics.publishing.set_function(lambda: 1.0 if leads[0] else 0.0)

    def render() -> bytes:
        clock.now += 2.0  # a render of 2 s: held for 10 s
        return metrics.exposition()

    shared = metrics_module.SharedExposition(render, max_age=1.0, clock=clock, current=metrics.leadership)
    assert b"fabriccap_leader 1.0" in await shared.get()
    clock.now = 3.0
    assert b"fabriccap_leader 1.0" in await shared.get()
    assert shared.renders == 1, "held while nothing changed"
    leads[0] = False  # the write window closed
    served = await shared.get()
    assert b"fabriccap_leader 0.0" in served and b"fabriccap_publishing 0.0" in served
    assert shared.renders == 2


async def test_a_failed_render_fails_its_scrapes_and_the_next_one_renders_again() -> None:
    attempts: list[int] = []

    def render() -> bytes:
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("a collector failed")
        return b"ok\n"

    shared = metrics_module.SharedExposition(render, clock=FakeClock())
    with pytest.raises(ValueError, match="a collector failed"):
        await shared.get()
    assert await shared.get() == b"ok\n"


async def test_a_scraper_that_disconnects_does_not_cancel_the_render_others_wait_for() -> None:
    release = threading.Event()

    def render() -> bytes:
        release.wait(HANG_SECONDS)
        return b"ok\n"

    shared = metrics_module.SharedExposition(render, clock=FakeClock())
    leaving = asyncio.create_task(shared.get())
    staying = asyncio.create_task(shared.get())
    await asyncio.sleep(0)
    leaving.cancel()
    release.set()
    assert await staying == b"ok\n"


@pytest.mark.parametrize(
    ("header", "gzip_taken"),
    [
        ("gzip", True),
        ("gzip, deflate", True),  # Prometheus, aiohttp
        ("GZIP;q=0.5", True),
        ("x-gzip", True),
        ("*", True),
        ("", False),  # urllib, curl without --compressed
        ("identity", False),
        ("deflate, br", False),
        ("gzip;q=0", False),
        ("gzip;q=0, *", False),  # named gzip refused: * does not bring it back
        ("*;q=0", False),
        ("gzip;q=nope", False),  # a malformed weight: the item counts as absent
    ],
)
def test_which_clients_take_gzip(header: str, gzip_taken: bool) -> None:
    assert accepts_gzip(header) is gzip_taken


def _ours(exposition: bytes) -> list[bytes]:
    """The fabriccap families' lines (the process_* ones move between two renders)."""
    return [line for line in exposition.splitlines() if b"fabriccap_" in line]


async def test_metrics_are_gzipped_for_those_who_ask_and_plain_for_the_others() -> None:
    metrics = OperatorMetrics()
    metrics.pools.set_pool("efa-p", "efa", "p", {"nodes": 3})
    plain = _ours(metrics.exposition())
    assert b'fabriccap_pool_nodes{fabric="efa",name="efa-p",pool="p"} 3.0' in plain
    assert _ours(gzip.decompress(metrics.exposition_gzip())) == plain
    port = free_ports(1)[0]
    runner = await start_metrics_server(metrics, "127.0.0.1", port)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with hang_guard(HANG_SECONDS):
            async with aiohttp.ClientSession(auto_decompress=False) as session:
                async with session.get(url, headers={"Accept-Encoding": "gzip"}) as response:
                    assert response.headers.get("Content-Encoding") == "gzip"
                    assert _ours(gzip.decompress(await response.read())) == plain
                async with session.get(url, headers={"Accept-Encoding": "identity"}) as response:
                    assert "Content-Encoding" not in response.headers
                    assert _ours(await response.read()) == plain
    finally:
        await runner.cleanup()
