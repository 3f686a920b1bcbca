"""Facts -> FabricCapability status. Pure: no I/O, no clock.

The operator and ``fabriccap evaluate`` both call this module, so the live answer and the
offline answer cannot drift apart. Timestamps and generations are stamped by the writer.
Each pool is judged once, node by node, by ``core.analysis``; the conditions here are built
from that analysis, the one ``fabriccap explain`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabriccap.core import api
from fabriccap.core.analysis import (
    COUNT_REASONS,
    STALL_REASONS,
    Cause,
    Gap,
    NodeAnalysis,
    PluginState,
    PoolAnalysis,
    analyse_pool,
    is_target_node,
    node_devices,
)
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
    ConditionStatus,
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
from fabriccap.core.config import Config, FabricProfile, Source
from fabriccap.core.facts import DaemonSetFacts, PodFacts, Pool
from fabriccap.core.index import FactIndex, NamespacedKey
from fabriccap.core.names import capability_name, is_label_value
from fabriccap.core.selection import ClassSource
from fabriccap.core.sources import (
    SOURCES,
    FabricView,
    RequestForm,
    fabric_view,
    in_order,
    providers_phrase,
    read_sources,
    request_forms,
)
from fabriccap.core.workloads import (
    LookupKey,
    PodJudgement,
    UnschedulableGroup,
    WorkloadEvent,
    judge_pod,
    not_requested_event,
    not_requested_key,
    not_used_event,
    not_used_key,
    pool_workloads,
    unschedulable_groups,
)

MAX_GAP_NODES = api.MAX_GAP_NODES  # the status model's bound (api.py: how large a status can be)
MAX_NAMED_NODES = 5
# Selector failures named in a message, each once per (class, cause); more are counted.
MAX_NAMED_CAUSES = 3
# What kube-scheduler does on a selector error (k8s.io/dynamic-resource-allocation@v0.35.4
# allocator: the error aborts the pod's whole scheduling attempt; it is not a skip).
SCHEDULER_ON_ERROR = (
    "kube-scheduler aborts scheduling a pod whose claim of this class meets such a device"
    " (FailedScheduling, PodScheduled=False SchedulerError), so fix the class or the devices"
)


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
    # The (fabric, pool) pairs evaluated that have no target node now, each with the status
    # that says so (``empty_status``): what an object of such a pool shows until it is deleted.
    emptied: tuple[PoolCapability, ...] = ()
    conflicts: tuple[NameConflict, ...] = ()
    # FabricNotRequested and FabricNotUsed Events for the workloads of the pools evaluated.
    workload_events: tuple[WorkloadEvent, ...] = ()
    # Pending pods no node can give the fabric, cluster-wide, grouped by owner and fabric.
    unschedulable: tuple[UnschedulableGroup, ...] = ()
    # Owners and claims the evaluation could not see through: read them, then evaluate again.
    lookups: frozenset[LookupKey] = frozenset()

    def unschedulable_pods(self, fabric: str) -> int:
        return sum(group.pods for group in self.unschedulable if group.fabric == fabric)

    @property
    def absent(self) -> frozenset[str]:
        """The names of the pairs evaluated that have no target node now."""
        return frozenset(capability.name for capability in self.emptied)


def _named(nodes: Sequence[str]) -> str:
    shown = ", ".join(nodes[:MAX_NAMED_NODES])
    more = len(nodes) - MAX_NAMED_NODES
    return f"{shown} (+{more} more)" if more > 0 else shown


def _names(nodes: Iterable[NodeAnalysis]) -> list[str]:
    return [node.name for node in nodes]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _condition(condition_type: ConditionType, status: ConditionStatus, reason: Reason, message: str) -> Condition:
    return Condition(type=condition_type.value, status=status, reason=reason.value, message=message)


@dataclass(frozen=True, slots=True)
class _Notes:
    """What every message about counts appends: through which sources the pool advertises
    (when more than one), why some devices could not be counted, and how the fabric's DRA
    devices were selected where that needs saying."""

    mixed: str  # " (advertised through device plugin on 2 nodes, DRA driver on 1 node)"
    uncounted: str  # "; unusable quantity on n4 (...)"
    selection: str = ""  # "; DeviceClass X selector #0 failed on ..."


def _notes(analysis: PoolAnalysis, by_source: Sequence[SourceCount]) -> _Notes:
    mixed = ""
    if len(analysis.sources_seen) > 1:
        spread = ", ".join(
            f"{SOURCES[Source(entry.source)].provider_spelled} on {_plural(entry.nodes, 'node')}" for entry in by_source
        )
        mixed = f" (advertised through {spread})"
    # Devices a node reports that cannot be counted count as 0: say why, or a user sees
    # "0 on n4" while kubectl shows a number (or a ResourceSlice).
    uncounted = ""
    for source in read_sources(analysis.profile):
        listed = [
            f"{node.name} ({problem})" for node in analysis.gate if (problem := node.devices.readings[source].problem)
        ]
        if listed:
            uncounted += f"; {SOURCES[source].problem} on {_named(listed)}"
    return _Notes(mixed, uncounted, _selection_notes(analysis))


def _selection_notes(analysis: PoolAnalysis) -> str:
    """How the pool's DRA devices were selected, where that needs saying: a class counted from
    the profile's copy, missing or broken; devices its selectors failed on; devices counted from
    ResourceClaims; older slices ignored."""
    selection = analysis.selection
    if selection is None:
        return ""
    readings = [(node, node.devices.readings[Source.DRA]) for node in analysis.gate]
    dra_nodes = any(reading.evidence for _, reading in readings)
    notes = []
    for effective in selection.classes:
        if effective.stands_in and dra_nodes:
            notes.append(
                f"{effective.describe()} is not in the cluster: counted with {effective.copy_origin}, but"
                " ResourceClaims of it cannot be allocated until it is installed"
            )
        elif effective.error is not None and (dra_nodes or len(analysis.advertising) < len(analysis.gate)):
            notes.append(f"{effective.describe()} selects nothing: {effective.error}")
    failures: dict[tuple[str, str], list[tuple[str, int, str]]] = {}
    for node, reading in readings:
        for error in reading.errors:
            failures.setdefault((error.class_name, error.cause), []).append((node.name, error.devices, error.example))
    by_name = {effective.name: effective for effective in selection.classes}
    for (class_name, cause), failed in sorted(failures.items())[:MAX_NAMED_CAUSES]:
        failing = by_name.get(class_name)
        devices = sum(count for _, count, _ in failed)
        example_node, _, example_device = failed[0]
        described = failing.describe() if failing is not None else f"DeviceClass {class_name}"
        note = (
            f"{described} {cause} on {_plural(devices, 'device')} of {_plural(len(failed), 'node')}"
            f" (e.g. {example_node} device {example_device}): not counted"
        )
        if failing is None or failing.source is ClassSource.CLUSTER:
            note += f"; {SCHEDULER_ON_ERROR}"
        notes.append(note)
    if len(failures) > MAX_NAMED_CAUSES:
        notes.append(f"{len(failures) - MAX_NAMED_CAUSES} more selector failures (fabriccap explain)")
    counted = [f"{node.name}: {'; '.join(reading.notes)}" for node, reading in readings if reading.notes]
    if counted:
        notes.append(f"ResourceSlices: {_named(counted)}")
    return "".join(f"; {note}" for note in notes)


def evaluate_pool(analysis: PoolAnalysis) -> FabricCapabilityStatus:
    """The status of one (fabric, pool), from its analysis (cordoned target nodes included)."""
    profile = analysis.profile
    if not analysis.nodes:
        return empty_status(
            profile.name,
            profile.resource,
            PoolRef(key=analysis.pool.key, value=analysis.pool.value),
            [source.value for source in profile.sources],
        )
    gate = analysis.gate
    advertising = analysis.advertising
    by_source = [
        SourceCount(source=source.value, nodes=sum(1 for node in advertising if source in node.devices.sources))
        for source in profile.sources
    ]
    notes = _notes(analysis, by_source)
    conditions = [
        _device_plugin_condition(analysis),
        _advertised_condition(analysis, notes),
        _homogeneous_condition(analysis, notes),
        _instance_type_condition(analysis),
    ]
    ready = _ready_condition(analysis, conditions, notes)
    conditions.append(ready)
    conditions.append(_stalled_condition(analysis))

    recommendation = None
    if ready.status == ConditionStatus.TRUE and analysis.uniform_count is not None:
        recommendation = _recommendation(profile, analysis.request_forms, analysis.uniform_count)
    # The DaemonSets that serve this pool's nodes: a device-plugin pool does not list DRANET.
    daemon_sets = sorted({ds for source in analysis.serving for ds in analysis.view.of(source).daemon_sets})
    gap_nodes = [node.name for node in gate if node.gaps]  # gate is in name order
    return FabricCapabilityStatus(
        fabric=profile.name,
        resource_name=profile.resource,
        pool=PoolRef(key=analysis.pool.key, value=analysis.pool.value),
        nodes=len(gate),
        cordoned_nodes=len(analysis.nodes) - len(gate),
        advertising_nodes=len(advertising),
        uniform_count=analysis.uniform_count,
        counts=[CountBucket(count=count, nodes=nodes) for count, nodes in analysis.counts.items()],
        instance_types=[
            InstanceTypeCount(name=name, nodes=nodes, max_count=profile.maximum_for(name))
            for name, nodes in analysis.instance_types.items()
        ],
        device_plugin=DevicePluginStatus(
            daemon_sets=daemon_sets, ready_nodes=sum(1 for node in gate if node.provider is PluginState.READY)
        ),
        gap=GapStatus(
            plugin_ready_not_advertised=sum(1 for node in gate if Gap.PLUGIN_READY_NOT_ADVERTISED in node.gaps),
            unhealthy=sum(1 for node in gate if Gap.UNHEALTHY in node.gaps),
            advertised_without_plugin=sum(1 for node in gate if Gap.ADVERTISED_WITHOUT_PLUGIN in node.gaps),
            conflicting_advertisers=sum(1 for node in gate if Gap.CONFLICTING_ADVERTISERS in node.gaps),
            nodes=gap_nodes[:MAX_GAP_NODES],
            truncated=len(gap_nodes) > MAX_GAP_NODES,
        ),
        recommendation=recommendation,
        sources=by_source,
        conditions=conditions,
    )


def _recommendation(profile: FabricProfile, forms: frozenset[RequestForm], uniform_count: int) -> Recommendation:
    """What a workload asks for: each form of request that schedules on every node of the pool
    (the extended resource, a ResourceClaimTemplate of the fabric's DeviceClass, or both where
    the cluster maps the resource to the class)."""
    # A shared resource counts pods that may share the devices: each pod asks for one.
    per_node = 1 if profile.shared else uniform_count
    claim = None
    if RequestForm.RESOURCE_CLAIM in forms and profile.dra.device_class_name:
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
        resources_per_node={profile.resource: str(per_node)} if RequestForm.EXTENDED_RESOURCE in forms else None,
        resource_claim_template=claim,
        env=[EnvVarValue(name=env.name, value=env.value) for env in profile.recommended_env],
    )


NO_TARGET_NODES_MESSAGE = "no schedulable target node in the pool"
# What an object that no pool calls for is told (made by hand, or left over from a pool that went).
NO_SUCH_POOL_MESSAGE = (
    "no such pool: no pool of the operator's configuration has a target node under this object's name"
    " (made by hand, or left over); an object managed by fabriccap is deleted after the grace period"
)


def _no_target_nodes(condition_type: ConditionType, message: str = NO_TARGET_NODES_MESSAGE) -> Condition:
    return _condition(condition_type, ConditionStatus.UNKNOWN, Reason.NO_TARGET_NODES, message)


def _unknown_instance_type(resource: str) -> Condition:
    return _condition(
        ConditionType.MATCHES_INSTANCE_TYPE,
        ConditionStatus.UNKNOWN,
        Reason.UNKNOWN_INSTANCE_TYPE,
        f"no node of an instance type with a known {resource} maximum",
    )


def _not_stalled() -> Condition:
    return _condition(
        ConditionType.STALLED,
        ConditionStatus.FALSE,
        Reason.NOT_STALLED,
        "no instance-type condition prevents this pool from becoming Ready",
    )


def empty_status(
    fabric: str, resource_name: str, pool: PoolRef, sources: Sequence[str], message: str = NO_TARGET_NODES_MESSAGE
) -> FabricCapabilityStatus:
    """The status of a (fabric, pool) with no target node at all: every count 0, Ready False
    ``NoTargetNodes``, the node conditions Unknown. A pool that loses its last node shows this
    at once (a node group deleted, scaled to zero), and so does an object no pool calls for
    (``NO_SUCH_POOL_MESSAGE``), until the grace period deletes it."""
    return FabricCapabilityStatus(
        fabric=fabric,
        resource_name=resource_name,
        pool=pool,
        nodes=0,
        cordoned_nodes=0,
        advertising_nodes=0,
        counts=[],
        instance_types=[],
        device_plugin=DevicePluginStatus(daemon_sets=[], ready_nodes=0),
        gap=GapStatus(
            plugin_ready_not_advertised=0, unhealthy=0, advertised_without_plugin=0, nodes=[], truncated=False
        ),
        sources=[SourceCount(source=source, nodes=0) for source in sources],
        conditions=[
            _no_target_nodes(ConditionType.DEVICE_PLUGIN_READY, message),
            _no_target_nodes(ConditionType.ADVERTISED, message),
            _no_target_nodes(ConditionType.HOMOGENEOUS, message),
            _unknown_instance_type(resource_name),
            _condition(ConditionType.READY, ConditionStatus.FALSE, Reason.NO_TARGET_NODES, message),
            _not_stalled(),
        ],
    )


def data_unavailable(status: FabricCapabilityStatus, message: str) -> FabricCapabilityStatus:
    """``status`` failed closed because the data it rests on could not be read: Ready False
    ``DataUnavailable`` (``message`` names what), and no recommendation. The rest is left as it
    was computed, the last answer there is, which Ready now says not to trust."""
    ready = _condition(ConditionType.READY, ConditionStatus.FALSE, Reason.DATA_UNAVAILABLE, message)
    conditions = [ready if condition.type == ConditionType.READY else condition for condition in status.conditions]
    return status.model_copy(update={"conditions": conditions, "recommendation": None})


def _device_plugin_condition(analysis: PoolAnalysis) -> Condition:
    kind = ConditionType.DEVICE_PLUGIN_READY
    profile, gate = analysis.profile, analysis.gate
    total = len(gate)
    if total == 0:
        return _no_target_nodes(kind)
    needed = analysis.serving
    word = providers_phrase(needed)
    if all(node.provider is PluginState.NOT_INSTALLED for node in gate):
        namespaces = profile.device_plugin.namespaces
        where = ", ".join(namespaces)
        scope = f"namespace {where}" if len(namespaces) == 1 else f"namespaces {where}"
        finders = {source: SOURCES[source].finder(profile).describe() for source in needed}
        how = (
            "; ".join(f"{SOURCES[source].provider}: {finders[source]}" for source in in_order(needed))
            if len(needed) > 1
            else finders[next(iter(needed))]
        )
        return _condition(
            kind,
            ConditionStatus.FALSE,
            Reason.PLUGIN_NOT_INSTALLED,
            f"no {profile.name} {word} DaemonSet found in {scope} ({how})",
        )
    without_pod = _names(node for node in gate if node.provider in (PluginState.NO_POD, PluginState.NOT_INSTALLED))
    if without_pod:
        return _condition(
            kind,
            ConditionStatus.FALSE,
            Reason.PLUGIN_NOT_SCHEDULED,
            f"no {word} pod on {len(without_pod)} of {total} nodes: {_named(without_pod)}",
        )
    not_ready = _names(node for node in gate if node.provider is PluginState.NOT_READY)
    if not_ready:
        return _condition(
            kind,
            ConditionStatus.FALSE,
            Reason.PLUGIN_NOT_READY,
            f"{word} pod not Ready on {len(not_ready)} of {total} nodes: {_named(not_ready)}",
        )
    serving = [source for source in in_order(needed) if any(source in analysis.ready_providers(node) for node in gate)]
    return _condition(
        kind,
        ConditionStatus.TRUE,
        Reason.PLUGIN_READY_ON_ALL_NODES,
        f"{providers_phrase(serving)} pod Ready on all {total} nodes",
    )


def _advertised_condition(analysis: PoolAnalysis, notes: _Notes) -> Condition:
    kind = ConditionType.ADVERTISED
    total = len(analysis.gate)
    if total == 0:
        return _no_target_nodes(kind)
    advertising = analysis.advertising
    if not advertising:
        # Say where else was looked, or a DRA user reads "efa advertised on 0" as a plugin problem.
        nowhere = ", and ".join(
            SOURCES[source].nowhere(analysis.profile, f"{total} target nodes" if position == 0 else None)
            for position, source in enumerate(read_sources(analysis.profile))
        )
        return _condition(
            kind, ConditionStatus.FALSE, Reason.NOT_ADVERTISED, f"{nowhere}{notes.uncounted}{notes.selection}"
        )
    not_advertising = _names(analysis.breaking(kind))
    if not_advertising:
        return _condition(
            kind,
            ConditionStatus.FALSE,
            Reason.PARTIALLY_ADVERTISED,
            f"{analysis.subject} advertised on {len(advertising)} of {total} target nodes{notes.mixed}; "
            f"0 on {_named(not_advertising)}{notes.uncounted}{notes.selection}",
        )
    return _condition(
        kind,
        ConditionStatus.TRUE,
        Reason.ALL_NODES_ADVERTISE,
        f"{analysis.subject} advertised on all {total} target nodes{notes.mixed}{notes.selection}",
    )


def _homogeneous_condition(analysis: PoolAnalysis, notes: _Notes) -> Condition:
    kind = ConditionType.HOMOGENEOUS
    total, subject, fault = len(analysis.gate), analysis.subject, analysis.count_fault
    if total == 0:
        return _no_target_nodes(kind)
    if fault is None:
        return _condition(
            kind,
            ConditionStatus.TRUE,
            Reason.UNIFORM_COUNT,
            f"all {total} nodes advertise {subject}: {analysis.uniform_count}{notes.mixed}",
        )
    reason = COUNT_REASONS[fault]
    if fault is Cause.ISOLATED and analysis.isolation_conflict is not None:
        first, second = analysis.isolation_conflict
        return _condition(
            kind,
            ConditionStatus.FALSE,
            reason,
            f"all {total} nodes advertise {subject}: {next(iter(analysis.counts))}, but "
            f"{analysis.profile.spoken_name} traffic between {first} and {second} is unsupported, "
            "so the pool cannot be one fabric",
        )
    spread = ", ".join(f"{count} on {_plural(nodes, 'node')}" for count, nodes in analysis.counts.items())
    offenders = _named(_names(analysis.breaking(kind, fault)))
    if fault is Cause.AT_ZERO:
        return _condition(
            kind,
            ConditionStatus.FALSE,
            reason,
            f"{subject} differs across {total} nodes ({spread}); 0 on {offenders}{notes.uncounted}",
        )
    # Name the nodes outside the most common count: they are the likely odd ones out.
    return _condition(
        kind,
        ConditionStatus.FALSE,
        reason,
        f"{subject} differs across {total} nodes ({spread}); not {analysis.typical_count} on {offenders}"
        + notes.mixed
        + notes.uncounted,
    )


def _instance_type_condition(analysis: PoolAnalysis) -> Condition:
    kind = ConditionType.MATCHES_INSTANCE_TYPE
    known = [node for node in analysis.gate if node.maximum is not None]
    if not known:
        return _unknown_instance_type(analysis.profile.resource)
    above = [f"{node.name} ({node.count} > {node.maximum})" for node in analysis.breaking(kind, Cause.ABOVE_MAXIMUM)]
    below = [f"{node.name} ({node.count} < {node.maximum})" for node in analysis.breaking(kind, Cause.BELOW_MAXIMUM)]
    if above:
        return _condition(
            kind,
            ConditionStatus.FALSE,
            Reason.ABOVE_INSTANCE_MAXIMUM,
            f"{len(above)} of {len(known)} nodes of known types advertise more than their instance "
            f"type's maximum: {_named(above)}",
        )
    if below:
        return _condition(
            kind,
            ConditionStatus.FALSE,
            Reason.BELOW_INSTANCE_MAXIMUM,
            f"{len(below)} of {len(known)} nodes of known types advertise fewer than their instance "
            f"type's maximum: {_named(below)}",
        )
    unknown = len(analysis.gate) - len(known)
    suffix = f" ({unknown} of unknown type)" if unknown else ""
    return _condition(
        kind,
        ConditionStatus.TRUE,
        Reason.MATCHES_INSTANCE_MAXIMUM,
        f"all {len(known)} nodes of known types advertise their instance type's maximum{suffix}",
    )


def _usage(analysis: PoolAnalysis, uniform_count: int | None) -> str:
    """How a workload uses a Ready pool, by the forms of request that schedule on all its nodes."""
    if analysis.profile.shared:
        return f"up to {uniform_count} pods per node may share it, each requesting 1"
    forms = analysis.request_forms
    if forms == {RequestForm.RESOURCE_CLAIM}:
        return f"a job may claim up to {uniform_count} per node (recommendation.resourceClaimTemplate)"
    usage = f"a job may request up to {uniform_count} per node"
    mapped = analysis.selection.extended_resource_class if analysis.selection is not None else None
    if mapped is not None and Source.DRA in analysis.sources_seen:
        usage += (
            f" ({analysis.profile.resource} is served from DRA devices too: DeviceClass {mapped} maps it with"
            " spec.extendedResourceName)"
        )
    return usage


def _mixed_sources_message(analysis: PoolAnalysis) -> str:
    """Which nodes each form of request schedules onto, when no form schedules onto all."""
    clauses: list[str] = []
    for form in RequestForm:
        nodes = [node.name for node in analysis.advertising if form in _forms_of(analysis, node)]
        if nodes:
            lead = f"a pod {form.value} schedules only onto" if not clauses else f"one {form.value} only onto"
            clauses.append(f"{lead} {_plural(len(nodes), 'node')} ({_named(nodes)})")
    profile = analysis.profile
    fix = (
        f"map {profile.resource} to DeviceClass {profile.dra.device_class_name} with spec.extendedResourceName"
        " (KEP-5004, feature gate DRAExtendedResource) or move the pool to one source"
    )
    counted = f"{analysis.subject}: {analysis.uniform_count}{_sources_spread(analysis)}"
    return (
        f"all {len(analysis.gate)} nodes advertise {counted}, but no one request schedules on every node: "
        f"{'; '.join(clauses)}; {fix}"
    )


def _forms_of(analysis: PoolAnalysis, node: NodeAnalysis) -> frozenset[RequestForm]:
    mapped = analysis.selection is not None and analysis.selection.extended_resource_class is not None
    return request_forms(node.devices.advertisers, extended_resource_mapped=mapped)


def _sources_spread(analysis: PoolAnalysis) -> str:
    spread = []
    for source in in_order(analysis.sources_seen):
        nodes = sum(1 for node in analysis.advertising if source in node.devices.advertisers)
        spread.append(f"{SOURCES[source].provider_spelled} on {_plural(nodes, 'node')}")
    return f" (through {', '.join(spread)})" if len(spread) > 1 else ""


def _conflict_message(analysis: PoolAnalysis, conflicting: Sequence[NodeAnalysis]) -> str:
    """The nodes that advertise through two kinds of provider, what each says, and what to do."""
    profile = analysis.profile
    sources = in_order({source for node in conflicting for source in node.devices.advertisers})
    first = conflicting[0]
    evidence = ", ".join(
        f"{SOURCES[source].provider_spelled} {first.devices.readings[source].devices}" for source in sources
    )
    providers = " and ".join(f"the {SOURCES[source].provider_spelled}" for source in sources)
    return (
        f"{len(conflicting)} of {len(analysis.gate)} nodes advertise {profile.name} through both {providers}"
        f" ({first.name}: {evidence}): {_named(_names(conflicting))}; the same devices can be handed out twice,"
        f" to a pod asking for {profile.resource} and to a ResourceClaim; remove one of the two from these"
        " nodes (docs/runbook.md, FabricAdvertiserConflict)"
    )


def _ready_condition(analysis: PoolAnalysis, conditions: list[Condition], notes: _Notes) -> Condition:
    kind = ConditionType.READY
    by_type = {condition.type: condition for condition in conditions}
    homogeneous = by_type[ConditionType.HOMOGENEOUS]
    total, subject, uniform_count = len(analysis.gate), analysis.subject, analysis.uniform_count
    if total == 0:
        return _condition(kind, ConditionStatus.FALSE, Reason.NO_TARGET_NODES, NO_TARGET_NODES_MESSAGE)
    if not analysis.advertising:
        return _condition(kind, ConditionStatus.FALSE, Reason.NOT_ADVERTISED, by_type[ConditionType.ADVERTISED].message)
    if homogeneous.status != ConditionStatus.TRUE:
        return _condition(kind, ConditionStatus.FALSE, Reason(homogeneous.reason), homogeneous.message)
    if analysis.mixed_sources:
        return _condition(kind, ConditionStatus.FALSE, Reason.MIXED_SOURCES, _mixed_sources_message(analysis))
    conflicting = analysis.breaking(kind, Cause.CONFLICTING_ADVERTISERS)
    if conflicting:
        return _condition(
            kind, ConditionStatus.FALSE, Reason.ADVERTISER_CONFLICT, _conflict_message(analysis, conflicting)
        )
    if analysis.breaking(ConditionType.DEVICE_PLUGIN_READY):
        plugin = by_type[ConditionType.DEVICE_PLUGIN_READY]
        return _condition(
            kind,
            ConditionStatus.FALSE,
            Reason.DEVICE_PLUGIN_GAP,
            f"all {total} nodes advertise {subject}: {uniform_count}, but {plugin.message}{notes.selection}",
        )
    provider = providers_phrase(analysis.sources_seen, spelled=True)
    usage = _usage(analysis, uniform_count)
    return _condition(
        kind,
        ConditionStatus.TRUE,
        Reason.UNIFORM_CAPABILITY,
        f"all {total} nodes advertise {subject}: {uniform_count} with a Ready {provider}{notes.mixed}; {usage}"
        + notes.selection,
    )


def _stalled_condition(analysis: PoolAnalysis) -> Condition:
    kind = ConditionType.STALLED
    profile, stall = analysis.profile, analysis.stall
    if stall is None:
        return _not_stalled()
    if stall is Cause.TYPE_UNSUPPORTED:
        types = ", ".join(analysis.instance_types)
        message = (
            f"every node's instance type supports no {profile.resource} ({types}: maximum 0); "
            "this pool cannot become Ready without other instance types"
        )
    elif stall is Cause.UNCOMMON_MAXIMUM:
        listed = ", ".join(
            f"{name} ({maximum})"
            for name in analysis.instance_types
            if (maximum := profile.maximum_for(name)) is not None
        )
        message = f"the pool mixes instance types with different {profile.resource} maxima: {listed}"
    else:  # isolated instance types
        first, second = analysis.isolation_conflict or ("", "")
        message = f"the pool mixes {first} and {second}; {profile.spoken_name} traffic between them is unsupported"
    return _condition(kind, ConditionStatus.TRUE, STALL_REASONS[stall], message)


def analyse_capability(config: Config, index: FactIndex, capability: PoolCapability) -> PoolAnalysis:
    """The analysis ``capability``'s status was built from, made again from the same facts:
    what ``fabriccap explain`` shows node by node."""
    profile = next(fabric for fabric in config.enabled_fabrics if fabric.name == capability.fabric)
    view = fabric_view(profile, list(index.daemon_sets.values()), list(index.pods.values()))
    return analyse_pool(profile, capability.pool, index.members(capability.pool), view, index)


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
    status: FabricCapabilityStatus  # without workloads (``empty_status`` when there is no target)
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
    analysis = analyse_pool(profile, pool, members, view, index)
    targets = tuple(node.name for node in analysis.nodes)
    status = evaluate_pool(analysis)
    fresh = _PoolMemo(facts_version, index.provider_version, targets, status)
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
    A (fabric, pool) evaluated without a target node is in ``emptied``, with the status that
    says so: the operator writes it at once and starts that object's grace period.
    """
    views = (
        memo.fabric_views(config, index)
        if memo is not None
        else fabric_views(config, index.daemon_sets.values(), index.pods.values())
    )
    primary_key = config.pool_labels[0]
    fabric_names = [fabric.name for fabric in config.fabrics]
    capabilities: list[PoolCapability] = []
    emptied: list[PoolCapability] = []
    events: list[WorkloadEvent] = []
    lookups: set[LookupKey] = set()
    for pool in list(index.pool_members) if pools is None else pools:
        for profile in config.enabled_fabrics:
            name = capability_name(profile.name, pool.key, pool.value, primary_key, fabric_names)
            side = _pool_side(profile, pool, index, views[profile.name], memo)
            status = side.status
            if not side.targets:
                emptied.append(PoolCapability(name=name, fabric=profile.name, pool=pool, status=status))
                continue
            if config.transport.enabled and status.recommendation is not None:
                env = [EnvVarValue(name=env.name, value=env.value) for env in config.recommended_env(profile)]
                status = status.model_copy(
                    update={"recommendation": status.recommendation.model_copy(update={"env": env})}
                )
            if config.workloads.enabled:
                found = pool_workloads(
                    _judgements(profile, side, index), status.advertising_nodes > 0, transport=config.transport.enabled
                )
                status = status.model_copy(update={"workloads": found.status})
                lookups |= found.lookups
                events.extend(
                    not_requested_event(profile, name, status, owner, count)
                    for owner, count in found.without_fabric
                    if warned is None or not warned(not_requested_key(profile, owner, status.pool))
                )
                events.extend(
                    not_used_event(profile, status, not_used)
                    for not_used in found.not_used
                    if warned is None
                    or not warned(not_used_key(profile, not_used.owner, status.pool, not_used.example.verdict))
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
        emptied=tuple(sorted(emptied, key=lambda capability: capability.name)),
        conflicts=conflicts,
        workload_events=tuple(events),
        unschedulable=unschedulable,
        lookups=frozenset(lookups),
    )
