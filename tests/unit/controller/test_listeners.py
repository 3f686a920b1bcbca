"""In a pod, /metrics and /healthz answer on the pod's IPv4 and IPv6 addresses alike (hostile
review 63-chart M2): a listener on 0.0.0.0 refuses IPv6, so on an IPv6-only cluster every probe
and scrape failed, and asyncio makes ``::`` IPv6-only, which would refuse IPv4 instead. Both
servers are started here on free ports of the loopback addresses, as the operator starts them."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest

from fabriccap.cli.commands import build_parser
from fabriccap.controller import main as main_module
from fabriccap.controller.main import default_bind_address
from fabriccap.controller.metrics import (
    DUAL_STACK_ADDRESS,
    OperatorMetrics,
    dual_stack_available,
    listening_socket,
    start_health_server,
    start_metrics_server,
)
from support.bounded import hang_guard
from support.publishing import publishing

HANG_SECONDS = 30.0
REQUEST_SECONDS = 5.0

needs_ipv6 = pytest.mark.skipif(not dual_stack_available(), reason="this host has no IPv6")


def _healthy() -> Mapping[str, Any]:
    return {"listed": True}


def _port(runner: Any) -> int:
    return int(runner.addresses[0][1])


async def _status(url: str) -> int | str:
    """The HTTP status of a GET, or the connection error's name."""
    timeout = aiohttp.ClientTimeout(total=REQUEST_SECONDS)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as response:
            await response.read()
            return response.status
    except aiohttp.ClientConnectorError as error:
        return type(error.os_error).__name__


@needs_ipv6
async def test_in_a_pod_both_servers_answer_ipv4_and_ipv6(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    address = default_bind_address()
    assert address == DUAL_STACK_ADDRESS
    with hang_guard(HANG_SECONDS):
        servers = [
            await start_metrics_server(OperatorMetrics(), address, 0),
            await start_health_server(_healthy, address, 0),
        ]
        try:
            answers = {
                (path, host): await _status(f"http://{host}:{_port(runner)}/{path}")
                for path, runner in zip(("metrics", "healthz"), servers, strict=True)
                for host in ("127.0.0.1", "[::1]")
            }
        finally:
            for runner in servers:
                await runner.cleanup()
    assert answers == {
        ("metrics", "127.0.0.1"): 200,
        ("metrics", "[::1]"): 200,
        ("healthz", "127.0.0.1"): 200,
        ("healthz", "[::1]"): 200,
    }


async def test_outside_a_pod_the_servers_listen_on_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert default_bind_address() == "127.0.0.1"


async def test_a_host_without_ipv6_listens_on_ipv4(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel booted without IPv6 refuses AF_INET6 sockets (EAFNOSUPPORT): 0.0.0.0 then."""
    real_socket = socket.socket

    def ipv4_only(family: int = socket.AF_INET, *args: Any, **kwargs: Any) -> socket.socket:
        if family == socket.AF_INET6:
            raise OSError(97, "Address family not supported by protocol")
        return real_socket(family, *args, **kwargs)

    monkeypatch.setattr("fabriccap.controller.metrics.socket.socket", ipv4_only)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert main_module.default_bind_address() == "0.0.0.0"


@needs_ipv6
def test_only_the_wildcard_is_dual_stack() -> None:
    with listening_socket(DUAL_STACK_ADDRESS, 0) as wildcard, listening_socket("::1", 0) as loopback:
        assert wildcard.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 0
        assert loopback.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1
    with listening_socket("127.0.0.1", 0) as ipv4:
        assert ipv4.family == socket.AF_INET


async def test_a_failing_report_fails_healthz_with_its_reason() -> None:
    def stale() -> Mapping[str, Any]:
        raise RuntimeError("watch data is stale: nodes 300s\x1b[2J")

    with hang_guard(HANG_SECONDS):
        runner = await start_health_server(stale, "127.0.0.1", 0)
        try:
            timeout = aiohttp.ClientTimeout(total=REQUEST_SECONDS)
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.get(f"http://127.0.0.1:{_port(runner)}/healthz") as response:
                    status, text = response.status, await response.text()
                async with session.get(f"http://127.0.0.1:{_port(runner)}/metrics") as response:
                    other = response.status
        finally:
            await runner.cleanup()
    assert (status, text) == (500, "watch data is stale: nodes 300s\n")
    assert other == 404


async def test_a_port_taken_is_an_error_at_start() -> None:
    """metrics.port equal to health.port: the second server cannot listen, and says so."""
    with hang_guard(HANG_SECONDS):
        first = await start_health_server(_healthy, "127.0.0.1", 0)
        try:
            with pytest.raises(OSError, match="in use"):
                await start_metrics_server(OperatorMetrics(), "127.0.0.1", _port(first))
        finally:
            await first.cleanup()
    await asyncio.sleep(0)


@pytest.mark.parametrize(
    ("given", "read"), [("::", "::"), ("[::]", "::"), ("0.0.0.0", "0.0.0.0"), ("[fd00::1]", "fd00::1")]
)
def test_bind_address_flags_take_ip_literals(given: str, read: str) -> None:
    args = build_parser().parse_args(["run", f"--metrics-bind-address={given}", f"--health-bind-address={given}"])
    assert (args.metrics_bind_address, args.health_bind_address) == (read, read)


@pytest.mark.parametrize("given", ["localhost", "[::1]:8081", "http://[::]:8081", ""])
def test_bind_address_flags_refuse_anything_else(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["run", f"--health-bind-address={given}"])
    assert exited.value.code == 2
    assert "--health-bind-address: invalid bind_address value" in capsys.readouterr().err


async def _answers(runner: Any, path: str) -> tuple[int, str]:
    timeout = aiohttp.ClientTimeout(total=REQUEST_SECONDS)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(f"http://127.0.0.1:{_port(runner)}{path}") as response,
    ):
        return response.status, await response.text()


async def test_readyz_is_503_until_the_cluster_is_listed_and_healthz_is_200_throughout() -> None:
    """A replica that has not listed cannot lead (it campaigns only then): the readiness probe
    reads /readyz, so a rolling update keeps an old pod until a new one could take over. With
    /healthz, both new pods were Ready before listing and nothing was published meanwhile."""
    async with publishing() as setup:
        publisher = setup.publisher
        publisher.store.listed.clear()
        with hang_guard(HANG_SECONDS):
            runner = await start_health_server(
                lambda: {"listed": publisher.store.listed.is_set()},
                "127.0.0.1",
                0,
                not_ready=lambda: main_module.not_ready(publisher),
            )
            try:
                before = await _answers(runner, "/readyz"), await _answers(runner, "/healthz")
                publisher.store.listed.set()
                after = await _answers(runner, "/readyz")
            finally:
                await runner.cleanup()
    (ready_status, ready_text), (health_status, _) = before
    assert (ready_status, health_status) == (503, 200)
    assert ready_text.startswith("the first listing of the cluster is under way (")
    assert after == (200, '{"fabriccap": {"listed": true}}')


async def test_readyz_fails_as_healthz_does_when_the_replica_is_unhealthy() -> None:
    def stale() -> Mapping[str, Any]:
        raise RuntimeError("watch data is stale: nodes 300s")

    with hang_guard(HANG_SECONDS):
        runner = await start_health_server(stale, "127.0.0.1", 0, not_ready=lambda: None)
        try:
            answer = await _answers(runner, "/readyz")
        finally:
            await runner.cleanup()
    assert answer == (500, "watch data is stale: nodes 300s\n")
