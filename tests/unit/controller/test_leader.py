"""Leader election against the fake API server: one holder, takeover after the lease expires
by the follower's own clock, no writes outside the renew deadline, release on a clean stop."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from fabriccap.controller import leader as leader_module
from fabriccap.controller import publisher as publisher_module
from fabriccap.controller.leader import MAX_TRUSTED_LEASE_SECONDS, LeaderElector, LeaseTimings, lease_name
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.ratelimit import BackoffPolicy
from fabriccap.core.evaluate import evaluate
from fabriccap.core.shard import UNSHARDED, Shard
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import LEASES
from support.fakeapi import FakeApi, WatchResponse, eventually, fake_api
from support.publishing import healthy, publishing

NAMESPACE = "fabriccap-system"
LEASES_PATH = LEASES.collection(NAMESPACE)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def elector(client: KubeClient, identity: str, clock: Clock) -> LeaderElector:
    return LeaderElector(
        client, NAMESPACE, identity, OperatorMetrics(), timings=LeaseTimings(), clock=clock, wall=lambda: 1.7e9
    )


@asynccontextmanager
async def two_replicas() -> AsyncIterator[tuple[FakeApi, LeaderElector, Clock, LeaderElector, Clock]]:
    async with fake_api() as (api, client):
        api.serve(LEASES_PATH, "Lease", [], "1")
        clock_a, clock_b = Clock(), Clock()
        yield api, elector(client, "a", clock_a), clock_a, elector(client, "b", clock_b), clock_b


def holder(api: FakeApi) -> str:
    return str(api.objects(LEASES_PATH)["fabriccap-leader"]["spec"]["holderIdentity"])


async def test_one_replica_leads_and_the_other_follows() -> None:
    async with two_replicas() as (api, a, _, b, _):
        await a._step()
        await b._step()
        assert (a.leading, b.leading) == (True, False)
        assert holder(api) == "a"
        assert a.write_window() == pytest.approx(10.0)
        assert b.write_window() == 0.0
        assert a.metrics.registry.get_sample_value("fabriccap_leader") == 1
        assert b.metrics.registry.get_sample_value("fabriccap_leader") == 0


async def test_the_follower_takes_over_only_after_a_whole_lease_duration_unchanged() -> None:
    async with two_replicas() as (api, a, _clock_a, b, clock_b):
        await a._step()
        await b._step()  # b sees a's record at its t=100
        clock_b.now += 14.9
        await b._step()
        assert not b.leading  # a's record is not yet 15 s old by b's clock
        clock_b.now += 0.2
        await b._step()
        assert b.leading and holder(api) == "b"
        assert api.objects(LEASES_PATH)["fabriccap-leader"]["spec"]["leaseTransitions"] == 1


async def test_a_lease_duration_past_the_bound_is_not_believed() -> None:
    """A Lease edited to leaseDurationSeconds 2147483647 by a holder that never renews: taken
    over once the bound has passed, not in 68 years (round 3 L15)."""
    async with two_replicas() as (api, a, clock_a, _, _):
        record = {"holderIdentity": "intruder", "leaseDurationSeconds": 2147483647, "renewTime": "2026-01-01T00:00:00Z"}
        api.serve(
            LEASES_PATH,
            "Lease",
            [{"metadata": {"name": "fabriccap-leader", "namespace": NAMESPACE}, "spec": record}],
            "1",
        )
        await a._step()
        clock_a.now += MAX_TRUSTED_LEASE_SECONDS - 0.1
        await a._step()
        assert not a.leading
        clock_a.now += 0.2
        await a._step()
        assert a.leading and holder(api) == "a"


async def test_a_leader_that_cannot_renew_stops_writing_before_the_lease_can_pass() -> None:
    async with two_replicas() as (_, a, clock_a, _, _):
        await a._step()
        clock_a.now += 9.0
        assert 0 < a.write_window() <= 1.0
        clock_a.now += 1.1  # past the renew deadline (10 s), 5 s before anyone may take over
        assert a.write_window() == 0.0


async def test_a_paused_leader_that_lost_the_lease_does_not_write_when_resumed() -> None:
    async with two_replicas() as (api, a, clock_a, b, clock_b):
        await a._step()
        await b._step()
        clock_a.now += 20  # SIGSTOP for 20 s
        clock_b.now += 16
        await b._step()
        assert b.leading
        assert a.write_window() == 0.0  # resumed: its last renewal is 20 s old
        await a._step()  # it reads the Lease: b holds it
        assert not a.leading and holder(api) == "b"


async def test_a_renewal_keeps_the_window_open() -> None:
    async with two_replicas() as (_, a, clock_a, _, _):
        await a._step()
        for _ in range(10):
            clock_a.now += 2.0
            await a._step()
        assert a.leading and a.write_window() == pytest.approx(10.0)


async def test_a_clean_stop_releases_the_lease() -> None:
    async with two_replicas() as (api, a, _, b, _):
        await a._step()
        task = asyncio.create_task(a.run())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert holder(api) == ""
        await b._step()  # an empty holder is free at once
        assert b.leading


async def test_two_replicas_racing_for_a_free_lease_get_one_winner() -> None:
    async with two_replicas() as (api, a, _, b, _):
        await asyncio.gather(a._step(), b._step())
        assert [a.leading, b.leading].count(True) == 1
        assert holder(api) in ("a", "b")


async def test_a_follower_sees_each_renewal_through_its_watch() -> None:
    """Between polls: the follower's lease count starts at the renewal it watched, not at its
    next poll, so a takeover after a crash comes one lease duration after the last renewal."""
    async with two_replicas() as (api, a, clock_a, b, clock_b):
        await a._step()
        await b._step()
        first_seen = b._observed_at
        watcher = asyncio.create_task(b._watch_lease())
        try:
            await eventually(lambda: bool(api.watches(LEASES_PATH)), "the follower's lease watch")
            assert api.watches(LEASES_PATH)[-1]["fieldSelector"] == "metadata.name=fabriccap-leader"
            clock_a.now += 1.0
            clock_b.now += 1.3  # the renewal lands between two polls of b
            a.wall = lambda: 1.7e9 + 1.0
            await a._step()
            await eventually(lambda: b._observed_at != first_seen, "the renewal seen through the watch")
            assert b._observed_at == 101.3
            assert b._wake.is_set()
            # 15 s after that renewal, not after the first sighting.
            clock_b.now = 101.3 + 14.9
            await b._step()
            assert not b.leading
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)


async def test_each_shard_elects_its_own_leader_on_its_own_lease() -> None:
    async with fake_api() as (api, client):
        api.serve(LEASES_PATH, "Lease", [], "1")
        clock = Clock()
        shards = [Shard(index=index, count=2) for index in range(2)]
        first, second = (
            LeaderElector(
                client, NAMESPACE, f"replica-{shard.index}", OperatorMetrics(), name=lease_name(shard), clock=clock
            )
            for shard in shards
        )
        await first._step()
        await second._step()
        # Both lead: each holds the Lease of its shard, and neither waits for the other.
        assert (first.leading, second.leading) == (True, True)
        leases = api.objects(LEASES_PATH)
        assert {name: lease["spec"]["holderIdentity"] for name, lease in leases.items()} == {
            "fabriccap-leader-0-of-2": "replica-0",
            "fabriccap-leader-1-of-2": "replica-1",
        }
    assert lease_name(UNSHARDED) == "fabriccap-leader"
    # Another split is another set of Leases: a rollout from 2 shards to 4 elects anew.
    assert lease_name(Shard(index=1, count=4)) == "fabriccap-leader-1-of-4"


async def test_a_leader_that_lost_the_lease_steps_down_before_it_takes_it_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A leader whose step reads the Lease only after another replica took it and went silent
    for a lease duration took it back still leading: no step down, so the publisher never read
    back what the other leader wrote. The holder's name, anything up to the object's size, is
    shown bounded."""
    async with two_replicas() as (api, a, clock_a, _, _):
        changes: list[bool] = []
        a.on_change = changes.append
        await a._step()
        long_name = "b" * 100_000
        clock_b = Clock()
        b = elector(a.client, long_name, clock_b)
        await b._step()  # b sees a's record
        clock_b.now += 16
        await b._step()  # and takes it over (a's record went unrenewed), then dies
        assert b.leading
        a._observe(api.objects(LEASES_PATH)["fabriccap-leader"])  # a's Lease watch saw b's record
        clock_a.now += 40  # a's slow step reads the Lease only now
        await a._step()
        assert a.leading and holder(api) == "a"
        assert changes == [True, False, True]  # stepped down, then a new term: read back first
        assert all(len(message) < 1_000 for message in caplog.messages)
        assert any("the lease is held by bbbb" in message for message in caplog.messages)


async def test_a_lease_request_that_hangs_steps_the_leader_down_at_its_renew_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A GET of the Lease that never answered kept ``leading`` (and fabriccap_leader) up for
    the client's 60 s, past the window, with no other attempt meanwhile."""
    async with fake_api() as (api, client):
        api.serve(LEASES_PATH, "Lease", [], "1")
        timings = LeaseTimings(lease_duration=1.5, renew_deadline=1.0, retry_period=0.2)
        a = LeaderElector(client, NAMESPACE, "a", OperatorMetrics(), timings=timings)
        await a._step()
        assert a.leading

        async def hangs() -> None:
            await asyncio.Event().wait()

        monkeypatch.setattr(a, "_get", hangs)
        task = asyncio.create_task(a.run())
        try:
            await eventually(lambda: not a.leading, "stepped down at the renew deadline")
            assert a.metrics.registry.get_sample_value("fabriccap_leader") == 0
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_clean_stop_against_a_silent_api_server_ends_within_the_release_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(leader_module, "RELEASE_SECONDS", 0.2)
    async with two_replicas() as (_, a, _, _, _):
        await a._step()
        task = asyncio.create_task(a.run())
        await asyncio.sleep(0.05)

        async def hangs() -> None:
            await asyncio.Event().wait()

        monkeypatch.setattr(a, "_get", hangs)
        task.cancel()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 2.0)
        assert not a.leading


async def test_a_lease_watch_line_that_is_not_an_event_is_passed_over() -> None:
    """A line that decodes to a list ended the follower's watch with an AttributeError, and its
    takeover fell back to polling."""
    async with two_replicas() as (api, a, _, b, clock_b):
        await a._step()
        await b._step()
        first_seen = b._observed_at
        api.script(LEASES_PATH, WatchResponse(chunks=[b"[]\n"]))
        watcher = asyncio.create_task(b._watch_lease())
        try:
            await eventually(lambda: bool(api.watches(LEASES_PATH)), "the follower's lease watch")
            clock_b.now += 1.3
            a.wall = lambda: 1.7e9 + 1.0
            await a._step()
            await eventually(lambda: b._observed_at != first_seen, "the renewal seen through the same watch")
            assert len(api.watches(LEASES_PATH)) == 1 and not watcher.done()
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)


async def test_a_deleted_lease_is_created_again_only_once_its_last_record_would_have_expired() -> None:
    """``kubectl delete lease`` made the next follower create the Lease and lead at once, while
    the old leader kept its window: two replicas wrote until the old one's next poll."""
    async with two_replicas() as (api, a, clock_a, b, clock_b):
        await a._step()
        await b._step()  # b sees a's record at its t=100
        await a.client.request("DELETE", LEASES.item("fabriccap-leader", NAMESPACE))
        clock_b.now += 0.5
        await b._step()
        assert not b.leading and "fabriccap-leader" not in api.objects(LEASES_PATH)
        clock_a.now += 2.0
        await a._step()  # the leader finds its Lease gone: its own record, created again at once
        assert a.leading and holder(api) == "a"


async def test_a_deleted_lease_whose_holder_is_gone_is_taken_a_lease_duration_later() -> None:
    async with two_replicas() as (api, a, _, b, clock_b):
        await a._step()
        await b._step()
        await a.client.request("DELETE", LEASES.item("fabriccap-leader", NAMESPACE))  # and a dies
        clock_b.now += 14.9
        await b._step()
        assert not b.leading
        clock_b.now += 0.2
        await b._step()
        assert b.leading and holder(api) == "b"
        # A replica that never saw a record (a first start) creates it at once.
        await b.client.request("DELETE", LEASES.item("fabriccap-leader", NAMESPACE))
        fresh = elector(b.client, "c", Clock())
        await fresh._step()
        assert fresh.leading and holder(api) == "c"


async def test_a_renewal_refused_by_a_conflict_steps_down_at_once_when_another_holds_the_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 409 on renewal was passed over: the leader kept writing under a Lease another replica
    held until its next poll, 2 s later."""
    async with two_replicas() as (api, a, clock_a, b, clock_b):
        changes: list[bool] = []
        a.on_change = changes.append
        await a._step()
        await b._step()
        read_before_the_takeover = copy.deepcopy(api.objects(LEASES_PATH)["fabriccap-leader"])
        clock_b.now += 16
        await b._step()  # b takes the Lease while a's renewal is under way
        assert b.leading
        reads = [read_before_the_takeover]
        real_get = a._get

        async def stale_first_read() -> dict[str, Any] | None:
            return reads.pop() if reads else await real_get()

        monkeypatch.setattr(a, "_get", stale_first_read)
        clock_a.now += 2.0
        await a._step()  # its PUT carries the old resourceVersion: 409
        assert not a.leading and a.write_window() == 0.0
        assert changes == [True, False] and holder(api) == "b"


async def test_a_leader_whose_re_create_of_its_deleted_lease_meets_a_conflict_steps_down_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The leader finds its Lease deleted and creates it again, but a replica that never saw a
    record (a first start) created it first: the 409 was passed over, and the leader kept
    writing under the other's Lease until its next poll."""
    async with two_replicas() as (api, a, clock_a, _, _):
        changes: list[bool] = []
        a.on_change = changes.append
        await a._step()
        await a.client.request("DELETE", LEASES.item("fabriccap-leader", NAMESPACE))
        reads: list[dict[str, Any] | None] = [None]  # a's read comes just before n's create
        real_get = a._get

        async def gone_at_first_read() -> dict[str, Any] | None:
            return reads.pop() if reads else await real_get()

        monkeypatch.setattr(a, "_get", gone_at_first_read)
        first_start = elector(a.client, "n", Clock())
        await first_start._step()
        assert first_start.leading
        clock_a.now += 2.0
        await a._step()  # its create is a 409
        assert not a.leading and a.write_window() == 0.0
        assert changes == [True, False] and holder(api) == "n"


async def test_a_conflict_on_renewal_of_a_lease_still_held_renews_it_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone else's edit of the Lease (a label) between the read and the renewal: read again,
    still ours, renewed in the same step."""
    async with two_replicas() as (api, a, clock_a, _, _):
        await a._step()
        real_get = a._get

        async def edited_after_the_read() -> dict[str, Any] | None:
            lease = await real_get()
            if lease is not None and not (lease["metadata"].get("labels") or {}):
                edited = copy.deepcopy(lease)
                edited["metadata"]["labels"] = {"team": "infra"}
                await a.client.request("PUT", LEASES.item("fabriccap-leader", NAMESPACE), body=edited)
            return lease

        monkeypatch.setattr(a, "_get", edited_after_the_read)
        clock_a.now += 9.0
        await a._step()
        assert a.leading and a.write_window() == pytest.approx(10.0)
        assert api.objects(LEASES_PATH)["fabriccap-leader"]["metadata"]["labels"] == {"team": "infra"}


async def test_a_lease_watch_that_fails_unexpectedly_is_logged_and_opened_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Only KubeError was caught: any other exception ended the follower's watch silently, and
    its takeover fell back to polling for good."""
    monkeypatch.setattr(leader_module, "WATCH_BACKOFF", BackoffPolicy(base=0.01, cap=0.01))
    async with two_replicas() as (api, a, _, b, clock_b):
        await a._step()
        await b._step()
        first_seen = b._observed_at
        real_get, failures = b._get, ["x" * 100_000]

        async def fails_once() -> dict[str, Any] | None:
            if failures:
                raise ValueError(failures.pop())
            return await real_get()

        monkeypatch.setattr(b, "_get", fails_once)
        watcher = asyncio.create_task(b._watch_lease())
        try:
            await eventually(lambda: bool(api.watches(LEASES_PATH)), "the lease watch opened again")
            clock_b.now += 1.3
            a.wall = lambda: 1.7e9 + 1.0
            await a._step()
            await eventually(lambda: b._observed_at != first_seen, "the renewal seen through the watch")
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        (line,) = [message for message in caplog.messages if "lease watch failed" in message]
        assert line.startswith("lease watch failed: ValueError: xxx") and len(line) < 400


async def test_a_lease_watch_closed_at_once_with_no_event_is_opened_again_only_after_a_backoff(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A server (or a front end) that closes the watch at once with no event had it opened
    again at once, with a GET before each: thousands a second from every replica. A watch
    that delivered an event starts the backoff again."""
    monkeypatch.setattr(leader_module, "WATCH_BACKOFF", BackoffPolicy(base=0.2, cap=30.0, jitter=0.0))
    caplog.set_level("DEBUG", logger=leader_module.__name__)
    async with two_replicas() as (api, a, _, b, _):
        await a._step()
        renewal = {"type": "MODIFIED", "object": api.objects(LEASES_PATH)["fabriccap-leader"]}
        closed_at_once = WatchResponse(close=True)
        api.script(LEASES_PATH, closed_at_once, closed_at_once, WatchResponse(events=[renewal], close=True))
        api.script(LEASES_PATH, *[closed_at_once] * 10_000)
        watcher = asyncio.create_task(b._watch_lease())
        try:
            await eventually(lambda: len(api.watches(LEASES_PATH)) >= 5, "the lease watch opened five times")
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        delays = [message for message in caplog.messages if "lease watch closed at once" in message]
        assert [message.rsplit(" ", 1)[-1] for message in delays[:3]] == ["0.2s", "0.4s", "0.2s"]


async def test_a_replica_campaigns_only_once_it_may_lead() -> None:
    """A cold replica (a new pod of a rolling update) took the free Lease while it was still
    listing, and wrote nothing until it had listed. Alone, it elects itself once it may."""
    async with two_replicas() as (api, a, _, _, _):
        a.campaign_after = asyncio.Event()
        task = asyncio.create_task(a.run())
        try:
            await eventually(lambda: bool(api.watches(LEASES_PATH)), "the Lease watched meanwhile")
            await asyncio.sleep(0.05)
            assert not a.leading and "fabriccap-leader" not in api.objects(LEASES_PATH)
            a.campaign_after.set()  # listed
            await eventually(lambda: a.leading, "elected at once: one request")
            assert holder(api) == "a"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_gated_replica_counts_from_each_renewal_it_watches_while_it_lists() -> None:
    """Counting from the first read never takes the Lease from a live holder: each renewal
    the watch sees while the replica lists starts the count again."""
    async with two_replicas() as (api, a, _, b, clock_b):
        await a._step()
        b.campaign_after = asyncio.Event()
        task = asyncio.create_task(b.run())
        try:
            await eventually(lambda: bool(api.watches(LEASES_PATH)), "the Lease read and watched")
            clock_b.now += 10.0
            a.wall = lambda: 1.7e9 + 10.0
            await a._step()  # a renews while b lists
            await eventually(lambda: b._observed_at == 110.0, "the renewal seen through the watch")
            clock_b.now += 10.0  # b has listed for 20 s; a renewed 10 s ago (by b's clock)
            b.campaign_after.set()
            await asyncio.sleep(0.1)
            assert not b.leading and holder(api) == "a"
            clock_b.now += 5.1  # a died after that renewal: 15.1 s without one
            b._wake.set()
            await eventually(lambda: b.leading, "the takeover once a's record is a lease duration old")
            assert holder(api) == "b"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_gated_replica_counts_a_dead_holders_record_from_its_first_read_of_the_lease() -> None:
    """The watch's first read of the Lease was not counted (a watch from that resourceVersion
    sends no ADDED event for it): a restarted replica (a new identity) whose dead predecessor
    still held the Lease took it a lease duration after its listing ended, not once both the
    listing and a lease duration had passed."""
    async with two_replicas() as (api, a, _, b, clock_b):
        await a._step()  # and a dies (a restarted container is a new identity)
        b.campaign_after = asyncio.Event()
        task = asyncio.create_task(b.run())
        try:
            await eventually(lambda: bool(api.watches(LEASES_PATH)), "the Lease read and watched")
            clock_b.now += 20.0  # the listing took 20 s; nobody renewed the Lease meanwhile
            b.campaign_after.set()
            await eventually(lambda: b.leading, "elected at once: a's record is 20 s old by b's clock")
            assert holder(api) == "b"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_the_first_round_after_the_listing_waits_for_the_first_election(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The election starts only once the listing ended, and the first round (everything,
    evaluated) often came first: as a follower it wrote nothing, then the election called for
    a second round of everything before the first write. The wait is bounded: an election
    that does not answer holds the first round a second at most."""
    evaluations: list[int] = []  # the pools of each round's evaluation (previews apart)

    def counted(config: Any, store: Any, pools: Any = None, **options: Any) -> Any:
        if not options.get("preview"):
            evaluations.append(len(store.pools()) if pools is None else len(set(pools)))
        return evaluate(config, store, pools, **options)

    monkeypatch.setattr(publisher_module, "evaluate", counted)
    pools = [f"p{index}" for index in range(5)]
    async with publishing(debounceSeconds=0.0) as setup:
        setup.api.serve(LEASES_PATH, "Lease", [], "1")
        for pool in pools:
            setup.add(healthy(pool, f"{pool}-a"))
        a = LeaderElector(setup.publisher.client, NAMESPACE, "a", OperatorMetrics(), timings=LeaseTimings())
        # Wired as main.py wires them.
        setup.publisher.leader, a.on_change = a, setup.publisher.became_leader
        a.campaign_after, setup.publisher.election_attempted = setup.publisher.may_lead, a.attempted
        tasks = [asyncio.create_task(setup.publisher.run()), asyncio.create_task(a.run())]
        try:
            await asyncio.sleep(0.05)  # the listing takes a while
            setup.store.listed.set()
            await eventually(lambda: len(setup.published()) == len(pools), "every pool published")
            assert evaluations == [len(pools)], "one round of everything, the leader's"
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    async with publishing() as setup:
        setup.add(healthy("p0", "p0-a"))
        setup.publisher.election_attempted = asyncio.Event()  # an election that never answers
        monkeypatch.setattr(publisher_module, "FIRST_ELECTION_WAIT_SECONDS", 0.1)
        setup.store.listed.set()
        task = asyncio.create_task(setup.publisher.run())
        try:
            await eventually(lambda: "efa-p0" in setup.published(), "the first round, as the wait ran out")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_lease_transitions_count_changes_of_holder_and_stop_at_the_int32_bound() -> None:
    """A replica taking back its own record after its window lapsed counted a transition (client-go
    counts only a change of holder); a count at 2**31-1 made every acquire a 422 (an int32)."""
    async with two_replicas() as (api, a, clock_a, _, _):
        await a._step()
        clock_a.now += 11.0
        a._set_leading(False, "could not renew the lease within the renew deadline")  # what run does
        await a._step()
        assert a.leading and api.objects(LEASES_PATH)["fabriccap-leader"]["spec"]["leaseTransitions"] == 0
        record = {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 2**31 - 1}
        api.serve(
            LEASES_PATH,
            "Lease",
            [{"metadata": {"name": "fabriccap-leader", "namespace": NAMESPACE}, "spec": record}],
            "1",
        )
        c = elector(a.client, "c", Clock())
        await c._step()
        assert c.leading and api.objects(LEASES_PATH)["fabriccap-leader"]["spec"]["leaseTransitions"] == 2**31 - 1


async def test_a_renewal_that_repeats_its_renew_time_still_restarts_the_followers_count() -> None:
    """The record was (holder, renewTime) only: renewals whose renewTime repeated (the holder's
    wall clock stuck) looked like no renewal, and the follower took over from a live leader."""
    async with two_replicas() as (api, a, clock_a, b, clock_b):
        await a._step()  # a's wall clock is fixed: every renewal writes the same renewTime
        await b._step()
        clock_a.now += 2.0
        clock_b.now += 10.0
        await a._step()  # renewed: a new resourceVersion, the same record otherwise
        await b._step()
        clock_b.now += 5.1  # 15.1 s after b first saw a's record, 5.1 s after the renewal
        await b._step()
        assert not b.leading and holder(api) == "a"


# What the API server's watch cache sends, then closing the watch, when the version asked for is
# older than it holds: one ERROR event whose object is a Status.
EXPIRED = {
    "type": "ERROR",
    "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410},
}


async def test_a_lease_watch_ended_at_once_by_an_error_event_is_opened_again_only_after_a_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ERROR event counted as an event: the backoff of a watch closed at once never applied,
    and one replica sent GET and WATCH some 1,700 times in 0.5 s."""
    monkeypatch.setattr(leader_module, "WATCH_BACKOFF", BackoffPolicy(base=0.2, cap=30.0, jitter=0.0))
    async with two_replicas() as (api, a, _, b, _):
        await a._step()
        api.script(LEASES_PATH, *[WatchResponse(events=[EXPIRED], close=True)] * 5_000)
        watcher = asyncio.create_task(b._watch_lease())
        try:
            await asyncio.sleep(0.5)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        # Backed off 0.2 s, then 0.4 s: three watches at most fit in 0.5 s.
        assert len(api.watches(LEASES_PATH)) <= 3


async def test_a_lease_watch_refused_as_too_old_is_opened_again_at_the_most_recent_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Lease's own resourceVersion (of its last write) stays too old while nobody writes it:
    watched from it again, every watch was refused. The next watch starts at the most recent
    version, still wakes the follower on a renewal, and once the Lease was written the watch
    starts from its version again."""
    monkeypatch.setattr(leader_module, "WATCH_BACKOFF", BackoffPolicy(base=0.01, cap=0.01))
    async with two_replicas() as (api, a, clock_a, b, clock_b):
        await a._step()
        await b._step()
        old_version = api.objects(LEASES_PATH)["fabriccap-leader"]["metadata"]["resourceVersion"]
        first_seen = b._observed_at
        api.script(LEASES_PATH, WatchResponse(events=[EXPIRED], close=True))
        watcher = asyncio.create_task(b._watch_lease())
        try:
            await eventually(lambda: len(api.watches(LEASES_PATH)) == 2, "the lease watch opened again")
            assert [query["resourceVersion"] for query in api.watches(LEASES_PATH)] == [old_version, ""]
            b._wake.clear()
            clock_b.now += 1.3
            clock_a.now += 1.0
            a.wall = lambda: 1.7e9 + 1.0
            await a._step()
            await eventually(lambda: b._observed_at != first_seen, "the renewal seen through the watch")
            assert b._observed_at == 101.3 and b._wake.is_set()
            renewed_version = api.objects(LEASES_PATH)["fabriccap-leader"]["metadata"]["resourceVersion"]
            await api.close_stream(LEASES_PATH)
            await eventually(lambda: len(api.watches(LEASES_PATH)) == 3, "the lease watch opened a third time")
            assert api.watches(LEASES_PATH)[-1]["resourceVersion"] == renewed_version != old_version
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)


async def test_fabriccap_leader_reads_0_once_the_write_window_has_closed() -> None:
    """The gauge was set when the elector stepped down, which waits for its step: a scrape
    between the window's close and the step down (an event loop busy evaluating, a step that
    hangs) read 1 while another replica could already lead (hostile review 64-shard F7)."""
    async with two_replicas() as (_, a, clock_a, _, _):
        await a._step()
        assert a.metrics.registry.get_sample_value("fabriccap_leader") == 1
        clock_a.now += a.timings.renew_deadline + 0.1  # no step ran meanwhile
        assert a.write_window() == 0.0
        assert a.metrics.registry.get_sample_value("fabriccap_leader") == 0


async def test_fabriccap_leader_and_healthz_read_0_when_the_write_window_closes_even_while_a_step_is_under_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Renewals that fail fast, then a GET that hangs: the gauge was set when the elector stepped
    down, after its step, so a step begun just before the window closed kept fabriccap_leader
    (and /healthz's leader) at 1 for up to a renew deadline past it, beyond the lease duration
    (hostile review 64-shard F7). The step itself runs on, bounded by the renew deadline from
    its start as client-go bounds it, and the elector steps down once it ends (hostile review
    64b F1); what says "leader" follows the window (timings scaled down 10x)."""
    async with publishing() as setup:
        setup.api.serve(LEASES_PATH, "Lease", [], "1")
        timings = LeaseTimings(lease_duration=1.5, renew_deadline=1.0, retry_period=0.2)
        a = LeaderElector(setup.publisher.client, NAMESPACE, "a", setup.metrics, timings=timings)
        setup.publisher.leader = a
        await a._step()
        assert a.leading and a._renewed_at is not None
        renewed_at = a._renewed_at
        stepped_down: list[float] = []
        a.on_change = lambda leading: stepped_down.append(a.clock() - renewed_at)

        async def fails_then_hangs() -> None:
            if a.clock() - renewed_at < 0.85:
                raise KubeError("GET lease: 503 the server is busy", 503)
            await asyncio.Event().wait()

        monkeypatch.setattr(a, "_get", fails_then_hangs)
        task = asyncio.create_task(a.run())
        late: list[float] = []
        try:
            while a.leading and a.clock() - renewed_at < 3.0:
                if a.write_window() <= 0 and (
                    setup.metrics.sample_value("fabriccap_leader") != 0 or setup.publisher.health()["leader"]
                ):
                    late.append(a.clock() - renewed_at - timings.renew_deadline)
                await asyncio.sleep(0.01)
            assert not late, late
            assert not a.leading and stepped_down == [pytest.approx(stepped_down[0])]
            # The hanging step began before the window closed, and ended at its own deadline.
            assert timings.renew_deadline < stepped_down[0] < 2 * timings.renew_deadline + 0.3
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_slow_but_working_api_server_keeps_the_leader_leading() -> None:
    """Every Lease request answers, in 3 s (client-go's timings 15/10/2 s, scaled down 10x). Each
    step was bounded by what was left of the write window, so a GET and a PUT begun 2 s after
    the last renewal, 6 s long, were cut off 1 s before their end: the leader stepped down and
    took the Lease back (a read-back of everything) every 15 s (hostile review 64b F1). Bounded
    by the renew deadline from the step's start, as client-go bounds it, it keeps leading; its
    writes pause only between the window's close and the renewal's answer."""
    async with fake_api() as (api, client):
        api.serve(LEASES_PATH, "Lease", [], "1")
        timings = LeaseTimings(lease_duration=1.5, renew_deadline=1.0, retry_period=0.2)
        changes: list[bool] = []
        a = LeaderElector(client, NAMESPACE, "a", OperatorMetrics(), timings=timings, on_change=changes.append)
        request = client.request

        async def slow_request(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0.3)
            return await request(*args, **kwargs)

        client.request = slow_request  # type: ignore[method-assign]
        task = asyncio.create_task(a.run())
        try:
            await eventually(lambda: a.leading, "acquired the lease")
            started, renewals = a.clock(), 0
            renewed_at = a._renewed_at
            while a.clock() - started < 4.0:  # 40 s real: five renewals or more
                if a._renewed_at != renewed_at:
                    renewals, renewed_at = renewals + 1, a._renewed_at
                await asyncio.sleep(0.01)
            assert changes == [True], "one acquisition, no step down"
            assert renewals >= 4
            assert a.leading and holder(api) == "a"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_renewal_that_succeeds_after_the_window_closed_continues_the_term() -> None:
    """The window closed while the renewal was in flight: the writes stopped, fabriccap_leader
    read 0, but the PUT of this replica's own record succeeded, so nobody wrote the Lease and
    nobody else led. It is the same term: no step down, no new acquisition (and its read-back)."""
    async with two_replicas() as (api, a, clock_a, _, _):
        changes: list[bool] = []
        a.on_change = changes.append
        await a._step()
        acquired = api.objects(LEASES_PATH)["fabriccap-leader"]["spec"]["acquireTime"]
        clock_a.now += a.timings.renew_deadline + 0.5  # the step's GET answered late
        assert not a.holds_window() and a.metrics.sample_value("fabriccap_leader") == 0
        await a._step()
        assert a.holds_window() and a.metrics.sample_value("fabriccap_leader") == 1
        assert changes == [True]
        assert api.objects(LEASES_PATH)["fabriccap-leader"]["spec"]["acquireTime"] == acquired


async def test_the_write_window_read_by_the_render_thread_survives_a_step_down_between_its_reads() -> None:
    """write_window() read ``_renewed_at`` twice: a step down on the event loop between the two
    reads (None) raised a TypeError in the /metrics render's thread, and the whole exposition
    failed (hostile review 64b F5)."""
    async with two_replicas() as (_, a, clock_a, _, _):
        await a._step()

        class StepsDownWhenRead(Clock):
            def __call__(self) -> float:
                a._set_leading(False, "the lease is held by b")  # what the loop does meanwhile
                return clock_a.now

        a.clock = StepsDownWhenRead()
        assert a.write_window() in (0.0, a.timings.renew_deadline)
        assert a.metrics.sample_value("fabriccap_leader") == 0


async def test_healthz_says_leader_exactly_when_fabriccap_leader_does() -> None:
    """/healthz reported ``leading``, the gauge ``leading`` and inside the window: after an
    event loop stall over the window's close, /healthz answered leader true while the gauge and
    the window read 0 (hostile review 64b F6). Both read holds_window()."""
    async with publishing() as setup:
        setup.api.serve(LEASES_PATH, "Lease", [], "1")
        clock = Clock()
        a = LeaderElector(setup.publisher.client, NAMESPACE, "a", setup.metrics, clock=clock)
        setup.publisher.leader = a
        await a._step()
        assert setup.publisher.health()["leader"] is True and setup.metrics.sample_value("fabriccap_leader") == 1
        clock.now += a.timings.renew_deadline + 0.1  # the loop stalled: no step ran, leading is still set
        assert a.leading
        assert setup.publisher.health()["leader"] is False and setup.metrics.sample_value("fabriccap_leader") == 0
