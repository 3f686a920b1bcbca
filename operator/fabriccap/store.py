"""The operator's memory: facts per object, and which pools changed since the last look.

Watch handlers only ever call ``put_*``/``remove_*``; each compares the new facts with the
stored ones and marks pools dirty only on a real difference, so a node heartbeat (a new
condition timestamp, a new image list) costs one small comparison and nothing else.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from fabriccap.facts import DaemonSetFacts, NodeFacts, PodFacts, Pool

PodKey = tuple[str, str]


class FactStore:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeFacts] = {}
        self.pods: dict[PodKey, PodFacts] = {}
        self.daemon_sets: dict[PodKey, DaemonSetFacts] = {}
        self.pool_members: dict[Pool, set[str]] = defaultdict(set)
        self.unpooled: set[str] = set()  # nodes with no pool label: few, so scanned every round
        self.dirty_pools: set[Pool] = set()
        self.everything_dirty = True  # the first look evaluates every pool
        self.changed = asyncio.Event()
        # Set once every watched collection has been listed: before that, a pool's facts may
        # be partial (nodes seen, plugin pods not yet) and publishing them would flap conditions.
        self.listed = asyncio.Event()

    def mark_pool(self, pool: Pool | None) -> None:
        if pool is not None:
            self.dirty_pools.add(pool)
            self.changed.set()

    def _mark_node(self, node_name: str | None) -> None:
        if node_name is not None and (node := self.nodes.get(node_name)) is not None:
            self.mark_pool(node.pool)

    def mark_all(self) -> None:
        self.everything_dirty = True
        self.changed.set()

    def put_node(self, facts: NodeFacts) -> bool:
        previous = self.nodes.get(facts.name)
        if previous == facts:
            return False
        self.nodes[facts.name] = facts
        if previous is not None and previous.pool != facts.pool and previous.pool is not None:
            self._drop_member(previous.pool, facts.name)
            self.mark_pool(previous.pool)
        if facts.pool is not None:
            self.pool_members[facts.pool].add(facts.name)
            self.unpooled.discard(facts.name)
        else:
            self.unpooled.add(facts.name)
        if facts.pool is None or (previous is not None and previous.pool is None):
            self.changed.set()  # no pool to re-evaluate, but the unpooled count may move
        self.mark_pool(facts.pool)
        return True

    def remove_node(self, name: str) -> bool:
        previous = self.nodes.pop(name, None)
        if previous is None:
            return False
        if previous.pool is None:
            self.unpooled.discard(name)
            self.changed.set()
        if previous.pool is not None:
            self._drop_member(previous.pool, name)
        self.mark_pool(previous.pool)
        return True

    def _drop_member(self, pool: Pool, name: str) -> None:
        members = self.pool_members.get(pool)
        if members is not None:
            members.discard(name)
            if not members:
                del self.pool_members[pool]

    def put_pod(self, facts: PodFacts) -> bool:
        key = (facts.namespace, facts.name)
        previous = self.pods.get(key)
        if previous == facts:
            return False
        self.pods[key] = facts
        if previous is not None and previous.node_name != facts.node_name:
            self._mark_node(previous.node_name)
        self._mark_node(facts.node_name)
        return True

    def remove_pod(self, namespace: str, name: str) -> bool:
        previous = self.pods.pop((namespace, name), None)
        if previous is None:
            return False
        self._mark_node(previous.node_name)
        return True

    def put_daemon_set(self, facts: DaemonSetFacts) -> bool:
        key = (facts.namespace, facts.name)
        if self.daemon_sets.get(key) == facts:
            return False
        self.daemon_sets[key] = facts
        # A plugin DaemonSet appearing changes which pods count, and the list every status shows.
        self.mark_all()
        return True

    def remove_daemon_set(self, namespace: str, name: str) -> bool:
        if self.daemon_sets.pop((namespace, name), None) is None:
            return False
        self.mark_all()
        return True

    def retain_nodes(self, names: set[str]) -> None:
        """After a fresh LIST: forget the nodes it no longer has (deleted while unwatched)."""
        for name in [name for name in self.nodes if name not in names]:
            self.remove_node(name)

    def retain_pods(self, namespace: str, keys: set[str]) -> None:
        for pod_namespace, name in [key for key in self.pods if key[0] == namespace]:
            if f"{pod_namespace}/{name}" not in keys:
                self.remove_pod(pod_namespace, name)

    def retain_daemon_sets(self, namespace: str, keys: set[str]) -> None:
        for ds_namespace, name in [key for key in self.daemon_sets if key[0] == namespace]:
            if f"{ds_namespace}/{name}" not in keys:
                self.remove_daemon_set(ds_namespace, name)

    def take_dirty(self) -> tuple[bool, set[Pool]]:
        """The pools to re-evaluate (or everything), resetting the marks."""
        everything, pools = self.everything_dirty, self.dirty_pools
        self.everything_dirty, self.dirty_pools = False, set()
        self.changed.clear()
        return everything, pools

    def members(self, pool: Pool) -> list[NodeFacts]:
        return [self.nodes[name] for name in self.pool_members.get(pool, ())]
