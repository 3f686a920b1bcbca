"""The publisher forgets a name whole: once an object's pool is gone and nothing of it is
published, nothing the publisher holds still mentions it (issue 21, "Publisher")."""

from __future__ import annotations

from collections import deque

from fabriccap.core.api import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from support.publishing import FCAPS, GRACE, healthy, publishing, remembers, start


async def test_a_pool_whose_create_failed_is_forgotten_when_it_vanishes() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        setup.api.write_failures[("POST", FCAPS)] = deque([500])
        await start(setup)
        assert "efa-p5" not in setup.published()
        setup.remove_node("a")  # the pool goes before its retry falls due
        for _ in range(3):
            setup.clock.now += GRACE
            setup.store.mark_all()
            await setup.publisher.reconcile_once()
        assert setup.published() == {}
        assert remembers(setup.publisher, "efa-p5") == []


async def test_an_expired_object_is_forgotten_whole() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        assert "efa-p5" in setup.published()
        setup.remove_node("a")
        await setup.publisher.reconcile_once()
        setup.clock.now += GRACE + 1
        await setup.publisher.reconcile_once()
        await setup.publisher.finish_writes()
        await setup.publisher.reconcile_once()
        assert "efa-p5" not in setup.published()
        assert remembers(setup.publisher, "efa-p5") == []


async def test_a_name_conflict_is_no_longer_counted_once_both_claimants_are_gone() -> None:
    squatter = {
        "apiVersion": "fabriccap.dev/v1alpha1",
        "kind": "FabricCapability",
        "metadata": {
            "name": "efa-p5",
            "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, "fabriccap.dev/fabric": "efa"},
            "annotations": {"fabriccap.dev/pool-key": "karpenter.sh/nodepool", "fabriccap.dev/pool-value": "other"},
        },
    }
    async with publishing([squatter]) as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        assert setup.gauge("fabriccap_name_conflicts") == 1
        # Both claimants go: the pool loses its node, and the object claimed by the other pool is deleted.
        setup.remove_node("a")
        gone = setup.published()["efa-p5"]
        await setup.publisher.client.delete(FABRIC_CAPABILITIES.item("efa-p5"))
        setup.publisher.observe_published(gone, deleted=True)
        await setup.publisher.reconcile_once()
        setup.clock.now += GRACE + 1
        setup.store.mark_all()
        await setup.publisher.reconcile_once()
        assert setup.gauge("fabriccap_name_conflicts") == 0
        assert remembers(setup.publisher, "efa-p5") == []
