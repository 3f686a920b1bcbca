"""An object's write budget (a burst, then one write a second): the writes that only move a
count leave its last tokens to the writes that move a condition."""

from __future__ import annotations

from typing import Any

from fabriccap.controller.objects import (
    OBJECT_WRITE_BURST,
    OBJECT_WRITES_KEPT_FROM_ROUTINE,
    OBJECT_WRITES_PER_SECOND,
)
from fabriccap.core.ratelimit import TokenBucket
from fabriccap_devtools.world import owner_reference, workload_pod
from support.builders import node
from support.publishing import Setup, healthy, publishing, start

WINDOW = 0.25  # a debounce window and a round
BURST = 0.01  # a job starting its pods, a hundred a second: a round for each
JOB = owner_reference("Job", "batch/v1", "train")


def ready(setup: Setup) -> tuple[str, str]:
    status = setup.published()["efa-p5"]["status"]
    (condition,) = (condition for condition in status["conditions"] if condition["type"] == "Ready")
    return condition["status"], condition["reason"]


def requesting(setup: Setup) -> Any:
    return setup.published()["efa-p5"]["status"]["workloads"]["requestingFabric"]["pods"]


async def round_after(setup: Setup, seconds: float) -> None:
    setup.clock.now += seconds
    setup.publisher._fire_due(setup.clock.now)
    await setup.publisher.reconcile_once()


def test_a_bucket_keeps_what_it_is_asked_to_leave() -> None:
    bucket = TokenBucket(rate=1.0, burst=4)
    assert [bucket.allows(0.0, keep=2) for _ in range(3)] == [True, True, False]
    assert bucket.next_token(0.0, keep=2) == 1.0  # two are there; three are needed
    assert bucket.allows(0.0) and bucket.allows(0.0)  # a write that keeps nothing takes them
    assert not bucket.allows(0.0)


async def test_a_busy_pools_count_writes_leave_a_condition_move_its_tokens() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        # A job starts its pods on the pool: only the count of pods requesting the fabric moves,
        # far faster than the budget's rate, twice its burst (all of it, but for the tokens kept).
        pods = 2 * OBJECT_WRITE_BURST
        for index in range(pods):
            setup.add([workload_pod("a", f"train-{index}", efa=32, owner=JOB)])
            await round_after(setup, BURST)
        state = setup.publisher.objects["efa-p5"]
        assert state.deferred == OBJECT_WRITES_KEPT_FROM_ROUTINE  # the counts wait, leaving these
        assert requesting(setup) < pods
        assert ready(setup) == ("True", "UniformCapability")

        # A node loses its fabric: Ready moves, and is written in the next round, not at the
        # next token.
        setup.remove_node("b")
        setup.add([node("b", pool="p5", efa=0)])
        await round_after(setup, WINDOW)
        assert ready(setup)[0] == "False"
        assert requesting(setup) == pods  # the whole status: the counts held back come with it

        # Routine writes are held to the budget's rate still, and take no token they must leave.
        setup.add([workload_pod("a", "train-late", efa=32, owner=JOB)])
        await round_after(setup, WINDOW)
        assert requesting(setup) == pods
        assert state.deferred == OBJECT_WRITES_KEPT_FROM_ROUTINE
        waited = state.budget.next_token(setup.clock.now, OBJECT_WRITES_KEPT_FROM_ROUTINE)
        assert 0 < waited <= (OBJECT_WRITES_KEPT_FROM_ROUTINE + 1) / OBJECT_WRITES_PER_SECOND
        await round_after(setup, waited)
        await setup.publisher.finish_writes()
        assert requesting(setup) == pods + 1
        assert state.deferred is None
