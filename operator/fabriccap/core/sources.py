"""Where a fabric's devices are advertised, and who serves them: one row per source.

Everything the evaluation reads, looks for or says about one source is in its row of
``SOURCES``: how a node's devices are read from it, how its DaemonSets are recognised, how a
workload asks for what it advertises, and the words the conditions and ``explain`` use for it.
The code that judges a pool iterates the rows and names no source (``explain``'s CAPACITY,
ALLOCATABLE and DRA columns aside: they are its output format), so a new kind of provider (a
platform-managed one, DRA by DeviceClass) is a row here, not a branch elsewhere.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from fabriccap.core.config import DevicePlugin, DraSettings, FabricProfile, Source
from fabriccap.core.facts import DaemonSetFacts, NodeFacts, PodFacts
from fabriccap.core.index import FactIndex
from fabriccap.core.selection import ClassError


class Reading(NamedTuple):
    """What one source says about one node's devices of one fabric (a tuple: one is made per
    node and source every round, and a frozen dataclass costs three times as much to make)."""

    devices: int  # the devices that count; 0 when they cannot be counted
    problem: str | None  # why the devices it reports could not be counted
    # The source shows devices of the fabric on the node, countable or not: target rule (a).
    evidence: bool
    # Devices it reports but holds back as unhealthy, described; None when there are none.
    unhealthy: str | None = None
    # What else messages should say about how the devices were counted (DRA: older slices
    # ignored, devices counted from ResourceClaims).
    notes: tuple[str, ...] = ()
    # Devices its selectors failed on (DRA: a DeviceClass's CEL error): not counted.
    errors: tuple[ClassError, ...] = ()


class RequestForm(Enum):
    """How a workload asks for the devices a source advertises; the value is how a message
    says that a pod asks for them."""

    EXTENDED_RESOURCE = "asking for the extended resource"
    RESOURCE_CLAIM = "with the ResourceClaim"


@dataclass(frozen=True, slots=True)
class SourceRow:
    """One source: how it is read and found, and how messages speak of it."""

    source: Source
    provider: str  # whose pod serves a node through it, as messages write it: "device-plugin"
    node_kind: str  # what messages call the nodes that advertise through it: "device-plugin" (nodes)
    place: str  # where a node's devices are read, for "nothing in X nor in Y"
    problem: str  # what messages call devices it reports that could not be counted
    request: RequestForm
    # A pod of its DaemonSet bound to a node makes the node a target (rule b). Not so for a
    # DRA driver: DRANET runs on every node it may manage, CPU nodes included.
    pod_marks_target: bool
    # A node it advertises on is served without a pod: the platform itself advertises (EKS Auto
    # Mode); there is no DaemonSet to find or wait for.
    self_served: bool
    read: Callable[[FabricProfile, NodeFacts, FactIndex], Reading]
    finder: Callable[[FabricProfile], DevicePlugin | DraSettings]  # the settings its DaemonSets match
    subject: Callable[[FabricProfile], str]  # what messages say a node advertises through it
    # "none advertised" for this source, on ``nodes`` ("3 target nodes"), or on the nodes a
    # clause before it named when ``nodes`` is None.
    nowhere: Callable[[FabricProfile, str | None], str]

    @property
    def provider_spelled(self) -> str:
        """The provider in running text: ``device plugin``."""
        return self.provider.replace("-", " ")


def _read_allocatable(profile: FabricProfile, node: NodeFacts, index: FactIndex) -> Reading:
    allocatable = node.allocatable_of(profile.resource)
    capacity = node.capacity_of(profile.resource)
    problem = node.problem_with(profile.resource)
    # Capacity above allocatable is the kubelet's mark of devices the plugin reported unhealthy.
    unhealthy = (
        f"capacity {capacity} but allocatable {allocatable}: {capacity - allocatable} unhealthy"
        if capacity > allocatable
        else None
    )
    return Reading(allocatable, problem, capacity > 0 or problem is not None, unhealthy)


def _read_resource_slices(profile: FabricProfile, node: NodeFacts, index: FactIndex) -> Reading:
    devices = index.dra_devices(node.name, profile.name, profile.dra.device_class_names)
    notes = devices.notes
    if devices.allocated:
        allocated = f"{devices.allocated} allocated to ResourceClaims and no longer in its ResourceSlices"
        notes = (*notes, allocated)
    # Devices in an incomplete pool do not count, but they show the node is one of the fabric's.
    return Reading(devices.count, devices.problem, devices.seen > 0, None, notes, devices.errors)


def _slices_hold_none(profile: FabricProfile, nodes: str | None) -> str:
    classes = " or ".join(profile.dra.device_class_names)
    return f"no ResourceSlice device that {classes} selects is on {f'any of {nodes}' if nodes else 'them'}"


SOURCES: Mapping[Source, SourceRow] = {
    row.source: row
    for row in (
        SourceRow(
            source=Source.DEVICE_PLUGIN,
            provider="device-plugin",
            node_kind="device-plugin",
            place="allocatable",
            problem="unusable quantity",
            request=RequestForm.EXTENDED_RESOURCE,
            pod_marks_target=True,
            self_served=False,
            read=_read_allocatable,
            finder=lambda profile: profile.device_plugin,
            subject=lambda profile: profile.resource,
            nowhere=lambda profile, nodes: f"{profile.resource} advertised on 0 of {nodes or 'them'}",
        ),
        SourceRow(
            source=Source.DRA,
            provider="DRA-driver",
            node_kind="DRA",
            place="its ResourceSlices",
            problem="ResourceSlices not counted",
            request=RequestForm.RESOURCE_CLAIM,
            pod_marks_target=False,
            self_served=False,
            read=_read_resource_slices,
            finder=lambda profile: profile.dra,
            subject=lambda profile: f"{profile.name} DRA devices",
            nowhere=_slices_hold_none,
        ),
        SourceRow(
            source=Source.PLATFORM,
            provider="platform",
            node_kind="platform-managed",
            place="allocatable",
            problem="unusable quantity",
            request=RequestForm.EXTENDED_RESOURCE,
            pod_marks_target=False,
            self_served=True,
            read=_read_allocatable,
            # No DaemonSet is looked for; the device plugin's settings name the platform's labels.
            finder=lambda profile: profile.device_plugin,
            subject=lambda profile: profile.resource,
            nowhere=lambda profile, nodes: (
                f"{profile.resource} advertised on 0 of {nodes or 'them'} although the platform manages them"
                f" ({', '.join(profile.device_plugin.platform_managed_node_labels)}) and advertises it itself"
            ),
        ),
    )
}


_ORDER = {source: position for position, source in enumerate(Source)}
# The sources whose DaemonSet's pod makes a node a target (rule b).
TARGET_MARKING: tuple[Source, ...] = tuple(source for source, row in SOURCES.items() if row.pod_marks_target)


def in_order(sources: Iterable[Source]) -> list[Source]:
    """``sources`` in the one order messages list them: the order of ``Source``."""
    return sorted(set(sources), key=_ORDER.__getitem__)


def request_forms(sources: Iterable[Source], *, extended_resource_mapped: bool) -> frozenset[RequestForm]:
    """The forms a request takes to schedule on a node advertising through ``sources``. With
    the resource mapped to the fabric's DeviceClass (KEP-5004: ``spec.extendedResourceName``),
    the scheduler serves an extended-resource request from a node's DRA devices too, where its
    allocatable holds none of the resource."""
    forms = {SOURCES[source].request for source in sources}
    if extended_resource_mapped and RequestForm.RESOURCE_CLAIM in forms:
        forms.add(RequestForm.EXTENDED_RESOURCE)
    return frozenset(forms)


def read_sources(profile: FabricProfile) -> list[Source]:
    """The sources the profile reads, in message order."""
    return in_order(profile.sources)


_PLATFORM_ONLY = [Source.PLATFORM]


def is_platform_managed(profile: FabricProfile, node: NodeFacts) -> bool:
    """Whether the platform itself advertises the fabric on ``node`` (EKS Auto Mode)."""
    return any(node.has_label(key, value) for key, value in profile.device_plugin.platform_label_pairs)


def node_sources(profile: FabricProfile, node: NodeFacts, read: Sequence[Source]) -> Sequence[Source]:
    """The sources a node's devices are read from: the platform's on a platform-managed node,
    else ``read`` (the profile's, ``read_sources``)."""
    return _PLATFORM_ONLY if is_platform_managed(profile, node) else read


def providers_phrase(sources: Iterable[Source], *, spelled: bool = False) -> str:
    """``device-plugin``, ``DRA-driver``, or ``device-plugin or DRA-driver``, in source order;
    ``spelled`` writes them as running text (``device plugin``). Self-served sources (the
    platform) are not providers with pods and are left out."""
    rows = [SOURCES[source] for source in in_order(sources) if not SOURCES[source].self_served]
    return " or ".join(row.provider_spelled if spelled else row.provider for row in rows)


def subject(profile: FabricProfile, sources: Iterable[Source]) -> str:
    """What messages say is advertised: the extended resource, the fabric's DRA devices, or
    both; the resource when nothing is (the profile always names one)."""
    return " or ".join(SOURCES[source].subject(profile) for source in in_order(sources)) or profile.resource


# ---------------------------------------------------------------------------------------------
# The DaemonSets that serve a fabric's nodes


@dataclass(frozen=True, slots=True)
class ProviderView:
    """What the DaemonSets of one source (the device plugin, or the DRA driver's kubelet
    plugin) look like cluster-wide."""

    daemon_sets: tuple[str, ...]  # "namespace/name", sorted
    nodes_with_pod: frozenset[str]
    nodes_with_ready_pod: frozenset[str]


NO_PROVIDER = ProviderView((), frozenset(), frozenset())


@dataclass(frozen=True, slots=True)
class FabricView:
    """A fabric's providers, per source: those the profile reads, and those whose pod marks a
    target node whether the profile reads them or not."""

    providers: Mapping[Source, ProviderView]

    def of(self, source: Source) -> ProviderView:
        return self.providers.get(source, NO_PROVIDER)


def selects(profile: FabricProfile, source: Source, daemon_set: DaemonSetFacts) -> bool:
    """Whether ``daemon_set`` is one of the source's: in the device plugin's namespaces (the
    DRA driver is looked for there too), and named in its settings or selected by its labels
    or its pod template's labels."""
    if daemon_set.namespace not in profile.device_plugin.namespaces:
        return False
    finder = SOURCES[source].finder(profile)
    if daemon_set.name in finder.daemon_set_names:
        return True
    return any(
        all(labels.get(key) == value for key, value in selector.items())
        for selector in finder.selector_label_sets
        for labels in (dict(daemon_set.labels), dict(daemon_set.template_labels))
    )


def provider_view(found: Iterable[DaemonSetFacts], pods: Iterable[PodFacts]) -> ProviderView:
    ordered = sorted(found, key=lambda ds: (ds.namespace, ds.name))
    owners = {(ds.namespace, ds.name) for ds in ordered}
    with_pod: set[str] = set()
    with_ready_pod: set[str] = set()
    for pod in pods:
        if pod.node_name is None or (pod.namespace, pod.daemon_set) not in owners:
            continue
        with_pod.add(pod.node_name)
        if pod.ready:
            with_ready_pod.add(pod.node_name)
    return ProviderView(
        daemon_sets=tuple(daemon_set.qualified_name for daemon_set in ordered),
        nodes_with_pod=frozenset(with_pod),
        nodes_with_ready_pod=frozenset(with_ready_pod),
    )


def viewed_sources(profile: FabricProfile) -> list[Source]:
    """The sources whose DaemonSets matter for the profile: those it reads, and those whose pod
    marks a target node (the device plugin's, which a profile reading only DRA still looks for)."""
    return in_order([*profile.sources, *TARGET_MARKING])


def fabric_view(profile: FabricProfile, daemon_sets: Sequence[DaemonSetFacts], pods: Sequence[PodFacts]) -> FabricView:
    return FabricView(
        {
            source: provider_view((ds for ds in daemon_sets if selects(profile, source, ds)), pods)
            for source in viewed_sources(profile)
        }
    )
