"""Facts -> FabricCapability status. Pure: no I/O, no clock.

The operator and ``fabriccap evaluate`` both call this module, so the live answer and the
offline answer cannot drift apart. Timestamps and generations are stamped by the writer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fabriccap.core.api import (
    API_VERSION,
    FABRIC_LABEL,
    KIND,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    POOL_KEY_ANNOTATION,
    POOL_LABEL,
    POOL_VALUE_ANNOTATION,
    Condition,
    ConditionType,
    CountBucket,
    DevicePluginStatus,
    EnvVarValue,
    FabricCapabilityStatus,
    GapStatus,
    InstanceTypeCount,
    PoolRef,
    Recommendation,
)
from fabriccap.core.config import Config, FabricProfile
from fabriccap.core.facts import DaemonSetFacts, NodeFacts, PodFacts, Pool
from fabriccap.core.index import FactIndex
from fabriccap.core.names import capability_name, is_label_value

MAX_GAP_NODES = 20
MAX_NAMED_NODES = 5

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"


@dataclass(frozen=True, slots=True)
class PluginView:
    """What a fabric's device plugin looks like cluster-wide."""

    daemon_sets: tuple[str, ...]  # "namespace/name", sorted
    nodes_with_pod: frozenset[str]
    nodes_with_ready_pod: frozenset[str]


@dataclass(frozen=True, slots=True)
class PoolCapability:
    """One FabricCapability: its identity and its computed status."""

    name: str
    fabric: str
    pool: Pool
    status: FabricCapabilityStatus

    def labels(self) -> dict[str, str]:
        labels = {FABRIC_LABEL: self.fabric, MANAGED_BY_LABEL: MANAGED_BY_VALUE}
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


def is_plugin_daemon_set(profile: FabricProfile, daemon_set: DaemonSetFacts) -> bool:
    """Named in the profile, or selected by its labels or its pod template's labels."""
    plugin = profile.device_plugin
    if daemon_set.namespace not in plugin.namespaces:
        return False
    if daemon_set.name in plugin.daemon_set_names:
        return True
    selector = plugin.selector_labels
    if not selector:
        return False
    return any(
        all(labels.get(key) == value for key, value in selector.items())
        for labels in (dict(daemon_set.labels), dict(daemon_set.template_labels))
    )


def plugin_view(profile: FabricProfile, daemon_sets: Iterable[DaemonSetFacts], pods: Iterable[PodFacts]) -> PluginView:
    found = sorted(
        (ds for ds in daemon_sets if is_plugin_daemon_set(profile, ds)), key=lambda ds: (ds.namespace, ds.name)
    )
    owners = {(ds.namespace, ds.name) for ds in found}
    with_pod: set[str] = set()
    with_ready_pod: set[str] = set()
    for pod in pods:
        if pod.node_name is None or (pod.namespace, pod.daemon_set) not in owners:
            continue
        with_pod.add(pod.node_name)
        if pod.ready:
            with_ready_pod.add(pod.node_name)
    return PluginView(
        daemon_sets=tuple(daemon_set.qualified_name for daemon_set in found),
        nodes_with_pod=frozenset(with_pod),
        nodes_with_ready_pod=frozenset(with_ready_pod),
    )


def is_target_node(profile: FabricProfile, node: NodeFacts, plugin: PluginView) -> bool:
    """The SPEC's rules: (a) it has the resource, (b) a plugin pod, (c) an accelerator, or
    (d) an instance type that can carry the fabric (where a plugin that never landed shows)."""
    resource = profile.resource
    if node.capacity_of(resource) > 0 or node.allocatable_of(resource) > 0 or node.problem_with(resource):
        return True
    if node.name in plugin.nodes_with_pod:
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


def _condition(condition_type: ConditionType, status: str, reason: str, message: str) -> Condition:
    return Condition(type=condition_type.value, status=status, reason=reason, message=message)


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


def evaluate_pool(
    profile: FabricProfile, pool: Pool, target_nodes: Iterable[NodeFacts], plugin: PluginView
) -> FabricCapabilityStatus:
    """The status of one (fabric, pool) from its target nodes (cordoned ones included)."""
    resource = profile.resource
    ordered = sorted(target_nodes, key=lambda node: node.name)
    gate = [node for node in ordered if not node.cordoned]
    cordoned = len(ordered) - len(gate)
    total = len(gate)

    allocatable = {node.name: node.allocatable_of(resource) for node in gate}
    advertising = [node.name for node in gate if allocatable[node.name] > 0]
    not_advertising = [node.name for node in gate if allocatable[node.name] == 0]
    distribution = Counter(allocatable.values())
    counts = [CountBucket(count=count, nodes=nodes) for count, nodes in sorted(distribution.items(), reverse=True)]

    with_ready_plugin = [node.name for node in gate if node.name in plugin.nodes_with_ready_pod]
    without_plugin_pod = [node.name for node in gate if node.name not in plugin.nodes_with_pod]
    plugin_not_ready = [
        node.name
        for node in gate
        if node.name in plugin.nodes_with_pod and node.name not in plugin.nodes_with_ready_pod
    ]
    ready_plugin = set(with_ready_plugin)
    plugin_ready_not_advertised = [name for name in not_advertising if name in ready_plugin]
    unhealthy = [node.name for node in gate if node.capacity_of(resource) > allocatable[node.name]]
    advertised_without_plugin = [name for name in advertising if name not in ready_plugin]
    gap_nodes = sorted(set(plugin_ready_not_advertised) | set(unhealthy) | set(advertised_without_plugin))

    type_counts = Counter(node.instance_type for node in gate if node.instance_type)
    instance_types = [
        InstanceTypeCount(name=name, nodes=nodes, max_count=profile.maximum_for(name))
        for name, nodes in sorted(type_counts.items())
    ]
    # Quantities the node reports but that cannot be used count as 0: name them, or a user
    # sees "0 on n4" while kubectl shows a number.
    unusable = [f"{node.name} ({problem})" for node in gate if (problem := node.problem_with(resource))]
    unusable_note = f"; unusable quantity on {_named(unusable)}" if unusable else ""
    isolation_conflict = _isolation_conflict(profile, type_counts)
    uniform = len(distribution) == 1 and isolation_conflict is None
    uniform_count = next(iter(distribution)) if total and uniform else None

    conditions = [
        _device_plugin_condition(profile, plugin, total, without_plugin_pod, plugin_not_ready),
        _advertised_condition(resource, total, advertising, not_advertising, unusable_note),
        _homogeneous_condition(resource, total, allocatable, distribution, isolation_conflict, unusable_note),
        _instance_type_condition(profile, gate, allocatable),
    ]
    ready = _ready_condition(profile, total, advertising, uniform_count, with_ready_plugin, conditions)
    conditions.append(ready)
    conditions.append(_stalled_condition(profile, gate, type_counts, isolation_conflict))

    recommendation = None
    if ready.status == TRUE and uniform_count is not None:
        # A shared resource counts pods that may share the devices: each pod asks for one.
        per_node = 1 if profile.shared else uniform_count
        recommendation = Recommendation(
            resources_per_node={resource: str(per_node)},
            env=[EnvVarValue(name=env.name, value=env.value) for env in profile.recommended_env],
        )
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
        device_plugin=DevicePluginStatus(daemon_sets=list(plugin.daemon_sets), ready_nodes=len(with_ready_plugin)),
        gap=GapStatus(
            plugin_ready_not_advertised=len(plugin_ready_not_advertised),
            unhealthy=len(unhealthy),
            advertised_without_plugin=len(advertised_without_plugin),
            nodes=gap_nodes[:MAX_GAP_NODES],
            truncated=len(gap_nodes) > MAX_GAP_NODES,
        ),
        recommendation=recommendation,
        conditions=conditions,
    )


def _no_target_nodes(condition_type: ConditionType) -> Condition:
    return _condition(condition_type, UNKNOWN, "NoTargetNodes", "no schedulable target node in the pool")


def _device_plugin_condition(
    profile: FabricProfile,
    plugin: PluginView,
    total: int,
    without_pod: list[str],
    not_ready: list[str],
) -> Condition:
    kind = ConditionType.DEVICE_PLUGIN_READY
    if total == 0:
        return _no_target_nodes(kind)
    if not plugin.daemon_sets:
        settings = profile.device_plugin
        where = ", ".join(settings.namespaces)
        scope = f"namespace {where}" if len(settings.namespaces) == 1 else f"namespaces {where}"
        return _condition(
            kind,
            FALSE,
            "PluginNotInstalled",
            f"no {profile.name} device-plugin DaemonSet found in {scope} ({settings.describe()})",
        )
    if without_pod:
        return _condition(
            kind,
            FALSE,
            "PluginNotScheduled",
            f"no device-plugin pod on {len(without_pod)} of {total} nodes: {_named(without_pod)}",
        )
    if not_ready:
        return _condition(
            kind,
            FALSE,
            "PluginNotReady",
            f"device-plugin pod not Ready on {len(not_ready)} of {total} nodes: {_named(not_ready)}",
        )
    return _condition(kind, TRUE, "PluginReadyOnAllNodes", f"device-plugin pod Ready on all {total} nodes")


def _advertised_condition(
    resource: str, total: int, advertising: list[str], not_advertising: list[str], note: str = ""
) -> Condition:
    kind = ConditionType.ADVERTISED
    if total == 0:
        return _no_target_nodes(kind)
    if not advertising:
        return _condition(kind, FALSE, "NotAdvertised", f"{resource} advertised on 0 of {total} target nodes{note}")
    if not_advertising:
        return _condition(
            kind,
            FALSE,
            "PartiallyAdvertised",
            f"{resource} advertised on {len(advertising)} of {total} target nodes; 0 on {_named(not_advertising)}"
            + note,
        )
    return _condition(kind, TRUE, "AllNodesAdvertise", f"{resource} advertised on all {total} target nodes")


def _homogeneous_condition(
    resource: str,
    total: int,
    allocatable: dict[str, int],
    distribution: Counter[int],
    isolation_conflict: tuple[str, str] | None,
    note: str = "",
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
                "MixedCounts",
                f"all {total} nodes advertise {resource}: {count}, but EFA traffic between "
                f"{first} and {second} is unsupported, so the pool cannot be one fabric",
            )
        return _condition(kind, TRUE, "UniformCount", f"all {total} nodes advertise {resource}: {count}")
    spread = ", ".join(
        f"{count} on {_plural(nodes, 'node')}" for count, nodes in sorted(distribution.items(), reverse=True)
    )
    if 0 in distribution:
        offenders = [name for name, count in allocatable.items() if count == 0]
        return _condition(
            kind,
            FALSE,
            "PartialRollout",
            f"{resource} differs across {total} nodes ({spread}); 0 on {_named(offenders)}{note}",
        )
    # Name the nodes outside the most common count: they are the likely odd ones out.
    most_common = max(distribution.items(), key=lambda item: (item[1], item[0]))[0]
    offenders = [name for name, count in allocatable.items() if count != most_common]
    return _condition(
        kind,
        FALSE,
        "MixedCounts",
        f"{resource} differs across {total} nodes ({spread}); not {most_common} on {_named(offenders)}",
    )


def _instance_type_condition(profile: FabricProfile, gate: list[NodeFacts], allocatable: dict[str, int]) -> Condition:
    kind = ConditionType.MATCHES_INSTANCE_TYPE
    known = [(node, maximum) for node in gate if (maximum := profile.maximum_for(node.instance_type)) is not None]
    if not known:
        return _condition(
            kind,
            UNKNOWN,
            "UnknownInstanceType",
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
            "AboveInstanceMaximum",
            f"{len(above)} of {len(known)} nodes of known types advertise more than their instance "
            f"type's maximum: {_named(above)}",
        )
    if below:
        return _condition(
            kind,
            FALSE,
            "BelowInstanceMaximum",
            f"{len(below)} of {len(known)} nodes of known types advertise fewer than their instance "
            f"type's maximum: {_named(below)}",
        )
    unknown = len(gate) - len(known)
    suffix = f" ({unknown} of unknown type)" if unknown else ""
    return _condition(
        kind,
        TRUE,
        "MatchesInstanceMaximum",
        f"all {len(known)} nodes of known types advertise their instance type's maximum{suffix}",
    )


def _ready_condition(
    profile: FabricProfile,
    total: int,
    advertising: list[str],
    uniform_count: int | None,
    with_ready_plugin: list[str],
    conditions: list[Condition],
) -> Condition:
    kind = ConditionType.READY
    resource = profile.resource
    by_type = {condition.type: condition for condition in conditions}
    homogeneous = by_type[ConditionType.HOMOGENEOUS]
    if total == 0:
        return _condition(kind, FALSE, "NoTargetNodes", "no schedulable target node in the pool")
    if not advertising:
        return _condition(kind, FALSE, "NotAdvertised", by_type[ConditionType.ADVERTISED].message)
    if homogeneous.status != TRUE:
        return _condition(kind, FALSE, homogeneous.reason, homogeneous.message)
    if len(with_ready_plugin) < total:
        plugin = by_type[ConditionType.DEVICE_PLUGIN_READY]
        return _condition(
            kind,
            FALSE,
            "DevicePluginGap",
            f"all {total} nodes advertise {resource}: {uniform_count}, but {plugin.message}",
        )
    return _condition(
        kind,
        TRUE,
        "UniformCapability",
        f"all {total} nodes advertise {resource}: {uniform_count} with a Ready device plugin; "
        + (
            f"up to {uniform_count} pods per node may share it, each requesting 1"
            if profile.shared
            else f"a job may request up to {uniform_count} per node"
        ),
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
            "InstanceTypeUnsupported",
            f"every node's instance type supports no {profile.resource} ({types}: maximum 0); "
            "this pool cannot become Ready without other instance types",
        )
    known = {name: maximum for name in type_counts if (maximum := profile.maximum_for(name)) is not None}
    if len(set(known.values())) > 1:
        listed = ", ".join(f"{name} ({maximum})" for name, maximum in sorted(known.items()))
        return _condition(
            kind,
            TRUE,
            "HeterogeneousInstanceTypes",
            f"the pool mixes instance types with different {profile.resource} maxima: {listed}",
        )
    if isolation_conflict is not None:
        first, second = isolation_conflict
        return _condition(
            kind,
            TRUE,
            "HeterogeneousInstanceTypes",
            f"the pool mixes {first} and {second}; EFA traffic between them is unsupported",
        )
    return _condition(kind, FALSE, "NotStalled", "no instance-type condition prevents this pool from becoming Ready")


def plugin_views(
    config: Config, daemon_sets: Iterable[DaemonSetFacts], pods: Iterable[PodFacts]
) -> dict[str, PluginView]:
    """Each enabled fabric's plugin view, computed once per evaluation round."""
    daemon_set_list, pod_list = list(daemon_sets), list(pods)
    return {profile.name: plugin_view(profile, daemon_set_list, pod_list) for profile in config.enabled_fabrics}


def evaluate(config: Config, index: FactIndex, pools: Iterable[Pool] | None = None) -> Evaluation:
    """Every FabricCapability the facts call for, sorted by name: the one evaluation driver.

    ``fabriccap evaluate`` passes no ``pools`` (every pool); the operator passes the pools
    whose facts changed. A (fabric, pool) evaluated without a target node is named in
    ``absent``, so the operator can start that object's grace period.
    """
    views = plugin_views(config, index.daemon_sets.values(), index.pods.values())
    primary_key = config.pool_labels[0]
    fabric_names = [fabric.name for fabric in config.fabrics]
    capabilities: list[PoolCapability] = []
    absent: set[str] = set()
    for pool in list(index.pool_members) if pools is None else pools:
        members = index.members(pool)
        for profile in config.enabled_fabrics:
            name = capability_name(profile.name, pool.key, pool.value, primary_key, fabric_names)
            plugin = views[profile.name]
            targets = [node for node in members if is_target_node(profile, node, plugin)]
            if targets:
                status = evaluate_pool(profile, pool, targets, plugin)
                capabilities.append(PoolCapability(name=name, fabric=profile.name, pool=pool, status=status))
            else:
                absent.add(name)
    unpooled = sum(
        1
        for name in index.unpooled
        if any(is_target_node(profile, index.nodes[name], views[profile.name]) for profile in config.enabled_fabrics)
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
        capabilities=tuple(capabilities), unpooled_nodes=unpooled, absent=frozenset(absent), conflicts=conflicts
    )
