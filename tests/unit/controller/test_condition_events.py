"""Condition Events: on a status or a reason change, Normal on a condition's healthy status, and
rate-limited per object and reason as client-go's EventCorrelator does; status writes per object
are bounded too (issue 27 item 8; round 3 L22; SPEC "Events")."""

from __future__ import annotations

from typing import Any

from fabriccap.controller.events import (
    CLUSTER_SCOPED_EVENTS_NAMESPACE,
    CONDITION_EVENT_BURST,
    CONDITION_EVENT_INTERVAL_SECONDS,
    EventLimiter,
    EventRecorder,
    EventSpec,
    condition_events,
)
from fabriccap.controller.objects import OBJECT_WRITE_BURST, OBJECT_WRITES_PER_SECOND, Lane
from fabriccap.controller.writes import LANE_WIDTHS, WINDOW_RECHECK_SECONDS
from fabriccap.core.api import READY_LABEL, condition_status
from fabriccap.kube.paths import EVENTS, FABRIC_CAPABILITIES
from support.builders import daemon_set, node, only_status, plugin_pods
from support.publishing import Lease, Setup, healthy, publishing, start


def status(advertising: int = 0, **conditions: tuple[str, str]) -> dict[str, Any]:
    return {
        "advertisingNodes": advertising,
        "conditions": [
            {"type": kind, "status": state, "reason": reason, "message": f"{kind} says {reason}"}
            for kind, (state, reason) in conditions.items()
        ],
    }


def told(previous: dict[str, Any] | None, current: dict[str, Any]) -> list[tuple[str, str]]:
    """The (type, reason) of each Event ``condition_events`` gives for this change."""
    return [(event.type, event.reason) for event in condition_events(previous, current)]


def test_a_reason_change_is_an_event_even_when_the_status_stays() -> None:
    before = status(Ready=("False", "PartialRollout"), Homogeneous=("False", "PartialRollout"))
    after = status(Ready=("False", "MixedCounts"), Homogeneous=("False", "MixedCounts"))
    assert condition_events(before, after) == [
        EventSpec("Warning", "MixedCounts", "Ready=False: Ready says MixedCounts"),
        EventSpec("Warning", "MixedCounts", "Homogeneous=False: Homogeneous says MixedCounts"),
    ]
    assert condition_events(after, after) == []  # nothing changed: nothing said


def test_a_new_objects_conditions_away_from_their_healthy_status_are_told() -> None:
    # A new object: Ready tells the story, but a Stalled=True or an above-maximum count beside
    # it got no Event at all (review 64-observe F5). Healthy ones, and those saying what Ready
    # says, stay quiet.
    new = status(
        Homogeneous=("True", "UniformCount"),
        MatchesInstanceType=("False", "AboveInstanceMaximum"),
        Ready=("True", "UniformCapability"),
        Stalled=("True", "HeterogeneousInstanceTypes"),
    )
    assert told({"observedGeneration": 0}, new) == [
        ("Warning", "AboveInstanceMaximum"),
        ("Normal", "UniformCapability"),
        ("Warning", "HeterogeneousInstanceTypes"),
    ]
    partial = status(
        Homogeneous=("False", "PartialRollout"), Ready=("False", "PartialRollout"), Stalled=("False", "NotStalled")
    )
    assert told(None, partial) == [("Warning", "PartialRollout")]


def test_a_new_ready_pool_scaled_to_zero_gets_no_warning() -> None:
    # A Karpenter pool scaled to zero is Ready from what it launches; its node conditions are
    # Unknown for want of a node. It got four Warnings, three of them NoTargetNodes (review 64-fixc F7).
    new = status(
        DevicePluginReady=("Unknown", "NoTargetNodes"),
        Advertised=("Unknown", "NoTargetNodes"),
        Homogeneous=("Unknown", "NoTargetNodes"),
        MatchesInstanceType=("Unknown", "UnknownInstanceType"),
        Launchable=("True", "UniformLaunchableCount"),
        Ready=("True", "UniformCapability"),
        Stalled=("False", "NotStalled"),
    )
    assert told(None, new) == [("Normal", "UniformCapability")]


def test_a_new_pool_without_its_device_plugin_gets_one_warning() -> None:
    # A first install before the device plugin: Ready's reason is the story, and the plugin, the
    # advertising and the maximum are what it is judged from. Three Warnings per pool made
    # 15,000 at 5,000 pools (review 64-fixc F7).
    new = status(
        DevicePluginReady=("False", "PluginNotInstalled"),
        Advertised=("False", "NotAdvertised"),
        Homogeneous=("True", "UniformCount"),
        MatchesInstanceType=("False", "BelowInstanceMaximum"),
        Ready=("False", "NotAdvertised"),
        Stalled=("False", "NotStalled"),
    )
    assert told(None, new) == [("Warning", "NotAdvertised")]


def test_a_new_pool_created_stalled_says_so_beside_its_not_ready() -> None:
    # Stalled=True is not what Ready=False is judged from: it says waiting will not help.
    new = status(
        DevicePluginReady=("False", "PluginNotScheduled"),
        Advertised=("False", "NotAdvertised"),
        Ready=("False", "NotAdvertised"),
        Stalled=("True", "InstanceTypeUnsupported"),
    )
    assert told(None, new) == [
        ("Warning", "NotAdvertised"),
        ("Warning", "InstanceTypeUnsupported"),
    ]


def test_a_new_pool_created_while_it_rolls_out_is_told_what_ready_is_not_judged_from() -> None:
    # Nodes below their type's maximum never affect Ready, nor does Launchable on a pool with
    # nodes: hidden behind a Ready=False, a pool created while it rolled out (its usual first
    # status) was never told them, and the same pool created Ready was (review 64e F4).
    new = status(
        advertising=2,
        DevicePluginReady=("True", "PluginReadyOnAllNodes"),
        Advertised=("False", "NotAdvertised"),
        Homogeneous=("False", "PartialRollout"),
        MatchesInstanceType=("False", "BelowInstanceMaximum"),
        Launchable=("False", "ProviderExcludesInstanceTypes"),
        Ready=("False", "PartialRollout"),
        Stalled=("False", "NotStalled"),
    )
    assert told(None, new) == [
        ("Warning", "BelowInstanceMaximum"),
        ("Warning", "ProviderExcludesInstanceTypes"),
        ("Warning", "PartialRollout"),
    ]
    # A count above the maximum is what Ready is judged from; so is Launchable on an empty gate
    # set, whose Ready says NoTargetNodes with Launchable's message.
    above = status(advertising=2, MatchesInstanceType=("False", "AboveInstanceMaximum"), Ready=("False", "MixedCounts"))
    assert told(None, above) == [("Warning", "MixedCounts")]
    empty = status(Launchable=("False", "ProviderExcludesInstanceTypes"), Ready=("False", "NoTargetNodes"))
    assert told(None, empty) == [("Warning", "NoTargetNodes")]


def test_a_new_pools_events_do_not_depend_on_whether_it_was_created_rolling_out_or_ready() -> None:
    # Real statuses: p5.48xlarge (maximum 32) and p5en.48xlarge at 16, with a third node at 0
    # (its plugin starting), then at 16 (review 64e F4).
    def pool(third: int) -> dict[str, Any]:
        nodes = [
            node("n1", instance_type="p5.48xlarge", efa=16),
            node("n2", instance_type="p5en.48xlarge", efa=16),
            node("n3", instance_type="p5.48xlarge", efa=third),
        ]
        advertising = [name for name, count in (("n1", 16), ("n2", 16), ("n3", third)) if count]
        return only_status([daemon_set(), *nodes, *plugin_pods(advertising)]).model_dump(by_alias=True, mode="json")

    for created in (pool(0), pool(16)):
        assert ("Warning", "BelowInstanceMaximum") in told(None, created)


def test_normal_is_each_conditions_healthy_status() -> None:
    before = status(Ready=("False", "MixedCounts"), Advertised=("False", "PartiallyAdvertised"), Stalled=("True", "X"))
    after = status(
        Ready=("True", "UniformCapability"), Advertised=("True", "AllNodesAdvertise"), Stalled=("False", "NotStalled")
    )
    assert told(before, after) == [
        ("Normal", "UniformCapability"),
        ("Normal", "AllNodesAdvertise"),
        ("Normal", "NotStalled"),  # Stalled is abnormal-true: False is its healthy status
    ]
    assert told(after, before) == [
        ("Warning", "MixedCounts"),
        ("Warning", "PartiallyAdvertised"),
        ("Warning", "X"),
    ]


def test_the_limiter_lets_a_burst_through_then_one_per_interval_counting_the_rest() -> None:
    limiter = EventLimiter()
    event = EventSpec("Warning", "PartialRollout", "Ready=False: ...")
    sent = [limiter.offer(event, now=float(second), wall=f"t{second}") for second in range(CONDITION_EVENT_BURST + 3)]
    assert all(outgoing is not None for outgoing in sent[:CONDITION_EVENT_BURST])
    assert sent[CONDITION_EVENT_BURST:] == [None, None, None]  # held, and counted
    assert limiter.holding
    due_in = limiter.next_due(float(CONDITION_EVENT_BURST + 2))
    assert due_in is not None and 0 < due_in <= CONDITION_EVENT_INTERVAL_SECONDS
    (aggregate,) = limiter.due(float(CONDITION_EVENT_BURST + 2) + due_in)
    assert (aggregate.count, aggregate.first) == (3, f"t{CONDITION_EVENT_BURST}")  # three in one Event
    assert not limiter.holding
    other = EventSpec("Normal", "UniformCapability", "Ready=True: ...")
    assert limiter.offer(other, now=100.0, wall="t100") is not None  # another reason has its own burst


async def test_a_pool_flapping_every_half_second_is_written_and_told_a_bounded_number_of_times() -> None:
    flips, period = 120, 0.5  # a minute of a node flapping between 32 EFA and 0
    async with publishing() as setup:
        setup.publisher.events = EventRecorder(setup.publisher.client, "test")
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        for flip in range(flips):
            setup.clock.now += period
            setup.remove_node("b")
            setup.add([node("b", pool="p5", efa=0 if flip % 2 == 0 else 32)])
            setup.publisher._fire_due(setup.clock.now)
            await setup.publisher.reconcile_once()
        # The flapping stops: what was held back goes out once its interval is over.
        setup.clock.now += CONDITION_EVENT_INTERVAL_SECONDS
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.finish_writes()
        events = [body for method, _, body in setup.api.writes("POST") if (body or {}).get("kind") == "Event"]
        patches = sum(
            1
            for method, path, _, _ in setup.api.requests
            if (method, path) == ("PATCH", FABRIC_CAPABILITIES.status("efa-p5"))
        )
        reasons = {event["reason"] for event in events}
        elapsed = flips * period + CONDITION_EVENT_INTERVAL_SECONDS
        print(
            f"\n{flips} flips, then quiet; {elapsed:.0f}s: {patches} status writes, "
            f"{len(events)} Events ({len(reasons)} reasons)"
        )
        assert patches <= 1 + OBJECT_WRITE_BURST + flips * period * OBJECT_WRITES_PER_SECOND
        per_reason = CONDITION_EVENT_BURST + elapsed / CONDITION_EVENT_INTERVAL_SECONDS + 1
        assert len(events) <= len(reasons) * per_reason
        assert any(event["count"] > 1 for event in events)  # what was held back is counted, not lost


async def test_a_cold_start_writes_every_status_before_the_events_and_labels_that_follow_them() -> None:
    """More new pools than a lane is wide: each pool's Event and ready label wait at the back of
    the lane, so the last status is not as late as the last pool's Event and label."""
    pools = [f"p{number}" for number in range(2 * LANE_WIDTHS[Lane.CONDITIONS])]
    async with publishing() as setup:
        setup.publisher.events = EventRecorder(setup.publisher.client, "test")
        for pool in pools:
            setup.add(healthy(pool, f"{pool}-a", f"{pool}-b"))
        await start(setup)
        await setup.publisher.finish_writes()
        item_paths = {FABRIC_CAPABILITIES.item(f"efa-{pool}") for pool in pools}
        order = [(method, path) for method, path, _, _ in setup.api.requests if method in ("POST", "PATCH")]
        statuses = [at for at, (method, path) in enumerate(order) if path.endswith("/status")]
        events = [
            at for at, (method, path) in enumerate(order) if path == EVENTS.collection(CLUSTER_SCOPED_EVENTS_NAMESPACE)
        ]
        labels = [
            at
            for at, (method, path) in enumerate(order)
            if method == "PATCH" and path.startswith(FABRIC_CAPABILITIES.collection()) and path in item_paths
        ]
        assert len(statuses) == len(events) == len(labels) == len(pools)
        assert max(statuses) < min(events) and max(statuses) < min(labels)
        published = setup.published()
        assert {published[f"efa-{pool}"]["metadata"]["labels"][READY_LABEL] for pool in pools} == {"true"}


def sent_events(setup: Setup) -> list[dict[str, Any]]:
    return [body for _, _, body in setup.api.writes("POST") if (body or {}).get("kind") == "Event"]


async def test_events_left_when_the_lease_window_closed_after_their_status_are_sent_by_the_leader_later() -> None:
    """What follows a status waits in its lane; a window that closes meanwhile sends none of it
    (only a leader writes), and loses none of it: the Events are held, the label waits for the
    recheck, and both go once the leader has renewed."""
    lease = Lease()
    async with publishing() as setup:
        setup.publisher.leader = lease
        setup.publisher.events = EventRecorder(setup.publisher.client, "test")
        requests = setup.publisher.requests
        merge_patch = requests.merge_patch

        async def window_closes_after_a_status(path: str, patch: Any, timeout: float) -> dict[str, Any]:
            answer = await merge_patch(path, patch, timeout)
            if path.endswith("/status"):
                lease.window = 0.3  # under the half second a write needs
            return answer

        requests.merge_patch = window_closes_after_a_status  # type: ignore[method-assign]
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        await setup.publisher.finish_writes()
        published = setup.published()["efa-p5"]
        assert condition_status(published["status"], "Ready") == "True"
        assert published["metadata"]["labels"][READY_LABEL] == "false" and sent_events(setup) == []

        lease.window = 10.0  # renewed: nobody says so, the recheck finds it
        setup.clock.now += WINDOW_RECHECK_SECONDS
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        await setup.publisher.finish_writes()
        assert setup.published()["efa-p5"]["metadata"]["labels"][READY_LABEL] == "true"
        assert [(event["reason"], event["count"]) for event in sent_events(setup)] == [("UniformCapability", 1)]


async def test_a_held_event_whose_send_finds_the_window_closed_is_held_again() -> None:
    """A held Event taken off its queue to be sent while the window closed (the send decided,
    the election's step still under way) was lost: it is held again, and the leader sends it
    once renewed (review 64d F1)."""
    lease = Lease()
    async with publishing() as setup:
        setup.publisher.leader = lease
        setup.publisher.events = EventRecorder(setup.publisher.client, "test", window=lease.write_window)
        requests = setup.publisher.requests
        merge_patch = requests.merge_patch

        async def window_closes_after_a_status(path: str, patch: Any, timeout: float) -> dict[str, Any]:
            answer = await merge_patch(path, patch, timeout)
            if path.endswith("/status"):
                lease.window = 0.3  # under the half second a write needs
            return answer

        requests.merge_patch = window_closes_after_a_status  # type: ignore[method-assign]
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        await setup.publisher.finish_writes()
        state = setup.publisher.objects["efa-p5"]
        assert state.events is not None and state.events.holding and sent_events(setup) == []

        lease.window = 0.0  # the send goes out in the gap: refused, for want of a window
        setup.publisher._send_held_events(state, setup.clock.now + WINDOW_RECHECK_SECONDS)
        await setup.publisher.finish_writes()
        assert state.events.holding and sent_events(setup) == []

        lease.window = 10.0
        setup.publisher._send_held_events(state, setup.clock.now + 2 * WINDOW_RECHECK_SECONDS)
        await setup.publisher.finish_writes()
        assert [(event["reason"], event["count"]) for event in sent_events(setup)] == [("UniformCapability", 1)]


async def test_a_follower_holding_an_event_does_not_wake_for_it_and_sends_it_once_it_leads_again() -> None:
    """A held Event fell due at once (a deadline of 0) whatever the window, but only a leader
    sends: a replica that stepped down holding one stepped 20 times a second for as long as it
    followed (review 64e F3). It waits for the resync, and sends it once it leads again."""
    lease = Lease()
    async with publishing() as setup:
        setup.publisher.leader = lease
        setup.publisher.events = EventRecorder(setup.publisher.client, "test", window=lease.write_window)
        requests = setup.publisher.requests
        merge_patch = requests.merge_patch

        async def window_closes_after_a_status(path: str, patch: Any, timeout: float) -> dict[str, Any]:
            answer = await merge_patch(path, patch, timeout)
            if path.endswith("/status"):
                lease.window = 0.3  # under the half second a write needs
            return answer

        requests.merge_patch = window_closes_after_a_status  # type: ignore[method-assign]
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        await setup.publisher.finish_writes()
        requests.merge_patch = merge_patch  # type: ignore[method-assign]
        state = setup.publisher.objects["efa-p5"]
        assert state.events is not None and state.events.holding

        lease.leading = False
        setup.publisher.became_leader(False)
        publisher = setup.publisher
        publisher._next_resync = setup.clock.now + 10_000
        steps, start_time = 0, setup.clock.now
        while setup.clock.now < start_time + 60 and steps < 2_000:  # as run() turns
            if not setup.store.changed.is_set():
                setup.clock.now += publisher._seconds_to_wait()
            await publisher.step()
            steps += 1
        assert steps <= 3 and state.events.holding and sent_events(setup) == []

        lease.leading, lease.window = True, 10.0
        publisher.became_leader(True)
        await publisher.step()
        await publisher.finish_writes()
        assert [(event["reason"], event["count"]) for event in sent_events(setup)] == [("UniformCapability", 1)]
