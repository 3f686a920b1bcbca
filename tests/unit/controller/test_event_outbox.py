"""The workload Event outbox: each problem once, in the background, a burst then a steady rate."""

from __future__ import annotations

import asyncio
from typing import cast

from fabriccap.controller.events import EventRecorder, WorkloadEventOutbox
from fabriccap.core.facts import ObjectRef
from fabriccap.core.workloads import WorkloadEvent

# Bounded waits for the background sender: a test that hangs would say nothing.
SETTLE_SECONDS = 0.2


def problem(index: int) -> WorkloadEvent:
    owner = ObjectRef("batch/v1", "Job", "ml", f"job-{index}", f"uid-{index}")
    return WorkloadEvent(
        involved=owner, reason="FabricNotRequested", text="requests none", key=f"FabricNotRequested/{index}"
    )


class FakeRecorder:
    """Records what would be POSTed; ``failing`` keys are refused (the API server said no)."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.failing: set[str] = set()
        self.in_flight = 0
        self.most_in_flight = 0

    async def warn_workload(self, event: WorkloadEvent) -> bool:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)
        self.in_flight -= 1
        if event.key in self.failing:
            return False
        self.sent.append(event.key)
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def outbox_for(recorder: FakeRecorder, clock: Clock, *, leading: list[bool] | None = None) -> WorkloadEventOutbox:
    lead = leading if leading is not None else [True]
    return WorkloadEventOutbox(
        cast(EventRecorder, recorder), leading=lambda: lead[0], clock=clock, rate=20.0, burst=100
    )


async def test_offer_returns_before_anything_is_sent() -> None:
    recorder, clock = FakeRecorder(), Clock()
    outbox = outbox_for(recorder, clock)
    outbox.offer(problem(i) for i in range(10))
    assert recorder.sent == [] and outbox.queued == 10  # the round goes on at once
    await asyncio.wait_for(outbox.drain(), SETTLE_SECONDS)
    assert sorted(recorder.sent) == sorted(f"FabricNotRequested/{i}" for i in range(10))
    assert outbox.queued == 0
    assert 1 < recorder.most_in_flight <= 4


async def test_a_burst_then_the_steady_rate() -> None:
    recorder, clock = FakeRecorder(), Clock()
    outbox = outbox_for(recorder, clock)
    outbox.offer(problem(i) for i in range(250))
    await asyncio.sleep(SETTLE_SECONDS)
    assert len(recorder.sent) == 100  # the burst; the clock stands still, so no more
    clock.now += 2.0  # 2 s at 20/s
    await asyncio.sleep(SETTLE_SECONDS)
    assert len(recorder.sent) == 140
    clock.now += 60.0  # the bucket refills to its burst, not beyond
    await asyncio.sleep(SETTLE_SECONDS)
    assert len(recorder.sent) == 240
    clock.now += 1.0
    await asyncio.wait_for(outbox.drain(), SETTLE_SECONDS)
    assert len(recorder.sent) == 250 and len(set(recorder.sent)) == 250
    await outbox.close()


async def test_each_problem_is_sent_once_and_a_failed_one_is_offered_again_after_its_backoff() -> None:
    recorder, clock = FakeRecorder(), Clock()
    outbox = outbox_for(recorder, clock)
    recorder.failing.add("FabricNotRequested/1")
    outbox.offer([problem(0), problem(1), problem(0)])
    await asyncio.wait_for(outbox.drain(), SETTLE_SECONDS)
    assert recorder.sent == ["FabricNotRequested/0"]
    assert set(outbox.sent) == {"FabricNotRequested/0"}
    # The next round offers both again: the one that failed waits for its backoff (2 s, jittered).
    recorder.failing.clear()
    outbox.offer([problem(0), problem(1)])
    await asyncio.wait_for(outbox.drain(), SETTLE_SECONDS)
    assert recorder.sent == ["FabricNotRequested/0"]
    clock.now += 3.0
    outbox.offer([problem(0), problem(1)])
    await asyncio.wait_for(outbox.drain(), SETTLE_SECONDS)
    assert recorder.sent == ["FabricNotRequested/0", "FabricNotRequested/1"]


async def test_losing_the_lead_drops_the_queue() -> None:
    recorder, clock = FakeRecorder(), Clock()
    leading = [True]
    outbox = outbox_for(recorder, clock, leading=leading)
    outbox.offer(problem(i) for i in range(150))
    await asyncio.sleep(SETTLE_SECONDS)
    assert len(recorder.sent) == 100
    leading[0] = False
    clock.now += 10.0
    await asyncio.wait_for(outbox.drain(), SETTLE_SECONDS)
    assert len(recorder.sent) == 100 and outbox.queued == 0


async def test_close_stops_the_sender() -> None:
    recorder, clock = FakeRecorder(), Clock()
    outbox = outbox_for(recorder, clock)
    outbox.offer(problem(i) for i in range(150))
    await asyncio.sleep(SETTLE_SECONDS)
    await asyncio.wait_for(outbox.close(), SETTLE_SECONDS)
    clock.now += 60.0
    await asyncio.sleep(SETTLE_SECONDS)
    assert len(recorder.sent) == 100


async def test_an_owner_forgotten_while_its_problems_wait_has_none_sent() -> None:
    recorder, clock = FakeRecorder(), Clock()
    outbox = outbox_for(recorder, clock)
    outbox.offer(problem(i) for i in range(100))  # the burst: sent
    await asyncio.sleep(SETTLE_SECONDS)
    second = WorkloadEvent(involved=problem(120).involved, reason="FabricUnschedulable", text="m", key="second")
    outbox.offer([*(problem(i) for i in range(100, 150)), second])  # the clock stands still: they wait
    await asyncio.sleep(SETTLE_SECONDS)
    assert len(recorder.sent) == 100 and outbox.queued == 51
    outbox.forget({problem(120).involved.key, problem(130).involved.key, problem(3).involved.key})
    assert outbox.queued == 48 and not outbox.knows("second") and not outbox.knows("FabricNotRequested/3")
    clock.now += 60.0
    await asyncio.wait_for(outbox.drain(), SETTLE_SECONDS)
    expected = {f"FabricNotRequested/{i}" for i in range(150)} - {"FabricNotRequested/120", "FabricNotRequested/130"}
    assert set(recorder.sent) == expected and len(recorder.sent) == len(expected)
    # The owner comes back with a problem: it is sent like any other.
    outbox.offer([second])
    await asyncio.wait_for(outbox.drain(), SETTLE_SECONDS)
    assert recorder.sent[-1] == "second"


async def test_an_owner_with_one_problem_sent_and_one_waiting_is_forgotten_whole() -> None:
    recorder, clock = FakeRecorder(), Clock()
    outbox = WorkloadEventOutbox(cast(EventRecorder, recorder), leading=lambda: True, clock=clock, rate=20.0, burst=1)
    owner = problem(7).involved
    first, second = (
        WorkloadEvent(involved=owner, reason=reason, text="m", key=f"{reason}/7")
        for reason in ("FabricNotRequested", "FabricUnschedulable")
    )
    outbox.offer([first, second, first])  # offered twice: kept once
    await asyncio.sleep(SETTLE_SECONDS)  # the clock stands still: the burst of one is sent
    assert recorder.sent == [first.key] and outbox.queued == 1
    assert outbox.knows(first.key) and outbox.knows(second.key)
    outbox.forget({owner.key})
    assert outbox.queued == 0 and not outbox.knows(first.key) and not outbox.knows(second.key)
    clock.now += 60.0
    outbox.offer([second])  # the owner is back: its problem is new again
    await asyncio.wait_for(outbox.drain(), SETTLE_SECONDS)
    assert recorder.sent == [first.key, second.key]
