"""The resync: every pool evaluated again, a slice of them a round, so that no round of it holds
the event loop long (a change that comes meanwhile waits for the round)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from fabriccap.controller import publisher as publisher_module
from fabriccap.core.evaluate import Evaluation, evaluate
from fabriccap.core.facts import Pool
from support.builders import node
from support.publishing import Setup, healthy, publishing, start

POOLS = 5
SLICE = 2


@asynccontextmanager
async def resyncing(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Setup]:
    """POOLS healthy pools published, SLICE of them a resync round, and the resync due."""
    monkeypatch.setattr(publisher_module, "RESYNC_POOLS_PER_ROUND", SLICE)
    async with publishing() as setup:
        for index in range(POOLS):
            setup.add(healthy(f"p{index}", f"n{index}"))
        await start(setup)
        await setup.publisher.finish_writes()
        setup.clock.now += setup.publisher.config.resync_seconds
        yield setup


async def test_the_resync_evaluates_every_pool_a_slice_a_round(monkeypatch: pytest.MonkeyPatch) -> None:
    async with resyncing(monkeypatch) as setup:
        rounds: list[set[Pool]] = []

        def recorded(*args: Any, **kwargs: Any) -> Evaluation:
            if not kwargs.get("preview"):
                rounds.append(set(args[2]))
            return evaluate(*args, **kwargs)

        monkeypatch.setattr(publisher_module, "evaluate", recorded)
        turns = 0
        while turns < 10 and (turns == 0 or setup.publisher._seconds_to_wait() == 0):
            await setup.publisher.step()
            turns += 1
        assert [len(pools) for pools in rounds] == [SLICE, SLICE, POOLS - 2 * SLICE]
        assert {pool.value for pools in rounds for pool in pools} == {f"p{index}" for index in range(POOLS)}
        # Done: the loop waits for the next resync again.
        assert setup.publisher._seconds_to_wait() > 0


async def test_a_change_during_the_resync_is_evaluated_in_the_next_round(monkeypatch: pytest.MonkeyPatch) -> None:
    async with resyncing(monkeypatch) as setup:
        await setup.publisher.step()  # the resync's first slice
        # The last pool in the resync's order loses its fabric: it does not wait for its slice.
        setup.remove_node("n4")
        setup.add([node("n4", pool="p4", efa=0)])
        await setup.publisher.step()
        await setup.publisher.finish_writes()
        conditions = setup.published()["efa-p4"]["status"]["conditions"]
        assert any(c["type"] == "Ready" and c["status"] == "False" for c in conditions)
        assert setup.publisher._resync_left  # the resync is not over yet
