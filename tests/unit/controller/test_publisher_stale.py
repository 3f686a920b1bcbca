"""Data that cannot be read fails closed in the object, not only in the metrics (issue 27 item 4;
round 3 L12): after staleAfterSeconds, Ready False DataUnavailable, naming the kind."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from fabriccap.core.api import READY_LABEL, condition_reason, condition_status, find_condition
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from support.builders import node
from support.fakeapi import WAIT_SECONDS, eventually
from support.publishing import FCAPS, Lease, Setup, healthy, publishing, start

STALE_AFTER = 30.0


@dataclass
class FakeFreshness:
    """The informers' freshness as the publisher reads it: kind -> seconds since last heard."""

    stale_after: float = STALE_AFTER
    ages_now: dict[str, float | None] = field(default_factory=lambda: {"node": 1.0, "pod": 1.0, "daemonset": 1.0})

    def ages(self) -> dict[str, float | None]:
        return dict(self.ages_now)

    def stale_kinds(self) -> dict[str, float | None]:
        return {kind: age for kind, age in self.ages_now.items() if age is None or age > self.stale_after}


def shown(setup: Setup, name: str) -> tuple[str | None, str | None, str]:
    obj = setup.published()[name]
    ready = find_condition(obj.get("status"), "Ready") or {}
    return ready.get("status"), ready.get("reason"), str(ready.get("message", ""))


async def test_a_kind_unread_for_stale_after_seconds_makes_every_object_say_data_unavailable() -> None:
    async with publishing(staleAfterSeconds=STALE_AFTER) as setup:
        freshness = FakeFreshness()
        setup.publisher.freshness = freshness
        setup.publisher.fresh = lambda: not freshness.stale_kinds()
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        assert shown(setup, "efa-p5")[:2] == ("True", "UniformCapability")
        freshness.ages_now["pod"] = STALE_AFTER + 10  # pods list/watch revoked: nothing heard since
        await setup.publisher.reconcile_once()
        status, reason, message = shown(setup, "efa-p5")
        assert (status, reason) == ("False", "DataUnavailable")
        assert "Pods" in message and "Nodes" not in message
        assert setup.published()["efa-p5"]["metadata"]["labels"][READY_LABEL] == "false"
        assert "recommendation" not in setup.published()["efa-p5"]["status"]
        # A node of the pool changes meanwhile: what is written still says the data is not current.
        setup.remove_node("b")
        setup.add([node("b", pool="p5", efa=16)])
        await setup.publisher.reconcile_once()
        assert shown(setup, "efa-p5")[:2] == ("False", "DataUnavailable")
        assert setup.published()["efa-p5"]["status"]["counts"] == [{"count": 32, "nodes": 1}, {"count": 16, "nodes": 1}]
        freshness.ages_now["pod"] = 1.0  # readable again
        await setup.publisher.reconcile_once()
        assert shown(setup, "efa-p5")[:2] == ("False", "MixedCounts")


@contextlib.asynccontextmanager
async def published_ready(stale_after: float) -> AsyncIterator[Setup]:
    """A publisher (its store not listed) over the FabricCapability efa-p5 with the valid, Ready
    status a previous run wrote."""
    published = {
        "apiVersion": "fabriccap.dev/v1alpha1",
        "kind": "FabricCapability",
        "metadata": {"name": "efa-p5", "labels": {"app.kubernetes.io/managed-by": "fabriccap", READY_LABEL: "true"}},
    }
    async with publishing([published], staleAfterSeconds=stale_after) as setup:
        async with publishing() as earlier:
            earlier.add(healthy("p5", "a"))
            await start(earlier)
            status = earlier.published()["efa-p5"]["status"]
        await setup.publisher.client.merge_patch(FABRIC_CAPABILITIES.status("efa-p5"), {"status": status})
        yield setup


@pytest.mark.parametrize("elected", [False, True], ids=["standalone", "elected"])
async def test_published_objects_fail_closed_when_the_first_listing_never_comes(elected: bool) -> None:
    """A restarted operator that cannot list never evaluates: what it finds published must not
    keep saying Ready. Elected through the Lease, it reads back before it writes, and only a
    round did that, which waits for the listing: every fail-closed write was held back."""
    async with published_ready(0.2) as setup:
        if elected:  # what the elector does on acquiring the Lease (main.py: on_change)
            setup.publisher.leader = Lease()
            setup.publisher.became_leader(True)
        task = asyncio.create_task(setup.publisher.run())  # the store is never listed
        try:
            await eventually(
                lambda: condition_reason(setup.published()["efa-p5"].get("status"), "Ready") == "DataUnavailable",
                "the published object to fail closed",
            )
            assert condition_status(setup.published()["efa-p5"]["status"], "Ready") == "False"
            assert setup.published()["efa-p5"]["metadata"]["labels"][READY_LABEL] == "false"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_objects_failed_closed_before_the_first_listing_name_the_kind_that_was_not_listed() -> None:
    """Review 62 F8: a ClusterRole without devicetaintrules (403): only that kind never lists,
    and the ResourceSlices, which wait for it. The message named every kind watched as never
    listed, so nothing said which permission was missing."""
    async with published_ready(0.2) as setup:
        listed = dict.fromkeys(("node", "pod", "daemonset", "deviceclass", "resourceclaim"), 1.0)
        setup.publisher.freshness = FakeFreshness(ages_now={**listed, "devicetaintrule": None, "resourceslice": None})
        task = asyncio.create_task(setup.publisher.run())  # the store is never listed
        try:
            await eventually(
                lambda: condition_reason(setup.published()["efa-p5"].get("status"), "Ready") == "DataUnavailable",
                "the published object to fail closed",
            )
            assert shown(setup, "efa-p5")[2].startswith(
                "DeviceTaintRules (never listed; ResourceSlices wait for them) could not be read from the API server"
                " for staleAfterSeconds (0s)"
            )
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


@contextlib.asynccontextmanager
async def ready_but_never_listed(stale_after: float) -> AsyncIterator[tuple[Setup, Lease]]:
    """A replica whose store never lists, not leading yet, over the Ready FabricCapability an
    earlier replica published."""
    async with published_ready(stale_after) as setup:
        lease = setup.publisher.leader = Lease(leading=False)
        yield setup, lease


async def test_a_replica_elected_between_two_waits_for_its_listing_fails_closed_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Elected while no wait for the listing runs (its first one ran out, and it is loading what
    is published before the next): it fails closed at once, not a staleAfterSeconds later (the
    election had nothing to cut short, and the next wait took the whole of it)."""
    stale_after = 2.0
    async with ready_but_never_listed(stale_after) as (setup, lease):
        loading, loaded = asyncio.Event(), asyncio.Event()
        load_published = setup.publisher.load_published

        async def slow_load() -> None:
            loading.set()
            await loaded.wait()
            await load_published()

        monkeypatch.setattr(setup.publisher, "load_published", slow_load)
        task = asyncio.create_task(setup.publisher.run())  # the store is never listed
        try:
            await asyncio.wait_for(loading.wait(), WAIT_SECONDS)  # the first wait ran out
            lease.leading = True
            setup.publisher.became_leader(True)
            elected = asyncio.get_running_loop().time()
            loaded.set()
            await eventually(
                lambda: condition_reason(setup.published()["efa-p5"].get("status"), "Ready") == "DataUnavailable",
                "the published object to fail closed",
            )
            assert asyncio.get_running_loop().time() - elected < stale_after / 2
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_replica_may_lead_once_listed_or_once_failing_closed_needs_a_leader() -> None:
    """A replica campaigns for the Lease only once it has listed (a cold one held it while it
    could write nothing). Its listing overdue, it campaigns anyway: what is published must
    fail closed, and no replica that listed may come. Elected then, it fails closed at once,
    not a further staleAfterSeconds later."""
    stale_after = 1.0
    async with ready_but_never_listed(stale_after) as (setup, lease):
        task = asyncio.create_task(setup.publisher.run())  # the store is never listed
        try:
            await asyncio.sleep(stale_after / 2)
            assert not setup.publisher.may_lead.is_set()
            await eventually(setup.publisher.may_lead.is_set, "a campaign once the listing is overdue")
            lease.leading = True  # what the elector does on acquiring the Lease (main.py: on_change)
            setup.publisher.became_leader(True)
            elected = asyncio.get_running_loop().time()
            await eventually(
                lambda: condition_reason(setup.published()["efa-p5"].get("status"), "Ready") == "DataUnavailable",
                "the published object to fail closed",
            )
            assert asyncio.get_running_loop().time() - elected < stale_after / 2
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    async with publishing() as setup:
        task = asyncio.create_task(setup.publisher.run())
        try:
            await asyncio.sleep(0.05)
            assert not setup.publisher.may_lead.is_set()
            setup.store.listed.set()
            await eventually(setup.publisher.may_lead.is_set, "a campaign once listed")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_failing_read_back_holds_the_writes_not_the_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Elected, the replica reads every FabricCapability back before it writes. That LIST was
    retried inline, forever: no pool was evaluated meanwhile, and fabriccap_pool_ready (what
    the alerts read) kept saying Ready over a pool that had broken."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)  # the previous leader's status: Ready
        setup.publisher.leader = Lease()
        setup.publisher.became_leader(True)
        setup.api.list_failures[FCAPS] = deque([500] * 3)  # a conversion webhook down, a 429 storm
        setup.remove_node("b")
        setup.add([node("b", pool="p5", efa=0)])  # the pool breaks
        listed = _fcap_lists(setup)
        await asyncio.wait_for(setup.publisher.reconcile_once(), WAIT_SECONDS)
        assert setup.gauge("fabriccap_pool_ready", name="efa-p5", fabric="efa", pool="p5") == 0.0
        assert condition_status(setup.published()["efa-p5"]["status"], "Ready") == "True"  # not written yet
        await setup.publisher.reconcile_once()  # within the read-back's backoff: not listed again
        assert _fcap_lists(setup) == listed + 1
        setup.publisher._read_back_retry.due = 0.0  # the backoff passed; the LIST answers again
        setup.api.list_failures[FCAPS].clear()
        await setup.publisher.reconcile_once()
        assert condition_status(setup.published()["efa-p5"]["status"], "Ready") == "False"


def _fcap_lists(setup: Setup) -> int:
    return sum(1 for method, path, _, _ in setup.api.requests if (method, path) == ("GET", FCAPS))
