"""FactStore: which facts changes mark which pools dirty, and what a fresh LIST forgets."""

from __future__ import annotations

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
from fabriccap.core.index import DAEMON_SET_FACTS, NODE_FACTS, PLUGIN_POD_FACTS, WORKLOAD_POD_FACTS
from fabriccap_devtools import world
from support.configs import default_config

TRAIN = Pool("eks.amazonaws.com/nodegroup", "train")
INFER = Pool("eks.amazonaws.com/nodegroup", "infer")


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


def test_a_fresh_list_forgets_what_it_no_longer_has() -> None:
    store = settled()
    store.put(PLUGIN_POD_FACTS, pod("p", "a"))
    store.put(PLUGIN_POD_FACTS, pod("q", "b"))
    store.put(DAEMON_SET_FACTS, DaemonSetFacts("kube-system", "plugin", ()))
    store.take_dirty()
    store.retain(NODE_FACTS, None, {"b"})
    store.retain(PLUGIN_POD_FACTS, "kube-system", {"kube-system/q"})
    store.retain(DAEMON_SET_FACTS, "kube-system", set())
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
