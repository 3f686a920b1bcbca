"""The operator's memory: the fact index, plus which pools changed since the last look.

Watch handlers only ever call ``put_*``/``remove_*``; the index compares the new facts with
the stored ones and reports the pools a real difference concerns, so a node heartbeat (a new
condition timestamp, a new image list) costs one small comparison and nothing else.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from fabriccap.core.facts import NodeFacts, PodFacts, Pool, WorkloadPodFacts
from fabriccap.core.index import (
    NODE_CLAIM_FACTS,
    NODE_FACTS,
    NODE_POOL_FACTS,
    PLUGIN_POD_FACTS,
    WORKLOAD_POD_FACTS,
    FactIndex,
    NamespacedKey,
    OwnerKey,
    Table,
)
from fabriccap.core.karpenter_facts import NodeClaimFacts, NodePoolFacts
from fabriccap.core.shard import UNSHARDED, Shard
from fabriccap.core.unlisted import UnlistedKeys

FactsT = TypeVar("FactsT")
KeyT = TypeVar("KeyT")


class Announcement(asyncio.Event):
    """An ``asyncio.Event`` that also calls its listeners when set.

    A listener is a plain callback, not a task waiting on the event: kopf, on its way out,
    waits 5 s for every task started after it before cancelling them, and a waiter that only
    ends when the event is set would hold every shutdown for those 5 s."""

    def __init__(self) -> None:
        super().__init__()
        self._listeners: list[Callable[[], None]] = []

    def set(self) -> None:
        super().set()
        for listener in list(self._listeners):
            listener()

    def listen(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` at each ``set``; the answer stops that."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)


class KindFreshness(Protocol):
    """How current each watched kind's facts are (``freshness.Freshness``)."""

    def stale_kinds(self) -> dict[str, float | None]: ...


class _NeverStale:
    """A store no informer fills (unit tests): nothing in it is stale."""

    def stale_kinds(self) -> dict[str, float | None]:
        return {}


class FactStore(FactIndex):
    def __init__(self, shard: Shard = UNSHARDED) -> None:
        super().__init__()
        # The pools this process answers for (core.shard); facts of any other are not held.
        self.shard = shard
        # Nodes of other shards' pools, by name: the pods bound to them are not held either.
        self.foreign_nodes: set[str] = set()
        # Set when a node of another shard's pool moves into one of this shard's (its pool
        # label changed): the pods bound to it were not held, so the Pod informer lists again.
        self.nodes_joined = Announcement()
        self.dirty_pools: set[Pool] = set()
        self.everything_dirty = True  # the first look evaluates every pool
        self.changed = asyncio.Event()
        # Set once every watched collection has been listed: before that, a pool's facts may
        # be partial (nodes seen, plugin pods not yet) and publishing them would flap conditions.
        self.listed = asyncio.Event()
        # The informers' progress, per kind (the operator's wiring sets it).
        self.freshness: KindFreshness = _NeverStale()
        # Told of every workload pod's new facts (None: gone): the log reader (config.transport).
        self.on_workload_pod: Callable[[NamespacedKey, WorkloadPodFacts | None], None] | None = None
        # Owners no workload pod leads to any more, since the publisher last looked: the
        # problems warned about on them are forgotten with them.
        self.released_owners: set[OwnerKey] = set()
        # Set when the DeviceClasses change: the slices' facts hold what the old classes made of
        # their devices, so the ResourceSlice informer lists them again (controller.informers).
        self.classes_changed = Announcement()

    def stale_kinds(self) -> dict[str, float | None]:
        """The watched kinds whose facts are older than ``staleAfterSeconds`` (or were never
        listed), by their label (node, pod, daemonset, resourceslice), with the age in seconds
        (None: never listed). What a status rests on is current only while its kinds are not here."""
        return self.freshness.stale_kinds()

    def fresh(self, kind: str | None = None) -> bool:
        """Whether every watched kind's facts (or ``kind``'s) are current."""
        stale = self.stale_kinds()
        return not stale if kind is None else kind not in stale

    def mark_pool(self, pool: Pool | None) -> None:
        if pool is not None:
            self.dirty_pools.add(pool)
            self.changed.set()

    def mark_all(self) -> None:
        self.everything_dirty = True
        self.changed.set()

    def _pool_touched(self, pool: Pool | None) -> None:
        self.mark_pool(pool)

    def _unpooled_touched(self) -> None:
        self.changed.set()  # no pool to re-evaluate, but the unpooled count may move

    def _everything_touched(self) -> None:
        self.mark_all()

    def _classes_touched(self) -> None:
        self.classes_changed.set()
        super()._classes_touched()

    def _unscheduled_touched(self) -> None:
        self.changed.set()  # no pool's status, but the unschedulable count and its Events

    def _lookups_touched(self, pods: set[NamespacedKey]) -> None:
        # An owner or a claim resolved: only the pools of the pods under it can change. At
        # 12,500 owners read after a start this was mark_all() 12,500 times: every round a
        # full evaluation (0.44 s at 10,000 nodes) while pods waited behind it.
        for key in pods:
            facts = self.workload_pods.get(key)
            if facts is None:
                continue
            if facts.node_name is not None:
                self._node_workloads_touched(facts.node_name)
            else:
                self.changed.set()  # a pending pod: the unschedulable count and its Events

    def _workload_pod_seen(self, key: NamespacedKey, facts: WorkloadPodFacts | None) -> None:
        if self.on_workload_pod is not None:
            self.on_workload_pod(key, facts)

    def _owner_released(self, owner: OwnerKey) -> None:
        self.released_owners.add(owner)

    def take_released(self) -> set[OwnerKey]:
        released, self.released_owners = self.released_owners, set()
        return released

    def take_dirty(self) -> tuple[bool, set[Pool]]:
        """The pools to re-evaluate (or everything), resetting the marks."""
        everything, pools = self.everything_dirty, self.dirty_pools
        self.everything_dirty, self.dirty_pools = False, set()
        self.changed.clear()
        return everything, pools

    # -- sharding: only the facts of this shard's pools are held (core.shard)

    def put(self, table: Table[Any, FactsT], facts: FactsT) -> bool:
        if self.shard.sharded and not self._in_shard(table, facts):
            return super().remove(table, table.key(facts))  # what it held moved to another shard
        return super().put(table, facts)

    def remove(self, table: Table[Any, Any], key: Any) -> bool:
        if table is NODE_FACTS:
            self.foreign_nodes.discard(key)  # deleted: no pod will be bound to it again
        return super().remove(table, key)

    def unlisted(self, table: Table[KeyT, Any], namespace: str | None) -> UnlistedKeys[KeyT]:
        if table is NODE_FACTS:
            # Another shard's nodes, too: one a fresh LIST does not name was deleted while the
            # watch was down, and ``remove`` forgets it.
            return UnlistedKeys(itertools.chain(self.held(table), cast(set[KeyT], self.foreign_nodes)))
        return super().unlisted(table, namespace)

    def _in_shard(self, table: Table[Any, Any], facts: Any) -> bool:
        """Whether ``facts`` are this shard's to hold. Every kind that belongs to a pool is
        decided here; the rest (DaemonSets, DeviceClasses, EC2NodeClasses, ResourceSlices and
        ResourceClaims, which are few or read per node) is held by every shard."""
        if table is NODE_FACTS:
            return self._node_in_shard(cast(NodeFacts, facts))
        if table is WORKLOAD_POD_FACTS or table is PLUGIN_POD_FACTS:
            node_name = cast(WorkloadPodFacts | PodFacts, facts).node_name
            if node_name is None:
                # Not bound yet: the unschedulable count and its Events are cluster-wide, shard 0's.
                return table is PLUGIN_POD_FACTS or self.shard.keeps_unpooled
            return node_name not in self.foreign_nodes
        if table is NODE_POOL_FACTS and self.node_pool_key is not None:
            return self.shard.owns(Pool(self.node_pool_key, cast(NodePoolFacts, facts).name))
        if table is NODE_CLAIM_FACTS:
            node_pool = cast(NodeClaimFacts, facts).node_pool
            return node_pool is None or self.shard.owns_value(node_pool)
        return True

    def _node_in_shard(self, node: NodeFacts) -> bool:
        if self.shard.owns(node.pool):
            if node.name in self.foreign_nodes:
                self.foreign_nodes.discard(node.name)
                self.nodes_joined.set()
            return True
        self.foreign_nodes.add(node.name)
        # Workload pods listed before their node was: another shard's. (A plugin's pods so
        # listed stay until their next event: no index finds them by node, and what they say
        # of a node outside this shard's pools is never read.)
        for key in list(self.node_workload_pods.get(node.name, ())):
            super().remove(WORKLOAD_POD_FACTS, key)
        return False
