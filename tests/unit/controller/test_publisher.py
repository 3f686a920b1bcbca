"""The publisher against the fake API server: create, adopt, leave alone, put back, expire."""

from __future__ import annotations

import asyncio
import copy
import gc
import logging
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from fabriccap.controller import informers as watchers
from fabriccap.controller.informers import PublishedWatch
from fabriccap.controller.leader import AlwaysLeader
from fabriccap.controller.objects import Intent, Lane, ObjectState
from fabriccap.controller.writes import (
    ROUTINE_WRITES,
    URGENT_WRITES,
    WINDOW_RECHECK_SECONDS,
    Rest,
    is_routine_change,
    write_lane,
)
from fabriccap.core.api import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    POOL_KEY_ANNOTATION,
    POOL_VALUE_ANNOTATION,
    READY_LABEL,
    condition_status,
)
from fabriccap.core.evaluate import Evaluation
from fabriccap.kube.paths import CRD_NAME, FABRIC_CAPABILITIES
from fabriccap.kube.unread import OwnWritesRule
from fabriccap_devtools.world import workload_pod
from support.builders import NODEGROUP, node, plugin_pods
from support.fakeapi import WAIT_SECONDS, WatchResponse, event, eventually, expired, recorded_sleeps
from support.publishing import (
    FCAPS,
    GRACE,
    Lease,
    Setup,
    edited_just_after_our_status_write,
    healthy,
    publishing,
    sending,
    start,
    writing,
)


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


async def test_a_round_waiting_for_its_writes_keeps_no_evaluation() -> None:
    # A first round waits for its writes, which take minutes at 5,000 pools: the evaluation,
    # holding every pool's status, must not be kept that long.
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await setup.publisher.load_published()
        released = asyncio.Event()
        perform = setup.publisher.lanes.perform

        async def held(state: ObjectState, intent: Intent) -> Rest | None:
            await released.wait()
            return await perform(state, intent)

        setup.publisher.lanes.perform = held
        round_ = asyncio.create_task(setup.publisher.reconcile_once())
        await eventually(lambda: sending(setup.publisher) == ["efa-p5"], "the write being sent")
        gc.collect()
        assert [kept for kept in gc.get_objects() if isinstance(kept, Evaluation)] == []
        released.set()
        await round_
        assert "efa-p5" in setup.published()


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


def deleted_just_after(setup: Setup, answering: str) -> None:
    """Make the next write whose path ends with ``answering`` land, then have someone delete
    its object and the watch tell of it, all before the writer reads the write's answer (two
    connections: their order is anyone's)."""
    requests = setup.publisher.requests
    send = requests.merge_patch if answering != "" else requests.create

    async def then_deleted(path: str, body: Any, timeout: float) -> dict[str, Any]:
        answer = await send(path, body, timeout)
        if path.endswith(answering):
            setattr(requests, send.__name__, send)  # once
            name = str(answer["metadata"]["name"])
            gone = setup.published()[name]
            await setup.publisher.client.delete(FABRIC_CAPABILITIES.item(name))
            setup.publisher.observe_published(gone, deleted=True)
        return answer

    setattr(requests, send.__name__, then_deleted)


@pytest.mark.parametrize(
    "answering",
    [
        pytest.param("efa-p5", id="the ready label's PATCH"),
        pytest.param("efa-p5/status", id="the status PATCH"),
        pytest.param("", id="the create"),
    ],
)
async def test_a_write_answered_after_the_watch_saw_its_object_deleted_does_not_bring_it_back(
    answering: str,
) -> None:
    # CI at fed11f1: the label PATCH's answer, read after the DELETED event, was kept as what
    # the cluster holds, and the deleted object was not created again until the relist.
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await setup.publisher.load_published()
        deleted_just_after(setup, answering)
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the first writes to end")
        await setup.publisher.reconcile_once()
        await eventually(lambda: "efa-p5" in setup.published(), "the deleted object to be created again")
        obj = setup.published()["efa-p5"]
        await eventually(
            lambda: condition_status(setup.published()["efa-p5"]["status"], "Ready") == "True",
            "its status to be written again",
        )
        assert len(setup.api.writes("POST")) == 2, obj


async def test_an_edit_the_watch_told_of_before_the_status_write_was_answered_is_put_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        monkeypatch.setattr(
            setup.publisher.requests, "merge_patch", edited_just_after_our_status_write(setup, {"nodes": 7})
        )
        setup.remove_node("b")
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the write to end")
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the put-back to end")
        assert setup.published()["efa-p5"]["status"]["nodes"] == 1


async def test_a_late_deleted_event_of_an_earlier_object_of_that_name_leaves_the_newer_one_held() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        held = setup.publisher.objects["efa-p5"].published
        assert held is not None
        earlier = copy.deepcopy(setup.published()["efa-p5"])
        earlier["metadata"]["uid"] = "uid-of-an-earlier-efa-p5"
        setup.publisher.observe_published(earlier, deleted=True)
        assert setup.publisher.objects["efa-p5"].published is held
        setup.publisher.observe_published(setup.published()["efa-p5"], deleted=True)
        assert setup.publisher.objects["efa-p5"].published is None


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


async def test_an_object_it_does_not_own_is_never_deleted(caplog: pytest.LogCaptureFixture) -> None:
    foreign = {"apiVersion": "fabriccap.dev/v1alpha1", "kind": "FabricCapability", "metadata": {"name": "efa-gone"}}
    async with publishing([foreign]) as setup:
        await start(setup)
        assert setup.publisher._next_deadline() == pytest.approx(GRACE)  # the loop wakes to say so
        setup.clock.now += GRACE + 1
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                await setup.publisher.reconcile_once()
        assert "efa-gone" in setup.published()
        assert setup.api.writes("DELETE") == []
        kept = [
            r
            for r in caplog.records
            if "efa-gone" in r.getMessage() and "not managed by fabriccap; kept" in r.getMessage()
        ]
        assert len(kept) == 1  # said once, not every round
        assert setup.publisher._next_deadline() is None  # and nothing falls due for it any more


async def test_a_step_walks_only_the_objects_that_something_may_fall_due_for() -> None:
    async with publishing() as setup:
        setup.add([*healthy("p5", "a"), *healthy("p4", "b")])
        setup.api.write_failures[("POST", FCAPS)] = deque([500])
        await start(setup)
        # Both were new (no pool called for them yet); one write failed and waits for its retry.
        assert set(setup.publisher._timed) == {"efa-p4", "efa-p5"}
        setup.publisher._fire_due(setup.clock.now)
        failed = next(name for name, state in setup.publisher.objects.items() if state.retry.failures)
        assert list(setup.publisher._timed) == [failed]  # the written one has nothing left to fall due
        setup.clock.now = setup.publisher.objects[failed].retry.due
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        assert set(setup.published()) == {"efa-p4", "efa-p5"}
        setup.publisher._fire_due(setup.clock.now)
        assert setup.publisher._timed == {}
        assert setup.publisher._next_deadline() is None
        # A pool that loses its nodes is walked again: its grace period counts.
        setup.remove_node("b")
        await setup.publisher.reconcile_once()
        assert list(setup.publisher._timed) == ["efa-p4"]
        assert setup.publisher._next_deadline() == pytest.approx(GRACE)


async def test_a_failed_write_backs_off_for_that_object_then_retries() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        setup.api.write_failures[("POST", FCAPS)] = deque([500, 500])
        await start(setup)
        assert setup.metrics.registry.get_sample_value("fabriccap_status_writes_total", {"result": "error"}) == 1
        assert "efa-p5" not in setup.published()
        # The next round does not hammer the API server: the object is backing off.
        setup.store.mark_all()
        await setup.publisher.reconcile_once()
        assert len(setup.api.writes("POST")) == 1
        retry = setup.publisher.objects["efa-p5"].retry
        assert 0.5 <= retry.due - setup.clock.now <= 1.5  # 1 s, jittered
        # Due: the retry timer marks the pool, the write fails again and waits about twice as long.
        setup.clock.now = retry.due
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        assert retry.failures == 2 and 1.0 <= retry.due - setup.clock.now <= 3.0
        setup.clock.now = retry.due
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        assert "efa-p5" in setup.published()
        assert retry.failures == 0


async def test_a_status_refused_as_invalid_is_retried_on_a_long_backoff(caplog: pytest.LogCaptureFixture) -> None:
    # An admission policy or webhook refuses with 422 and then relents: the same bytes are
    # accepted. Never retrying them left the object behind until its status changed
    # (review 64-observe F1).
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        status_path = FABRIC_CAPABILITIES.status("efa-p5")
        setup.api.write_failures[("PATCH", status_path)] = deque([422] * 2)
        await start(setup)
        state = setup.publisher.objects["efa-p5"]
        refused = state.refused_retry
        assert len(setup.api.writes("PATCH")) == 1 and refused.failures == 1
        assert 45.0 <= refused.due - setup.clock.now <= 75.0  # about a minute: not the write backoff's 1 s
        for _ in range(3):  # rounds before the backoff is over: the same status is not sent again
            setup.clock.now += 10
            setup.publisher._fire_due(setup.clock.now)
            setup.store.mark_all()
            await setup.publisher.reconcile_once()
        assert len(setup.api.writes("PATCH")) == 1
        assert setup.gauge("fabriccap_status_writes_refused") == 1
        setup.clock.now = refused.due
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        assert len(setup.api.writes("PATCH")) == 2 and refused.failures == 2  # refused again
        assert 96.0 <= refused.due - setup.clock.now <= 144.0
        refusals = [r for r in caplog.records if "or at once if the status to write changes" in r.getMessage()]
        assert len(refusals) == 1  # logged once per object and status
        setup.clock.now = refused.due  # the policy relented: accepted
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        assert condition_status(setup.published()["efa-p5"]["status"], "Ready") == "True"
        assert state.refused is None and refused.failures == 0
        await setup.publisher.reconcile_once()
        assert setup.gauge("fabriccap_status_writes_refused") == 0


async def test_a_refused_status_is_capped_at_five_minutes_and_a_changed_one_goes_at_once() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        status_path = FABRIC_CAPABILITIES.status("efa-p5")
        setup.api.write_failures[("PATCH", status_path)] = deque([422] * 10)
        await start(setup)
        refused = setup.publisher.objects["efa-p5"].refused_retry
        for _ in range(6):
            setup.clock.now = refused.due
            setup.publisher._fire_due(setup.clock.now)
            await setup.publisher.reconcile_once()
        assert refused.failures == 7 and refused.due - setup.clock.now <= 300.0 * 1.2
        setup.remove_node("b")  # the status changes: one new attempt, without waiting
        await setup.publisher.reconcile_once()
        assert len(setup.api.writes("PATCH")) == 8


async def test_a_refused_status_that_drops_ready_publishes_a_summary_that_fails_closed() -> None:
    # The pool was Ready; a node stops advertising, and a policy refuses the new status: the
    # published Ready=True (uniformCount 32, a recommendation) must not stay (review 64-observe F1).
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        assert condition_status(setup.published()["efa-p5"]["status"], "Ready") == "True"
        status_path = FABRIC_CAPABILITIES.status("efa-p5")
        setup.api.write_failures[("PATCH", status_path)] = deque([422])  # the full status only
        setup.api.failure_messages[422] = 'admission webhook "deny.example.com" denied the request:\nfrozen\x1b[31m'
        setup.add([node("b", pool="p5", efa=0)])
        await setup.publisher.reconcile_once()
        obj = setup.published()["efa-p5"]
        ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "StatusWriteRefused")
        assert "deny.example.com" in ready["message"] and "\n" not in ready["message"]
        assert "\x1b" not in ready["message"]
        assert "uniformCount" not in obj["status"] and "recommendation" not in obj["status"]
        assert obj["metadata"]["labels"][READY_LABEL] == "false"
        assert setup.gauge("fabriccap_status_writes_refused") == 1
        # Accepted on the retry: the full, not-Ready status replaces the summary.
        state = setup.publisher.objects["efa-p5"]
        setup.clock.now = state.refused_retry.due
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        ready = next(c for c in setup.published()["efa-p5"]["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "False" and ready["reason"] not in ("StatusWriteRefused", "UniformCapability")


def ready_of(obj: dict[str, Any]) -> tuple[str, str]:
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    return ready["status"], ready["reason"]


async def test_a_refused_status_that_keeps_ready_but_halves_the_count_publishes_a_summary() -> None:
    # The plugin is reconfigured: both nodes offer 16, still Ready. With the new status refused,
    # uniformCount 32 and a recommendation of 32 stayed published under Ready=True, and a job
    # that requested 32 stayed Pending (review 64-fixc F1).
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        setup.api.write_failures[("PATCH", FABRIC_CAPABILITIES.status("efa-p5"))] = deque([422])
        setup.add([node("a", pool="p5", efa=16), node("b", pool="p5", efa=16)])
        await setup.publisher.reconcile_once()
        obj = setup.published()["efa-p5"]
        assert ready_of(obj) == ("False", "StatusWriteRefused")
        assert "uniformCount" not in obj["status"] and "recommendation" not in obj["status"]
        assert obj["metadata"]["labels"][READY_LABEL] == "false"
        state = setup.publisher.objects["efa-p5"]
        setup.clock.now = state.refused_retry.due  # accepted on the retry: Ready at 16
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        obj = setup.published()["efa-p5"]
        assert ready_of(obj) == ("True", "UniformCapability") and obj["status"]["uniformCount"] == 16


async def test_a_refused_status_of_one_node_more_at_the_same_count_publishes_no_summary() -> None:
    # A scale-up during a refusal: every gate's answer (Ready, 32, the recommendation) holds for
    # the new node too, so the older Ready stays rather than a summary lowering it (review 64e).
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        setup.api.write_failures[("PATCH", FABRIC_CAPABILITIES.status("efa-p5"))] = deque([422])
        setup.add(healthy("p5", "c"))
        await setup.publisher.reconcile_once()
        obj = setup.published()["efa-p5"]
        assert ready_of(obj) == ("True", "UniformCapability") and obj["status"]["uniformCount"] == 32
        assert setup.publisher.objects["efa-p5"].refused is not None


async def test_a_refused_status_that_changes_only_the_workload_reports_publishes_no_summary() -> None:
    # What no gate or job acts on: the older Ready stays, and only the refused status is sent.
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        setup.api.write_failures[("PATCH", FABRIC_CAPABILITIES.status("efa-p5"))] = deque([422])
        setup.add([workload_pod("a", "tcp-only", efa=None)])
        sent = len(setup.api.writes("PATCH"))
        await setup.publisher.reconcile_once()
        obj = setup.published()["efa-p5"]
        assert ready_of(obj) == ("True", "UniformCapability") and obj["status"]["uniformCount"] == 32
        assert len(setup.api.writes("PATCH")) == sent + 1  # the refused status, no summary
        assert setup.publisher.objects["efa-p5"].refused is not None


async def test_the_refused_empty_state_of_an_object_no_pool_calls_for_publishes_a_summary() -> None:
    # Published Ready by an earlier process; its pool is gone (no node left), and the empty
    # state is refused: Ready=True with 2 nodes stayed for the whole grace period (review 64-fixc F1).
    async with publishing() as before:
        before.add(healthy("p5", "a", "b"))
        await start(before)
        ready = copy.deepcopy(before.api.collections[FCAPS].items[0])
    async with publishing([ready]) as setup:
        setup.api.write_failures[("PATCH", FABRIC_CAPABILITIES.status("efa-p5"))] = deque([422])
        setup.publisher.became_leader(True)  # reads what is published back: no pool calls for it
        await start(setup)
        obj = setup.published()["efa-p5"]
        assert ready_of(obj) == ("False", "StatusWriteRefused")
        assert obj["status"]["nodes"] == 0 and "uniformCount" not in obj["status"]
        assert obj["metadata"]["labels"][READY_LABEL] == "false"


async def test_an_object_claimed_by_another_pool_is_never_overwritten() -> None:
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
        for _ in range(3):
            setup.store.mark_all()
            await setup.publisher.reconcile_once()
        assert setup.api.writes("PATCH") == [] and setup.api.writes("POST") == []
        assert setup.metrics.registry.get_sample_value("fabriccap_name_conflicts") == 1
        assert "karpenter.sh/nodepool=other" in str(setup.publisher.objects["efa-p5"].conflict)


async def test_a_hand_made_object_for_no_pool_is_deleted_after_the_grace_period() -> None:
    async with publishing() as setup:
        await start(setup)
        forged = {
            "apiVersion": "fabriccap.dev/v1alpha1",
            "kind": "FabricCapability",
            "metadata": {"name": "efa-nowhere", "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
        }
        created = await setup.publisher.client.create(FCAPS, forged)
        created = await setup.publisher.client.merge_patch(
            FABRIC_CAPABILITIES.status("efa-nowhere"), {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
        )
        setup.publisher.observe_published(created, deleted=False)
        await setup.publisher.reconcile_once()
        # Its forged Ready=True is never exported: pool metrics come from evaluations only.
        assert (
            setup.metrics.registry.get_sample_value(
                "fabriccap_pool_ready", {"name": "efa-nowhere", "fabric": "", "pool": ""}
            )
            is None
        )
        setup.clock.now += GRACE + 1
        await setup.publisher.reconcile_once()
        assert "efa-nowhere" not in setup.published()


async def test_a_forged_transition_time_is_put_back() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        ours = {c["type"]: c["lastTransitionTime"] for c in setup.published()["efa-p5"]["status"]["conditions"]}
        conditions = [
            {**c, "lastTransitionTime": "2001-01-01T00:00:00Z"}
            for c in setup.published()["efa-p5"]["status"]["conditions"]
        ]
        forged = await setup.publisher.client.merge_patch(
            FABRIC_CAPABILITIES.status("efa-p5"), {"status": {"conditions": conditions}}
        )
        setup.publisher.observe_published(forged, deleted=False)
        await setup.publisher.reconcile_once()
        restored = {c["type"]: c["lastTransitionTime"] for c in setup.published()["efa-p5"]["status"]["conditions"]}
        assert restored == ours


async def test_a_follower_evaluates_and_exports_but_writes_nothing() -> None:
    async with publishing() as setup:
        setup.publisher.leader = Lease(leading=False)
        setup.add(healthy("p5", "a"))
        await start(setup)
        assert setup.api.writes() == []
        labels = {"name": "efa-p5", "fabric": "efa", "pool": "p5"}
        assert setup.metrics.sample_value("fabriccap_pool_ready", labels) == 1
        # Leadership arrives: everything is reconciled at the next round.
        setup.publisher.leader = AlwaysLeader()
        setup.publisher.became_leader(True)
        await setup.publisher.reconcile_once()
        assert "efa-p5" in setup.published()


@pytest.mark.parametrize("code", [422, 500])
async def test_a_replica_that_steps_down_keeps_no_failed_write(code: int) -> None:
    # The leader's status write fails (refused, or a server error), then it loses the Lease. It
    # kept the failure: fabriccap_status_writes_refused stayed 1 on it for good (the alert never
    # resolved), and its pool fell due at every step, evaluated ~4 times a second for as long as
    # it followed (review 64-fixc F2).
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        setup.api.write_failures[("PATCH", FABRIC_CAPABILITIES.status("efa-p5"))] = deque([code])
        await start(setup)
        state = setup.publisher.objects["efa-p5"]
        assert state.refused is not None or state.retry.failures
        assert setup.gauge("fabriccap_status_writes_refused") == (1 if code == 422 else 0)
        setup.publisher.leader = Lease(leading=False)
        setup.publisher.became_leader(False)
        assert setup.gauge("fabriccap_status_writes_refused") == 0
        setup.clock.now += 400  # the backoff would be over
        setup.publisher._next_resync = setup.clock.now + 10_000
        assert setup.publisher._next_deadline() is None
        setup.store.changed.clear()
        setup.publisher._fire_due(setup.clock.now)
        assert not setup.store.changed.is_set()  # nothing to evaluate again
        assert "efa-p5" not in setup.publisher._timed


async def test_a_write_failing_after_the_step_down_is_not_retried_by_the_follower() -> None:
    # A write on the wire when the Lease is lost ends after became_leader(False).
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        lease = setup.publisher.leader = Lease()
        setup.api.write_failures[("PATCH", FABRIC_CAPABILITIES.status("efa-p5"))] = deque([422])
        setup.add([node("b", pool="p5", efa=0)])
        setup.publisher.became_leader(False)  # told before the write ends
        lease.leading = False
        setup.publisher.leader = AlwaysLeader()  # the write itself still goes (its window was open)
        await setup.publisher.reconcile_once()
        setup.publisher.leader = lease
        assert setup.publisher.objects["efa-p5"].refused is not None
        assert setup.gauge("fabriccap_status_writes_refused") == 0  # a follower reports none
        setup.clock.now += 400
        setup.store.changed.clear()
        setup.publisher._fire_due(setup.clock.now)
        assert not setup.store.changed.is_set() and setup.publisher.objects["efa-p5"].refused is None


async def start_unable_to_write(setup: Setup, lease: Lease) -> Lease:
    """Start with one pool under ``lease``, whose window is too short to write in: nothing is."""
    setup.publisher.leader = lease
    setup.add(healthy("p5", "a"))
    await start(setup)
    assert setup.api.writes() == []
    return lease


async def test_a_leader_past_its_renew_deadline_writes_nothing_until_it_renews() -> None:
    """Still ``leading``, as a replica just woken from SIGSTOP is until it sees the Lease passed
    on, but its last renewal is older than the renew deadline: nothing is written. The e2e test
    of the pause cannot show this guard alone (the woken replica steps down within
    milliseconds, and then ``leading`` stops the writes too)."""

    async with publishing() as setup:
        lease = await start_unable_to_write(setup, Lease(window=0.0))
        # As the elector does: at a window of 0 it steps down, and says so again once it holds
        # the Lease (LeaderElector.run, _set_leading).
        lease.leading = False
        setup.publisher.became_leader(False)
        lease.leading, lease.window = True, 10.0
        setup.publisher.became_leader(True)
        await setup.publisher.reconcile_once()
        assert "efa-p5" in setup.published()


async def test_a_write_skipped_near_the_renew_deadline_goes_once_the_leader_renews() -> None:
    """Within half a second of its renew deadline a leader skips its writes. If it then renews,
    it never stepped down, so nobody calls ``became_leader``: the skipped write must come back
    by itself, not wait for the pool's next change or the resync (5 min)."""

    async with publishing() as setup:
        lease = await start_unable_to_write(setup, Lease(window=0.3))
        lease.window = 10.0  # renewed, still leading: no call says so
        setup.clock.now += WINDOW_RECHECK_SECONDS
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        assert "efa-p5" in setup.published()
        assert setup.publisher.objects["efa-p5"].recheck_at is None  # looked at once, not again


async def test_stale_watch_data_reads_as_not_ready() -> None:
    async with publishing() as setup:
        fresh = [True]
        setup.metrics.pools.fresh = lambda: fresh[0]
        setup.add(healthy("p5", "a"))
        await start(setup)
        labels = {"name": "efa-p5", "fabric": "efa", "pool": "p5"}
        assert setup.metrics.sample_value("fabriccap_pool_ready", labels) == 1
        fresh[0] = False  # a partition: nothing confirms the last answer
        assert setup.metrics.sample_value("fabriccap_pool_ready", labels) == 0


# --- the watch on the published objects (informers.PublishedWatch) -----------------------------

STATUS_P5 = FABRIC_CAPABILITIES.status("efa-p5")


@asynccontextmanager
async def watching(setup: Setup, unread: OwnWritesRule | None = None) -> AsyncIterator[PublishedWatch]:
    watch = PublishedWatch(
        client=setup.publisher.client, metrics=setup.metrics, observer=setup.publisher, unread=unread
    )
    task = asyncio.create_task(watch.run())
    try:
        yield watch
        assert not task.done(), f"the watch ended: {task.exception()}"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def fcap_events(setup: Setup, result: str) -> float:
    labels = {"kind": "fabriccapability", "result": result}
    return setup.metrics.registry.get_sample_value("fabriccap_watch_events_total", labels) or 0.0


async def test_the_echo_of_an_own_write_is_not_decoded_and_an_edit_still_is() -> None:
    """As main.py wires it: the answers to the publisher's writes tell the watch's rule."""
    async with publishing() as setup:
        own = OwnWritesRule()
        setup.publisher.requests.answered = own.remember
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        async with watching(setup, own) as watch:
            await asyncio.wait_for(watch.listed.wait(), WAIT_SECONDS)
            applied = fcap_events(setup, "applied")
            setup.add([workload_pod("a", "first", efa=32)])
            await setup.publisher.reconcile_once()  # a status PATCH: its echo comes back
            await eventually(lambda: fcap_events(setup, "own") == 1, "the echo counted as the operator's own")
            assert fcap_events(setup, "applied") == applied and len(own) == 0
            # Someone else's edit is decoded, and put back.
            await setup.publisher.client.merge_patch(STATUS_P5, {"status": {"nodes": 7}})
            await eventually(lambda: fcap_events(setup, "applied") == applied + 1, "the edit decoded")
            await eventually(lambda: setup.store.changed.is_set(), "the edit noticed")
            await setup.publisher.reconcile_once()
            assert setup.published()["efa-p5"]["status"]["nodes"] == 2
            await eventually(lambda: fcap_events(setup, "own") == 2, "the put-back's echo not decoded")


async def test_a_deletion_missed_while_the_watch_was_away_is_seen_at_the_relist_and_undone() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        async with watching(setup) as watch:
            await asyncio.wait_for(watch.listed.wait(), WAIT_SECONDS)
            await setup.api.emit(FCAPS)  # the watch is open
            # Deleted while the watch was down (no DELETED event reaches us); the watch's version expires.
            del setup.api.collections[FCAPS].items[0]
            setup.api.collections[FCAPS].resource_version = "5000"
            await setup.api.emit(FCAPS, expired())
            await eventually(lambda: "efa-p5" not in setup.publisher.published, "the relist to forget efa-p5")
            assert setup.store.changed.is_set()
            await setup.publisher.reconcile_once()
            assert "efa-p5" in setup.published()


async def test_the_relist_keeps_an_object_younger_than_itself() -> None:
    """Our own create can be newer than a LIST already under way: that LIST lacks it, and
    forgetting it would make the next round create it again (409)."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        created = setup.publisher.published["efa-p5"].resource_version
        setup.publisher.forget_unlisted(set(), str(int(created) - 1))
        assert "efa-p5" in setup.publisher.published
        setup.publisher.forget_unlisted(set(), "not-a-number")
        assert "efa-p5" in setup.publisher.published
        setup.publisher.forget_unlisted(set(), created)
        assert "efa-p5" not in setup.publisher.published


async def test_a_missing_crd_is_looked_for_again_with_a_backoff_until_it_is_served(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    delays = recorded_sleeps(monkeypatch, watchers, pause=0.01)
    async with publishing() as setup:
        crd_objects = setup.api.collections.pop(FCAPS)
        async with watching(setup) as watch:
            await eventually(lambda: len(delays) >= 3, "three looks at the missing CRD")
            assert not watch.listed.is_set() and not watch.connected
            setup.api.collections[FCAPS] = crd_objects  # the CRD is (re)created
            await asyncio.wait_for(watch.listed.wait(), WAIT_SECONDS)
            assert delays[:3] == [1.0, 2.0, 4.0]
            assert watch.missing_delay == 1.0
            created = {"metadata": {"name": "efa-x", "labels": {}}, "status": {}}
            await setup.api.emit(FCAPS, event("ADDED", created, "2000"))
            await eventually(lambda: "efa-x" in setup.publisher.published, "the event to reach the publisher")
        missing = [r.getMessage() for r in caplog.records if "is not served" in r.getMessage()]
        assert missing == [f"{FCAPS} is not served (CRD {CRD_NAME} missing): looking again with a backoff"]


async def test_a_version_seen_on_the_watch_during_the_first_read_back_is_kept() -> None:
    async with publishing([{"metadata": {"name": "efa-p5", "resourceVersion": "10"}}]) as setup:
        setup.publisher.observe_published({"metadata": {"name": "efa-p5", "resourceVersion": "20"}}, deleted=False)
        await setup.publisher.load_published()
        assert setup.publisher.published["efa-p5"].resource_version == "20"
        # Nothing is called for before the first round: its grace period starts with the publisher.
        assert setup.publisher.objects["efa-p5"].absent_since is None


# --- writes in the background ----------------------------------------------------------------


async def test_a_slow_write_holds_up_neither_the_round_nor_other_pools_and_the_newest_status_follows_it() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b") + healthy("p4", "c"))
        await start(setup)
        p5_status = FABRIC_CAPABILITIES.status("efa-p5")

        def p5_patches() -> int:
            return sum((method, path) == ("PATCH", p5_status) for method, path, _, _ in setup.api.requests)

        before = p5_patches()
        gate = setup.api.write_gates[("PATCH", p5_status)] = asyncio.Event()
        setup.remove_node("b")  # p5: 1 node now
        await setup.publisher.reconcile_once(finish_writes=False)  # returns with p5's PATCH held
        assert writing(setup.publisher) == ["efa-p5"]
        await eventually(lambda: p5_patches() == before + 1, "p5's PATCH sent, and held")
        setup.remove_node("a")
        setup.add([node("a", pool="p5", efa=16)])  # p5 changes again while its write is held
        setup.add(healthy("p4", "d"))
        await setup.publisher.reconcile_once(finish_writes=False)
        await eventually(lambda: setup.published()["efa-p4"]["status"]["nodes"] == 2, "p4 written meanwhile")
        assert p5_patches() == before + 1  # one write of an object at a time, once it is sent
        assert not setup.store.changed.is_set()
        gate.set()
        await setup.publisher.finish_writes()
        assert setup.store.changed.is_set()  # the held write's end brings its pool back
        del setup.api.write_gates[("PATCH", p5_status)]
        await setup.publisher.reconcile_once()
        status = setup.published()["efa-p5"]["status"]
        assert (status["nodes"], status.get("uniformCount")) == (1, 16)


async def test_a_clean_stop_cancels_a_write_that_outlasts_its_wait() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        setup.api.write_gates[("POST", FCAPS)] = asyncio.Event()  # never opened
        await setup.publisher.load_published()
        await setup.publisher.reconcile_once(finish_writes=False)
        assert writing(setup.publisher) == ["efa-p5"]
        await asyncio.wait_for(setup.publisher.finish_writes(timeout=0.05), WAIT_SECONDS)
        assert writing(setup.publisher) == []


async def test_a_status_write_that_leaves_ready_alone_is_not_an_info_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="fabriccap.controller.writes")
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        assert "FabricCapability efa-p5: Ready=True (UniformCapability)" in caplog.messages
        caplog.clear()
        setup.add(healthy("p5", "c"))  # a third node: the counts move, Ready stays True
        await setup.publisher.reconcile_once()
        assert setup.published()["efa-p5"]["status"]["nodes"] == 3
        assert [message for message in caplog.messages if "Ready=" in message] == []
        setup.remove_node("c")
        setup.add([node("c", pool="p5", efa=16)])  # mixed counts: Ready moves
        await setup.publisher.reconcile_once()
        assert [message for message in caplog.messages if "Ready=" in message] == [
            "FabricCapability efa-p5: Ready=False (MixedCounts)"
        ]


async def test_an_unexpected_error_in_a_background_write_is_logged_not_lost(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await setup.publisher.load_published()

        async def broken(state: Any, intent: Any) -> None:
            raise ValueError("a bug")

        monkeypatch.setattr(setup.publisher.lanes, "perform", broken)
        await setup.publisher.reconcile_once(finish_writes=False)
        await setup.publisher.finish_writes()
        assert writing(setup.publisher) == []
        failed = [r for r in caplog.records if r.getMessage() == "writing FabricCapability efa-p5 failed unexpectedly"]
        assert len(failed) == 1 and failed[0].exc_info is not None


def test_a_routine_change_moves_workload_reports_and_no_problem_appears_or_clears() -> None:
    def status(
        requesting: int, without: int = 0, ready: str = "True", when: str = "t0", offenders: int = 0
    ) -> dict[str, Any]:
        return {
            "observedGeneration": 1,
            "nodes": 2,
            "conditions": [{"type": "Ready", "status": ready, "reason": "R", "lastTransitionTime": when}],
            "workloads": {
                "requestingFabric": {"pods": requesting, "workloads": requesting},
                "withoutFabric": {"pods": without, "workloads": without},
                "intentWithoutRequest": {"pods": 0, "workloads": 0},
                "offenders": [{"name": f"job-{number}", "problem": "withoutFabric"} for number in range(offenders)],
            },
        }

    assert is_routine_change(status(1), status(2))
    assert is_routine_change(status(1), status(1, when="t1"))  # times are not a change
    assert not is_routine_change(status(1), status(1, without=1, offenders=1))  # a problem appears
    assert not is_routine_change(status(1, without=1, offenders=1), status(1))  # and clears
    # A problem that stays: its counts and its offenders move as pod churn moves them.
    assert is_routine_change(status(1, without=3, offenders=2), status(1, without=4, offenders=3))
    intent = status(1)
    intent["workloads"]["intentWithoutRequest"] = {"pods": 1, "workloads": 1}
    assert not is_routine_change(status(1), intent)
    assert not is_routine_change(status(1), status(2, ready="False"))
    assert not is_routine_change({**status(1), "nodes": 3}, status(2))
    no_workloads = {key: value for key, value in status(1).items() if key != "workloads"}
    assert not is_routine_change(no_workloads, status(1))
    assert not is_routine_change(status(1), no_workloads)

    # Transport counts move a read at a time: routine, until a verdict shows the fabric not used
    # (sockets or another network, of pods that request it).
    def read(verdict: str, requesting_fabric: int) -> dict[str, Any]:
        counts = {"pods": 1, "workloads": 1, "requestingFabricPods": requesting_fabric}
        return {**status(1), "workloads": {**status(1)["workloads"], "transport": {verdict: counts}}}

    assert is_routine_change(read("unknown", 1), read("fabric", 1))
    assert is_routine_change(read("unknown", 1), read("socket", 0))  # a pod that asked for nothing
    assert not is_routine_change(read("unknown", 1), read("socket", 1))
    assert not is_routine_change(read("fabric", 1), read("other", 1))
    # The lanes: what gates read first, then what else users act on, then the counts.
    assert write_lane(None, status(1)) is Lane.CONDITIONS  # a new object
    assert write_lane(status(1), status(1, ready="False")) is Lane.CONDITIONS
    assert write_lane(status(1), status(1, without=1)) is Lane.URGENT
    assert write_lane(status(1, without=1), status(1, without=2, offenders=1)) is Lane.ROUTINE
    assert write_lane(status(1), status(2, when="t1")) is Lane.ROUTINE


async def test_a_write_users_act_on_does_not_queue_behind_routine_writes() -> None:
    """Every routine writer held (PATCHes that only move requestingFabric): a pod without the
    fabric on another pool is still written at once."""
    async with publishing() as setup:
        pools = [f"p{number:02d}" for number in range(ROUTINE_WRITES + 2)]
        for pool in pools:
            setup.add(healthy(pool, f"{pool}-a"))
        await start(setup)
        for pool in pools:
            setup.api.write_gates[("PATCH", FABRIC_CAPABILITIES.status(f"efa-{pool}"))] = asyncio.Event()
            setup.add([workload_pod(f"{pool}-a", f"{pool}-efa", efa=32)])
        await setup.publisher.reconcile_once(finish_writes=False)
        assert len(writing(setup.publisher)) == len(pools)  # every routine lane busy, two waiting
        quiet = pools[-1]
        del setup.api.write_gates[("PATCH", FABRIC_CAPABILITIES.status(f"efa-{quiet}"))]
        setup.add([workload_pod(f"{quiet}-a", f"{quiet}-tcp", efa=None)])
        queued = writing(setup.publisher, f"efa-{quiet}")  # its routine write, waiting for a lane
        await setup.publisher.reconcile_once(finish_writes=False)
        assert writing(setup.publisher, f"efa-{quiet}") is not queued  # replaced, in an urgent lane
        held = [setup.api.write_gates[("PATCH", FABRIC_CAPABILITIES.status(f"efa-{pool}"))] for pool in pools[:-1]]
        await eventually(
            lambda: setup.published()[f"efa-{quiet}"]["status"]["workloads"]["withoutFabric"]["pods"] == 1,
            "the pool with a pod without the fabric written while the routine writes are held",
        )
        assert not any(gate.is_set() for gate in held)
        for gate in held:
            gate.set()
        await setup.publisher.finish_writes()
        await setup.publisher.reconcile_once()
        assert all(
            setup.published()[f"efa-{pool}"]["status"]["workloads"]["requestingFabric"]["pods"] == 1 for pool in pools
        )


async def test_a_condition_does_not_queue_behind_the_workload_reports() -> None:
    """Every urgent writer held (pods without the fabric on many pools, as churn makes them) and
    more waiting: a pool whose Ready condition flips is still written at once."""
    async with publishing() as setup:
        pools = [f"p{number:02d}" for number in range(URGENT_WRITES + 2)]
        for pool in [*pools, "gated"]:
            setup.add(healthy(pool, f"{pool}-a"))
        await start(setup)
        gates = []
        for pool in pools:
            gate = setup.api.write_gates[("PATCH", FABRIC_CAPABILITIES.status(f"efa-{pool}"))] = asyncio.Event()
            gates.append(gate)
            setup.add([workload_pod(f"{pool}-a", f"{pool}-tcp", efa=None)])
        await setup.publisher.reconcile_once(finish_writes=False)
        await eventually(lambda: len(sending(setup.publisher)) == URGENT_WRITES, "every urgent lane taken")
        assert waiting_writes(setup, Lane.URGENT) == 2 and waiting_writes(setup, Lane.CONDITIONS) == 0
        setup.add([node("gated-a", pool="gated", efa=16), node("gated-b", pool="gated", efa=32)])
        setup.add(plugin_pods(["gated-b"]))
        await setup.publisher.reconcile_once(finish_writes=False)
        await eventually(
            lambda: condition_status(setup.published()["efa-gated"]["status"], "Ready") == "False",
            "the pool whose counts went mixed written while every urgent write is held",
        )
        assert len(sending(setup.publisher)) == URGENT_WRITES and not any(gate.is_set() for gate in gates)
        for gate in gates:
            gate.set()
        await setup.publisher.finish_writes()
        assert waiting_writes(setup, Lane.URGENT) == 0
        waited = setup.metrics.sample_value("fabriccap_status_write_wait_seconds_count", {"lane": "urgent"})
        assert waited == len(pools)
        await setup.publisher.reconcile_once()
        assert all(
            setup.published()[f"efa-{pool}"]["status"]["workloads"]["withoutFabric"]["pods"] == 1 for pool in pools
        )


def waiting_writes(setup: Setup, lane: Lane) -> float | None:
    return setup.metrics.sample_value("fabriccap_status_writes_waiting", {"lane": lane})


async def test_a_write_not_sent_yet_takes_the_newer_status_and_keeps_its_place() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b", "c"))
        await start(setup)
        p5_status = FABRIC_CAPABILITIES.status("efa-p5")

        def p5_patches() -> int:
            return sum((method, path) == ("PATCH", p5_status) for method, path, _, _ in setup.api.requests)

        before = p5_patches()
        setup.add([node("b", pool="p5", efa=16)])  # Ready False: MixedCounts
        await setup.publisher.reconcile_once(finish_writes=False)  # its write has not run yet
        first = writing(setup.publisher, "efa-p5")
        setup.add([node("c", pool="p5", efa=16)])  # and the pool changes again (still MixedCounts)
        await setup.publisher.reconcile_once(finish_writes=False)
        assert writing(setup.publisher, "efa-p5") is first
        await setup.publisher.finish_writes()
        assert p5_patches() == before + 1  # one PATCH, of the newer status
        status = setup.published()["efa-p5"]["status"]
        assert status["counts"] == [{"count": 32, "nodes": 1}, {"count": 16, "nodes": 2}]
        assert condition_status(status, "Ready") == "False"
        assert writing(setup.publisher) == [] and not setup.store.changed.is_set()


async def test_a_routine_write_waiting_for_its_lane_is_not_sent_to_the_back_when_its_pool_moves_again() -> None:
    """Every routine lane held; p-a's routine write waits, then p-b's; p-a's count moves again
    (as a pod churn does every round): p-a is still written first."""
    async with publishing() as setup:
        held_pools = [f"h{number:02d}" for number in range(ROUTINE_WRITES)]
        for pool in [*held_pools, "p-a", "p-b"]:
            setup.add(healthy(pool, f"{pool}-n"))
        await start(setup)
        gates = {}
        for pool in held_pools:
            gates[pool] = setup.api.write_gates[("PATCH", FABRIC_CAPABILITIES.status(f"efa-{pool}"))] = asyncio.Event()
            setup.add([workload_pod(f"{pool}-n", f"{pool}-efa", efa=32)])
        await setup.publisher.reconcile_once(finish_writes=False)
        await eventually(lambda: len(sending(setup.publisher)) == ROUTINE_WRITES, "every routine lane taken")
        setup.add([workload_pod("p-a-n", "a-1", efa=32)])
        await setup.publisher.reconcile_once(finish_writes=False)
        setup.add([workload_pod("p-b-n", "b-1", efa=32)])
        await setup.publisher.reconcile_once(finish_writes=False)
        waiting = writing(setup.publisher, "efa-p-a")
        setup.add([workload_pod("p-a-n", "a-2", efa=32)])
        await setup.publisher.reconcile_once(finish_writes=False)
        assert writing(setup.publisher, "efa-p-a") is waiting
        gates[held_pools[0]].set()  # one lane frees
        await eventually(lambda: "efa-p-b" not in writing(setup.publisher), "p-a and p-b written")
        patched = [path for method, path, _, _ in setup.api.requests if method == "PATCH"]
        order = [patched.index(FABRIC_CAPABILITIES.status(f"efa-{pool}")) for pool in ("p-a", "p-b")]
        assert order == sorted(order)  # p-a first: the line is kept
        assert setup.published()["efa-p-a"]["status"]["workloads"]["requestingFabric"]["pods"] == 2
        for gate in gates.values():
            gate.set()
        await setup.publisher.finish_writes()
        assert setup.published()["efa-p-b"]["status"]["workloads"]["requestingFabric"]["pods"] == 1


async def test_a_colliding_pool_renames_both_objects_once_and_never_loops() -> None:
    """Label values chosen to collide: a Karpenter NodePool named like a node group. Both pools
    take the hashed form, the readable object goes at once, and rounds after that write nothing;
    when the collision ends the readable name comes back. No pool ever has two objects."""
    async with publishing() as setup:
        setup.add(healthy("gpu", "a"))
        await start(setup)
        assert set(setup.published()) == {"efa-gpu"}
        setup.add([node("k1", pool="gpu", pool_key="karpenter.sh/nodepool", efa=32), *plugin_pods(["k1"])])
        await setup.publisher.reconcile_once()
        names = set(setup.published())
        assert len(names) == 2 and all(name.startswith("efa-gpu-") for name in names), names
        pools = {
            (obj["status"]["pool"]["key"], obj["status"]["naming"]["reason"]) for obj in setup.published().values()
        }
        assert pools == {("eks.amazonaws.com/nodegroup", "Collision"), ("karpenter.sh/nodepool", "Collision")}
        before = len(setup.api.bodies)
        for _ in range(3):
            setup.store.mark_all()
            await setup.publisher.reconcile_once()
        assert len(setup.api.bodies) == before  # no write loop
        setup.remove_node("k1")
        await setup.publisher.reconcile_once()
        setup.clock.now += GRACE + 1
        await setup.publisher.reconcile_once()
        assert set(setup.published()) == {"efa-gpu"}
        assert "naming" not in setup.published()["efa-gpu"]["status"]


async def test_a_watch_that_fails_on_every_resume_lists_again_after_its_backstop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The facts' informers list again after half the staleness threshold without progress;
    the published objects' watch had no such bound, and a watch refused on every resume (a
    front end's 500) never listed again, so an object deleted meanwhile stayed unnoticed."""
    recorded_sleeps(monkeypatch, watchers, pause=0.01)
    monkeypatch.setattr(watchers, "PUBLISHED_PROGRESS_TIMEOUT", 0.3)
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        setup.api.script(FCAPS, *(WatchResponse(status=500) for _ in range(1000)))
        async with watching(setup) as watch:
            await asyncio.wait_for(watch.listed.wait(), WAIT_SECONDS)
            del setup.api.collections[FCAPS].items[0]  # deleted; no watch will say so
            await eventually(lambda: "efa-p5" not in setup.publisher.published, "the backstop's LIST to forget it")
            assert len(setup.api.lists(FCAPS)) >= 2


async def test_a_version_of_digits_that_are_not_ascii_is_opaque_to_the_published_objects_view() -> None:
    """ "²" is a digit to str.isdigit(), not to int(): a FabricCapability listing or event with
    such a version raised in the publisher's view, which ended the watch's task, and the
    operator with it (the informers' watch had the same bug, fixed at stop 59)."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        setup.publisher.forget_unlisted(set(), "²")
        assert "efa-p5" in setup.publisher.published  # nothing forgotten on a version it cannot compare
        edited = copy.deepcopy(setup.published()["efa-p5"])
        edited["metadata"]["resourceVersion"] = "①"
        setup.publisher.observe_published(edited, deleted=False)
        assert setup.publisher.objects["efa-p5"].published is not None


async def test_a_ready_label_set_by_hand_is_put_back() -> None:
    """The admission policy selects the pools it warns about by the ready label. One raised by
    hand over a pool that is not Ready changed no status, so nothing looked at the pool again
    until the resync, and the policy took the pool for Ready meanwhile."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        setup.add([node("b", pool="p5", efa=0)])  # not Ready
        await start(setup)
        assert setup.published()["efa-p5"]["metadata"]["labels"][READY_LABEL] == "false"
        edited = await setup.publisher.client.merge_patch(
            FABRIC_CAPABILITIES.item("efa-p5"), {"metadata": {"labels": {READY_LABEL: "true"}}}
        )
        setup.publisher.observe_published(edited, deleted=False)  # its watch event
        await setup.publisher.reconcile_once()
        assert setup.published()["efa-p5"]["metadata"]["labels"][READY_LABEL] == "false"


async def test_a_spec_edit_has_its_status_written_for_the_new_generation_at_once() -> None:
    """An edit of the spec (a note, a field a GitOps tool adds) bumps the generation: every gate
    reads the object as InProgress until a status of that generation is written, and nothing
    wrote one until the resync, up to 5 minutes later (review 64-observe F4)."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        stored = setup.published()["efa-p5"]
        assert stored["status"]["observedGeneration"] == 1
        # What the API server does on a spec edit: the spec and the generation move, nothing else.
        stored["spec"] = {"note": "gate for team B"}
        stored["metadata"]["generation"] = 2
        stored["metadata"]["resourceVersion"] = "5000"
        setup.publisher.observe_published(copy.deepcopy(stored), deleted=False)  # its watch event
        await setup.publisher.reconcile_once()
        assert setup.published()["efa-p5"]["status"]["observedGeneration"] == 2


async def test_a_spec_edit_racing_a_status_write_has_its_generation_written_at_once() -> None:
    """A spec edit lands between the operator's read and its status PATCH: the PATCH stamps the
    old generation, and its answer (generation 2, observedGeneration 1) is newer than the edit's
    watch event, and as new as the write's own. Both were dropped as not newer, and the status
    stayed a generation behind until the resync (review 64-fixc F6)."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        stored = setup.api.collections[FCAPS].items[0]
        write = setup.publisher.requests.merge_patch
        events: list[dict[str, Any]] = []

        async def edited_first(path: str, patch: Any, timeout: float) -> dict[str, Any]:
            if path.endswith("/status") and not events:  # the edit reaches the server first
                stored["spec"] = {"note": "gate for team B"}
                stored["metadata"]["generation"] = 2
                stored["metadata"]["resourceVersion"] = str(next(setup.api._versions))  # before the write's
                events.append(copy.deepcopy(stored))
            answer = await write(path, patch, timeout)
            events.append(copy.deepcopy(answer))
            return answer

        setup.publisher.requests.merge_patch = edited_first  # type: ignore[method-assign]
        setup.add(healthy("p5", "c"))  # a status to write
        await setup.publisher.reconcile_once()
        setup.publisher.requests.merge_patch = write  # type: ignore[method-assign]
        assert setup.published()["efa-p5"]["status"]["observedGeneration"] == 1
        setup.store.changed.clear()
        for obj in events:  # the watch delivers the edit, then the write, in order
            setup.publisher.observe_published(obj, deleted=False)
        assert setup.store.changed.is_set()
        await setup.publisher.reconcile_once()
        obj = setup.published()["efa-p5"]
        assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"] == 2


async def test_pool_annotations_stripped_by_hand_are_put_back_at_the_edit() -> None:
    """``kubectl annotate ... fabriccap.dev/pool-key- fabriccap.dev/pool-value-`` changed no
    status and no ready label: nothing looked at the pool again until its facts changed or the
    resync, so docs/install.md's "put back" was minutes late (review 64a F2)."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        stripped = await setup.publisher.client.merge_patch(
            FABRIC_CAPABILITIES.item("efa-p5"),
            {"metadata": {"annotations": {POOL_KEY_ANNOTATION: None, POOL_VALUE_ANNOTATION: None}}},
        )
        assert POOL_VALUE_ANNOTATION not in stripped["metadata"].get("annotations", {})
        setup.publisher.observe_published(stripped, deleted=False)  # its watch event
        await setup.publisher.reconcile_once()
        annotations = setup.published()["efa-p5"]["metadata"]["annotations"]
        assert (annotations[POOL_KEY_ANNOTATION], annotations[POOL_VALUE_ANNOTATION]) == (NODEGROUP, "p5")


async def test_a_clean_stop_cancels_the_events_still_being_sent_before_the_lease_is_released() -> None:
    # Only a leader sends: an Event left running after finish_writes landed once the Lease was
    # released, when another replica may lead (review 64-shard F8).
    landed: list[str] = []

    async def slow_event() -> None:
        await asyncio.sleep(WAIT_SECONDS)
        landed.append("event")

    async with publishing() as setup:
        setup.add(healthy("p5-a", "n1"))
        await start(setup)
        setup.publisher._spawn(slow_event())
        await setup.publisher.finish_writes(timeout=0.05)
        assert not setup.publisher._side_tasks, "nothing of it still runs"
        await asyncio.sleep(0.1)
        assert landed == []
