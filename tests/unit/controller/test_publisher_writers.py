"""Who writes an object's status: a returning leader takes what is published as the record
(issue 27 item 5; round 3 L18), and a second writer with another answer makes a write war
that is detected, reported and settled (issue 27 item 6; round 3 L16, L17)."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.publisher import Publisher
from fabriccap.core.api import condition_status
from fabriccap.core.config import build_config
from fabriccap.kube.media import MERGE_PATCH
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from support.builders import node
from support.publishing import GRACE, Lease, Setup, healthy, publishing, start

STATUS = FABRIC_CAPABILITIES.status("efa-p5")


def ready_since(obj: dict[str, Any]) -> str:
    return str(next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")["lastTransitionTime"])


def status_patches(setup: Setup) -> int:
    return sum(1 for method, path, _, _ in setup.api.requests if (method, path) == ("PATCH", STATUS))


async def test_a_returning_leader_keeps_the_transition_times_another_replica_published() -> None:
    async with publishing(field_manager="fabriccap/ns/config") as setup:
        lease = Lease()
        setup.publisher.leader = lease
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        own_time = ready_since(setup.published()["efa-p5"])
        # Paused (SIGSTOP): another replica of the same install leads, and publishes Ready False, then True.
        lease.leading = False
        setup.publisher.became_leader(False)
        for ready, when in (("False", "2091-01-01T00:00:00Z"), ("True", "2092-01-01T00:00:00Z")):
            conditions = [
                {**c, "status": ready, "lastTransitionTime": when} if c["type"] == "Ready" else c
                for c in setup.published()["efa-p5"]["status"]["conditions"]
            ]
            other = await setup.publisher.client.request(
                "PATCH",
                STATUS,
                query={"fieldManager": "fabriccap/ns/config"},
                body={"status": {"conditions": conditions}},
                content_type=MERGE_PATCH,
            )
            setup.publisher.observe_published(other, deleted=False)  # its watch catches up on waking
        assert ready_since(setup.published()["efa-p5"]) != own_time
        before = status_patches(setup)
        lease.leading = True  # it leads again
        setup.publisher.became_leader(True)
        await setup.publisher.reconcile_once()
        assert ready_since(setup.published()["efa-p5"]) == "2092-01-01T00:00:00Z"  # history is kept
        assert status_patches(setup) == before  # nothing to write: the same answer


async def test_a_returning_leader_reads_back_what_its_watch_missed_before_its_first_write() -> None:
    """The other replica's writes never reached this one's watch (it was paused through them):
    its first write after the Lease comes back stamps from what is published, not from memory."""
    async with publishing(field_manager="fabriccap/ns/config") as setup:
        lease = Lease()
        setup.publisher.leader = lease
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        lease.leading = False
        setup.publisher.became_leader(False)
        conditions = [
            {**c, "lastTransitionTime": "2092-01-01T00:00:00Z"} if c["type"] == "Ready" else c
            for c in setup.published()["efa-p5"]["status"]["conditions"]
        ]
        await setup.publisher.client.request(
            "PATCH",
            STATUS,
            query={"fieldManager": "fabriccap/ns/config"},
            body={"status": {"conditions": conditions}},
            content_type=MERGE_PATCH,
        )  # no watch event: this replica does not hear of it
        lease.leading = True
        setup.publisher.became_leader(True)
        setup.add(healthy("p5", "c"))  # a third node: a write, and Ready stays True
        await setup.publisher.reconcile_once()
        published = setup.published()["efa-p5"]
        assert published["status"]["nodes"] == 3  # written
        assert ready_since(published) == "2092-01-01T00:00:00Z"  # from what was published


def rival(setup: Setup, manager: str, config: dict[str, Any]) -> Publisher:
    """A second operator on the same cluster (a --standalone replica, another install)."""
    built = build_config({"poolGracePeriodSeconds": GRACE, **config})
    other = Publisher(
        config=built, store=setup.store, client=setup.publisher.client, metrics=OperatorMetrics(), clock=setup.clock
    )
    other.field_manager = other.requests.field_manager = manager
    return other


async def test_two_writers_with_different_answers_settle(caplog: pytest.LogCaptureFixture) -> None:
    async with publishing(field_manager="fabriccap/install-a/1111111111") as setup:
        first = setup.publisher
        # Another config: the same pool, another recommended environment.
        second = rival(
            setup,
            "fabriccap/install-b/2222222222",
            {"fabrics": [{"name": "efa", "recommendedEnv": [{"name": "FI_PROVIDER", "value": "other"}]}]},
        )
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        await second.load_published()

        async def turn(writer: Publisher) -> None:
            setup.store.mark_all()
            await writer.reconcile_once()
            obj = setup.published()["efa-p5"]
            for publisher in (first, second):  # both watch the object
                publisher.observe_published(obj, deleted=False)

        counts = []
        for _ in range(8):
            await turn(second)
            await turn(first)
            counts.append(status_patches(setup))
        print(f"\nstatus PATCHes after each pair of turns: {counts}")
        assert counts[-1] == counts[-4]  # settled: nothing written in the last three pairs of turns
        # One of the two keeps the object current; both say there is another writer.
        assert second.objects["efa-p5"].yielded and not first.objects["efa-p5"].yielded
        assert setup.gauge("fabriccap_foreign_writers") == 1
        assert second.metrics.registry.get_sample_value("fabriccap_foreign_writers") == 1
        env = setup.published()["efa-p5"]["status"]["recommendation"]["env"]
        assert {"name": "FI_PROVIDER", "value": "efa"} in env  # the first one's answer
        wars = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR and "write war" in r.getMessage()]
        assert len(wars) == 2, wars  # said once by each
        assert "stops writing it" in " ".join(wars) and "keeps writing it" in " ".join(wars)
        # The pool changes: the one that kept the object writes it.
        setup.remove_node("b")
        setup.add([node("b", pool="p5", efa=16)])
        await turn(first)
        await turn(second)
        assert setup.published()["efa-p5"]["status"]["counts"] == [{"count": 32, "nodes": 1}, {"count": 16, "nodes": 1}]


async def test_a_one_off_edit_is_put_back_and_is_no_war() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        edited = await setup.publisher.client.merge_patch(STATUS, {"status": {"nodes": 7}})  # kubectl, say
        setup.publisher.observe_published(edited, deleted=False)
        await setup.publisher.reconcile_once()
        assert setup.published()["efa-p5"]["status"]["nodes"] == 2
        assert setup.gauge("fabriccap_foreign_writers") == 0


async def test_an_edit_inside_a_nested_field_is_put_back_once() -> None:
    """A merge patch merges objects: a key someone added inside one (here a second resource in
    the recommendation) must be nulled, or the write never takes and is tried again forever."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        ours = setup.published()["efa-p5"]["status"]
        extra = {"recommendation": {"resourcesPerNode": {"nvidia.com/gpu": "8"}}}
        edited = await setup.publisher.client.merge_patch(STATUS, {"status": extra})
        assert edited["status"]["recommendation"]["resourcesPerNode"]["nvidia.com/gpu"] == "8"
        setup.publisher.observe_published(edited, deleted=False)
        await setup.publisher.reconcile_once()
        assert setup.published()["efa-p5"]["status"]["recommendation"] == ours["recommendation"]
        writes = status_patches(setup)
        for _ in range(3):
            setup.publisher.store.mark_all()
            await setup.publisher.reconcile_once()
        assert status_patches(setup) == writes  # put back: nothing left to write


async def test_publishing_says_whether_this_replica_writes_now() -> None:
    """fabriccap_publishing (issue 27 item 7; round 3 L15): 1 only while this replica leads and
    has read back what is published since it acquired the Lease; 0 while another holds it."""
    async with publishing() as setup:
        lease = Lease()
        setup.publisher.leader = lease
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        assert setup.gauge("fabriccap_publishing") == 1.0
        lease.leading = False  # a stranger holds the Lease
        setup.publisher.became_leader(False)
        assert setup.gauge("fabriccap_publishing") == 0.0
        lease.leading = True
        setup.publisher.became_leader(True)
        assert setup.gauge("fabriccap_publishing") == 0.0  # not before it has read back
        await setup.publisher.reconcile_once()
        assert setup.gauge("fabriccap_publishing") == 1.0


async def test_a_deposed_leaders_late_status_is_replaced_by_the_leaders_own() -> None:
    """The previous leader's PATCH, applied after this leader wrote (a slow API server), carries
    the same field manager: it was taken as this replica's own record and left standing, an
    older Ready over a pool this leader says is broken, until the resync."""
    manager = "fabriccap/ns/config"  # both replicas of one install and config write as this
    async with publishing(field_manager=manager) as setup:
        setup.publisher.leader = Lease()
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        older = copy.deepcopy(setup.published()["efa-p5"]["status"])  # what the old leader computed: Ready
        setup.remove_node("b")
        setup.add([node("b", pool="p5", efa=0)])
        await setup.publisher.reconcile_once()
        assert condition_status(setup.published()["efa-p5"]["status"], "Ready") == "False"
        late = await setup.publisher.client.request(
            "PATCH", STATUS, query={"fieldManager": manager}, body={"status": older}, content_type=MERGE_PATCH
        )
        setup.publisher.observe_published(late, deleted=False)  # its watch event
        await setup.publisher.reconcile_once()
        assert condition_status(setup.published()["efa-p5"]["status"], "Ready") == "False"
