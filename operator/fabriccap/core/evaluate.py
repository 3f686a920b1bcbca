"""Facts -> FabricCapability status. Pure: no I/O, no clock.

The operator and ``fabriccap evaluate`` both call this module, so the live answer and the
offline answer cannot drift apart. Timestamps and generations are stamped by the writer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabriccap.core import api
from fabriccap.core.api import (
    API_VERSION,
    FABRIC_LABEL,
    KIND,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    POOL_KEY_ANNOTATION,
    POOL_LABEL,
    POOL_VALUE_ANNOTATION,
    READY_LABEL,
    Condition,
    ConditionType,
    CountBucket,
    DeviceClaim,
    DevicePluginStatus,
    DeviceRequest,
    EnvVarValue,
    ExactDeviceRequest,
    FabricCapabilityStatus,
    GapStatus,
    InstanceTypeCount,
    PoolRef,
    Reason,
    Recommendation,
    ResourceClaimSpec,
    ResourceClaimTemplateSpec,
    SourceCount,
)
from fabriccap.core.config import Config, DevicePlugin, DraSettings, FabricProfile, Source
from fabriccap.core.facts import DaemonSetFacts, NodeFacts, PodFacts, Pool
from fabriccap.core.index import DraDevices, FactIndex, NamespacedKey
from fabriccap.core.names import capability_name, is_label_value
from fabriccap.core.workloads import (
    LookupKey,
    PodJudgement,
    UnschedulableGroup,
    WorkloadEvent,
    judge_pod,
    not_requested_event,
    not_requested_key,
    pool_workloads,
    unschedulable_groups,
)

MAX_GAP_NODES = api.MAX_GAP_NODES  # the status model's bound (api.py: how large a status can be)
MAX_NAMED_NODES = 5

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"


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
    """A fabric's providers: the device plugin's DaemonSets, and its DRA driver's."""

    device_plugin: ProviderView
    dra_driver: ProviderView = NO_PROVIDER

    def of(self, source: Source) -> ProviderView:
        return self.device_plugin if source is Source.DEVICE_PLUGIN else self.dra_driver


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """One node's count of a fabric's devices, over the sources its profile reads."""

    count: int  # the larger of the sources' counts
    # The sources that advertise ``count`` (both when they agree); empty when count is 0.
    sources: frozenset[Source]
    plugin_count: int
    dra: DraDevices
    unusable: str | None  # why the node's allocatable quantity could not be used

    @property
    def advertising(self) -> bool:
        return self.count > 0


def node_devices(profile: FabricProfile, node: NodeFacts, index: FactIndex) -> NodeDevices:
    """A node that advertises through both sources counts the larger (docs/reference/how-it-decides.md, Counting): a
    DRANET node keeps a stale allocatable of 0 from a removed device plugin, and the other way."""
    uses_plugin = profile.uses(Source.DEVICE_PLUGIN)
    plugin_count = node.allocatable_of(profile.resource) if uses_plugin else 0
    unusable = node.problem_with(profile.resource) if uses_plugin else None
    dra = index.dra_devices(node.name, profile.name, profile.dra.drivers) if profile.uses(Source.DRA) else DraDevices(0)
    count = max(plugin_count, dra.count)
    by_source = ((Source.DEVICE_PLUGIN, plugin_count), (Source.DRA, dra.count))
    sources = frozenset(source for source, amount in by_source if amount == count and count > 0)
    return NodeDevices(count=count, sources=sources, plugin_count=plugin_count, dra=dra, unusable=unusable)


@dataclass(frozen=True, slots=True)
class PoolCapability:
    """One FabricCapability: its identity and its computed status."""

    name: str
    fabric: str
    pool: Pool
    status: FabricCapabilityStatus

    def labels(self) -> dict[str, str]:
        labels = {
            FABRIC_LABEL: self.fabric,
            MANAGED_BY_LABEL: MANAGED_BY_VALUE,
            READY_LABEL: "true" if self.status.is_ready else "false",
        }
        if is_label_value(self.pool.value):
            labels[POOL_LABEL] = self.pool.value
        return labels

    def annotations(self) -> dict[str, str]:
        return {POOL_KEY_ANNOTATION: self.pool.key, POOL_VALUE_ANNOTATION: self.pool.value}

    def identity(self) -> dict[str, Any]:
        """apiVersion, kind and metadata: what the object is, without what it says."""
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": self.name, "labels": self.labels(), "annotations": self.annotations()},
        }

    def to_object(self) -> dict[str, Any]:
        return {**self.identity(), "status": self.status.to_json()}

    def create_body(self) -> dict[str, Any]:
        """The POST body: the API server ignores ``status`` on create (status subresource)."""
        return {**self.identity(), "spec": {}}


@dataclass(frozen=True, slots=True)
class NameConflict:
    """Two or more (fabric, pool) pairs that came out with one name: none of them is published."""

    name: str
    claimants: tuple[tuple[str, Pool], ...]  # (fabric, pool), sorted

    def describe(self) -> str:
        pools = ", ".join(f"{fabric} pool {pool.key}={pool.value}" for fabric, pool in self.claimants)
        return f"FabricCapability name {self.name} is claimed by {pools}"


@dataclass(frozen=True, slots=True)
class Evaluation:
    capabilities: tuple[PoolCapability, ...]  # sorted by name
    unpooled_nodes: int  # target nodes of some fabric that carry no pool label
    # Names of the (fabric, pool) pairs evaluated that have no target node now.
    absent: frozenset[str] = frozenset()
    conflicts: tuple[NameConflict, ...] = ()
    # FabricNotRequested Events for the workloads of the pools evaluated.
    workload_events: tuple[WorkloadEvent, ...] = ()
    # Pending pods no node can give the fabric, cluster-wide, grouped by owner and fabric.
    unschedulable: tuple[UnschedulableGroup, ...] = ()
    # Owners and claims the evaluation could not see through: read them, then evaluate again.
    lookups: frozenset[LookupKey] = frozenset()

    def unschedulable_pods(self, fabric: str) -> int:
        return sum(group.pods for group in self.unschedulable if group.fabric == fabric)


def _selects(finder: DevicePlugin | DraSettings, namespaces: tuple[str, ...], daemon_set: DaemonSetFacts) -> bool:
    """Named in the settings, or selected by its labels or its pod template's labels."""
    if daemon_set.namespace not in namespaces:
        return False
    if daemon_set.name in finder.daemon_set_names:
        return True
    selector = finder.selector_labels
    if not selector:
        return False
    return any(
        all(labels.get(key) == value for key, value in selector.items())
        for labels in (dict(daemon_set.labels), dict(daemon_set.template_labels))
    )


def is_plugin_daemon_set(profile: FabricProfile, daemon_set: DaemonSetFacts) -> bool:
    return _selects(profile.device_plugin, profile.device_plugin.namespaces, daemon_set)


def is_dra_driver_daemon_set(profile: FabricProfile, daemon_set: DaemonSetFacts) -> bool:
    """The DRA driver's kubelet plugin, looked for in the device plugin's namespaces."""
    return profile.uses(Source.DRA) and _selects(profile.dra, profile.device_plugin.namespaces, daemon_set)


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


def fabric_view(profile: FabricProfile, daemon_sets: Sequence[DaemonSetFacts], pods: Sequence[PodFacts]) -> FabricView:
    plugin = provider_view((ds for ds in daemon_sets if is_plugin_daemon_set(profile, ds)), pods)
    if not profile.uses(Source.DRA):
        return FabricView(plugin)
    driver = provider_view((ds for ds in daemon_sets if is_dra_driver_daemon_set(profile, ds)), pods)
    return FabricView(plugin, driver)


def is_target_node(profile: FabricProfile, node: NodeFacts, devices: NodeDevices, view: FabricView) -> bool:
    """The target rules (docs/reference/how-it-decides.md): (a) it has the fabric's devices, (b) a
    device-plugin pod, (c) an accelerator, or (d) an instance type that can carry the fabric
    (where a plugin that never landed shows). A DRA driver's pod is no evidence: DRANET runs on
    every node it may manage, CPU nodes included, and publishes their ENA interfaces."""
    if devices.advertising or devices.unusable or devices.dra.seen > 0:
        return True
    if profile.uses(Source.DEVICE_PLUGIN) and node.capacity_of(profile.resource) > 0:
        return True
    if node.name in view.device_plugin.nodes_with_pod:
        return True
    targets = profile.target_nodes
    if any(node.allocatable_of(accelerator) > 0 for accelerator in targets.accelerator_resources):
        return True
    if any(node.has_label(key, value) for key, value in targets.accelerator_label_pairs):
        return True
    return (profile.maximum_for(node.instance_type) or 0) > 0


def _named(nodes: Sequence[str]) -> str:
    shown = ", ".join(nodes[:MAX_NAMED_NODES])
    more = len(nodes) - MAX_NAMED_NODES
    return f"{shown} (+{more} more)" if more > 0 else shown


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _condition(condition_type: ConditionType, status: str, reason: Reason, message: str) -> Condition:
    return Condition(type=condition_type.value, status=status, reason=reason.value, message=message)


def _isolation_conflict(profile: FabricProfile, instance_types: Iterable[str]) -> tuple[str, str] | None:
    """Two instance types in the pool whose EFA traffic cannot cross, if any."""
    present = sorted(set(instance_types))
    for first in present:
        group = profile.isolation_group(first)
        if group is None:
            continue
        for second in present:
            if profile.isolation_group(second) != group:
                return first, second
    return None


_PROVIDER_WORDS = {Source.DEVICE_PLUGIN: "device-plugin", Source.DRA: "DRA-driver"}


def _providers_phrase(sources: Iterable[Source]) -> str:
    """``device-plugin``, ``DRA-driver``, or ``device-plugin or DRA-driver``, in source order."""
    present = set(sources)
    return " or ".join(_PROVIDER_WORDS[source] for source in Source if source in present)


def _subject(profile: FabricProfile, sources: Iterable[Source]) -> str:
    """What the messages say is advertised: the extended resource, the fabric's DRA devices, or both."""
    present = set(sources)
    dra = f"{profile.name} DRA devices"
    if Source.DRA not in present:
        return profile.resource
    if Source.DEVICE_PLUGIN not in present:
        return dra
    return f"{profile.resource} or {dra}"


@dataclass(frozen=True, slots=True)
class _NodeProviders:
    """Per node, the sources whose DaemonSet must serve it: those that advertise its count,
    or, on a node that advertises nothing, every source the profile reads."""

    relevant: dict[str, frozenset[Source]]
    view: FabricView

    def has_pod(self, name: str) -> bool:
        return any(name in self.view.of(source).nodes_with_pod for source in self.relevant[name])

    def has_ready_pod(self, name: str) -> bool:
        return any(name in self.view.of(source).nodes_with_ready_pod for source in self.relevant[name])

    def sources(self) -> frozenset[Source]:
        return frozenset(source for sources in self.relevant.values() for source in sources)


def evaluate_pool(
    profile: FabricProfile,
    pool: Pool,
    target_nodes: Iterable[NodeFacts],
    view: FabricView,
    devices: Mapping[str, NodeDevices],
) -> FabricCapabilityStatus:
    """The status of one (fabric, pool) from its target nodes (cordoned ones included)."""
    resource = profile.resource
    ordered = sorted(target_nodes, key=lambda node: node.name)
    gate = [node for node in ordered if not node.cordoned]
    cordoned = len(ordered) - len(gate)
    total = len(gate)

    counted = {node.name: devices[node.name].count for node in gate}
    advertising = [node.name for node in gate if counted[node.name] > 0]
    not_advertising = [node.name for node in gate if counted[node.name] == 0]
    distribution = Counter(counted.values())
    counts = [CountBucket(count=count, nodes=nodes) for count, nodes in sorted(distribution.items(), reverse=True)]
    sources_seen = {source for name in advertising for source in devices[name].sources}
    subject = _subject(profile, sources_seen)
    by_source = [
        SourceCount(source=source.value, nodes=sum(1 for name in advertising if source in devices[name].sources))
        for source in profile.sources
    ]
    mixed_note = ""
    if len(sources_seen) > 1:
        spread = ", ".join(
            f"{_PROVIDER_WORDS[Source(entry.source)].replace('-', ' ')} on {_plural(entry.nodes, 'node')}"
            for entry in by_source
        )
        mixed_note = f" (advertised through {spread})"

    providers = _NodeProviders(
        relevant={
            node.name: devices[node.name].sources if counted[node.name] > 0 else frozenset(profile.sources)
            for node in gate
        },
        view=view,
    )
    with_ready_plugin = [node.name for node in gate if providers.has_ready_pod(node.name)]
    without_plugin_pod = [node.name for node in gate if not providers.has_pod(node.name)]
    plugin_not_ready = [
        node.name for node in gate if providers.has_pod(node.name) and not providers.has_ready_pod(node.name)
    ]
    ready_plugin = set(with_ready_plugin)
    plugin_ready_not_advertised = [name for name in not_advertising if name in ready_plugin]
    # Capacity above allocatable is the kubelet's mark of unhealthy devices: a device-plugin notion.
    unhealthy = (
        [node.name for node in gate if node.capacity_of(resource) > node.allocatable_of(resource)]
        if profile.uses(Source.DEVICE_PLUGIN)
        else []
    )
    advertised_without_plugin = [name for name in advertising if name not in ready_plugin]
    gap_nodes = sorted(set(plugin_ready_not_advertised) | set(unhealthy) | set(advertised_without_plugin))

    type_counts = Counter(node.instance_type for node in gate if node.instance_type)
    instance_types = [
        InstanceTypeCount(name=name, nodes=nodes, max_count=profile.maximum_for(name))
        for name, nodes in sorted(type_counts.items())
    ]
    # Devices the node reports but that cannot be counted count as 0: say why, or a user sees
    # "0 on n4" while kubectl shows a number (or a ResourceSlice).
    unusable = [f"{node.name} ({problem})" for node in gate if (problem := devices[node.name].unusable)]
    incomplete = [f"{node.name} ({problem})" for node in gate if (problem := devices[node.name].dra.problem)]
    note = (f"; unusable quantity on {_named(unusable)}" if unusable else "") + (
        f"; ResourceSlices not counted on {_named(incomplete)}" if incomplete else ""
    )
    isolation_conflict = _isolation_conflict(profile, type_counts)
    uniform = len(distribution) == 1 and isolation_conflict is None
    uniform_count = next(iter(distribution)) if total and uniform else None

    conditions = [
        _device_plugin_condition(
            profile, view, providers, frozenset(counted), total, without_plugin_pod, plugin_not_ready
        ),
        _advertised_condition(profile, subject, total, advertising, not_advertising, note, mixed_note),
        _homogeneous_condition(subject, total, counted, distribution, isolation_conflict, note, mixed_note),
        _instance_type_condition(profile, gate, counted),
    ]
    ready = _ready_condition(
        profile, subject, sources_seen, total, advertising, uniform_count, with_ready_plugin, conditions, mixed_note
    )
    conditions.append(ready)
    conditions.append(_stalled_condition(profile, gate, type_counts, isolation_conflict))

    recommendation = None
    if ready.status == TRUE and uniform_count is not None:
        recommendation = _recommendation(profile, sources_seen, uniform_count)
    # The DaemonSets that serve this pool's nodes: a device-plugin pool does not list DRANET.
    daemon_sets = sorted({ds for source in providers.sources() for ds in view.of(source).daemon_sets})
    return FabricCapabilityStatus(
        fabric=profile.name,
        resource_name=resource,
        pool=PoolRef(key=pool.key, value=pool.value),
        nodes=total,
        cordoned_nodes=cordoned,
        advertising_nodes=len(advertising),
        uniform_count=uniform_count,
        counts=counts,
        instance_types=instance_types,
        device_plugin=DevicePluginStatus(daemon_sets=daemon_sets, ready_nodes=len(with_ready_plugin)),
        gap=GapStatus(
            plugin_ready_not_advertised=len(plugin_ready_not_advertised),
            unhealthy=len(unhealthy),
            advertised_without_plugin=len(advertised_without_plugin),
            nodes=gap_nodes[:MAX_GAP_NODES],
            truncated=len(gap_nodes) > MAX_GAP_NODES,
        ),
        recommendation=recommendation,
        sources=by_source,
        conditions=conditions,
    )


def _recommendation(profile: FabricProfile, sources: set[Source], uniform_count: int) -> Recommendation:
    """What a workload asks for: the extended resource where a device plugin advertises it, a
    ResourceClaimTemplate of the fabric's DeviceClass where a DRA driver does (both when the
    pool mixes them: each form schedules only onto the nodes of its own source)."""
    # A shared resource counts pods that may share the devices: each pod asks for one.
    per_node = 1 if profile.shared else uniform_count
    claim = None
    if Source.DRA in sources and profile.dra.device_class_name:
        claim = ResourceClaimTemplateSpec(
            spec=ResourceClaimSpec(
                devices=DeviceClaim(
                    requests=[
                        DeviceRequest(
                            name=profile.name,
                            exactly=ExactDeviceRequest(
                                device_class_name=profile.dra.device_class_name,
                                allocation_mode="ExactCount",
                                count=per_node,
                            ),
                        )
                    ]
                )
            )
        )
    return Recommendation(
        resources_per_node={profile.resource: str(per_node)} if Source.DEVICE_PLUGIN in sources else None,
        resource_claim_template=claim,
        env=[EnvVarValue(name=env.name, value=env.value) for env in profile.recommended_env],
    )


def _no_target_nodes(condition_type: ConditionType) -> Condition:
    return _condition(condition_type, UNKNOWN, Reason.NO_TARGET_NODES, "no schedulable target node in the pool")


def _device_plugin_condition(
    profile: FabricProfile,
    view: FabricView,
    providers: _NodeProviders,
    nodes: frozenset[str],
    total: int,
    without_pod: list[str],
    not_ready: list[str],
) -> Condition:
    kind = ConditionType.DEVICE_PLUGIN_READY
    if total == 0:
        return _no_target_nodes(kind)
    needed = providers.sources()
    word = _providers_phrase(needed)
    if not any(view.of(source).daemon_sets for source in needed):
        settings = profile.device_plugin
        where = ", ".join(settings.namespaces)
        scope = f"namespace {where}" if len(settings.namespaces) == 1 else f"namespaces {where}"
        finders = {Source.DEVICE_PLUGIN: settings.describe(), Source.DRA: profile.dra.describe()}
        how = (
            "; ".join(f"{_PROVIDER_WORDS[source]}: {finders[source]}" for source in Source if source in needed)
            if len(needed) > 1
            else finders[next(iter(needed))]
        )
        return _condition(
            kind, FALSE, Reason.PLUGIN_NOT_INSTALLED, f"no {profile.name} {word} DaemonSet found in {scope} ({how})"
        )
    if without_pod:
        return _condition(
            kind,
            FALSE,
            Reason.PLUGIN_NOT_SCHEDULED,
            f"no {word} pod on {len(without_pod)} of {total} nodes: {_named(without_pod)}",
        )
    if not_ready:
        return _condition(
            kind,
            FALSE,
            Reason.PLUGIN_NOT_READY,
            f"{word} pod not Ready on {len(not_ready)} of {total} nodes: {_named(not_ready)}",
        )
    serving = [source for source in Source if source in needed and view.of(source).nodes_with_ready_pod & nodes]
    return _condition(
        kind, TRUE, Reason.PLUGIN_READY_ON_ALL_NODES, f"{_providers_phrase(serving)} pod Ready on all {total} nodes"
    )


def _advertised_condition(
    profile: FabricProfile,
    subject: str,
    total: int,
    advertising: list[str],
    not_advertising: list[str],
    note: str = "",
    mixed_note: str = "",
) -> Condition:
    kind = ConditionType.ADVERTISED
    if total == 0:
        return _no_target_nodes(kind)
    if not advertising:
        # Say where else was looked, or a DRA user reads "efa advertised on 0" as a plugin problem.
        elsewhere = ""
        if profile.uses(Source.DRA):
            drivers = ", ".join(profile.dra.drivers)
            elsewhere = f", and no ResourceSlice of {drivers} holds {profile.name} devices on them"
            if not profile.uses(Source.DEVICE_PLUGIN):
                return _condition(
                    kind,
                    FALSE,
                    Reason.NOT_ADVERTISED,
                    f"no ResourceSlice of {drivers} holds {profile.name} devices on any of {total} target nodes{note}",
                )
        return _condition(
            kind, FALSE, Reason.NOT_ADVERTISED, f"{subject} advertised on 0 of {total} target nodes{elsewhere}{note}"
        )
    if not_advertising:
        return _condition(
            kind,
            FALSE,
            Reason.PARTIALLY_ADVERTISED,
            f"{subject} advertised on {len(advertising)} of {total} target nodes{mixed_note}; "
            f"0 on {_named(not_advertising)}{note}",
        )
    return _condition(
        kind, TRUE, Reason.ALL_NODES_ADVERTISE, f"{subject} advertised on all {total} target nodes{mixed_note}"
    )


def _homogeneous_condition(
    resource: str,
    total: int,
    allocatable: dict[str, int],
    distribution: Counter[int],
    isolation_conflict: tuple[str, str] | None,
    note: str = "",
    mixed_note: str = "",
) -> Condition:
    kind = ConditionType.HOMOGENEOUS
    if total == 0:
        return _no_target_nodes(kind)
    if len(distribution) == 1:
        count = next(iter(distribution))
        if isolation_conflict is not None:
            first, second = isolation_conflict
            return _condition(
                kind,
                FALSE,
                Reason.MIXED_COUNTS,
                f"all {total} nodes advertise {resource}: {count}, but EFA traffic between "
                f"{first} and {second} is unsupported, so the pool cannot be one fabric",
            )
        return _condition(
            kind, TRUE, Reason.UNIFORM_COUNT, f"all {total} nodes advertise {resource}: {count}{mixed_note}"
        )
    spread = ", ".join(
        f"{count} on {_plural(nodes, 'node')}" for count, nodes in sorted(distribution.items(), reverse=True)
    )
    if 0 in distribution:
        offenders = [name for name, count in allocatable.items() if count == 0]
        return _condition(
            kind,
            FALSE,
            Reason.PARTIAL_ROLLOUT,
            f"{resource} differs across {total} nodes ({spread}); 0 on {_named(offenders)}{note}",
        )
    # Name the nodes outside the most common count: they are the likely odd ones out.
    most_common = max(distribution.items(), key=lambda item: (item[1], item[0]))[0]
    offenders = [name for name, count in allocatable.items() if count != most_common]
    return _condition(
        kind,
        FALSE,
        Reason.MIXED_COUNTS,
        f"{resource} differs across {total} nodes ({spread}); not {most_common} on {_named(offenders)}"
        + mixed_note
        + note,
    )


def _instance_type_condition(profile: FabricProfile, gate: list[NodeFacts], allocatable: dict[str, int]) -> Condition:
    kind = ConditionType.MATCHES_INSTANCE_TYPE
    known = [(node, maximum) for node in gate if (maximum := profile.maximum_for(node.instance_type)) is not None]
    if not known:
        return _condition(
            kind,
            UNKNOWN,
            Reason.UNKNOWN_INSTANCE_TYPE,
            f"no node of an instance type with a known {profile.resource} maximum",
        )
    above = [
        f"{node.name} ({allocatable[node.name]} > {maximum})"
        for node, maximum in known
        if allocatable[node.name] > maximum
    ]
    below = [
        f"{node.name} ({allocatable[node.name]} < {maximum})"
        for node, maximum in known
        if allocatable[node.name] < maximum
    ]
    if above:
        return _condition(
            kind,
            FALSE,
            Reason.ABOVE_INSTANCE_MAXIMUM,
            f"{len(above)} of {len(known)} nodes of known types advertise more than their instance "
            f"type's maximum: {_named(above)}",
        )
    if below:
        return _condition(
            kind,
            FALSE,
            Reason.BELOW_INSTANCE_MAXIMUM,
            f"{len(below)} of {len(known)} nodes of known types advertise fewer than their instance "
            f"type's maximum: {_named(below)}",
        )
    unknown = len(gate) - len(known)
    suffix = f" ({unknown} of unknown type)" if unknown else ""
    return _condition(
        kind,
        TRUE,
        Reason.MATCHES_INSTANCE_MAXIMUM,
        f"all {len(known)} nodes of known types advertise their instance type's maximum{suffix}",
    )


def _ready_condition(
    profile: FabricProfile,
    subject: str,
    sources: set[Source],
    total: int,
    advertising: list[str],
    uniform_count: int | None,
    with_ready_plugin: list[str],
    conditions: list[Condition],
    mixed_note: str = "",
) -> Condition:
    kind = ConditionType.READY
    by_type = {condition.type: condition for condition in conditions}
    homogeneous = by_type[ConditionType.HOMOGENEOUS]
    if total == 0:
        return _condition(kind, FALSE, Reason.NO_TARGET_NODES, "no schedulable target node in the pool")
    if not advertising:
        return _condition(kind, FALSE, Reason.NOT_ADVERTISED, by_type[ConditionType.ADVERTISED].message)
    if homogeneous.status != TRUE:
        return _condition(kind, FALSE, Reason(homogeneous.reason), homogeneous.message)
    if len(with_ready_plugin) < total:
        plugin = by_type[ConditionType.DEVICE_PLUGIN_READY]
        return _condition(
            kind,
            FALSE,
            Reason.DEVICE_PLUGIN_GAP,
            f"all {total} nodes advertise {subject}: {uniform_count}, but {plugin.message}",
        )
    provider = _providers_phrase(sources).replace("-", " ")
    if profile.shared:
        usage = f"up to {uniform_count} pods per node may share it, each requesting 1"
    elif sources == {Source.DRA}:
        usage = f"a job may claim up to {uniform_count} per node (recommendation.resourceClaimTemplate)"
    elif Source.DRA in sources:
        usage = (
            f"a job may request up to {uniform_count} per node; a pod asking for the extended resource "
            "schedules only onto device-plugin nodes, one with the ResourceClaim only onto DRA nodes"
        )
    else:
        usage = f"a job may request up to {uniform_count} per node"
    return _condition(
        kind,
        TRUE,
        Reason.UNIFORM_CAPABILITY,
        f"all {total} nodes advertise {subject}: {uniform_count} with a Ready {provider}{mixed_note}; {usage}",
    )


def _stalled_condition(
    profile: FabricProfile,
    gate: list[NodeFacts],
    type_counts: Counter[str],
    isolation_conflict: tuple[str, str] | None,
) -> Condition:
    kind = ConditionType.STALLED
    if gate and all(profile.maximum_for(node.instance_type) == 0 for node in gate):
        types = ", ".join(sorted(type_counts))
        return _condition(
            kind,
            TRUE,
            Reason.INSTANCE_TYPE_UNSUPPORTED,
            f"every node's instance type supports no {profile.resource} ({types}: maximum 0); "
            "this pool cannot become Ready without other instance types",
        )
    known = {name: maximum for name in type_counts if (maximum := profile.maximum_for(name)) is not None}
    if len(set(known.values())) > 1:
        listed = ", ".join(f"{name} ({maximum})" for name, maximum in sorted(known.items()))
        return _condition(
            kind,
            TRUE,
            Reason.HETEROGENEOUS_INSTANCE_TYPES,
            f"the pool mixes instance types with different {profile.resource} maxima: {listed}",
        )
    if isolation_conflict is not None:
        first, second = isolation_conflict
        return _condition(
            kind,
            TRUE,
            Reason.HETEROGENEOUS_INSTANCE_TYPES,
            f"the pool mixes {first} and {second}; EFA traffic between them is unsupported",
        )
    return _condition(
        kind, FALSE, Reason.NOT_STALLED, "no instance-type condition prevents this pool from becoming Ready"
    )


def fabric_views(
    config: Config, daemon_sets: Iterable[DaemonSetFacts], pods: Iterable[PodFacts]
) -> dict[str, FabricView]:
    """Each enabled fabric's providers, computed once per evaluation round."""
    daemon_set_list, pod_list = list(daemon_sets), list(pods)
    return {profile.name: fabric_view(profile, daemon_set_list, pod_list) for profile in config.enabled_fabrics}


@dataclass(slots=True)
class _PoolMemo:
    """One (fabric, pool) as last evaluated: valid while the versions it was made at hold."""

    facts_version: int
    provider_version: int
    targets: tuple[str, ...]  # empty: the pool has no target node
    status: FabricCapabilityStatus | None  # without workloads
    judgements: dict[NamespacedKey, PodJudgement] = field(default_factory=dict)


@dataclass
class EvaluationMemo:
    """What the operator's rounds reuse from the ones before, for one config and one index.

    Under pod churn a round re-evaluates the pools whose pods changed, and nothing else about
    them did: their nodes, devices and providers (each pool's node-side status), and most of
    their pods' judgements, are what they were. The index's versions say when they are not.
    ``fabriccap evaluate`` has no memo: one evaluation has nothing to reuse.
    """

    views: tuple[int, dict[str, FabricView]] | None = None
    pools: dict[tuple[str, Pool], _PoolMemo] = field(default_factory=dict)

    def fabric_views(self, config: Config, index: FactIndex) -> dict[str, FabricView]:
        if self.views is None or self.views[0] != index.provider_version:
            self.views = (index.provider_version, fabric_views(config, index.daemon_sets.values(), index.pods.values()))
        return self.views[1]


def _pool_side(
    profile: FabricProfile, pool: Pool, index: FactIndex, view: FabricView, memo: EvaluationMemo | None
) -> _PoolMemo:
    """The node-side evaluation of one (fabric, pool): from the memo while its versions hold."""
    facts_version = index.pool_versions.get(pool, 0)
    known = memo.pools.get((profile.name, pool)) if memo is not None else None
    if known is not None and (known.facts_version, known.provider_version) == (facts_version, index.provider_version):
        return known
    members = index.members(pool)
    devices = {node.name: node_devices(profile, node, index) for node in members}
    targets = [node for node in members if is_target_node(profile, node, devices[node.name], view)]
    status = evaluate_pool(profile, pool, targets, view, devices) if targets else None
    fresh = _PoolMemo(facts_version, index.provider_version, tuple(node.name for node in targets), status)
    if known is not None and targets:
        fresh.judgements = known.judgements  # pods' judgements do not depend on the nodes
    if memo is not None and members:
        memo.pools[(profile.name, pool)] = fresh
    elif memo is not None:
        memo.pools.pop((profile.name, pool), None)  # a pool gone leaves nothing behind
    return fresh


def _judgements(profile: FabricProfile, side: _PoolMemo, index: FactIndex) -> list[PodJudgement]:
    """The judgements of the pods on the pool's target nodes, kept in ``side`` for the next
    round (only those: a pod gone is forgotten with the round that no longer sees it)."""
    kept = side.judgements
    current: dict[NamespacedKey, PodJudgement] = {}
    for node_name in side.targets:
        for key in index.node_workload_pods.get(node_name, ()):
            version = index.workload_versions[key]
            known = kept.get(key)
            if known is None or known.version != version:
                known = judge_pod(index.workload_pods[key], profile, index, version)
            current[key] = known
    side.judgements = current
    return list(current.values())


def evaluate(
    config: Config,
    index: FactIndex,
    pools: Iterable[Pool] | None = None,
    *,
    memo: EvaluationMemo | None = None,
    warned: Callable[[str], bool] | None = None,
) -> Evaluation:
    """Every FabricCapability the facts call for, sorted by name: the one evaluation driver.

    ``fabriccap evaluate`` passes no ``pools`` (every pool); the operator passes the pools
    whose facts changed, its ``memo`` of the rounds before, and ``warned``: the keys of the
    FabricNotRequested problems it already recorded, whose Events need no message built again.
    A (fabric, pool) evaluated without a target node is named in ``absent``, so the operator
    can start that object's grace period.
    """
    views = (
        memo.fabric_views(config, index)
        if memo is not None
        else fabric_views(config, index.daemon_sets.values(), index.pods.values())
    )
    primary_key = config.pool_labels[0]
    fabric_names = [fabric.name for fabric in config.fabrics]
    capabilities: list[PoolCapability] = []
    absent: set[str] = set()
    events: list[WorkloadEvent] = []
    lookups: set[LookupKey] = set()
    for pool in list(index.pool_members) if pools is None else pools:
        for profile in config.enabled_fabrics:
            name = capability_name(profile.name, pool.key, pool.value, primary_key, fabric_names)
            side = _pool_side(profile, pool, index, views[profile.name], memo)
            status = side.status
            if status is None:
                absent.add(name)
                continue
            if config.workloads.enabled:
                found = pool_workloads(_judgements(profile, side, index), status.advertising_nodes > 0)
                status = status.model_copy(update={"workloads": found.status})
                lookups |= found.lookups
                events.extend(
                    not_requested_event(profile, name, status, owner, count)
                    for owner, count in found.without_fabric
                    if warned is None or not warned(not_requested_key(profile, owner, status.pool))
                )
            capabilities.append(PoolCapability(name=name, fabric=profile.name, pool=pool, status=status))
    unschedulable: tuple[UnschedulableGroup, ...] = ()
    if config.workloads.enabled:
        unschedulable, pending_lookups = unschedulable_groups(config.enabled_fabrics, index)
        lookups |= pending_lookups
    unpooled = sum(
        1
        for name in index.unpooled
        if any(
            is_target_node(profile, node, node_devices(profile, node, index), views[profile.name])
            for profile in config.enabled_fabrics
            for node in (index.nodes[name],)
        )
    )
    capabilities.sort(key=lambda capability: capability.name)
    # Names are unique by construction (names.py); should two pairs still meet, neither may
    # overwrite the other, so neither is published and the conflict is reported.
    by_name: dict[str, list[PoolCapability]] = {}
    for capability in capabilities:
        by_name.setdefault(capability.name, []).append(capability)
    conflicts = tuple(
        NameConflict(name, tuple(sorted((c.fabric, c.pool) for c in claimants)))
        for name, claimants in by_name.items()
        if len(claimants) > 1
    )
    if conflicts:
        taken = {conflict.name for conflict in conflicts}
        capabilities = [capability for capability in capabilities if capability.name not in taken]
    return Evaluation(
        capabilities=tuple(capabilities),
        unpooled_nodes=unpooled,
        absent=frozenset(absent),
        conflicts=conflicts,
        workload_events=tuple(events),
        unschedulable=unschedulable,
        lookups=frozenset(lookups),
    )
