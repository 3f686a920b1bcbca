"""Object bodies -> small immutable facts.

A realistic EKS Node body is 10-20 KB (images, managedFields, conditions); the facts the
evaluation needs are a few dozen bytes. Everything downstream (the operator's memory, the
dirty-pool detection, the evaluation) works on these facts only, so a heartbeat that changes
nothing here changes nothing anywhere.

Every string a fact keeps from a body (names, label values, owner kinds, scheduler messages)
is cleaned and bounded here (``core.text.clean_text``): whoever creates a pod or labels a node
chooses it, and what the facts hold is what statuses, Events, metric labels and logs repeat.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from fabriccap.core.api import ConditionStatus
from fabriccap.core.config import INSTANCE_TYPE_LABEL, Config, Source
from fabriccap.core.counters import CounterError, CounterSet, Reference, read_counter_sets, read_demand, references
from fabriccap.core.quantity import parse_quantity, shown_value
from fabriccap.core.references import (
    INVALID_API_VERSION,
    INVALID_NAME,
    RefusalHook,
    RefusedReference,
    is_object_name,
    reference_problem,
    shown_reference,
)
from fabriccap.core.selection import (
    NO_DEVICES,
    DeviceClassFacts,
    DeviceClassView,
    DeviceCount,
    DeviceSelector,
    FabricSelection,
    TaintRuleFacts,
    blocking_taint,
    fabric_selection,
    implicit_resource,
)
from fabriccap.core.sharing import Shared, shared_text
from fabriccap.core.text import (
    MAX_NAME,
    MAX_NAMESPACE,
    MAX_UID,
    clean_text,
)
from fabriccap.core.workload_kinds import OWNER_LABELS, group_kind, group_of

# What a decoded object is checked against: a dict first, as every decoded body's objects
# are. ``isinstance`` against the Mapping ABC alone is 7x the cost (103 against 15 ns), and a
# pod's facts check it about 18 times.
MAPPINGS = (dict, Mapping)

# What pods are read by (``FactsExtractor.pod_marks`` lists them all): a plugin pod's owner, the
# keys a claim is named by, and the variables that say a pod means to use libfabric.
DAEMON_SET_KIND = "DaemonSet"
CLAIM_TEMPLATE_NAME_KEY = "resourceClaimTemplateName"
CLAIM_NAME_KEY = "resourceClaimName"
CLAIM_NAME_KEYS = (CLAIM_TEMPLATE_NAME_KEY, CLAIM_NAME_KEY)
LIBFABRIC_PROVIDER_ENV = "FI_PROVIDER"
NCCL_NET_ENV = "NCCL_NET"
# What a Node's status heartbeat moves (the kubelet's, the EKS node monitoring agent's), and
# the keys ``FactsExtractor.node`` reads its facts by: one must never be the other.
NODE_HEARTBEAT_KEYS = ("lastHeartbeatTime", "time", "resourceVersion")
NODE_READ_KEYS = (
    *("metadata", "name", "labels", "spec", "unschedulable", "providerID"),
    *("status", "capacity", "allocatable", "conditions", "type"),
)


def object_name(value: Any) -> str:
    """An object's name as the facts keep it, cleaned and bounded: every lookup by name (a
    deletion, a fresh LIST's keys, a snapshot's checks) goes through this, so a name that
    needed cleaning (only a hand-made snapshot has one) still finds its facts."""
    return clean_text(value if value is not None else "", MAX_NAME)


def named_metadata(body: Mapping[str, Any], kind: str) -> tuple[Mapping[str, Any], str]:
    """The metadata of a ``kind`` object the facts keep by its name, and that name as
    ``object_name`` keeps it. FactsError for one without a name: two would take each other's
    place (only a hand-made snapshot has one; an API server names every object)."""
    metadata = _mapping(body, "metadata", kind)
    name = metadata.get("name")
    # Judged as kept: a name of nothing but escapes or format characters is cleaned to "" too.
    kept = object_name(name) if isinstance(name, str) else ""
    if not kept:
        raise FactsError(f"{kind} without metadata.name")
    return metadata, kept


def object_namespace(value: Any) -> str:
    # A cluster has few namespaces and each is in many facts: one copy (core.sharing).
    return shared_text(clean_text(value if value is not None else "", MAX_NAMESPACE))


def node_reference(value: Any) -> str:
    """A node's name as the facts keep it, one copy for the Node's facts and every pod bound to it."""
    return shared_text(object_name(value))


# The pools, quantities and label sets that many nodes and pods repeat, one copy each.
_shared_pools: Shared[Pool] = Shared()
_shared_pairs: Shared[tuple[tuple[str, Any], ...]] = Shared()


class FactsError(ValueError):
    """An object body that cannot be turned into facts; the message names it."""


class IgnoredObjectError(FactsError):
    """A well-formed object that carries no facts fabriccap can use (a ResourceSlice of
    devices shared by many nodes); the message says why it is left out."""


# The largest count a node's resource may carry and still be believed: the largest integer the
# CRD's status fields, kubectl's printer columns (int32) and every consumer can hold. The API
# server accepts quantities far beyond it (`1e30`); such a node counts as not advertising.
MAX_DEVICE_COUNT = 2**31 - 1


class Pool(NamedTuple):
    key: str
    value: str


class UnusableQuantity(NamedTuple):
    resource: str
    problem: str  # e.g. "status.allocatable[vpc.amazonaws.com/efa]: '1e40' is out of range"
    # Not a quantity at all: no API server stores that, so in a snapshot it is an input error.
    malformed: bool


@dataclass(frozen=True, slots=True)
class NodeFacts:
    name: str
    pool: Pool | None
    instance_type: str | None
    cordoned: bool
    # Only the resources some profile cares about (fabric and accelerator resources), as sorted pairs.
    capacity: tuple[tuple[str, int], ...]
    allocatable: tuple[tuple[str, int], ...]
    # Only labels some profile's acceleratorLabels mention, as sorted (key, value) pairs.
    labels: tuple[tuple[str, str], ...]
    # Each quantity that could not be used: it counts as 0.
    unusable: tuple[UnusableQuantity, ...] = ()
    # Condition Ready is True. A stopped kubelet's node keeps its last allocatable: not Ready, it
    # leaves the gate set instead of being judged by stale numbers.
    ready: bool = True
    provider_id: str | None = None  # spec.providerID (aws:///us-west-2a/i-..., azure://...)

    def capacity_of(self, resource: str) -> int:
        return _lookup(self.capacity, resource)

    def allocatable_of(self, resource: str) -> int:
        return _lookup(self.allocatable, resource)

    def has_label(self, key: str, value: str) -> bool:
        return (key, value) in self.labels

    def problem_with(self, resource: str) -> str | None:
        """Why this node's quantity of ``resource`` could not be used, if it could not."""
        problems = [entry.problem for entry in self.unusable if entry.resource == resource]
        return "; ".join(problems) if problems else None


def _lookup(pairs: tuple[tuple[str, int], ...], resource: str) -> int:
    for name, amount in pairs:
        if name == resource:
            return amount
    return 0


class SelectorTerm(NamedTuple):
    """One requirement of a required node-affinity term: key, operator, values."""

    key: str
    operator: str
    values: tuple[str, ...]


# Node taints as the DaemonSet controller weighs them (k8s.io/kubernetes v1.35.4
# pkg/controller/daemon/daemon_controller.go ``predicates``): a pod that does not tolerate a
# NoSchedule or NoExecute taint is not placed; PreferNoSchedule keeps no daemon pod off a node.
DAEMON_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# A taint's key is a qualified name (253 + 1 + 62), its value a label value: what users write.
MAX_TAINT_TEXT = 316
MAX_TOLERATIONS = 100


class Taint(NamedTuple):
    """A node taint (core/v1 Taint), cleaned and bounded."""

    key: str
    value: str
    effect: str

    def describe(self) -> str:
        """As kubectl writes it: ``key=value:Effect``, or ``key:Effect`` without a value."""
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


class Toleration(NamedTuple):
    """A pod's toleration (core/v1 Toleration), cleaned and bounded as taints are, so the two compare."""

    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """core/v1 ``Toleration.ToleratesTaint`` (k8s.io/api v0.35.4 core/v1/toleration.go): an
        empty effect matches every effect and an empty key every key; Exists matches any value,
        Equal (or no operator) the same value. ``Lt``/``Gt`` compare numbers only under the alpha
        gate TaintTolerationComparisonOperators (off by default in 1.35), which fabriccap cannot
        see: counted as not tolerating (fail closed: the pool is held, not published Ready)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


def _taint_text(value: Any) -> str:
    return clean_text(value if isinstance(value, str) else "", MAX_TAINT_TEXT)


def blocking_node_taint(entry: Any) -> Taint | None:
    """One ``taints[]`` entry of a node (or of the template a node is made from) as a Taint, if
    its effect keeps a DaemonSet's pod off the node (DAEMON_BLOCKING_EFFECTS); None otherwise."""
    if not isinstance(entry, MAPPINGS) or entry.get("effect") not in DAEMON_BLOCKING_EFFECTS:
        return None
    return Taint(_taint_text(entry.get("key")), _taint_text(entry.get("value")), str(entry["effect"]))


def _tolerations(raw: Any) -> tuple[Toleration, ...]:
    """A pod template's tolerations, the first MAX_TOLERATIONS: a list cut short can only
    tolerate less, so the cut errs closed."""
    return tuple(
        Toleration(
            _taint_text(entry.get("key")),
            _taint_text(entry.get("operator")),
            _taint_text(entry.get("value")),
            _taint_text(entry.get("effect")),
        )
        for entry in (raw[:MAX_TOLERATIONS] if isinstance(raw, list) else ())
        if isinstance(entry, MAPPINGS)
    )


# The tolerations the DaemonSet controller gives every pod it makes (k8s.io/kubernetes v1.35.4
# pkg/controller/daemon/util/daemonset_util.go AddOrUpdateDaemonPodTolerations, called by
# NewPod before its predicates): node conditions only, never a user's taint. The last one only
# for a pod on the host network.
DAEMON_POD_TOLERATIONS = tuple(
    Toleration(f"node.kubernetes.io/{key}", "Exists", "", effect)
    for key, effect in (
        ("not-ready", "NoExecute"),
        ("unreachable", "NoExecute"),
        ("disk-pressure", "NoSchedule"),
        ("memory-pressure", "NoSchedule"),
        ("pid-pressure", "NoSchedule"),
        ("unschedulable", "NoSchedule"),
    )
)
HOST_NETWORK_TOLERATION = Toleration("node.kubernetes.io/network-unavailable", "Exists", "", "NoSchedule")


@dataclass(frozen=True, slots=True)
class DaemonSetFacts:
    namespace: str
    name: str
    labels: tuple[tuple[str, str], ...]
    # Its pod template's labels: selectors often name these, not the DaemonSet's own
    # (the RDMA shared device plugin's DaemonSet carries ds-owner, its pods app=rdma-shared-dp).
    template_labels: tuple[tuple[str, str], ...] = ()
    # Where its pods may run: the template's nodeSelector, and its required node affinity's
    # terms (ORed; each term's requirements ANDed). Empty: anywhere.
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: tuple[tuple[SelectorTerm, ...], ...] = ()
    # Its pod template's tolerations (the first MAX_TOLERATIONS), and whether its pods use the
    # host network (the DaemonSet controller then adds one toleration more).
    tolerations: tuple[Toleration, ...] = ()
    host_network: bool = False

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}/{self.name}"

    def would_run_on(self, labels: Mapping[str, str]) -> bool:
        """Whether its node selector and required node affinity admit a node with ``labels``
        (its taints are ``untolerated``'s). A term with only matchFields, which name a node, says
        nothing about labels and admits."""
        if any(labels.get(key) != value for key, value in self.node_selector):
            return False
        return not self.affinity or any(all(_term_matches(term, labels) for term in terms) for terms in self.affinity)

    def untolerated(self, taints: Iterable[Taint]) -> Taint | None:
        """The first of a node's ``taints`` (NoSchedule and NoExecute ones: ``blocking_node_taint``)
        its pods do not tolerate, or None: the DaemonSet controller places no pod on a node with
        one (daemon_controller.go ``predicates``, with the tolerations ``NewPod`` adds)."""
        own = (*self.tolerations, *DAEMON_POD_TOLERATIONS, *((HOST_NETWORK_TOLERATION,) if self.host_network else ()))
        return next((taint for taint in taints if not any(held.tolerates(taint) for held in own)), None)


def _term_matches(term: SelectorTerm, labels: Mapping[str, str]) -> bool:
    """A NodeSelectorRequirement against node labels, as the scheduler's nodeaffinity plugin does."""
    value = labels.get(term.key)
    if term.operator == "In":
        return value is not None and value in term.values
    if term.operator == "NotIn":
        return value is None or value not in term.values
    if term.operator == "Exists":
        return value is not None
    if term.operator == "DoesNotExist":
        return value is None
    if term.operator in ("Gt", "Lt") and value is not None and len(term.values) == 1:
        try:
            have, bound = int(value), int(term.values[0])
        except ValueError:
            return False
        return have > bound if term.operator == "Gt" else have < bound
    return False


@dataclass(frozen=True, slots=True)
class SliceFacts:
    """One ResourceSlice of a node: which driver pool it belongs to, and what each DRA fabric's
    classes make of its devices. A DRANET slice of a p5 node carries 34 devices with a dozen
    attributes each; this keeps their names (shared across nodes) and a count per fabric."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int  # the pool's resourceSliceCount
    node_name: str
    # (fabric, what its classes make of the devices), by fabric.
    devices: tuple[tuple[str, DeviceCount], ...]
    # Every device's name: a device allocated to a claim counts from the claim only while its
    # driver no longer publishes it (core.index).
    device_names: tuple[str, ...] = ()
    # Partitionable devices (core.counters): the counter sets this slice defines for its pool,
    # and what its devices, counted or not, refer to (the scheduler checks every device's).
    counter_sets: tuple[CounterSet, ...] = ()
    counter_references: tuple[Reference, ...] = ()
    # Why the slice cannot be read (its pool then counts as no devices); the node is known,
    # so the pool's message can say why instead of showing a bare 0.
    problem: str | None = None
    # An unreadable slice whose spec.pool.name could not be read: ``pool`` only names it, and
    # the slice may belong to any pool of its driver (core.index).
    pool_unknown: bool = False
    # The generation this slice had before the update that lowered it (core.index): counted as
    # the scheduler counts it, and said.
    went_back_from: int | None = None
    # The per-slice memo (FactsExtractor.resource_slice): the body's resourceVersion and the
    # classes' signature it was read under. Not part of what the slice says.
    resource_version: str = dataclasses.field(default="", compare=False)
    read_with: Hashable = dataclasses.field(default=None, compare=False)

    def count_of(self, fabric: str) -> DeviceCount:
        for name, count in self.devices:
            if name == fabric:
                return count
        return NO_DEVICES

    def devices_of(self, fabric: str) -> int:
        return self.count_of(fabric).selected


class AllocatedDevice(NamedTuple):
    """One device a ResourceClaim was allocated (``status.allocation.devices.results``)."""

    driver: str
    pool: str
    device: str
    device_class: str  # the class its request named


@dataclass(frozen=True, slots=True)
class ClaimFacts:
    """A ResourceClaim as the claim watch read it: once allocated, its devices of the DRA
    fabrics' classes and their node; and the class of each request that gives its pod devices,
    for the workload view of the pods that name it."""

    namespace: str
    name: str
    # The node the allocation is bound to (``status.allocation.nodeSelector``, as the scheduler
    # writes it for a node's own devices); None when it names no single node.
    node_name: str | None
    devices: tuple[AllocatedDevice, ...]
    # Every class its requests name (spec.devices.requests), adminAccess requests' aside.
    device_classes: frozenset[str] = frozenset()
    # (request, DeviceClass) of the requests that give its pod devices (``claim_request_classes``):
    # what ``FactIndex.learn_claim`` keeps while a workload pod names the claim.
    request_classes: tuple[tuple[str, str], ...] = ()


class ObjectRef(NamedTuple):
    """A namespaced object by kind and name; the uid when known (an Event on it needs one)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @classmethod
    def shared(cls, api_version: str, kind: str, namespace: str, name: str, uid: str = "") -> ObjectRef:
        """An owner many pods name (a Job's eight, a Deployment's hundreds), with one copy of
        each string however many pods hold it (core.sharing)."""
        return cls(
            shared_text(api_version), shared_text(kind), shared_text(namespace), shared_text(name), shared_text(uid)
        )

    @property
    def group_kind(self) -> str:
        """``Kind.group`` (core.workload_kinds): a Volcano Job is not a batch Job."""
        return group_kind(group_of(self.api_version), self.kind)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group_kind, self.namespace, self.name)


class ClaimRef(NamedTuple):
    """A pod's ResourceClaim, by the object that says which devices it asks for."""

    kind: str  # "ResourceClaimTemplate" or "ResourceClaim"
    namespace: str
    name: str


class InitClaim(NamedTuple):
    """A claim of the pod that plain init containers hold, all of it or in part: the
    scheduler fits it, but kubelet hands a claim's devices only to the containers that name
    it (kubernetes/kubernetes pkg/kubelet/cm/dra/manager.go ``GetResources``, from the
    container's ``resources.claims``; for the scheduler's claim of extended resources, from
    the pod's ``status.extendedResourceClaimStatus.requestMappings``)."""

    claim: ClaimRef
    # The claim's requests an app container or a sidecar holds; empty: none does, the whole
    # claim is the init containers'.
    job_requests: frozenset[str]


# The most containers of one pod whose logs are read (each up to transport.maxBytes): a node
# has at most 16 accelerator devices (trn1.32xlarge's Neuron devices; 8 GPUs on p4d/p5), and
# NCCL runs one process per device, so a real pod has fewer accelerator containers than that.
MAX_READ_CONTAINERS = 16


class ContainerRun(NamedTuple):
    """One accelerator container of a running pod, as far as its log goes: each restart starts
    a new log, which is read again (docs/transport.md)."""

    name: str
    restarts: int  # containerStatuses[].restartCount
    started_at: str  # state.running.startedAt (RFC 3339): the read schedule counts from it


@dataclass(frozen=True, slots=True)
class WorkloadPodFacts:
    """A pod that requests an accelerator or a fabric, claims devices, or sets fabric
    environment. Every other pod leaves nothing in memory."""

    namespace: str
    name: str
    node_name: str | None
    # The effective requests (as the scheduler computes them: containers, init containers,
    # sidecars, overhead) of the resources some profile cares about, above 0 only, sorted.
    requests: tuple[tuple[str, int], ...]
    claims: tuple[ClaimRef, ...]
    intent: tuple[str, ...]  # the fabrics whose environment the pod sets
    # The nearest owner the pod itself tells: its controller, or the JobSet its labels name
    # (a JobSet's Jobs are of no interest), else the pod.
    owner: ObjectRef
    # PodScheduled=False with reason Unschedulable: the scheduler's message, shortened.
    unschedulable: str | None = None
    uid: str = ""
    # While transport is read (config.transport): the pod's running accelerator containers,
    # whose logs hold NCCL's choice. Empty otherwise, so a restart changes no fact.
    containers: tuple[ContainerRun, ...] = ()
    # Running accelerator containers past the first MAX_READ_CONTAINERS (by name): never read,
    # so the pod's transport is never ``fabric`` (core.verdicts.combine fails closed).
    unread_containers: int = 0
    # Of ``requests``, the resources that only plain init containers (not sidecars) ask for,
    # sorted; empty for nearly every pod. The scheduler reserves them, but the job's own
    # containers hold none of them (``requested_by_app``).
    init_only: tuple[str, ...] = ()
    # Of ``claims``, those that plain init containers hold and the job's own containers hold
    # none or only part of (``job_requests_of``); empty for nearly every pod.
    init_claims: tuple[InitClaim, ...] = ()
    # For an owner named by a label with no uid (a LeaderWorkerSet): the uid of the pod's
    # controller when the owner controls it itself (``OwnerLabel.namesake_controller``: the
    # LWS's leader StatefulSet). A new one is a new owner of the same name, whose uid is read
    # again (core.index ``owner_generation``). "" for every other pod.
    owner_generation: str = ""

    def request_of(self, resource: str) -> int:
        return _lookup(self.requests, resource)

    def job_requests_of(self, claim: ClaimRef) -> frozenset[str] | None:
        """The requests of ``claim`` that an app container or a sidecar holds; None: all of
        them (the claim is the job's, as nearly every claim is); empty: none."""
        for held in self.init_claims:
            if held.claim == claim:
                return held.job_requests
        return None

    def requested_by_app(self, resource: str) -> bool:
        """Whether an app container or a sidecar requests ``resource``: whether the processes
        the job runs hold it (the fabric's, an accelerator). A plain init container's devices
        end with it: kubelet's device
        manager hands them on only to a later container that requests the same resource
        (kubernetes/kubernetes pkg/kubelet/cm/devicemanager/manager.go, ``ManagerImpl.Allocate``
        and ``allocateContainerResources``, which allocates each container from its own
        ``resources.limits``, reusing an init container's devices first)."""
        return self.request_of(resource) > 0 and resource not in self.init_only


@dataclass(frozen=True, slots=True)
class PodFacts:
    namespace: str
    name: str
    node_name: str | None
    daemon_set: str  # name of the owning DaemonSet, in the pod's namespace
    ready: bool


class FactsExtractor:
    """Turns object bodies into facts, knowing from the config which fields matter."""

    def __init__(self, config: Config, on_refused: RefusalHook | None = None) -> None:
        self.config = config
        # Told of each owner reference (or claim) not followed because no object can be named
        # so (core.references): the operator logs each cause once.
        self.on_refused = on_refused
        fabrics = config.enabled_fabrics
        self.resources: frozenset[str] = frozenset(
            [fabric.resource for fabric in fabrics]
            + [resource for fabric in fabrics for resource in fabric.target_nodes.accelerator_resources]
        )
        self.label_keys: frozenset[str] = frozenset(
            [key for fabric in fabrics for key, _ in fabric.target_nodes.accelerator_label_pairs]
            + [key for fabric in fabrics for key, _ in fabric.device_plugin.platform_label_pairs]
        )
        self.plugin_namespaces: frozenset[str] = frozenset(config.plugin_namespaces)
        self.dra_fabrics = tuple(fabric for fabric in fabrics if fabric.uses(Source.DRA))
        # The DeviceClasses worth keeping: those a profile names, and those that map a profile's
        # resource (KEP-5004: the scheduler then serves `resource: N` from their devices).
        self.device_class_names: frozenset[str] = frozenset(
            name for fabric in self.dra_fabrics for name in fabric.dra.device_class_names
        )
        self.dra_resources: frozenset[str] = frozenset(fabric.resource for fabric in self.dra_fabrics)
        # A pod asking for a class's implicit extended resource asks for its devices (KEP-5004).
        self.resources |= {implicit_resource(name) for name in self.device_class_names}
        self.selector = DeviceSelector()
        # The classes last read with, what they select with, and its signature.
        self._selections: tuple[DeviceClassView, dict[str, FabricSelection], Hashable] | None = None

    def node(self, body: Mapping[str, Any]) -> NodeFacts:
        metadata = _mapping(body, "metadata", "Node")
        raw_name = metadata.get("name")
        if not isinstance(raw_name, str) or not raw_name:
            raise FactsError("Node without metadata.name")
        name = node_reference(raw_name)
        labels = metadata.get("labels") or {}
        if not isinstance(labels, MAPPINGS):
            raise FactsError(f"Node {name}: metadata.labels is not a mapping")
        spec = body.get("spec") or {}
        status = body.get("status") or {}
        if not isinstance(spec, MAPPINGS) or not isinstance(status, MAPPINGS):
            raise FactsError(f"Node {name}: spec/status is not a mapping")
        unusable: list[UnusableQuantity] = []
        provider_id = spec.get("providerID")
        return NodeFacts(
            name=name,
            pool=self._pool_of(labels),
            instance_type=_shared_label_value(labels.get(INSTANCE_TYPE_LABEL)),
            cordoned=bool(spec.get("unschedulable")),
            capacity=self._resources(name, "capacity", status.get("capacity"), unusable),
            allocatable=self._resources(name, "allocatable", status.get("allocatable"), unusable),
            labels=_shared_pairs(
                tuple(sorted((key, str(labels[key])) for key in self.label_keys if labels.get(key) is not None))
            ),
            unusable=tuple(sorted(unusable)),
            ready=_condition_true(status.get("conditions"), "Ready"),
            provider_id=provider_id[:MAX_MESSAGE] if isinstance(provider_id, str) and provider_id else None,
        )

    def node_unread_keys(self) -> frozenset[str]:
        """What a Node's status heartbeat moves that ``node`` reads nowhere: the conditions'
        ``lastHeartbeatTime``, the writer's managedFields ``time``, the object's version. A
        line that differs from the last applied only in their values has the same facts
        (``kube.unread``). A key ``node`` reads by that name (a label key in the config) is
        left out: its value would then be read."""
        read = {*self.label_keys, *self.config.pool_labels, INSTANCE_TYPE_LABEL, *self.resources, *NODE_READ_KEYS}
        return frozenset(key for key in NODE_HEARTBEAT_KEYS if key not in read)

    def _pool_of(self, labels: Mapping[str, Any]) -> Pool | None:
        for key in self.config.pool_labels:
            value = _label_value(labels.get(key))
            if value is not None:
                return _shared_pools(Pool(key, value))
        return None

    def _resources(
        self, node: str, field: str, quantities: Any, unusable: list[UnusableQuantity]
    ) -> tuple[tuple[str, int], ...]:
        """The quantities of the resources that matter; one that cannot be used counts as 0
        and is recorded in ``unusable``, so the node is kept and fails its pool closed (a node
        left out would let the rest of its pool look uniform)."""
        if quantities is None:
            return ()
        if not isinstance(quantities, MAPPINGS):
            raise FactsError(f"Node {node}: status.{field} is not a mapping")
        parsed = []
        for resource in self.resources:
            if resource in quantities:
                raw = quantities[resource]
                where = f"status.{field}[{resource}]"
                try:
                    count = parse_quantity(raw)
                except ValueError as error:
                    unusable.append(UnusableQuantity(resource, f"{where}: {error}", "out of range" not in str(error)))
                    count = 0
                if count > MAX_DEVICE_COUNT:
                    problem = f"{where}: {shown_value(raw)} is out of range (above {MAX_DEVICE_COUNT})"
                    unusable.append(UnusableQuantity(resource, problem, malformed=False))
                    count = 0
                parsed.append((resource, count))
        return _shared_pairs(tuple(sorted(parsed)))

    def pod(self, body: Mapping[str, Any]) -> PodFacts | None:
        """Facts of a pod owned by a DaemonSet in a plugin namespace; None for any other pod."""
        metadata = _mapping(body, "metadata", "Pod")
        namespace = metadata.get("namespace")
        if namespace not in self.plugin_namespaces:
            return None
        owner = _daemon_set_owner(metadata.get("ownerReferences"))
        if owner is None:
            return None
        name = object_name(metadata.get("name"))
        spec = body.get("spec") or {}
        status = body.get("status") or {}
        if not isinstance(spec, MAPPINGS) or not isinstance(status, MAPPINGS):
            raise FactsError(f"Pod {namespace}/{name}: spec/status is not a mapping")
        node_name = spec.get("nodeName") or None
        ready = (
            node_name is not None
            and status.get("phase") == "Running"
            and not metadata.get("deletionTimestamp")
            and _condition_true(status.get("conditions"), "Ready")
        )
        return PodFacts(
            namespace=object_namespace(namespace),
            name=name,
            node_name=node_reference(node_name) if node_name else None,
            daemon_set=shared_text(owner),
            ready=ready,
        )

    def workload_pod(self, body: Mapping[str, Any]) -> WorkloadPodFacts | None:
        """Facts of a pod that could use a fabric; None for any other pod, and for a pod that
        has finished (it runs nothing any more). Raises FactsError for a quantity that is not
        one: such a pod is left out, and the log says which."""
        if not self.config.workloads.enabled:
            return None
        metadata = _mapping(body, "metadata", "Pod")
        namespace = object_namespace(metadata.get("namespace"))
        name = object_name(metadata.get("name"))
        where = f"Pod {namespace}/{name}"
        spec = body.get("spec") or {}
        status = body.get("status") or {}
        if not isinstance(spec, MAPPINGS) or not isinstance(status, MAPPINGS):
            raise FactsError(f"{where}: spec/status is not a mapping")
        if status.get("phase") in ("Succeeded", "Failed"):
            return None
        containers = _containers(spec, "containers", where)
        init_containers = _containers(spec, "initContainers", where)
        requests, init_only = _effective_requests(
            containers, init_containers, spec.get("overhead"), self.resources, where
        )
        extended = status.get("extendedResourceClaimStatus")
        named_claims = _claims(
            spec.get("resourceClaims"), namespace, extended, status.get("resourceClaimStatuses"), where, self.on_refused
        )
        claims = tuple(sorted({claim for _, claim in named_claims}))
        # Only a pod with claims and init containers can have claims only init containers hold.
        init_claims = _init_claims(named_claims, containers, init_containers, extended) if init_containers else ()
        intent = self._intent([*containers, *init_containers])
        if not requests and not claims and not intent:
            return None
        labels = metadata.get("labels") or {}
        node_name = spec.get("nodeName") or None
        running: tuple[ContainerRun, ...] = ()
        if self.config.transport.enabled and node_name and status.get("phase") == "Running":
            running = _running_accelerator_containers(containers, status.get("containerStatuses"), self.resources)
        # A pod names as many containers as it likes: the reads of one pod are bounded.
        unread = max(0, len(running) - MAX_READ_CONTAINERS)
        running = running[:MAX_READ_CONTAINERS]
        owner, owner_generation = _nearest_owner(
            metadata, labels if isinstance(labels, MAPPINGS) else {}, namespace, name, self.on_refused
        )
        return WorkloadPodFacts(
            namespace=namespace,
            name=name,
            node_name=node_reference(node_name) if node_name else None,
            requests=_shared_pairs(requests),
            claims=claims,
            intent=intent,
            owner=owner,
            unschedulable=None if node_name else _unschedulable_message(status.get("conditions")),
            uid=str(metadata.get("uid") or ""),
            containers=running,
            unread_containers=unread,
            init_only=init_only,
            init_claims=init_claims,
            owner_generation=owner_generation,
        )

    def pod_marks(self) -> frozenset[str]:
        """Text that the JSON of every pod ``pod`` or ``workload_pod`` keeps facts of holds: a
        resource this config counts, a claim's name key, an environment variable ``_intent``
        reads, the kind of a plugin pod's owner. A pod whose JSON (with no escape in it that
        could spell one) holds none of them concerns no fabric, and need not be decoded to know
        it (``kube.unread``): at 100,000 nodes four pods in five are such pods. A mark that
        holds another is left out (the shorter one is in every text the longer one is)."""
        marks: set[str] = set()
        if self.plugin_namespaces:
            marks.add(DAEMON_SET_KIND)
        if self.config.workloads.enabled:
            marks |= self.resources
            marks |= set(CLAIM_NAME_KEYS)
            marks |= {LIBFABRIC_PROVIDER_ENV, NCCL_NET_ENV}
            marks |= {env.name for fabric in self.config.enabled_fabrics for env in fabric.recommended_env}
        return frozenset(mark for mark in marks if not any(other != mark and other in mark for other in marks))

    def _intent(self, containers: list[Mapping[str, Any]]) -> tuple[str, ...]:
        """The fabrics whose environment a pod sets: libfabric's EFA provider, NCCL's OFI
        plugin, or a variable of the profile's recommendedEnv set to its recommended value.
        The value matters: ``FI_PROVIDER=tcp`` or ``NCCL_SOCKET_IFNAME=eth0`` says TCP, on purpose.
        Each container's own: its environment is its process's, so a sidecar or an init
        container with ``FI_PROVIDER=tcp`` does not undo the trainer's ``efa`` (merged across the
        containers, the last one read won)."""
        fabrics: set[str] = set()
        for container in containers:
            env = container.get("env")
            if not isinstance(env, list):
                continue
            values = {
                variable["name"]: variable["value"]
                for variable in env
                if isinstance(variable, MAPPINGS)
                and isinstance(variable.get("name"), str)
                and isinstance(variable.get("value"), str)
            }
            if values:
                fabrics.update(self._intent_of(values))
        return tuple(sorted(fabrics))

    def _intent_of(self, values: Mapping[str, str]) -> Iterable[str]:
        """The fabrics one container's environment ``values`` says it means to use."""
        providers = {part.strip() for part in values.get(LIBFABRIC_PROVIDER_ENV, "").lower().split(",")}
        nccl_net = values.get(NCCL_NET_ENV, "").lower()
        libfabric = "efa" in providers or "ofi" in nccl_net or "libfabric" in nccl_net
        return (
            fabric.name
            for fabric in self.config.enabled_fabrics
            if libfabric or any(values.get(env.name) == env.value for env in fabric.recommended_env)
        )

    def selections(self, classes: DeviceClassView) -> dict[str, FabricSelection]:
        """Each DRA fabric's classes as they stand with the cluster's ``classes`` (kept until
        those change: every slice is read with them)."""
        return self._selected_with(classes)[0]

    def selection_signature(self, classes: DeviceClassView) -> Hashable:
        """What a slice's facts depend on besides its body: the classes' selectors and the
        DeviceTaintRules."""
        return self._selected_with(classes)[1]

    def _selected_with(self, classes: DeviceClassView) -> tuple[dict[str, FabricSelection], Hashable]:
        known = self._selections
        if known is None or known[0] is not classes:
            selections = {fabric.name: fabric_selection(fabric, classes.classes) for fabric in self.dra_fabrics}
            # A rule of a driver no fabric's recommended class selects changes no count: the
            # slices need not be read again for it (a GPU health controller's rules).
            pinned = [selection.recommended_drivers for selection in selections.values()]
            drivers = (
                None if None in pinned else frozenset[str]().union(*(found for found in pinned if found is not None))
            )
            signature = (
                tuple((name, selection.signature) for name, selection in sorted(selections.items())),
                classes.taint_rules.signature(drivers),
            )
            known = self._selections = (classes, selections, signature)
        return known[1], known[2]

    def device_class(self, body: Mapping[str, Any]) -> DeviceClassFacts | None:
        """Facts of a DeviceClass a DRA fabric names or that maps a DRA fabric's resource; None
        for any other. A class whose selectors cannot be read is kept with its problem: like a
        selector that does not compile, it then selects nothing."""
        metadata = _mapping(body, "metadata", "DeviceClass")
        name = object_name(metadata.get("name"))
        spec = body.get("spec") or {}
        if not isinstance(spec, MAPPINGS):
            raise FactsError(f"DeviceClass {name}: spec is not a mapping")
        mapped = spec.get("extendedResourceName")
        mapped = mapped if isinstance(mapped, str) and mapped else None
        if name not in self.device_class_names and mapped not in self.dra_resources:
            return None
        created = metadata.get("creationTimestamp")
        expressions: list[str] = []
        problem = None
        selectors = spec.get("selectors") or []
        for position, selector in enumerate(selectors if isinstance(selectors, list) else [None]):
            cel = selector.get("cel") if isinstance(selector, MAPPINGS) else None
            expression = cel.get("expression") if isinstance(cel, MAPPINGS) else None
            if not isinstance(expression, str):
                problem = f"selector #{position} has no cel.expression"
                break
            expressions.append(expression)
        return DeviceClassFacts(
            name=name,
            expressions=tuple(expressions),
            extended_resource_name=mapped,
            created=str(created) if isinstance(created, str) else "",
            problem=problem,
        )

    def device_taint_rule(self, body: Mapping[str, Any]) -> TaintRuleFacts | None:
        """Facts of a DeviceTaintRule (resource.k8s.io v1alpha3 or v1beta2: the fields read are
        the same) whose taint keeps devices from the recommended claim; None for one whose taint
        does not (effect None, or an effect not known: ``blocking_taint``), or when no fabric
        reads DRA. A selector field that is not a
        string, or one this code does not evaluate, is taken to match (fail closed)."""
        if not self.dra_fabrics:
            return None
        _, name = named_metadata(body, "DeviceTaintRule")
        spec = body.get("spec")
        if not isinstance(spec, MAPPINGS):
            raise FactsError(f"DeviceTaintRule {name}: spec is not a mapping")
        taint = spec.get("taint")
        if not blocking_taint(taint):
            return None
        effect = taint.get("effect") if isinstance(taint, MAPPINGS) else None
        selector = spec.get("deviceSelector")
        if not isinstance(selector, MAPPINGS):
            selector = {}  # none: kube-scheduler taints every device (TaintRuleFacts)
        fields = {field: selector.get(field) for field in TAINT_RULE_MATCHED_FIELDS}
        unevaluated = tuple(sorted(key for key, value in selector.items() if key not in fields and value))
        return TaintRuleFacts(
            name=name,
            effect=clean_text(effect, MAX_NAME) if isinstance(effect, str) and effect else "an unreadable effect",
            driver=_selected(fields["driver"]),
            pool=_selected(fields["pool"]),
            device=_selected(fields["device"]),
            unevaluated=tuple(clean_text(key, MAX_NAME) for key in unevaluated[:MAX_UNEVALUATED_FIELDS]),
        )

    def resource_slice(
        self, body: Mapping[str, Any], classes: DeviceClassView, known: SliceFacts | None = None
    ) -> SliceFacts | None:
        """Facts of a ResourceSlice of one node's devices; None for a slice of devices shared by
        many nodes that holds none of a fabric's. Raises IgnoredObjectError for a shared slice
        that does hold some (``allNodes``, a ``nodeSelector``: they say nothing of one node).

        ``known`` is what the index holds for the slice: when its resourceVersion and the
        classes it was read with are the current ones, it is returned as it is, so a re-list
        that changes nothing evaluates nothing. A slice that names its node but cannot be read
        otherwise is kept with its problem, so that node fails closed and its pool says why.
        """
        metadata = _mapping(body, "metadata", "ResourceSlice")
        name = object_name(metadata.get("name"))
        version = str(metadata.get("resourceVersion") or "")
        signature = self.selection_signature(classes)
        if known is not None and version and known.resource_version == version and known.read_with == signature:
            return known
        spec = body.get("spec")
        if not isinstance(spec, MAPPINGS):
            raise FactsError(f"ResourceSlice {name}: spec is not a mapping")
        driver = spec.get("driver")
        if not isinstance(driver, str) or not driver:
            raise FactsError(f"ResourceSlice {name}: spec.driver is missing")
        node_name = spec.get("nodeName")
        node_name = object_name(node_name) if isinstance(node_name, str) and node_name else None
        pool = spec.get("pool")
        pool_name = pool.get("name") if isinstance(pool, MAPPINGS) else None
        pool_label = clean_text(pool_name, MAX_NAME) if isinstance(pool_name, str) and pool_name else f"of slice {name}"
        try:
            if not isinstance(pool, MAPPINGS) or not pool_name:
                raise FactsError("spec.pool.name is missing")
            generation = _count(pool.get("generation"), "spec.pool.generation")
            slice_count = _count(pool.get("resourceSliceCount", 1), "spec.pool.resourceSliceCount")
            devices = spec.get("devices") or []
            if not isinstance(devices, list):
                raise FactsError("spec.devices is not a list")
            if not all(isinstance(device, MAPPINGS) for device in devices):
                raise FactsError("spec.devices has an entry that is not a mapping")
            # Partitionable devices (core.counters): counter data the API server would refuse
            # makes the slice unreadable, failing its node closed like any other.
            counter_sets = read_counter_sets(spec)
            demands = [read_demand(device, f"spec.devices[{position}]") for position, device in enumerate(devices)]
        except (FactsError, CounterError) as error:
            if not isinstance(node_name, str) or not node_name:
                return None
            return SliceFacts(
                name=name,
                driver=driver,
                pool=pool_label,
                generation=0,
                slice_count=1,
                node_name=node_name,
                devices=(),
                problem=f"ResourceSlice {name}: {error}",
                pool_unknown=not isinstance(pool_name, str) or not pool_name,
                resource_version=version,
                read_with=signature,
            )
        counts = tuple(
            (fabric, count)
            for fabric, selection in sorted(self.selections(classes).items())
            if (count := self.selector.count(selection, driver, devices, demands, str(pool_name), classes.taint_rules))
            != NO_DEVICES
        )
        if not isinstance(node_name, str) or not node_name:
            # Devices the fabric's classes select are there even when taints keep them from
            # the count: such a slice is still one of the fabric's said to be ignored.
            if not any(count.selected or count.tainted or count.rule_tainted for _, count in counts):
                return None
            scope = "allNodes" if spec.get("allNodes") else "nodeSelector" if spec.get("nodeSelector") else "no node"
            raise IgnoredObjectError(
                f"ResourceSlice {name} of driver {driver} has no spec.nodeName ({scope}); "
                "only slices of one node's own devices are counted"
            )
        return SliceFacts(
            name=name,
            driver=driver,
            pool=pool_label,
            generation=generation,
            slice_count=max(slice_count, 1),
            node_name=node_name,
            devices=counts,
            # Interned: DRANET names devices by PCI address, the same on every node of a type.
            device_names=tuple(sys.intern(str(device.get("name") or "")) for device in devices),
            counter_sets=counter_sets,
            counter_references=tuple(sorted({reference for demand in demands for reference in references(demand)})),
            resource_version=version,
            read_with=signature,
        )

    def resource_claim(self, body: Mapping[str, Any]) -> ClaimFacts | None:
        """Facts of an allocated ResourceClaim: its devices whose request names a DRA fabric's
        class, and the node they are on; None for a claim not allocated (or of other classes
        only, and not named by a pod of interest: the workload view reads its classes)."""
        facts = self.watched_claim(body)
        return facts if facts.devices or facts.device_classes & self.device_class_names else None

    def watched_claim(self, body: Mapping[str, Any]) -> ClaimFacts:
        """A ResourceClaim as the claim watch keeps it, whatever its classes: its devices of the
        fabrics' classes and their node (``resource_claim``), and the class of each request that
        gives its pod devices (``claim_request_classes``), read in one pass."""
        metadata = _mapping(body, "metadata", "ResourceClaim")
        namespace = object_namespace(metadata.get("namespace"))
        name = object_name(metadata.get("name"))
        spec = body.get("spec") or {}
        status = body.get("status") or {}
        if not isinstance(spec, MAPPINGS) or not isinstance(status, MAPPINGS):
            raise FactsError(f"ResourceClaim {namespace}/{name}: spec/status is not a mapping")
        classes_by_request = _request_classes(spec)
        allocation = status.get("allocation")
        allocated = list(_allocated_devices(classes_by_request, allocation))
        devices = [
            AllocatedDevice(driver, pool, sys.intern(device), device_class)
            for driver, pool, device, _, device_class in allocated
            if device_class in self.device_class_names
        ]
        node_name = _single_node(allocation.get("nodeSelector")) if isinstance(allocation, MAPPINGS) else None
        return ClaimFacts(
            namespace=namespace,
            name=name,
            node_name=node_name if devices else None,
            devices=tuple(sorted(devices)),
            device_classes=frozenset(classes_by_request.values()),
            request_classes=_held_request_classes(classes_by_request, allocated),
        )

    def daemon_set(self, body: Mapping[str, Any]) -> DaemonSetFacts | None:
        """Facts of a DaemonSet in a plugin namespace; None elsewhere."""
        metadata = _mapping(body, "metadata", "DaemonSet")
        namespace = metadata.get("namespace")
        if namespace not in self.plugin_namespaces:
            return None
        name = object_name(metadata.get("name"))
        labels = metadata.get("labels") or {}
        if not isinstance(labels, MAPPINGS):
            raise FactsError(f"DaemonSet {namespace}/{name}: labels is not a mapping")
        template = ((body.get("spec") or {}).get("template") or {}) if isinstance(body.get("spec"), MAPPINGS) else {}
        template_labels = (template.get("metadata") or {}).get("labels") if isinstance(template, MAPPINGS) else None
        pod_spec = template.get("spec") if isinstance(template, MAPPINGS) else None
        pod_spec = pod_spec if isinstance(pod_spec, MAPPINGS) else {}
        selector = pod_spec.get("nodeSelector")
        return DaemonSetFacts(
            namespace=str(namespace),
            name=name,
            labels=_pairs(labels),
            template_labels=_pairs(template_labels if isinstance(template_labels, MAPPINGS) else {}),
            node_selector=_pairs(selector) if isinstance(selector, MAPPINGS) else (),
            affinity=_required_affinity(pod_spec.get("affinity")),
            tolerations=_tolerations(pod_spec.get("tolerations")),
            host_network=pod_spec.get("hostNetwork") is True,
        )


# A container count far beyond any real pod (the API server allows it, a kubelet would not
# start it): the work per pod stays bounded and the pod is reported instead.
MAX_CONTAINERS = 1000
# The scheduler's message is kept for the Event, not in full: a long one says nothing more.
MAX_MESSAGE = 1000
# A label value is at most 63 characters on an API server; a hand-made snapshot's longer ones
# are kept up to a name's length, so that values differing past 63 stay different pools.
MAX_SHOWN_LABEL_VALUE = MAX_NAME


def _containers(spec: Mapping[str, Any], field: str, where: str) -> list[Mapping[str, Any]]:
    containers = spec.get(field) or []
    if not isinstance(containers, list):
        raise FactsError(f"{where}: spec.{field} is not a list")
    if len(containers) > MAX_CONTAINERS:
        raise FactsError(f"{where}: spec.{field} has {len(containers)} entries (more than {MAX_CONTAINERS})")
    if not all(isinstance(container, MAPPINGS) for container in containers):
        raise FactsError(f"{where}: spec.{field} has an entry that is not a mapping")
    return containers


def _container_requests(container: Mapping[str, Any], resources: frozenset[str], where: str) -> dict[str, int]:
    """A container's requests of ``resources``; an extended resource's request defaults to its limit."""
    spec = container.get("resources") or {}
    if not isinstance(spec, MAPPINGS):
        raise FactsError(f"{where}: container {_container_name(container)!r}: resources is not a mapping")
    found: dict[str, int] = {}
    for field in ("limits", "requests"):  # requests last: they win where both are given
        quantities = spec.get(field) or {}
        if not isinstance(quantities, MAPPINGS):
            raise FactsError(f"{where}: container {_container_name(container)!r}: resources.{field} is not a mapping")
        for resource in resources & quantities.keys():
            raw = quantities[resource]
            try:
                count = parse_quantity(raw)
            except ValueError as error:
                raise FactsError(
                    f"{where}: container {_container_name(container)!r}: resources.{field}[{resource}]: {error}"
                ) from None
            if count > MAX_DEVICE_COUNT:
                raise FactsError(
                    f"{where}: container {_container_name(container)!r}: resources.{field}[{resource}]: "
                    f"{shown_value(raw)} is out of range"
                )
            found[resource] = count
    return found


def _container_name(container: Mapping[str, Any]) -> str:
    return clean_text(container.get("name") or "", MAX_NAMESPACE)  # a DNS label, like a namespace


def _effective_requests(
    containers: list[Mapping[str, Any]],
    init_containers: list[Mapping[str, Any]],
    overhead: Any,
    resources: frozenset[str],
    where: str,
) -> tuple[tuple[tuple[str, int], ...], tuple[str, ...]]:
    """What the scheduler reserves: the app containers plus the sidecars (init containers with
    restartPolicy Always), or the largest init container plus the sidecars started before it,
    whichever is larger; plus the pod overhead. And the resources of it that only plain init
    containers request (``WorkloadPodFacts.init_only``): reserved, for fitting, but held by no
    container that runs beside the job's."""
    total: dict[str, int] = {}
    for container in containers:
        for resource, count in _container_requests(container, resources, where).items():
            total[resource] = total.get(resource, 0) + count
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in init_containers:
        requests = _container_requests(container, resources, where)
        if container.get("restartPolicy") == "Always":
            for resource, count in requests.items():
                sidecars[resource] = sidecars.get(resource, 0) + count
            running = sidecars
        else:
            running = {r: requests.get(r, 0) + sidecars.get(r, 0) for r in requests.keys() | sidecars.keys()}
        for resource, count in running.items():
            init_peak[resource] = max(init_peak.get(resource, 0), count)
    extra = _container_requests({"name": "overhead", "resources": {"requests": overhead or {}}}, resources, where)
    effective = {
        resource: max(total.get(resource, 0) + sidecars.get(resource, 0), init_peak.get(resource, 0))
        + extra.get(resource, 0)
        for resource in total.keys() | sidecars.keys() | init_peak.keys() | extra.keys()
    }
    init_only: tuple[str, ...] = ()
    if init_peak:  # a pod's facts are on the start's hot path, and most pods have no init container
        held = {resource for resource, count in (*total.items(), *sidecars.items()) if count > 0}
        init_only = tuple(
            sorted(resource for resource, count in init_peak.items() if count > 0 and resource not in held)
        )
    return tuple(sorted((resource, count) for resource, count in effective.items() if count > 0)), init_only


def _uses_accelerator(container: Mapping[str, Any], resources: frozenset[str]) -> bool:
    """Whether a container asks for a resource some profile cares about (a fabric or an
    accelerator), or for one of the pod's ResourceClaims: the containers NCCL runs in."""
    spec = container.get("resources")
    if not isinstance(spec, MAPPINGS):
        return False
    for field in ("limits", "requests"):
        quantities = spec.get(field)
        if isinstance(quantities, MAPPINGS) and any(
            _positive(quantities[resource]) for resource in resources & quantities.keys()
        ):
            return True
    claims = spec.get("claims")
    return isinstance(claims, list) and bool(claims)


def _positive(raw: Any) -> bool:
    try:
        return parse_quantity(raw) > 0
    except ValueError:
        return False


def _running_accelerator_containers(
    containers: list[Mapping[str, Any]], statuses: Any, resources: frozenset[str]
) -> tuple[ContainerRun, ...]:
    """The accelerator containers that run now, with their restart count and start time, by
    name. A container whose status is missing or malformed is left out: it has no log to read."""
    if not isinstance(statuses, list):
        return ()
    wanted = {
        container["name"]
        for container in containers
        if isinstance(container.get("name"), str) and _uses_accelerator(container, resources)
    }
    runs = []
    for entry in statuses:
        if not isinstance(entry, MAPPINGS) or entry.get("name") not in wanted:
            continue
        state = entry.get("state")
        running = state.get("running") if isinstance(state, MAPPINGS) else None
        started = running.get("startedAt") if isinstance(running, MAPPINGS) else None
        restarts = entry.get("restartCount", 0)
        if isinstance(started, str) and isinstance(restarts, int) and not isinstance(restarts, bool) and restarts >= 0:
            runs.append(ContainerRun(str(entry["name"]), restarts, started[:64]))
    return tuple(sorted(runs))


def _claims(
    resource_claims: Any, namespace: str, extended: Any, generated: Any, holder: str, refused: RefusalHook | None
) -> list[tuple[str | None, ClaimRef]]:
    """The pod's claims, each with the name the pod's containers know it by
    (``spec.resourceClaims[].name``): those its spec names, and (with no name: no container
    names it) the one the scheduler made for extended resources it serves from DRA (KEP-5004:
    ``status.extendedResourceClaimStatus``). A claim of a template is the one made from it for
    the pod once there is one
    (``status.resourceClaimStatuses``): what the pod holds, whatever became of the template (a
    template deleted or renamed since, or one not readable, read as "no fabric class" and warned
    a job that holds EFA). One whose name no claim can have is left out (its devices unknown,
    the pod is judged by its other requests), as it is read with a GET of that name."""
    found: list[tuple[str | None, ClaimRef]] = []
    named: list[Any] = list(resource_claims) if isinstance(resource_claims, list) else []
    if isinstance(extended, MAPPINGS):
        named.append(extended)  # it names its claim as a spec entry may: resourceClaimName
    made = {
        status.get("name"): status.get(CLAIM_NAME_KEY)
        for status in (generated if isinstance(generated, list) else ())
        if isinstance(status, MAPPINGS) and isinstance(status.get(CLAIM_NAME_KEY), str)
    }
    for claim in named:
        if not isinstance(claim, MAPPINGS):
            continue
        made_for_it = made.get(claim.get("name"))
        if isinstance(claim.get(CLAIM_TEMPLATE_NAME_KEY), str) and isinstance(made_for_it, str):
            kind, name = "ResourceClaim", made_for_it
        elif isinstance(claim.get(CLAIM_TEMPLATE_NAME_KEY), str):
            kind, name = "ResourceClaimTemplate", claim[CLAIM_TEMPLATE_NAME_KEY]
        elif isinstance(claim.get(CLAIM_NAME_KEY), str):
            kind, name = "ResourceClaim", claim[CLAIM_NAME_KEY]
        else:
            continue
        if not is_object_name(name):
            _refuse(refused, INVALID_NAME, holder, "resource.k8s.io/v1", kind, name)
            continue
        known_as = claim.get("name")
        if claim is extended:
            known_as = None
        elif not isinstance(known_as, str):
            known_as = ""  # no container can name it
        found.append((known_as, ClaimRef(kind, namespace, name)))
    return found


def _init_claims(
    named_claims: list[tuple[str | None, ClaimRef]],
    containers: list[Mapping[str, Any]],
    init_containers: list[Mapping[str, Any]],
    extended: Any,
) -> tuple[InitClaim, ...]:
    """The claims (``_claims``) that plain init containers hold and the containers that run
    beside the job (app containers, sidecars) hold none or only part of: the same rule as
    ``_effective_requests``'s ``init_only``, for devices that come as claims.

    A claim of the spec is held by the containers whose ``resources.claims[].name`` names it,
    each all of it or, when the entry names a ``request``, only that request's devices ("If
    empty, everything from the claim is made available, otherwise only the result of this
    request": k8s.io/api core/v1 types.go, ``ResourceClaim.Request``; kubernetes-client/python
    docs/CoreV1ResourceClaim.md). One no plain init container names is the job's, as before;
    one they name is the job's for the requests app containers or sidecars name (all of it if
    one names it whole), as the scheduler's claim is. The scheduler's claim of extended
    resources is held request by request, as ``status.extendedResourceClaimStatus``'s
    ``requestMappings`` say ({containerName, resourceName, requestName}: kubernetes/kubernetes
    staging/src/k8s.io/api/core/v1/types.go, ``PodExtendedResourceClaimStatus`` and
    ``ContainerExtendedResourceRequest``). kube-scheduler makes that claim from every container,
    plain init containers included: their largest request is a request of its own unless it
    reuses a later app container's or sidecar's (pkg/scheduler/framework/plugins/
    dynamicresources/extendeddynamicresources.go, ``createRequestsAndMappings``)."""
    if not named_claims:
        return ()
    plain = [container for container in init_containers if container.get("restartPolicy") != "Always"]
    if not plain:
        return ()
    beside = [*containers, *(container for container in init_containers if container.get("restartPolicy") == "Always")]
    held_by_job = [held for container in beside for held in _claim_names(container)]
    whole_by_job = {name for name, request in held_by_job if request is None}
    held_by_init = {name for container in plain for name, _ in _claim_names(container)}
    spec_claims = [(name, claim) for name, claim in named_claims if name is not None]
    # A claim that two entries name (the same ResourceClaim) is the job's if either is.
    jobs = {claim for name, claim in spec_claims if name in whole_by_job or name not in held_by_init}
    found: dict[ClaimRef, frozenset[str]] = {}
    for name, claim in spec_claims:
        if claim not in jobs:
            requests = frozenset(request for held, request in held_by_job if held == name and request is not None)
            found[claim] = found.get(claim, frozenset()) | requests
    generated = next((claim for name, claim in named_claims if name is None), None)
    mappings = extended.get("requestMappings") if isinstance(extended, MAPPINGS) else None
    if generated is not None and generated not in jobs and isinstance(mappings, list):
        # Names only: a malformed name (from no API server, which decodes these as strings)
        # names no plain init container, and its request is the job's.
        plain_names = {container["name"] for container in plain if isinstance(container.get("name"), str)}
        held = [
            (
                mapping.get("containerName") if isinstance(mapping.get("containerName"), str) else None,
                mapping["requestName"],
            )
            for mapping in mappings
            if isinstance(mapping, MAPPINGS) and isinstance(mapping.get("requestName"), str)
        ]
        # A request mapped to a container not known as a plain init container is the job's.
        job_requests = frozenset(request for container, request in held if container not in plain_names)
        if len(job_requests) < len({request for _, request in held}):
            found[generated] = job_requests
    return tuple(InitClaim(claim, job_requests) for claim, job_requests in sorted(found.items()))


def _claim_names(container: Mapping[str, Any]) -> Iterable[tuple[str, str | None]]:
    """The pod claims a container names (``resources.claims[].name``), each with the one request
    of it the container is limited to (``request``), or None: all of it."""
    spec = container.get("resources")
    claims = spec.get("claims") if isinstance(spec, MAPPINGS) else None
    for claim in claims if isinstance(claims, list) else ():
        if isinstance(claim, MAPPINGS) and isinstance(claim.get("name"), str):
            request = claim.get("request")
            yield claim["name"], request if isinstance(request, str) and request else None


def _refuse(refused: RefusalHook | None, cause: str, holder: str, api_version: Any, kind: Any, name: Any) -> None:
    if refused is not None:
        refused(RefusedReference(cause, holder, shown_reference(api_version, kind, name)))


def controller_owner(
    metadata: Mapping[str, Any],
    namespace: str,
    *,
    any_owner: bool = False,
    holder: str = "",
    refused: RefusalHook | None = None,
) -> ObjectRef | None:
    """The object's controller owner reference (or, with ``any_owner``, its first owner), in
    the object's own namespace (a reference cannot name another, and none is ever followed
    there); None when it has none, or when the reference names no object an API server could
    hold (core.references): then ``refused`` is told, and the object is its own top."""
    references = metadata.get("ownerReferences")
    if not isinstance(references, list):
        return None
    candidates = [r for r in references if isinstance(r, MAPPINGS) and r.get("kind") and r.get("name")]
    chosen = next((r for r in candidates if r.get("controller") is True), None)
    if chosen is None and any_owner and candidates:
        chosen = candidates[0]
    if chosen is None:
        return None
    api_version, kind, name = chosen.get("apiVersion") or "", chosen["kind"], chosen["name"]
    if not (isinstance(api_version, str) and isinstance(kind, str) and isinstance(name, str)):
        problem: str | None = INVALID_API_VERSION if not isinstance(api_version, str) else INVALID_NAME
    else:
        problem = reference_problem(api_version, kind, name)
    if problem is not None:
        _refuse(refused, problem, holder, api_version, kind, name)
        return None
    return ObjectRef.shared(api_version, kind, namespace, name, clean_text(chosen.get("uid") or "", MAX_UID))


def _nearest_owner(
    metadata: Mapping[str, Any], labels: Mapping[str, Any], namespace: str, name: str, refused: RefusalHook | None
) -> tuple[ObjectRef, str]:
    """The pod's nearest owner (``WorkloadPodFacts.owner``) and its ``owner_generation``."""
    holder = f"Pod {namespace}/{name}"
    owner = controller_owner(metadata, namespace, any_owner=True, holder=holder, refused=refused)
    if owner is None:
        return ObjectRef("v1", "Pod", namespace, name, clean_text(metadata.get("uid") or "", MAX_UID)), ""
    route = OWNER_LABELS.get((group_of(owner.api_version), owner.kind))
    named = labels.get(route[1].name_label) if route is not None else None
    if route is not None and isinstance(named, str):
        workload, label = route
        if not is_object_name(named):
            _refuse(refused, INVALID_NAME, holder, workload.api_version, workload.kind, named)
            return owner, ""  # the controller: the nearest valid owner
        # The workload's controller labels its pods with its name (JobSet: and uid): no need
        # to read the Job or StatefulSet to learn whose it is (core.workload_kinds).
        uid = clean_text(labels.get(label.uid_label) or "", MAX_UID) if label.uid_label else ""
        generation = owner.uid if label.namesake_controller and owner.name == named else ""
        return ObjectRef.shared(workload.api_version, workload.kind, namespace, named, uid), generation
    return owner, ""


# What is read of a scheduler's FitError ("0/250 nodes are available: 64 Insufficient
# vpc.amazonaws.com/efa, 3 node(s) had untolerated taint {...}. preemption: ..."): the resources it
# found too little of, and whether it could not allocate a pod's claims. Only before any
# preemption text, which repeats the nodes' reasons.
_RESOURCE_NAME = r"[A-Za-z0-9./_-]+?(?=[,.]\s|\.$|,$|$)"
_INSUFFICIENT = re.compile(f"Insufficient ({_RESOURCE_NAME})")
CLAIMS_UNALLOCATABLE = "cannot allocate all claims"
# The reasons of a FitError that are read, as they are written ("<count> <reason>").
_READ_REASONS = re.compile(rf"\d+ (?:Insufficient {_RESOURCE_NAME}|[^,.]*{CLAIMS_UNALLOCATABLE})")
# How much of a scheduler's message is looked at for them (its text is the pod status's).
MAX_SCANNED_MESSAGE = 64 * 1024


def insufficient_resources(message: str) -> set[str]:
    """The resources the scheduler found too little of, from its FitError message."""
    return set(_INSUFFICIENT.findall(message.split(" preemption:", 1)[0]))


def _unschedulable_message(conditions: Any) -> str | None:
    if not isinstance(conditions, list):
        return None
    for condition in conditions:
        if (
            isinstance(condition, MAPPINGS)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == ConditionStatus.FALSE
            and condition.get("reason") == "Unschedulable"
        ):
            message = condition.get("message")
            return clean_text(_kept_fit_error(message if isinstance(message, str) else ""), MAX_MESSAGE)
    return None


def _kept_fit_error(message: str) -> str:
    """A FitError short enough to keep, with the reasons that are read in it. kube-scheduler
    sorts its reasons as text (FitError.Error), so "64 Insufficient vpc.amazonaws.com/efa" comes
    after every "1 node(s) had untolerated taint ...": cut at MAX_MESSAGE, a message of a
    cluster with a few dozen taints lost the one reason read, and its job was never told."""
    if len(message) <= MAX_MESSAGE:
        return message
    head = message[:MAX_SCANNED_MESSAGE].split(" preemption:", 1)[0]
    lead, colon, reasons = head.partition(": ")
    read = _READ_REASONS.findall(reasons)
    if not colon or not read:
        return message
    return f"{lead}: {', '.join(read)}, and other reasons (cut)."


# A DaemonSet's affinity is bounded like a NodePool's requirements: a hostile one costs little.
MAX_AFFINITY_TERMS = 100


def _required_affinity(affinity: Any) -> tuple[tuple[SelectorTerm, ...], ...]:
    """The DaemonSet template's requiredDuringSchedulingIgnoredDuringExecution terms."""
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, MAPPINGS) else None
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, MAPPINGS)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, MAPPINGS) else None
    if not isinstance(terms, list):
        return ()
    found = []
    for term in terms[:MAX_AFFINITY_TERMS]:
        expressions = term.get("matchExpressions") if isinstance(term, MAPPINGS) else None
        requirements = []
        for expression in (expressions if isinstance(expressions, list) else [])[:MAX_AFFINITY_TERMS]:
            if not isinstance(expression, MAPPINGS):
                continue
            values = expression.get("values")
            requirements.append(
                SelectorTerm(
                    str(expression.get("key") or ""),
                    str(expression.get("operator") or ""),
                    tuple(str(value) for value in values[:MAX_AFFINITY_TERMS]) if isinstance(values, list) else (),
                )
            )
        found.append(tuple(requirements))
    return tuple(found)


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FactsError(f"{what} {shown_value(value)} is not a count")
    return value


def _request_classes(spec: Mapping[str, Any]) -> dict[str, str]:
    """Request name -> the DeviceClass it names, from a claim's spec.devices.requests; a
    firstAvailable subrequest is ``request/subrequest``, as an allocation result names it.

    A request with ``adminAccess: true`` is left out, as its allocation results are
    (``_allocated_devices``): it watches devices that other claims may hold (a monitoring
    agent's) and takes none, so it does not give the pod the fabric, before allocation or
    after, whatever the claim's other requests are."""
    devices = spec.get("devices")
    requests = devices.get("requests") if isinstance(devices, MAPPINGS) else None
    classes: dict[str, str] = {}
    for request in requests if isinstance(requests, list) else []:
        if not isinstance(request, MAPPINGS) or not isinstance(request.get("name"), str):
            continue
        exactly = request.get("exactly")
        if (
            isinstance(exactly, MAPPINGS)
            and isinstance(exactly.get("deviceClassName"), str)
            and exactly.get("adminAccess") is not True
        ):
            classes[request["name"]] = exactly["deviceClassName"]
        for alternative in request.get("firstAvailable") or []:
            if (
                isinstance(alternative, MAPPINGS)
                and isinstance(alternative.get("name"), str)
                and isinstance(alternative.get("deviceClassName"), str)
            ):
                classes[f"{request['name']}/{alternative['name']}"] = alternative["deviceClassName"]
    return classes


def claim_request_classes(spec: Any, status: Any) -> tuple[tuple[str, str], ...]:
    """The DeviceClasses a claim (its ``spec`` and ``status``) gives its pod devices of, each
    with the request (the main one, for a ``firstAvailable`` subrequest) that asks for it,
    sorted. Once allocated, those of the requests its devices were allocated for: a
    ``firstAvailable`` request that prefers the fabric and falls back to a plain NIC holds the
    fabric only if the scheduler chose the fabric's subrequest. Before, every class its
    requests name, since any of them may be chosen; so too while its allocation records no
    device that says which. An adminAccess request gives none (``_request_classes``)."""
    classes_by_request = _request_classes(spec) if isinstance(spec, MAPPINGS) else {}
    allocation = status.get("allocation") if isinstance(status, MAPPINGS) else None
    return _held_request_classes(classes_by_request, list(_allocated_devices(classes_by_request, allocation)))


def _held_request_classes(
    classes_by_request: Mapping[str, str], allocated: list[tuple[str, str, str, str, str | None]]
) -> tuple[tuple[str, str], ...]:
    """``claim_request_classes`` of a claim whose requests and allocated devices are read."""
    pairs = [(request, device_class) for *_, request, device_class in allocated] or list(classes_by_request.items())
    found = {(request.split("/", 1)[0], device_class) for request, device_class in pairs if device_class is not None}
    return tuple(sorted(found))


def _allocated_devices(
    classes_by_request: Mapping[str, str], allocation: Any
) -> Iterable[tuple[str, str, str, str, str | None]]:
    """Each device of an allocation (``status.allocation.devices.results``) as (driver, pool,
    device, request, the DeviceClass its request names; None if it names none). A result names a
    ``firstAvailable`` subrequest as ``<main request>/<subrequest>`` (kubernetes/api
    resource/v1/types.go, ``DeviceRequestAllocationResult.Request``), which ``_request_classes``
    keys it by. A result of admin access, or one that is not whole, is left out."""
    devices = allocation.get("devices") if isinstance(allocation, MAPPINGS) else None
    results = devices.get("results") if isinstance(devices, MAPPINGS) else None
    for result in results if isinstance(results, list) else []:
        if not isinstance(result, MAPPINGS) or result.get("adminAccess") is True:
            continue  # admin access watches a device; it does not take it
        fields = [result.get(key) for key in ("driver", "pool", "device", "request")]
        if not all(isinstance(value, str) and value for value in fields):
            continue
        driver, pool, device, request = (str(value) for value in fields)
        device_class = classes_by_request.get(request) or classes_by_request.get(request.split("/", 1)[0])
        yield driver, pool, device, request, device_class


def _single_node(selector: Any) -> str | None:
    """The one node a NodeSelector pins (``matchFields metadata.name In [node]``), as the
    scheduler writes an allocation of a node's own devices; None for anything else."""
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, MAPPINGS) else None
    if not isinstance(terms, list) or len(terms) != 1 or not isinstance(terms[0], MAPPINGS):
        return None
    fields = terms[0].get("matchFields")
    if not isinstance(fields, list) or len(fields) != 1 or not isinstance(fields[0], MAPPINGS):
        return None
    requirement = fields[0]
    values = requirement.get("values")
    if (
        requirement.get("key") == "metadata.name"
        and requirement.get("operator") == "In"
        and isinstance(values, list)
        and len(values) == 1
        and isinstance(values[0], str)
    ):
        return values[0]
    return None


def _pairs(labels: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(key), str(value)) for key, value in labels.items()))


# The DeviceTaintRule selector fields kube-scheduler matches devices on (resource.k8s.io
# v1alpha3 of k8s.io/api@v0.35.4, DeviceTaintSelector). Any other that is set (deviceClassName,
# selectors: v1alpha3 before 1.35) is taken to match, and at most this many are named.
TAINT_RULE_MATCHED_FIELDS = ("driver", "pool", "device")
MAX_UNEVALUATED_FIELDS = 4


def _selected(value: Any) -> str | None:
    """A DeviceTaintRule selector field as matched: None (matches any) when not set, and when
    not a string it could equal (fail closed: taken to match)."""
    return value if isinstance(value, str) and value else None


def _mapping(body: Mapping[str, Any], field: str, kind: str) -> Mapping[str, Any]:
    if not isinstance(body, MAPPINGS):
        raise FactsError(f"{kind} is not an object")
    value = body.get(field)
    if not isinstance(value, MAPPINGS):
        raise FactsError(f"{kind} without {field}")
    return value


def _shared_label_value(value: Any) -> str | None:
    """A label value many nodes repeat (an instance type), one copy of it (core.sharing)."""
    text = _label_value(value)
    return shared_text(text) if text is not None else None


def _label_value(value: Any) -> str | None:
    # An empty label value carries no pool identity: treat it like an absent label so the
    # next pool key decides, rather than lumping unrelated nodes into a pool named "".
    if value is None:
        return None
    text = clean_text(value, MAX_SHOWN_LABEL_VALUE)
    return text or None


def _daemon_set_owner(owner_references: Any) -> str | None:
    if not isinstance(owner_references, list):
        return None
    for reference in owner_references:
        if (
            isinstance(reference, MAPPINGS)
            and reference.get("kind") == DAEMON_SET_KIND
            and str(reference.get("apiVersion", "apps/v1")).startswith("apps/")
            and reference.get("name")
        ):
            return clean_text(reference["name"], MAX_NAME)
    return None


def _condition_true(conditions: Any, condition_type: str) -> bool:
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(condition, MAPPINGS)
        and condition.get("type") == condition_type
        and condition.get("status") == ConditionStatus.TRUE
        for condition in conditions
    )
