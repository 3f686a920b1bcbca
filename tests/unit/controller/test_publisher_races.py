"""The publisher's writes against what the cluster tells it meanwhile: a write's answer and the
watch's events come over two connections, in either order (review 65-races, each test its repro)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from fabriccap.controller.objects import ObjectState, Published
from fabriccap.controller.writes import WINDOW_RECHECK_SECONDS
from fabriccap.core.api import READY_LABEL, condition_reason, condition_status
from fabriccap.core.evaluate import NO_SUCH_POOL_TERMINATING_MESSAGE
from fabriccap.core.shard import Shard
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import FABRIC_CAPABILITIES
from support.builders import node, plugin_pods
from support.fakeapi import eventually
from support.publishing import (
    GRACE,
    Lease,
    Setup,
    edited_just_after_our_status_write,
    healthy,
    publishing,
    start,
    writing,
)


async def replaced(setup: Setup, ready_label: str | None, told: bool = True) -> dict[str, Any]:
    """Someone deletes efa-p5 and declares it again (``kubectl replace --force``, a GitOps
    replace): the same name, labels and annotations, no status, the ready label as given (None:
    none). ``told``: the watch tells of both. The successor, as created."""
    client = setup.publisher.client
    gone = copy.deepcopy(setup.published()["efa-p5"])
    await client.delete(FABRIC_CAPABILITIES.item("efa-p5"))
    if told:
        setup.publisher.observe_published(gone, deleted=True)
    metadata = gone["metadata"]
    labels = {key: value for key, value in metadata["labels"].items() if key != READY_LABEL}
    if ready_label is not None:
        labels[READY_LABEL] = ready_label
    fresh = {
        "apiVersion": gone["apiVersion"],
        "kind": gone["kind"],
        "metadata": {"name": metadata["name"], "labels": labels, "annotations": metadata["annotations"]},
    }
    created: dict[str, Any] = await client.create(FABRIC_CAPABILITIES.collection(), fresh)
    if told:
        setup.publisher.observe_published(copy.deepcopy(created), deleted=False)
    return created


async def emptied_and_settled(setup: Setup) -> str | None:
    """efa-p5's pool loses its node; its empty write, then three rounds: its Ready status then."""
    setup.remove_node("a")
    await setup.publisher.reconcile_once()
    await eventually(lambda: not writing(setup.publisher), "the empty write to end")
    for _ in range(3):
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "writes to end")
    return condition_status(setup.published()["efa-p5"]["status"], "Ready")


async def test_an_empty_state_skipped_at_the_window_edge_is_written_once_the_leader_renews(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ready pool loses its nodes. Its empty write lowers the ready label; the label PATCH
    takes long (a slow API server: the renewal is late too), so the status PATCH finds the
    window under MIN_WRITE_WINDOW_SECONDS and is skipped. The leader then renews."""
    async with publishing() as setup:
        lease = setup.publisher.leader = Lease()
        setup.add(healthy("p5", "a"))
        await start(setup)
        assert condition_status(setup.published()["efa-p5"]["status"], "Ready") == "True"
        send = setup.publisher.requests.merge_patch

        async def slow_label(path: str, body: Any, timeout: float) -> dict[str, Any]:
            answer = await send(path, body, timeout)
            if not path.endswith("/status"):
                lease.window = 0.3  # the label's answer came late: the window nearly closed
            return answer

        monkeypatch.setattr(setup.publisher.requests, "merge_patch", slow_label)
        setup.remove_node("a")
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the empty write to end")
        monkeypatch.setattr(setup.publisher.requests, "merge_patch", send)
        lease.window = 10.0  # renewed: nobody calls became_leader
        for _ in range(3):
            setup.clock.now += WINDOW_RECHECK_SECONDS
            setup.publisher._fire_due(setup.clock.now)
            await setup.publisher.reconcile_once()
        obj = setup.published()["efa-p5"]
        assert obj["metadata"]["labels"][READY_LABEL] == "false"
        status = obj["status"]
        assert (condition_status(status, "Ready"), condition_reason(status, "Ready")) == ("False", "NoTargetNodes")


async def test_even_a_round_of_everything_does_not_bring_the_skipped_empty_state_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with publishing() as setup:
        lease = setup.publisher.leader = Lease()
        setup.add(healthy("p5", "a"))
        await start(setup)
        send = setup.publisher.requests.merge_patch

        async def slow_label(path: str, body: Any, timeout: float) -> dict[str, Any]:
            answer = await send(path, body, timeout)
            if not path.endswith("/status"):
                lease.window = 0.3
            return answer

        monkeypatch.setattr(setup.publisher.requests, "merge_patch", slow_label)
        setup.remove_node("a")
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the empty write to end")
        monkeypatch.setattr(setup.publisher.requests, "merge_patch", send)
        lease.window = 10.0
        setup.clock.now += WINDOW_RECHECK_SECONDS
        setup.publisher._fire_due(setup.clock.now)
        setup.store.mark_all()  # the resync
        await setup.publisher.reconcile_once()
        setup.clock.now += GRACE - 5  # most of the grace period later: still Ready=True
        setup.store.mark_all()
        await setup.publisher.reconcile_once()
        status = setup.published()["efa-p5"]["status"]
        assert condition_status(status, "Ready") == "False", (
            condition_status(status, "Ready"),
            setup.publisher.objects["efa-p5"].empty_due,
        )


async def test_a_skipped_status_write_does_not_let_the_ready_label_go_up_over_the_old_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pool turns Ready. Its status PATCH finds the window nearly closed and is skipped;
    the leader renews before the rest of the write (the ready label raised) would run. The
    label must never be up over a status that is not Ready, and the recheck writes both."""
    async with publishing() as setup:
        lease = setup.publisher.leader = Lease()
        setup.add([node("a", pool="p5", efa=0), *plugin_pods(["a"])])
        await start(setup)
        obj = setup.published()["efa-p5"]
        assert condition_status(obj["status"], "Ready") == "False"
        assert obj["metadata"]["labels"][READY_LABEL] == "false"
        perform = setup.publisher.lanes.perform
        seen: list[tuple[str, str | None]] = []

        def label_and_ready() -> tuple[str, str | None]:
            obj = setup.published()["efa-p5"]
            return obj["metadata"]["labels"][READY_LABEL], condition_status(obj["status"], "Ready")

        async def window_closes_then_renews(state: Any, intent: Any) -> Any:
            lease.window = 0.3  # at the status PATCH
            rest = await perform(state, intent)
            lease.window = 10.0  # renewed while the rest waited for its lane
            if rest is None:
                return None

            async def then() -> None:
                await rest()
                seen.append(label_and_ready())

            return then

        monkeypatch.setattr(setup.publisher.lanes, "perform", window_closes_then_renews)
        setup.add([node("a", pool="p5", efa=32)])
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the write to end")
        seen.append(label_and_ready())
        monkeypatch.setattr(setup.publisher.lanes, "perform", perform)
        setup.clock.now += WINDOW_RECHECK_SECONDS  # the recheck the skip asked for
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the recheck's write to end")
        assert [pair for pair in seen if pair == ("true", "False")] == [], seen
        assert label_and_ready() == ("true", "True")


async def other_shards_object() -> tuple[Any, dict[str, Any]]:
    """(shard 0 of 2, a Ready object of shard 1's pool as published)."""
    first, second = Shard(index=0, count=2), Shard(index=1, count=2)
    theirs = next(f"p5-{number}" for number in range(40) if second.owns_value(f"p5-{number}"))
    async with publishing() as whole:
        whole.add([*healthy(theirs, "t1", "t2")])
        await start(whole)
        (obj,) = whole.published().values()
    assert obj["metadata"]["labels"][READY_LABEL] == "true"
    return first, obj


async def test_a_relist_forgets_another_shards_object_deleted_while_the_watch_was_down() -> None:
    first, theirs = await other_shards_object()
    name = theirs["metadata"]["name"]
    async with publishing(shard=first) as setup:
        await start(setup)
        setup.publisher.observe_published(copy.deepcopy(theirs), deleted=False)
        assert name in setup.publisher._other_shards_ready
        # The watch was down while it was deleted; its relist (at a later version) lacks it.
        setup.publisher.forget_unlisted(set(), "999")
        assert name not in setup.publisher._other_shards_ready, setup.publisher._other_shards_ready


async def test_a_read_back_list_older_than_a_deleted_event_does_not_bring_another_shards_pool_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, theirs = await other_shards_object()
    name = theirs["metadata"]["name"]
    async with publishing([copy.deepcopy(theirs)], shard=first) as setup:
        await start(setup)
        assert name in setup.publisher._other_shards_ready
        client = setup.publisher.client
        list_items = client.list_items

        async def deleted_while_listing(path: str, *args: Any, **kwargs: Any) -> Any:
            items = [item async for item in list_items(path, *args, **kwargs)]  # the snapshot
            await client.delete(FABRIC_CAPABILITIES.item(name))
            setup.publisher.observe_published(copy.deepcopy(theirs), deleted=True)  # the watch, meanwhile
            for item in items:
                yield item

        monkeypatch.setattr(client, "list_items", deleted_while_listing)
        setup.publisher.became_leader(True)  # the Lease acquired again: read everything back
        await setup.publisher.reconcile_once()
        assert name not in setup.api.objects(FABRIC_CAPABILITIES.collection())
        assert name not in setup.publisher._other_shards_ready, setup.publisher._other_shards_ready


async def test_a_late_answer_for_a_deleted_object_does_not_drop_its_successor_the_watch_told_of(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Our status PATCH lands on A; someone replaces A (delete, create: kubectl replace --force,
    a GitOps tool's replace) and the watch tells of both before the PATCH's answer is read."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        send = setup.publisher.requests.merge_patch
        successor: list[dict[str, Any]] = []

        async def then_replaced(path: str, body: Any, timeout: float) -> dict[str, Any]:
            answer = await send(path, body, timeout)
            if path.endswith("/status") and not successor:
                successor.append(await replaced(setup, ready_label="true"))
            return answer

        monkeypatch.setattr(setup.publisher.requests, "merge_patch", then_replaced)
        setup.remove_node("b")
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the write to end")
        held = setup.publisher.objects["efa-p5"].published
        assert held is not None and held.uid == successor[0]["metadata"]["uid"], held


async def test_an_object_replaced_during_its_empty_write_is_still_emptied_and_expired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        ready_status = copy.deepcopy(setup.published()["efa-p5"]["status"])
        client = setup.publisher.client
        send = setup.publisher.requests.merge_patch
        done: list[bool] = []

        async def then_replaced(path: str, body: Any, timeout: float) -> dict[str, Any]:
            answer = await send(path, body, timeout)
            if path.endswith("/status") and not done:
                done.append(True)
                await replaced(setup, ready_label="true")
                forged = await client.merge_patch(FABRIC_CAPABILITIES.status("efa-p5"), {"status": ready_status})
                setup.publisher.observe_published(copy.deepcopy(forged), deleted=False)
            return answer

        monkeypatch.setattr(setup.publisher.requests, "merge_patch", then_replaced)
        assert await emptied_and_settled(setup) == "False", "efa-p5" in setup.publisher.objects


async def test_an_edit_told_of_before_the_empty_writes_answer_is_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """6d2ccda's case for an object no pool calls for: someone forges Ready=True over its empty
    state just after the empty status PATCH lands, and the watch tells of it before the answer
    is read."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        ready_status = copy.deepcopy(setup.published()["efa-p5"]["status"])
        monkeypatch.setattr(
            setup.publisher.requests, "merge_patch", edited_just_after_our_status_write(setup, ready_status)
        )
        assert await emptied_and_settled(setup) == "False", setup.publisher.objects["efa-p5"].empty_due


async def test_an_expired_object_replaced_before_its_delete_is_not_deleted_unseen() -> None:
    """Its grace period ended, and someone made another object under the name before the
    DELETE went: the DELETE names the uid it judged, so the successor is not deleted with it."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        gone = copy.deepcopy(setup.published()["efa-p5"])
        successor = await replaced(setup, ready_label="true", told=False)  # the watch lags
        setup.remove_node("a")
        await setup.publisher.reconcile_once()  # emptied: the empty state goes to the successor
        await eventually(lambda: not writing(setup.publisher), "the empty write to end")
        state = setup.publisher.objects["efa-p5"]
        state.published = Published.from_object(gone)  # what this replica judged, as the watch lagged
        setup.clock.now += GRACE + 1
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the deletion to end")
        deletes = setup.api.writes("DELETE")
        assert deletes and deletes[-1][2] == {"preconditions": {"uid": gone["metadata"]["uid"]}}
        assert setup.published()["efa-p5"]["metadata"]["uid"] == successor["metadata"]["uid"]


def test_an_answer_with_opaque_versions_is_taken_as_it_comes() -> None:
    """resourceVersions are opaque outside etcd: where one is not a number, no order is known,
    and the write's answer is what the cluster holds (not the held copy, forever)."""
    state = ObjectState(name="efa-p5")
    held = Published(name="efa-p5", generation=1, status={}, labels={}, annotations={}, resource_version="b", uid="u")
    answer = Published(name="efa-p5", generation=1, status={}, labels={}, annotations={}, resource_version="a", uid="u")
    state.published = held
    assert state.answered(answer) is answer and state.published is answer
    later = Published(name="efa-p5", generation=1, status={}, labels={}, annotations={}, resource_version="9", uid="u")
    state.published = later
    older = Published(name="efa-p5", generation=1, status={}, labels={}, annotations={}, resource_version="7", uid="u")
    assert state.answered(older) is later and state.published is later


# Review 65-fixes: what the fixes above must not break, and what they broke at first.


def status_patches(setup: Setup) -> int:
    return sum(1 for method, path, _, _ in setup.api.requests if method == "PATCH" and path.endswith("/status"))


async def settle_rounds(setup: Setup, rounds: int, step: float = 2.0) -> None:
    for _ in range(rounds):
        setup.clock.now += step
        setup.publisher._fire_due(setup.clock.now)
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "writes to end")


async def test_quiet_cluster_an_emptied_pool_is_written_once() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        before = status_patches(setup)
        setup.remove_node("a")
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the empty write to end")
        await settle_rounds(setup, 6)
        status = setup.published()["efa-p5"]["status"]
        assert condition_reason(status, "Ready") == "NoTargetNodes"
        assert status_patches(setup) - before == 1
        assert setup.publisher.objects["efa-p5"].empty_due is False


async def test_quiet_cluster_an_object_no_pool_calls_for_is_written_once() -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        forged = copy.deepcopy(setup.published()["efa-p5"])
    # the same object, served to a new replica whose cluster has no such pool
    async with publishing([forged]) as setup:
        await start(setup)
        setup.publisher.became_leader(True)  # as the elector does: read back, then every round
        before = status_patches(setup)
        await settle_rounds(setup, 6)
        status = setup.published()["efa-p5"]["status"]
        assert condition_reason(status, "Ready") == "NoTargetNodes"
        assert status_patches(setup) - before == 1
        assert setup.publisher.objects["efa-p5"].empty_due is False


# What kube-apiserver makes of a DELETE of an object that carries a finalizer (a backup or GitOps
# tool's): terminating, until the finalizer goes.
HELD_BY_A_FINALIZER = {"metadata": {"deletionTimestamp": "2026-12-07T00:00:00Z", "finalizers": ["example.com/keep"]}}


async def expire(setup: Setup) -> None:
    """efa-p5's pool loses its node, its empty state is written, and its grace period passes."""
    setup.remove_node("a")
    await setup.publisher.reconcile_once()
    await eventually(lambda: not writing(setup.publisher), "the empty write to end")
    setup.clock.now += GRACE + 1
    await setup.publisher.reconcile_once()
    await eventually(lambda: not writing(setup.publisher), "the deletion to end")


def terminating_on_delete(setup: Setup, monkeypatch: pytest.MonkeyPatch, every_time: bool) -> list[str]:
    """The expiry's DELETE meets a finalizer (a backup or GitOps tool's): kube-apiserver sets
    deletionTimestamp and answers 200, and the watch's MODIFIED (terminating) is read before the
    answer; ``every_time``: at each DELETE, else at the first only (a DELETE of an object
    terminating already changes nothing: no event, kube-apiserver 1.35). The DELETEs' paths."""
    client = setup.publisher.client
    deletes: list[str] = []

    async def delete_with_finalizer(path: str, *args: Any) -> None:
        deletes.append(path)
        if every_time or len(deletes) == 1:
            terminating = await client.merge_patch(path, HELD_BY_A_FINALIZER)
            setup.publisher.observe_published(copy.deepcopy(terminating), deleted=False)  # the watch, first

    monkeypatch.setattr(setup.publisher.requests, "delete", delete_with_finalizer)
    return deletes


async def test_an_expired_object_held_by_a_finalizer_is_deleted_once_not_every_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The expiry's DELETE of an object that carries a finalizer (a backup or GitOps tool's):
    the API server sets deletionTimestamp and answers 200; the watch's MODIFIED (the object
    terminating) is read before the DELETE's answer. The object stays until the finalizer
    goes; the operator has asked for its deletion already."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        deletes = terminating_on_delete(setup, monkeypatch, every_time=True)
        await expire(setup)
        assert len(deletes) == 1
        await settle_rounds(setup, 5)
        assert len(deletes) == 1, f"{len(deletes)} DELETEs over 6 rounds"


async def test_an_expired_object_held_by_a_finalizer_does_not_keep_the_loop_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As above, with nothing else changing in the cluster: the rounds the publisher's own
    ``_write_ended`` asks for (``store.changed``) are the only ones. Bounded at 20."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        deletes = terminating_on_delete(setup, monkeypatch, every_time=False)
        setup.remove_node("a")
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the empty write to end")
        setup.clock.now += GRACE + 1
        rounds = 0
        setup.store.changed.set()
        while setup.store.changed.is_set() and rounds < 20:  # what Publisher.run's loop does, bounded
            setup.store.changed.clear()
            rounds += 1
            setup.clock.now += 0.2  # the debounce
            await setup.publisher.reconcile_once()
            await eventually(lambda: not writing(setup.publisher), "writes to end")
        assert (rounds, len(deletes)) == (2, 1), (rounds, len(deletes))


def terminating_in_the_answer(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The expiry's DELETE meets a finalizer, and kube-apiserver's answer (the object, its
    deletionTimestamp set) is read before the watch's MODIFIED, which the test tells after. The
    answers, in order."""
    client = setup.publisher.client
    answers: list[dict[str, Any]] = []

    async def delete_with_finalizer(path: str, *args: Any) -> dict[str, Any]:
        terminating: dict[str, Any] = await client.merge_patch(path, HELD_BY_A_FINALIZER)
        answers.append(copy.deepcopy(terminating))
        return terminating

    monkeypatch.setattr(setup.publisher.requests, "delete", delete_with_finalizer)
    return answers


async def test_an_object_held_by_a_finalizer_whose_modified_comes_after_the_deletes_answer_is_deleted_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Review 65-fixes F1, left out at stop 65: the watch's MODIFIED (terminating) read after the
    DELETE's answer made the object a new one of no pool, deleted again a grace period later.
    The object is held as terminating until the watch's DELETED, then forgotten."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        answers = terminating_in_the_answer(setup, monkeypatch)
        await expire(setup)
        assert len(answers) == 1
        setup.publisher.observe_published(copy.deepcopy(answers[0]), deleted=False)  # the watch, after
        for _ in range(3):  # three more grace periods
            setup.clock.now += GRACE + 1
            await settle_rounds(setup, 2)
        assert len(answers) == 1, f"{len(answers)} DELETEs of one terminating object"
        held = setup.publisher.objects["efa-p5"].published
        assert held is not None and held.terminating
        setup.publisher.observe_published(copy.deepcopy(answers[0]), deleted=True)  # the finalizer went
        await settle_rounds(setup, 1)
        assert "efa-p5" not in setup.publisher.objects


async def test_a_terminating_object_no_pool_calls_for_is_emptied_but_not_deleted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An object of ours, Ready=True, that someone deleted while a finalizer holds it, read by a
    replica whose cluster has no such pool: its Ready=True would pass ``kubectl wait`` for as
    long as the finalizer stays, so its empty state is written; the DELETE is asked for already,
    so none is sent, however many grace periods pass."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        held = await setup.publisher.client.merge_patch(FABRIC_CAPABILITIES.item("efa-p5"), HELD_BY_A_FINALIZER)
    assert condition_status(held["status"], "Ready") == "True"
    async with publishing([held]) as setup:
        answers = terminating_in_the_answer(setup, monkeypatch)
        await start(setup)
        setup.publisher.became_leader(True)
        await settle_rounds(setup, 2)
        assert condition_reason(setup.published()["efa-p5"]["status"], "Ready") == "NoTargetNodes"
        for _ in range(3):
            setup.clock.now += GRACE + 1
            await settle_rounds(setup, 2)
        assert answers == [], "a DELETE of an object terminating already"


def ready_and_label(obj: dict[str, Any]) -> tuple[str | None, str | None]:
    return condition_status(obj["status"], "Ready"), obj["metadata"]["labels"].get(READY_LABEL)


async def rename_efa_gpu(setup: Setup) -> None:
    """A Karpenter NodePool named like the node group ``gpu`` comes: both pools take hashed
    names, and ``efa-gpu`` is the old object of the node group's pool, deleted at once."""
    setup.add([node("k1", pool="gpu", pool_key="karpenter.sh/nodepool", efa=32), *plugin_pods(["k1"])])
    await settle_rounds(setup, 1)


async def held_then_renamed(setup: Setup) -> None:
    """Someone deletes efa-gpu and a finalizer holds it (the watch tells of it); then its pool is
    renamed (``rename_efa_gpu``): no DELETE is due for it, it is terminating already."""
    held = await setup.publisher.client.merge_patch(FABRIC_CAPABILITIES.item("efa-gpu"), HELD_BY_A_FINALIZER)
    setup.publisher.observe_published(copy.deepcopy(held), deleted=False)
    await rename_efa_gpu(setup)


@pytest.mark.parametrize("modified_first", [False, True])
async def test_a_renamed_pools_object_held_by_a_finalizer_does_not_stay_ready(
    monkeypatch: pytest.MonkeyPatch, modified_first: bool
) -> None:
    """Review 66a F1: a renamed pool's old object is deleted without its empty state first. Its
    DELETE met a finalizer and, the answer read before the watch's MODIFIED, it kept Ready=True,
    the ready label and its claim on the pool for as long as the finalizer stayed, the pool no
    longer Ready meanwhile (``kubectl wait`` on the old name passed)."""
    async with publishing() as setup:
        setup.add(healthy("gpu", "a"))
        await start(setup)
        answers = terminating_in_the_answer(setup, monkeypatch)
        if modified_first:
            answer = setup.publisher.requests.delete

            async def told_then_answered(path: str, *args: Any) -> Any:
                terminating = await answer(path, *args)
                setup.publisher.observe_published(copy.deepcopy(terminating), deleted=False)
                return terminating

            monkeypatch.setattr(setup.publisher.requests, "delete", told_then_answered)
        await rename_efa_gpu(setup)
        assert len(answers) == 1
        if not modified_first:
            setup.publisher.observe_published(copy.deepcopy(answers[0]), deleted=False)  # the watch, after
        setup.add([node("a", pool="gpu", efa=0)])  # the node group's pool is no longer Ready
        await settle_rounds(setup, 3)
        old = setup.published()["efa-gpu"]
        assert old["metadata"].get("deletionTimestamp")
        assert ready_and_label(old) == ("False", "false")
        assert condition_reason(old["status"], "Ready") == "NoTargetNodes"
        assert len(answers) == 1


async def test_an_object_terminating_already_when_its_pool_is_renamed_is_emptied() -> None:
    """Review 66a F1's variant: no DELETE is due for it (terminating), and ``_renamed`` left no
    empty state due either."""
    async with publishing() as setup:
        setup.add(healthy("gpu", "a"))
        await start(setup)
        await held_then_renamed(setup)
        setup.add([node("a", pool="gpu", efa=0)])
        await settle_rounds(setup, 3)
        assert ready_and_label(setup.published()["efa-gpu"]) == ("False", "false")


@pytest.mark.parametrize("answer_first", [True, False])
async def test_a_forged_ready_just_before_the_delete_does_not_stay_on_the_terminating_object(
    monkeypatch: pytest.MonkeyPatch, answer_first: bool
) -> None:
    """Review 66a F2: after the grace period someone puts Ready=True back just before the
    expiry's DELETE, which meets a finalizer. Read after the DELETE's answer, the forge's and
    the deletion's MODIFIED events were echoes of the version held, and the forge stayed."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        ready_status = copy.deepcopy(setup.published()["efa-p5"]["status"])
        client = setup.publisher.client
        events: list[dict[str, Any]] = []

        async def forged_then_deleted(path: str, *args: Any) -> dict[str, Any]:
            forged = await client.merge_patch(FABRIC_CAPABILITIES.status("efa-p5"), {"status": ready_status})
            terminating: dict[str, Any] = await client.merge_patch(path, HELD_BY_A_FINALIZER)
            events.extend([copy.deepcopy(forged), copy.deepcopy(terminating)])
            if not answer_first:
                for event in events:
                    setup.publisher.observe_published(copy.deepcopy(event), deleted=False)
            return terminating

        monkeypatch.setattr(setup.publisher.requests, "delete", forged_then_deleted)
        await expire(setup)
        assert len(events) == 2
        if answer_first:
            for event in events:
                setup.publisher.observe_published(copy.deepcopy(event), deleted=False)
        await settle_rounds(setup, 4)
        obj = setup.published()["efa-p5"]
        assert obj["metadata"].get("deletionTimestamp")
        assert condition_reason(obj["status"], "Ready") == "NoTargetNodes"


async def test_a_terminating_object_whose_pool_comes_back_is_made_again_once_it_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with publishing() as setup:
        setup.add(healthy("p5", "a"))
        await start(setup)
        answers = terminating_in_the_answer(setup, monkeypatch)
        await expire(setup)
        setup.publisher.observe_published(copy.deepcopy(answers[0]), deleted=False)
        setup.add(healthy("p5", "a"))  # the pool comes back while the finalizer holds its object
        await settle_rounds(setup, 3)
        held = setup.published()["efa-p5"]
        assert held["metadata"].get("deletionTimestamp") and ready_and_label(held) == ("True", "true")
        await setup.publisher.client.delete(FABRIC_CAPABILITIES.item("efa-p5"))  # the finalizer went
        setup.publisher.observe_published(copy.deepcopy(held), deleted=True)
        await settle_rounds(setup, 3)
        made = setup.published()["efa-p5"]
        assert not made["metadata"].get("deletionTimestamp") and made["metadata"]["uid"] != held["metadata"]["uid"]
        assert ready_and_label(made) == ("True", "true")
        assert len(answers) == 1


async def test_a_terminating_object_of_no_pool_is_not_told_of_a_deletion_still_to_come() -> None:
    """Review 66h F2: a renamed pool's old object, held by a finalizer: the operator sends no
    DELETE, and its empty state said it "is deleted after the grace period", ten grace periods on."""
    async with publishing() as setup:
        setup.add(healthy("gpu", "a"))
        await start(setup)
        await held_then_renamed(setup)
        setup.clock.now += 10 * GRACE
        await settle_rounds(setup, 3)
        (ready,) = (c for c in setup.published()["efa-gpu"]["status"]["conditions"] if c["type"] == "Ready")
        assert (ready["reason"], ready["message"]) == ("NoTargetNodes", NO_SUCH_POOL_TERMINATING_MESSAGE)


async def rounds_while_the_read_back_fails(monkeypatch: pytest.MonkeyPatch, ready: bool) -> tuple[int, int]:
    """A new leader whose read-back LIST of FabricCapabilities fails (a 5xx, a LIST timing out
    on a loaded API server) while a pool loses its nodes: the rounds the publisher asks for
    itself (``store.changed``), nothing else changing. Bounded at 30."""
    async with publishing() as setup:
        setup.add([node("a", pool="p5", efa=32 if ready else 0), *plugin_pods(["a"])])
        await start(setup)
        obj = setup.published()["efa-p5"]
        assert obj["metadata"]["labels"][READY_LABEL] == ("true" if ready else "false")
        client = setup.publisher.client

        async def failing(path: str, *args: Any, **kwargs: Any) -> Any:
            raise KubeError("the server was unable to return a response in the time allotted", 504)
            yield  # an async generator

        monkeypatch.setattr(client, "list_items", failing)
        setup.publisher.became_leader(True)
        setup.remove_node("a")
        rounds, submitted = 0, 0
        submit = setup.publisher.lanes.submit

        def counting(*args: Any, **kwargs: Any) -> Any:
            nonlocal submitted
            submitted += 1
            return submit(*args, **kwargs)

        monkeypatch.setattr(setup.publisher.lanes, "submit", counting)
        setup.store.changed.set()
        while setup.store.changed.is_set() and rounds < 30:  # Publisher.run's loop, bounded
            setup.store.changed.clear()
            rounds += 1
            setup.clock.now += 0.2  # the debounce; the read-back's backoff (1 s, doubling) not over
            await setup.publisher.reconcile_once()
            await eventually(lambda: not writing(setup.publisher), "writes to end")
        return rounds, submitted


async def test_a_not_ready_pool_emptied_while_the_read_back_fails_does_not_spin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rounds, submitted = await rounds_while_the_read_back_fails(monkeypatch, ready=False)
    assert rounds <= 2, (rounds, submitted)  # skipped writes wait for their recheck, not every round


async def test_a_ready_pool_emptied_while_the_read_back_fails_does_not_spin(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds, submitted = await rounds_while_the_read_back_fails(monkeypatch, ready=True)
    assert rounds <= 2, (rounds, submitted)  # skipped writes wait for their recheck, not every round


async def test_a_successor_told_of_before_the_answer_does_not_get_the_ready_label_over_its_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Our status PATCH (a Ready pool's counts) lands on A; A is replaced by B, declared in Git
    without a status or the ready label (kubectl replace --force, a GitOps replace), and the
    watch tells of both before the PATCH's answer is read. The ready label must not go up on B
    while B's status does not say Ready."""
    async with publishing() as setup:
        setup.add(healthy("p5", "a", "b"))
        await start(setup)
        send = setup.publisher.requests.merge_patch
        done: list[bool] = []
        seen: list[tuple[str | None, str | None]] = []

        async def then_replaced(path: str, body: Any, timeout: float) -> dict[str, Any]:
            answer = await send(path, body, timeout)
            if path.endswith("/status") and not done:
                done.append(True)
                await replaced(setup, ready_label=None)  # declared in Git: no ready label
            elif not path.endswith("/status") and done:
                obj = setup.published()["efa-p5"]
                seen.append(
                    (obj["metadata"]["labels"].get(READY_LABEL), condition_status(obj.get("status") or {}, "Ready"))
                )
            return answer

        monkeypatch.setattr(setup.publisher.requests, "merge_patch", then_replaced)
        setup.remove_node("b")
        await setup.publisher.reconcile_once()
        await eventually(lambda: not writing(setup.publisher), "the write to end")
        # the label PATCHes sent to B, each with what B held once it landed: (ready label, Ready)
        assert [pair for pair in seen if pair[0] == "true" and pair[1] != "True"] == [], seen


async def test_a_cancelled_read_back_leaves_no_listing_window_open(monkeypatch: pytest.MonkeyPatch) -> None:
    async with publishing() as setup:
        await start(setup)
        client = setup.publisher.client

        async def hangs(path: str, *args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(3600)
            yield {}

        monkeypatch.setattr(client, "list_items", hangs)
        task = asyncio.ensure_future(setup.publisher.load_published())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert setup.publisher._told_while_listing is None, setup.publisher._told_while_listing
