"""A failed write is retried on its object's backoff, and the ready label never says more than
the status (issue 27 item 3; round 3 L3, L13)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from fabriccap.controller import publisher as publisher_module
from fabriccap.controller import writes
from fabriccap.controller.ratelimit import BackoffPolicy
from fabriccap.core.api import READY_LABEL, condition_status
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from support.builders import node
from support.fakeapi import eventually
from support.publishing import Setup, healthy, on_the_loops_own_time, publishing, start

FAST_RETRIES = BackoffPolicy(base=0.05, cap=0.2)


@asynccontextmanager
async def running(setup: Setup) -> AsyncIterator[asyncio.Task[None]]:
    """The publisher's own loop (its real clock), after the first listing."""
    setup.store.listed.set()
    task = asyncio.create_task(setup.publisher.run())
    try:
        yield task
        assert not task.done(), f"the loop ended: {task.exception()}"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def ready_and_label(setup: Setup, name: str) -> tuple[str | None, str | None]:
    obj = setup.published()[name]
    return condition_status(obj.get("status"), "Ready"), (obj["metadata"].get("labels") or {}).get(READY_LABEL)


async def test_a_failed_status_write_is_retried_on_its_backoff_not_at_the_next_resync(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(writes, "WRITE_BACKOFF", FAST_RETRIES, raising=False)
    monkeypatch.setattr(publisher_module, "WRITE_BACKOFF", FAST_RETRIES, raising=False)
    async with publishing(resyncSeconds=3600, debounceSeconds=0) as setup:
        on_the_loops_own_time(setup)
        setup.add(healthy("p5", "a", "b"))
        async with running(setup):
            await eventually(lambda: "efa-p5" in setup.published(), "efa-p5 published")
            await eventually(lambda: ready_and_label(setup, "efa-p5") == ("True", "true"), "efa-p5 Ready")
            status = FABRIC_CAPABILITIES.status("efa-p5")
            setup.api.write_failures[("PATCH", status)] = deque([500])  # one refusal, then fine
            setup.remove_node("b")
            setup.add([node("b", pool="p5", efa=0)])  # PartialRollout
            await eventually(
                lambda: condition_status(setup.published()["efa-p5"]["status"], "Ready") == "False",
                "the status written after one failed PATCH (the resync is an hour away)",
            )
        patches = [path for method, path, _, _ in setup.api.requests if method == "PATCH" and path == status]
        assert len(patches) >= 3  # the first write, the refused one, its retry


async def test_the_ready_label_goes_up_only_after_the_status_says_ready() -> None:
    async with publishing() as setup:
        setup.add([*healthy("p5", "a"), node("b", pool="p5", efa=0)])
        await start(setup)
        assert ready_and_label(setup, "efa-p5") == ("False", "false")
        status = FABRIC_CAPABILITIES.status("efa-p5")
        setup.api.write_failures[("PATCH", status)] = deque([403])  # RBAC: the status may not be written
        setup.remove_node("b")
        setup.add(healthy("p5", "b"))  # Ready now
        await setup.publisher.reconcile_once()
        # The status could not say Ready, so neither may the label the admission policy selects by.
        assert ready_and_label(setup, "efa-p5") == ("False", "false")
        setup.clock.now += 2.0  # the retry falls due (1 s, jittered)
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        assert ready_and_label(setup, "efa-p5") == ("True", "true")


async def test_the_ready_label_goes_down_before_the_status_stops_saying_ready() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        assert ready_and_label(setup, "efa-p5") == ("True", "true")
        status = FABRIC_CAPABILITIES.status("efa-p5")
        setup.api.write_failures[("PATCH", status)] = deque([403])
        setup.remove_node("b")
        setup.add([node("b", pool="p5", efa=0)])
        await setup.publisher.reconcile_once()
        # The label went down first: what is left disagreeing is "not ready" over a stale Ready.
        assert ready_and_label(setup, "efa-p5") == ("True", "false")
        setup.clock.now += 2.0
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        assert ready_and_label(setup, "efa-p5") == ("False", "false")


async def test_writes_failing_together_are_said_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    """Every pool's create fails so while the API server is away: one line says so, not one each."""
    async with publishing() as setup:
        for index in range(20):
            setup.add(healthy(f"p{index}", f"a{index}", f"b{index}"))
        setup.api.write_failures[("POST", FABRIC_CAPABILITIES.collection())] = deque([503] * 20)
        with caplog.at_level(logging.ERROR):
            await start(setup)
    creates = [path for method, path, _, _ in setup.api.requests if method == "POST"]
    assert len(creates) == 20 and setup.published() == {}
    (line,) = [record.getMessage() for record in caplog.records if "retrying" in record.getMessage()]
    assert "503" in line and "said at most every 60s" in line
