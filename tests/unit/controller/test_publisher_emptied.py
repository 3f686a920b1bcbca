"""Objects no pool calls for: their empty state at once, deletion after the grace period only,
and deletions that never hold up another pool's change (issue 27 items 14, 15, 16; round 3
L26, H5, L25)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fabriccap.core.api import MANAGED_BY_LABEL, MANAGED_BY_VALUE, READY_LABEL, condition_reason, condition_status
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from support.fakeapi import eventually
from support.publishing import FCAPS, GRACE, healthy, on_the_loops_own_time, publishing, start, start_grace

POOL_LABELS = {"name": "efa-p5", "fabric": "efa", "pool": "p5"}


async def test_a_pool_that_loses_every_node_says_so_at_once_and_is_deleted_after_the_grace_period() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        assert condition_status(setup.published()["efa-p5"]["status"], "Ready") == "True"
        setup.remove_node("a")
        setup.remove_node("b")  # the node group scales to zero
        await setup.publisher.reconcile_once()
        obj = setup.published()["efa-p5"]
        status = obj["status"]
        assert (condition_status(status, "Ready"), condition_reason(status, "Ready")) == ("False", "NoTargetNodes")
        assert (status["nodes"], status["advertisingNodes"], status["counts"]) == (0, 0, [])
        assert "uniformCount" not in status and "recommendation" not in status
        for condition in ("DevicePluginReady", "Advertised", "Homogeneous"):
            assert (condition_status(status, condition), condition_reason(status, condition)) == (
                "Unknown",
                "NoTargetNodes",
            )
        assert obj["metadata"]["labels"][READY_LABEL] == "false"
        assert setup.gauge("fabriccap_pool_ready", **POOL_LABELS) == 0
        assert setup.gauge("fabriccap_pool_nodes", **POOL_LABELS) == 0
        setup.clock.now += GRACE - 1
        await setup.publisher.reconcile_once()
        assert "efa-p5" in setup.published()  # deletion still waits for the grace period
        setup.clock.now += 2
        await setup.publisher.reconcile_once()
        assert "efa-p5" not in setup.published()
        assert setup.gauge("fabriccap_pool_ready", **POOL_LABELS) is None


async def test_a_hand_made_object_for_no_pool_is_overwritten_at_once_and_deleted_after_the_grace_period() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        forged = {
            "apiVersion": "fabriccap.dev/v1alpha1",
            "kind": "FabricCapability",
            "metadata": {"name": "efa-nowhere", "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, READY_LABEL: "true"}},
        }
        await setup.publisher.client.create(FCAPS, forged)
        # A status copied from a Ready pool: valid, and saying Ready=True.
        created = await setup.publisher.client.merge_patch(
            FABRIC_CAPABILITIES.status("efa-nowhere"), {"status": setup.published()["efa-p5"]["status"]}
        )
        setup.publisher.observe_published(created, deleted=False)
        await setup.publisher.reconcile_once()
        obj = setup.published()["efa-nowhere"]
        ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "NoTargetNodes")
        assert ready["message"].startswith("no such pool")
        assert obj["status"]["nodes"] == 0 and obj["metadata"]["labels"][READY_LABEL] == "false"
        setup.clock.now += GRACE + 1
        await setup.publisher.reconcile_once()
        assert "efa-nowhere" not in setup.published()
        assert "efa-p5" in setup.published()


async def test_a_deletion_storm_never_holds_up_another_pools_change() -> None:
    """5,000 pools expire at once; while their deletions are held by the API server, another
    pool's new node is published."""
    expiring: list[dict[str, Any]] = [
        {
            "apiVersion": "fabriccap.dev/v1alpha1",
            "kind": "FabricCapability",
            "metadata": {"name": f"efa-gone-{number:04d}", "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
        }
        for number in range(5000)
    ]
    async with publishing(expiring) as setup:
        held = asyncio.Event()
        for obj in expiring:
            setup.api.write_gates[("DELETE", FABRIC_CAPABILITIES.item(obj["metadata"]["name"]))] = held
        await setup.publisher.load_published()
        start_grace(setup)
        setup.clock.now += GRACE + 1  # every one of them expires
        started = time.monotonic()
        expiry_round = asyncio.create_task(setup.publisher.reconcile_once(finish_writes=False))
        await eventually(lambda: len(setup.api.writes("DELETE")) >= 1, "the deletions under way")
        setup.add(healthy("p5", "a"))  # meanwhile, a new pool
        await asyncio.wait_for(expiry_round, 5.0)
        await setup.publisher.reconcile_once(finish_writes=False)
        await eventually(
            lambda: condition_status((setup.published().get("efa-p5") or {}).get("status"), "Ready") == "True",
            "the new pool published while the deletions wait",
        )
        print(f"\nanother pool published {time.monotonic() - started:.2f}s into a 5,000-pool expiry")
        assert len(setup.api.writes("DELETE")) < len(expiring)  # paced: a few in flight, the rest queued
        held.set()
        await setup.publisher.finish_writes()
        await setup.publisher.reconcile_once()
        assert sorted(setup.published()) == ["efa-p5"]
        assert setup.gauge("fabriccap_status_writes_total", result="deleted") == len(expiring)


async def test_the_running_loop_overwrites_a_hand_made_object_without_waiting_for_a_deadline() -> None:
    """Its watch event is what wakes the loop: nothing else is due for an hour (the resync) or
    for the grace period."""
    async with publishing(resyncSeconds=3600, debounceSeconds=0.01) as setup:
        on_the_loops_own_time(setup)
        setup.store.listed.set()
        loop = asyncio.create_task(setup.publisher.run())
        try:
            await eventually(lambda: setup.publisher.last_round is not None, "the first round")
            await setup.publisher.client.create(
                FCAPS,
                {
                    "apiVersion": "fabriccap.dev/v1alpha1",
                    "kind": "FabricCapability",
                    "metadata": {"name": "efa-nowhere", "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
                },
            )
            async with publishing() as elsewhere:  # a valid Ready status, from a real pool
                elsewhere.add(healthy("p5", "a"))
                await start(elsewhere)
                forged = {"status": elsewhere.published()["efa-p5"]["status"]}
            created = await setup.publisher.client.merge_patch(FABRIC_CAPABILITIES.status("efa-nowhere"), forged)
            setup.publisher.observe_published(created, deleted=False)
            await eventually(
                lambda: condition_reason(setup.published()["efa-nowhere"].get("status"), "Ready") == "NoTargetNodes",
                "the hand-made object overwritten",
            )
        finally:
            loop.cancel()
            await asyncio.gather(loop, return_exceptions=True)
