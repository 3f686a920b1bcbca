"""What a Karpenter NodePool may launch, judged against the instance catalog. Pure: no I/O, no clock.

A NodePool's requirements (``spec.template.spec.requirements``) are evaluated the way
Karpenter's scheduler does (``sigs.k8s.io/karpenter`` ``scheduling.Requirements.Intersects``):
only keys both the NodePool and the instance type define are compared, so a custom label
never excludes a type; a key the type defines without a value (``instance-gpu-count`` of a CPU
type) fails ``In``, ``Exists`` and the numeric operators and passes ``NotIn`` and
``DoesNotExist``; ``Gt``/``Lt``/``Gte``/``Lte`` compare integers. ``minValues`` is judged where
the catalog knows every type the NodePool could launch (below). Auto Mode's
``eks.amazonaws.com/instance-*`` keys are read as the open-source ``karpenter.k8s.aws/`` ones.

The verdict is the ``Launchable`` condition (SPEC "Elastic pools"), and which types, at which
count, ``status.launchable`` lists. The expensive part (filtering the catalog) depends only on
the catalog and the requirements, so it is cached by them: a NodePool that did not change costs
a dictionary lookup per evaluation.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fabriccap.core.api import ConditionStatus, Reason
from fabriccap.core.catalog import (
    CATALOG_KEYS,
    INSTANCE_TYPE_KEY,
    KARPENTER_LABELS,
    InstanceCatalog,
    InstanceType,
    named_only,
)
from fabriccap.core.config import FabricProfile
from fabriccap.core.facts import DaemonSetFacts, NodeFacts
from fabriccap.core.index import FactIndex
from fabriccap.core.karpenter_facts import (
    NODEPOOL_LABEL,
    ZONE_ID_KEY,
    ZONE_KEY,
    CapacityReservation,
    NodeClassFacts,
    NodePoolFacts,
    Requirement,
)
from fabriccap.core.text import clean_text, first_named, is_decimal

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
_NUMERIC = {"Gt": int.__gt__, "Lt": int.__lt__, "Gte": int.__ge__, "Lte": int.__le__}
AUTO_MODE_GROUP = "eks.amazonaws.com"
AUTO_MODE_PREFIX = "eks.amazonaws.com/instance-"
# EKS Auto Mode labels every node it manages with this (SPEC: platform-managed nodes).
AUTO_MODE_LABEL = ("eks.amazonaws.com/compute-type", "auto")
NODE_CLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"
# Keys that restrict which instance types a NodePool may launch. A key outside them (a custom
# label, the zone, the capacity type, the OS) selects offerings or labels nodes, never types.
_TYPE_KEY_PREFIXES = (KARPENTER_LABELS, AUTO_MODE_PREFIX)
MAX_LISTED_TYPES = 20
MAX_NAMED = 5
# The share of an instance's memory Karpenter's AWS provider keeps for the hypervisor when it
# computes a type's memory capacity (--vm-memory-overhead-percent, default 0.075; v1.15.2
# pkg/providers/instancetype/types.go memory()): what a memory limit is compared against.
VM_MEMORY_OVERHEAD = 0.075
MEBIBYTE = 2**20
# Resources every node of every instance type has some of, though the catalog has no figure.
ALWAYS_HELD = frozenset({"pods", "ephemeral-storage"})


# Deprecated keys Karpenter reads as the current ones (sigs.k8s.io/karpenter v1.15.1
# pkg/apis/v1/labels.go NormalizedLabels, applied by scheduling.NewRequirementWithFlexibility to
# every requirement and template label).
NORMALIZED_KEYS = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE_KEY,
    "beta.kubernetes.io/os": "kubernetes.io/os",
}


def catalog_key(key: str) -> str | None:
    """The catalog's key for a requirement key (deprecated and Auto Mode's spellings mapped);
    None when the catalog has no values for it."""
    key = NORMALIZED_KEYS.get(key, key)
    if key.startswith(AUTO_MODE_PREFIX):
        key = KARPENTER_LABELS + key.removeprefix("eks.amazonaws.com/")
    return key if key in CATALOG_KEYS else None


# karpenter.k8s.aws keys that do not narrow the instance types (karpenter-provider-aws v1.15.2
# pkg/apis/v1/labels.go): the node class and the placement group are no requirement of any type
# (types.go computeRequirements defines neither, so Karpenter's Intersects never compares them),
# and the capacity-reservation keys select a type's reserved offerings. Judged as if they admit
# every type: a superset of what Karpenter launches, so a uniform count over it holds for any
# type the reservations hold (the message says it assumes so).
RESERVATION_KEYS = frozenset(
    KARPENTER_LABELS + name
    for name in ("capacity-reservation-id", "capacity-reservation-type", "capacity-reservation-interruptible")
)
OFFERING_ONLY_KEYS = RESERVATION_KEYS | frozenset(
    KARPENTER_LABELS + name for name in ("ec2nodeclass", "placement-group-id", "placement-group-partition")
)


def restricts_types(key: str) -> bool:
    key = NORMALIZED_KEYS.get(key, key)
    return key in CATALOG_KEYS or (key.startswith(_TYPE_KEY_PREFIXES) and key not in OFFERING_ONLY_KEYS)


def _problem(requirement: Requirement) -> str | None:
    """Why a requirement cannot be evaluated against the catalog, or None."""
    key, operator, values = requirement.key, requirement.operator, requirement.values
    if operator not in OPERATORS:
        return f"operator {operator!r} is not one Karpenter allows ({', '.join(OPERATORS)})"
    if operator in _NUMERIC and (len(values) != 1 or not is_decimal(values[0])):
        return f"{operator} needs one non-negative integer, got {list(values)}"
    if operator in ("In", "NotIn") and not values:
        return f"{operator} needs at least one value"
    if restricts_types(key) and catalog_key(key) is None:
        return "the instance catalog has no values for this label, so the types it admits are not known"
    return None


def _matches(requirement: Requirement, key: str, known: InstanceType) -> bool:
    if key in known.unknown:
        return True  # a fact the catalog lacks cannot exclude the type
    value = known.value_of(key)
    operator = requirement.operator
    if operator == "In":
        return value in requirement.values
    if operator == "NotIn":
        return value is None or value not in requirement.values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if value is None or not is_decimal(value):
        return False
    return bool(_NUMERIC[operator](int(value), int(requirement.values[0])))


# Keys whose requirement only accelerator types can meet. The catalog lists every accelerator
# type of the module's DRA metadata and supplement, so a NodePool with one of these can launch
# no type it lacks, except one whose name or maker the catalog has never seen (below).
_ACCELERATOR_KEYS = frozenset(
    KARPENTER_LABELS + f"instance-{kind}-{part}"
    for kind in ("gpu", "accelerator")
    for part in ("name", "manufacturer", "count", "memory")
)


@dataclass(frozen=True, slots=True)
class Admitted:
    """The catalog types a NodePool's requirements admit, and what could not be evaluated."""

    types: tuple[InstanceType, ...]  # by name
    problems: tuple[str, ...]  # "requirement 2 (key Op [values]): why", one per unevaluable requirement
    not_in_catalog: tuple[str, ...]  # names an instance-type In lists that the catalog lacks
    # minValues the admitted types cannot meet, where the catalog knows every type the NodePool
    # could launch: Karpenter (--min-values-policy Strict, the default) then launches nothing.
    unmet_min_values: tuple[str, ...]


def _confined(requirements: Sequence[tuple[Requirement, str]]) -> bool:
    """Whether the requirements admit only types the catalog knows: a list of instance types, or
    a requirement only accelerator types meet."""
    for requirement, key in requirements:
        if key == INSTANCE_TYPE_KEY and requirement.operator == "In":
            return True
        if key in _ACCELERATOR_KEYS and requirement.operator in ("In", "Exists", "Gt", "Gte", "Lt", "Lte"):
            return True
    return False


@functools.lru_cache(maxsize=64)
def _known_types(
    catalog: InstanceCatalog | None, overrides: tuple[tuple[str, int], ...]
) -> tuple[dict[str, InstanceType], tuple[str, ...]]:
    """The catalog's types plus those only ``overrides`` names, and all their names in order."""
    known: dict[str, InstanceType] = dict(catalog.types) if catalog is not None else {}
    for name, maximum in overrides:
        if name not in known:
            known[name] = named_only(name, maximum)
    return known, tuple(sorted(known))


@functools.lru_cache(maxsize=64)
def _accelerator_names(
    catalog: InstanceCatalog | None, overrides: tuple[tuple[str, int], ...], resources: tuple[str, ...]
) -> frozenset[str]:
    """The accelerator types: those with one of ``resources`` (a profile's accelerator resources),
    and the types only ``overrides`` names (a profile lists a type to carry the fabric)."""
    known, _ = _known_types(catalog, overrides)
    return frozenset(
        name
        for name, candidate in known.items()
        if candidate.accelerators(resources) > 0 or catalog is None or catalog.get(name) is None
    )


@functools.lru_cache(maxsize=16384)
def _admitting(
    catalog: InstanceCatalog | None, overrides: tuple[tuple[str, int], ...], requirement: Requirement, key: str
) -> frozenset[str]:
    """The names of the types one evaluable requirement admits. Cached apart from the NodePools
    that carry it: real NodePools share most of their requirements (a family list, a size
    exclusion), so a thousand NodePools cost a few dozen scans of the catalog."""
    known, _ = _known_types(catalog, overrides)
    return frozenset(name for name, candidate in known.items() if _matches(requirement, key, candidate))


# An accelerator's name or maker the catalog has never seen (instance-gpu-name In [gb200]) names
# types Karpenter may launch that the catalog lacks (p6e-gb200): it is said, not dropped.
_ACCELERATOR_NAME_KEYS = frozenset(
    KARPENTER_LABELS + f"instance-{kind}-{part}" for kind in ("gpu", "accelerator") for part in ("name", "manufacturer")
)


def _unseen_accelerators(known: Mapping[str, InstanceType], evaluable: Sequence[tuple[Requirement, str]]) -> set[str]:
    """ "types with <key> <value>" for each In value of an accelerator name key no type carries,
    unless a type lacks the fact (one only a profile's instanceTypes names: it may be such)."""
    unseen: set[str] = set()
    for requirement, key in evaluable:
        if key not in _ACCELERATOR_NAME_KEYS or requirement.operator != "In":
            continue
        if any(key in candidate.unknown for candidate in known.values()):
            continue
        carried = {candidate.value_of(key) for candidate in known.values()}
        unseen.update(f"types with {key} {value}" for value in requirement.values if value not in carried)
    return unseen


@functools.lru_cache(maxsize=4096)
def admitted_types(
    catalog: InstanceCatalog | None, overrides: tuple[tuple[str, int], ...], requirements: tuple[Requirement, ...]
) -> Admitted:
    """The types of ``catalog`` (plus types only ``overrides`` names) that ``requirements`` admit.
    Cached: the arguments are the whole input (a catalog compares by identity)."""
    known, names = _known_types(catalog, overrides)
    problems: list[str] = []
    evaluable: list[tuple[Requirement, str]] = []
    for position, requirement in enumerate(requirements, start=1):
        problem = _problem(requirement)
        if problem is not None:
            problems.append(f"requirement {position} ({requirement.describe()}): {problem}")
            continue
        key = catalog_key(requirement.key)
        if key is not None:
            evaluable.append((requirement, key))
    admitted = set(names)
    for requirement, key in evaluable:
        admitted &= _admitting(catalog, overrides, requirement, key)
    types = tuple(known[name] for name in names if name in admitted)
    not_in_catalog = sorted(
        {
            value
            for requirement, key in evaluable
            if key == INSTANCE_TYPE_KEY and requirement.operator == "In"
            for value in requirement.values
            if value not in known
        }
        | _unseen_accelerators(known, evaluable)
    )
    unmet = []
    if _confined(evaluable):
        for requirement, key in evaluable:
            if requirement.min_values is None:
                continue
            values = {value for candidate in types if (value := candidate.value_of(key)) is not None}
            if len(values) < requirement.min_values:
                unmet.append(
                    f"minValues {requirement.min_values} on {requirement.key}, but the types it admits carry "
                    f"{len(values)} value{'s' if len(values) != 1 else ''}"
                )
    return Admitted(types, tuple(problems), tuple(not_in_catalog), tuple(unmet))


@dataclass(frozen=True, slots=True)
class LaunchableTypes:
    """A NodePool's verdict for one fabric: the ``Launchable`` condition and ``status.launchable``."""

    node_pool: str
    status: ConditionStatus
    reason: Reason
    message: str
    # The accelerator types it may launch and the count a node of each gets, by name.
    types: tuple[tuple[str, int], ...]
    # A pool of the fabric: it may launch an accelerator type with a maximum above 0 (or names
    # types the catalog lacks, which may be such).
    of_fabric: bool
    platform: bool  # Auto Mode: the platform advertises the fabric, no DaemonSet to find
    uniform_count: int | None  # N when every type it may launch gets N > 0
    # When a node gets the uniform count: "when a pod requests it", or on every node when the
    # EC2NodeClass pins it (the Ready message repeats it).
    when: str = ""
    # A False verdict whose cause no request changes: Karpenter attaches the fabric to no node it
    # launches (or launches none), or no provider DaemonSet runs on any of them. Not so for
    # MixedLaunchableCounts (a node gets the fabric when asked), for a cause the catalog may be
    # wrong about, or for Unknown: whether asking helps is then not known.
    asking_cannot_help: bool = False

    @property
    def counts(self) -> dict[int, int]:
        """count -> instance types with it, the larger count first."""
        spread: dict[int, int] = {}
        for _, count in self.types:
            spread[count] = spread.get(count, 0) + 1
        return dict(sorted(spread.items(), reverse=True))

    @property
    def offers_fabric(self) -> bool:
        """SPEC (withoutFabric): the NodePool can launch the fabric: Launchable is not Unknown and
        some type it may launch gets more than 0."""
        return self.status != ConditionStatus.UNKNOWN and any(count > 0 for _, count in self.types)


# Labels every node Karpenter launches carries whose value the offering picks, not the type:
# the zone, zone ID and capacity type (karpenter-provider-aws v1.15.2 types.go
# computeRequirements and the offerings), the region, the hostname and the OS (the kubelet), each
# with the values the NodePool allows. None: any value; the capacity types are Karpenter v1's
# (on-demand, spot, and reserved where the EC2NodeClass selects reservations, or is not known),
# and the OS is linux unless the NodePool asks for another.
CAPACITY_TYPE_KEY = "karpenter.sh/capacity-type"
OFFERING_KEYS: dict[str, tuple[str, ...] | None] = {
    "kubernetes.io/os": ("linux",),
    CAPACITY_TYPE_KEY: ("on-demand", "spot", "reserved"),
    ZONE_KEY: None,
    ZONE_ID_KEY: None,
    "topology.kubernetes.io/region": None,
    "kubernetes.io/hostname": None,
}
# Stands for a value the NodePool leaves open: no label value is spelt so, so a DaemonSet's
# Exists admits it and its In does not (the node may be in a zone the DaemonSet leaves out).
ANY_VALUE = "?"
MAX_OFFERING_VALUES = 16
# The label sets a type's node is judged in are every combination of the offering values the
# NodePool allows: a few (zones times capacity types) for a real NodePool, but each of six keys
# may list up to MAX_OFFERING_VALUES, and their product (16^5 x 3) would hold a round for
# minutes. Past this many, the NodePool is not judged (Unknown), rather than judged in part.
MAX_LABEL_SETS = 256
# The kubelet labels every node with both spellings of these (beta first, as Karpenter reads them).
KUBELET_BETA_LABELS = {"beta.kubernetes.io/os": "kubernetes.io/os", "beta.kubernetes.io/arch": "kubernetes.io/arch"}


def _allowed(requirements: Sequence[Requirement], key: str, default: tuple[str, ...] | None) -> tuple[str, ...]:
    """The values of ``key`` a node of the NodePool may carry: those its In lists all name, else
    ``default`` (ANY_VALUE when any), less those a NotIn names."""
    allowed: list[str] | None = None
    excluded: set[str] = set()
    for requirement in requirements:
        if NORMALIZED_KEYS.get(requirement.key, requirement.key) != key:
            continue
        if requirement.operator == "In":
            allowed = [
                value for value in (requirement.values if allowed is None else allowed) if value in requirement.values
            ]
        elif requirement.operator == "NotIn":
            excluded.update(requirement.values)
    values = allowed if allowed is not None else list(default or (ANY_VALUE,))
    return tuple(value for value in values if value not in excluded)[:MAX_OFFERING_VALUES]


def offering_choices(pool: NodePoolFacts, reserves: bool = True) -> list[tuple[str, tuple[str, ...]]]:
    """The values of each offering label (OFFERING_KEYS) a node of ``pool`` may carry
    (``reserves``: its node class may give reserved capacity; when not, no node is reserved,
    whatever the NodePool allows)."""
    requirements = pool.derived_requirements()
    choices = [(key, _allowed(requirements, key, default)) for key, default in OFFERING_KEYS.items()]
    if reserves:
        return choices
    return [
        (key, tuple(value for value in values if value != "reserved") if key == CAPACITY_TYPE_KEY else values)
        for key, values in choices
    ]


def reserved_only(pool: NodePoolFacts) -> str | None:
    """Why every node of ``pool`` must be reserved capacity, or None: its capacity types allow
    only ``reserved``, or it requires a capacity-reservation label, which only reserved offerings
    carry (karpenter-provider-aws v1.15.2 base_resolver.go gives on-demand and spot offerings
    these keys as DoesNotExist)."""
    requirements = pool.derived_requirements()
    capacity = _allowed(requirements, CAPACITY_TYPE_KEY, OFFERING_KEYS[CAPACITY_TYPE_KEY])
    if capacity and set(capacity) <= {"reserved"}:
        return f"{CAPACITY_TYPE_KEY} allows only reserved"
    for requirement in requirements:
        if requirement.key in RESERVATION_KEYS and requirement.operator in ("In", "Exists"):
            return f"it requires {requirement.describe()}, which only reserved capacity carries"
    return None


def _reservation_excluded_by(pool: NodePoolFacts, reservation: CapacityReservation) -> Requirement | None:
    """The first of the NodePool's requirements that the offering of ``reservation`` does not
    meet, or None. That offering carries the capacity-reservation labels, and is pinned to the
    reservation's zone and zone ID (reserved_capacity_resolver.go: ``LabelTopologyZone In
    [reservation.AvailabilityZone]``): a NodePool confined to other zones never launches into it.
    A zone ID the class's subnets do not give is no label of the offering, which Karpenter's
    Intersects then does not compare."""
    for requirement in pool.derived_requirements():
        key = NORMALIZED_KEYS.get(requirement.key, requirement.key)
        if key not in RESERVATION_KEYS and key != ZONE_KEY and key != ZONE_ID_KEY:
            continue
        value = reservation.label_value(key)
        if key == ZONE_ID_KEY and value is None:
            continue
        operator = requirement.operator
        if operator == "In" and value not in requirement.values:
            return requirement
        if (operator == "NotIn" and value in requirement.values) or operator == "DoesNotExist":
            return requirement
        if operator in _NUMERIC:
            bound = requirement.values[0] if len(requirement.values) == 1 else ""
            if value is None or not (is_decimal(value) and is_decimal(bound)):
                return requirement  # Gt/Lt/Gte/Lte compare integers: a value that is none meets none
            if not _NUMERIC[operator](int(value), int(bound)):
                return requirement
    return None


def reserved_types(pool: NodePoolFacts, node_class: NodeClassFacts) -> frozenset[str]:
    """The instance types of the class's capacity reservations whose offerings the NodePool's
    requirements admit: the only types Karpenter has a reserved offering of
    (reserved_capacity_resolver.go: ``reservation.InstanceType == it.Name``)."""
    return frozenset(
        reservation.instance_type
        for reservation in node_class.reservations
        if _reservation_excluded_by(pool, reservation) is None
    )


def _reservations_left_out(pool: NodePoolFacts, node_class: NodeClassFacts) -> str:
    """Which of the class's reservations the NodePool's requirements leave out, and by which, for
    a message ("" when none)."""
    left_out, zonal = [], False
    for reservation in node_class.reservations:
        requirement = _reservation_excluded_by(pool, reservation)
        if requirement is None:
            continue
        zonal |= NORMALIZED_KEYS.get(requirement.key, requirement.key) in (ZONE_KEY, ZONE_ID_KEY)
        left_out.append(
            f"{reservation.id} ({reservation.instance_type} in {reservation.availability_zone or 'no zone'})"
            f" by {requirement.key} {requirement.operator}"
        )
    if not left_out:
        return ""
    return f"its requirements leave out {_named(left_out)}" + (
        " (Karpenter launches into a reservation only in its own zone)" if zonal else ""
    )


def launched_label_sets(
    pool: NodePoolFacts, known: InstanceType, choices: Sequence[tuple[str, tuple[str, ...]]]
) -> list[dict[str, str]]:
    """The label sets a node Karpenter launches for ``pool`` as ``known`` may carry: the type's
    own, the NodePool's template labels and single-valued requirements, its name and node class,
    and one of each combination of the offering labels' ``choices`` (``offering_choices``)."""
    labels = dict(known.labels)
    for key, value in list(labels.items()):
        if key.startswith(KARPENTER_LABELS + "instance-"):
            labels[AUTO_MODE_PREFIX + key.removeprefix(KARPENTER_LABELS + "instance-")] = value
    for requirement in pool.requirements:
        key = NORMALIZED_KEYS.get(requirement.key, requirement.key)
        if requirement.operator == "In" and len(requirement.values) == 1 and key not in labels:
            labels[key] = requirement.values[0]
    labels.update((NORMALIZED_KEYS.get(key, key), value) for key, value in pool.template_labels)
    labels[NODEPOOL_LABEL] = pool.name
    if pool.node_class is not None:
        if pool.node_class.group == AUTO_MODE_GROUP:
            labels[AUTO_MODE_LABEL[0]] = AUTO_MODE_LABEL[1]
        else:
            labels[NODE_CLASS_LABEL] = pool.node_class.name
    sets = []
    for values in itertools.product(*(allowed for _, allowed in choices)):
        node = {**labels, **{key: value for (key, _), value in zip(choices, values, strict=True)}}
        node.update((beta, node[stable]) for beta, stable in KUBELET_BETA_LABELS.items() if stable in node)
        sets.append(node)
    return sets


def capacity_of(profile: FabricProfile, known: InstanceType, count: int, resource: str) -> int | None:
    """A node of ``known``'s capacity of ``resource`` as Karpenter counts it against a NodePool's
    limits, or None when the catalog does not know it (then the limit cannot exclude the type)."""
    if resource == "nodes":
        return 1
    if resource == profile.resource:
        return count
    if resource == "cpu":
        cpu = known.value_of(KARPENTER_LABELS + "instance-cpu")
        return int(cpu) if cpu is not None and is_decimal(cpu) else None
    if resource == "memory":
        mebibytes = known.value_of(KARPENTER_LABELS + "instance-memory")
        if mebibytes is None or not is_decimal(mebibytes):
            return None
        total = int(mebibytes)
        return (total - math.ceil(total * VM_MEMORY_OVERHEAD)) * MEBIBYTE
    if resource in known.resources or resource in profile.target_nodes.accelerator_resources:
        return known.resources.get(resource, 0)
    return None  # pods, ephemeral-storage...: not in the catalog


def _limits_exceeded(profile: FabricProfile, remaining: Mapping[str, int], known: InstanceType, count: int) -> bool:
    """Whether a node of ``known`` would exceed one of the limits (``remaining``: what they leave)."""
    for resource, left in remaining.items():
        capacity = capacity_of(profile, known, count, resource)
        if capacity is None:
            # Karpenter filters a type whose capacity exceeds what is left (filterByRemainingResources:
            # Cmp(capacity, remaining) > 0). A figure the catalog lacks is at least 0, so it exceeds a
            # remainder below 0; and every type has room for pods and some ephemeral storage, so those
            # exceed a remainder of 0 too. Between, the limit cannot be judged and excludes nothing.
            if left < 0 or (left == 0 and resource in ALWAYS_HELD):
                return True
        elif capacity > left:
            return True
    return False


def _amount(resource: str, amount: int) -> str:
    if resource == "memory" and amount and amount % 2**30 == 0:
        return f"{amount // 2**30}Gi"
    return f"{amount // MEBIBYTE}Mi" if resource == "memory" and amount % MEBIBYTE == 0 and amount else str(amount)


def _limits(pool: NodePoolFacts) -> str:
    used = dict(pool.usage)
    return ", ".join(
        f"{resource} {_amount(resource, limit)}"
        + (f" ({_amount(resource, used[resource])} in use)" if used.get(resource) else "")
        for resource, limit in pool.limits
    )


def _named(names: Sequence[str]) -> str:
    return first_named(names, MAX_NAMED)


def _spread(types: Iterable[tuple[str, int]]) -> str:
    by_count: dict[int, list[str]] = {}
    for name, count in types:
        by_count.setdefault(count, []).append(name)
    return "; ".join(f"{count} on {_named(names)}" for count, names in sorted(by_count.items(), reverse=True))


def fits_network_cards(slots: Sequence[tuple[int | None, int | None]], known: InstanceType) -> bool | None:
    """Whether ``known``'s network cards take every pinned interface (``slots``: each
    (networkCardIndex, deviceIndex) an EC2NodeClass pins), as Karpenter's networkInterfaceCheck
    judges (karpenter-provider-aws v1.15.2 pkg/providers/instancetype/compatibility/compatibility.go:
    (2) the card index must be one the type has, (3) the device index below that card's
    MaximumNetworkInterfaces). None when the catalog does not know its cards or a slot is not
    readable. No slot (networkInterfaces unset or empty): every type fits."""
    if not slots:
        return True
    cards = known.network_cards
    readable = [(card, device) for card, device in slots if card is not None and device is not None]
    if cards is None or len(readable) < len(slots):
        return None
    return all(card < len(cards) and device < cards[card] for card, device in readable)


def _misfit(slots: Sequence[tuple[int | None, int | None]], known: InstanceType) -> str:
    """The first pinned interface ``known``'s network cards cannot take, for a message."""
    cards = known.network_cards or ()
    for card, device in slots:
        if card is None or device is None:
            continue
        if card >= len(cards):
            return f"{known.name} has {len(cards)} network card{'s' if len(cards) != 1 else ''}, none of index {card}"
        if device >= cards[card]:
            return f"{known.name}'s network card {card} takes {cards[card]} interfaces, none at device index {device}"
    return f"{known.name}'s network cards"


def _unreadable_slots(slots: Sequence[tuple[int | None, int | None]]) -> str:
    """Which pinned interfaces have no readable index, for a message ("" when all do)."""
    positions = [str(position) for position, (card, device) in enumerate(slots) if card is None or device is None]
    return (
        f" (entries {', '.join(positions[:MAX_NAMED])} have no integer networkCardIndex or deviceIndex)"
        if positions
        else ""
    )


def _not_launching(pool: NodePoolFacts, node_class_missing: bool) -> str | None:
    """Why Karpenter's provisioner launches nothing from ``pool`` whatever its requirements, or
    None. It skips a NodePool being deleted and one whose Ready condition is not True
    (sigs.k8s.io/karpenter v1.15.1 provisioner.go NewScheduler), and Karpenter sets Ready False
    when the EC2NodeClass is missing or not ready (NodeClassReady)."""
    if pool.deleting:
        return "it is being deleted (metadata.deletionTimestamp), and Karpenter launches from no such NodePool"
    if node_class_missing and pool.node_class is not None:
        # Checked apart from Ready: Karpenter's Ready may lag the class's deletion, and a class
        # fabriccap cannot read must not count as "pins nothing".
        return f"its nodeClassRef names EC2NodeClass {pool.node_class.name}, which does not exist"
    if pool.ready == ConditionStatus.TRUE:
        return None
    if pool.ready is None:
        # A NodePool just created has no conditions until Karpenter's status controllers set them
        # (seconds); IsTrue(Ready) is false until then, so Karpenter launches nothing from it yet.
        # Said so rather than assumed Ready: fail closed, and the next round sees Ready.
        return "Karpenter has not reported it Ready yet (no Ready condition), and launches from it only then"
    detail = f" ({pool.ready_message})" if pool.ready_message else ""
    return f"Karpenter reports it Ready {pool.ready.value}{detail}, and launches only from a Ready NodePool"


def _untolerated(pool: NodePoolFacts, providers: Sequence[DaemonSetFacts], fabric: str, resource: str) -> str:
    """Why no provider DaemonSet would run on a node of ``pool``: the taint each does not tolerate."""
    held = [
        f"{daemon_set.qualified_name} does not tolerate {taint.describe()}"
        for daemon_set in providers
        if (taint := daemon_set.untolerated(pool.taints)) is not None
    ]
    return (
        f"NodePool {pool.name} taints its nodes (spec.template.spec.taints) and no {fabric} provider DaemonSet"
        f" tolerates them all ({first_named(held, MAX_NAMED, '; ')}): the DaemonSet controller runs none of"
        f" their pods on the nodes NodePool {pool.name} launches, which would never advertise {resource}; add a"
        " toleration of the taint to the DaemonSet's pod template (its chart's tolerations value)"
    )


def judge_node_pool(
    profile: FabricProfile,
    pool: NodePoolFacts,
    node_class: NodeClassFacts | None,
    providers: Sequence[DaemonSetFacts] | None,
    node_class_missing: bool = False,
) -> LaunchableTypes:
    """The NodePool's ``Launchable`` verdict for ``profile``. ``providers``: the fabric's
    provider DaemonSets, judged by whether one would run on each node the NodePool may launch
    (None or empty: no DaemonSet found, which Ready judges; the platform needs none).
    ``node_class_missing``: its ``nodeClassRef`` names an EC2NodeClass the cluster does not have."""
    overrides = tuple(sorted(profile.instance_types.items()))
    catalog = profile.catalog
    admitted = admitted_types(catalog, overrides, pool.derived_requirements())
    accelerator_names = _accelerator_names(catalog, overrides, profile.target_nodes.accelerator_resources)
    accelerators = [known for known in admitted.types if known.name in accelerator_names]
    maxima = dict(overrides)

    def maximum_of(known: InstanceType) -> int:
        return maxima.get(known.name, known.maximum)

    pinned = node_class.efa_only_interfaces if node_class is not None else None
    reserves = node_class.reserves if node_class is not None else True  # a class not read: may reserve
    platform = pool.node_class is not None and pool.node_class.group == AUTO_MODE_GROUP

    # A static NodePool (spec.replicas) launches its nodes from the template alone: Karpenter's
    # provisioner never schedules pods onto it (sigs.k8s.io/karpenter v1.15.1 NewScheduler skips
    # nodepoolutils.IsStatic), so no NodeClaim of it requests the fabric and the AWS provider
    # attaches none unless the EC2NodeClass pins efa-only interfaces (v1.15.2 types.go efas()).
    static = pool.replicas is not None

    # A NodePool that launches only into reserved capacity launches only the types its class has
    # reservations of (a class not read: not judged, as before).
    reserved_reason = reserved_only(pool) if node_class is not None else None
    reservable = reserved_types(pool, node_class) if node_class is not None and reserved_reason else frozenset()
    unreserved: list[str] = []  # types with no reserved offering, in a NodePool that needs one
    slots = node_class.interfaces if node_class is not None and pinned is not None else ()
    off_cards: list[str] = []  # types whose network cards cannot take the pinned interfaces
    cards_unknown: list[str] = []  # types with the fabric whose network cards the catalog lacks

    def count_of(known: InstanceType) -> int | None:
        maximum = maximum_of(known)
        if reserved_reason and known.name not in reservable:
            unreserved.append(known.name)
            return None
        if pinned is None:
            return 0 if static else maximum
        if pinned > maximum:
            return None  # the class pins more than the type carries: no launch
        fits = fits_network_cards(slots, known)
        if fits is False:
            off_cards.append(known.name)
            return None
        if fits is None and pinned > 0:
            cards_unknown.append(known.name)
        return pinned

    counted = [(known, count) for known in accelerators if (count := count_of(known)) is not None]
    by_name = {known.name: known for known in accelerators}
    # Limits: a type whose node would take the NodePool past one of them is never launched.
    remaining = pool.remaining()  # usually none: most NodePools set no limits, or only cpu
    over_limits = [
        known.name for known, count in counted if remaining and _limits_exceeded(profile, remaining, known, count)
    ]
    beyond_limits = frozenset(over_limits)
    types = tuple((known.name, count) for known, count in counted if known.name not in beyond_limits)
    of_fabric = any(maximum_of(known) > 0 for known in accelerators) or bool(admitted.not_in_catalog)
    fabric = profile.spoken_name

    def verdict(
        status: ConditionStatus,
        reason: Reason,
        message: str,
        uniform: int | None = None,
        when: str = "",
        asking_cannot_help: bool = False,
    ) -> LaunchableTypes:
        return LaunchableTypes(
            pool.name, status, reason, message, types, of_fabric, platform, uniform, when, asking_cannot_help
        )

    idle = _not_launching(pool, node_class_missing)
    if idle is not None:
        # Karpenter launches nothing from it now, so it offers no type (offers_fabric False); it
        # stays a pool of the fabric by its requirements, so the status says why.
        return LaunchableTypes(
            pool.name,
            ConditionStatus.FALSE,
            Reason.NO_FABRIC_INSTANCE_TYPES,
            f"NodePool {pool.name} launches nothing now: {idle}",
            (),
            of_fabric,
            platform,
            None,
            asking_cannot_help=True,
        )
    # What could not be read (a list cut at its bound) is as unevaluable as a bad requirement.
    unread = ((pool.problem,) if pool.problem else ()) + admitted.problems
    if unread:
        return verdict(
            ConditionStatus.UNKNOWN,
            Reason.REQUIREMENTS_NOT_EVALUATED,
            f"NodePool {pool.name}: {'; '.join(unread[:3])}",
        )
    if admitted.not_in_catalog:
        return verdict(
            ConditionStatus.UNKNOWN,
            Reason.INSTANCE_TYPES_NOT_IN_CATALOG,
            f"NodePool {pool.name} may launch {_named(admitted.not_in_catalog)}, which the instance catalog "
            f"({catalog.source if catalog else 'none'}) does not list; add them to the profile's "
            "instanceTypes",
        )
    # A type whose cards are not known gets the pinned count if Karpenter launches it (it reads
    # the cards from EC2 at launch), and is not launched otherwise: either way no node gets
    # another count. So such types change the verdict only when they are all the NodePool has
    # left: then whether it launches anything is not known.
    unknown_cards = [name for name in cards_unknown if name not in beyond_limits]
    class_name = node_class.name if node_class else ""
    cards_not_listed = (
        f"the instance catalog ({catalog.source if catalog else 'none'}) does not list the network cards of"
        f" {_named(unknown_cards)}, which Karpenter launches only if they take the pinned interfaces"
    )
    if unknown_cards and set(unknown_cards) == {name for name, _ in types}:
        unreadable = _unreadable_slots(slots)
        return verdict(
            ConditionStatus.UNKNOWN,
            Reason.INSTANCE_TYPES_NOT_IN_CATALOG,
            f"NodePool {pool.name}'s EC2NodeClass {class_name} pins networkInterfaces{unreadable}, so which types"
            " take them is not known"
            if unreadable
            else f"NodePool {pool.name}'s EC2NodeClass {class_name} pins networkInterfaces and {cards_not_listed}."
            " Karpenter reads the cards from EC2 at launch; fabriccap cannot. A NodePool that also admits a type"
            " whose cards the catalog lists gets a verdict",
        )
    if admitted.unmet_min_values:
        return verdict(
            ConditionStatus.FALSE,
            Reason.NO_FABRIC_INSTANCE_TYPES,
            f"NodePool {pool.name} launches nothing: {'; '.join(admitted.unmet_min_values)}"
            " (Karpenter's default --min-values-policy Strict)",
            asking_cannot_help=True,
        )
    with_fabric = [(name, count) for name, count in types if count > 0]
    if not with_fabric:
        # Each cause but the last is one no request changes; the last may be the catalog's gap.
        known_cause = True
        if over_limits and any(count > 0 for known, count in counted):
            why = (
                f"its limits ({_limits(pool)}) leave room for none of the {len(over_limits)} accelerator types"
                f" they admit ({_named(over_limits)})"
            )
        elif pinned == 0:
            why = f"its EC2NodeClass {node_class.name if node_class else ''} sets networkInterfaces without efa-only"
        elif off_cards and not types:
            why = (
                f"its EC2NodeClass {node_class.name if node_class else ''} pins networkInterfaces the network cards"
                f" of {_named(off_cards)} cannot take ({_misfit(slots, by_name[off_cards[0]])}), and Karpenter"
                " launches no type that cannot take them all"
            )
        elif unreserved and not types and node_class is not None:
            held = sorted({reservation.instance_type for reservation in node_class.reservations})
            why = (
                f"it launches only into reserved capacity ({reserved_reason}), and its EC2NodeClass"
                f" {node_class.name} "
                + (
                    f"has capacity reservations (status.capacityReservations) only of {_named(held)}"
                    if held
                    else "has no capacity reservation Karpenter resolved (status.capacityReservations is empty)"
                    if node_class.reserves
                    else "selects no capacity reservations (no spec.capacityReservationSelectorTerms)"
                )
            )
            if left_out := _reservations_left_out(pool, node_class):
                why += f"; {left_out}"
        elif pinned and not types and accelerators:
            why = (
                f"its EC2NodeClass {node_class.name if node_class else ''} pins {pinned} efa-only interfaces, more than"
                f" any of them carries ({_named([known.name for known in accelerators])})"
            )
        elif static and pinned is None and accelerators:
            why = (
                f"it is a static NodePool (spec.replicas {pool.replicas}), whose nodes Karpenter launches for no pod,"
                " so with no EFA unless its EC2NodeClass pins efa-only interfaces"
            )
        elif types:
            why = f"the accelerator types they admit carry no {fabric}: {_named([name for name, _ in types])}"
        else:
            why = f"they admit no accelerator type of the catalog ({len(admitted.types)} types in all)"
            known_cause = False
        return verdict(
            ConditionStatus.FALSE,
            Reason.NO_FABRIC_INSTANCE_TYPES,
            f"NodePool {pool.name}'s requirements admit no accelerator type that gets {fabric}: {why}",
            asking_cannot_help=known_cause,
        )
    if len({count for _, count in types}) > 1:
        return verdict(
            ConditionStatus.FALSE,
            Reason.MIXED_LAUNCHABLE_COUNTS,
            f"NodePool {pool.name} may launch {len(types)} accelerator types with different {profile.resource}"
            f" maxima ({_spread(types)}): no one request fits every node it launches",
        )
    (count,) = {count for _, count in types}
    if providers and not platform:
        # A node of the NodePool is served by a DaemonSet that tolerates its template's taints and
        # whose node selector and affinity admit its labels (the DaemonSet controller's predicates).
        tolerating = [daemon_set for daemon_set in providers if daemon_set.untolerated(pool.taints) is None]
        if not tolerating:
            return verdict(
                ConditionStatus.FALSE,
                Reason.PROVIDER_EXCLUDES_INSTANCE_TYPES,
                _untolerated(pool, providers, fabric, profile.resource),
                asking_cannot_help=True,
            )

        def served(labels: Mapping[str, str]) -> bool:
            return any(daemon_set.would_run_on(labels) for daemon_set in tolerating)

        choices = offering_choices(pool, reserves)
        if (combinations := math.prod(len(values) for _, values in choices)) > MAX_LABEL_SETS:
            return verdict(
                ConditionStatus.UNKNOWN,
                Reason.REQUIREMENTS_NOT_EVALUATED,
                f"NodePool {pool.name} allows {combinations} combinations of its nodes' zone, capacity type and"
                f" other offering labels, more than the {MAX_LABEL_SETS} the provider DaemonSets are judged against",
            )
        excluded = [
            name
            for name, _ in types
            # No label set: the NodePool's own requirements conflict (zone In [a] NotIn [a]), so it
            # launches no such node, and an empty all() must not read as "admitted".
            if not (sets := launched_label_sets(pool, by_name[name], choices)) or not all(map(served, sets))
        ]
        if excluded:
            which = "" if len(tolerating) == len(providers) else " that tolerate its taints"
            return verdict(
                ConditionStatus.FALSE,
                Reason.PROVIDER_EXCLUDES_INSTANCE_TYPES,
                f"the node selector or affinity of the {fabric} provider DaemonSets{which} leave out"
                f" {len(excluded)} of the {len(types)} types NodePool {pool.name} may launch ({_named(excluded)}):"
                " their nodes would never advertise it",
                # Asking may still get a type the provider serves, unless it serves none.
                asking_cannot_help=len(excluded) == len(types),
            )
    how = f"its EC2NodeClass pins {pinned} efa-only interfaces" if pinned else "when a pod requests it"
    when = f"on every node ({how})" if pinned else how
    if over_limits:
        how += f"; its limits ({_limits(pool)}) leave out {_named(over_limits)}"
    if off_cards:
        how += f"; the network cards of {_named(off_cards)} cannot take its pinned interfaces"
    if unknown_cards:
        how += f"; {cards_not_listed}"
    if reserved_reason:
        how += "; reserved capacity only, of its EC2NodeClass's reservations"
        if unreserved:
            how += f" (none of {_named(unreserved)})"
    elif node_class is None and any(requirement.key in RESERVATION_KEYS for requirement in pool.derived_requirements()):
        how += "; assuming its capacity reservations are of these types"
    return verdict(
        ConditionStatus.TRUE,
        Reason.UNIFORM_LAUNCHABLE_COUNT,
        f"every one of the {len(types)} accelerator types NodePool {pool.name} may launch gets "
        f"{profile.resource}: {count} ({how})",
        uniform=count,
        when=when,
    )


MAX_REFUSAL = 400  # the Launchable message repeated in an Event (cut at 1024 in all)


def launch_refusal(launchable: LaunchableTypes | None) -> str | None:
    """Why asking for the fabric would get a job no node with it from its pool's NodePool: the
    Launchable verdict, when that is False for a cause no request changes (asking_cannot_help).
    None otherwise: an Unknown verdict, or none at all, does not know that asking would not help
    (a p5 node gets EFA when a pod asks), so the job keeps the advice to ask."""
    if launchable is None or launchable.status != ConditionStatus.FALSE or not launchable.asking_cannot_help:
        return None
    return clean_text(
        f"NodePool {launchable.node_pool} offers it on no node (Launchable {launchable.status.value}"
        f" {launchable.reason.value}: {launchable.message})",
        MAX_REFUSAL,
    )


# -- nodes Karpenter launched without the fabric


def launched_without_fabric(
    profile: FabricProfile, node: NodeFacts, has_devices: bool, index: FactIndex
) -> tuple[str | None, str | None]:
    """(why ``node`` was launched without the fabric on purpose, or None; a NodeClaim problem to
    report, or None).

    Karpenter's AWS provider attaches EFA interfaces only when the NodeClaim requests
    ``vpc.amazonaws.com/efa`` (``spec.resources.requests``: the pods it was launched for asked
    for it) or lists ``dra.net`` in ``karpenter.sh/requested-dra-drivers`` (efadra.Requested), or when
    its EC2NodeClass pins ``efa-only`` interfaces (v1.15.2 ``getEFACountForInstance``); its
    ``status.capacity`` then carries the resource. A NodeClaim with none of these made a node
    without the fabric, and judging that node would blame the plugin for what was on purpose.
    """
    claims = index.claims_of(node)
    if not claims:
        return None, None
    if len(claims) > 1:
        names = ", ".join(claim.name for claim in claims[:MAX_NAMED])
        return None, f"node {node.name} is named by {len(claims)} NodeClaims ({names}); it is judged as any node"
    (claim,) = claims
    if has_devices or claim.capacity_of(profile.resource) > 0:
        return None, None
    if profile.resource in claim.requested or claim.requests_efa_driver:
        return None, None
    pool = index.node_pools.get(claim.node_pool) if claim.node_pool else None
    node_class = index.node_class_of(pool) if pool is not None else None
    fabric = profile.spoken_name
    if node_class is not None and node_class.efa_only_interfaces:
        return None, None  # pinned: the node has them whatever was requested
    if node_class is not None and node_class.efa_only_interfaces == 0:
        return (
            f"Karpenter launched it without {fabric}: EC2NodeClass {node_class.name} sets networkInterfaces"
            " without an efa-only entry",
            None,
        )
    if pool is not None and pool.replicas is not None:
        return (
            f"Karpenter launched it without {fabric}: NodePool {pool.name} is static (spec.replicas"
            f" {pool.replicas}), whose nodes it launches for no pod, and its EC2NodeClass pins no efa-only interface",
            None,
        )
    return (
        f"Karpenter launched it without {fabric} (NodeClaim {claim.name} requested no {profile.resource});"
        f" Karpenter attaches {fabric} only when a pod requests {profile.resource}",
        None,
    )


def missing_nodes(index: FactIndex, node_pool: str) -> list[str]:
    """NodeClaims of a NodePool that name a node the cluster does not have: reported, not judged."""
    return [
        f"NodeClaim {claim.name} names node {claim.node_name}, which does not exist"
        for claim in sorted(index.karpenter_claims.values(), key=lambda claim: claim.name)
        if claim.node_pool == node_pool and claim.node_name is not None and not index.node_exists(claim.node_name)
    ]
