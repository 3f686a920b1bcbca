"""The write lanes' queue, as its metrics see it: how many writes wait per lane, and how long
each waited before it was sent."""

from __future__ import annotations

import asyncio

from fabriccap.controller.objects import Intent, Lane, ObjectState, StatusWrite
from fabriccap.controller.writes import LANE_WIDTHS, Rest, WriteLanes
from support.fakeapi import eventually


class HeldWrites:
    """A ``perform`` that holds every write until released, and remembers whose it sent."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.sent: list[str] = []

    async def perform(self, state: ObjectState, intent: Intent) -> None:
        self.sent.append(state.name)
        await self.release.wait()


def lanes_with(held: HeldWrites, waits: list[tuple[Lane, float]]) -> WriteLanes:
    return WriteLanes(
        perform=held.perform, done=lambda state, again: None, waited=lambda lane, seconds: waits.append((lane, seconds))
    )


def intent() -> StatusWrite:
    return StatusWrite(capability=None, status={})


async def test_writes_beyond_a_lanes_width_are_counted_waiting_and_timed_when_sent() -> None:
    held, waits = HeldWrites(), list[tuple[Lane, float]]()
    lanes = lanes_with(held, waits)
    width = LANE_WIDTHS[Lane.URGENT]
    states = [ObjectState(f"o{number}") for number in range(width + 2)]
    for state in states:
        lanes.submit(state, intent(), Lane.URGENT)
    await eventually(lambda: len(held.sent) == width, "the lane's width sent")
    assert lanes.waiting_in(Lane.URGENT) == 2
    assert [lanes.waiting_in(lane) for lane in (Lane.CONDITIONS, Lane.ROUTINE, Lane.EXPIRY)] == [0, 0, 0]
    await asyncio.sleep(0.05)
    held.release.set()
    await lanes.finish(timeout=5)
    assert lanes.waiting_in(Lane.URGENT) == 0 and len(held.sent) == width + 2
    assert [lane for lane, _ in waits] == [Lane.URGENT] * (width + 2)
    # The two behind the held ones waited at least the hold; the others were sent at once.
    assert sorted(seconds >= 0.05 for _, seconds in waits) == [False] * width + [True] * 2


async def test_a_write_that_leaves_its_line_for_a_faster_lane_is_not_counted_waiting_twice() -> None:
    """Moved before its task ever ran (the same round), and after it waited a while."""
    held, waits = HeldWrites(), list[tuple[Lane, float]]()
    lanes = lanes_with(held, waits)
    blockers = [ObjectState(f"b{number}") for number in range(LANE_WIDTHS[Lane.ROUTINE])]
    for state in blockers:
        lanes.submit(state, intent(), Lane.ROUTINE)
    early, late = ObjectState("early"), ObjectState("late")
    lanes.submit(early, intent(), Lane.ROUTINE)
    lanes.submit(early, intent(), Lane.URGENT)  # its routine task has not run a step yet
    lanes.submit(late, intent(), Lane.ROUTINE)
    await eventually(lambda: "early" in held.sent, "the moved write sent in its new lane")
    assert lanes.waiting_in(Lane.ROUTINE) == 1  # late only
    lanes.submit(late, intent(), Lane.URGENT)
    await eventually(lambda: "late" in held.sent, "the second moved write sent")
    assert [lanes.waiting_in(lane) for lane in Lane] == [0, 0, 0, 0]
    held.release.set()
    await lanes.finish(timeout=5)
    assert [lanes.waiting_in(lane) for lane in Lane] == [0, 0, 0, 0]
    assert sorted(held.sent) == sorted(["early", "late", *(state.name for state in blockers)])


async def test_writes_cancelled_while_they_wait_are_not_left_counted() -> None:
    held, waits = HeldWrites(), list[tuple[Lane, float]]()
    lanes = lanes_with(held, waits)
    for number in range(LANE_WIDTHS[Lane.EXPIRY] + 3):
        lanes.submit(ObjectState(f"o{number}"), intent(), Lane.EXPIRY)
    await eventually(lambda: len(held.sent) == LANE_WIDTHS[Lane.EXPIRY], "the lane's width sent")
    assert lanes.waiting_in(Lane.EXPIRY) == 3
    await lanes.finish(timeout=0.01)  # a stop: what still runs is cancelled
    assert lanes.waiting_in(Lane.EXPIRY) == 0 and lanes.in_flight == 0
    assert waits == []  # a write is timed once sent: these were cancelled waiting or sending


async def test_a_write_cancelled_before_its_first_step_leaves_its_object_free_to_write() -> None:
    """A task cancelled before it ran a step runs none of its code: its object must not keep a
    slot on the dead task, or every later write of it would join that slot and never be sent."""
    held, ended = HeldWrites(), list[str]()
    lanes = WriteLanes(perform=held.perform, done=lambda state, again: ended.append(state.name))
    state = ObjectState("o")
    task = lanes.submit(state, intent(), Lane.ROUTINE)
    assert task is not None
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert state.slot is None and ended == ["o"] and lanes.waiting_in(Lane.ROUTINE) == 0
    again = lanes.submit(state, intent(), Lane.ROUTINE)
    assert again is not None and again is not task
    await eventually(lambda: held.sent == ["o"], "the next write of the object sent")
    held.release.set()
    await lanes.finish(timeout=5)


async def test_what_a_write_leaves_after_its_status_waits_behind_the_line_and_goes_at_once_without_one() -> None:
    """A perform's rest (``writes.Rest``: the Events, the ready label) queues again at the back
    of its lane, still in its object's slot; with no line it follows its status at once."""
    log: list[str] = []
    waits: list[tuple[Lane, float]] = []

    async def perform(state: ObjectState, intent: Intent) -> Rest:
        await asyncio.sleep(0)  # the request: the other writes queue meanwhile
        log.append(f"status {state.name}")

        async def rest() -> None:
            log.append(f"rest {state.name}" if state.slot is not None else f"rest {state.name} without its slot")

        return rest

    lanes = WriteLanes(perform=perform, done=lambda state, again: None, waited=lambda lane, s: waits.append((lane, s)))
    lanes.submit(ObjectState("lone"), intent(), Lane.URGENT)
    await lanes.finish(timeout=5)
    assert log == ["status lone", "rest lone"]
    log.clear()
    names = [f"o{number}" for number in range(2 * LANE_WIDTHS[Lane.URGENT])]
    for name in names:
        lanes.submit(ObjectState(name), intent(), Lane.URGENT)
    await lanes.finish(timeout=5)
    assert log == [f"status {name}" for name in names] + [f"rest {name}" for name in names]
    assert len(waits) == 1 + len(names)  # one wait timed per write, not per part
