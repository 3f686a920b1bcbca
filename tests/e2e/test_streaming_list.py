"""The informers' streaming list (WATCH sendInitialEvents=true, WatchList) on the real API server:
the nodes arrive as events up to the initial-events-end bookmark, no page is asked for, and the
watch that follows sees a change (issue 26)."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from fabriccap.controller.informers import build_informers
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import FactStore
from fabriccap.core.config import build_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.kube.client import connect
from harness import E2ECluster, SyncKube, node_body, node_path

WAIT_SECONDS = 60.0
EFA = "vpc.amazonaws.com/efa"


def test_nodes_are_read_as_a_streaming_list_and_then_watched(
    cluster: E2ECluster, kube: SyncKube, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fabriccap.controller.informers")
    marker = uuid.uuid4().hex[:8]
    names = [f"stream-{marker}-{index}" for index in range(3)]
    for name in names:
        kube.create(node_path(), node_body(name, pool=f"stream-{marker}", marker=marker))
    try:
        asyncio.run(_read_and_watch(str(cluster.kubeconfig), kube, names))
    finally:
        for name in names:
            kube.delete(node_path(name))
    assert not [message for message in caplog.messages if "no streaming list" in message]


async def _read_and_watch(kubeconfig: str, kube: SyncKube, names: list[str]) -> None:
    async with await connect(kubeconfig) as client:
        store = FactStore()
        extractor = FactsExtractor(build_config({"workloads": {"enabled": False}}))
        [nodes] = [
            informer
            for informer in build_informers(client, store, extractor, OperatorMetrics())
            if informer.kind == "node"
        ]
        task = asyncio.create_task(nodes.run())
        try:
            await asyncio.wait_for(nodes.listed.wait(), WAIT_SECONDS)
            assert nodes.streaming  # the server streamed: a refusal would have turned it off
            assert set(names) <= set(store.nodes)
            assert all(store.nodes[name].allocatable_of(EFA) == 32 for name in names)
            # The watch from the bookmark's version sees what changes next.
            halved = {"capacity": {EFA: "16"}, "allocatable": {EFA: "16"}}
            await asyncio.to_thread(kube.patch, node_path(names[0]) + "/status", {"status": halved})
            for _ in range(int(WAIT_SECONDS / 0.1)):
                if store.nodes[names[0]].allocatable_of(EFA) == 16:
                    break
                await asyncio.sleep(0.1)
            assert store.nodes[names[0]].allocatable_of(EFA) == 16
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
