"""Watch faults against the fake API server (round 3's L4-L11): a bad line never ends the
informer, and the view's freshness is earned by progress, never by a watch being accepted.

The same cases run end to end, through the fault-injecting proxy and a real API server, in
tests/e2e/test_watch_faults_live.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from fabriccap.controller import informers as watchers
from fabriccap.kube.client import KubeClient
from fabriccap.kube.credentials import Credentials
from fabriccap.kube.errors import WatchLineError
from support.builders import NODEGROUP, node
from support.configs import build_config
from support.fakeapi import (
    WAIT_SECONDS,
    FakeApi,
    WatchResponse,
    bookmark,
    event,
    eventually,
    expired,
    fake_api,
    recorded_sleeps,
)
from support.informing import NODES, PODS, RESOURCE_SLICES, node_events, nudged, operator, relists


@pytest.fixture(autouse=True)
def backoffs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    return recorded_sleeps(monkeypatch, watchers)


def _line(document: object) -> bytes:
    return json.dumps(document).encode()


def _phantom_pod() -> dict[str, object]:
    """L6: a Pod, labelled like a p5 node, inside the nodes watch."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "phantom-from-a-pod-event",
            "namespace": "default",
            "resourceVersion": "102",
            "labels": {NODEGROUP: "p5", "node.kubernetes.io/instance-type": "p5.48xlarge"},
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


def _without_version(body: dict[str, object]) -> dict[str, object]:
    metadata = dict(body["metadata"])  # type: ignore[call-overload]
    metadata.pop("resourceVersion", None)
    return {**body, "metadata": metadata}


# Each line a proxy or a broken server could put in the nodes watch, and the cause it is
# rejected for (the name is shown when the line has one).
BAD_LINES = [
    pytest.param(b"[]", "not an object", "", id="json-array"),
    pytest.param(b'"x"', "not an object", "", id="json-string"),
    pytest.param(b"42", "not an object", "", id="json-number"),
    pytest.param(_line({"type": "ADDED", "object": "str"}), "object is not an object", "", id="object-is-string"),
    pytest.param(
        _line({"type": "ADDED", "object": {"kind": "Node", "metadata": ["n9"]}}),
        "metadata is not a map",
        "",
        id="metadata-is-list",
    ),
    pytest.param(
        _line({"type": "ADDED", "object": _phantom_pod()}),
        "wrong kind",
        "'phantom-from-a-pod-event'",
        id="pod-in-the-nodes-watch",
    ),
    pytest.param(b"\x00\xff{{ garbage }}", "undecodable line", "", id="garbage-bytes"),
    # What no API server writes, refused as undecodable (kube.client.decode_json): NaN, a lone
    # surrogate escape, bytes that are not UTF-8 inside a string, nesting deeper than 1,024.
    pytest.param(b'{"type":"ADDED","object":{"x":NaN}}', "undecodable line", "", id="nan"),
    pytest.param(b'{"type":"ADDED","object":{"x":"\\ud800"}}', "undecodable line", "", id="lone-surrogate"),
    pytest.param(b'{"type":"ADDED","object":{"x":"\xff"}}', "undecodable line", "", id="not-utf-8"),
    pytest.param(b"[" * 2000 + b"]" * 2000, "undecodable line", "", id="nested-2000-deep"),
    pytest.param(_line({"type": "EXPLODED", "object": {}}), "unknown event type", "", id="unknown-type"),
    pytest.param(_line({"object": {}}), "unknown event type", "", id="no-type"),
    pytest.param(
        _line({"type": "ADDED", "object": _without_version(node("n9"))}),
        "no resourceVersion",
        "'n9'",
        id="no-resource-version",
    ),
    pytest.param(
        _line({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "99999999999"}}}),
        "implausible resourceVersion",
        "",
        id="bookmark-from-the-future",
    ),
    pytest.param(
        _line(event("MODIFIED", node("n1", efa=0), "99999999999")),
        "implausible resourceVersion",
        "",
        id="event-from-the-future",
    ),
]


@pytest.mark.parametrize(("line", "cause", "name"), BAD_LINES)
async def test_a_bad_line_is_rejected_once_and_the_watch_resumes_from_the_last_good_version(
    line: bytes, cause: str, name: str, backoffs: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    good = _line(event("ADDED", node("n2", efa=2), "101"))

    def setup(api: FakeApi) -> None:
        # The first stream: a good event, then the bad line (the stream stays open after it).
        api.script(NODES, WatchResponse(chunks=[good + b"\n" + line + b"\n"], close=False))

    async with operator([node("n1", efa=32)], setup=setup) as op:
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the watch resumed after the bad line")
        assert op.api.watches(NODES)[1]["resourceVersion"] == "101"  # the last good version
        # The operator is still there, and the next real change reaches the facts.
        await op.api.emit(NODES, event("MODIFIED", node("n1", efa=8), "102"))
        await eventually(lambda: op.efa().get("n1") == 8, "the next real change")
        assert op.efa() == {"n1": 8, "n2": 2}  # nothing of the bad line was taken
        assert node_events(op.metrics, "rejected") == 1
        assert node_events(op.metrics, "applied") == 3  # the listed node and two events
        assert len(op.api.lists(NODES)) == 1  # resumed, not listed again
        assert backoffs == [1.0]
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(said) == 1, said
        assert said[0].startswith(f"watch of {NODES}: rejected a line ({cause}")
        assert said[0].endswith(
            'resuming from resourceVersion 101 (said once per cause; fabriccap_watch_events_total{kind="node",'
            'result="rejected"} counts them)'
        )
        if name:
            assert f"object {name}" in said[0]


async def test_each_cause_is_said_once_however_often_it_comes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="fabriccap.controller.informers")

    def setup(api: FakeApi) -> None:
        api.script(
            NODES,
            *(WatchResponse(chunks=[b"[]\n"], close=False) for _ in range(3)),
            WatchResponse(chunks=[b'"x"\n'], close=False),  # the same cause again
            WatchResponse(chunks=[_line({"type": "ADDED", "object": "str"}) + b"\n"], close=False),
        )

    async with operator([node("n1")], setup=setup) as op:
        await eventually(lambda: len(op.api.watches(NODES)) == 6, "every scripted stream rejected")
        assert node_events(op.metrics, "rejected") == 5
        said = [r.getMessage() for r in caplog.records]
        assert [message.split("(")[1].split(":")[0] for message in said] == ["not an object", "object is not an object"]
        assert {query["resourceVersion"] for query in op.api.watches(NODES)} == {"100"}


async def test_an_object_that_cannot_be_used_is_left_out_and_the_watch_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A real event of a bad object: replaying it would bring the same object, so the watch
    goes on from it; the object is left out (its pool fails closed), counted and said once."""
    caplog.set_level(logging.ERROR, logger="fabriccap.controller.informers")
    nameless = {"apiVersion": "v1", "kind": "Node", "metadata": {"labels": {NODEGROUP: "p5"}}}
    async with operator([node("n1")]) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await op.api.emit(NODES, event("ADDED", nameless, "101"), event("ADDED", nameless, "102"))
        await op.api.emit(NODES, event("ADDED", node("n2"), "103"))
        await eventually(lambda: "n2" in op.store.nodes, "the event after the bad ones")
        assert node_events(op.metrics, "rejected") == 2
        assert [r.getMessage() for r in caplog.records] == ["ignoring node: Node without metadata.name"]
        await op.api.close_stream(NODES)
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the resumed watch")
        assert op.api.watches(NODES)[1]["resourceVersion"] == "103"


async def test_a_listed_item_that_is_not_an_object_fails_the_list_not_the_informer(backoffs: list[float]) -> None:
    async with operator([node("n1")]) as op:
        op.api.collections[NODES].items.append(["not", "an", "object"])  # type: ignore[arg-type]
        await eventually(lambda: len(op.api.lists(NODES)) >= 2, "the LIST retried")
        assert not op.nodes.listed.is_set()
        assert node_events(op.metrics, "rejected") >= 1
        op.api.collections[NODES].items.pop()
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert set(op.store.nodes) == {"n1"}


# --- freshness: earned by progress -----------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_an_accepted_watch_is_not_progress_a_bookmark_that_advances_is() -> None:
    clock = Clock()
    async with operator([node("n1")]) as op:
        op.nodes.clock = clock  # before the informer's first step
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert op.nodes.last_progress == 1000.0  # the LIST
        clock.now = 1010.0
        await op.api.close_stream(NODES)  # the server ends the stream; a new one is accepted
        await eventually(lambda: len(op.api.streams[NODES]) == 2, "the second stream")
        await op.api.emit(NODES, bookmark("100"))  # where the view already is: no news
        await op.api.close_stream(NODES)
        await eventually(lambda: len(op.api.streams[NODES]) == 3, "the third stream")
        assert op.nodes.connected
        assert op.nodes.last_progress == 1000.0
        clock.now = 1020.0
        await op.api.emit(NODES, bookmark("150"))
        await eventually(lambda: op.nodes.last_progress == 1020.0, "the bookmark that advanced the version")
        clock.now = 1030.0
        await op.api.emit(NODES, event("MODIFIED", node("n1", efa=4), "151"))
        await eventually(lambda: op.nodes.last_progress == 1030.0, "the event that advanced it")


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming-list", "paged-list"])
async def test_a_listing_makes_the_view_current_as_of_its_start_not_its_end(
    monkeypatch: pytest.MonkeyPatch, streaming: bool
) -> None:
    # A listing is a snapshot taken when it is requested. A million pods under churn took two
    # minutes to read: a view called current at the end was two minutes older than it said.
    clock = Clock()

    def setup(api: FakeApi) -> None:
        api.streaming_lists = streaming

    async with operator([node("n1"), node("n2"), node("n3")], setup=setup) as op:
        op.nodes.clock = clock  # before the informer's first step
        apply_listed = op.nodes._apply_listed

        def slowly(body: Any) -> Any:
            clock.now += 10.0
            return apply_listed(body)

        monkeypatch.setattr(op.nodes, "_apply_listed", slowly)
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert clock.now == 1030.0  # three nodes read, ten seconds each
        assert op.nodes.last_progress == 1000.0
        assert op.nodes.streaming is streaming  # refused (422), it listed in pages


async def test_a_silent_watch_is_replaced_by_a_list_before_the_view_goes_stale(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """L8: the watch is accepted and says nothing; a node loses its EFA meanwhile."""
    caplog.set_level(logging.WARNING, logger="fabriccap.controller.informers")
    async with operator([node("n1", efa=32)], progress_timeout=0.3) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        op.api.serve(NODES, "Node", [node("n1", efa=0)], "200")  # never sent on the watch
        await eventually(lambda: op.efa() == {"n1": 0}, "the change, from a LIST")
        assert len(op.api.lists(NODES)) >= 2
        # The LIST brought a change the watch had not delivered: that is the fault, and a WARNING.
        assert (
            f"the LIST of {NODES} that replaced a watch without progress found 1 change(s) the watch had not"
            " delivered; watching again from it" in caplog.messages
        )
        assert relists(op.metrics, "changes") == 1
        await eventually(lambda: op.api.watches(NODES)[-1]["resourceVersion"] == "200", "a watch from the new LIST")


async def test_a_quiet_watch_replaced_by_a_list_that_finds_nothing_missed_is_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A healthy quiet collection: no event, and bookmarks that do not advance its version (as
    the API server sends them for a kind nothing writes). The LIST that replaces the watch finds
    what the watch had: said at INFO, counted as found nothing; never a WARNING."""
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    async with operator([node("n1", efa=32)], progress_timeout=0.3) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await eventually(lambda: relists(op.metrics, "nothing") >= 2, "two LISTs that found nothing missed")
        assert relists(op.metrics, "changes") == 0
        assert op.efa() == {"n1": 32}
        assert f"the LIST of {NODES} found nothing its watch had missed; watching again" in caplog.messages
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert warned == [], warned


async def test_a_deletion_the_watch_missed_is_a_change_the_list_found(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="fabriccap.controller.informers")
    async with operator([node("n1", efa=32), node("n2", efa=32)], progress_timeout=0.3) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        op.api.serve(NODES, "Node", [node("n1", efa=32)], "200")  # n2 deleted, never sent on the watch
        await eventually(lambda: op.efa() == {"n1": 32}, "the deletion, from a LIST")
        assert relists(op.metrics, "changes") == 1
        assert any("found 1 change(s) the watch had not delivered" in message for message in caplog.messages)


async def test_a_stream_cut_inside_every_event_makes_no_progress(
    backoffs: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    """L9: every stream ends cleanly halfway through its first event."""
    caplog.set_level(logging.WARNING, logger="fabriccap.controller.informers")
    cut = _line(event("MODIFIED", node("n1", efa=0), "101"))[:60]

    def setup(api: FakeApi) -> None:
        api.script(NODES, *(WatchResponse(chunks=[cut], close=True) for _ in range(200)))

    clock = Clock()
    async with operator([node("n1", efa=32)], setup=setup, progress_timeout=0.3) as op:
        op.nodes.clock = clock
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await eventually(lambda: len(op.api.watches(NODES)) >= 3, "streams cut and resumed")
        assert op.nodes.last_progress == 1000.0  # reconnecting is not progress
        assert node_events(op.metrics, "rejected") >= 2
        assert any("rejected a line (truncated line" in message for message in caplog.messages)
        op.api.serve(NODES, "Node", [node("n1", efa=0)], "300")
        clock.now = 1001.0
        await eventually(lambda: op.efa() == {"n1": 0}, "the change, from the LIST that replaced the watch")
        assert op.nodes.last_progress == 1001.0


async def test_a_watch_that_cannot_list_either_goes_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    """The view is as old as its last progress: a silent watch whose LISTs fail too is stale,
    and so are /healthz, the gauge and pool_ready, which read the same freshness."""
    recorded_sleeps(monkeypatch, watchers, pause=0.05)
    async with operator([node("n1")], progress_timeout=0.3, stale_after=0.6) as op:
        await op.listed()
        assert op.store.fresh()
        op.api.list_failures[NODES] = deque([500] * 10_000)
        await eventually(lambda: not op.store.fresh("node"), "nodes to go stale")
        assert set(op.store.stale_kinds()) == {"node"}
        assert op.store.fresh("pod")
        op.freshness.export()
        exported = op.metrics.registry.get_sample_value(
            "fabriccap_watch_last_event_timestamp_seconds", {"kind": "node"}
        )
        assert exported is not None and exported < op.freshness.wall() - 0.6
        op.api.list_failures[NODES].clear()
        await eventually(lambda: op.store.fresh(), "listed again")


async def test_a_watch_resumed_from_a_version_that_brings_nothing_lists_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """L11 with a version the plausibility rule cannot judge (not a number): the watch resumes
    from it, the server has nothing past it, and the missing progress brings a LIST."""
    caplog.set_level(logging.WARNING, logger="fabriccap.controller.informers")
    async with operator([node("n1", efa=32)], progress_timeout=0.3) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await op.api.emit(NODES, bookmark("opaque-bogus"))
        await op.api.close_stream(NODES)
        await eventually(lambda: len(op.api.watches(NODES)) >= 2, "the watch resumed from the bogus version")
        assert op.api.watches(NODES)[1]["resourceVersion"] == "opaque-bogus"
        op.api.serve(NODES, "Node", [node("n1", efa=0)], "400")
        await eventually(lambda: op.efa() == {"n1": 0}, "the change, from a LIST")
        assert any("the watch had not delivered" in message for message in caplog.messages)


@pytest.mark.parametrize(
    "answer",
    [
        WatchResponse(status=504, message="Too large resource version: 999, current: 1"),
        WatchResponse(
            events=[
                {
                    "type": "ERROR",
                    "object": {"kind": "Status", "code": 504, "message": "Too large resource version: 999, current: 1"},
                }
            ]
        ),
    ],
    ids=["http-504", "error-event"],
)
async def test_a_version_the_server_has_not_reached_lists_again(answer: WatchResponse) -> None:
    def setup(api: FakeApi) -> None:
        api.script(NODES, answer)

    async with operator([node("n1")], setup=setup) as op:
        await eventually(lambda: len(op.api.lists(NODES)) == 2, "a LIST after the answer")


async def test_the_store_says_which_kinds_are_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one interface the publisher reads: ``FactStore.stale_kinds()`` and ``fresh(kind)``."""
    recorded_sleeps(monkeypatch, watchers, pause=0.05)

    def setup(api: FakeApi) -> None:
        api.list_failures[PODS] = deque([500] * 10_000)  # the plugin pods cannot be read

    async with operator([node("n1")], setup=setup, progress_timeout=0.3, stale_after=0.6) as op:
        await op.listed(but="pod")
        await eventually(lambda: "pod" in op.store.stale_kinds(), "pods stale")
        assert op.store.stale_kinds() == {"pod": None}  # never listed
        assert op.store.fresh("node") and not op.store.fresh("pod") and not op.store.fresh()


async def test_a_stream_that_ends_inside_an_event_is_a_rejected_line() -> None:
    async with fake_api() as (api, _):
        api.serve(NODES, "Node", [], "1")
        api.script(NODES, WatchResponse(chunks=[b'{"type": "ADDED", "obj'], close=True))
        async with KubeClient(Credentials(server=api.url)) as client:
            with pytest.raises(WatchLineError) as caught:
                async for _ in client.watch(NODES, "1"):
                    pass
        assert caught.value.cause == "truncated line"


def streaming(api: FakeApi) -> None:
    api.streaming_lists = True


async def test_a_quiet_watch_is_checked_by_a_streaming_list_where_lists_stream() -> None:
    """Nothing comes on a quiet kind's watch (the API server sends no bookmark that would not
    advance its version): the LIST that checks the view streams, one object at a time."""
    async with operator([node("n1", efa=32)], progress_timeout=0.3, setup=streaming) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await eventually(lambda: relists(op.metrics, "nothing") == 1, "the check after no progress")
        assert len(op.api.streaming_list_requests(NODES)) == 2 and op.api.lists(NODES) == []
        op.api.serve(NODES, "Node", [node("n1", efa=0)], "200")  # never sent on the watch
        await eventually(lambda: op.efa() == {"n1": 0}, "the change, from the next check")
        assert relists(op.metrics, "changes") == 1 and op.api.lists(NODES) == []


@pytest.mark.parametrize("answer", ["silent", "504"])
async def test_a_check_whose_stream_fails_goes_to_pages(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, answer: str
) -> None:
    """The watch path itself may be what fails: a streaming list that says nothing is given up
    after CHECK_STREAM_READ_TIMEOUT, and one the server refuses (a watch cache that cannot
    catch up answers 504) is not retried as one: the check reads pages."""
    monkeypatch.setattr(watchers, "CHECK_STREAM_READ_TIMEOUT", 0.3)
    caplog.set_level(logging.WARNING, logger="fabriccap.controller.informers")
    async with operator([node("n1", efa=32)], progress_timeout=0.3, setup=streaming) as op:
        await op.listed()  # the refusal is the next streaming list's, whichever kind's
        if answer == "silent":
            op.api.streaming_lists_silent = 1
        else:
            op.api.streaming_list_refusals.append(int(answer))
        op.api.serve(NODES, "Node", [node("n1", efa=0)], "200")  # never sent on the watch
        await eventually(lambda: op.efa() == {"n1": 0}, "the change, from pages")
        assert len(op.api.lists(NODES)) == 1 and len(op.api.streaming_list_requests(NODES)) == 2
        assert any(message.startswith(f"streaming list of {NODES} broken") for message in caplog.messages)


# A version from the future is judged against one the watch already had: a listing has none.
LISTED_BAD_LINES = [param for param in BAD_LINES if not str(param.id).endswith("-from-the-future")]


@pytest.mark.parametrize(("line", "cause", "name"), LISTED_BAD_LINES)
async def test_a_bad_line_in_a_streaming_list_is_rejected_and_the_list_read_in_pages(
    line: bytes, cause: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As on a watch (counted, said once per cause), and the listing is read in pages that once."""
    caplog.set_level(logging.ERROR, logger="fabriccap.controller.informers")

    def setup(api: FakeApi) -> None:
        api.streaming_lists = True
        api.streaming_list_first_lines.append(line)

    async with operator([node("n1", efa=32)], setup=setup) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert op.efa() == {"n1": 32} and len(op.api.lists(NODES)) == 1
        assert node_events(op.metrics, "rejected") == 1
        (said,) = [r.getMessage() for r in caplog.records if "rejected a line" in r.getMessage()]
        assert said.startswith(f"watch of {NODES}: rejected a line ({cause}")
        assert "; listing in pages this time (said once per cause" in said


@pytest.fixture
def real_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The informers' own sleeps, not cut short: nudges wait for a quiet spell, and an absent
    kind waits to look again."""
    monkeypatch.setattr(watchers, "asyncio", asyncio)


def nudges(api: FakeApi, path: str) -> list[dict[str, str]]:
    return [query for query in api.lists(path) if "fieldSelector" in query]


def listings(api: FakeApi, path: str) -> list[dict[str, str]]:
    return [query for query in api.lists(path) if "fieldSelector" not in query]


@pytest.mark.usefixtures("real_sleeps")
async def test_a_quiet_watch_is_nudged_once_per_quiet_spell_and_the_bookmark_it_brings_is_progress() -> None:
    """No check: the nudge (a consistent LIST that matches no object) makes the API server's
    next bookmark advance, and that bookmark is the progress; nothing else is listed."""
    async with operator([node("n1", efa=32)], progress_timeout=5.0, nudge_after=0.1) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await eventually(lambda: len(nudges(op.api, NODES)) == 1, "the quiet watch nudged")
        assert nudges(op.api, NODES) == [{"fieldSelector": watchers.NUDGE_SELECTOR}]
        await asyncio.sleep(0.3)
        assert len(nudges(op.api, NODES)) == 1  # once, until progress
        assert nudged(op.metrics, "sent") == 1
        await op.api.emit(NODES, bookmark("101"))  # what the nudge brings, on a real server
        await eventually(lambda: op.nodes.version == "101", "the bookmark taken as progress")
        await op.api.close_stream(NODES)  # the request ends after its bookmark advanced
        await eventually(lambda: len(nudges(op.api, NODES)) == 2, "the next quiet spell nudged")
        assert op.nodes.nudge_after == 0.1  # still nudging
        assert len(listings(op.api, NODES)) == 1 and relists(op.metrics, "nothing") == 0
        assert nudged(op.metrics, "gave_up") == 0


@pytest.mark.usefixtures("real_sleeps")
async def test_a_nudge_that_fails_is_sent_again() -> None:
    async with operator([node("n1", efa=32)], progress_timeout=5.0, nudge_after=0.1) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        op.api.list_failures[NODES] = deque([500])
        # The fake records a nudge as it comes, before its answer reaches the operator: wait
        # for the answer too (checked at once, nudged_at was None in 2 of 17 runs).
        await eventually(
            lambda: len(nudges(op.api, NODES)) == 2 and op.nodes.nudged_at is not None, "the nudge sent again"
        )
        assert len(nudges(op.api, NODES)) == 2
        assert (nudged(op.metrics, "failed"), nudged(op.metrics, "sent")) == (1, 1)


@pytest.mark.usefixtures("real_sleeps")
async def test_a_request_nudged_in_time_that_ends_without_progress_stops_the_nudges(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A server whose cache does not move for a nudge: the request ends with no bookmark, so
    the quiet spells are left to the check from then on, which still finds what was missed."""
    monkeypatch.setattr(watchers, "BOOKMARK_LEAD", 0.0)
    monkeypatch.setattr(watchers, "SHORT_WATCH_SECONDS", 0.0)  # this request lasts a fraction of one
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    async with operator([node("n1", efa=32)], progress_timeout=1.0, nudge_after=0.1) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await eventually(lambda: op.nodes.nudged_at is not None, "the quiet watch nudged")
        await op.api.close_stream(NODES)  # the request's end: no bookmark came
        await eventually(lambda: op.nodes.nudge_after is None, "the nudges stopped")
        assert any("its quiet spells are checked by a LIST from now on" in m for m in caplog.messages)
        assert nudged(op.metrics, "gave_up") == 1
        op.api.serve(NODES, "Node", [node("n1", efa=0)], "200")  # never sent on the watch
        await eventually(lambda: op.efa() == {"n1": 0}, "the change, from the check")
        assert relists(op.metrics, "changes") == 1 and len(nudges(op.api, NODES)) == 1


@pytest.mark.parametrize("stale_after", [30.0, 150.0, 600.0])
def test_a_nudged_watch_is_bookmarked_before_it_would_be_checked(stale_after: float) -> None:
    """The first nudge, then the bookmark at the end of the request under way (BOOKMARK_LEAD
    before it, at the latest a whole request later), come before the check would."""
    watch_seconds, _, progress_timeout, nudge_after = watchers.watch_timings(stale_after)
    assert nudge_after + watch_seconds - watchers.BOOKMARK_LEAD < progress_timeout


@pytest.mark.usefixtures("real_sleeps")
async def test_a_kind_the_server_does_not_serve_is_never_nudged() -> None:
    """No watch is up for it (nothing to list): a nudge would only be answered 404, forever."""
    async with operator([node("n1", efa=32)], slices=None, progress_timeout=5.0, nudge_after=0.1) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        absent = {informer.path for informer in op.informers if informer.absent}
        assert RESOURCE_SLICES in absent  # answered 404: carrying on without them
        await eventually(lambda: len(nudges(op.api, NODES)) == 1, "the served kind's quiet watch nudged")
        await asyncio.sleep(0.5)  # five times the quiet time before a nudge
        nudged = {path for _, path, query, _ in op.api.requests if "fieldSelector" in query}
        assert NODES in nudged and not nudged & absent, nudged


# --- a hostile review of the watch path (stop 59) -------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [event("MODIFIED", node("n1", efa=0), "\u00b2"), bookmark("\u2460")],
    ids=["event", "bookmark"],
)
async def test_a_version_of_digits_that_are_not_ascii_is_opaque_not_the_informers_end(
    line: dict[str, Any],
) -> None:
    """``"²"`` and ``"①"`` are digits to str.isdigit() and not to int(): such a version ended
    the informer (and the operator). It is an opaque version now, and the watch goes on."""
    async with operator([node("n1", efa=32)]) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await op.api.emit(NODES, line, event("MODIFIED", node("n1", efa=8), "102"))
        await eventually(lambda: op.efa() == {"n1": 8}, "the event after it")
        assert node_events(op.metrics, "rejected") == 0


async def test_a_listing_whose_version_is_digits_that_are_not_ascii_is_listed() -> None:
    async with operator([node("n1", efa=32)], resource_version="\u00b3") as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert op.efa() == {"n1": 32}


async def test_a_watch_that_expires_before_it_moves_is_listed_again_after_a_growing_backoff(
    backoffs: list[float],
) -> None:
    """A server whose watch cache has moved on while a large collection was listed answers a
    watch from the listing's version with 410: listing again at once met the same answer, back
    to back (a fake answering every watch so made 1,001 LISTs in a second)."""

    def setup(api: FakeApi) -> None:
        api.script(NODES, *(WatchResponse(status=410) for _ in range(3)))

    async with operator([node("n1", efa=32)], setup=setup) as op:
        await eventually(lambda: len(op.api.lists(NODES)) == 4, "listed after each expiry")
        await eventually(lambda: len(op.api.watches(NODES)) == 4, "the fourth watch, which holds")
        assert backoffs == [1.0, 2.0, 4.0]
        # A watch that moved resets it: its expiry is listed again at once.
        await op.api.emit(NODES, event("MODIFIED", node("n1", efa=8), "101"))
        await eventually(lambda: op.efa() == {"n1": 8}, "the change")
        await op.api.emit(NODES, {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}})
        await eventually(lambda: len(op.api.lists(NODES)) == 5, "listed again")
        assert backoffs == [1.0, 2.0, 4.0]


async def test_a_watch_that_ends_at_once_with_nothing_in_it_is_backed_off(backoffs: list[float]) -> None:
    """A front end that does not stream ends each watch at once, empty: as client-go does with
    a very short watch, a failure to back off from, not a healthy end (5,329 watches a second)."""

    def setup(api: FakeApi) -> None:
        api.script(NODES, *(WatchResponse(close=True) for _ in range(3)))

    async with operator([node("n1", efa=32)], setup=setup) as op:
        await eventually(lambda: len(op.api.watches(NODES)) == 4, "the fourth watch, which holds")
        assert backoffs == [1.0, 2.0, 4.0]
        assert len(op.api.lists(NODES)) == 1  # resumed each time, not listed again
        await op.api.emit(NODES, event("MODIFIED", node("n1", efa=8), "101"))
        await eventually(lambda: op.efa() == {"n1": 8}, "the change on the watch that holds")


async def test_a_burst_read_from_a_backlog_does_not_lower_the_plausibility_ceiling(backoffs: list[float]) -> None:
    """The rule is anchored at the versions that were the server's newest (a listing's, a
    bookmark's), not at an event's: read late, an event's version is far behind the server's,
    and anchoring at it rejected the next event of the same burst."""
    clock = Clock()
    async with operator([node("n1", efa=32), node("n2", efa=32)], resource_version="100") as op:
        op.nodes.clock = clock
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        clock.now += 200.0  # a partition, then the backlog: 2,000,000 writes on, well in bounds
        await op.api.emit(
            NODES, event("MODIFIED", node("n1", efa=8), "110"), event("MODIFIED", node("n2", efa=0), "2000100")
        )
        await eventually(lambda: op.efa() == {"n1": 8, "n2": 0}, "both events of the burst")
        assert node_events(op.metrics, "rejected") == 0 and backoffs == []
        # Still a bound: far beyond what the server could have written since the listing.
        await op.api.emit(NODES, event("MODIFIED", node("n1", efa=1), "99999999999"))
        await eventually(lambda: node_events(op.metrics, "rejected") == 1, "the version from the future")
        assert op.efa() == {"n1": 8, "n2": 0}


async def test_more_watches_than_the_request_connections_all_open() -> None:
    """Each informer holds a watch for minutes: with streams capped at 32 connections, the
    informers past the 32nd (16 plugin namespaces: 36) never got a stream."""
    namespaces = [f"ns{index:02d}" for index in range(16)]
    config = build_config(
        {
            "workloads": {"enabled": False},
            "karpenter": {"enabled": False},
            "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": namespaces}}],
        }
    )

    def setup(api: FakeApi) -> None:
        for namespace in namespaces:
            api.serve(f"/apis/apps/v1/namespaces/{namespace}/daemonsets", "DaemonSet", [], "1")
            api.serve(f"/api/v1/namespaces/{namespace}/pods", "Pod", [], "1")

    async with operator([node("n1")], setup=setup, config=config) as op:
        assert len(op.informers) > 32
        await eventually(
            lambda: all(op.api.watches(informer.path) for informer in op.informers), "every informer watching"
        )


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming-list", "paged-list"])
async def test_a_listing_version_from_the_future_is_not_watched_from(streaming: bool, backoffs: list[float]) -> None:
    """A listing's version becomes what the watch resumes from, and was taken unjudged: one
    from beyond what the server could have written (a corrupted bookmark, a broken proxy) left
    the watch asking for a future version, answered with silence or a relist."""

    def setup(api: FakeApi) -> None:
        api.streaming_lists = streaming

    async with operator([node("n1", efa=32)], setup=setup) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert op.nodes.version == "100"
        op.api.serve(NODES, "Node", [node("n1", efa=0)], "99999999999")
        await op.api.emit(NODES, expired())
        await eventually(lambda: len(backoffs) >= 2, "the listing refused, and tried again")
        assert op.nodes.version == "100"
        assert all(query.get("resourceVersion") != "99999999999" for query in op.api.watches(NODES))
        if not streaming:
            assert op.efa() == {"n1": 32}  # judged before anything the page lists is applied
        else:
            assert node_events(op.metrics, "rejected") >= 1
        op.api.serve(NODES, "Node", [node("n1", efa=0)], "300")
        await eventually(lambda: op.nodes.version == "300", "listed at a plausible version")
        assert op.efa() == {"n1": 0}


async def test_a_watch_that_expired_is_not_connected_while_it_is_listed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """watch_connected said 1 through the relist that follows an expiry, from the watch that
    had just ended (only an expiry before any progress marked it down)."""
    async with operator([node("n1", efa=32)]) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        seen: list[bool] = []
        listing = op.nodes._initial_state

        async def observed() -> str:
            seen.append(op.nodes.connected)
            return await listing()

        monkeypatch.setattr(op.nodes, "_initial_state", observed)
        await op.api.emit(NODES, event("MODIFIED", node("n1", efa=8), "101"))
        await eventually(lambda: op.efa() == {"n1": 8}, "the watch moved")
        await op.api.emit(NODES, expired())
        await eventually(lambda: seen == [False], "listed again")
        await eventually(lambda: op.nodes.connected, "connected again once listed")


async def test_a_streaming_list_held_open_without_its_bookmark_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream kept open with nothing in it (or whitespace, which resets the read timeout) held
    the listing until the server's timeoutSeconds, which a front end need not keep."""
    monkeypatch.setattr(watchers, "STREAMING_LIST_SECONDS", 0)
    monkeypatch.setattr(watchers, "STREAMING_LIST_GRACE_SECONDS", 0.3)

    def setup(api: FakeApi) -> None:
        api.streaming_lists = True
        api.streaming_lists_silent = 1

    async with operator([node("n1", efa=32)], setup=setup) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert op.efa() == {"n1": 32}
        assert len(op.api.lists(NODES)) == 1  # in pages, this once
        assert op.nodes.streaming


async def test_a_stream_is_closed_before_the_backoff_that_follows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream left by an exception was closed by the event loop's finalizer hook, whenever
    that ran (and on CPython only): its connection stayed held into the backoff."""
    open_streams: list[int] = [0]
    at_backoff: list[int] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        at_backoff.append(open_streams[0])
        await real_sleep(0)

    monkeypatch.setattr(watchers, "asyncio", SimpleNamespace(**{**vars(asyncio), "sleep": sleep}))

    def setup(api: FakeApi) -> None:
        api.script(NODES, WatchResponse(chunks=[b"[]\n"]))

    async with operator([node("n1", efa=32)], setup=setup) as op:
        watch = op.client.watch

        async def counted(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            stream = watch(*args, **kwargs)
            counts = args[0] == NODES
            open_streams[0] += counts
            try:
                async for line in stream:
                    yield line
            finally:
                open_streams[0] -= counts
                await stream.aclose()

        monkeypatch.setattr(op.client, "watch", counted)
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await eventually(lambda: node_events(op.metrics, "rejected") == 1, "the bad line")
        await eventually(lambda: len(at_backoff) == 1, "the backoff")
        assert at_backoff == [0]
