"""The publisher against the fake API server: create, adopt, leave alone, put back, expire."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from builders import daemon_set, node, plugin_pods
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.publisher import Publisher
from fabriccap.controller.store import FactStore
from fabriccap.core.api import MANAGED_BY_LABEL, MANAGED_BY_VALUE, condition_status
from fabriccap.core.config import build_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.kube.kinds import BY_KIND
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from fakeapi import FakeApi, fake_api

FCAPS = FABRIC_CAPABILITIES.collection()
GRACE = 30.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Setup:
    api: FakeApi
    publisher: Publisher
    store: FactStore
    metrics: OperatorMetrics
    clock: Clock
    extractor: FactsExtractor

    def add(self, bodies: Iterable[Mapping[str, Any]]) -> None:
        for body in bodies:
            BY_KIND[str(body["kind"])].upsert(self.store, self.extractor, body)

    def remove_node(self, name: str) -> None:
        self.store.remove_node(name)

    def writes(self) -> float:
        return sum(
            self.metrics.registry.get_sample_value("fabriccap_status_writes_total", {"result": result}) or 0.0
            for result in ("created", "updated", "deleted")
        )

    def published(self) -> dict[str, dict[str, Any]]:
        return self.api.objects(FCAPS)


def healthy(pool: str, *names: str) -> list[dict[str, Any]]:
    return [node(name, pool=pool, efa=32) for name in names] + plugin_pods(names)


@asynccontextmanager
async def publishing(existing: Iterable[dict[str, Any]] = ()) -> AsyncIterator[Setup]:
    async with fake_api() as (api, client):
        api.serve(FCAPS, "FabricCapability", list(existing), "1")
        config = build_config({"poolGracePeriodSeconds": GRACE})
        store, metrics, clock = FactStore(), OperatorMetrics(), Clock()
        publisher = Publisher(config=config, store=store, client=client, metrics=metrics, clock=clock)
        setup = Setup(api, publisher, store, metrics, clock, FactsExtractor(config))
        setup.add([daemon_set()])
        yield setup


async def start(setup: Setup) -> None:
    """What ``Publisher.run`` does before its loop: read back, then the first round."""
    await setup.publisher.load_published()
    for name in setup.publisher.published:
        setup.publisher.absent_since.setdefault(name, setup.clock())
    await setup.publisher.reconcile_once()


async def test_a_new_pool_is_created_then_its_status_written() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)

        posts = setup.api.writes("POST")
        assert len(posts) == 1
        created = posts[0][2]
        assert created["metadata"]["name"] == "efa-p5"
        assert created["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY_VALUE
        assert created["spec"] == {} and "status" not in created  # status is a subresource
        obj = setup.published()["efa-p5"]
        assert condition_status(obj["status"], "Ready") == "True"
        assert obj["status"]["observedGeneration"] == 1
        assert setup.writes() == 2  # created, then status updated


async def test_a_round_that_changes_nothing_writes_nothing() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        before = len(setup.api.bodies)
        setup.store.mark_all()
        await setup.publisher.reconcile_once()
        assert len(setup.api.bodies) == before


async def test_an_existing_object_without_the_label_is_adopted() -> None:
    declared = {"apiVersion": "fabriccap.dev/v1alpha1", "kind": "FabricCapability", "metadata": {"name": "efa-p5"}}
    async with publishing([declared]) as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        assert setup.api.writes("POST") == []
        obj = setup.published()["efa-p5"]
        assert obj["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY_VALUE
        assert condition_status(obj["status"], "Ready") == "True"


async def test_an_edit_by_someone_else_is_put_back() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        forged = await setup.publisher.client.merge_patch(
            FABRIC_CAPABILITIES.status("efa-p5"), {"status": {"nodes": 7}}
        )
        setup.publisher.observe_published(forged, deleted=False)
        assert setup.store.changed.is_set()
        await setup.publisher.reconcile_once()
        assert setup.published()["efa-p5"]["status"]["nodes"] == 2


async def test_a_deletion_by_someone_else_is_undone() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        gone = setup.published()["efa-p5"]
        await setup.publisher.client.delete(FABRIC_CAPABILITIES.item("efa-p5"))
        setup.publisher.observe_published(gone, deleted=True)
        await setup.publisher.reconcile_once()
        assert "efa-p5" in setup.published()
        assert len(setup.api.writes("POST")) == 2


async def test_an_emptied_pool_is_deleted_after_the_grace_period_only() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        setup.remove_node("a")
        await setup.publisher.reconcile_once()
        setup.clock.now += GRACE - 1
        await setup.publisher.reconcile_once()
        assert "efa-p5" in setup.published()
        setup.clock.now += 2
        await setup.publisher.reconcile_once()
        assert "efa-p5" not in setup.published()
        assert setup.metrics.registry.get_sample_value("fabriccap_status_writes_total", {"result": "deleted"}) == 1


async def test_an_object_it_does_not_own_is_never_deleted() -> None:
    foreign = {"apiVersion": "fabriccap.dev/v1alpha1", "kind": "FabricCapability", "metadata": {"name": "efa-gone"}}
    async with publishing([foreign]) as setup:
        await start(setup)
        setup.clock.now += GRACE + 1
        await setup.publisher.reconcile_once()
        assert "efa-gone" in setup.published()
        assert setup.api.writes("DELETE") == []


async def test_a_failed_write_is_counted_and_retried_at_the_next_round() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        setup.api.write_failures[("POST", FCAPS)] = deque([500])
        await start(setup)
        assert setup.metrics.registry.get_sample_value("fabriccap_status_writes_total", {"result": "error"}) == 1
        assert "efa-p5" not in setup.published()
        await setup.publisher.reconcile_once()
        assert "efa-p5" in setup.published()
