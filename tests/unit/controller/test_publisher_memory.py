"""The publisher forgets a name whole: once an object's pool is gone and nothing of it is
published, nothing the publisher holds still mentions it (issue 21, "Publisher")."""

from __future__ import annotations

import copy
from collections import deque
from typing import Any

from fabriccap.controller.objects import Published
from fabriccap.core.api import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from support.publishing import FCAPS, GRACE, Setup, healthy, publishing, remembers, start


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


def _node_side(setup: Setup, pool_value: str) -> dict[str, Any]:
    """The memo's node-side status of the efa pool ``pool_value`` (as JSON)."""
    (side,) = (side for (fabric, pool), side in setup.publisher.memo.pools.items() if pool.value == pool_value)
    return side.status


async def test_a_pools_status_is_held_once_when_its_write_is_answered_with_it() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        state = setup.publisher.objects["efa-p5"]
        assert state.published is not None
        held = state.published.status
        assert held == setup.published()["efa-p5"]["status"]
        assert state.written is held
        # Its parts are the memo's, not a copy of the API server's answer (docs/performance.md).
        node_side = _node_side(setup, "p5")
        assert held["gap"] is node_side["gap"] and held["counts"] is node_side["counts"]


async def test_no_round_changes_the_memos_status_in_place() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        node_side = _node_side(setup, "p5")
        before = copy.deepcopy(node_side)
        forged = await setup.publisher.client.merge_patch(
            FABRIC_CAPABILITIES.status("efa-p5"),
            {"status": {"nodes": 7, "gap": {"unhealthy": 3}, "conditions": [{"type": "Ready", "status": "False"}]}},
        )
        setup.publisher.observe_published(forged, deleted=False)
        await setup.publisher.reconcile_once()  # put back
        setup.store.mark_all()
        await setup.publisher.reconcile_once()
        assert setup.published()["efa-p5"]["status"]["nodes"] == 2
        assert _node_side(setup, "p5") is node_side and node_side == before
        # Only the copies written are stamped: the memo's status has no time or generation.
        assert "observedGeneration" not in node_side
        assert not any({"lastTransitionTime", "observedGeneration"} & set(c) for c in node_side["conditions"])


def test_an_answer_that_differs_from_what_was_sent_is_kept_as_answered() -> None:
    sent = {"nodes": 2, "gap": {"unhealthy": 0}}
    answered = {"metadata": {"name": "efa-p5"}, "status": {"nodes": 2, "gap": {"unhealthy": 1}}}
    published = Published.from_object(answered, held=sent)
    assert published.status == answered["status"] and published.status is not sent
    assert Published.from_object({**answered, "status": dict(sent)}, held=sent).status is sent
