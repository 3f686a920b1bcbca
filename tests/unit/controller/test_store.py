"""FactStore: which facts changes mark which pools dirty, and what a fresh LIST forgets."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from fabriccap.controller.store import FactStore
from fabriccap.core.facts import (
    DaemonSetFacts,
    FactsExtractor,
    NodeFacts,
    ObjectRef,
    PodFacts,
    Pool,
    WorkloadPodFacts,
)
from fabriccap.core.index import (
    DAEMON_SET_FACTS,
    NODE_CLAIM_FACTS,
    NODE_FACTS,
    NODE_POOL_FACTS,
    PLUGIN_POD_FACTS,
    WORKLOAD_POD_FACTS,
    Table,
)
from fabriccap.core.karpenter_facts import NodeClaimFacts, NodePoolFacts
from fabriccap.core.launchable import missing_nodes
from fabriccap.core.names import hashed_name
from fabriccap.core.shard import UNSHARDED, Shard
from fabriccap_devtools import world
from support.configs import default_config

TRAIN = Pool("eks.amazonaws.com/nodegroup", "train")
INFER = Pool("eks.amazonaws.com/nodegroup", "infer")
VALUES = [f"p5-{number}" for number in range(20)]


def node(name: str, pool: Pool | None = TRAIN, efa: int = 32) -> NodeFacts:
    resources = (("vpc.amazonaws.com/efa", efa),)
    return NodeFacts(name, pool, "p5.48xlarge", False, resources, resources, ())


def pod(name: str, node_name: str | None, ready: bool = True) -> PodFacts:
    return PodFacts("kube-system", name, node_name, "aws-efa-k8s-device-plugin", ready)


def settled() -> FactStore:
    store = FactStore()
    store.put(NODE_FACTS, node("a"))
    store.put(NODE_FACTS, node("b", INFER))
    store.take_dirty()
    return store


def test_the_first_look_evaluates_everything() -> None:
    store = FactStore()
    everything, pools = store.take_dirty()
    assert everything is True and pools == set()
    assert store.take_dirty() == (False, set())


def test_an_unchanged_node_marks_nothing() -> None:
    store = settled()
    assert store.put(NODE_FACTS, node("a")) is False
    assert store.changed.is_set() is False
    assert store.take_dirty() == (False, set())


def test_a_changed_count_marks_only_its_pool() -> None:
    store = settled()
    assert store.put(NODE_FACTS, node("a", efa=16)) is True
    assert store.take_dirty() == (False, {TRAIN})


def test_moving_a_node_marks_both_pools_and_moves_membership() -> None:
    store = settled()
    store.put(NODE_FACTS, node("a", INFER))
    assert store.take_dirty() == (False, {TRAIN, INFER})
    assert TRAIN not in store.pool_members
    assert {n.name for n in store.members(INFER)} == {"a", "b"}


def test_unpooled_nodes_are_tracked_and_wake_the_publisher() -> None:
    store = settled()
    store.put(NODE_FACTS, node("a", None))
    assert store.unpooled == {"a"}
    assert store.changed.is_set()
    assert store.take_dirty() == (False, {TRAIN})
    store.remove(NODE_FACTS, "a")
    assert store.unpooled == set()
    assert store.changed.is_set()


def test_a_plugin_pod_marks_the_pool_of_its_node() -> None:
    store = settled()
    store.put(PLUGIN_POD_FACTS, pod("p", "b"))
    assert store.take_dirty() == (False, {INFER})
    store.put(PLUGIN_POD_FACTS, pod("p", "b", ready=False))
    assert store.take_dirty() == (False, {INFER})
    store.put(PLUGIN_POD_FACTS, pod("p", "a", ready=False))  # rebound: both nodes' pools
    assert store.take_dirty() == (False, {INFER, TRAIN})
    store.remove(PLUGIN_POD_FACTS, ("kube-system", "p"))
    assert store.take_dirty() == (False, {TRAIN})


def test_a_daemon_set_change_marks_everything() -> None:
    store = settled()
    store.put(DAEMON_SET_FACTS, DaemonSetFacts("kube-system", "aws-efa-k8s-device-plugin", ()))
    assert store.take_dirty()[0] is True
    assert store.put(DAEMON_SET_FACTS, DaemonSetFacts("kube-system", "aws-efa-k8s-device-plugin", ())) is False


def listed_again(store: FactStore, table: Table[Any, Any], namespace: str | None, names: set[str]) -> None:
    """A fresh LIST of ``namespace`` that names ``names``, as an informer reads it: the keys
    held are crossed off as it names them, and the rest forgotten at its end."""
    unlisted = store.unlisted(table, namespace)
    for name in names:
        unlisted.discard(table.key_of(namespace or "", name))
    store.forget(table, unlisted)


def test_a_fresh_list_forgets_what_it_no_longer_has() -> None:
    store = settled()
    store.put(PLUGIN_POD_FACTS, pod("p", "a"))
    store.put(PLUGIN_POD_FACTS, pod("q", "b"))
    store.put(DAEMON_SET_FACTS, DaemonSetFacts("kube-system", "plugin", ()))
    store.take_dirty()
    listed_again(store, NODE_FACTS, None, {"b"})
    listed_again(store, PLUGIN_POD_FACTS, "kube-system", {"q"})
    listed_again(store, DAEMON_SET_FACTS, "kube-system", set())
    assert set(store.nodes) == {"b"}
    assert set(store.pods) == {("kube-system", "q")}
    assert store.daemon_sets == {}
    everything, pools = store.take_dirty()
    assert everything is True  # the DaemonSet went
    assert TRAIN in pools


# --- lookups: an owner or a claim read marks the pools of the pods under it, no others


def workload(name: str, node_name: str | None, owner: str) -> WorkloadPodFacts:
    body = world.workload_pod(node_name, name, owner=world.owner_reference("Job", "batch/v1", owner))
    facts = FactsExtractor(default_config()).workload_pod(body)
    assert facts is not None
    return facts


def test_an_owner_read_marks_only_the_pools_of_its_pods() -> None:
    store = settled()
    store.put(WORKLOAD_POD_FACTS, workload("w-0", "a", owner="train-job"))
    store.put(WORKLOAD_POD_FACTS, workload("w-1", "b", owner="infer-job"))
    store.take_dirty()
    jobset = ObjectRef("jobset.x-k8s.io/v1alpha2", "JobSet", "ml", "bert")
    assert store.learn_owner(("Job.batch", "ml", "train-job"), jobset) is True
    assert store.take_dirty() == (False, {TRAIN})
    # One level up: the JobSet's answer concerns the Job's pods too.
    assert store.learn_owner(jobset.key, None) is True
    assert store.take_dirty() == (False, {TRAIN})
    # The same answer again changes nothing; an owner nobody runs under marks nothing.
    assert store.learn_owner(jobset.key, None) is False
    assert store.learn_owner(("Job.batch", "ml", "nobody"), None) is True
    assert store.take_dirty() == (False, set())
    assert store.changed.is_set() is False


def test_an_owner_read_for_a_pending_pod_wakes_the_loop_without_a_pool() -> None:
    store = settled()
    store.put(WORKLOAD_POD_FACTS, workload("w-0", None, owner="waiting-job"))
    store.take_dirty()
    store.learn_owner(("Job.batch", "ml", "waiting-job"), None)
    assert store.changed.is_set() is True
    assert store.take_dirty() == (False, set())


def test_a_deleted_pod_is_forgotten_by_its_owner() -> None:
    store = settled()
    store.put(WORKLOAD_POD_FACTS, workload("w-0", "a", owner="train-job"))
    store.remove(WORKLOAD_POD_FACTS, ("ml", "w-0"))
    assert store.owner_pods == {}
    store.take_dirty()
    store.learn_owner(("Job.batch", "ml", "train-job"), None)
    assert store.take_dirty() == (False, set())


# -- a shard holds only its own pools' facts (core.shard)

FIRST_OF_TWO = Shard(index=0, count=2)
OURS = next(Pool(TRAIN.key, value) for value in VALUES if FIRST_OF_TWO.owns_value(value))
THEIRS = next(Pool(TRAIN.key, value) for value in VALUES if not FIRST_OF_TWO.owns_value(value))


def sharded(shard: Shard = FIRST_OF_TWO) -> FactStore:
    store = FactStore(shard)
    store.put(NODE_FACTS, node("ours", OURS))
    store.put(NODE_FACTS, node("theirs", THEIRS))
    store.take_dirty()
    return store


def test_a_shard_holds_the_nodes_of_its_pools_only() -> None:
    store = sharded()
    assert set(store.nodes) == {"ours"} and set(store.foreign_nodes) == {"theirs"}
    assert store.pools() == [OURS]
    # The other shard holds the other half, and no node twice.
    other = sharded(Shard(index=1, count=2))
    assert set(other.nodes) == {"theirs"} and other.pools() == [THEIRS]


def test_a_shard_holds_the_pods_on_its_nodes_and_shard_zero_the_pending_ones() -> None:
    store = sharded()
    store.put(WORKLOAD_POD_FACTS, workload("w-ours", "ours", owner="job"))
    store.put(WORKLOAD_POD_FACTS, workload("w-theirs", "theirs", owner="job"))
    store.put(WORKLOAD_POD_FACTS, workload("w-pending", None, owner="job"))
    store.put(PLUGIN_POD_FACTS, pod("plugin-theirs", "theirs"))
    store.put(PLUGIN_POD_FACTS, pod("plugin-ours", "ours"))
    assert set(store.workload_pods) == {("ml", "w-ours"), ("ml", "w-pending")}
    # Every shard holds every node's plugin pod: a node that joins is judged with its own.
    assert set(store.pods) == {("kube-system", "plugin-ours"), ("kube-system", "plugin-theirs")}
    other = sharded(Shard(index=1, count=2))
    other.put(WORKLOAD_POD_FACTS, workload("w-theirs", "theirs", owner="job"))
    other.put(WORKLOAD_POD_FACTS, workload("w-pending", None, owner="job"))
    assert set(other.workload_pods) == {("ml", "w-theirs")}
    # Bound at last, to a node of the other shard: shard 0 lets it go.
    store.put(WORKLOAD_POD_FACTS, workload("w-pending", "theirs", owner="job"))
    assert set(store.workload_pods) == {("ml", "w-ours")} and store.unscheduled_pods == set()


def test_pods_listed_before_their_node_leave_when_it_turns_out_to_be_another_shards() -> None:
    store = FactStore(FIRST_OF_TWO)
    store.put(WORKLOAD_POD_FACTS, workload("w-0", "late", owner="job"))  # the Pod LIST came first
    assert ("ml", "w-0") in store.workload_pods
    store.put(NODE_FACTS, node("late", THEIRS))
    assert store.workload_pods == {} and store.node_workload_pods == {} and store.owner_pods == {}


def test_a_node_that_moves_between_shards_goes_with_its_pods_and_comes_back_through_a_relist() -> None:
    store = sharded()
    store.put(WORKLOAD_POD_FACTS, workload("w-0", "ours", owner="job"))
    store.take_dirty()
    # Relabelled into the other shard's pool: its node, its pods and its pool leave.
    assert store.put(NODE_FACTS, node("ours", THEIRS)) is True
    assert "ours" not in store.nodes and store.workload_pods == {} and OURS not in store.pool_members
    assert store.take_dirty() == (False, {OURS})
    assert store.nodes_joined.is_set() is False
    # Back into ours: held again, and the pods bound to it must be listed again.
    store.put(NODE_FACTS, node("ours", OURS))
    assert "ours" in store.nodes and "ours" not in store.foreign_nodes
    assert store.nodes_joined.is_set() is True


def test_a_deleted_or_unlisted_node_of_another_shard_is_forgotten() -> None:
    store = sharded()
    store.put(NODE_FACTS, node("theirs-2", THEIRS))
    store.remove(NODE_FACTS, "theirs")
    assert set(store.foreign_nodes) == {"theirs-2"}
    listed_again(store, NODE_FACTS, None, {"ours"})  # a fresh LIST without it
    assert not store.foreign_nodes and set(store.nodes) == {"ours"}


def test_nodes_without_a_pool_are_shard_zeros() -> None:
    first, second = FactStore(FIRST_OF_TWO), FactStore(Shard(index=1, count=2))
    for store in (first, second):
        store.put(NODE_FACTS, node("loose", None))
    assert first.unpooled == {"loose"} and second.unpooled == set() and second.foreign_nodes == {"loose": None}


def test_an_unsharded_store_holds_everything() -> None:
    store = sharded(UNSHARDED)
    store.put(WORKLOAD_POD_FACTS, workload("w-theirs", "theirs", owner="job"))
    assert set(store.nodes) == {"ours", "theirs"} and not store.foreign_nodes
    assert set(store.workload_pods) == {("ml", "w-theirs")}


def test_a_shard_knows_the_other_shards_nodes_exist_and_their_pools() -> None:
    store = sharded()
    # NodeClaims of a NodePool of this shard; one's node is held by the other shard (the node's
    # first pool label is not its NodePool): it exists, and only the one naming no node at all
    # is reported (review 64-shard F6).
    for claim, node_name in (("nc-theirs", "theirs"), ("nc-gone", "gone")):
        store.put(NODE_CLAIM_FACTS, NodeClaimFacts(claim, OURS.value, node_name, None, (), (), ()))
    assert len(store.karpenter_claims) == 2
    assert missing_nodes(store, OURS.value) == ["NodeClaim nc-gone names node gone, which does not exist"]
    assert store.node_exists("theirs") and store.node_exists("ours") and not store.node_exists("gone")
    # Every pool of the cluster, the other shard's too: what names the objects it answers for.
    assert store.known_pools() == {OURS, THEIRS}
    store.remove(NODE_FACTS, "theirs")
    assert not store.node_exists("theirs") and store.known_pools() == {OURS}


def test_the_lookup_of_hashed_names_keeps_to_the_known_pools_as_they_come_and_go() -> None:
    """``pool_computing`` answers from a memo (review 64a F1): built at the first lookup, then
    kept by each change that makes a pool appear or go, on either shard's side."""
    fabrics = ["efa", "ib"]
    store = sharded()
    karpenter = [Pool("karpenter.sh/nodepool", value) for value in VALUES[:6]]
    universe = [OURS, THEIRS, *(Pool(TRAIN.key, value) for value in VALUES), *karpenter]

    def agrees() -> bool:
        known = store.known_pools()
        return all(
            store.pool_computing(hashed_name(fabric, pool.key, pool.value), fabrics)
            == (pool if pool in known else None)
            for pool in universe
            for fabric in fabrics
        )

    assert agrees()  # built here, from OURS and THEIRS
    other_theirs = next(
        Pool(TRAIN.key, value) for value in VALUES if value != THEIRS.value and not FIRST_OF_TWO.owns_value(value)
    )
    steps: list[Callable[[], object]] = [
        partial(store.put, NODE_FACTS, node("theirs-2", THEIRS)),  # a second node: nothing new
        partial(store.put, NODE_FACTS, node("theirs", other_theirs)),  # one foreign pool to another
        partial(store.put, NODE_FACTS, node("theirs-2", other_theirs)),  # THEIRS has no node left
        partial(store.put, NODE_FACTS, node("ours", THEIRS)),  # ours moves out: OURS goes, THEIRS is back
        partial(store.put, NODE_FACTS, node("theirs", OURS)),  # theirs moves in
        partial(store.put, NODE_FACTS, node("loose", None)),
        partial(store.remove, NODE_FACTS, "theirs-2"),
        partial(listed_again, store, NODE_FACTS, None, {"theirs"}),  # "ours" and "loose" forgotten
        *(partial(store.put, NODE_POOL_FACTS, NodePoolFacts(pool.value, 1, (), (), None)) for pool in karpenter),
        partial(store.put, NODE_FACTS, node("karpentered", karpenter[0])),
        *(partial(store.remove, NODE_POOL_FACTS, pool.value) for pool in karpenter),
        partial(store.remove, NODE_FACTS, "theirs"),
    ]
    for number, step in enumerate(steps):
        step()
        assert agrees(), f"after step {number}"
    assert store.known_pools() == {karpenter[0]}
