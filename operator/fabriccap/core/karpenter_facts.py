"""Karpenter's objects -> small immutable facts: NodePools, NodeClaims, EC2NodeClasses.

Shapes as ``karpenter.sh/v1`` and ``karpenter.k8s.aws/v1`` serve them (the CRDs of
``github.com/aws/karpenter-provider-aws@v1.15.2``, ``pkg/apis/crds/``). Only what the elastic-pool
verdict reads is kept: a NodePool's requirements, template labels, taints and node class; a
NodeClaim's node, provider ID, whether it asked for a fabric and whether it got one; an
EC2NodeClass's pinned EFA interfaces. Anything malformed inside a requirement is kept as it
is and judged later, so the status can say which requirement could not be evaluated: a
NodePool is never dropped for one bad line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fabriccap.core.api import ConditionStatus
from fabriccap.core.facts import Taint, blocking_node_taint, named_metadata, object_name
from fabriccap.core.quantity import parse_quantity
from fabriccap.core.text import clean_text

KARPENTER_API_VERSION = "karpenter.sh/v1"
NODE_CLASS_GROUP = "karpenter.k8s.aws"
NODE_CLASS_API_VERSION = f"{NODE_CLASS_GROUP}/v1"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
# Set by Karpenter's scheduler on a NodeClaim whose pods claim DRA devices: the drivers they
# claim from, comma-separated. Karpenter's AWS provider (v1.15.2, pkg/providers/efadra) attaches
# EFA for a claim of dra.net devices as it does for a vpc.amazonaws.com/efa request, and for no
# other driver: efadra.Requested splits the annotation on "," and compares each part, spaces
# trimmed, with DriverName "dra.net".
REQUESTED_DRA_DRIVERS = "karpenter.sh/requested-dra-drivers"
EFA_DRA_DRIVER = "dra.net"
EFA_ONLY = "efa-only"
ZONE_KEY = "topology.kubernetes.io/zone"
ZONE_ID_KEY = "topology.k8s.aws/zone-id"
# The CRD allows 100 requirements; values and labels are bounded so a hostile object costs little.
MAX_REQUIREMENTS = 100
MAX_VALUES = 500
MAX_LABELS = 200
MAX_TEXT = 316  # a qualified label key (253 + 1 + 62)
MAX_INTERFACES = 150  # the EC2NodeClass CRD's maxItems of spec.networkInterfaces
# The CRD sets no maxItems on spec.template.spec.taints; real NodePools carry one or two.
MAX_TAINTS = 100


@dataclass(frozen=True, slots=True)
class Requirement:
    """One NodeSelectorRequirementWithMinValues, as written (validated when evaluated)."""

    key: str
    operator: str
    values: tuple[str, ...]
    min_values: int | None = None

    def describe(self) -> str:
        values = f" {list(self.values)}" if self.values else ""
        minimum = f" minValues {self.min_values}" if self.min_values is not None else ""
        return f"{self.key} {self.operator}{values}{minimum}"


@dataclass(frozen=True, slots=True)
class NodeClassRef:
    group: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class NodePoolFacts:
    name: str
    generation: int
    requirements: tuple[Requirement, ...]
    template_labels: tuple[tuple[str, str], ...]  # spec.template.metadata.labels, sorted
    node_class: NodeClassRef | None
    # Static NodePools (spec.replicas) launch without pod requests: without EFA unless pinned.
    replicas: int | None = None
    problem: str | None = None  # why part of it could not be read
    # spec.limits, resource -> whole amount (bytes for memory); a type whose capacity of one of
    # them exceeds what is left is never launched (Karpenter's filterByRemainingResources).
    limits: tuple[tuple[str, int], ...] = ()
    # What its nodes hold already: status.resources, and status.nodes as "nodes".
    usage: tuple[tuple[str, int], ...] = ()
    # status.conditions Ready, or None when Karpenter has set none yet (or wrote no status word);
    # and its reason and message. Karpenter's provisioner launches only from a NodePool whose
    # Ready is True (sigs.k8s.io/karpenter v1.15.1 pkg/controllers/provisioning/provisioner.go,
    # NewScheduler: ``!np.StatusConditions().IsTrue(status.ConditionReady)`` skips it).
    ready: ConditionStatus | None = None
    ready_message: str = ""
    # metadata.deletionTimestamp is set: the same filter skips a NodePool being deleted.
    deleting: bool = False
    # spec.template.spec.taints that keep a DaemonSet's pod off its nodes (NoSchedule, NoExecute),
    # in order: a provider DaemonSet that does not tolerate one never serves them. Its
    # startupTaints are not kept: something on the node removes them once it is initialised.
    taints: tuple[Taint, ...] = ()

    def derived_requirements(self) -> tuple[Requirement, ...]:
        """The requirements Karpenter holds the NodePool's instance types to: its own, and each
        template label as ``In [value]`` (sigs.k8s.io/karpenter v1.15.1 nodeclaimtemplate.go
        NewNodeClaimTemplate adds ``NewLabelRequirements(nct.Labels)``)."""
        labels = tuple(Requirement(key, "In", (value,)) for key, value in self.template_labels)
        return self.requirements + labels

    def remaining(self) -> dict[str, int]:
        """What the limits leave for one more node, per limited resource."""
        used = dict(self.usage)
        return {resource: limit - used.get(resource, 0) for resource, limit in self.limits}


@dataclass(frozen=True, slots=True)
class NodeClaimFacts:
    name: str
    node_pool: str | None  # its karpenter.sh/nodepool label
    node_name: str | None  # status.nodeName, set at registration
    provider_id: str | None  # status.providerID
    requested: tuple[str, ...]  # spec.resources.requests keys, sorted
    dra_drivers: tuple[str, ...]  # karpenter.sh/requested-dra-drivers (the first MAX_VALUES)
    capacity: tuple[tuple[str, int], ...]  # status.capacity, the resources above 0 only
    # It lists dra.net, for which Karpenter's AWS provider attaches EFA as for an EFA request
    # (efadra.Requested; judged over every part, not only those kept above).
    requests_efa_driver: bool = False

    def capacity_of(self, resource: str) -> int:
        return next((amount for name, amount in self.capacity if name == resource), 0)


@dataclass(frozen=True, slots=True)
class CapacityReservation:
    """One of an EC2NodeClass's ``status.capacityReservations``: what Karpenter resolved its
    ``capacityReservationSelectorTerms`` to, and builds reserved offerings from (v1.15.2
    offering/reserved_capacity_resolver.go: one per reservation, for its ``instanceType`` only,
    labelled with its id, ``reservationType`` and ``interruptible``, and pinned to its
    ``availabilityZone`` and that zone's ID, where the class's subnets give one)."""

    id: str
    instance_type: str
    reservation_type: str
    interruptible: bool
    availability_zone: str | None = None
    # From the class's status.subnets (the reservation carries none): None when no subnet of the
    # class is in its zone, and then its offering has no zone-id label at all.
    availability_zone_id: str | None = None

    def label_value(self, key: str) -> str | None:
        """Its offering's value of a label key: the capacity-reservation keys
        (karpenter.k8s.aws/capacity-reservation-*), the zone and the zone ID."""
        if key == ZONE_KEY:
            return self.availability_zone
        if key == ZONE_ID_KEY:
            return self.availability_zone_id
        values = {
            "capacity-reservation-id": self.id,
            "capacity-reservation-type": self.reservation_type,
            "capacity-reservation-interruptible": "true" if self.interruptible else "false",
        }
        return values.get(key.removeprefix(NODE_CLASS_GROUP + "/"))


@dataclass(frozen=True, slots=True)
class NodeClassFacts:
    """An EC2NodeClass: how many EFA-only interfaces it pins (None: it sets no networkInterfaces,
    and Karpenter attaches the type's maximum when a pod requests EFA, none otherwise)."""

    name: str
    efa_only_interfaces: int | None
    # (networkCardIndex, deviceIndex) of every networkInterfaces entry, efa-only or not, in order;
    # None where an entry has no such integer. Karpenter launches a type only when it has each
    # card and the card allows an interface at each device index (v1.15.2 compatibility.go
    # networkInterfaceCheck), so the slots decide which types the class can launch.
    interfaces: tuple[tuple[int | None, int | None], ...] = ()
    # It selects capacity reservations (spec.capacityReservationSelectorTerms): only then has a
    # type reserved offerings (v1.15.2 offering/reserved_capacity_resolver.go builds them from the
    # class's reservations), so only then may a node be karpenter.sh/capacity-type reserved.
    reserves: bool = False
    # status.capacityReservations: the reservations Karpenter resolved, the only ones it launches into.
    reservations: tuple[CapacityReservation, ...] = ()


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    """Text others wrote, cleaned and bounded before a message repeats it (core.text)."""
    return clean_text(value if isinstance(value, str) else "" if value is None else str(value), MAX_TEXT)


def _requirements(raw: Any, where: str) -> tuple[tuple[Requirement, ...], str | None]:
    if raw is None:
        return (), None
    if not isinstance(raw, list):
        return (), f"{where} is not a list"
    problem = None
    if len(raw) > MAX_REQUIREMENTS:
        problem = f"{where} has {len(raw)} entries; the first {MAX_REQUIREMENTS} are read"
    found = []
    for position, entry in enumerate(raw[:MAX_REQUIREMENTS]):  # a field path counts from 0
        entry = _mapping(entry)
        values = entry.get("values")
        if isinstance(values, list) and len(values) > MAX_VALUES and problem is None:
            # The CRD sets no maxItems: a cut list could admit a type a NotIn excludes, or drop one an In names.
            problem = f"{where}[{position}] has {len(values)} values; the first {MAX_VALUES} are read"
        listed = [_text(value) for value in values[:MAX_VALUES]] if isinstance(values, list) else []
        minimum = entry.get("minValues")
        found.append(
            Requirement(
                key=_text(entry.get("key")),
                operator=_text(entry.get("operator")),
                values=tuple(listed),
                min_values=minimum if isinstance(minimum, int) and not isinstance(minimum, bool) else None,
            )
        )
    return tuple(found), problem


def _amounts(raw: Any, where: str) -> tuple[tuple[tuple[str, int], ...], str | None]:
    """A resource list as whole amounts, sorted; what is not a quantity is named, not counted."""
    raw = _mapping(raw)
    amounts, refused = [], []
    for resource, value in list(raw.items())[:MAX_LABELS]:
        try:
            amounts.append((_text(resource), parse_quantity(value)))
        except ValueError:
            refused.append(_text(resource))
    problem = f"{where}: {', '.join(refused[:5])} not a quantity, not counted" if refused else None
    return tuple(sorted(amounts)), problem


def _ready(status: Mapping[str, Any]) -> tuple[ConditionStatus | None, str]:
    """The Ready condition's status (None: there is none, or it is not one Karpenter writes) and
    its reason and message, cleaned."""
    conditions = status.get("conditions")
    for condition in conditions[:MAX_LABELS] if isinstance(conditions, list) else ():
        condition = _mapping(condition)
        if condition.get("type") != "Ready":
            continue
        state = condition.get("status")
        reason, message = _text(condition.get("reason")), _text(condition.get("message"))
        known = state if isinstance(state, str) and state in set(ConditionStatus) else None
        return (ConditionStatus(known) if known else None), ": ".join(part for part in (reason, message) if part)
    return None, ""


def node_pool_facts(body: Mapping[str, Any]) -> NodePoolFacts:
    metadata, name = named_metadata(body, "NodePool")
    spec = _mapping(body.get("spec"))
    template = _mapping(spec.get("template"))
    template_spec = _mapping(template.get("spec"))
    requirements, problem = _requirements(template_spec.get("requirements"), "spec.template.spec.requirements")
    labels = _mapping(_mapping(template.get("metadata")).get("labels"))
    reference = _mapping(template_spec.get("nodeClassRef"))
    node_class = (
        NodeClassRef(_text(reference.get("group")), _text(reference.get("kind")), _text(reference.get("name")))
        if reference.get("name")
        else None
    )
    if len(labels) > MAX_LABELS and problem is None:
        # Each label is a requirement In [value]: one not read could exclude every type.
        problem = f"spec.template.metadata.labels has {len(labels)} labels; the first {MAX_LABELS} are read"
    raw_taints = template_spec.get("taints")
    raw_taints = raw_taints if isinstance(raw_taints, list) else []
    if len(raw_taints) > MAX_TAINTS and problem is None:
        # A taint not read could be the one no provider DaemonSet tolerates.
        problem = f"spec.template.spec.taints has {len(raw_taints)} taints; the first {MAX_TAINTS} are read"
    taints = tuple(taint for entry in raw_taints[:MAX_TAINTS] if (taint := blocking_node_taint(entry)) is not None)
    replicas = spec.get("replicas")
    generation = metadata.get("generation")
    status = _mapping(body.get("status"))
    limits, limits_problem = _amounts(spec.get("limits"), "spec.limits")
    usage, _ = _amounts(status.get("resources"), "status.resources")
    ready, ready_message = _ready(status)
    nodes = status.get("nodes")
    if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > 0:
        usage = tuple(sorted({**dict(usage), "nodes": nodes}.items()))
    return NodePoolFacts(
        name=name,
        generation=generation if isinstance(generation, int) and not isinstance(generation, bool) else 0,
        requirements=requirements,
        template_labels=tuple(sorted((_text(k), _text(v)) for k, v in list(labels.items())[:MAX_LABELS])),
        node_class=node_class,
        replicas=replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None,
        problem=problem or limits_problem,
        limits=limits,
        usage=usage,
        ready=ready,
        ready_message=ready_message,
        deleting=bool(metadata.get("deletionTimestamp")),
        taints=taints,
    )


def _drivers(annotation: Any) -> tuple[tuple[str, ...], bool]:
    """The drivers the annotation lists, read as efadra.Requested reads it: its comma-separated
    parts, spaces trimmed (a part with other text around a name is not that name); and whether
    one is dra.net."""
    if not isinstance(annotation, str):
        return (), False
    parts = {part.strip() for part in annotation.split(",")}
    listed = [_text(part) for part in sorted(part for part in parts if part)[:MAX_VALUES]]
    return tuple(listed), EFA_DRA_DRIVER in parts


def node_claim_facts(body: Mapping[str, Any], resources: frozenset[str]) -> NodeClaimFacts:
    """A NodeClaim; ``resources`` are the fabric resources whose capacity matters."""
    metadata, name = named_metadata(body, "NodeClaim")
    spec = _mapping(body.get("spec"))
    status = _mapping(body.get("status"))
    requests = _mapping(_mapping(spec.get("resources")).get("requests"))
    capacity = _mapping(status.get("capacity"))
    counted = []
    for resource in sorted(resources & capacity.keys()):
        try:
            amount = parse_quantity(capacity[resource])
        except ValueError:
            amount = 0
        if amount > 0:
            counted.append((resource, amount))
    labels = _mapping(metadata.get("labels"))
    annotations = _mapping(metadata.get("annotations"))
    node_name, provider_id = status.get("nodeName"), status.get("providerID")
    pool = labels.get(NODEPOOL_LABEL)
    drivers, requests_efa_driver = _drivers(annotations.get(REQUESTED_DRA_DRIVERS))
    return NodeClaimFacts(
        name=name,
        node_pool=_text(pool) if isinstance(pool, str) and pool else None,
        node_name=object_name(node_name) if isinstance(node_name, str) and node_name else None,
        provider_id=_text(provider_id) if isinstance(provider_id, str) and provider_id else None,
        requested=tuple(sorted(_text(key) for key in list(requests)[:MAX_VALUES])),
        dra_drivers=drivers,
        requests_efa_driver=requests_efa_driver,
        capacity=tuple(counted),
    )


def _index(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _zone_ids(subnets: Any) -> dict[str, str]:
    """zone -> zone ID from an EC2NodeClass's status.subnets (EC2NodeClass.ZoneInfo())."""
    zone_ids: dict[str, str] = {}
    for entry in subnets[:MAX_LABELS] if isinstance(subnets, list) else ():
        entry = _mapping(entry)
        zone, zone_id = entry.get("zone"), entry.get("zoneID")
        if isinstance(zone, str) and zone and isinstance(zone_id, str) and zone_id:
            zone_ids.setdefault(zone, zone_id)
    return zone_ids


def _reservations(raw: Any, zone_ids: Mapping[str, str]) -> tuple[CapacityReservation, ...]:
    """status.capacityReservations Karpenter may launch into: an entry without an id or instance
    type is none (the CRD requires both), and neither is one whose state is expiring (its
    offering is not Available: reserved_capacity_resolver.go)."""
    found = []
    for entry in raw[:MAX_LABELS] if isinstance(raw, list) else ():
        entry = _mapping(entry)
        if entry.get("state") == "expiring":
            continue
        identifier, instance_type = entry.get("id"), entry.get("instanceType")
        if not isinstance(identifier, str) or not identifier or not isinstance(instance_type, str) or not instance_type:
            continue
        zone = entry.get("availabilityZone")
        zone = zone if isinstance(zone, str) and zone else None
        found.append(
            CapacityReservation(
                id=_text(identifier),
                instance_type=_text(instance_type),
                reservation_type=_text(entry.get("reservationType") or "default"),
                interruptible=entry.get("interruptible") is True,
                availability_zone=_text(zone) if zone is not None else None,
                availability_zone_id=_text(zone_ids[zone]) if zone is not None and zone in zone_ids else None,
            )
        )
    return tuple(found)


def node_class_facts(body: Mapping[str, Any]) -> NodeClassFacts:
    _, name = named_metadata(body, "EC2NodeClass")
    spec = _mapping(body.get("spec"))
    interfaces = spec.get("networkInterfaces")
    reserves = bool(spec.get("capacityReservationSelectorTerms"))
    status = _mapping(body.get("status"))
    reservations = (
        _reservations(status.get("capacityReservations"), _zone_ids(status.get("subnets"))) if reserves else ()
    )
    if not isinstance(interfaces, list):
        return NodeClassFacts(name, None, reserves=reserves, reservations=reservations)
    entries = [_mapping(entry) for entry in interfaces[:MAX_INTERFACES]]
    pinned = sum(1 for entry in entries if entry.get("interfaceType") == EFA_ONLY)
    slots = tuple((_index(entry.get("networkCardIndex")), _index(entry.get("deviceIndex"))) for entry in entries)
    return NodeClassFacts(name, pinned, slots, reserves, reservations)
