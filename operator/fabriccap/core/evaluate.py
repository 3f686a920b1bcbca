"""Facts -> FabricCapability status. Pure: no I/O, no clock.

The operator and ``fabriccap evaluate`` both call this module, so the live answer and the
offline answer cannot drift apart. Timestamps and generations are stamped by the writer.
Each pool is judged once, node by node, by ``core.analysis``; the conditions here are built
from that analysis, the one ``fabriccap explain`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fabriccap.core import api
from fabriccap.core.analysis import (
    COUNT_REASONS,
    STALL_REASONS,
    Cause,
    Gap,
    LeftOut,
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
    LaunchableCount,
    LaunchableStatus,
    LaunchableType,
    NamingStatus,
    PoolRef,
    Reason,
    Recommendation,
    ResourceClaimSpec,
    ResourceClaimTemplateSpec,
    SourceCount,
    is_ready_status,
    status_with,
)
from fabriccap.core.cel import ITERATION_BUDGET_CAUSE
from fabriccap.core.config import Config, FabricProfile, Source
from fabriccap.core.facts import DaemonSetFacts, ObjectRef, PodFacts, Pool
from fabriccap.core.index import MAX_DRIVER_NAME, MAX_NAMED_RULES, FactIndex, NamespacedKey
from fabriccap.core.karpenter_facts import NODE_CLASS_GROUP, NodeClassFacts, NodePoolFacts
from fabriccap.core.launchable import (
    MAX_LISTED_TYPES,
    LaunchableTypes,
    judge_node_pool,
    launch_refusal,
    missing_nodes,
)
from fabriccap.core.names import Naming, capability_name, is_label_value, pool_names
from fabriccap.core.selection import ClassSource
from fabriccap.core.sources import (
    SOURCES,
    FabricView,
    RequestForm,
    fabric_view,
    in_order,
    providers_phrase,
    request_forms,
    selects,
)
from fabriccap.core.text import clean_text, first_named
from fabriccap.core.workloads import (
    LookupKey,
    NotRequestedWording,
    PodJudgement,
    UnschedulableGroup,
    WorkloadEvent,
    judge_pod,
    not_requested_key,
    not_requested_wording,
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
# What is said of a selector that ran past this evaluator's own iteration budget: the scheduler
# evaluates it under a cost limit it may well stay within, so it may select these devices; they
# are left out here all the same (failing closed: the pool reads as advertising fewer).
BEYOND_THIS_EVALUATOR = (
    "fabriccap's CEL evaluator stops at that many iterations, where kube-scheduler's cost limit may not:"
    " it may select these devices (docs/dra.md, Known gaps)"
)


def on_selector_failure(cause: str) -> str:
    """What the scheduler does where a class's selector failed with ``cause`` (after its
    "selector #N: "), as the status and the log say it."""
    return BEYOND_THIS_EVALUATOR if cause.endswith(ITERATION_BUDGET_CAUSE) else SCHEDULER_ON_ERROR


@dataclass(frozen=True, slots=True)
class PoolCapability:
    """One FabricCapability: its identity and its computed status.

    The status is JSON (``status_json``), what is written; the model (``status``) is made from
    it each time it is read, and kept by nobody here: the operator's writes hold their
    capability until they end, which for a first round of 5,000 pools took long enough for
    cached models to hold ~70 MiB (docs/performance.md). The operator's rounds read only the
    JSON, and most of its parts are the memo's (``api.status_with``): never to be changed in
    place."""

    name: str
    fabric: str
    pool: Pool
    status_json: dict[str, Any]
    # The pool offers the fabric (_PoolMemo.offers): what withoutFabric is judged against, and
    # what ``fabriccap explain`` tells a workload to ask for only where it holds.
    offers_fabric: bool = False

    @property
    def status(self) -> FabricCapabilityStatus:
        return FabricCapabilityStatus.model_validate(self.status_json)

    @property
    def is_ready(self) -> bool:
        return is_ready_status(self.status_json)

    def labels(self) -> dict[str, str]:
        labels = {
            FABRIC_LABEL: self.fabric,
            MANAGED_BY_LABEL: MANAGED_BY_VALUE,
            READY_LABEL: "true" if self.is_ready else "false",
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
        return {**self.identity(), "status": self.status_json}

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
    # The (fabric, pool) pairs evaluated that no object is called for now (no target node, no
    # NodePool of the fabric), each with the status that says so (``empty_status``): what an
    # object of such a pool shows until it is deleted.
    emptied: tuple[PoolCapability, ...] = ()
    # Names of objects whose pool has another name now (a pool of the same value came or went):
    # they go at once, or one pool would have two objects.
    renamed: frozenset[str] = frozenset()
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


def _named(names: Sequence[str], limit: int = MAX_NAMED_NODES) -> str:
    return first_named(names, limit)


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
    # "; unusable quantity on n4 (...)": the nodes that count none, beside ``selection`` (whose
    # notes name the problems of nodes that still count); ``uncounted_all``: every node's, for a
    # message that does not print ``selection``.
    uncounted: str
    uncounted_all: str = ""
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
    # A node that still counts devices (another driver pool's) says its problem among the
    # selection notes already (``FactIndex.dra_devices``): beside them, it was said twice.
    uncounted, uncounted_all = "", ""
    for source in analysis.sources_read:
        readings = [(node, node.devices.readings.get(source)) for node in analysis.gate]
        troubled = [(node, reading) for node, reading in readings if reading is not None and reading.problem]
        if listed := [f"{node.name} ({reading.problem})" for node, reading in troubled if not reading.devices]:
            uncounted += f"; {SOURCES[source].problem} on {_named(listed)}"
        if listed := [f"{node.name} ({reading.problem})" for node, reading in troubled]:
            uncounted_all += f"; {SOURCES[source].problem} on {_named(listed)}"
    return _Notes(mixed, uncounted, uncounted_all, _selection_notes(analysis))


def _selection_notes(analysis: PoolAnalysis) -> str:
    """How the pool's DRA devices were selected, where that needs saying: a class counted from
    the profile's copy, missing or broken; devices its selectors failed on; devices counted from
    ResourceClaims; older slices ignored."""
    selection = analysis.selection
    if selection is None:
        return ""
    # A platform-managed node (EKS Auto Mode) is read from the platform alone: it has no DRA reading.
    readings = [
        (node, reading) for node in analysis.gate if (reading := node.devices.readings.get(Source.DRA)) is not None
    ]
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
        if failing is None or failing.source is ClassSource.CLUSTER or cause.endswith(ITERATION_BUDGET_CAUSE):
            note += f"; {on_selector_failure(cause)}"
        notes.append(note)
    if len(failures) > MAX_NAMED_CAUSES:
        notes.append(f"{len(failures) - MAX_NAMED_CAUSES} more selector failures (fabriccap explain)")
    counted = [f"{node.name}: {'; '.join(reading.notes)}" for node, reading in readings if reading.notes]
    if counted:
        notes.append(f"ResourceSlices: {_named(counted)}")
    return "".join(f"; {note}" for note in notes)


def evaluate_pool(analysis: PoolAnalysis) -> FabricCapabilityStatus:
    """The status of one (fabric, pool), from its analysis (target nodes left out of the gate
    set included, and the pool's NodePool verdict when it is a Karpenter NodePool's)."""
    profile = analysis.profile
    launchable = analysis.launchable
    if not analysis.nodes and (launchable is None or not launchable.of_fabric):
        return empty_status(
            profile.name,
            profile.resource,
            PoolRef(key=analysis.pool.key, value=analysis.pool.value),
            [source.value for source in profile.sources],
        )
    gate = analysis.gate
    advertising = analysis.advertising
    shown_sources = in_order([*profile.sources, *(source for node in gate for source in node.devices.sources)])
    by_source = [
        SourceCount(source=source.value, nodes=sum(1 for node in advertising if source in node.devices.sources))
        for source in shown_sources
    ]
    notes = _notes(analysis, by_source)
    conditions = [
        _device_plugin_condition(analysis),
        _advertised_condition(analysis, notes),
        _homogeneous_condition(analysis, notes),
        _instance_type_condition(analysis),
    ]
    if analysis.launchable is not None:
        conditions.append(_launchable_condition(analysis, analysis.launchable))
    ready = _ready_condition(analysis, conditions, notes)
    conditions.append(ready)
    conditions.append(_stalled_condition(analysis))

    recommendation = None
    if ready.status == ConditionStatus.TRUE and analysis.uniform_count is not None:
        recommendation = _recommendation(profile, analysis.request_forms, analysis.uniform_count)
    elif ready.status == ConditionStatus.TRUE and analysis.launchable is not None:
        # An empty NodePool pool, Ready from the catalog: what to ask for on the nodes it launches.
        assert analysis.launchable.uniform_count is not None
        recommendation = _recommendation(profile, _launch_forms(analysis), analysis.launchable.uniform_count)
    # The DaemonSets that serve this pool's nodes: a device-plugin pool does not list DRANET.
    serving = analysis.serving if gate else frozenset(_launch_sources(analysis))
    daemon_sets = sorted({ds for source in serving for ds in analysis.view.of(source).daemon_sets})
    launched_without = analysis.left_out(LeftOut.LAUNCHED_WITHOUT_FABRIC)
    gap_names = {node.name for node in gate if node.gaps} | {node.name for node in launched_without}
    gap_nodes = sorted(gap_names)
    return FabricCapabilityStatus(
        fabric=profile.name,
        resource_name=profile.resource,
        pool=PoolRef(key=analysis.pool.key, value=analysis.pool.value),
        nodes=len(gate),
        cordoned_nodes=len(analysis.left_out(LeftOut.CORDONED)),
        unready_nodes=len(analysis.left_out(LeftOut.UNREADY)),
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
            launched_without_fabric=len(launched_without),
            conflicting_advertisers=sum(1 for node in gate if Gap.CONFLICTING_ADVERTISERS in node.gaps),
            nodes=gap_nodes[:MAX_GAP_NODES],
            truncated=len(gap_nodes) > MAX_GAP_NODES,
        ),
        launchable=_launchable_status(analysis.launchable) if analysis.launchable is not None else None,
        recommendation=recommendation,
        sources=by_source,
        conditions=conditions,
    )


def _launchable_status(verdict: LaunchableTypes) -> LaunchableStatus:
    return LaunchableStatus(
        node_pool=verdict.node_pool,
        instance_types=[LaunchableType(name=name, max_count=count) for name, count in verdict.types[:MAX_LISTED_TYPES]],
        truncated=len(verdict.types) > MAX_LISTED_TYPES,
        counts=[LaunchableCount(count=count, instance_types=types) for count, types in verdict.counts.items()],
    )


def _launch_sources(analysis: PoolAnalysis) -> list[Source]:
    """The sources that would serve the nodes an empty NodePool launches: the platform on Auto
    Mode, else the profile's sources whose DaemonSet was found (each is asked for in its form)."""
    if analysis.launchable is not None and analysis.launchable.platform:
        return [Source.PLATFORM]
    return [source for source in in_order(analysis.profile.sources) if analysis.view.of(source).daemon_sets]


def _launch_serving(analysis: PoolAnalysis) -> list[Source]:
    """Those of ``_launch_sources`` that would give a claim devices on the nodes an empty
    NodePool launches: not DRA while DeviceTaintRules taint every device its driver publishes."""
    return [source for source in _launch_sources(analysis) if not (source is Source.DRA and analysis.launch_tainted_by)]


def _launch_forms(analysis: PoolAnalysis) -> frozenset[RequestForm]:
    """The forms of request that schedule on the nodes an empty NodePool launches (those of
    ``_launch_serving``; a claim's class mapped to the resource takes the resource too)."""
    mapped = analysis.selection is not None and analysis.selection.extended_resource_class is not None
    return request_forms(_launch_serving(analysis), extended_resource_mapped=mapped)


def _launch_taint(analysis: PoolAnalysis) -> str:
    """What the DeviceTaintRules of ``analysis.launch_tainted_by`` do to the nodes it launches."""
    rules = _named([rule.describe() for rule in analysis.launch_tainted_by], MAX_NAMED_RULES)
    drivers = analysis.selection.recommended_drivers if analysis.selection is not None else None
    # The drivers are the class's CEL string constants, as its author wrote them (escapes
    # included): kept whole for matching, cleaned and cut only here, as a slice's are in notes;
    # as many named as rules (a rule per driver is how they cover several).
    shown = sorted(clean_text(driver, MAX_DRIVER_NAME) for driver in drivers or ())
    of = f"driver {_named(shown, MAX_NAMED_RULES)}" if shown else "every driver"
    return (
        f"{rules} taint{'s' if len(analysis.launch_tainted_by) == 1 else ''} every device of {of} a node it"
        " launches would publish, and the recommended claim tolerates none"
    )


def _launchable_condition(analysis: PoolAnalysis, verdict: LaunchableTypes) -> Condition:
    message = verdict.message
    if analysis.claim_problems:
        shown = "; ".join(analysis.claim_problems[:MAX_NAMED_NODES])
        more = len(analysis.claim_problems) - MAX_NAMED_NODES
        message += f"; NodeClaims: {shown}{f' (+{more} more)' if more > 0 else ''}"
    return _condition(ConditionType.LAUNCHABLE, verdict.status, verdict.reason, message)


# A ResourceClaim's allocation holds at most this many devices (k8s.io/api resource/v1
# AllocationResultsMaxSize = 32): the allocator refuses a request for more ("number of requested
# devices %d exceeds the claim limit of %d"). A node with more is offered a claim of this many,
# which every node of the pool can fill, rather than a template no claim can get or none at all;
# ``_usage`` says the claim is capped.
MAX_CLAIM_DEVICES = 32


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
                                count=min(per_node, MAX_CLAIM_DEVICES),
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
# The same, of an object whose deletion a finalizer holds up: no further deletion comes from the
# operator, so the message does not promise one (review 66h F2).
NO_SUCH_POOL_TERMINATING_MESSAGE = (
    "no such pool: no pool of the operator's configuration has a target node under this object's name;"
    " its deletion was asked for, and a finalizer (metadata.finalizers) holds it until its controller lets it go"
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


def _not_installed(profile: FabricProfile, needed: Iterable[Source]) -> Condition:
    needed = [source for source in in_order(needed) if not SOURCES[source].self_served]
    namespaces = profile.device_plugin.namespaces
    where = ", ".join(namespaces)
    scope = f"namespace {where}" if len(namespaces) == 1 else f"namespaces {where}"
    finders = {source: SOURCES[source].finder(profile).describe() for source in needed}
    how = (
        "; ".join(f"{SOURCES[source].provider}: {finders[source]}" for source in needed)
        if len(needed) > 1
        else finders[needed[0]]
    )
    return _condition(
        ConditionType.DEVICE_PLUGIN_READY,
        ConditionStatus.FALSE,
        Reason.PLUGIN_NOT_INSTALLED,
        f"no {profile.name} {providers_phrase(needed)} DaemonSet found in {scope} ({how})",
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
        launchable = analysis.launchable
        if launchable is not None and not launchable.platform and not _launch_sources(analysis):
            return _not_installed(profile, profile.sources)  # the nodes it launches would have none
        return _no_target_nodes(kind)
    needed = analysis.serving
    word = providers_phrase(needed)
    if not word:
        return _condition(
            kind,
            ConditionStatus.TRUE,
            Reason.PLUGIN_READY_ON_ALL_NODES,
            f"the platform advertises {profile.resource} itself on all {total} nodes: no DaemonSet is needed",
        )
    if all(node.provider is PluginState.NOT_INSTALLED for node in gate):
        return _not_installed(profile, needed)
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
            for position, source in enumerate(analysis.sources_read)
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
            f"{subject} differs across {total} nodes ({spread}); 0 on {offenders}{notes.uncounted_all}",
        )
    # Name the nodes outside the most common count: they are the likely odd ones out.
    return _condition(
        kind,
        ConditionStatus.FALSE,
        reason,
        f"{subject} differs across {total} nodes ({spread}); not {analysis.typical_count} on {offenders}"
        + notes.mixed
        + notes.uncounted_all,
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
    capped = ""
    if RequestForm.RESOURCE_CLAIM in forms and uniform_count is not None and uniform_count > MAX_CLAIM_DEVICES:
        capped = (
            f"; the resourceClaimTemplate asks {MAX_CLAIM_DEVICES}, the most one ResourceClaim can hold"
            f" (AllocationResultsMaxSize): {uniform_count} per node take more than one claim"
        )
    if forms == {RequestForm.RESOURCE_CLAIM}:
        return f"a job may claim up to {uniform_count} per node (recommendation.resourceClaimTemplate){capped}"
    usage = f"a job may request up to {uniform_count} per node"
    mapped = analysis.selection.extended_resource_class if analysis.selection is not None else None
    if mapped is not None and Source.DRA in analysis.sources_seen:
        usage += (
            f" ({analysis.profile.resource} is served from DRA devices too: DeviceClass {mapped} maps it with"
            " spec.extendedResourceName)"
        )
    return usage + capped


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
        return _empty_gate_ready(analysis, by_type)
    if not analysis.advertising:
        return _condition(kind, ConditionStatus.FALSE, Reason.NOT_ADVERTISED, by_type[ConditionType.ADVERTISED].message)
    if homogeneous.status != ConditionStatus.TRUE:
        return _condition(kind, ConditionStatus.FALSE, Reason(homogeneous.reason), homogeneous.message)
    if analysis.breaking(ConditionType.MATCHES_INSTANCE_TYPE, Cause.ABOVE_MAXIMUM):
        # Never on purpose: a plugin that over-counts (p6-b200's NVLink controllers as EFA).
        return _condition(
            kind,
            ConditionStatus.FALSE,
            Reason.ABOVE_INSTANCE_MAXIMUM,
            by_type[ConditionType.MATCHES_INSTANCE_TYPE].message,
        )
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
    served = f"with a Ready {provider}" if provider else "served by the platform"
    usage = _usage(analysis, uniform_count)
    return _condition(
        kind,
        ConditionStatus.TRUE,
        Reason.UNIFORM_CAPABILITY,
        f"all {total} nodes advertise {subject}: {uniform_count} {served}{notes.mixed}; {usage}" + notes.selection,
    )


def _empty_gate_ready(analysis: PoolAnalysis, by_type: dict[str, Condition]) -> Condition:
    """Ready with an empty gate set: a NodePool's pool is judged from what it launches (SPEC
    "Elastic pools": "a NodePool pool with an empty gate set is Ready when Launchable is True"),
    whatever left its nodes out; any other pool cannot be Ready.

    A launchable NodePool keeps its verdict while its nodes are left out because Karpenter
    launches the next node whatever became of these: the first node of a scale-up registers
    NotReady for a minute, and judging the pool by it flipped Ready to False (and the ready
    label, and an Event) at every scale-up from zero (seen on the e2e control plane)."""
    kind = ConditionType.READY
    cordoned, unready = len(analysis.left_out(LeftOut.CORDONED)), len(analysis.left_out(LeftOut.UNREADY))
    launchable = analysis.launchable
    without = analysis.left_out(LeftOut.LAUNCHED_WITHOUT_FABRIC)
    fabric = analysis.profile.spoken_name
    if (cordoned or unready) and (launchable is None or launchable.status != ConditionStatus.TRUE):
        return _condition(
            kind,
            ConditionStatus.FALSE,
            Reason.NO_SCHEDULABLE_NODES,
            f"every one of the {len(analysis.nodes)} target nodes is left out of the gate set"
            f" ({cordoned} cordoned, {unready} not Ready)",
        )
    if launchable is None:
        if without:
            return _condition(
                kind,
                ConditionStatus.FALSE,
                Reason.NO_SCHEDULABLE_NODES,
                f"every one of the {len(without)} target nodes was launched without {fabric}",
            )
        return _condition(kind, ConditionStatus.FALSE, Reason.NO_TARGET_NODES, "no target node in the pool")
    left_out = [
        f"{count} {why}"
        for count, why in ((len(without), f"launched without {fabric}"), (unready, "not Ready"), (cordoned, "cordoned"))
        if count
    ]
    now = f"no node in the gate set ({', '.join(left_out)})" if left_out else "no nodes now"
    if launchable.status != ConditionStatus.TRUE:
        return _condition(
            kind,
            ConditionStatus.FALSE,
            Reason.NO_TARGET_NODES,
            f"{now}, and {by_type[ConditionType.LAUNCHABLE].message}",
        )
    count = launchable.uniform_count
    every = f"every type NodePool {launchable.node_pool} launches attaches {count} {launchable.when}"
    if not launchable.platform and not _launch_sources(analysis):
        plugin = by_type[ConditionType.DEVICE_PLUGIN_READY]
        return _condition(
            kind, ConditionStatus.FALSE, Reason.DEVICE_PLUGIN_GAP, f"{now}; {every}, but {plugin.message}"
        )
    if not launchable.platform and not _launch_serving(analysis):
        return _condition(
            kind, ConditionStatus.FALSE, Reason.NOT_ADVERTISED, f"{now}; {every}, but {_launch_taint(analysis)}"
        )
    if analysis.launch_tainted_by and Source.DRA in _launch_sources(analysis):
        every += f"; not as DRA devices: {_launch_taint(analysis)}"
    return _condition(kind, ConditionStatus.TRUE, Reason.UNIFORM_CAPABILITY, f"{now}; {every}")


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
    return _analyse(config, profile, capability.pool, index, view)


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
    # As JSON, without workloads; ``empty_status`` when no object is called for (``published``
    # False). Not the model: at 5,000 pools the models cost 9 KB a pool more (docs/performance.md).
    status: dict[str, Any]
    published: bool
    judgements: dict[NamespacedKey, PodJudgement] = field(default_factory=dict)
    # What withoutFabric is judged against: the pool offers the fabric (advertised now, launchable
    # by its NodePool, or a catalog maximum above 0 for its nodes' types).
    offers: bool = False
    launched_without: frozenset[str] = frozenset()  # its nodes Karpenter launched without the fabric
    launch_count: int | None = None  # what a node its NodePool launches gets, when that is one count
    # Why its NodePool would not give the fabric however a pod asked (its Launchable verdict, when
    # that is False for such a cause), or None when asking may get it: the job is told to ask.
    launch_refusal: str | None = None


@dataclass
class EvaluationMemo:
    """What the operator's rounds reuse from the ones before, for one config and one index.

    Under pod churn a round re-evaluates the pools whose pods changed, and nothing else about
    them did: their nodes, devices and providers (each pool's node-side status), and most of
    their pods' judgements, are what they were. The index's versions say when they are not.
    ``fabriccap evaluate`` has no memo: one evaluation has nothing to reuse.
    """

    views: tuple[int, dict[str, FabricView]] | None = None
    # Read here, written through ``keep`` and ``drop`` (which keep ``_published`` in step).
    pools: dict[tuple[str, Pool], _PoolMemo] = field(default_factory=dict)
    # The name each (fabric, pool) with an object was last given.
    names: dict[tuple[str, Pool], str] = field(default_factory=dict)
    # NodePool verdicts by what they are made of (node_pool_verdict).
    verdicts: dict[VerdictKey, LaunchableTypes] = field(default_factory=dict)
    # Per fabric, the pools whose side is published: every pool's name depends on all of them.
    _published: dict[str, set[Pool]] = field(default_factory=dict)
    # Per fabric, ``pool_names`` of the published pools as they stood when it was computed
    # (None once they change). At 5,000 pools it cost 15% of a core under pod churn when it
    # was computed for every round, though the pools published change only when nodes do.
    _namings: dict[str, tuple[tuple[str, ...], dict[tuple[str, str], Naming]] | None] = field(default_factory=dict)
    # The fabrics whose names were worked out again since an evaluation last published them:
    # a preview (the debounce window's sample) must leave the renames it finds to the round.
    _renames_unpublished: set[str] = field(default_factory=set)

    def fabric_views(self, config: Config, index: FactIndex) -> dict[str, FabricView]:
        if self.views is None or self.views[0] != index.provider_version:
            self.views = (index.provider_version, fabric_views(config, index.daemon_sets.values(), index.pods.values()))
        return self.views[1]

    def keep(self, fabric: str, pool: Pool, side: _PoolMemo) -> None:
        known = self.pools.get((fabric, pool))
        self.pools[(fabric, pool)] = side
        if known is None or known.published != side.published:
            self._moved(fabric, pool, side.published)

    def drop(self, fabric: str, pool: Pool) -> None:
        known = self.pools.pop((fabric, pool), None)
        if known is not None and known.published:
            self._moved(fabric, pool, False)

    def _moved(self, fabric: str, pool: Pool, published: bool) -> None:
        present = self._published.setdefault(fabric, set())
        if published:
            present.add(pool)
        else:
            present.discard(pool)
        self._namings[fabric] = None

    def published(self, fabric: str) -> set[Pool]:
        """The pools of ``fabric`` whose side is published (a set the memo keeps: not to change)."""
        return self._published.get(fabric, set())

    def namings(self, fabric: str, fabric_names: Sequence[str]) -> tuple[dict[tuple[str, str], Naming], bool]:
        """``pool_names`` of the fabric's published pools; and whether it was computed again
        since the names were last published (only then can a pool not evaluated now have
        been renamed)."""
        known = self._namings.get(fabric)
        if known is not None and known[0] == tuple(fabric_names):
            return known[1], fabric in self._renames_unpublished
        names = pool_names(fabric, self.published(fabric), fabric_names)
        self._namings[fabric] = (tuple(fabric_names), names)
        self._renames_unpublished.add(fabric)
        return names, True

    def names_published(self, fabric: str) -> None:
        """An evaluation that is published has given every renamed pool of ``fabric`` its name."""
        self._renames_unpublished.discard(fabric)


VerdictKey = tuple[str, NodePoolFacts, NodeClassFacts | None, tuple[DaemonSetFacts, ...]]


def node_pool_verdict(
    config: Config,
    profile: FabricProfile,
    pool: Pool,
    index: FactIndex,
    verdicts: dict[VerdictKey, LaunchableTypes] | None = None,
) -> LaunchableTypes | None:
    """The Launchable verdict of the pool's Karpenter NodePool, if the pool is one's. ``verdicts``
    (the operator's memo) keeps them by everything they are made of: the NodePool's facts (its
    spec, so its generation), its EC2NodeClass's, and the provider DaemonSets' (their selectors and
    tolerations). A round that changed none of them (a node heartbeat, a pod coming) costs a
    lookup per NodePool."""
    node_pool = index.node_pool_of(pool) if config.karpenter.enabled else None
    if node_pool is None:
        return None
    providers = tuple(
        daemon_set
        for daemon_set in index.daemon_sets.values()
        if any(selects(profile, source, daemon_set) for source in profile.sources)
    )
    node_class = index.node_class_of(node_pool)
    key = (profile.name, node_pool, node_class, providers)
    if verdicts is not None and (known := verdicts.get(key)) is not None:
        return known

    # A nodeClassRef to an EC2NodeClass fabriccap does not have is not "no class" (Auto Mode's
    # classes are not EC2NodeClasses, and node_class_of gives None for them).
    missing = node_class is None and node_pool.node_class is not None and node_pool.node_class.group == NODE_CLASS_GROUP
    verdict = judge_node_pool(profile, node_pool, node_class, providers, missing)
    if verdicts is not None:
        if len(verdicts) > MAX_KEPT_VERDICTS:
            verdicts.clear()  # NodePools and DaemonSets changed a lot: start again rather than grow
        verdicts[key] = verdict
    return verdict


# Verdicts kept by the memo: several per NodePool at most (its old generations until cleared).
MAX_KEPT_VERDICTS = 20_000


def _analyse(
    config: Config,
    profile: FabricProfile,
    pool: Pool,
    index: FactIndex,
    view: FabricView,
    verdicts: dict[VerdictKey, LaunchableTypes] | None = None,
) -> PoolAnalysis:
    launchable = node_pool_verdict(config, profile, pool, index, verdicts)
    analysis = analyse_pool(profile, pool, index.members(pool), view, index, launchable)
    if launchable is not None and (missing := missing_nodes(index, launchable.node_pool)):
        analysis = replace(analysis, claim_problems=(*analysis.claim_problems, *missing))
    return analysis


def _pool_side(
    config: Config,
    profile: FabricProfile,
    pool: Pool,
    index: FactIndex,
    view: FabricView,
    memo: EvaluationMemo | None,
) -> _PoolMemo:
    """The node-side evaluation of one (fabric, pool): from the memo while its versions hold."""
    facts_version = index.pool_versions.get(pool, 0)
    known = memo.pools.get((profile.name, pool)) if memo is not None else None
    if known is not None and (known.facts_version, known.provider_version) == (facts_version, index.provider_version):
        return known
    analysis = _analyse(config, profile, pool, index, view, memo.verdicts if memo is not None else None)
    targets = tuple(node.name for node in analysis.nodes)
    launchable = analysis.launchable
    # An object is called for while the pool has a target node, or is a NodePool's that is of
    # the fabric: an empty NodePool shows what it could launch (SPEC "Elastic pools").
    published = bool(targets) or (launchable is not None and launchable.of_fabric)
    status = evaluate_pool(analysis).to_json()
    fresh = _PoolMemo(facts_version, index.provider_version, targets, status, published)
    fresh.offers = (
        bool(analysis.advertising)
        or (launchable is not None and launchable.offers_fabric)
        or any((node.maximum or 0) > 0 for node in analysis.nodes)
    )
    fresh.launched_without = frozenset(node.name for node in analysis.left_out(LeftOut.LAUNCHED_WITHOUT_FABRIC))
    fresh.launch_count = launchable.uniform_count if launchable is not None else None
    fresh.launch_refusal = launch_refusal(launchable)
    if known is not None and targets:
        fresh.judgements = known.judgements  # pods' judgements do not depend on the nodes
    if memo is not None and (targets or index.pool_members.get(pool) or launchable is not None):
        memo.keep(profile.name, pool, fresh)
    elif memo is not None:
        memo.drop(profile.name, pool)  # a pool gone leaves nothing behind
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


def _not_requested_wording(
    profile: FabricProfile, name: str, status: FabricCapabilityStatus, side: _PoolMemo
) -> NotRequestedWording:
    """FabricNotRequested's words for one pool; on a Karpenter pool they name what a node gets
    when a pod asks, from the status or else from what the NodePools would launch."""
    count = status.uniform_count if status.is_ready and status.uniform_count else side.launch_count
    return not_requested_wording(profile, name, status, count, side.launch_refusal)


def _launched_for(owner: ObjectRef, side: _PoolMemo, nodes: Mapping[ObjectRef, frozenset[str]]) -> list[str]:
    """The nodes among the owner's that Karpenter launched without the fabric."""
    return sorted(nodes.get(owner, frozenset()) & side.launched_without)


def evaluate(
    config: Config,
    index: FactIndex,
    pools: Iterable[Pool] | None = None,
    *,
    memo: EvaluationMemo | None = None,
    warned: Callable[[str], bool] | None = None,
    preview: bool = False,
) -> Evaluation:
    """Every FabricCapability the facts call for, sorted by name: the one evaluation driver.

    ``fabriccap evaluate`` passes no ``pools`` (every pool); the operator passes the pools
    whose facts changed, its ``memo`` of the rounds before, and ``warned``: the keys of the
    FabricNotRequested problems it already recorded, whose Events need no message built again.
    A ``preview`` is not published, so it leaves the names in the memo as they were published:
    a rename it sees is still the next round's to publish (and the old object's to delete);
    and it builds no Events, which only a published round sends.
    A (fabric, pool) evaluated without a target node (and no NodePool of the fabric) is in
    ``emptied``, with the status that says so: the operator writes it at once and starts that
    object's grace period. A pool's object that has another name now is in ``renamed``.
    """
    views = (
        memo.fabric_views(config, index)
        if memo is not None
        else fabric_views(config, index.daemon_sets.values(), index.pods.values())
    )
    fabric_names = [fabric.name for fabric in config.fabrics]
    capabilities: list[PoolCapability] = []
    emptied: list[PoolCapability] = []
    renamed: set[str] = set()
    events: list[WorkloadEvent] = []
    lookups: set[LookupKey] = set()
    index.configure(config)
    evaluated = index.pools() if pools is None else list(pools)
    for profile in config.enabled_fabrics:
        sides = {pool: _pool_side(config, profile, pool, index, views[profile.name], memo) for pool in evaluated}
        # Names depend on every pool of the fabric with an object, not only on those evaluated
        # now: the memo knows the others (the operator's first round evaluates them all; every
        # side evaluated is in the memo unless it is not published).
        if memo is not None:
            names, named_again = memo.namings(profile.name, fabric_names)
            present = memo.published(profile.name)
        else:
            present = {pool for pool, side in sides.items() if side.published}
            names, named_again = pool_names(profile.name, present, fabric_names), True
        given = memo.names if memo is not None else {}
        recommended_env = (
            [EnvVarValue(name=env.name, value=env.value).to_json() for env in config.recommended_env(profile)]
            if config.transport.enabled
            else None
        )
        for pool in evaluated:
            side = sides[pool]
            if not side.published:
                # Under the name its object was published with: that object shows it at once.
                old = given.get((profile.name, pool)) if preview else given.pop((profile.name, pool), None)
                name = old or capability_name(profile.name, pool.key, pool.value, fabric_names)
                emptied.append(
                    PoolCapability(
                        name=name, fabric=profile.name, pool=pool, status_json=side.status, offers_fabric=side.offers
                    )
                )
        # A pool renamed by another's coming or going is published again under its new name,
        # and its old object goes at once: one pool, one object.
        for pool in sorted(present - set(sides)) if named_again else ():
            old = given.get((profile.name, pool))
            if old is not None and old != names[pool].name:
                sides[pool] = memo.pools[(profile.name, pool)] if memo is not None else sides[pool]
        for pool, side in sides.items():
            if not side.published:
                continue
            naming = names[pool]
            old = given.get((profile.name, pool))
            if old is not None and old != naming.name:
                renamed.add(old)
            if memo is not None and not preview:
                given[(profile.name, pool)] = naming.name
            parts: dict[str, Any] = {}
            if naming.hashed:
                why = NamingStatus(hashed=True, reason=naming.reason or "", message=naming.message or "")
                parts["naming"] = why.to_json()
            if recommended_env is not None and (recommendation := side.status.get("recommendation")) is not None:
                parts["recommendation"] = {**recommendation, "env": recommended_env}
            found = None
            if config.workloads.enabled:
                found = pool_workloads(
                    _judgements(profile, side, index), side.offers, transport=config.transport.enabled
                )
                parts["workloads"] = found.status.to_json()
                lookups |= found.lookups
            status = status_with(side.status, **parts) if parts else side.status
            capability = PoolCapability(
                name=naming.name, fabric=profile.name, pool=pool, status_json=status, offers_fabric=side.offers
            )
            capabilities.append(capability)
            if found is not None and not preview and (found.without_fabric or found.not_used):
                # Events are built from the model, made only for a problem not yet recorded, and
                # once for the pool's events, however many owners they name.
                pool_ref = PoolRef.model_validate(status["pool"])
                new_not_requested = [
                    (owner, count)
                    for owner, count in found.without_fabric
                    if warned is None or not warned(not_requested_key(profile.name, owner, pool_ref))
                ]
                new_not_used = [
                    not_used
                    for not_used in found.not_used
                    if warned is None
                    or not warned(not_used_key(profile, not_used.owner, pool_ref, not_used.example.verdict))
                ]
                if new_not_requested or new_not_used:
                    model = FabricCapabilityStatus.model_validate(status)
                    if new_not_requested:
                        wording = _not_requested_wording(profile, capability.name, model, side)  # shared by its owners
                        events.extend(
                            wording.event(owner, count, _launched_for(owner, side, found.without_fabric_nodes))
                            for owner, count in new_not_requested
                        )
                    events.extend(not_used_event(profile, model, not_used) for not_used in new_not_used)
        if memo is not None and not preview:
            memo.names_published(profile.name)
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
    current = {capability.name for capability in capabilities}
    return Evaluation(
        capabilities=tuple(capabilities),
        unpooled_nodes=unpooled,
        emptied=tuple(sorted(emptied, key=lambda capability: capability.name)),
        renamed=frozenset(renamed - current),
        conflicts=conflicts,
        workload_events=tuple(events),
        unschedulable=unschedulable,
        lookups=frozenset(lookups),
    )
