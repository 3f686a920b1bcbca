"""The operator's informers (``build_informers``) running against the fake API server, for the
unit tests of listing, watching, freshness and watch faults."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fabriccap.controller.freshness import Freshness
from fabriccap.controller.informers import Informer, build_informers
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import FactStore
from fabriccap.core.config import Config
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.shard import UNSHARDED, Shard
from fabriccap.kube.client import KubeClient
from support.builders import EFA, KUBE_SYSTEM
from support.configs import build_config
from support.fakeapi import WAIT_SECONDS, Body, FakeApi, fake_api

NODES = "/api/v1/nodes"
PODS = f"/api/v1/namespaces/{KUBE_SYSTEM}/pods"
DAEMON_SETS = f"/apis/apps/v1/namespaces/{KUBE_SYSTEM}/daemonsets"
RESOURCE_SLICES = "/apis/resource.k8s.io/v1/resourceslices"
DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
RESOURCE_CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
# Served as Kubernetes 1.36 serves them; 1.35 (v1alpha3 only) is a test's own.
DEVICE_TAINT_RULES = "/apis/resource.k8s.io/v1beta2/devicetaintrules"
ALL_PODS = "/api/v1/pods"


def watch_events(metrics: OperatorMetrics, kind: str = "node", result: str = "applied") -> float:
    value = metrics.registry.get_sample_value("fabriccap_watch_events_total", {"kind": kind, "result": result})
    assert value is not None
    return float(value)


def node_events(metrics: OperatorMetrics, result: str = "applied") -> float:
    return watch_events(metrics, "node", result)


def relists(metrics: OperatorMetrics, found: str, kind: str = "node") -> float:
    """LISTs of ``kind`` that replaced a watch without progress and found ``found``."""
    value = metrics.registry.get_sample_value("fabriccap_watch_relists_total", {"kind": kind, "found": found})
    return value or 0.0


def nudged(metrics: OperatorMetrics, result: str, kind: str = "node") -> float:
    """Nudges of ``kind``'s quiet watch that ended in ``result`` (sent, failed, gave_up)."""
    value = metrics.registry.get_sample_value("fabriccap_watch_nudges_total", {"kind": kind, "result": result})
    return value or 0.0


@dataclass
class Operator:
    api: FakeApi
    client: KubeClient
    store: FactStore
    metrics: OperatorMetrics
    informers: list[Informer]
    freshness: Freshness

    @property
    def nodes(self) -> Informer:
        return self.informers[0]

    async def listed(self, *, but: str = "") -> None:
        """Wait until every informer (but those of the kind labelled ``but``) has listed: the
        slices only begin once the classes and rules have (``kinds.listed_first``), so a test
        that changes what the server answers after the nodes have listed would change it for
        the slices' first listing too."""
        await asyncio.wait_for(
            asyncio.gather(*(informer.listed.wait() for informer in self.informers if informer.kind != but)),
            WAIT_SECONDS,
        )

    def efa(self) -> dict[str, int]:
        return {name: facts.allocatable_of(EFA) for name, facts in self.store.nodes.items()}


@asynccontextmanager
async def operator(
    nodes: Sequence[Body] = (),
    resource_version: str = "100",
    setup: Callable[[FakeApi], None] | None = None,
    slices: Sequence[Body] | None = (),
    taint_rules_path: str | None = DEVICE_TAINT_RULES,
    config: Config | None = None,
    progress_timeout: float | None = None,
    nudge_after: float | None = None,
    stale_after: float = 150.0,
    shard: Shard = UNSHARDED,
) -> AsyncIterator[Operator]:
    """The fake API serving ``nodes`` (and ``slices``; None: an API server before 1.34, which
    has no resource.k8s.io/v1; with them, no DeviceTaintRule at ``taint_rules_path``, None: not
    served), and the informers of ``build_informers`` running on it.
    ``progress_timeout`` replaces the one ``stale_after`` gives (a test need not wait seconds),
    and so does ``nudge_after``, whose None turns nudges off: the fake has no watch cache that a
    nudge would move, and a test that counts the informers' sleeps counts only backoffs."""
    async with fake_api() as (api, client):
        api.serve(NODES, "Node", nodes, resource_version)
        # The plugin namespace's collections exist, empty, unless the test serves them.
        api.serve(DAEMON_SETS, "DaemonSet", [], "1")
        api.serve(PODS, "Pod", [], "1")
        api.serve(ALL_PODS, "Pod", [], "1")
        if slices is not None:
            api.serve(RESOURCE_SLICES, "ResourceSlice", slices, "50")
            api.serve(DEVICE_CLASSES, "DeviceClass", [], "40")
            api.serve(RESOURCE_CLAIMS, "ResourceClaim", [], "45")
            if taint_rules_path is not None:
                api.serve(taint_rules_path, "DeviceTaintRule", [], "30")
        if setup is not None:
            setup(api)
        store, metrics = FactStore(shard), OperatorMetrics()
        # Pods are watched in the plugin namespace unless a test turns workloads on.
        # Karpenter's kinds only where a test turns them on (test_watchers has their own test).
        extractor = FactsExtractor(
            config or build_config({"workloads": {"enabled": False}, "karpenter": {"enabled": False}})
        )
        informers = build_informers(client, store, extractor, metrics, stale_after=stale_after)
        for informer in informers:
            informer.nudge_after = nudge_after
            if progress_timeout is not None:
                informer.progress_timeout = progress_timeout
        freshness = Freshness(informers, stale_after=stale_after, metrics=metrics)
        store.freshness = freshness
        tasks = [asyncio.create_task(informer.run(), name=informer.path) for informer in informers]
        tasks += [asyncio.create_task(informer.nudge_while_quiet(), name=informer.path) for informer in informers]
        try:
            yield Operator(api, client, store, metrics, informers, freshness)
            crashed = [task for task in tasks if task.done()]
            assert not crashed, f"informer ended: {[task.exception() for task in crashed]}"
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
