"""The operator's memory: the fact index, plus which pools changed since the last look.

Watch handlers only ever call ``put_*``/``remove_*``; the index compares the new facts with
the stored ones and reports the pools a real difference concerns, so a node heartbeat (a new
condition timestamp, a new image list) costs one small comparison and nothing else.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, cast

from fabriccap.core.facts import NodeFacts, Pool, WorkloadPodFacts
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
from fabriccap.core.shard import UNSHARDED, HashedNames, Shard
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
        # Nodes of other shards' pools, by name, with their pool (None: pool-less, shard 0's):
        # the workload pods bound to them are not held either. Their pools, with the other
        # shards' NodePools, name the objects other shards answer for (``known_pools``).
        self.foreign_nodes: dict[str, Pool | None] = {}
        self.foreign_pool_sizes: dict[Pool, int] = {}  # how many of those nodes each of their pools has
        self.foreign_node_pools: set[str] = set()
        # Which known pool computes each hashed name (``pool_computing``): built at the first
        # lookup, then kept as pools come and go, by the fabrics and NodePool key it was built with.
        self._hashed_names: HashedNames | None = None
        self._hashed_names_of: tuple[tuple[str, ...], str | None] | None = None
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
        # Every listed and watched object comes through here: the hashed names' memo is kept
        # only once a lookup built it (sharded, and an object its annotations do not explain).
        if self._hashed_names is None:
            return self._put_in_shard(table, facts)
        concerned = self._pools_known_before(table, table.key(facts), facts)
        changed = self._put_in_shard(table, facts)
        self._pools_came_or_went(concerned)
        return changed

    def _put_in_shard(self, table: Table[Any, FactsT], facts: FactsT) -> bool:
        if self.shard.sharded and not self._in_shard(table, facts):
            return super().remove(table, table.key(facts))  # what it held moved to another shard
        if table is NODE_POOL_FACTS:
            self.foreign_node_pools.discard(cast(NodePoolFacts, facts).name)
        return super().put(table, facts)

    def remove(self, table: Table[Any, Any], key: Any) -> bool:
        if self._hashed_names is None:
            return self._remove_held(table, key)
        concerned = self._pools_known_before(table, key, None)
        changed = self._remove_held(table, key)
        self._pools_came_or_went(concerned)
        return changed

    def _remove_held(self, table: Table[Any, Any], key: Any) -> bool:
        if table is NODE_FACTS:
            self._forget_foreign_node(key)  # deleted: no pod will be bound to it again
        elif table is NODE_POOL_FACTS:
            self.foreign_node_pools.discard(key)
        return super().remove(table, key)

    def unlisted(self, table: Table[KeyT, Any], namespace: str | None) -> UnlistedKeys[KeyT]:
        # Another shard's nodes and NodePools, too: one a fresh LIST does not name was deleted
        # while the watch was down, and ``remove`` forgets it.
        if table is NODE_FACTS:
            return UnlistedKeys(itertools.chain(self.held(table), cast(dict[KeyT, Any], self.foreign_nodes)))
        if table is NODE_POOL_FACTS:
            return UnlistedKeys(itertools.chain(self.held(table), cast(set[KeyT], self.foreign_node_pools)))
        return super().unlisted(table, namespace)

    def node_exists(self, name: str) -> bool:
        """A node of another shard's pool exists too: a NodeClaim naming it (its NodePool this
        shard's, its first pool label another's) was said to name no node (review 64-shard F6)."""
        return super().node_exists(name) or name in self.foreign_nodes

    def known_pools(self) -> set[Pool]:
        """Every pool of the cluster, this shard's and the others' (every shard sees every
        node's pool label, and every NodePool): which shard a FabricCapability with a hashed
        name is for (``Shard.owns_object``)."""
        pools = set(self.pools())
        pools.update(self.foreign_pool_sizes)
        if self.node_pool_key is not None:
            pools.update(Pool(self.node_pool_key, name) for name in self.foreign_node_pools)
        return pools

    def pool_computing(self, name: str, fabrics: Sequence[str]) -> Pool | None:
        """The known pool that computes the hashed ``name`` under one of ``fabrics``, if any:
        ``Shard.owns_object``'s lookup, from a memo kept as pools come and go (review 64a F1)."""
        built_for = (tuple(fabrics), self.node_pool_key)
        if self._hashed_names is None or self._hashed_names_of != built_for:
            self._hashed_names = HashedNames(fabrics, self.known_pools())
            self._hashed_names_of = built_for
        return self._hashed_names.pool_computing(name)

    def _pool_known(self, pool: Pool) -> bool:
        """Whether ``pool`` is one of ``known_pools``, without building them."""
        if pool in self.pool_members or pool in self.foreign_pool_sizes:
            return True
        return pool.key == self.node_pool_key and (
            pool.value in self.node_pools or pool.value in self.foreign_node_pools
        )

    def _pools_known_before(self, table: Table[Any, Any], key: Any, facts: Any) -> dict[Pool, bool]:
        """The pools a change of ``key`` in ``table`` to ``facts`` (None: removed) may make
        appear or go, with whether each is known now (asked only while the memo is kept)."""
        if table is NODE_FACTS:
            held = self.nodes.get(key)
            previous = held.pool if held is not None else self.foreign_nodes.get(key)
            pools = {previous, None if facts is None else cast(NodeFacts, facts).pool}
        elif table is NODE_POOL_FACTS and self.node_pool_key is not None:
            pools = {Pool(self.node_pool_key, key)}
        else:
            return {}
        return {pool: self._pool_known(pool) for pool in pools if pool is not None}

    def _pools_came_or_went(self, known_before: dict[Pool, bool]) -> None:
        if self._hashed_names is None:
            return
        for pool, was_known in known_before.items():
            if not was_known and self._pool_known(pool):
                self._hashed_names.add(pool)
            elif was_known and not self._pool_known(pool):
                self._hashed_names.discard(pool)

    def _remember_foreign_node(self, name: str, pool: Pool | None) -> None:
        self._forget_foreign_node(name)
        self.foreign_nodes[name] = pool
        if pool is not None:
            self.foreign_pool_sizes[pool] = self.foreign_pool_sizes.get(pool, 0) + 1

    def _forget_foreign_node(self, name: str) -> bool:
        """Forget a node of another shard's pool; whether it was one."""
        if name not in self.foreign_nodes:
            return False
        pool = self.foreign_nodes.pop(name)
        if pool is not None:
            size = self.foreign_pool_sizes.pop(pool) - 1
            if size:
                self.foreign_pool_sizes[pool] = size
        return True

    def _in_shard(self, table: Table[Any, Any], facts: Any) -> bool:
        """Whether ``facts`` are this shard's to hold. Every kind that belongs to a pool is
        decided here; the rest (DaemonSets, DeviceClasses, EC2NodeClasses, ResourceSlices and
        ResourceClaims, which are few or read per node) is held by every shard.

        So are the device plugins' pods, one per node and fabric: a node relabelled into this
        shard's pool is evaluated at once, and without its plugin pod (were it dropped while
        the node was another shard's, it came back only with the Pods' next LIST) its healthy
        pool was published Ready=False DevicePluginGap until then (review 64-shard F5)."""
        if table is NODE_FACTS:
            return self._node_in_shard(cast(NodeFacts, facts))
        if table is PLUGIN_POD_FACTS:
            return True
        if table is WORKLOAD_POD_FACTS:
            node_name = cast(WorkloadPodFacts, facts).node_name
            if node_name is None:
                # Not bound yet: the unschedulable count and its Events are cluster-wide, shard 0's.
                return self.shard.keeps_unpooled
            return node_name not in self.foreign_nodes
        if table is NODE_POOL_FACTS and self.node_pool_key is not None:
            name = cast(NodePoolFacts, facts).name
            if self.shard.owns(Pool(self.node_pool_key, name)):
                return True
            self.foreign_node_pools.add(name)
            return False
        if table is NODE_CLAIM_FACTS:
            node_pool = cast(NodeClaimFacts, facts).node_pool
            return node_pool is None or self.shard.owns_value(node_pool)
        return True

    def _node_in_shard(self, node: NodeFacts) -> bool:
        if self.shard.owns(node.pool):
            if self._forget_foreign_node(node.name):
                self.nodes_joined.set()
            return True
        self._remember_foreign_node(node.name, node.pool)
        # Workload pods listed before their node was: another shard's.
        for key in list(self.node_workload_pods.get(node.name, ())):
            super().remove(WORKLOAD_POD_FACTS, key)
        return False
