"""Facts keyed by object identity, with pool membership kept current as facts change.

One index serves both paths: ``fabriccap evaluate`` fills it from snapshots, the operator's
store (a subclass that also tracks which pools changed) fills it from watch events. The
evaluation reads only this, so the live answer and the offline answer come from the same
data structure as well as the same function.

Each kind of fact is one ``Table``: how a value's key is made and what a change to one
touches. ``put``, ``remove`` and ``retain`` are written once for every table: they compare the
new facts with the stored ones, report whether anything changed, and hand the change (the
previous value, the new one) to the table, which says which pools and versions it concerns;
the ``_touched`` hooks tell a subclass which pools a change concerns. A new kind of fact is a
table and its ``changed`` function, nothing else here.

Versions say what changed to whoever keeps results derived from these facts (the operator's
evaluation memo): a pool's node-side facts (its members, their ResourceSlices), the
providers (DaemonSets and their pods, which every pool's status reads), and each workload
pod (its facts, or what a lookup learnt about its owners or claims). Every change takes the
next number of one counter, so a version never repeats, even for a pool that goes and comes.

What lookups learnt (an owner's own owner, a claim's device classes) is kept while a workload
pod's chain of owners or its claims still reaches it, and forgotten when the last such pod goes:
a cluster that runs 50,000 short Jobs a day would otherwise keep 50,000 owners for good
(reliability round 3, H7). A Job seen again later is read again, once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from fabriccap.core.config import Config
from fabriccap.core.counters import CounterSet, allocatable_at_once, invalid_counters
from fabriccap.core.facts import (
    ClaimFacts,
    ClaimRef,
    DaemonSetFacts,
    NodeFacts,
    ObjectRef,
    PodFacts,
    Pool,
    SliceFacts,
    WorkloadPodFacts,
)
from fabriccap.core.karpenter_facts import NODEPOOL_LABEL, NodeClaimFacts, NodeClassFacts, NodePoolFacts
from fabriccap.core.selection import (
    NO_CLASSES,
    ClassError,
    DeviceClassFacts,
    DeviceClassView,
    SliceRules,
    TaintRuleFacts,
    TaintRules,
)
from fabriccap.core.text import MAX_NAME, clean_text
from fabriccap.core.unlisted import UnlistedKeys
from fabriccap.core.verdicts import PodTransport

NamespacedKey = tuple[str, str]
OwnerKey = tuple[str, str, str]  # (kind, namespace, name)
K = TypeVar("K")
V = TypeVar("V")
KeyT = TypeVar("KeyT", bound=Hashable)
FactsT = TypeVar("FactsT")


@dataclass(frozen=True, eq=False)
class Table(Generic[KeyT, FactsT]):
    """One kind of fact held in the index by key, and what a change to one of them touches.

    Identity is the table itself (``eq=False``): two tables never share their facts.
    """

    name: str  # in messages and reprs: "nodes"
    namespaced: bool
    key: Callable[[FactsT], KeyT]  # the key a facts value is held under
    # What a change touches, given the key, the value before (None: new) and after (None:
    # removed). Called after the table itself holds the new state. A new object's key is the
    # very key the table holds it under: the index's maps hold that one object too, not an
    # equal copy each (a pod's key is 56 bytes; 200,000 GPU pods held two copies, 11 MiB).
    changed: Callable[[FactIndex, KeyT, FactsT | None, FactsT | None], None]

    def key_of(self, namespace: str, name: str) -> KeyT:
        """The key of the object ``namespace/name`` (namespace ignored when cluster-scoped)."""
        return cast(KeyT, (namespace, name) if self.namespaced else name)

    def in_scope(self, key: KeyT, namespace: str | None) -> bool:
        return namespace is None or not self.namespaced or cast(NamespacedKey, key)[0] == namespace

    def __repr__(self) -> str:
        return f"Table({self.name})"


@dataclass(frozen=True, slots=True)
class DraDevices:
    """A node's devices of one fabric in ResourceSlices and ResourceClaims, and why some could
    not be counted."""

    count: int
    # Why driver pools that hold the fabric's devices, or may hold them, are not counted
    # (incomplete, invalid, unreadable); the other pools still count, as the scheduler
    # allocates from them.
    problem: str | None = None
    # Devices of the fabric in the slices present, complete or not, and in its claims: a node
    # with some is a target node of the fabric even while its pool is incomplete.
    seen: int = 0
    # Of ``count``, the devices allocated to ResourceClaims that the driver no longer publishes.
    allocated: int = 0
    # What else a message should say: slices of an older generation ignored, a generation that
    # went back.
    notes: tuple[str, ...] = ()
    # The fabric's classes failed on these devices: not counted.
    errors: tuple[ClassError, ...] = ()


NO_DRA_DEVICES = DraDevices(0)
# A device name in a message: DRANET's are PCI addresses; a hostile one is cut here.
MAX_DEVICE_NAME = 80
# A driver name is a DNS subdomain of at most 63 characters (resource.k8s.io/v1 validation);
# only a snapshot can hold a longer one.
MAX_DRIVER_NAME = 63
# The DeviceTaintRules a pool's note names (those that took most devices), the others counted.
MAX_NAMED_RULES = 3
CAVEAT_OF_SOME_RULES = "some of these rules' selector fields not evaluated here, taken to match"


class FactIndex:
    def __init__(self) -> None:
        self._tables: dict[Table[Any, Any], dict[Any, Any]] = {}
        # The tables of the watched kinds, under the names the evaluation reads them by.
        self.nodes: dict[str, NodeFacts] = self.held(NODE_FACTS)
        self.pods: dict[NamespacedKey, PodFacts] = self.held(PLUGIN_POD_FACTS)
        self.daemon_sets: dict[NamespacedKey, DaemonSetFacts] = self.held(DAEMON_SET_FACTS)
        self.pool_members: dict[Pool, set[str]] = {}
        self.unpooled: set[str] = set()  # nodes with no pool label: few, so scanned every round
        self.slices: dict[str, SliceFacts] = self.held(SLICE_FACTS)
        self.node_slices: dict[str, set[str]] = {}  # node name -> names of its slices
        # Per node, per (driver, pool, fabric): how many of its devices that draw on shared
        # counters fit at once (core.counters). Only the node's slices decide it, and a pool
        # reads every node again whenever one of them changes: kept until a slice of the node
        # changes.
        self._at_once: dict[str, dict[tuple[str, str, str], int]] = {}
        # The DeviceClasses the DRA fabrics name or map their resource with, by name; the view
        # (with a version) is what slices are read with.
        self.device_classes: dict[str, DeviceClassFacts] = self.held(DEVICE_CLASS_FACTS)
        # The DeviceTaintRules whose taint keeps devices from the recommended claim, by name:
        # slices are read with them too (they are in the view).
        self.taint_rules: dict[str, TaintRuleFacts] = self.held(TAINT_RULE_FACTS)
        # Built when read, not on every change: a LIST of R rules would build it R times.
        self._class_view: DeviceClassView | None = NO_CLASSES
        # Allocated ResourceClaims of the fabrics' classes, and the claims on each node.
        self.claims: dict[NamespacedKey, ClaimFacts] = self.held(CLAIM_FACTS)
        self.node_claims: dict[str, set[NamespacedKey]] = {}
        self.workload_pods: dict[NamespacedKey, WorkloadPodFacts] = self.held(WORKLOAD_POD_FACTS)
        self.node_workload_pods: dict[str, set[NamespacedKey]] = {}
        self.unscheduled_pods: set[NamespacedKey] = set()  # not bound, and the scheduler said why
        # What only other objects tell (their owners, the devices a claim asks for), learnt by
        # lookups: the operator's cached reads, or the objects a snapshot carries. An owner
        # mapped to None has none (or cannot be read): it is the top.
        self.owner_parents: dict[OwnerKey, ObjectRef | None] = {}
        # The uids read of owners that pods name by a label without one (a LeaderWorkerSet):
        # an Event needs it (core.workload_kinds ``uid_from_read``). Only those kinds' uids.
        self.owner_uids: dict[OwnerKey, str] = {}
        # Of those owners, the generations their pods told (``WorkloadPodFacts.owner_generation``:
        # a LeaderWorkerSet's leader StatefulSet uid), in the order seen: one not seen before is
        # a new owner of the same name (deleted and created again while an old pod lingers),
        # whose read is done again; an answer read for an earlier one is not kept.
        self.owner_generations: dict[OwnerKey, tuple[str, ...]] = {}
        self.claim_classes: dict[ClaimRef, frozenset[str]] = {}
        # Of a claim of more than one class, the class of each request (``claim_request_classes``):
        # what tells the part of it the job's containers hold (``classes_of_requests``).
        self.claim_request_classes: dict[ClaimRef, tuple[tuple[str, str], ...]] = {}
        # Who an answer concerns: the pods each owner and claim is named by, and each owner's
        # known children, so a lookup re-evaluates only the pools of the pods under it.
        self.owner_pods: dict[OwnerKey, set[NamespacedKey]] = {}
        self.owner_children: dict[OwnerKey, set[OwnerKey]] = {}
        self.claim_pods: dict[ClaimRef, set[NamespacedKey]] = {}
        # Karpenter's objects (when its API is served): NodePools by name, NodeClaims by name
        # (karpenter_claims, unlike node_claims above, which holds ResourceClaims) and by the node
        # they name, EC2NodeClasses by name.
        self.node_pools: dict[str, NodePoolFacts] = self.held(NODE_POOL_FACTS)
        self.karpenter_claims: dict[str, NodeClaimFacts] = self.held(NODE_CLAIM_FACTS)
        self.karpenter_claims_by_node: dict[str, set[str]] = {}  # node name -> NodeClaims naming it
        self.karpenter_claims_by_provider_id: dict[str, set[str]] = {}
        self.node_classes: dict[str, NodeClassFacts] = self.held(NODE_CLASS_FACTS)
        # The pool key a NodePool's nodes carry; None when the config has no such key (NodePools
        # are then not pools).
        self.node_pool_key: str | None = NODEPOOL_LABEL
        # What NCCL chose, per workload pod whose logs were read (config.transport): a verdict
        # and an evidence line each, never the log. Forgotten with the pod.
        self.transport: dict[NamespacedKey, PodTransport] = {}
        self._versions = itertools.count(1)
        self.pool_versions: dict[Pool, int] = {}
        self.provider_version = 0
        self.workload_versions: dict[NamespacedKey, int] = {}

    # -- change hooks (no-ops here; the operator's store marks pools dirty)

    def _pool_touched(self, pool: Pool | None) -> None:
        """Facts that decide ``pool``'s status changed."""

    def _unpooled_touched(self) -> None:
        """The set of unpooled nodes, or one of them, changed (the unpooled-nodes metric)."""

    def _everything_touched(self) -> None:
        """A change that can concern every pool (which DaemonSets count as the plugin)."""

    def _unscheduled_touched(self) -> None:
        """A pod no node could take changed (the unschedulable count and its Events)."""

    def _classes_touched(self) -> None:
        """A DeviceClass changed: which devices are a fabric's may have, so the slices may need
        reading again (their facts hold what the classes made of them), and every pool's
        messages (which class counts) may change."""
        self._everything_touched()

    def _lookups_touched(self, pods: set[NamespacedKey]) -> None:
        """An owner or a claim became known: the pools of these workload pods may change."""

    def _workload_pod_seen(self, key: NamespacedKey, facts: WorkloadPodFacts | None) -> None:
        """A workload pod's facts changed, or it went (None): the log reader's cue."""

    def _owner_released(self, owner: OwnerKey) -> None:
        """No workload pod's chain of owners goes through ``owner`` any more (the operator's
        outbox forgets the problems it warned about on it)."""

    def _pool_facts_changed(self, pool: Pool | None) -> None:
        if pool is not None and (pool in self.pool_members or self.node_pool_of(pool) is not None):
            self.pool_versions[pool] = next(self._versions)
        elif pool is not None:
            self.pool_versions.pop(pool, None)  # gone: it starts again from a new version
        self._pool_touched(pool)

    def _node_touched(self, node_name: str | None) -> None:
        """A fact of the node itself changed (a ResourceSlice, a provider's pod on it)."""
        if node_name is not None and (node := self.nodes.get(node_name)) is not None:
            self._pool_facts_changed(node.pool)

    def _node_workloads_touched(self, node_name: str | None) -> None:
        """Only the workload pods on the node changed: the node-side status did not."""
        if node_name is not None and (node := self.nodes.get(node_name)) is not None:
            self._pool_touched(node.pool)

    def _workloads_changed(self, keys: Iterable[NamespacedKey]) -> None:
        for key in keys:
            if key in self.workload_pods:
                self.workload_versions[key] = next(self._versions)

    # -- every table: put, remove, and what a fresh LIST no longer has

    def held(self, table: Table[KeyT, FactsT]) -> dict[KeyT, FactsT]:
        """The facts of ``table`` by key (the same dict for the life of the index)."""
        found = self._tables.get(table)
        if found is None:
            found = self._tables[table] = {}
        return cast(dict[KeyT, FactsT], found)

    def put(self, table: Table[Any, FactsT], facts: FactsT) -> bool:
        """Hold ``facts``; False when the same facts were already held (nothing changed)."""
        held = self.held(table)
        key = table.key(facts)
        previous = held.get(key)
        if previous == facts:
            return False
        held[key] = facts
        table.changed(self, key, previous, facts)
        return True

    def remove(self, table: Table[KeyT, Any], key: KeyT) -> bool:
        previous = self.held(table).pop(key, None)
        if previous is None:
            return False
        table.changed(self, key, previous, None)
        return True

    def unlisted(self, table: Table[KeyT, Any], namespace: str | None) -> UnlistedKeys[KeyT]:
        """As a fresh LIST of ``namespace`` (None: every namespace, or a cluster-scoped kind)
        begins: the keys it has yet to name, which is all it may still hold there. The informer
        crosses off each object listed (``Table.key_of``) and ``forget``s the rest at the end.

        They are the keys held, so a listing keeps nothing of its own per object: a key string
        per object, kept to the end (400,000 at 100,000 nodes), took arenas that the facts made
        meanwhile kept after the strings were freed (docs/performance.md, "A listing keeps
        nothing per object")."""
        return UnlistedKeys(key for key in self.held(table) if table.in_scope(key, namespace))

    def forget(self, table: Table[KeyT, Any], keys: Iterable[KeyT]) -> None:
        """Remove each of ``keys`` (what a fresh LIST did not name)."""
        for key in keys:
            self.remove(table, key)

    # -- nodes

    def _node_changed(self, _key: str, previous: NodeFacts | None, current: NodeFacts | None) -> None:
        if previous is not None and (current is None or previous.pool != current.pool):
            if previous.pool is None:
                self.unpooled.discard(previous.name)
                self._unpooled_touched()
            else:
                self._drop_member(previous.pool, previous.name)
                self._pool_facts_changed(previous.pool)
        if current is None:
            return
        if current.pool is not None:
            self.pool_members.setdefault(current.pool, set()).add(current.name)
        else:
            self.unpooled.add(current.name)
            self._unpooled_touched()
        self._pool_facts_changed(current.pool)

    def _drop_member(self, pool: Pool, name: str) -> None:
        _discard(self.pool_members, pool, name)

    def node_exists(self, name: str) -> bool:
        """Whether the cluster has the node ``name``, as far as this index knows (a shard of the
        operator knows of the other shards' nodes without holding them: ``FactStore``)."""
        return name in self.nodes

    def members(self, pool: Pool) -> list[NodeFacts]:
        return [self.nodes[name] for name in self.pool_members.get(pool, ())]

    def pools(self) -> list[Pool]:
        """Every pool: those with a node, and (SPEC: a NodePool is a pool even while it has no
        node) each Karpenter NodePool's."""
        found = dict.fromkeys(self.pool_members)
        if self.node_pool_key is not None:
            found.update(dict.fromkeys(Pool(self.node_pool_key, name) for name in self.node_pools))
        return list(found)

    def configure(self, config: Config) -> None:
        """Which pool key is a NodePool's: Karpenter's label, when the config lists it."""
        self.node_pool_key = NODEPOOL_LABEL if NODEPOOL_LABEL in config.pool_labels else None

    def node_pool_of(self, pool: Pool | None) -> NodePoolFacts | None:
        """The Karpenter NodePool a pool is, if any."""
        if pool is None or pool.key != self.node_pool_key:
            return None
        return self.node_pools.get(pool.value)

    # -- Karpenter: NodePools, NodeClaims, EC2NodeClasses

    def _node_pool_touched(self, name: str | None) -> None:
        if name is not None and self.node_pool_key is not None:
            self._pool_facts_changed(Pool(self.node_pool_key, name))

    def put_node_pool(self, facts: NodePoolFacts) -> bool:
        return self.put(NODE_POOL_FACTS, facts)

    def remove_node_pool(self, name: str) -> bool:
        return self.remove(NODE_POOL_FACTS, name)

    def _node_pool_changed(self, _key: str, previous: NodePoolFacts | None, current: NodePoolFacts | None) -> None:
        changed = current or previous
        self._node_pool_touched(changed.name if changed is not None else None)

    def put_node_claim(self, facts: NodeClaimFacts) -> bool:
        return self.put(NODE_CLAIM_FACTS, facts)

    def remove_node_claim(self, name: str) -> bool:
        return self.remove(NODE_CLAIM_FACTS, name)

    def _node_claim_changed(self, _key: str, previous: NodeClaimFacts | None, current: NodeClaimFacts | None) -> None:
        if previous is not None:
            self._unlink_claim(previous)
        if current is not None:
            if current.node_name is not None:
                self.karpenter_claims_by_node.setdefault(current.node_name, set()).add(current.name)
            if current.provider_id is not None:
                self.karpenter_claims_by_provider_id.setdefault(current.provider_id, set()).add(current.name)
            self._claim_touched(current)

    def _unlink_claim(self, facts: NodeClaimFacts) -> None:
        if facts.node_name is not None:
            _discard(self.karpenter_claims_by_node, facts.node_name, facts.name)
        if facts.provider_id is not None:
            _discard(self.karpenter_claims_by_provider_id, facts.provider_id, facts.name)
        self._claim_touched(facts)

    def _claim_touched(self, facts: NodeClaimFacts) -> None:
        self._node_touched(facts.node_name)
        self._node_pool_touched(facts.node_pool)
        for name in self.karpenter_claims_by_provider_id.get(facts.provider_id or "", ()):
            if (claim := self.karpenter_claims.get(name)) is not None:
                self._node_touched(claim.node_name)

    def claims_of(self, node: NodeFacts) -> list[NodeClaimFacts]:
        """The NodeClaims that name ``node``, by status.nodeName or status.providerID (Karpenter's
        own match), by name."""
        names = set(self.karpenter_claims_by_node.get(node.name, ()))
        if node.provider_id:
            names |= self.karpenter_claims_by_provider_id.get(node.provider_id, set())
        return [self.karpenter_claims[name] for name in sorted(names)]

    def put_node_class(self, facts: NodeClassFacts) -> bool:
        return self.put(NODE_CLASS_FACTS, facts)

    def remove_node_class(self, name: str) -> bool:
        return self.remove(NODE_CLASS_FACTS, name)

    def _node_class_changed(self, _key: str, previous: NodeClassFacts | None, current: NodeClassFacts | None) -> None:
        changed = current or previous
        if changed is not None:
            self._node_class_touched(changed.name)

    def _node_class_touched(self, name: str) -> None:
        for pool in self.node_pools.values():
            if pool.node_class is not None and pool.node_class.name == name:
                self._node_pool_touched(pool.name)

    def node_class_of(self, pool: NodePoolFacts) -> NodeClassFacts | None:
        if pool.node_class is None or pool.node_class.group == "eks.amazonaws.com":
            return None
        return self.node_classes.get(pool.node_class.name)

    # -- pods of the fabrics' plugins

    def _plugin_pod_changed(self, _key: NamespacedKey, previous: PodFacts | None, current: PodFacts | None) -> None:
        self.provider_version = next(self._versions)
        if previous is not None and (current is None or previous.node_name != current.node_name):
            self._node_touched(previous.node_name)
        if current is not None:
            self._node_touched(current.node_name)

    # -- workload pods (those that request an accelerator or a fabric, or set fabric env)

    def _workload_pod_changed(
        self, key: NamespacedKey, previous: WorkloadPodFacts | None, current: WorkloadPodFacts | None
    ) -> None:
        facts = current or previous
        assert facts is not None
        if previous is not None:
            self._unlink_workload_pod(key, previous)
            if current is None or previous.uid != current.uid:
                # Gone, or another pod of the same name: its log is another.
                self.transport.pop(key, None)
        if current is None:
            del self.workload_versions[key]
            self._release_references(facts)
            self._workload_pod_seen(key, None)
            return
        self.workload_versions[key] = next(self._versions)
        self.owner_pods.setdefault(current.owner.key, set()).add(key)
        for claim in current.claims:
            self.claim_pods.setdefault(claim, set()).add(key)
            if claim not in self.claim_classes:
                self._learn_held_claim(claim)
        if current.node_name is not None:
            self.node_workload_pods.setdefault(current.node_name, set()).add(key)
            self._node_workloads_touched(current.node_name)
        elif current.unschedulable is not None:
            self.unscheduled_pods.add(key)
            self._unscheduled_touched()
        if previous is not None:  # after the new links: what the pod still names stays
            self._release_references(previous)
        if current.owner_generation:
            self._saw_owner_generation(current.owner.key, current.owner_generation)
        self._workload_pod_seen(key, current)

    def put_transport(self, key: NamespacedKey, transport: PodTransport) -> bool:
        """Keep what a log read found for the pod ``key``, if it is still the pod that was read
        (same uid): a pod deleted or replaced meanwhile gets nothing. True when it changed."""
        facts = self.workload_pods.get(key)
        if facts is None or facts.uid != transport.uid or self.transport.get(key) == transport:
            return False
        self.transport[key] = transport
        self._workloads_changed((key,))
        self._node_workloads_touched(facts.node_name)
        return True

    def _unlink_workload_pod(self, key: NamespacedKey, facts: WorkloadPodFacts) -> None:
        _discard(self.owner_pods, facts.owner.key, key)
        for claim in facts.claims:
            _discard(self.claim_pods, claim, key)
        if facts.node_name is not None:
            _discard(self.node_workload_pods, facts.node_name, key)
            self._node_workloads_touched(facts.node_name)
        if key in self.unscheduled_pods:
            self.unscheduled_pods.discard(key)
            self._unscheduled_touched()

    def owner_generation(self, key: OwnerKey) -> str:
        """The generation of the owner ``key`` its pods told last ("" if none): what a read of
        it is for (``learn_owner``)."""
        seen = self.owner_generations.get(key)
        return seen[-1] if seen else ""

    def _saw_owner_generation(self, key: OwnerKey, generation: str) -> None:
        """A pod of the owner ``key`` told its ``generation``. One not seen before is a new owner
        of that name: what was read of the name (an old uid) is forgotten, and read again, once
        for that generation however many pods tell it."""
        seen = self.owner_generations.get(key, ())
        if generation in seen:
            return
        self.owner_generations[key] = (*seen, generation)
        if key in self.owner_parents:
            parent = self.owner_parents.pop(key)
            self.owner_uids.pop(key, None)
            if parent is not None:
                _discard(self.owner_children, parent.key, key)
                self._release_owner(parent.key)
        # Judged again, also where no read was answered yet: their lookup is for this generation.
        concerned = self.pods_under(key)
        self._workloads_changed(concerned)
        self._lookups_touched(concerned)

    def learn_owner(
        self, key: OwnerKey, parent: ObjectRef | None, uid: str = "", generation: str | None = None
    ) -> bool:
        """What a read of the owner ``key`` told: its own owner, and (for the kinds whose pods
        name it without one) its uid. A read for a ``generation`` its pods no longer tell last
        (it was answered after a re-created owner's pod came) is not kept; None: an object at
        hand, the owner as it is. True when that changed what was known."""
        if generation is not None and generation != self.owner_generation(key):
            return False
        if key in self.owner_parents and self.owner_parents[key] == parent and self.owner_uids.get(key, "") == uid:
            return False
        previous = self.owner_parents.get(key)
        if previous is not None:
            _discard(self.owner_children, previous.key, key)
        self.owner_parents[key] = parent
        if uid:
            self.owner_uids[key] = uid
        else:
            self.owner_uids.pop(key, None)
        if parent is not None:
            self.owner_children.setdefault(parent.key, set()).add(key)
        if previous is not None and previous.key != (parent.key if parent is not None else None):
            self._release_owner(previous.key)
        concerned = self.pods_under(key)
        self._workloads_changed(concerned)
        self._lookups_touched(concerned)
        return True

    def owner_referenced(self, owner: OwnerKey) -> bool:
        """Whether some workload pod's chain of owners goes through ``owner``: what a lookup
        of it may still be learnt for."""
        return owner in self.owner_pods or owner in self.owner_children

    def claim_referenced(self, claim: ClaimRef) -> bool:
        return claim in self.claim_pods

    def _release_references(self, facts: WorkloadPodFacts) -> None:
        """A pod went (or changed): forget what only it still referenced."""
        self._release_owner(facts.owner.key)
        for claim in facts.claims:
            if claim not in self.claim_pods:
                self.claim_classes.pop(claim, None)
                self.claim_request_classes.pop(claim, None)

    def _release_owner(self, owner: OwnerKey) -> None:
        """Forget ``owner`` and, up its chain, every owner no workload pod's chain goes through
        any more. Chains are short (lookups go 4 deep), but owner references can loop."""
        pending = [owner]
        while pending:
            current = pending.pop()
            if self._has_pods_under(current):
                continue
            parent = self.owner_parents.pop(current, None)
            self.owner_uids.pop(current, None)
            self.owner_generations.pop(current, None)
            # Its children lead to no pod either (they are forgotten with it, a loop included).
            pending.extend(self.owner_children.pop(current, ()))
            if parent is not None:
                _discard(self.owner_children, parent.key, current)
                pending.append(parent.key)
            self._owner_released(current)

    def _has_pods_under(self, owner: OwnerKey) -> bool:
        """Whether some workload pod's chain of owners, as known, goes through ``owner``.

        Depth first, stopping at the first pod: every owner still known has pods under it, so
        this is a walk down one chain, however many children (Jobs of a JobSet) an owner has."""
        if owner in self.owner_pods:
            return True
        seen = {owner}
        stack = [iter(self.owner_children.get(owner, ()))]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
            elif child in self.owner_pods:
                return True
            elif child not in seen:
                seen.add(child)
                stack.append(iter(self.owner_children.get(child, ())))
        return False

    def _learn_held_claim(self, claim: ClaimRef) -> None:
        """A pod names ``claim``, read by the claim watch before any pod named it: learn it now."""
        key = (claim.namespace, claim.name)
        held = self.claims.get(key)
        if held is not None and _watched_claim(key) == claim:  # not a template of that name
            self.learn_claim(claim, held.request_classes)

    def learn_claim(self, claim: ClaimRef, request_classes: tuple[tuple[str, str], ...]) -> bool:
        """What a read of ``claim`` told: the class of each of its requests that gives the pod
        devices (``facts.claim_request_classes``). True when that changed what was known.

        Kept while a workload pod names the claim (``_release_references`` forgets it with the
        last one). The claim watch holds every claim (``CLAIM_FACTS``) and tells only those a
        pod names (``_claim_changed``); one a pod names later is learnt from it then
        (``_learn_held_claim``). A lookup's answer is kept only while a pod names what was read
        (``controller.lookups``); a snapshot's template, read before or after its pods, is kept."""
        device_classes = frozenset(device_class for _, device_class in request_classes)
        by_request = request_classes if len(device_classes) > 1 else None
        if self.claim_classes.get(claim) == device_classes and self.claim_request_classes.get(claim) == by_request:
            return False
        self.claim_classes[claim] = device_classes
        if by_request is not None:
            self.claim_request_classes[claim] = by_request
        else:
            self.claim_request_classes.pop(claim, None)
        concerned = set(self.claim_pods.get(claim, ()))
        self._workloads_changed(concerned)
        self._lookups_touched(concerned)
        return True

    def classes_of_requests(self, claim: ClaimRef, requests: frozenset[str]) -> frozenset[str]:
        """The classes of the known ``claim``'s ``requests`` (a part of it some containers hold)."""
        by_request = self.claim_request_classes.get(claim)
        if by_request is None:  # one class (or none): every request is of it
            return self.claim_classes.get(claim, frozenset())
        return frozenset(device_class for request, device_class in by_request if request in requests)

    def pods_under(self, owner: OwnerKey) -> set[NamespacedKey]:
        """The workload pods whose chain of owners, as known, goes through ``owner``."""
        pods: set[NamespacedKey] = set()
        seen: set[OwnerKey] = set()
        pending = [owner]
        while pending:
            current = pending.pop()
            if current in seen:  # owner references can be made to loop
                continue
            seen.add(current)
            pods |= self.owner_pods.get(current, set())
            pending.extend(self.owner_children.get(current, ()))
        return pods

    # -- ResourceSlices

    def _slice_changed(self, _key: str, previous: SliceFacts | None, current: SliceFacts | None) -> None:
        for changed in (previous, current):
            if changed is not None:
                self._at_once.pop(changed.node_name, None)
        if previous is not None and (current is None or previous.node_name != current.node_name):
            self._drop_slice(previous)
            self._node_touched(previous.node_name)
        if current is not None:
            self.node_slices.setdefault(current.node_name, set()).add(current.name)
            self._node_touched(current.node_name)

    def _drop_slice(self, facts: SliceFacts) -> None:
        _discard(self.node_slices, facts.node_name, facts.name)

    def dra_devices(self, node_name: str, fabric: str, classes: Iterable[str]) -> DraDevices:
        """The node's devices of ``fabric``: those its ``classes`` select in the node's
        ResourceSlices, plus those allocated to ResourceClaims of these classes on the node
        that the driver no longer publishes (DRANET drops an interface it moved into a pod).

        Per driver pool, only the latest generation counts (a driver republishing its pool
        bumps it, and the scheduler ignores older slices), and only once it is complete: as
        many slices of that generation as each of them says in ``resourceSliceCount``. Two
        drivers may name their pools alike: a pool is a (driver, name) pair.

        A pool that is incomplete, invalid or unreadable counts as no devices, and only that
        pool: kube-scheduler skips it and allocates from the node's other pools
        (k8s.io/dynamic-resource-allocation structured/internal/stable/allocator_stable.go,
        allocateOne: ``if pool.IsIncomplete || pool.IsInvalid { continue }``, "there might be
        available devices in other pools"). Why is the node's ``problem`` when the pool holds
        the fabric's devices or may hold them, and a note when it holds none of them.
        """
        slice_names = self.node_slices.get(node_name, ())
        claim_keys = self.node_claims.get(node_name, ())
        if not slice_names and not claim_keys:
            return NO_DRA_DEVICES
        pools: dict[tuple[str, str], list[SliceFacts]] = {}
        for name in slice_names:
            facts = self.slices[name]
            pools.setdefault((facts.driver, facts.pool), []).append(facts)
        # A slice that cannot be read far enough to name its pool may belong to any pool of its
        # driver on the node, the fabric's included: none of that driver's pools counts (its
        # devices cannot be another driver's, so the other drivers' pools still do).
        unplaced = {facts.driver for members in pools.values() for facts in members if facts.pool_unknown}
        count, seen, problems = 0, 0, []
        # A pool's note of the devices DeviceTaintRules taint stands as its (driver, pool) key
        # until the devices allocated and no longer published have added theirs.
        notes: list[str | tuple[str, str]] = []
        rule_tainted: dict[tuple[str, str], dict[str, int]] = {}
        errors: list[ClassError] = []
        published: dict[tuple[str, str], set[str]] = {}
        skipped: set[tuple[str, str]] = set()
        # Skipped pools, decided once the claims are read: (driver, pool) -> why, whether its
        # slices hold the fabric's devices (or may), and whether the scheduler skips it too.
        judged: dict[tuple[str, str], tuple[str, bool, bool]] = {}
        shown: list[str] = []  # why pools that hold the fabric's devices are not counted
        for (driver, pool), members in sorted(pools.items()):
            # The pool name was cleaned when the slice was read; the driver is kept as written
            # (claims name it), so it is cleaned here, where it reaches a message.
            label = f"driver {clean_text(driver, MAX_DRIVER_NAME)} pool {pool}"
            unreadable = sorted(member.problem for member in members if member.problem)
            if unreadable:
                # What the slice holds is not known: it may hold the fabric's devices.
                problems.extend(unreadable)
                shown.extend(unreadable)
                skipped.add((driver, pool))
                continue
            latest = max(member.generation for member in members)
            current = [member for member in members if member.generation == latest]
            older = sorted({member.generation for member in members if member.generation != latest})
            if older:
                stale = ", ".join(map(str, older))
                notes.append(f"{label}: slices of generation {stale} ignored (latest {latest})")
            for member in current:
                if member.went_back_from is not None:
                    notes.append(
                        f"ResourceSlice {member.name}: generation went back from {member.went_back_from} to "
                        f"{member.generation}; counted, as the scheduler counts it"
                    )
                errors.extend(member.count_of(fabric).errors)
            devices = sum(member.devices_of(fabric) for member in current)
            tainted = sum(member.count_of(fabric).tainted for member in current)
            if tainted:
                notes.append(
                    f"{label}: {tainted} device{'s' if tainted != 1 else ''} with a NoSchedule"
                    " or NoExecute taint not counted (the recommended claim tolerates none)"
                )
            by_rule: dict[str, int] = {}
            for member in current:
                for rule_name, rule_devices in member.count_of(fabric).rule_tainted:
                    by_rule[rule_name] = by_rule.get(rule_name, 0) + rule_devices
            if by_rule:
                rule_tainted[(driver, pool)] = by_rule
                notes.append((driver, pool))
            tainted += sum(by_rule.values())
            elsewhere = sum(member.count_of(fabric).other_classes for member in current)
            if elsewhere:
                notes.append(
                    f"{label}: {elsewhere} device{'s' if elsewhere != 1 else ''} only the"
                    " fabric's other DeviceClasses select not counted (the recommended claim names the first)"
                )
            published[(driver, pool)] = {name for member in current for name in member.device_names}
            # A tainted device, or one of another class, is still the fabric's: its node is a
            # target node that advertises less.
            seen += devices + tainted + elsewhere
            counter_sets = [counter_set for member in current for counter_set in member.counter_sets]
            found = _pool_problem(label, latest, current, counter_sets, driver in unplaced)
            if found is not None:
                skipped.add((driver, pool))
                # A device a class failed on may be the fabric's.
                errors_on = any(member.count_of(fabric).errors for member in current)
                in_slices = devices + tainted + elsewhere > 0 or errors_on
                judged[(driver, pool)] = (*found, in_slices)
                continue
            drawing = sum(len(member.count_of(fabric).demands) for member in current)
            if drawing:
                # Devices that draw on shared counters are counted as many as fit at once.
                at_once = self._allocatable_at_once(node_name, (driver, pool, fabric), counter_sets, current)
                if at_once < drawing:
                    notes.append(
                        f"{label}: {drawing} devices draw on shared counters (sharedCounters),"
                        f" {at_once} of them can be allocated at once: {drawing - at_once} not counted"
                    )
                devices -= drawing - at_once
            count += devices
        allocated, held_back, unpublished_tainted = self._allocated_unpublished(
            claim_keys,
            frozenset(classes),
            published,
            lambda driver, pool: (driver, pool) in skipped or driver in unplaced,
        )
        for key, (problem, scheduler_skips, in_slices) in judged.items():
            why = f"{problem}: not counted, as the scheduler skips it" if scheduler_skips else problem
            # Its devices a claim holds count as the fabric's too (DRANET moved them into a
            # pod): "it holds no efa device" was said of a pool whose every device a job held.
            if in_slices or held_back.get(key, 0):
                problems.append(problem)
                shown.append(why)
            else:
                notes.append(f"{why}; it holds no {fabric} device")
        if count + allocated > 0:
            # The node still counts (another pool's devices): the pool skipped is said in every
            # message, Ready=True's too; a node that counts none says it as why (``problem``).
            notes.extend(shown)
        for key, by_rule in sorted(unpublished_tainted.items()):
            if key not in rule_tainted:
                notes.append(key)
            into = rule_tainted.setdefault(key, {})
            for rule_name, rule_devices in by_rule.items():
                into[rule_name] = into.get(rule_name, 0) + rule_devices
            seen += sum(by_rule.values())
        seen += allocated + sum(held_back.values())
        said = tuple(
            note if isinstance(note, str) else self._rule_tainted_note(*note, rule_tainted[note]) for note in notes
        )
        return DraDevices(count + allocated, "; ".join(problems) or None, seen, allocated, said, tuple(errors))

    def _rule_tainted_note(self, driver: str, pool: str, by_rule: Mapping[str, int]) -> str:
        """One pool's note of the devices DeviceTaintRules keep from the count (``by_rule``:
        how many each took): the rules that took most first, at most a few of them named, so a
        rule per device (a health controller's) does not flood the message."""
        devices = sum(by_rule.values())
        ranked = sorted(by_rule.items(), key=lambda item: (-item[1], item[0]))
        rules = [self.taint_rules.get(rule_name) for rule_name, _ in ranked]
        named = [
            rule.describe() if rule is not None else f"DeviceTaintRule {rule_name}"
            for rule, (rule_name, _) in zip(rules[:MAX_NAMED_RULES], ranked, strict=False)
        ]
        more = len(ranked) - len(named)
        if len(ranked) > 1:
            named = [f"{shown}: {taken}" for shown, (_, taken) in zip(named, ranked, strict=False)]
        listed = ", ".join(named) + (f" and {more} more" if more else "")
        caveats = [caveat for rule in rules if rule is not None and (caveat := rule.caveat()) is not None]
        caveat = caveats[0] if len(caveats) == 1 else CAVEAT_OF_SOME_RULES if caveats else None
        # A pool of a slice was cleaned when read, one of a claim only here.
        label = f"driver {clean_text(driver, MAX_DRIVER_NAME)} pool {clean_text(pool, MAX_NAME)}"
        return (
            f"{label}: {devices} device{'s' if devices != 1 else ''} tainted by {listed} not counted"
            f" (the recommended claim tolerates none{'; ' + caveat if caveat else ''})"
        )

    def _allocatable_at_once(
        self, node_name: str, key: tuple[str, str, str], counter_sets: list[CounterSet], current: list[SliceFacts]
    ) -> int:
        """``allocatable_at_once`` for the (driver, pool, fabric) ``key`` of the node, whose
        latest complete slices are ``current``: computed once per change of the node's slices."""
        kept = self._at_once.get(node_name, {})
        at_once = kept.get(key)
        if at_once is None:
            _, _, fabric = key
            demands = [demand for member in current for demand in member.count_of(fabric).demands]
            at_once = kept[key] = allocatable_at_once(counter_sets, demands)
            self._at_once[node_name] = kept
        return at_once

    def _allocated_unpublished(
        self,
        claim_keys: Iterable[NamespacedKey],
        classes: frozenset[str],
        published: dict[tuple[str, str], set[str]],
        skipped: Callable[[str, str], bool],
    ) -> tuple[int, dict[tuple[str, str], int], dict[tuple[str, str], dict[str, int]]]:
        """Devices of ``classes`` allocated to the node's claims that its slices no longer list
        (each once, however many claims share it): how many count, how many of each (driver,
        pool) do not because it is ``skipped`` (its pool is incomplete, invalid or unreadable, so
        none of its devices counts), and per (driver, pool) per rule those a DeviceTaintRule
        taints. A rule matches such a device by the driver, pool and name its allocation result
        gives, as it would in a slice (KEP-5055: "allocated devices where a DeviceTaintRule
        causes eviction when there is no ResourceSlice"), so none of them counts while a job
        holds it either."""
        unpublished = set()
        for key in claim_keys:
            for device in self.claims[key].devices:
                if device.device_class in classes and device.device not in published.get(
                    (device.driver, device.pool), ()
                ):
                    unpublished.add((device.driver, device.pool, device.device))
        rules = self.class_view().taint_rules
        counted = 0
        held_back: dict[tuple[str, str], int] = {}
        tainted: dict[tuple[str, str], dict[str, int]] = {}
        of_pool: dict[tuple[str, str], SliceRules | None] = {}  # gathered once per (driver, pool)
        for driver, pool, name in unpublished:
            if skipped(driver, pool):
                held_back[(driver, pool)] = held_back.get((driver, pool), 0) + 1
                continue
            if (driver, pool) not in of_pool:
                of_pool[(driver, pool)] = rules.for_slice(driver, pool)
            pool_rules = of_pool[(driver, pool)]
            rule = pool_rules.first_match(name) if pool_rules is not None else None
            if rule is None:
                counted += 1
            else:
                by_rule = tainted.setdefault((driver, pool), {})
                by_rule[rule.name] = by_rule.get(rule.name, 0) + 1
        return counted, held_back, tainted

    # -- DeviceClasses

    def class_view(self) -> DeviceClassView:
        """The DeviceClasses and DeviceTaintRules as they stand, with their version: what
        slices are read with."""
        if self._class_view is None:
            self._class_view = DeviceClassView(
                next(self._versions), dict(self.device_classes), TaintRules(self.taint_rules.values())
            )
        return self._class_view

    def put_device_class(self, facts: DeviceClassFacts) -> bool:
        return self.put(DEVICE_CLASS_FACTS, facts)

    def remove_device_class(self, name: str) -> bool:
        return self.remove(DEVICE_CLASS_FACTS, name)

    def _device_class_changed(
        self, _key: str, _previous: DeviceClassFacts | None, _current: DeviceClassFacts | None
    ) -> None:
        self._view_changed()

    def _view_changed(self) -> None:
        """A DeviceClass or a DeviceTaintRule changed: the view slices are read with is new."""
        self._class_view = None  # built when next read (class_view)
        self.provider_version = next(self._versions)  # every pool's messages read the classes
        self._classes_touched()

    # -- DeviceTaintRules

    def _taint_rule_changed(self, _key: str, _previous: TaintRuleFacts | None, _current: TaintRuleFacts | None) -> None:
        # Which devices count changes as a class's selectors would: the slices are read again.
        self._view_changed()

    # -- ResourceClaims

    def put_claim(self, facts: ClaimFacts) -> bool:
        return self.put(CLAIM_FACTS, facts)

    def remove_claim(self, namespace: str, name: str) -> bool:
        return self.remove(CLAIM_FACTS, (namespace, name))

    def _claim_changed(self, key: NamespacedKey, previous: ClaimFacts | None, current: ClaimFacts | None) -> None:
        if previous is not None and previous.node_name is not None:
            _discard(self.node_claims, previous.node_name, key)
            self._node_touched(previous.node_name)
        if current is not None and current.node_name is not None:
            self.node_claims.setdefault(current.node_name, set()).add(key)
            self._node_touched(current.node_name)
        # Only what a pod names is learnt: the claim controller updates a pod's claim after
        # the pod went, before deleting it, and a claim no workload pod names concerns none.
        # A claim deleted while a pod still names it stays as last read, until that pod goes.
        claim = _watched_claim(key)
        if current is not None and claim in self.claim_pods:
            self.learn_claim(claim, current.request_classes)

    # -- DaemonSets

    def _daemon_set_changed(
        self, _key: NamespacedKey, _previous: DaemonSetFacts | None, _current: DaemonSetFacts | None
    ) -> None:
        self.provider_version = next(self._versions)
        # A plugin DaemonSet appearing changes which pods count, and the list every status shows.
        self._everything_touched()


def _watched_claim(key: NamespacedKey) -> ClaimRef:
    """How a pod names the ResourceClaim the claim watch holds under ``key``."""
    return ClaimRef("ResourceClaim", *key)


def _name(
    facts: NodeFacts | SliceFacts | DeviceClassFacts | TaintRuleFacts | NodePoolFacts | NodeClaimFacts | NodeClassFacts,
) -> str:
    return facts.name


def _namespaced(facts: PodFacts | WorkloadPodFacts | DaemonSetFacts | ClaimFacts) -> NamespacedKey:
    return (facts.namespace, facts.name)


NODE_FACTS: Table[str, NodeFacts] = Table("nodes", False, _name, FactIndex._node_changed)
PLUGIN_POD_FACTS: Table[NamespacedKey, PodFacts] = Table(
    "plugin pods", True, _namespaced, FactIndex._plugin_pod_changed
)
WORKLOAD_POD_FACTS: Table[NamespacedKey, WorkloadPodFacts] = Table(
    "workload pods", True, _namespaced, FactIndex._workload_pod_changed
)
SLICE_FACTS: Table[str, SliceFacts] = Table("resourceslices", False, _name, FactIndex._slice_changed)
DAEMON_SET_FACTS: Table[NamespacedKey, DaemonSetFacts] = Table(
    "daemonsets", True, _namespaced, FactIndex._daemon_set_changed
)
# Karpenter's objects (SPEC "Elastic pools"), cluster-scoped.
NODE_POOL_FACTS: Table[str, NodePoolFacts] = Table("nodepools", False, _name, FactIndex._node_pool_changed)
NODE_CLAIM_FACTS: Table[str, NodeClaimFacts] = Table("nodeclaims", False, _name, FactIndex._node_claim_changed)
NODE_CLASS_FACTS: Table[str, NodeClassFacts] = Table("ec2nodeclasses", False, _name, FactIndex._node_class_changed)
DEVICE_CLASS_FACTS: Table[str, DeviceClassFacts] = Table("deviceclasses", False, _name, FactIndex._device_class_changed)
TAINT_RULE_FACTS: Table[str, TaintRuleFacts] = Table("devicetaintrules", False, _name, FactIndex._taint_rule_changed)
CLAIM_FACTS: Table[NamespacedKey, ClaimFacts] = Table("resourceclaims", True, _namespaced, FactIndex._claim_changed)


def _pool_problem(
    label: str, generation: int, current: list[SliceFacts], counter_sets: list[CounterSet], unplaced: bool
) -> tuple[str, bool] | None:
    """Why a pool whose slices of its latest ``generation`` are ``current`` (``label`` names it)
    is not counted, and whether the scheduler skips it too; None when it counts. ``unplaced``: a
    slice of its driver on the node names no pool it can be told from (``FactIndex.dra_devices``):
    the scheduler reads such a pool, fabriccap cannot tell what is in it."""
    problem = _skipped_by_the_scheduler(label, generation, current, counter_sets)
    if problem is not None:
        return problem, True
    if unplaced:
        return f"{label} not counted: a ResourceSlice of its driver whose pool cannot be read may belong to it", False
    return None


def _skipped_by_the_scheduler(
    label: str, generation: int, current: list[SliceFacts], counter_sets: list[CounterSet]
) -> str | None:
    """Why the scheduler skips the pool (incomplete or invalid), or None."""
    duplicate = _duplicate_device(member.device_names for member in current)
    if duplicate is not None:
        # The scheduler marks such a pool invalid and skips it (k8s.io/dynamic-resource-
        # allocation structured/internal/stable/pools_stable.go, poolIsInvalid: "duplicate
        # device name %s"; allocator_stable.go allocateOne: continue).
        return f"{label} is invalid: duplicate device name {clean_text(duplicate, MAX_DEVICE_NAME)}"
    # Complete only with exactly as many slices as each says (pools_stable.go GatherPools:
    # ``IsIncomplete = len(pool.Slices) != pool.Slices[0].Spec.Pool.ResourceSliceCount``; the
    # incubating allocator compares every slice): more slices than the count, or slices that
    # disagree on it, are incomplete too; with a disagreement the scheduler's verdict depends
    # on the order it lists them, so none is taken.
    said = sorted({member.slice_count for member in current})
    present = len(current)
    slices = f"{label} has {present} ResourceSlices of generation {generation}"
    if len(said) > 1:
        return f"{slices} that disagree on resourceSliceCount ({', '.join(map(str, said))})"
    if present < said[0]:
        return f"{label} has {present} of {said[0]} ResourceSlices of generation {generation}"
    if present > said[0]:
        return f"{slices}, more than its resourceSliceCount {said[0]}"
    invalid = invalid_counters(counter_sets, (ref for member in current for ref in member.counter_references))
    if invalid is not None:
        # Invalid to the scheduler, as for a duplicate device name
        # (structured/internal/incubating/pools_incubating.go, buildPool).
        return f"{label} is invalid: {invalid}"
    return None


def _duplicate_device(slices: Iterable[tuple[str, ...]]) -> str | None:
    """A device name listed twice across the slices of one pool's generation, if any."""
    names: set[str] = set()
    for device_names in slices:
        for name in device_names:
            if name in names:
                return name
            names.add(name)
    return None


def _discard(index: dict[K, set[V]], key: K, member: V) -> None:
    """Remove ``member`` from ``index[key]``, and the key once its set is empty."""
    members = index.get(key)
    if members is not None:
        members.discard(member)
        if not members:
            del index[key]
