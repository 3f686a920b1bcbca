"""What the event recorder POSTs, whatever it is handed: clean, bounded Events (reliability
round 3, S5 and S10; issue 27 item 10), each refused one POSTed once (S6; item 13)."""

from __future__ import annotations

import asyncio
import json
import logging
import types
from collections import deque

import pytest

from fabriccap.controller.events import EventRecorder, EventSpec, WorkloadEventOutbox
from fabriccap.core.facts import ObjectRef
from fabriccap.core.workloads import WorkloadEvent
from support.fakeapi import fake_api

ML_EVENTS = "/api/v1/namespaces/ml/events"
ESCAPES = "\x1b]0;pwned\x07\x1b[2J"
FORGED = "\n2026-12-01 23:59:59,000 INFO fabriccap.controller.leader: released the lease"


def has_control(text: str) -> bool:
    return any(ord(character) < 0x20 or 0x7F <= ord(character) < 0xA0 for character in text)


async def test_an_event_is_cleaned_and_bounded_at_the_door() -> None:
    async with fake_api() as (api, client):
        api.serve(ML_EVENTS, "Event", [], "1")
        recorder = EventRecorder(client, "test")
        involved = {"apiVersion": "v1", "kind": f"K{ESCAPES}" * 100_000, "name": f"n{FORGED}" * 10_000}
        message = f"m{FORGED}{ESCAPES}" * 10_000
        assert await recorder.emit("ml", involved, EventSpec("Warning", f"Reason{FORGED}", message), name="e1")
        ((_, _, body),) = api.writes("POST")
        assert len(json.dumps(body)) < 4_000
        strings = [body["message"], body["reason"], *body["involvedObject"].values()]
        assert not [text for text in strings if has_control(text)]


async def test_a_workload_event_on_an_owner_with_any_name_is_accepted_by_name() -> None:
    owner = ObjectRef("batch/v1", "Job", "ml", f"x/y{FORGED}", "uid-1")
    event = WorkloadEvent(owner, "FabricNotRequested", "runs 1 pod", "key")
    async with fake_api() as (api, client):
        api.serve(ML_EVENTS, "Event", [], "1")
        assert await EventRecorder(client, "test").warn_workload(event)
        ((_, _, body),) = api.writes("POST")
        assert body["metadata"]["name"] == event.event_name
        assert "/" not in body["metadata"]["name"] and "\n" not in body["metadata"]["name"]


# -- a refused Event is refused for good (reliability round 3, S6; issue 27 item 13)


async def test_an_event_refused_as_invalid_is_never_posted_again(caplog: pytest.LogCaptureFixture) -> None:
    owner = ObjectRef("batch/v1", "Job", "ml", "bert", "uid-1")
    event = WorkloadEvent(owner, "FabricNotRequested", "runs 1 pod", "key")
    async with fake_api() as (api, client):
        api.serve(ML_EVENTS, "Event", [], "1")
        api.write_failures[("POST", ML_EVENTS)] = deque([422] * 5)
        recorder = EventRecorder(client, "test")
        outbox = WorkloadEventOutbox(recorder, leading=lambda: True)
        with caplog.at_level(logging.WARNING):
            for _ in range(5):  # five rounds find the same problem
                outbox.offer([event])
                await outbox.drain()
            condition = EventSpec("Warning", "PartialRollout", "Ready=False: 0 on n1")
            fcap = {"apiVersion": "fabriccap.dev/v1alpha1", "kind": "FabricCapability", "name": "efa-p5"}
            for _ in range(3):
                await recorder.emit("ml", fcap, condition)
        posts = [path for method, path, _, _ in api.requests if method == "POST"]
        assert posts == [ML_EVENTS, ML_EVENTS]  # one each: the workload's, and the condition's
        assert outbox.knows(event.key)  # done with, not offered again
        refused = [record for record in caplog.records if "422" in record.getMessage()]
        assert len(refused) == 2


async def test_a_failure_that_may_pass_is_tried_again() -> None:
    owner = ObjectRef("batch/v1", "Job", "ml", "bert", "uid-1")
    event = WorkloadEvent(owner, "FabricNotRequested", "runs 1 pod", "key")
    async with fake_api() as (api, client):
        api.serve(ML_EVENTS, "Event", [], "1")
        api.write_failures[("POST", ML_EVENTS)] = deque([500, 429])
        now = [1000.0]
        outbox = WorkloadEventOutbox(EventRecorder(client, "test"), leading=lambda: True, clock=lambda: now[0])
        for _ in range(4):
            outbox.offer([event])
            await outbox.drain()
            now[0] += 10.0  # past each failure's backoff (2 s, then 4 s, jittered)
        assert [method for method, _, _, _ in api.requests] == ["POST", "POST", "POST"]
        assert len(api.objects(ML_EVENTS)) == 1


async def test_sends_failing_together_are_said_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    """An API server that is away fails every send the same way: one line says so, not one each."""
    async with fake_api() as (api, client):
        api.serve(ML_EVENTS, "Event", [], "1")
        api.write_failures[("POST", ML_EVENTS)] = deque([503] * 30)
        recorder = EventRecorder(client, "test")
        involved = {"apiVersion": "batch/v1", "kind": "Job", "name": "bert"}
        with caplog.at_level(logging.WARNING):
            for index in range(30):
                assert not await recorder.emit("ml", involved, EventSpec("Warning", "R", f"m{index}"), name=f"e{index}")
            assert await recorder.emit("ml", involved, EventSpec("Warning", "R", "m"), name="e")  # it is back
    (line,) = [record.getMessage() for record in caplog.records if "could not record" in record.getMessage()]
    assert "503" in line and "said at most every 60s" in line
    assert len(api.objects(ML_EVENTS)) == 1


# -- an Event is a write: only inside the leader's window (the leader review, 5)


async def test_an_event_goes_only_inside_the_write_window_and_its_request_ends_with_it() -> None:
    """Events were gated on ``leading`` alone and sent with the client's 60 s timeout: one
    accepted by a slow API server after the window closed landed while another replica led."""
    owner = ObjectRef("batch/v1", "Job", "ml", "bert", "uid-1")
    event = WorkloadEvent(owner, "FabricNotRequested", "runs 1 pod", "key")
    async with fake_api() as (api, client):
        api.serve(ML_EVENTS, "Event", [], "1")
        window = [0.0]
        recorder = EventRecorder(client, "test", window=lambda: window[0])
        assert not await recorder.warn_workload(event)  # no window: a later try, the leader's
        assert api.writes("POST") == []
        api.write_gates[("POST", ML_EVENTS)] = asyncio.Event()  # an API server that does not answer
        window[0] = 0.8
        assert not await asyncio.wait_for(recorder.warn_workload(event), 3.0)  # cut where the window ends


async def test_a_warning_once_not_sent_for_want_of_a_write_window_is_sent_by_a_later_call() -> None:
    """warn_once kept a warning as sent when the window was closed (a leader whose election step
    was still under way): a later call, inside the renewed window, sent nothing (review 64d F1)."""
    async with fake_api() as (api, client):
        window = [0.0]
        recorder = EventRecorder(client, "test", window=lambda: window[0])
        involved = types.SimpleNamespace(name="efa-a", uid="u1", resource_version="1")
        await recorder.warn_once(involved, "NameConflict", "two pools compute efa-a")
        assert api.writes("POST") == []
        window[0] = 9.0
        await recorder.warn_once(involved, "NameConflict", "two pools compute efa-a")
        await recorder.warn_once(involved, "NameConflict", "two pools compute efa-a")
        assert [body["reason"] for _, _, body in api.writes("POST")] == ["NameConflict"]
