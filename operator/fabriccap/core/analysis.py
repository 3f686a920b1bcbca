"""One pool of one fabric, node by node: the analysis both the status and ``explain`` read.

``analyse_pool`` decides, once per node, everything the FabricCapability's conditions are
made of: the node's count and the sources that advertise it, the sources whose DaemonSet must
serve it and the state of that pod, its gap classes, and which conditions it breaks and why;
and, once per pool, the facts those are judged against (the distribution of counts, the most
common count, an isolation conflict, the sources seen). ``core.evaluate`` builds the status
from it and ``core.explain`` shows it node by node, so the two cannot tell different stories.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from operator import attrgetter
from typing import NamedTuple, TypeVar

from fabriccap.core.api import ConditionType, Reason
from fabriccap.core.config import FabricProfile, Source
from fabriccap.core.facts import NodeFacts, Pool
from fabriccap.core.index import FactIndex
from fabriccap.core.launchable import LaunchableTypes, launched_without_fabric
from fabriccap.core.selection import FabricSelection, TaintRuleFacts, fabric_selection
from fabriccap.core.sources import (
    SOURCES,
    TARGET_MARKING,
    FabricView,
    Reading,
    RequestForm,
    in_order,
    node_sources,
    read_sources,
    request_forms,
    subject,
)

# ---------------------------------------------------------------------------------------------
# A node's devices, and whether it is a target node


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """One node's count of a fabric's devices, over the sources its profile reads."""

    count: int  # the larger of the sources' counts (docs/reference/how-it-decides.md, Counting)
    # The sources that advertise ``count`` (all that agree); empty when count is 0.
    sources: frozenset[Source]
    readings: Mapping[Source, Reading]  # per source the profile reads, in source order
    evidence: bool  # some source shows devices of the fabric on it, countable or not
    unhealthy: bool  # some source holds devices back as unhealthy
    # Every source with devices above 0, agreeing with ``count`` or not.
    advertisers: frozenset[Source] = frozenset()

    @property
    def advertising(self) -> bool:
        return self.count > 0

    @property
    def conflicting(self) -> bool:
        """It advertises through sources that are requested in different forms: a device plugin
        (node allocatable) and a DRA driver (ResourceSlices). Both hand out the same devices,
        so they can be given twice (AWS: "silent oversubscription")."""
        return len({SOURCES[source].request for source in self.advertisers}) > 1

    def problems(self) -> list[tuple[Source, str]]:
        """Why devices some source reports could not be counted, per source."""
        return [(source, reading.problem) for source, reading in self.readings.items() if reading.problem]

    def unhealthy_devices(self) -> list[str]:
        """The devices sources hold back as unhealthy, described."""
        return [reading.unhealthy for reading in self.readings.values() if reading.unhealthy]


_NO_SOURCES: frozenset[Source] = frozenset()


def node_devices(
    profile: FabricProfile, node: NodeFacts, index: FactIndex, sources: Sequence[Source] | None = None
) -> NodeDevices:
    """A node that advertises through several sources counts the larger: a DRANET node keeps a
    stale allocatable of 0 from a removed device plugin, and the other way. ``sources`` are the
    profile's (``read_sources``), when the caller reads many nodes."""
    # Plain loops: this runs for every member of every pool each round.
    readings: dict[Source, Reading] = {}
    count, evidence, unhealthy = 0, False, False
    for source in node_sources(profile, node, read_sources(profile) if sources is None else sources):
        reading = readings[source] = SOURCES[source].read(profile, node, index)
        count = reading.devices if reading.devices > count else count
        evidence = evidence or reading.evidence
        unhealthy = unhealthy or reading.unhealthy is not None
    if count == 0:
        return NodeDevices(count, _NO_SOURCES, readings, evidence, unhealthy)
    advertised_by = frozenset([source for source, reading in readings.items() if reading.devices == count])
    advertisers = frozenset([source for source, reading in readings.items() if reading.devices > 0])
    return NodeDevices(count, advertised_by, readings, evidence, unhealthy, advertisers)


def is_target_node(profile: FabricProfile, node: NodeFacts, devices: NodeDevices, view: FabricView) -> bool:
    """The target rules (docs/reference/how-it-decides.md): (a) it shows the fabric's devices in
    some source, (b) a pod of a provider whose pod marks a target (the device plugin's), (c) an
    accelerator, or (d) an instance type that can carry the fabric (where a plugin that never
    landed shows). A node of another provider (its providerID starts with none of the profile's
    prefixes) is never one: a GKE cluster's GPU pools are not EFA pools."""
    if not profile.target_nodes.provider_matches(node.provider_id):
        return False
    if devices.count > 0 or devices.evidence:
        return True
    if any(node.name in view.of(source).nodes_with_pod for source in TARGET_MARKING):
        return True
    targets = profile.target_nodes
    if any(node.allocatable_of(accelerator) > 0 for accelerator in targets.accelerator_resources):
        return True
    if any(node.has_label(key, value) for key, value in targets.accelerator_label_pairs):
        return True
    return (profile.maximum_for(node.instance_type) or 0) > 0


# ---------------------------------------------------------------------------------------------
# What is judged per node


class PluginState(StrEnum):
    """The state of the DaemonSet pod that must serve a node (device plugin or DRA driver)."""

    READY = "Ready"
    NOT_READY = "NotReady"  # a pod is bound, none is Ready
    NO_POD = "NoPod"  # a DaemonSet exists, no pod of it on the node
    NOT_INSTALLED = "NotInstalled"  # no DaemonSet of the node's sources found at all


class Gap(StrEnum):
    """The status's gap classes, as named in ``status.gap``."""

    PLUGIN_READY_NOT_ADVERTISED = "pluginReadyNotAdvertised"
    UNHEALTHY = "unhealthy"
    ADVERTISED_WITHOUT_PLUGIN = "advertisedWithoutPlugin"
    CONFLICTING_ADVERTISERS = "conflictingAdvertisers"


class LeftOut(StrEnum):
    """Why a target node is not in the gate set: reported, never judged. The first that applies."""

    CORDONED = "cordoned"  # spec.unschedulable
    UNREADY = "unready"  # condition Ready not True: a stopped kubelet's node keeps a stale allocatable
    # Karpenter launched it without the fabric on purpose: no pod it launched for asked for it.
    LAUNCHED_WITHOUT_FABRIC = "launchedWithoutFabric"


class Cause(Enum):
    """What about a node breaks a condition: what ``explain`` describes."""

    PROVIDER = "provider"  # the pod that must serve it is not Ready (its PluginState says how)
    NOTHING_ADVERTISED = "nothing-advertised"
    AT_ZERO = "at-zero"  # 0 while other nodes advertise
    UNCOMMON_COUNT = "uncommon-count"  # a count other than the pool's most common
    ISOLATED = "isolated"  # on the smaller side of an isolation split (both sides on a tie)
    ABOVE_MAXIMUM = "above-maximum"
    BELOW_MAXIMUM = "below-maximum"
    TYPE_UNSUPPORTED = "type-unsupported"  # its instance type's maximum is 0
    UNCOMMON_MAXIMUM = "uncommon-maximum"  # a maximum other than the pool's most common
    # Its devices are requested in a form most of the pool's nodes do not take (no one request
    # schedules on every node).
    UNCOMMON_SOURCE = "uncommon-source"
    CONFLICTING_ADVERTISERS = "conflicting-advertisers"  # a device plugin and a DRA driver both


class Breach(NamedTuple):
    """One condition a node breaks, with the node's own reason."""

    condition: ConditionType
    reason: Reason
    cause: Cause


_PROVIDER_REASONS = {
    PluginState.NOT_READY: Reason.PLUGIN_NOT_READY,
    PluginState.NO_POD: Reason.PLUGIN_NOT_SCHEDULED,
    PluginState.NOT_INSTALLED: Reason.PLUGIN_NOT_INSTALLED,
}
# Why the pool is not Homogeneous, or why it is Stalled, as the condition's reason.
COUNT_REASONS = {
    Cause.AT_ZERO: Reason.PARTIAL_ROLLOUT,
    Cause.UNCOMMON_COUNT: Reason.MIXED_COUNTS,
    Cause.ISOLATED: Reason.MIXED_COUNTS,
}
STALL_REASONS = {
    Cause.TYPE_UNSUPPORTED: Reason.INSTANCE_TYPE_UNSUPPORTED,
    Cause.UNCOMMON_MAXIMUM: Reason.HETEROGENEOUS_INSTANCE_TYPES,
    Cause.ISOLATED: Reason.HETEROGENEOUS_INSTANCE_TYPES,
}
# Ready reasons of no condition of their own: a node that causes one breaks Ready itself.
READY_REASONS = {
    Cause.UNCOMMON_SOURCE: Reason.MIXED_SOURCES,
    Cause.CONFLICTING_ADVERTISERS: Reason.ADVERTISER_CONFLICT,
}
# A node that breaks one of these keeps the pool from Ready (and so does one above its type's
# maximum: a count that is never on purpose).
READY_INPUTS = (
    ConditionType.DEVICE_PLUGIN_READY,
    ConditionType.ADVERTISED,
    ConditionType.HOMOGENEOUS,
    ConditionType.READY,
)


def feeds_ready(condition: str, reason: str | None) -> bool:
    """Whether Ready is judged from a node's breach of ``condition`` for ``reason``: the
    READY_INPUTS, and a count above its type's maximum (never on purpose). A count below it is
    informational: it never affects Ready (SPEC, MatchesInstanceType)."""
    return condition in READY_INPUTS or reason == Reason.ABOVE_INSTANCE_MAXIMUM


def explains_not_ready(condition: str, reason: str | None, *, ready_reason: str | None, advertising: int) -> bool:
    """Whether a Ready=False (of ``ready_reason``, on a pool with ``advertising`` advertising
    nodes) is judged from ``condition`` in this abnormal state, so that Ready's Event tells it.
    Beyond ``feeds_ready``: below the maximum where no node advertises (every such node is at 0,
    which is Advertised's story: a first install without the device plugin), and Launchable on
    an empty gate set (Ready says NoTargetNodes with Launchable's message). Not Stalled (waiting
    will not help), nor Launchable on a pool with nodes, nor below the maximum on a pool that
    advertises: Ready is judged without them (review 64e F4)."""
    if feeds_ready(condition, reason):
        return True
    if condition == ConditionType.MATCHES_INSTANCE_TYPE:
        return advertising == 0
    if condition == ConditionType.LAUNCHABLE:
        return ready_reason == Reason.NO_TARGET_NODES
    return False


@dataclass(frozen=True, slots=True)
class NodeAnalysis:
    """One target node as the evaluation judges it."""

    facts: NodeFacts
    devices: NodeDevices
    maximum: int | None  # the profile's known maximum for its instance type
    # The sources whose DaemonSet must serve it: those that advertise its count, or, on a
    # node at 0, every source the profile reads.
    serving: frozenset[Source]
    provider: PluginState  # of the pod that must serve it
    gaps: tuple[Gap, ...]  # empty for a node left out of the gate set: it is reported, not judged
    breaches: tuple[Breach, ...]  # in the status's condition order; empty for a node left out
    left_out: LeftOut | None = None  # why it is not in the gate set, if it is not
    why_left_out: str | None = None  # the words for a node launched without the fabric

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def count(self) -> int:
        return self.devices.count

    @property
    def cordoned(self) -> bool:
        return self.left_out is LeftOut.CORDONED

    @property
    def in_gate(self) -> bool:
        return self.left_out is None

    @property
    def blocks_ready(self) -> bool:
        """It breaks a condition Ready needs, so it is (one of) the reason(s) the pool is not Ready."""
        return any(feeds_ready(breach.condition, breach.reason) for breach in self.breaches)

    def breach(self, condition: ConditionType) -> Breach | None:
        return next((breach for breach in self.breaches if breach.condition == condition), None)


def _provider_state(name: str, serving: frozenset[Source], view: FabricView) -> PluginState:
    if any(SOURCES[source].self_served for source in serving):
        return PluginState.READY  # the platform advertises for itself: no pod to wait for
    providers = [view.of(source) for source in serving]
    for provider in providers:
        if name in provider.nodes_with_ready_pod:
            return PluginState.READY
    for provider in providers:
        if name in provider.nodes_with_pod:
            return PluginState.NOT_READY
    for provider in providers:
        if provider.daemon_sets:
            return PluginState.NO_POD
    return PluginState.NOT_INSTALLED


def _gaps(devices: NodeDevices, provider: PluginState) -> tuple[Gap, ...]:
    ready = provider is PluginState.READY
    missing = (devices.count == 0) == ready  # at 0 with a Ready pod, or advertising without one
    conflicting = devices.conflicting
    if not missing and not devices.unhealthy and not conflicting:
        return ()
    gaps = []
    if devices.count == 0 and ready:
        gaps.append(Gap.PLUGIN_READY_NOT_ADVERTISED)
    if devices.unhealthy:
        gaps.append(Gap.UNHEALTHY)
    if devices.count > 0 and not ready:
        gaps.append(Gap.ADVERTISED_WITHOUT_PLUGIN)
    if conflicting:
        gaps.append(Gap.CONFLICTING_ADVERTISERS)
    return tuple(gaps)


# ---------------------------------------------------------------------------------------------
# The pool

_Value = TypeVar("_Value")


def _most_common(counter: Mapping[int, int]) -> int | None:
    """The value most nodes have; on a tie, the larger value."""
    return max(counter.items(), key=lambda item: (item[1], item[0]))[0] if counter else None


def _isolation_conflict(profile: FabricProfile, instance_types: Iterable[str]) -> tuple[str, str] | None:
    """Two instance types in the pool whose fabric traffic cannot cross, if any."""
    present = sorted(set(instance_types))
    for first in present:
        group = profile.isolation_group(first)
        if group is None:
            continue
        for second in present:
            if profile.isolation_group(second) != group:
                return first, second
    return None


def _isolation_groups(profile: FabricProfile, instance_types: Mapping[str, int]) -> Counter[int | None]:
    """Isolation group -> gate nodes of an instance type in it (None: in no group)."""
    groups: Counter[int | None] = Counter()
    for name, nodes in instance_types.items():
        groups[profile.isolation_group(name)] += nodes
    return groups


def _in_minority(counter: Mapping[_Value, int], value: _Value) -> bool:
    """Whether ``value`` is not the one value most nodes share (every value is, on a tie)."""
    largest = max(counter.values())
    tied = sum(1 for nodes in counter.values() if nodes == largest) > 1
    return tied or counter.get(value, 0) != largest


@dataclass(frozen=True, slots=True)
class PoolAnalysis:
    """One (fabric, pool): its target nodes judged one by one, and the pool-wide facts they
    are judged against. Node lists are in name order."""

    profile: FabricProfile
    pool: Pool
    view: FabricView
    nodes: tuple[NodeAnalysis, ...]  # the target nodes, those left out of the gate set included
    other_nodes: tuple[str, ...]  # members of the pool that are not target nodes: not counted
    gate: tuple[NodeAnalysis, ...]  # the target nodes not left out: the ones judged
    counts: Mapping[int, int]  # count -> gate nodes, the larger count first
    typical_count: int | None  # the most common count above 0 (on a tie, the larger)
    uniform_count: int | None  # the one count, when the gate set is not empty and can be one fabric
    instance_types: Mapping[str, int]  # instance type -> gate nodes, by name
    maxima: Mapping[int, int]  # known maximum -> gate nodes of a type with it
    isolation_conflict: tuple[str, str] | None  # two instance types whose traffic cannot cross
    # Why the gate set is not homogeneous (AT_ZERO, UNCOMMON_COUNT or ISOLATED), if it is not.
    count_fault: Cause | None
    # Why the pool cannot become Ready (TYPE_UNSUPPORTED, UNCOMMON_MAXIMUM or ISOLATED), if so.
    stall: Cause | None
    sources_seen: frozenset[Source]  # the sources that advertise some gate node's count
    subject: str  # what messages say is advertised
    serving: frozenset[Source]  # the sources whose DaemonSets serve some gate node
    # The fabric's DeviceClasses as they stand (None when the profile does not read DRA).
    selection: FabricSelection | None
    # The request forms that schedule on every advertising gate node (none: no one request
    # schedules on all of them, MixedSources); empty when no node advertises.
    request_forms: frozenset[RequestForm]
    mixed_sources: bool

    advertising: tuple[NodeAnalysis, ...]  # the gate nodes whose count is above 0
    breakers: Mapping[ConditionType, tuple[NodeAnalysis, ...]]  # condition -> the gate nodes that break it
    # The pool's Karpenter NodePool, judged against the catalog (None: not a NodePool's pool).
    launchable: LaunchableTypes | None = None
    # NodeClaims that could not be matched to one node (named twice, or naming a missing node).
    claim_problems: tuple[str, ...] = ()
    # DeviceTaintRules that taint every device of the drivers the recommended class selects,
    # so those a node the NodePool launches publishes too (KEP-5055: "Driver name only ...
    # maintenance on that driver across the cluster"): a claim of it gets none of them.
    launch_tainted_by: tuple[TaintRuleFacts, ...] = ()

    def left_out(self, why: LeftOut) -> list[NodeAnalysis]:
        return [node for node in self.nodes if node.left_out is why]

    @property
    def sources_read(self) -> list[Source]:
        """The sources the gate set's nodes are read from (the platform's among them where it
        manages some), in message order."""
        found = {source for node in self.gate for source in node.devices.readings}
        return in_order(found) if found else read_sources(self.profile)

    def breaking(self, condition: ConditionType, *causes: Cause) -> list[NodeAnalysis]:
        """The gate nodes that break ``condition`` (for one of ``causes``, when given)."""
        return [
            node
            for node in self.breakers.get(condition, ())
            if not causes or ((breach := node.breach(condition)) is not None and breach.cause in causes)
        ]

    def ready_providers(self, node: NodeAnalysis) -> list[Source]:
        """The profile's sources with a Ready pod on ``node``, serving it or not."""
        return [
            source
            for source in in_order(self.profile.sources)
            if node.name in self.view.of(source).nodes_with_ready_pod
        ]


class _Candidate(NamedTuple):
    """A target node, before it is judged."""

    facts: NodeFacts
    devices: NodeDevices
    maximum: int | None  # the profile's known maximum for its instance type
    left_out: LeftOut | None
    why_left_out: str | None
    forms: frozenset[RequestForm]  # the request forms that schedule on it (none at 0)


@dataclass(frozen=True, slots=True)
class _Verdict:
    """The pool-wide facts each gate node is compared with."""

    counts: dict[int, int]  # count -> gate nodes, the larger count first
    typical_count: int | None
    instance_types: Counter[str]
    isolation_conflict: tuple[str, str] | None
    isolation_groups: Counter[int | None]  # isolation group -> gate nodes of a type (None: in no group)
    maxima: Counter[int]  # known maximum -> gate nodes
    count_fault: Cause | None
    stall: Cause | None
    request_forms: frozenset[RequestForm]  # the forms every advertising gate node takes
    form_sets: Counter[frozenset[RequestForm]]  # the forms an advertising gate node takes -> nodes

    @property
    def mixed_sources(self) -> bool:
        return bool(self.form_sets) and not self.request_forms


def _verdict(profile: FabricProfile, gate: Sequence[_Candidate]) -> _Verdict:
    distribution = Counter(node.devices.count for node in gate)
    counts = dict(sorted(distribution.items(), reverse=True))
    instance_types = Counter(node.facts.instance_type for node in gate if node.facts.instance_type)
    isolation_conflict = _isolation_conflict(profile, instance_types)
    count_fault = None
    if len(counts) > 1:
        count_fault = Cause.AT_ZERO if 0 in counts else Cause.UNCOMMON_COUNT
    elif isolation_conflict is not None:
        count_fault = Cause.ISOLATED
    maxima = Counter(node.maximum for node in gate if node.maximum is not None)
    stall = None
    if gate and all(node.maximum == 0 for node in gate):
        stall = Cause.TYPE_UNSUPPORTED
    elif len(maxima) > 1 and len(_settled_counts(gate)) > 1:
        # Types of different maxima stall the pool only while their settled counts differ: all
        # at one count (p5.48xlarge and p5en.48xlarge both at 16) is Ready, and Stalled=True there
        # made kstatus, Flux and Argo CD fail a pool kubectl wait and the ready label pass (review
        # 64-observe F2). MatchesInstanceType still reports the types below their maximum.
        stall = Cause.UNCOMMON_MAXIMUM
    elif isolation_conflict is not None:
        stall = Cause.ISOLATED
    form_sets = Counter(node.forms for node in gate if node.devices.count > 0)
    request_forms = frozenset.intersection(*form_sets) if form_sets else frozenset()
    return _Verdict(
        counts=counts,
        typical_count=_most_common({count: nodes for count, nodes in counts.items() if count > 0}),
        instance_types=instance_types,
        isolation_conflict=isolation_conflict,
        isolation_groups=_isolation_groups(profile, instance_types),
        maxima=maxima,
        count_fault=count_fault,
        stall=stall,
        request_forms=request_forms,
        form_sets=form_sets,
    )


def _settled_counts(gate: Sequence[_Candidate]) -> set[int]:
    """The counts the gate nodes have settled on: a node at 0 whose type may advertise more says
    nothing of its count yet (its plugin starts, a minute at each scale-up). Judged by it, a
    Ready pool of two maxima (all at 16) turned Stalled at every scale-up, and every GitOps gate
    failed it for that minute; it is a PartialRollout, InProgress as in a pool of one type
    (review 64-fixc F3). A type of maximum 0 never advertises: its 0 is settled. A node at 0 whose
    type's maximum is below a count the other nodes advertise can never reach that count, so it is
    taken as settled at its maximum: the stall is certain however its plugin fares (a p5en.48xlarge,
    maximum 16, at 0 beside p5.48xlarge at 32; review 64e F2)."""
    advertised = {node.devices.count for node in gate if node.devices.count > 0}
    highest = max(advertised, default=0)
    below_reach = {
        node.maximum for node in gate if node.devices.count == 0 and node.maximum is not None and node.maximum < highest
    }
    return advertised | below_reach


def _breaches(profile: FabricProfile, node: _Candidate, provider: PluginState, verdict: _Verdict) -> tuple[Breach, ...]:
    """Which conditions the node breaks, in the status's condition order. A condition is not
    met exactly when some gate node breaks it (Ready aside: it is judged from the others)."""
    breaches = []
    count, maximum, instance_type = node.devices.count, node.maximum, node.facts.instance_type
    count_fault, stall = verdict.count_fault, verdict.stall
    if provider is not PluginState.READY:
        breaches.append(Breach(ConditionType.DEVICE_PLUGIN_READY, _PROVIDER_REASONS[provider], Cause.PROVIDER))
    if count == 0:
        breaches.append(Breach(ConditionType.ADVERTISED, Reason.NOT_ADVERTISED, Cause.NOTHING_ADVERTISED))
    isolated = (
        instance_type is not None
        and Cause.ISOLATED in (count_fault, stall)
        and _in_minority(verdict.isolation_groups, profile.isolation_group(instance_type))
    )
    homogeneous_cause: Cause | None = None
    if count_fault is Cause.ISOLATED:
        homogeneous_cause = Cause.ISOLATED if isolated else None
    elif count_fault is Cause.AT_ZERO and count == 0:
        homogeneous_cause = Cause.AT_ZERO
    elif count_fault is not None and count != verdict.typical_count:
        homogeneous_cause = Cause.UNCOMMON_COUNT
    if homogeneous_cause is not None:
        breaches.append(Breach(ConditionType.HOMOGENEOUS, COUNT_REASONS[homogeneous_cause], homogeneous_cause))
    if maximum is not None and count != maximum:
        above = count > maximum
        reason = Reason.ABOVE_INSTANCE_MAXIMUM if above else Reason.BELOW_INSTANCE_MAXIMUM
        cause = Cause.ABOVE_MAXIMUM if above else Cause.BELOW_MAXIMUM
        breaches.append(Breach(ConditionType.MATCHES_INSTANCE_TYPE, reason, cause))
    if count > 0 and verdict.mixed_sources and _in_minority(verdict.form_sets, node.forms):
        breaches.append(Breach(ConditionType.READY, Reason.MIXED_SOURCES, Cause.UNCOMMON_SOURCE))
    if node.devices.conflicting:
        breaches.append(Breach(ConditionType.READY, Reason.ADVERTISER_CONFLICT, Cause.CONFLICTING_ADVERTISERS))
    if stall is not None and (
        stall is Cause.TYPE_UNSUPPORTED
        or (stall is Cause.UNCOMMON_MAXIMUM and maximum is not None and _in_minority(verdict.maxima, maximum))
        or (stall is Cause.ISOLATED and isolated)
    ):
        breaches.append(Breach(ConditionType.STALLED, STALL_REASONS[stall], stall))
    return tuple(breaches)


def _judged(profile: FabricProfile, node: _Candidate, verdict: _Verdict, view: FabricView) -> NodeAnalysis:
    devices = node.devices
    # The sources that must serve it: those that advertise its count, or, at 0, every one read.
    serving = devices.sources if devices.count > 0 else frozenset(devices.readings)
    provider = _provider_state(node.facts.name, serving, view)
    judged = node.left_out is None  # a node left out of the gate set is reported, not judged
    return NodeAnalysis(
        facts=node.facts,
        devices=devices,
        maximum=node.maximum,
        serving=serving,
        provider=provider,
        gaps=_gaps(devices, provider) if judged else (),
        breaches=_breaches(profile, node, provider, verdict) if judged else (),
        left_out=node.left_out,
        why_left_out=node.why_left_out,
    )


_BY_NAME = attrgetter("name")


def _left_out(
    profile: FabricProfile, facts: NodeFacts, devices: NodeDevices, index: FactIndex, problems: list[str]
) -> tuple[LeftOut | None, str | None]:
    if facts.cordoned:
        return LeftOut.CORDONED, None
    if not facts.ready:
        return LeftOut.UNREADY, None
    why, problem = launched_without_fabric(profile, facts, devices.count > 0 or devices.evidence, index)
    if problem is not None:
        problems.append(problem)
    return (LeftOut.LAUNCHED_WITHOUT_FABRIC, why) if why is not None else (None, None)


def analyse_pool(
    profile: FabricProfile,
    pool: Pool,
    members: Iterable[NodeFacts],
    view: FabricView,
    index: FactIndex,
    launchable: LaunchableTypes | None = None,
) -> PoolAnalysis:
    """The pool's target nodes among ``members`` (those left out of the gate set included),
    judged against the pool-wide facts of the gate set; ``launchable``: the verdict of the pool's
    Karpenter NodePool, when it is one's."""
    sources = read_sources(profile)
    selection = fabric_selection(profile, index.class_view().classes) if profile.uses(Source.DRA) else None
    # KEP-5004: where the cluster maps the resource to the fabric's class, a pod asking for
    # the resource schedules onto DRA nodes too.
    mapped = selection is not None and selection.extended_resource_class is not None
    candidates: list[_Candidate] = []
    others: list[str] = []
    problems: list[str] = []
    for facts in sorted(members, key=_BY_NAME):
        devices = node_devices(profile, facts, index, sources)
        if is_target_node(profile, facts, devices, view):
            left_out, why = _left_out(profile, facts, devices, index, problems)
            forms = request_forms(devices.advertisers, extended_resource_mapped=mapped)
            maximum = profile.maximum_for(facts.instance_type)
            candidates.append(_Candidate(facts, devices, maximum, left_out, why, forms))
        else:
            others.append(facts.name)
    verdict = _verdict(profile, [node for node in candidates if node.left_out is None])
    nodes = tuple(_judged(profile, node, verdict, view) for node in candidates)
    gate = tuple(node for node in nodes if node.left_out is None)
    breakers: dict[ConditionType, list[NodeAnalysis]] = {}
    for node in gate:
        for breach in node.breaches:
            breakers.setdefault(breach.condition, []).append(node)
    sources_seen = frozenset(source for node in gate for source in node.devices.sources)
    return PoolAnalysis(
        profile=profile,
        pool=pool,
        view=view,
        nodes=nodes,
        other_nodes=tuple(others),
        gate=gate,
        counts=verdict.counts,
        typical_count=verdict.typical_count,
        uniform_count=next(iter(verdict.counts)) if gate and verdict.count_fault is None else None,
        instance_types=dict(sorted(verdict.instance_types.items())),
        maxima=dict(verdict.maxima),
        isolation_conflict=verdict.isolation_conflict,
        count_fault=verdict.count_fault,
        stall=verdict.stall,
        sources_seen=sources_seen,
        subject=subject(profile, sources_seen),
        serving=frozenset(source for node in gate for source in node.serving),
        selection=selection,
        request_forms=verdict.request_forms,
        mixed_sources=verdict.mixed_sources,
        advertising=tuple(node for node in gate if node.devices.count > 0),
        breakers={condition: tuple(nodes) for condition, nodes in breakers.items()},
        launchable=launchable,
        claim_problems=tuple(problems),
        launch_tainted_by=(
            index.class_view().taint_rules.covering(selection.recommended_drivers)
            if launchable is not None and selection is not None
            else ()
        ),
    )
