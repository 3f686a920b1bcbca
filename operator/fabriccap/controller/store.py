"""The operator's memory: the fact index, plus which pools changed since the last look.

Watch handlers only ever call ``put_*``/``remove_*``; the index compares the new facts with
the stored ones and reports the pools a real difference concerns, so a node heartbeat (a new
condition timestamp, a new image list) costs one small comparison and nothing else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from fabriccap.core.facts import Pool, WorkloadPodFacts
from fabriccap.core.index import FactIndex, NamespacedKey, OwnerKey


class KindFreshness(Protocol):
    """How current each watched kind's facts are (``freshness.Freshness``)."""

    def stale_kinds(self) -> dict[str, float | None]: ...


class _NeverStale:
    """A store no informer fills (unit tests): nothing in it is stale."""

    def stale_kinds(self) -> dict[str, float | None]:
        return {}


class FactStore(FactIndex):
    def __init__(self) -> None:
        super().__init__()
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
        self.classes_changed = asyncio.Event()

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
