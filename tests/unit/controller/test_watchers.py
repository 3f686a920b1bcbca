"""Informers and the KubeClient against a small fake API server: LIST pages, WATCH streams, resumes, relists."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import socket
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from fabriccap.controller import informers as watchers
from fabriccap.controller.freshness import Freshness
from fabriccap.controller.informers import Informer
from fabriccap.controller.memory import MemoryTrimmer
from fabriccap.core.facts import DaemonSetFacts, PodFacts, Pool, Toleration
from fabriccap.kube.client import KubeClient
from fabriccap.kube.credentials import Credentials
from fabriccap.kube.errors import KubeError
from fabriccap_devtools import world
from support.builders import EFA, KUBE_SYSTEM, NODEGROUP, daemon_set, node, pod, resource_slice
from support.configs import build_config
from support.fakeapi import (
    WAIT_SECONDS,
    Body,
    FakeApi,
    WatchResponse,
    bookmark,
    event,
    eventually,
    expired,
    fake_api,
    recorded_sleeps,
)
from support.informing import (
    ALL_PODS,
    DAEMON_SETS,
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Operator,
    node_events,
    operator,
    watch_events,
)
from support.publishing import Clock

NODE_POOLS = "/apis/karpenter.sh/v1/nodepools"
EC2_NODE_CLASSES = "/apis/karpenter.k8s.aws/v1/ec2nodeclasses"


@pytest.fixture(autouse=True)
def backoffs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The informers' backoff sleeps, recorded and skipped (so no test waits a second)."""
    return recorded_sleeps(monkeypatch, watchers)


# --- LIST -----------------------------------------------------------------------------------------


async def test_initial_list_fills_the_store_and_sets_listed() -> None:
    bodies = [node("n1", efa=32), node("n2", pool="p4", efa=4), node("cpu-1", pool="general", efa=None, gpu=None)]

    def setup(api: FakeApi) -> None:
        api.serve(DAEMON_SETS, "DaemonSet", [daemon_set()], "7")
        api.serve(PODS, "Pod", [pod("n1", name="efa-n1"), pod("n1", name="web", daemon_set_name=None)], "8")

    async with operator(bodies, resource_version="100", setup=setup) as op:
        assert [informer.path for informer in op.informers] == [
            NODES,
            DAEMON_SETS,
            PODS,
            DEVICE_CLASSES,
            DEVICE_TAINT_RULES,
            RESOURCE_SLICES,
            RESOURCE_CLAIMS,
        ]
        assert [informer.kind for informer in op.informers] == [
            "node",
            "daemonset",
            "pod",
            "deviceclass",
            "devicetaintrule",
            "resourceslice",
            "resourceclaim",
        ]
        await asyncio.wait_for(asyncio.gather(*(informer.listed.wait() for informer in op.informers)), WAIT_SECONDS)

        assert op.efa() == {"n1": 32, "n2": 4, "cpu-1": 0}
        n1 = op.store.nodes["n1"]
        assert (n1.pool, n1.instance_type, n1.cordoned) == (Pool(NODEGROUP, "p5"), "p5.48xlarge", False)
        assert op.store.nodes["n2"].pool == Pool(NODEGROUP, "p4")
        assert op.store.members(Pool(NODEGROUP, "p5")) == [n1]
        assert list(op.store.daemon_sets.values()) == [
            DaemonSetFacts(
                KUBE_SYSTEM,
                "aws-efa-k8s-device-plugin",
                (("app.kubernetes.io/instance", "efa"), ("app.kubernetes.io/name", "aws-efa-k8s-device-plugin")),
                (("name", "aws-efa-k8s-device-plugin"),),
                tolerations=(Toleration("CriticalAddonsOnly", "Exists", "", ""),),
            )
        ]
        # Only the DaemonSet-owned pod becomes facts.
        assert op.store.pods == {
            (KUBE_SYSTEM, "efa-n1"): PodFacts(KUBE_SYSTEM, "efa-n1", "n1", "aws-efa-k8s-device-plugin", True)
        }

        # Pages follow the object's size: Nodes are 10-20 KB each, Pods a few.
        assert op.api.lists(NODES) == [{"limit": "250"}]
        assert op.api.lists(PODS) == [{"limit": "500"}]
        await eventually(lambda: len(op.api.watches(NODES)) == 1, "the node watch")
        assert op.api.watches(NODES) == [
            {"watch": "true", "resourceVersion": "100", "allowWatchBookmarks": "true", "timeoutSeconds": "60"}
        ]
        await eventually(lambda: len(op.api.watches(PODS)) == 1, "the pod watch")
        assert op.api.watches(PODS)[0]["resourceVersion"] == "8"
        assert op.api.watches(DAEMON_SETS)[0]["resourceVersion"] == "7"
        assert node_events(op.metrics) == 3


async def test_listed_waits_for_the_list(backoffs: list[float]) -> None:
    def setup(api: FakeApi) -> None:
        api.list_failures[NODES] = deque([500, 504])

    async with operator([node("n1")], setup=setup) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert len(op.api.lists(NODES)) == 3
        assert backoffs == [1.0, 2.0]  # doubling between failed LISTs
        assert op.efa() == {"n1": 32}


async def test_pagination_sees_every_item(monkeypatch: pytest.MonkeyPatch) -> None:
    bodies = [node(f"n{index}", efa=index) for index in range(1, 6)]
    async with operator(bodies, resource_version="555") as op:
        op.nodes.page_size = 2  # before the informer's first step: the LIST has not started
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert op.efa() == {"n1": 1, "n2": 2, "n3": 3, "n4": 4, "n5": 5}
        assert op.api.lists(NODES) == [
            {"limit": "2"},
            {"limit": "2", "continue": "page-2"},
            {"limit": "2", "continue": "page-4"},
        ]
        await eventually(lambda: len(op.api.watches(NODES)) == 1, "the watch")
        assert op.api.watches(NODES)[0]["resourceVersion"] == "555"
        assert node_events(op.metrics) == 5


async def test_list_pages_and_items_give_each_item_its_kind() -> None:
    async with fake_api() as (api, client):
        api.serve(NODES, "Node", [node(f"n{index}") for index in range(5)], "9")
        for item in api.collections[NODES].items:
            del item["kind"]  # a real LIST omits each item's kind
        pages = [page async for page in client.list_pages(NODES, page_size=2)]
        assert [len(page["items"]) for page in pages] == [2, 2, 1]
        assert [page["metadata"]["resourceVersion"] for page in pages] == ["9", "9", "9"]
        items = [item async for item in client.list_items(NODES, page_size=3)]
        assert [(item["kind"], item["metadata"]["name"]) for item in items] == [("Node", f"n{i}") for i in range(5)]


# --- WATCH ----------------------------------------------------------------------------------------


async def test_watch_added_modified_deleted_update_the_store() -> None:
    async with operator([node("n1", efa=32), node("n2", efa=32)]) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await op.api.emit(NODES, event("ADDED", node("n3", efa=16), "101"))
        await eventually(lambda: "n3" in op.store.nodes, "n3 added")
        await op.api.emit(NODES, event("MODIFIED", node("n1", efa=0), "102"))
        await eventually(lambda: op.efa()["n1"] == 0, "n1 modified")
        await op.api.emit(NODES, event("DELETED", node("n2", efa=32), "103"))
        await eventually(lambda: "n2" not in op.store.nodes, "n2 deleted")
        assert op.efa() == {"n1": 0, "n3": 16}
        assert len(op.api.watches(NODES)) == 1  # all on one stream
        assert len(op.api.lists(NODES)) == 1


async def test_bookmark_moves_the_resume_version_without_touching_the_store() -> None:
    async with operator([node("n1")]) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        before = dict(op.store.nodes)
        op.store.take_dirty()
        await op.api.emit(NODES, bookmark("150"))
        await op.api.close_stream(NODES)
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the resumed watch")
        assert [query["resourceVersion"] for query in op.api.watches(NODES)] == ["100", "150"]
        assert op.store.nodes == before
        assert op.store.take_dirty() == (False, set())
        assert node_events(op.metrics) == 1  # the listed node; not the bookmark
        assert len(op.api.lists(NODES)) == 1


async def test_closed_stream_resumes_from_the_last_version_seen() -> None:
    async with operator([node("n1")]) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await op.api.emit(NODES, event("ADDED", node("n2"), "101"), event("MODIFIED", node("n1", efa=8), "102"))
        await op.api.close_stream(NODES)
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the resumed watch")
        await op.api.emit(NODES, event("MODIFIED", node("n2", efa=4), "103"))
        await op.api.close_stream(NODES)
        await eventually(lambda: len(op.api.watches(NODES)) == 3, "the second resumed watch")
        assert [query["resourceVersion"] for query in op.api.watches(NODES)] == ["100", "102", "103"]
        assert op.efa() == {"n1": 8, "n2": 4}
        assert len(op.api.lists(NODES)) == 1  # resumed, never re-listed


async def test_events_split_across_reads_are_reassembled() -> None:
    first = json.dumps(event("ADDED", node("n2", efa=2), "101")).encode()
    second = json.dumps(event("ADDED", node("n3", efa=3), "102")).encode()
    third = json.dumps(bookmark("103")).encode()
    chunks = [first[:10], first[10:] + b"\n" + second[:50], second[50:] + b"\n\n" + third + b"\n"]

    def setup(api: FakeApi) -> None:
        api.script(NODES, WatchResponse(chunks=chunks, close=True))

    async with operator([node("n1", efa=1)], setup=setup) as op:
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the resumed watch")
        assert op.efa() == {"n1": 1, "n2": 2, "n3": 3}
        assert op.api.watches(NODES)[1]["resourceVersion"] == "103"


async def test_a_garbled_event_line_resumes_the_watch_from_the_last_version(backoffs: list[float]) -> None:
    good = json.dumps(event("ADDED", node("n2", efa=2), "101")).encode()

    def setup(api: FakeApi) -> None:
        api.script(NODES, WatchResponse(chunks=[good + b"\n", b'{"type": "ADDED", "object": {\n'], close=False))

    async with operator([node("n1", efa=1)], setup=setup) as op:
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the watch resumed after the garbled line")
        assert op.api.watches(NODES)[1]["resourceVersion"] == "101"
        assert op.efa() == {"n1": 1, "n2": 2}
        assert len(op.api.lists(NODES)) == 1
        assert backoffs == [1.0]


async def test_error_410_event_lists_again_and_forgets_what_is_gone(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    async with operator([node("n1", efa=32), node("n2", efa=32), node("n3", efa=32)]) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await op.api.emit(NODES, event("MODIFIED", node("n3", efa=16), "120"))
        await eventually(lambda: op.efa()["n3"] == 16, "n3 modified")
        # While the watch was away n2 was deleted and n4 created; the watch's version expires.
        op.api.serve(NODES, "Node", [node("n1", efa=32), node("n3", efa=8), node("n4", efa=32)], "200")
        await op.api.emit(NODES, expired())
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the watch after the relist")
        assert len(op.api.lists(NODES)) == 2
        assert op.efa() == {"n1": 32, "n3": 8, "n4": 32}
        assert op.api.watches(NODES)[1]["resourceVersion"] == "200"
        assert f"watch of {NODES} expired; listing again" in caplog.messages
        assert op.metrics.registry.get_sample_value("fabriccap_watch_expirations_total", {"kind": "node"}) == 1
        assert op.metrics.registry.get_sample_value("fabriccap_watch_expirations_total", {"kind": "pod"}) == 0


async def test_a_listing_keeps_nothing_per_object_but_crosses_off_the_keys_held() -> None:
    # A listing used to collect a key string per object it named, to the end: 400,000 at 100,000
    # nodes, in arenas the facts kept after they were freed (docs/performance.md). It now starts
    # from the keys held and crosses off what it names: what is left at the end is gone.
    plugin = [pod("n1", name="efa-n1"), pod("n2", name="efa-n2")]
    web = [pod("n1", name=f"web-{index}", daemon_set_name=None) for index in range(3)]

    def setup(api: FakeApi) -> None:
        api.serve(PODS, "Pod", [*plugin, *web], "8")

    async with operator([node("n1", efa=32), node("n2", efa=32)], setup=setup) as op:
        (pods,) = [informer for informer in op.informers if informer.path == PODS]
        await asyncio.wait_for(pods.listed.wait(), WAIT_SECONDS)
        held = {key: key for key in op.store.pods}
        left: list[tuple[set[Any], ...]] = []
        listed = pods._listed

        def recorded(version: str) -> None:
            left.append(tuple(set(keys) for keys in pods._unlisted))
            listed(version)

        pods._listed = recorded  # type: ignore[method-assign]
        # While the watch was away efa-n2 went: the relist has efa-n1 and the web pods only.
        op.api.serve(PODS, "Pod", [plugin[0], *web], "30")
        await op.api.emit(PODS, expired())
        await eventually(lambda: len(op.api.watches(PODS)) == 2, "the watch after the relist")
        # Per facet (plugin pods, workload pods): what the relist did not name, as held.
        assert left == [({(KUBE_SYSTEM, "efa-n2")}, set())]
        (gone,) = left[0][0]
        assert gone is held[(KUBE_SYSTEM, "efa-n2")]
        assert sorted(op.store.pods) == [(KUBE_SYSTEM, "efa-n1")]
        assert pods._unlisted == ()  # nothing kept after the listing


@pytest.mark.parametrize("streaming", [False, True], ids=["pages", "streaming"])
async def test_a_listing_counts_and_gives_memory_back_a_tally_at_a_time(
    monkeypatch: pytest.MonkeyPatch, streaming: bool
) -> None:
    """Not only at the listing's end: a tally of objects is counted into
    fabriccap_watch_events_total and told to the trimmer, which gives back what their bodies
    took once enough were read; the last short tally is counted when the listing ends."""
    read: list[tuple[str, float] | str] = []
    monkeypatch.setattr(watchers, "LISTED_PER_TALLY", 3)
    monkeypatch.setattr(watchers, "MIN_LISTED_BETWEEN_TRIMS", 3)
    monkeypatch.setattr(
        watchers, "MemoryTrimmer", functools.partial(MemoryTrimmer, trim=lambda _pad: read.append("trim"))
    )
    apply_listed = watchers.Informer._apply_listed

    def applied(informer: watchers.Informer, body: Mapping[str, Any]) -> str:
        if informer.kind == "node":
            labels = {"kind": "node", "result": "applied"}
            counted = informer.metrics.registry.get_sample_value("fabriccap_watch_events_total", labels)
            read.append((body["metadata"]["name"], counted or 0.0))
        return apply_listed(informer, body)

    monkeypatch.setattr(watchers.Informer, "_apply_listed", applied)

    def served(api: FakeApi) -> None:
        api.streaming_lists = streaming

    nodes = [node(f"n{index}", efa=32) for index in range(7)]
    async with operator(nodes, setup=served) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        # Each node with what was counted as it was read: a tally, and a trim, every third.
        assert read == [("n0", 0), ("n1", 0), ("n2", 0), "trim", ("n3", 3), ("n4", 3), ("n5", 3), "trim", ("n6", 6)]
        assert node_events(op.metrics) == 7


async def test_a_large_listing_gives_the_memory_its_bodies_took_back(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(watchers, "MIN_LISTED_BETWEEN_TRIMS", 3)
    monkeypatch.setattr(watchers, "MemoryTrimmer", functools.partial(MemoryTrimmer, trim=trims.append))
    nodes = [node("n1", efa=32), node("n2", efa=32), node("n3", efa=32)]
    async with operator(nodes) as op:
        await asyncio.wait_for(asyncio.gather(*(informer.listed.wait() for informer in op.informers)), WAIT_SECONDS)
        assert trims == [0]  # the three nodes; the other kinds, empty, are not worth a trim
        op.api.serve(NODES, "Node", [node("n1", efa=32), node("n2", efa=8)], "200")
        await op.api.emit(NODES, expired())
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the watch after the relist")
        assert trims == [0]  # two objects since the last trim: not yet worth one
        await op.api.emit(NODES, expired())
        await eventually(lambda: len(op.api.watches(NODES)) == 3, "the watch after the second relist")
        assert trims == [0, 0]  # four listed since the last trim


async def test_a_watch_under_churn_gives_memory_back_after_many_lines_and_not_more_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trims: list[int] = []
    now = [0.0]
    monkeypatch.setattr(watchers, "MIN_LINES_BETWEEN_TRIMS", 3)
    monkeypatch.setattr(watchers, "MIN_SECONDS_BETWEEN_TRIMS", 10.0)
    monkeypatch.setattr(
        watchers, "MemoryTrimmer", functools.partial(MemoryTrimmer, trim=trims.append, clock=lambda: now[0])
    )
    async with operator([node("n1", efa=32)]) as op:
        await asyncio.wait_for(asyncio.gather(*(informer.listed.wait() for informer in op.informers)), WAIT_SECONDS)
        assert trims == []  # one node listed: not worth a trim
        await op.api.emit(NODES, event("MODIFIED", node("n1", efa=9), "100"), bookmark("101"))
        await op.api.emit(NODES, event("MODIFIED", node("n1", efa=8), "102"))
        await eventually(lambda: op.efa() == {"n1": 8}, "the first changes")
        await eventually(lambda: trims == [0], "a trim after the third line")
        now[0] = 9.0
        await op.api.emit(NODES, *(event("MODIFIED", node("n1", efa=efa), str(103 + efa)) for efa in range(4)))
        await eventually(lambda: op.efa() == {"n1": 3}, "four more changes")
        assert trims == [0]  # enough lines, but 9 s after the last trim
        now[0] = 10.0
        await op.api.emit(NODES, event("MODIFIED", node("n1", efa=16), "110"))
        await eventually(lambda: trims == [0, 0], "a trim once 10 s have passed")
        assert op.nodes.watch_trimmer is not None and op.nodes.watch_trimmer.work == 0


async def test_a_streaming_list_fills_the_store_and_the_watch_follows_its_bookmark() -> None:
    def streaming(api: FakeApi) -> None:
        api.streaming_lists = True

    async with operator([node("n1", efa=32), node("n2", efa=32)], resource_version="300", setup=streaming) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert op.efa() == {"n1": 32, "n2": 32}
        assert op.api.lists(NODES) == []  # no page was asked for
        [request] = op.api.streaming_list_requests(NODES)
        assert (request["sendInitialEvents"], request["resourceVersionMatch"]) == ("true", "NotOlderThan")
        assert "resourceVersion" not in request  # a consistent read, as a LIST without a version
        await eventually(lambda: len(op.api.watches(NODES)) == 1, "the watch after the streaming list")
        assert op.api.watches(NODES)[0]["resourceVersion"] == "300"  # the initial-events-end bookmark's
        assert node_events(op.metrics) == 2
        await op.api.emit(NODES, event("MODIFIED", node("n2", efa=16), "301"))
        await eventually(lambda: op.efa()["n2"] == 16, "n2 modified")
        # A relist after 410 streams again, and forgets what the new snapshot no longer has.
        op.api.serve(NODES, "Node", [node("n1", efa=32)], "400")
        await op.api.emit(NODES, expired())
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the watch after the second streaming list")
        assert op.efa() == {"n1": 32}
        assert len(op.api.streaming_list_requests(NODES)) == 2 and op.api.lists(NODES) == []


async def test_a_streaming_list_cut_short_is_read_in_pages_that_once(caplog: pytest.LogCaptureFixture) -> None:
    def cut_once(api: FakeApi) -> None:
        api.streaming_lists = True
        api.streaming_lists_cut = 1

    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    async with operator([node("n1", efa=32)], setup=cut_once) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert op.efa() == {"n1": 32}
        assert len(op.api.streaming_list_requests(NODES)) == 1 and len(op.api.lists(NODES)) == 1
        assert op.nodes.streaming  # a broken stream says nothing about the server
        assert any(f"streaming list of {NODES} broken" in message for message in caplog.messages)
        await eventually(lambda: len(op.api.watches(NODES)) == 1, "the watch")
        await op.api.emit(NODES, expired())
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the watch after the relist")
        assert len(op.api.streaming_list_requests(NODES)) == 2 and len(op.api.lists(NODES)) == 1


async def test_a_server_without_streaming_lists_is_listed_in_pages_and_asked_again_an_hour_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Refused once (422: the WatchList gate off), streaming lists were off for the process's
    life: a control plane upgraded to 1.34 was listed in pages until the operator restarted."""
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    clock = Clock()
    async with operator([node("n1", efa=32)]) as op:  # the fake answers 422, as 1.33 does
        op.nodes.clock = clock
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert op.efa() == {"n1": 32}
        assert len(op.api.streaming_list_requests(NODES)) == 1 and len(op.api.lists(NODES)) == 1
        assert not op.nodes.streaming
        assert [message for message in caplog.messages if "no streaming list" in message and NODES in message] == [
            f"{NODES}: no streaming list (WATCH {NODES}: 422 sendInitialEvents is forbidden for watch unless the "
            "WatchList feature gate is enabled); listing in pages, and asking again in 3600s"
        ]
        await eventually(lambda: len(op.api.watches(NODES)) == 1, "the watch")
        await op.api.emit(NODES, expired())
        await eventually(lambda: len(op.api.lists(NODES)) == 2, "the relist, in pages")
        assert len(op.api.streaming_list_requests(NODES)) == 1  # not asked again within the hour
        op.api.streaming_lists = True  # the upgrade
        clock.now += watchers.STREAMING_RETRY_SECONDS
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "watching again")
        await op.api.emit(NODES, expired())
        await eventually(lambda: len(op.api.streaming_list_requests(NODES)) == 2, "a streaming list asked for")
        await eventually(lambda: len(op.api.watches(NODES)) == 3, "watching from the streamed list")
        assert op.nodes.streaming and len(op.api.lists(NODES)) == 2


async def test_http_410_on_watch_lists_again() -> None:
    async with operator([node("n1"), node("n2")]) as op:
        await eventually(lambda: len(op.api.streams.get(NODES, [])) == 1, "the first watch")
        op.api.serve(NODES, "Node", [node("n2")], "300")
        op.api.script(NODES, WatchResponse(status=410))
        await op.api.close_stream(NODES)  # the resumed watch is answered 410 Gone
        await eventually(lambda: len(op.api.watches(NODES)) == 3, "the watch after the relist")
        assert len(op.api.lists(NODES)) == 2
        assert list(op.store.nodes) == ["n2"]
        assert [query["resourceVersion"] for query in op.api.watches(NODES)] == ["100", "100", "300"]


async def test_http_500_on_watch_resumes_after_backoff(backoffs: list[float], caplog: pytest.LogCaptureFixture) -> None:
    def setup(api: FakeApi) -> None:
        api.script(
            NODES,
            WatchResponse(status=500),
            WatchResponse(status=503),
            WatchResponse(events=[event("ADDED", node("n2"), "105")], close=True),
            WatchResponse(status=500),
        )

    async with operator([node("n1")], setup=setup) as op:
        await eventually(lambda: len(op.api.streams.get(NODES, [])) == 2, "the watch after the last failure")
        versions = [query["resourceVersion"] for query in op.api.watches(NODES)]
        assert versions == ["100", "100", "100", "105", "105"]
        # Doubling after each failure; a healthy stream resets the backoff.
        assert backoffs == [1.0, 2.0, 1.0]
        assert len(op.api.lists(NODES)) == 1
        assert set(op.store.nodes) == {"n1", "n2"}
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and NODES in r.getMessage()]
        assert warnings[0] == (f"watch of {NODES} interrupted: WATCH {NODES}: 500 scripted HTTP 500; resuming in 1s")


async def test_non_410_error_event_resumes_without_relisting(backoffs: list[float]) -> None:
    async with operator([node("n1")]) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await op.api.emit(NODES, event("ADDED", node("n2"), "110"))
        await op.api.emit(NODES, {"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "boom"}})
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the resumed watch")
        assert op.api.watches(NODES)[1]["resourceVersion"] == "110"
        assert backoffs == [1.0]
        assert len(op.api.lists(NODES)) == 1


async def test_an_unusable_quantity_keeps_the_node_as_not_advertising(caplog: pytest.LogCaptureFixture) -> None:
    """Fail closed: a node left out would let the rest of its pool look uniform."""
    caplog.set_level(logging.ERROR, logger="fabriccap.controller.informers")
    async with operator([node("good", efa=32), node("bad", efa="abc", efa_capacity=32)]) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert op.efa() == {"good": 32, "bad": 0}
        assert op.store.nodes["bad"].problem_with(EFA) == f"status.allocatable[{EFA}]: 'abc' is not a quantity"
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert errors == [
            f"node bad: unusable quantity (status.allocatable[{EFA}]: 'abc' is not a quantity);"
            " it counts as not advertising"
        ]

        await op.api.emit(NODES, event("MODIFIED", node("bad", efa=32), "101"))  # repaired
        await eventually(lambda: op.efa()["bad"] == 32, "the repaired node")
        assert op.store.nodes["bad"].unusable == ()
        # Beyond any device count (the API server accepts it): fail closed again.
        await op.api.emit(NODES, event("MODIFIED", node("bad", efa="1e30", efa_capacity=32), "102"))
        await op.api.emit(NODES, event("ADDED", node("later", efa=4), "103"))
        await eventually(lambda: "later" in op.store.nodes, "the event after the unusable one")
        assert op.efa() == {"good": 32, "bad": 0, "later": 4}
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert errors[1:] == [
            f"node bad: unusable quantity (status.allocatable[{EFA}]: '1e30' is out of range (above 2147483647));"
            " it counts as not advertising"
        ]
        assert len(op.api.watches(NODES)) == 1  # the stream was never dropped


async def test_watch_events_metric_counts_items_and_events_not_bookmarks() -> None:
    async with operator([node("n1"), node("n2")]) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        assert node_events(op.metrics) == 2
        await op.api.emit(
            NODES,
            bookmark("101"),
            event("ADDED", node("n3"), "102"),
            bookmark("103"),
            event("MODIFIED", node("n3", efa=1), "104"),
            event("DELETED", node("n1"), "105"),
            bookmark("106"),
        )
        await op.api.close_stream(NODES)
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the resumed watch")
        assert op.api.watches(NODES)[1]["resourceVersion"] == "106"
        assert node_events(op.metrics) == 5
        pod_events = op.metrics.registry.get_sample_value(
            "fabriccap_watch_events_total", {"kind": "pod", "result": "applied"}
        )
        assert pod_events == 0


# --- KubeClient requests ------------------------------------------------------------------------


async def test_401_refreshes_a_rotated_token_file_and_retries_once(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("old")
    async with fake_api() as (api, _):
        api.serve(NODES, "Node", [node("n1")], "1")
        credentials = Credentials(server=api.url, token_file=token_file)
        credentials.refresh(force=True)
        token_file.write_text("rotated")  # the kubelet rotated it; the client still holds "old"
        api.required_token = "rotated"
        async with KubeClient(credentials) as client:
            listing = await client.get(NODES)
        assert [item["metadata"]["name"] for item in listing["items"]] == ["n1"]
        assert [auth for _, _, _, auth in api.requests] == ["Bearer old", "Bearer rotated"]


async def test_401_with_a_static_token_is_not_retried() -> None:
    async with fake_api() as (api, _):
        api.required_token = "right"
        async with KubeClient(Credentials(server=api.url, token="wrong")) as client:
            with pytest.raises(KubeError, match=f"^GET {NODES}: 401 Unauthorized$") as caught:
                await client.get(NODES)
        assert caught.value.status == 401
        assert len(api.requests) == 1


async def test_api_errors_carry_the_status_and_message() -> None:
    async with fake_api() as (_, client):
        with pytest.raises(KubeError) as caught:
            await client.get("/apis/fabriccap.io/v1alpha1/fabriccapabilities")
        assert caught.value.status == 404
        assert str(caught.value) == (
            "GET /apis/fabriccap.io/v1alpha1/fabriccapabilities: 404 the server could not find the requested "
            "resource (/apis/fabriccap.io/v1alpha1/fabriccapabilities)"
        )


async def test_writes_send_json_with_the_right_content_type() -> None:
    path = "/apis/fabriccap.io/v1alpha1/fabriccapabilities/efa-p5"
    async with fake_api() as (api, client):
        await client.create("/apis/fabriccap.io/v1alpha1/fabriccapabilities", {"metadata": {"name": "efa-p5"}})
        await client.merge_patch(path + "/status", {"status": {"nodes": 2}})
        await client.delete(path, {"propagationPolicy": "Background"})
        assert api.bodies == [
            ("POST", "application/json", {"metadata": {"name": "efa-p5"}}),
            ("PATCH", "application/merge-patch+json", {"status": {"nodes": 2}}),
            ("DELETE", "application/json", {"propagationPolicy": "Background"}),
        ]


async def test_unreachable_server() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    async with KubeClient(Credentials(server=f"http://127.0.0.1:{port}")) as client:
        with pytest.raises(KubeError, match=f"cannot reach the Kubernetes API at http://127.0.0.1:{port}"):
            await client.get(NODES)
        with pytest.raises(KubeError, match=f"watch {NODES} broken"):
            async for _ in client.watch(NODES, "1"):
                pass


# --- ResourceSlices -------------------------------------------------------------------------------


def slices_informer(op: Operator) -> Informer:
    (informer,) = [informer for informer in op.informers if informer.path == RESOURCE_SLICES]
    return informer


async def test_slices_become_per_node_device_counts() -> None:
    async with operator([node("n1", efa=None)], slices=[resource_slice("n1", efa=32, name="s1")]) as op:
        await asyncio.wait_for(slices_informer(op).listed.wait(), WAIT_SECONDS)
        assert op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count == 32
        await op.api.emit(RESOURCE_SLICES, event("MODIFIED", resource_slice("n1", efa=31, name="s1"), "51"))
        await eventually(
            lambda: op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count == 31, "a device lost"
        )
        await op.api.emit(RESOURCE_SLICES, event("DELETED", resource_slice("n1", efa=31, name="s1"), "52"))
        await eventually(lambda: not op.store.slices, "the slice deleted")
        assert op.store.node_slices == {}


def selecting_nothing() -> Body:
    """The aws-dranet class, edited to select no device."""
    body = world.efa_device_class()
    body["spec"]["selectors"][0]["cel"]["expression"] = 'device.driver == "no.such.driver"'
    return body


async def test_slices_are_read_with_the_clusters_classes_and_again_when_they_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")

    def setup(api: FakeApi) -> None:
        api.serve(DEVICE_CLASSES, "DeviceClass", [selecting_nothing()], "40")

    async with operator([node("n1", efa=None)], slices=[resource_slice("n1", efa=32, name="s1")], setup=setup) as op:
        await asyncio.wait_for(slices_informer(op).listed.wait(), WAIT_SECONDS)
        # Read with the cluster's class, not the built-in copy (32): listed again if the slices
        # came before the classes.
        await eventually(
            lambda: op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count == 0, "read with the class"
        )
        informer = slices_informer(op)

        def settled() -> bool:
            # Listed with the classes as they stand, and watching since that LIST.
            current = informer.read_with == informer.extractor.selection_signature(op.store.class_view())
            return current and len(op.api.watches(RESOURCE_SLICES)) >= len(op.api.lists(RESOURCE_SLICES))

        def relists() -> int:
            return sum(
                "DeviceClasses or DeviceTaintRules changed: listing" in record.getMessage() for record in caplog.records
            )

        await eventually(settled, "the slices listed with the cluster's class")
        before = relists()
        # The class is put back as the chart has it: the slices are listed again and read with it.
        await op.api.emit(DEVICE_CLASSES, event("MODIFIED", world.efa_device_class(), "41"))
        await eventually(
            lambda: op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count == 32, "read with the new class"
        )
        await eventually(settled, "the slices listed with the chart's class")
        before = relists()
        # Mapped to the extended resource (KEP-5004): what it selects is the same, so no LIST.
        mapped = world.efa_device_class(extended_resource_name="vpc.amazonaws.com/efa")
        await op.api.emit(DEVICE_CLASSES, event("MODIFIED", mapped, "42"))
        await eventually(
            lambda: op.store.device_classes[world.EFA_DEVICE_CLASS].extended_resource_name is not None, "mapped"
        )
        # Deleted mid-run: the profile's copy (the same selector) stands in, and the log says so once.
        await op.api.emit(DEVICE_CLASSES, event("DELETED", mapped, "43"))
        await eventually(lambda: not op.store.device_classes, "the class gone")
        await op.api.emit(RESOURCE_SLICES, event("MODIFIED", resource_slice("n1", efa=32, name="s1"), "61"))
        await eventually(lambda: op.store.slices["s1"].resource_version == "61", "a later slice event")
        assert relists() == before
        assert op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count == 32
        copies = [r for r in caplog.records if "is not in the cluster" in r.getMessage()]
        assert [(r.levelname, r.getMessage()) for r in copies] == [
            (
                "INFO",
                "efa: DeviceClass efa.networking.k8s.aws is not in the cluster: counting with the aws-dranet-1.0.0"
                " chart's copy; ResourceClaims of it cannot be allocated until it is installed",
            )
        ]


async def test_a_class_that_does_not_compile_is_one_line_and_selects_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    broken = world.efa_device_class()
    broken["spec"]["selectors"][0]["cel"]["expression"] = 'device.drivr == "dra.net"'
    async with operator([node("n1", efa=None)], slices=[resource_slice("n1", efa=32, name="s1")]) as op:
        await eventually(
            lambda: op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count == 32, "read with the copy"
        )
        for version in ("41", "43"):  # the same broken class twice: said once
            await op.api.emit(DEVICE_CLASSES, event("MODIFIED", broken, version))
        await eventually(lambda: len(op.api.lists(RESOURCE_SLICES)) >= 2, "listed again")
        await eventually(
            lambda: op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count == 0, "fails closed"
        )
        said = [r for r in caplog.records if "selects nothing" in r.getMessage()]
        assert len(said) == 1 and said[0].levelname == "ERROR"
        assert "\n" not in said[0].getMessage()
        assert (
            said[0].getMessage().startswith("efa: DeviceClass efa.networking.k8s.aws selects nothing: selector #0: ")
        ), said[0].getMessage()
        assert "drivr" in said[0].getMessage()
        # The watch goes on: a slice added now is read (with the broken class: nothing).
        await eventually(lambda: len(op.api.watches(RESOURCE_SLICES)) >= 2, "the watch after the LIST")
        await op.api.emit(RESOURCE_SLICES, event("ADDED", resource_slice("n2", efa=32, name="s2"), "60"))
        await eventually(lambda: "s2" in op.store.slices, "the watch carries on")


async def test_a_slice_of_another_driver_counts_nothing() -> None:
    # Kept (a pool is a (driver, name) pair, and a claim's device is matched against its own
    # driver's slices), but the fabric's class selects none of its devices.
    async with operator([], slices=[resource_slice("n1", driver="gpu.nvidia.com")]) as op:
        await asyncio.wait_for(slices_informer(op).listed.wait(), WAIT_SECONDS)
        assert [facts.devices_of("efa") for facts in op.store.slices.values()] == [0]
        assert op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count == 0


async def test_malformed_and_unusable_slices_are_logged_once_and_the_watch_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    shared = resource_slice("n1", name="shared")
    del shared["spec"]["nodeName"]
    shared["spec"]["allNodes"] = True
    broken = resource_slice("n2", name="broken")
    broken["spec"]["pool"]["generation"] = "x"
    bare = resource_slice("n3", efa=2, name="bare")
    bare["spec"]["devices"].append({"name": "no-attributes"})
    async with operator([], slices=[shared, broken, bare]) as op:
        await asyncio.wait_for(slices_informer(op).listed.wait(), WAIT_SECONDS)
        # The same objects again: nothing more is logged.
        await op.api.emit(
            RESOURCE_SLICES,
            event("MODIFIED", shared, "51"),
            event("MODIFIED", broken, "52"),
            event("MODIFIED", bare, "53"),
        )
        await op.api.emit(RESOURCE_SLICES, event("ADDED", resource_slice("n4", name="good"), "54"))
        await eventually(lambda: "good" in op.store.slices, "the watch carries on")
        assert sorted(op.store.slices) == ["bare", "broken", "good"]
        assert op.store.dra_devices("n2", "efa", (world.EFA_DEVICE_CLASS,)).count == 0
        logged = [(r.levelname, r.getMessage()) for r in caplog.records if "ResourceSlice" in r.getMessage()]
        assert logged == [
            (
                "WARNING",
                "ignoring resourceslice: ResourceSlice shared of driver dra.net has no spec.nodeName (allNodes); "
                "only slices of one node's own devices are counted",
            ),
            (
                "ERROR",
                "ResourceSlice broken: spec.pool.generation 'x' is not a count; its pool is not counted on node n2",
            ),
            # As the scheduler evaluates the aws-dranet class on it: an error, not a skip.
            (
                "ERROR",
                "DeviceClass efa.networking.k8s.aws selector #0: no such key: pciDevice on device no-attributes of "
                "ResourceSlice bare (node n3): not counted; kube-scheduler aborts scheduling a pod whose claim of "
                "this class meets such a device (FailedScheduling, PodScheduled=False SchedulerError), so fix the "
                "class or the devices",
            ),
        ]


async def test_an_api_server_before_1_34_is_read_without_slices(
    backoffs: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    """No resource.k8s.io/v1: one line, no retry storm, not stale; and picked up after an upgrade."""
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    async with operator([node("n1", efa=32)], slices=None) as op:
        informer = slices_informer(op)
        await asyncio.wait_for(informer.listed.wait(), WAIT_SECONDS)

        # Each look is a streaming list while the server has not refused one (a 404 does not).
        def looks() -> int:
            return len(op.api.lists(RESOURCE_SLICES) + op.api.streaming_list_requests(RESOURCE_SLICES))

        await eventually(lambda: looks() >= 3, "looked for again")
        assert informer.absent
        assert set(backoffs) == {watchers.ABSENT_RECHECK_SECONDS}  # never the error backoff
        freshness = Freshness(op.informers, stale_after=150.0, metrics=op.metrics)
        await eventually(lambda: "node" in freshness.ages(), "nodes listed")
        assert "resourceslice" not in freshness.ages()
        freshness.export()
        freshness_gauges = ("fabriccap_watch_last_event_timestamp_seconds", "fabriccap_watch_connected")
        exported = {
            sample.labels.get("kind")
            for metric in op.metrics.registry.collect()
            for sample in metric.samples
            if sample.name in freshness_gauges
        }
        assert "node" in exported and "resourceslice" not in exported
        absent_lines = [r for r in caplog.records if RESOURCE_SLICES in r.getMessage()]
        assert [(r.levelname, r.getMessage()) for r in absent_lines] == [
            (
                "INFO",
                f"{RESOURCE_SLICES} is not served (resource.k8s.io/v1 needs Kubernetes >= 1.34): carrying on "
                "without ResourceSlices, looking again every 600s",
            )
        ]
        # The cluster is upgraded: the next look finds the API and reads it.
        op.api.serve(RESOURCE_SLICES, "ResourceSlice", [resource_slice("n1", efa=32, name="s1")], "60")
        await eventually(lambda: "s1" in op.store.slices, "slices read after the upgrade")
        assert not informer.absent
        assert f"{RESOURCE_SLICES} is served now: reading ResourceSlices" in caplog.messages


TAINT_RULES_V1BETA2 = DEVICE_TAINT_RULES
TAINT_RULES_V1ALPHA3 = "/apis/resource.k8s.io/v1alpha3/devicetaintrules"


async def test_device_taint_rules_are_read_in_the_version_served_and_take_devices_from_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kubernetes 1.35 serves DeviceTaintRules in v1alpha3 only: the 404 of v1beta2 moves the
    informer on, the rule's devices leave the count (the slices are read again with it), and
    they come back when it is deleted."""
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    rule = world.device_taint_rule("drain-n1", pool="n1")
    slices = [resource_slice("n1", efa=32, name="s1")]
    async with operator([node("n1", efa=None)], slices=slices, taint_rules_path=TAINT_RULES_V1ALPHA3) as op:
        (rules,) = [informer for informer in op.informers if informer.kind == "devicetaintrule"]
        await asyncio.wait_for(rules.listed.wait(), WAIT_SECONDS)
        await asyncio.wait_for(slices_informer(op).listed.wait(), WAIT_SECONDS)
        assert rules.path == TAINT_RULES_V1ALPHA3 and not rules.absent
        assert f"{TAINT_RULES_V1BETA2} is not served: trying {TAINT_RULES_V1ALPHA3}" in caplog.messages

        def count() -> int:
            return int(op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count)

        await eventually(lambda: count() == 32, "the slice counted")
        await op.api.emit(TAINT_RULES_V1ALPHA3, event("ADDED", rule, "31"))
        await eventually(lambda: count() == 0, "the rule's devices not counted")
        relisted = f"DeviceClasses or DeviceTaintRules changed: listing {RESOURCE_SLICES} again"
        assert any(message.startswith(relisted) for message in caplog.messages)
        notes = op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).notes
        assert notes == (
            "driver dra.net pool n1: 32 devices tainted by DeviceTaintRule drain-n1 (NoSchedule) not counted"
            " (the recommended claim tolerates none)",
        )
        await op.api.emit(TAINT_RULES_V1ALPHA3, event("DELETED", rule, "32"))
        await eventually(lambda: count() == 32, "counted again once the rule is gone")


async def test_the_version_read_going_away_is_followed_to_the_newest_at_once(
    backoffs: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    """Review 62 F4: read from v1alpha3 (1.35), the server then serves the rule in v1beta2 only
    (1.36 without the alpha runtime-config). The 404 of v1alpha3, the last version, made the
    kind absent: the rule forgotten (its devices counted) for absent_recheck_seconds, and never
    stale. A 404 on a version the informer settled on now tries the newest at once; only a
    whole pass from the newest that 404s makes the kind absent."""
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    rule = world.device_taint_rule("drain-n1", pool="n1")

    def setup(api: FakeApi) -> None:
        api.serve(TAINT_RULES_V1ALPHA3, "DeviceTaintRule", [rule], "30")

    slices = [resource_slice("n1", efa=32, name="s1")]
    async with operator([node("n1", efa=None)], slices=slices, taint_rules_path=None, setup=setup) as op:
        (rules,) = [informer for informer in op.informers if informer.kind == "devicetaintrule"]

        def count() -> int:
            return int(op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count)

        await op.listed()
        assert rules.path == TAINT_RULES_V1ALPHA3 and count() == 0
        slice_lists = len(op.api.lists(RESOURCE_SLICES))
        # The upgrade: v1beta2 served with the same object, v1alpha3 gone.
        op.api.serve(TAINT_RULES_V1BETA2, "DeviceTaintRule", [{**rule, "apiVersion": "resource.k8s.io/v1beta2"}], "40")
        await op.api.emit(TAINT_RULES_V1ALPHA3, expired())
        del op.api.collections[TAINT_RULES_V1ALPHA3]
        await eventually(lambda: rules.path == TAINT_RULES_V1BETA2 and rules.connected, "the rule read from v1beta2")
        assert not rules.absent and list(op.store.taint_rules) == ["drain-n1"] and count() == 0
        # Never forgotten: what the slices are read with did not change, so they were not listed again.
        assert len(op.api.lists(RESOURCE_SLICES)) == slice_lists
        assert rules.absent_recheck_seconds not in backoffs
        said = [message for message in caplog.messages if "devicetaintrules" in message and "served" in message]
        assert said == [
            f"{TAINT_RULES_V1BETA2} is not served: trying {TAINT_RULES_V1ALPHA3}",
            f"{TAINT_RULES_V1ALPHA3} is not served any more: trying {TAINT_RULES_V1BETA2}",
        ]


@pytest.mark.parametrize("late", ["rules", "classes"])
async def test_the_slices_are_first_listed_with_the_rules_and_classes_as_they_stand(late: str) -> None:
    """Review 62 F3: the rules' (or the classes') first LIST answered after the slices' (here
    after a 500), every informer had listed, so the operator's first round could run, while the
    slices had been read without the rule (or with the profile's copy of the class): the 32
    devices the scheduler will not give were counted, and every slice was listed again. The
    slices wait for both kinds: one LIST, read with what they say."""
    blocker = DEVICE_TAINT_RULES if late == "rules" else DEVICE_CLASSES

    def setup(api: FakeApi) -> None:
        if late == "rules":
            api.serve(DEVICE_TAINT_RULES, "DeviceTaintRule", [world.device_taint_rule("drain-n1", pool="n1")], "30")
        else:
            api.serve(DEVICE_CLASSES, "DeviceClass", [selecting_nothing()], "40")
        api.list_failures[blocker] = deque([500])

    async with operator([node("n1", efa=None)], slices=[resource_slice("n1", efa=32, name="s1")], setup=setup) as op:
        await asyncio.wait_for(asyncio.gather(*(informer.listed.wait() for informer in op.informers)), WAIT_SECONDS)
        # What the first round would read.
        assert op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count == 0
        assert len(op.api.lists(blocker)) == 2  # the 500, then the answer
        assert len(op.api.lists(RESOURCE_SLICES)) == 1  # the fake streams no list: one LIST in pages


async def test_a_server_serving_no_device_taint_rules_has_none_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kubernetes 1.34, or 1.35 without resource.k8s.io/v1alpha3: no rules, not an error; each
    look tries the newest version first (a cluster upgraded to 1.36), and the lines are said once."""
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    slices = [resource_slice("n1", efa=32, name="s1")]
    async with operator([node("n1", efa=None)], slices=slices, taint_rules_path=None) as op:
        (rules,) = [informer for informer in op.informers if informer.kind == "devicetaintrule"]
        await asyncio.wait_for(rules.listed.wait(), WAIT_SECONDS)

        def looks(path: str) -> int:
            return len(op.api.lists(path) + op.api.streaming_list_requests(path))

        await eventually(lambda: looks(TAINT_RULES_V1ALPHA3) >= 3, "looked for again")
        assert looks(TAINT_RULES_V1BETA2) >= 3
        assert rules.absent and not op.store.taint_rules
        said = [(r.levelname, r.getMessage()) for r in caplog.records if "devicetaintrules" in r.getMessage()]
        assert said == [
            ("INFO", f"{TAINT_RULES_V1BETA2} is not served: trying {TAINT_RULES_V1ALPHA3}"),
            (
                "INFO",
                f"{TAINT_RULES_V1ALPHA3} is not served (served from Kubernetes 1.36; in 1.33-1.35 only with"
                " resource.k8s.io/v1alpha3 turned on): carrying on without DeviceTaintRules, looking again every 600s",
            ),
        ]
        assert op.store.dra_devices("n1", "efa", (world.EFA_DEVICE_CLASS,)).count == 32


# --- workload pods (cluster-wide) -----------------------------------------------------------------


async def test_workload_pods_are_watched_cluster_wide_and_a_malformed_one_is_named_and_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="fabriccap.controller.informers")
    good = world.workload_pod("n1", "train-0")
    broken = world.workload_pod("n1", "broken-0", gpu="lots")
    stranger = world.workload_pod("n1", "ray-0", owner=world.owner_reference("RayCluster", "ray.io/v1", "ray"))

    def setup(api: FakeApi) -> None:
        api.serve(ALL_PODS, "Pod", [good, broken, stranger], "7")

    config = build_config({})
    async with operator([node("n1", efa=32)], setup=setup, config=config) as op:
        pods = next(informer for informer in op.informers if informer.kind == "pod")
        assert pods.path == ALL_PODS
        await asyncio.wait_for(pods.listed.wait(), WAIT_SECONDS)
        assert sorted(op.store.workload_pods) == [("ml", "ray-0"), ("ml", "train-0")]
        assert op.store.workload_pods[("ml", "ray-0")].owner.kind == "RayCluster"
        await op.api.emit(ALL_PODS, event("ADDED", world.workload_pod("n1", "train-1"), "8"))
        await eventually(lambda: ("ml", "train-1") in op.store.workload_pods, "the watch carries on")
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert errors == [
            "ignoring pod: Pod ml/broken-0: container 'node': resources.limits[nvidia.com/gpu]: "
            "'lots' is not a quantity"
        ]


async def test_new_pods_of_no_fabric_are_not_decoded_and_their_versions_still_count(
    backoffs: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    """kube.unread: a streaming list and a watch leave the pods of no fabric undecoded (counted
    as unread), keep the others, resume from an unread pod's version, and reject one that no
    API server could have reached."""
    caplog.set_level(logging.ERROR, logger="fabriccap.controller.informers")
    train = world.workload_pod("n1", "train-0", efa=32)
    sidecars = [world.workload_pod("n1", f"sidecar-{index}", gpu=None) for index in range(3)]
    for index, body in enumerate([train, *sidecars]):
        body["metadata"]["resourceVersion"] = str(index + 3)  # as an API server serves them

    def setup(api: FakeApi) -> None:
        api.streaming_lists = True
        api.serve(ALL_PODS, "Pod", [train, *sidecars], "7")

    async with operator([node("n1", efa=32)], setup=setup, config=build_config({})) as op:
        pods = next(informer for informer in op.informers if informer.kind == "pod")
        await asyncio.wait_for(pods.listed.wait(), WAIT_SECONDS)
        assert sorted(op.store.workload_pods) == [("ml", "train-0")]
        assert watch_events(op.metrics, "pod", "unread") == 3
        assert watch_events(op.metrics, "pod", "applied") == 1
        await eventually(lambda: len(op.api.watches(ALL_PODS)) == 1, "the watch after the streaming list")
        await op.api.emit(ALL_PODS, event("ADDED", world.workload_pod("n1", "sidecar-9", gpu=None), "8"))
        await op.api.close_stream(ALL_PODS)
        await eventually(lambda: len(op.api.watches(ALL_PODS)) == 2, "the resumed watch")
        assert op.api.watches(ALL_PODS)[1]["resourceVersion"] == "8"  # the unread pod's version
        assert watch_events(op.metrics, "pod", "unread") == 4
        # A version beyond anything this server could have written is rejected, read or not.
        await op.api.emit(ALL_PODS, event("ADDED", world.workload_pod("n1", "sidecar-10", gpu=None), "99999999999"))
        await eventually(lambda: len(op.api.watches(ALL_PODS)) == 3, "the watch resumed after the rejected line")
        assert op.api.watches(ALL_PODS)[2]["resourceVersion"] == "8"
        assert watch_events(op.metrics, "pod", "rejected") == 1
        assert sorted(op.store.workload_pods) == [("ml", "train-0")]
        assert len(op.api.streaming_list_requests(ALL_PODS)) == 1 and op.api.lists(ALL_PODS) == []


async def test_node_heartbeats_are_not_decoded_and_a_change_after_them_is() -> None:
    """kube.unread.UnchangedRule in the informer: a heartbeat after an applied line counts as
    unchanged, resumes the watch from its version, and a real change is still applied; a LIST
    starts the comparison over."""
    busy = world.node("n1", pool="p5", efa=32, images=40, heavy=True)

    def beat(at: str, efa: int = 32) -> dict[str, object]:
        body = world.node("n1", pool="p5", efa=efa, images=40, heavy=True)
        for condition in body["status"]["conditions"]:
            condition["lastHeartbeatTime"] = at
        return body

    async with operator([busy]) as op:
        await asyncio.wait_for(op.nodes.listed.wait(), WAIT_SECONDS)
        await eventually(lambda: len(op.api.watches(NODES)) == 1, "the node watch")
        await op.api.emit(NODES, event("MODIFIED", beat("2026-11-30T10:00:10Z"), "101"))  # decoded: the first line
        await op.api.emit(NODES, event("MODIFIED", beat("2026-11-30T10:00:20Z"), "102"))
        await op.api.emit(NODES, event("MODIFIED", beat("2026-11-30T10:00:30Z"), "103"))
        await eventually(lambda: watch_events(op.metrics, "node", "unchanged") == 2, "two heartbeats left undecoded")
        await op.api.close_stream(NODES)
        await eventually(lambda: len(op.api.watches(NODES)) == 2, "the resumed watch")
        assert op.api.watches(NODES)[1]["resourceVersion"] == "103"  # the undecoded heartbeat's version
        await op.api.emit(NODES, event("MODIFIED", beat("2026-11-30T10:00:40Z", efa=0), "104"))
        await eventually(lambda: op.efa() == {"n1": 0}, "the EFA count that changed")
        assert watch_events(op.metrics, "node", "unchanged") == 2
        await op.api.emit(NODES, event("MODIFIED", beat("2026-11-30T10:00:50Z", efa=0), "105"))
        await eventually(lambda: watch_events(op.metrics, "node", "unchanged") == 3, "the next heartbeat")
        # A 410 lists again: the first line after it is decoded whatever it says.
        await op.api.emit(NODES, expired())
        await eventually(lambda: len(op.api.lists(NODES)) == 2, "the LIST after 410")
        await eventually(lambda: len(op.api.watches(NODES)) == 3, "the watch after the LIST")
        applied = watch_events(op.metrics, "node", "applied")
        await op.api.emit(NODES, event("MODIFIED", beat("2026-11-30T10:01:00Z", efa=0), "106"))
        await eventually(lambda: watch_events(op.metrics, "node", "applied") == applied + 1, "decoded after the LIST")
        assert watch_events(op.metrics, "node", "unchanged") == 3


async def test_karpenters_kinds_fill_the_store_and_a_cluster_without_them_is_no_error() -> None:
    """NodePools, NodeClaims and EC2NodeClasses are listed and watched like the other kinds where
    the API serves them; where it does not (most clusters), the 404 is not an error."""
    requirements = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}]

    def setup(api: FakeApi) -> None:
        api.serve(NODE_POOLS, "NodePool", [world.node_pool("p5-elastic", requirements)], "9")
        api.serve(EC2_NODE_CLASSES, "EC2NodeClass", [world.ec2_node_class()], "9")
        # NodeClaims are not served: their CRD is missing on this API server.

    config = build_config({"workloads": {"enabled": False}})
    async with operator([node("n1", efa=32)], setup=setup, config=config) as op:
        kinds = {informer.kind: informer for informer in op.informers}
        assert {"nodepool", "nodeclaim", "ec2nodeclass"} <= set(kinds)
        await asyncio.wait_for(kinds["nodepool"].listed.wait(), WAIT_SECONDS)
        await asyncio.wait_for(kinds["ec2nodeclass"].listed.wait(), WAIT_SECONDS)
        assert sorted(op.store.node_pools) == ["p5-elastic"]
        assert sorted(op.store.node_classes) == ["default"]
        await op.api.emit(NODE_POOLS, event("DELETED", world.node_pool("p5-elastic", requirements), "10"))
        await eventually(lambda: not op.store.node_pools, "the deleted NodePool leaves the store")
        assert op.store.karpenter_claims == {}
