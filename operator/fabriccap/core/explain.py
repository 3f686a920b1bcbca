"""One pool, node by node: what ``fabriccap explain`` shows. Pure: no I/O, no clock.

A FabricCapability's status is a summary (counts, at most 20 gap names, 5 names per message);
the question a user brings is "which node is the odd one out, and why". This module answers
it from the same facts and the same functions as the evaluation (``node_devices``,
``is_target_node``, ``fabric_views``), next to the status ``evaluate`` computed for the pool,
so a node's count here is the count that went into the published ``counts``. Which conditions
a node breaks is read off the evaluated conditions: a node is blamed only for a condition
that is not met. ``tests/unit/core/test_explain.py`` checks the per-node view against the status
over generated clusters.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from fabriccap.core.api import (
    CONDITION_ORDER,
    Condition,
    ConditionType,
    FabricCapabilityStatus,
    PoolRef,
)
from fabriccap.core.config import Config, FabricProfile, Source
from fabriccap.core.evaluate import (
    Evaluation,
    FabricView,
    NodeDevices,
    PoolCapability,
    fabric_views,
    is_target_node,
    node_devices,
)
from fabriccap.core.facts import NodeFacts, Pool
from fabriccap.core.index import FactIndex

# The ways to name an object kubectl accepts (and `fabriccap evaluate -o name` prints).
NAME_PREFIXES: tuple[str, ...] = (
    "fabriccapability.fabriccap.dev/",
    "fabriccapabilities.fabriccap.dev/",
    "fabriccapability/",
    "fabriccapabilities/",
    "fcap/",
)
MAX_LISTED = 10  # names listed in an error about what matched or exists


class ExplainError(ValueError):
    """The query names nothing, or more than one thing; the message says which."""


class PluginState(StrEnum):
    """The state of the DaemonSet pod that must serve a node (device plugin or DRA driver)."""

    READY = "Ready"
    NOT_READY = "NotReady"  # a pod is bound, none is Ready
    NO_POD = "NoPod"  # a DaemonSet exists, no pod of it on the node
    NOT_INSTALLED = "NotInstalled"  # no DaemonSet of the node's source found at all


class Gap(StrEnum):
    """The status's gap classes, as named in ``status.gap``."""

    PLUGIN_READY_NOT_ADVERTISED = "pluginReadyNotAdvertised"
    UNHEALTHY = "unhealthy"
    ADVERTISED_WITHOUT_PLUGIN = "advertisedWithoutPlugin"


# A node breaks these and Ready is False: it is (one of) the reason(s) the pool is not Ready.
READY_INPUTS = (ConditionType.DEVICE_PLUGIN_READY, ConditionType.ADVERTISED, ConditionType.HOMOGENEOUS)


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    def to_json(self) -> dict[str, object]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class ProviderPod(_Model):
    """A device-plugin or DRA-driver pod bound to the node."""

    name: str  # namespace/name
    daemon_set: str = Field(alias="daemonSet")  # namespace/name
    source: str  # devicePlugin | dra
    ready: bool


class Finding(_Model):
    """One condition a node breaks, with the node's own reason and the evidence."""

    condition: ConditionType
    reason: str  # CamelCase, from the condition's vocabulary
    detail: str


class NodeExplanation(_Model):
    name: str
    instance_type: str | None = Field(default=None, alias="instanceType")
    max_count: int | None = Field(default=None, alias="maxCount")  # the profile's known maximum
    cordoned: bool
    # The device plugin's view (node status), when the profile reads it.
    capacity: int | None = None
    allocatable: int | None = None
    # Devices in the node's ResourceSlices that count, when the profile reads DRA.
    dra_devices: int | None = Field(default=None, alias="draDevices")
    count: int  # what the evaluation counts for the node: the larger of its sources
    sources: list[str]  # the sources that advertise ``count``; empty when it is 0
    plugin: PluginState  # the pod that must serve the node: of its source, or of any source at 0
    plugin_pods: list[ProviderPod] = Field(alias="pluginPods")
    gaps: list[Gap]
    findings: list[Finding]  # empty for a cordoned node: reported, not judged
    # Why some devices could not be counted (an unusable quantity, incomplete ResourceSlices).
    notes: list[str]
    blocks_ready: bool = Field(alias="blocksReady")

    @property
    def breaks(self) -> list[str]:
        """The condition types it breaks, in the status's order."""
        broken = {finding.condition for finding in self.findings}
        return [kind.value for kind in CONDITION_ORDER if kind in broken]


class PoolExplanation(_Model):
    name: str
    fabric: str
    resource_name: str = Field(alias="resourceName")
    pool: PoolRef
    nodes: list[NodeExplanation]  # the pool's target nodes (cordoned ones included), by name
    # Members of the pool that are not target nodes of the fabric: not counted anywhere.
    other_nodes: list[str] = Field(alias="nonTargetNodes")
    status: FabricCapabilityStatus

    def node(self, name: str) -> NodeExplanation:
        return next(node for node in self.nodes if node.name == name)


# ---------------------------------------------------------------------------------------------
# Finding the FabricCapability a user names


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    return f"{shown}, … (+{len(names) - MAX_LISTED} more)" if len(names) > MAX_LISTED else shown


def _described(capability: PoolCapability) -> str:
    return f"{capability.name} ({capability.fabric}, pool {capability.pool.key}={capability.pool.value})"


def find_capability(evaluation: Evaluation, index: FactIndex, query: str) -> PoolCapability:
    """The one FabricCapability ``query`` names: an object name (``fcap/NAME`` and
    ``fabriccapability.fabriccap.dev/NAME`` name it alone), a pool value, or ``KEY=VALUE``.
    Raises ExplainError when nothing or more than one thing matches."""
    query = query.strip()
    if not query:
        raise ExplainError("no FabricCapability or pool named: give NAME or POOL")
    capabilities = evaluation.capabilities
    by_name = next((query.removeprefix(prefix) for prefix in NAME_PREFIXES if query.startswith(prefix)), None)
    pool_key: str | None = None
    if by_name is not None:
        matches = [capability for capability in capabilities if capability.name == by_name]
        wanted = f"FabricCapability {by_name!r}"
    elif "=" in query:
        pool_key, _, pool_value = query.partition("=")
        matches = [c for c in capabilities if c.pool == Pool(pool_key, pool_value)]
        wanted = f"pool {query!r}"
    else:
        pool_value = query
        matches = [c for c in capabilities if c.name == query or c.pool.value == query]
        wanted = f"FabricCapability or pool {query!r}"
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        listed = ", ".join(_described(capability) for capability in matches[:MAX_LISTED])
        raise ExplainError(
            f"{query!r} matches {len(matches)} FabricCapabilities: {listed}; name one (fcap/NAME names it alone)"
        )
    name = by_name or query
    for conflict in evaluation.conflicts:
        if conflict.name == name:
            raise ExplainError(f"{conflict.describe()}; none of them is published")
    if by_name is None:
        pools = [pool for pool in index.pool_members if pool.value == pool_value and pool_key in (None, pool.key)]
        if pools:
            sizes = ", ".join(f"{pool.key}={pool.value} ({len(index.pool_members[pool])} nodes)" for pool in pools)
            raise ExplainError(f"pool {sizes} has no target node of any enabled fabric, so no FabricCapability")
    if not capabilities:
        raise ExplainError(f"no {wanted}: the input has no pool with a target node")
    raise ExplainError(f"no {wanted}; FabricCapabilities: {_listed([c.name for c in capabilities])}")


# ---------------------------------------------------------------------------------------------
# The per-node view


@dataclass(frozen=True, slots=True)
class _PoolShape:
    """What a node is compared with: the pool's gate set as the evaluation saw it."""

    counts: Counter[int]  # count -> gate nodes
    most_common: int  # the evaluation's "most common count" (ties: the larger count)
    most_common_nonzero: int | None
    maxima: Counter[int]  # known maximum -> gate nodes of a type with that maximum
    isolation_groups: Counter[int | None]  # isolation group -> gate nodes of a known type; None: in none
    conflicted: bool  # the pool mixes instance types whose EFA traffic cannot cross


def _most_common(counter: Mapping[int, int]) -> int:
    """As ``evaluate`` picks it: the count most nodes have; on a tie, the larger count."""
    return max(counter.items(), key=lambda item: (item[1], item[0]))[0]


def _shape(profile: FabricProfile, gate: Sequence[NodeFacts], devices: Mapping[str, NodeDevices]) -> _PoolShape:
    counts = Counter(devices[node.name].count for node in gate)
    nonzero = Counter({count: nodes for count, nodes in counts.items() if count > 0})
    maxima = Counter(maximum for node in gate if (maximum := profile.maximum_for(node.instance_type)) is not None)
    groups: Counter[int | None] = Counter(
        profile.isolation_group(node.instance_type) for node in gate if node.instance_type
    )
    # As evaluate's isolation conflict: some type in a group, and another type outside it.
    conflicted = any(group is not None for group in groups) and len(groups) > 1
    return _PoolShape(
        counts=counts,
        most_common=_most_common(counts) if counts else 0,
        most_common_nonzero=_most_common(nonzero) if nonzero else None,
        maxima=maxima,
        isolation_groups=groups,
        conflicted=conflicted,
    )


def _serving_sources(profile: FabricProfile, devices: NodeDevices) -> frozenset[Source]:
    """The sources whose DaemonSet must serve the node, as the evaluation decides them: those
    that advertise its count, or every source the profile reads on a node at 0."""
    return devices.sources if devices.count > 0 else frozenset(profile.sources)


def _provider_pods(index: FactIndex, view: FabricView, profile: FabricProfile) -> dict[str, list[ProviderPod]]:
    """node name -> the pods of the fabric's provider DaemonSets bound to it."""
    owners = {daemon_set: source for source in profile.sources for daemon_set in view.of(source).daemon_sets}
    by_node: dict[str, list[ProviderPod]] = {}
    for pod in index.pods.values():
        owner = f"{pod.namespace}/{pod.daemon_set}"
        if pod.node_name is None or owner not in owners:
            continue
        by_node.setdefault(pod.node_name, []).append(
            ProviderPod(
                name=f"{pod.namespace}/{pod.name}", daemon_set=owner, source=owners[owner].value, ready=pod.ready
            )
        )
    return {name: sorted(pods, key=lambda pod: pod.name) for name, pods in by_node.items()}


def _plugin_state(view: FabricView, name: str, serving: frozenset[Source]) -> PluginState:
    if any(name in view.of(source).nodes_with_ready_pod for source in serving):
        return PluginState.READY
    if any(name in view.of(source).nodes_with_pod for source in serving):
        return PluginState.NOT_READY
    if any(view.of(source).daemon_sets for source in serving):
        return PluginState.NO_POD
    return PluginState.NOT_INSTALLED


_PROVIDER_WORDS = {Source.DEVICE_PLUGIN: "device-plugin", Source.DRA: "DRA-driver"}


def _providers(sources: Iterable[Source]) -> str:
    present = set(sources)
    return " or ".join(_PROVIDER_WORDS[source] for source in Source if source in present)


@dataclass(frozen=True, slots=True)
class _NodeView:
    """One target node with everything its findings are judged from."""

    facts: NodeFacts
    devices: NodeDevices
    serving: frozenset[Source]
    plugin: PluginState
    pods: list[ProviderPod]
    gaps: list[Gap]


def _causes(profile: FabricProfile, node: _NodeView) -> list[str]:
    """Why a node counts fewer devices than it might: what the evaluation's messages call an
    unusable quantity or uncounted ResourceSlices, and the kubelet's mark of unhealthy devices."""
    causes: list[str] = []
    if node.devices.unusable:
        causes.append(f"unusable quantity: {node.devices.unusable}")
    if node.devices.dra.problem:
        causes.append(f"ResourceSlices not counted: {node.devices.dra.problem}")
    if profile.uses(Source.DEVICE_PLUGIN):
        capacity, allocatable = node.facts.capacity_of(profile.resource), node.facts.allocatable_of(profile.resource)
        if capacity > allocatable:
            causes.append(f"capacity {capacity} but allocatable {allocatable}: {capacity - allocatable} unhealthy")
    return causes


def _with_causes(text: str, causes: Sequence[str]) -> str:
    return "; ".join([text, *causes])


def _advertised_finding(profile: FabricProfile, node: _NodeView, condition: Condition) -> Finding | None:
    if condition.status != "False" or node.devices.count > 0:
        return None
    causes = _causes(profile, node)
    if not causes:
        ready_sources = {Source(pod.source) for pod in node.pods if pod.ready}
        if node.plugin is PluginState.READY and ready_sources:
            causes.append(f"its {_providers(ready_sources)} pod is Ready, yet the node advertises nothing")
        else:
            places = {Source.DEVICE_PLUGIN: "allocatable", Source.DRA: "its ResourceSlices"}
            causes.append("nothing in " + " nor in ".join(places[source] for source in profile.sources))
    return Finding(
        condition=ConditionType.ADVERTISED, reason="NotAdvertised", detail="advertises 0: " + "; ".join(causes)
    )


def _isolation_finding(
    profile: FabricProfile, node: _NodeView, shape: _PoolShape, condition: ConditionType
) -> Finding | None:
    """A node on the smaller side of an isolation split (both sides on a tie)."""
    if not shape.conflicted or node.facts.instance_type is None:
        return None
    group = profile.isolation_group(node.facts.instance_type)
    largest = max(shape.isolation_groups.values())
    tied = sum(1 for nodes in shape.isolation_groups.values() if nodes == largest) > 1
    if shape.isolation_groups[group] == largest and not tied:
        return None
    return Finding(
        condition=condition,
        reason="MixedCounts" if condition == ConditionType.HOMOGENEOUS else "HeterogeneousInstanceTypes",
        detail=f"EFA traffic between {node.facts.instance_type} and the pool's other instance types is unsupported",
    )


def _homogeneous_finding(
    profile: FabricProfile, node: _NodeView, shape: _PoolShape, condition: Condition
) -> Finding | None:
    if condition.status != "False":
        return None
    kind = ConditionType.HOMOGENEOUS
    count = node.devices.count
    if len(shape.counts) == 1:  # one count, but instance types whose traffic cannot cross
        return _isolation_finding(profile, node, shape, kind)
    if 0 in shape.counts:
        if count == 0:
            others = shape.most_common_nonzero
            return Finding(
                condition=kind,
                reason="PartialRollout",
                detail=f"0, while {sum(shape.counts.values()) - shape.counts[0]} nodes advertise "
                f"(most commonly {others})",
            )
        if count != shape.most_common_nonzero:
            return Finding(
                condition=kind,
                reason="MixedCounts",
                detail=_with_causes(
                    f"{count}, not the most common count {shape.most_common_nonzero} "
                    f"({shape.counts[shape.most_common_nonzero or 0]} nodes)",
                    _causes(profile, node),
                ),
            )
        return None
    if count != shape.most_common:
        return Finding(
            condition=kind,
            reason="MixedCounts",
            detail=_with_causes(
                f"{count}, not the most common count {shape.most_common} ({shape.counts[shape.most_common]} nodes)",
                _causes(profile, node),
            ),
        )
    return None


def _plugin_finding(node: _NodeView, condition: Condition) -> Finding | None:
    if condition.status != "False" or node.plugin is PluginState.READY:
        return None
    word = _providers(node.serving)
    kind = ConditionType.DEVICE_PLUGIN_READY
    if node.plugin is PluginState.NOT_INSTALLED:
        return Finding(condition=kind, reason="PluginNotInstalled", detail=f"no {word} DaemonSet found")
    if node.plugin is PluginState.NO_POD:
        return Finding(condition=kind, reason="PluginNotScheduled", detail=f"no {word} pod on the node")
    waiting = ", ".join(pod.name for pod in node.pods if Source(pod.source) in node.serving)
    return Finding(condition=kind, reason="PluginNotReady", detail=f"{word} pod not Ready: {waiting}")


def _instance_type_finding(profile: FabricProfile, node: _NodeView, condition: Condition) -> Finding | None:
    maximum = profile.maximum_for(node.facts.instance_type)
    if condition.status != "False" or maximum is None or node.devices.count == maximum:
        return None
    above = node.devices.count > maximum
    return Finding(
        condition=ConditionType.MATCHES_INSTANCE_TYPE,
        reason="AboveInstanceMaximum" if above else "BelowInstanceMaximum",
        detail=f"{node.devices.count} {'>' if above else '<'} {maximum}, the maximum of {node.facts.instance_type}",
    )


def _stalled_finding(
    profile: FabricProfile, node: _NodeView, shape: _PoolShape, condition: Condition
) -> Finding | None:
    if condition.status != "True":
        return None
    kind = ConditionType.STALLED
    instance_type = node.facts.instance_type
    maximum = profile.maximum_for(instance_type)
    if condition.reason == "InstanceTypeUnsupported":
        return Finding(
            condition=kind,
            reason="InstanceTypeUnsupported",
            detail=f"{instance_type} supports no {profile.resource} (maximum 0)",
        )
    if len(shape.maxima) > 1:
        if maximum is None:
            return None
        largest = max(shape.maxima.values())
        tied = sum(1 for nodes in shape.maxima.values() if nodes == largest) > 1
        if shape.maxima[maximum] == largest and not tied:
            return None
        others = sorted(other for other in shape.maxima if other != maximum)
        return Finding(
            condition=kind,
            reason="HeterogeneousInstanceTypes",
            detail=f"{instance_type} has maximum {maximum}; the pool's other known maxima: "
            + ", ".join(str(other) for other in others),
        )
    return _isolation_finding(profile, node, shape, kind)


def _gaps(profile: FabricProfile, facts: NodeFacts, devices: NodeDevices, plugin: PluginState) -> list[Gap]:
    """The gap classes of ``status.gap``, by the evaluation's rules."""
    gaps = []
    ready = plugin is PluginState.READY
    if devices.count == 0 and ready:
        gaps.append(Gap.PLUGIN_READY_NOT_ADVERTISED)
    if profile.uses(Source.DEVICE_PLUGIN) and facts.capacity_of(profile.resource) > facts.allocatable_of(
        profile.resource
    ):
        gaps.append(Gap.UNHEALTHY)
    if devices.count > 0 and not ready:
        gaps.append(Gap.ADVERTISED_WITHOUT_PLUGIN)
    return gaps


def _notes(devices: NodeDevices) -> list[str]:
    """What the evaluation's messages note about the node, though it may advertise anyway
    (a DRA pool that is incomplete while the device plugin advertises)."""
    notes = []
    if devices.unusable:
        notes.append(f"unusable quantity: {devices.unusable}")
    if devices.dra.problem:
        notes.append(f"ResourceSlices not counted: {devices.dra.problem}")
    return notes


def explain_capability(config: Config, index: FactIndex, capability: PoolCapability) -> PoolExplanation:
    """The per-node view of one evaluated FabricCapability."""
    profile = next(fabric for fabric in config.enabled_fabrics if fabric.name == capability.fabric)
    view = fabric_views(config, index.daemon_sets.values(), index.pods.values())[profile.name]
    members = sorted(index.members(capability.pool), key=lambda node: node.name)
    # The evaluation's own two steps, per member: count its devices, decide whether it is a target.
    devices = {node.name: node_devices(profile, node, index) for node in members}
    targets = [node for node in members if is_target_node(profile, node, devices[node.name], view)]
    gate = [node for node in targets if not node.cordoned]
    shape = _shape(profile, gate, devices)
    status = capability.status
    conditions = {condition.type: condition for condition in status.conditions}
    pods = _provider_pods(index, view, profile)
    ready = conditions[ConditionType.READY]

    explained = []
    for facts in targets:
        node_devices_ = devices[facts.name]
        serving = _serving_sources(profile, node_devices_)
        plugin = _plugin_state(view, facts.name, serving)
        node = _NodeView(
            facts=facts,
            devices=node_devices_,
            serving=serving,
            plugin=plugin,
            pods=pods.get(facts.name, []),
            gaps=_gaps(profile, facts, node_devices_, plugin),
        )
        findings: list[Finding] = []
        if not facts.cordoned:
            candidates = (
                _plugin_finding(node, conditions[ConditionType.DEVICE_PLUGIN_READY]),
                _advertised_finding(profile, node, conditions[ConditionType.ADVERTISED]),
                _homogeneous_finding(profile, node, shape, conditions[ConditionType.HOMOGENEOUS]),
                _instance_type_finding(profile, node, conditions[ConditionType.MATCHES_INSTANCE_TYPE]),
                _stalled_finding(profile, node, shape, conditions[ConditionType.STALLED]),
            )
            findings = [finding for finding in candidates if finding is not None]
        uses_plugin, uses_dra = profile.uses(Source.DEVICE_PLUGIN), profile.uses(Source.DRA)
        explained.append(
            NodeExplanation(
                name=facts.name,
                instance_type=facts.instance_type,
                max_count=profile.maximum_for(facts.instance_type),
                cordoned=facts.cordoned,
                capacity=facts.capacity_of(profile.resource) if uses_plugin else None,
                allocatable=facts.allocatable_of(profile.resource) if uses_plugin else None,
                dra_devices=node_devices_.dra.count if uses_dra else None,
                count=node_devices_.count,
                sources=[source.value for source in Source if source in node_devices_.sources],
                plugin=plugin,
                plugin_pods=node.pods,
                gaps=node.gaps if not facts.cordoned else [],
                findings=findings,
                notes=[note for note in _notes(node_devices_) if not any(note in f.detail for f in findings)],
                blocks_ready=ready.status == "False" and any(finding.condition in READY_INPUTS for finding in findings),
            )
        )
    target_names = {node.name for node in targets}
    return PoolExplanation(
        name=capability.name,
        fabric=capability.fabric,
        resource_name=profile.resource,
        pool=PoolRef(key=capability.pool.key, value=capability.pool.value),
        nodes=explained,
        other_nodes=[node.name for node in members if node.name not in target_names],
        status=status,
    )
