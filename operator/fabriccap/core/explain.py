"""One pool, node by node: what ``fabriccap explain`` shows. Pure: no I/O, no clock.

A FabricCapability's status is a summary (counts, at most 20 gap names, 5 names per message);
the question a user brings is "which node is the odd one out, and why". This module answers
it from the pool's analysis (``core.analysis.analyse_pool``), the one the status is built
from: each node's count, serving sources, provider state, gap classes and the conditions it
breaks are decided there, once, and only put into words here. ``tests/unit/core/test_explain.py``
checks the per-node view against the status over generated clusters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from fabriccap.core.analysis import Breach, Cause, Gap, NodeAnalysis, PluginState, PoolAnalysis
from fabriccap.core.api import CONDITION_ORDER, ConditionType, FabricCapabilityStatus, PoolRef
from fabriccap.core.config import Config, FabricProfile, Source
from fabriccap.core.evaluate import Evaluation, PoolCapability, analyse_capability
from fabriccap.core.facts import Pool, WorkloadPodFacts
from fabriccap.core.index import FactIndex
from fabriccap.core.sources import SOURCES, FabricView, in_order, providers_phrase, request_forms
from fabriccap.core.transport import Verdict
from fabriccap.core.workloads import judge_pod

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
    # Why it is not in the gate set: cordoned, unready or launchedWithoutFabric; None: judged.
    left_out: str | None = Field(default=None, alias="leftOut")
    findings: list[Finding]  # empty for a node left out of the gate set: reported, not judged
    # Why some devices could not be counted (an unusable quantity, incomplete ResourceSlices).
    notes: list[str]
    blocks_ready: bool = Field(alias="blocksReady")

    @property
    def breaks(self) -> list[str]:
        """The condition types it breaks, in the status's order."""
        broken = {finding.condition for finding in self.findings}
        return [kind.value for kind in CONDITION_ORDER if kind in broken]


class PodExplanation(_Model):
    """A pod on the pool that requests the fabric or an accelerator, and what its NCCL chose."""

    name: str  # namespace/name
    node: str
    owner: str  # Kind/name of its top-level owner (as far as known)
    requests_fabric: bool = Field(alias="requestsFabric")
    transport: Verdict
    evidence: str = ""  # the line of its log that shows it
    read: bool  # whether its log has been read (the operator's reader, or a live explain)
    reason: str = ""  # why its log could not be read


class DeviceClassExplanation(_Model):
    """One DeviceClass a DRA fabric's devices are selected with, and where it came from."""

    name: str
    source: str  # cluster | copy | attributes | missing (core.selection.ClassSource)
    # What stands in for a class the cluster lacks: "the aws-dranet-1.0.0 chart's copy".
    stands_in: str | None = Field(default=None, alias="standsIn")
    # Why it selects nothing (a selector that does not compile, no class to be had).
    error: str | None = None
    # KEP-5004: the cluster serves the fabric's extended resource from this class.
    extended_resource: bool = Field(default=False, alias="extendedResource")

    def describe(self) -> str:
        if self.error is not None:
            told = f"selects nothing: {self.error}"
        elif self.stands_in is not None:
            told = f"not in the cluster: counted with {self.stands_in}"
        else:
            told = "from the cluster"
        return f"{self.name} ({told}{'; serves the extended resource, KEP-5004' if self.extended_resource else ''})"


class PoolExplanation(_Model):
    name: str
    fabric: str
    resource_name: str = Field(alias="resourceName")
    pool: PoolRef
    # The classes that select the fabric's DRA devices, when the profile reads DRA.
    device_classes: list[DeviceClassExplanation] | None = Field(default=None, alias="deviceClasses")
    nodes: list[NodeExplanation]  # the pool's target nodes (cordoned ones included), by name
    # Members of the pool that are not target nodes of the fabric: not counted anywhere.
    other_nodes: list[str] = Field(alias="nonTargetNodes")
    # With transport read (config.transport): each pod's verdict, by name; else None.
    pods: list[PodExplanation] | None = None
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
# The per-node view: the analysis, put into words


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


def _uncounted(node: NodeAnalysis) -> list[str]:
    """Why some of the node's devices could not be counted, per source: what the status's
    messages note as an unusable quantity or uncounted ResourceSlices; and how its DRA devices
    were counted (selector failures, devices counted from ResourceClaims, older slices)."""
    notes = [f"{SOURCES[source].problem}: {problem}" for source, problem in node.devices.problems()]
    for reading in node.devices.readings.values():
        notes += [
            f"{error.class_name} {error.cause} on {error.devices} device(s), e.g. {error.example}: not counted"
            for error in reading.errors
        ]
        notes += list(reading.notes)
    return notes


def _causes(node: NodeAnalysis) -> list[str]:
    """Why a node counts fewer devices than it might: devices that could not be counted, and
    devices a source holds back as unhealthy."""
    return [*_uncounted(node), *node.devices.unhealthy_devices()]


@dataclass(frozen=True, slots=True)
class _Subject:
    """What a finding's detail is written from."""

    pool: PoolAnalysis
    node: NodeAnalysis
    pods: list[ProviderPod]

    @property
    def profile(self) -> FabricProfile:
        return self.pool.profile


def _provider_detail(subject: _Subject) -> str:
    node = subject.node
    word = providers_phrase(node.serving)
    if node.provider is PluginState.NOT_INSTALLED:
        return f"no {word} DaemonSet found"
    if node.provider is PluginState.NO_POD:
        return f"no {word} pod on the node"
    waiting = ", ".join(pod.name for pod in subject.pods if Source(pod.source) in node.serving)
    return f"{word} pod not Ready: {waiting}"


def _nothing_advertised_detail(subject: _Subject) -> str:
    node, causes = subject.node, _causes(subject.node)
    if not causes:
        ready = subject.pool.ready_providers(node)
        if node.provider is PluginState.READY and ready:
            causes.append(f"its {providers_phrase(ready)} pod is Ready, yet the node advertises nothing")
        else:
            causes.append("nothing in " + " nor in ".join(SOURCES[source].place for source in subject.profile.sources))
    return "advertises 0: " + "; ".join(causes)


def _uncommon_count_detail(subject: _Subject) -> str:
    typical = subject.pool.typical_count
    nodes = subject.pool.counts.get(typical or 0, 0)
    return "; ".join(
        [f"{subject.node.count}, not the most common count {typical} ({nodes} nodes)", *_causes(subject.node)]
    )


def _maximum_detail(subject: _Subject, sign: str) -> str:
    node = subject.node
    return f"{node.count} {sign} {node.maximum}, the maximum of {node.facts.instance_type}"


def _uncommon_maximum_detail(subject: _Subject) -> str:
    node = subject.node
    others = sorted(maximum for maximum in subject.pool.maxima if maximum != node.maximum)
    return f"{node.facts.instance_type} has maximum {node.maximum}; the pool's other known maxima: " + ", ".join(
        str(other) for other in others
    )


def _advertisers(node: NodeAnalysis) -> str:
    return ", ".join(
        f"{SOURCES[source].provider_spelled} {node.devices.readings[source].devices}"
        for source in in_order(node.devices.advertisers)
    )


def _uncommon_source_detail(subject: _Subject) -> str:
    pool, node = subject.pool, subject.node
    mapped = pool.selection is not None and pool.selection.extended_resource_class is not None
    own = request_forms(node.devices.advertisers, extended_resource_mapped=mapped)
    others = sum(
        1
        for other in pool.advertising
        if request_forms(other.devices.advertisers, extended_resource_mapped=mapped) != own
    )
    forms = " or ".join(form.value for form in own)
    return f"advertises through {_advertisers(node)}: only a pod {forms} schedules here, unlike on {others} other nodes"


# How each cause of a breach is told: one row per Cause.
DETAILS: dict[Cause, Callable[[_Subject], str]] = {
    Cause.PROVIDER: _provider_detail,
    Cause.NOTHING_ADVERTISED: _nothing_advertised_detail,
    Cause.AT_ZERO: lambda s: (
        f"0, while {len(s.pool.advertising)} nodes advertise (most commonly {s.pool.typical_count})"
    ),
    Cause.UNCOMMON_COUNT: _uncommon_count_detail,
    Cause.ISOLATED: lambda s: (
        f"{s.profile.spoken_name} traffic between {s.node.facts.instance_type} and the pool's other instance"
        " types is unsupported"
    ),
    Cause.ABOVE_MAXIMUM: lambda s: _maximum_detail(s, ">"),
    Cause.BELOW_MAXIMUM: lambda s: _maximum_detail(s, "<"),
    Cause.TYPE_UNSUPPORTED: lambda s: f"{s.node.facts.instance_type} supports no {s.profile.resource} (maximum 0)",
    Cause.UNCOMMON_MAXIMUM: _uncommon_maximum_detail,
    Cause.UNCOMMON_SOURCE: _uncommon_source_detail,
    Cause.CONFLICTING_ADVERTISERS: lambda s: (
        f"advertises through both {_advertisers(s.node)}: the same devices can be handed out twice"
    ),
}


def _finding(subject: _Subject, breach: Breach) -> Finding:
    return Finding(condition=breach.condition, reason=breach.reason.value, detail=DETAILS[breach.cause](subject))


def _node_explanation(pool: PoolAnalysis, node: NodeAnalysis, pods: list[ProviderPod]) -> NodeExplanation:
    subject = _Subject(pool, node, pods)
    findings = [_finding(subject, breach) for breach in node.breaches]
    facts, readings = node.facts, node.devices.readings
    # The columns of the sources the profile reads: the device plugin's node status, the DRA devices.
    plugin = readings.get(Source.DEVICE_PLUGIN) or readings.get(Source.PLATFORM)
    dra = readings.get(Source.DRA)
    return NodeExplanation(
        name=node.name,
        instance_type=facts.instance_type,
        max_count=node.maximum,
        cordoned=node.cordoned,
        left_out=node.left_out.value if node.left_out is not None else None,
        capacity=facts.capacity_of(pool.profile.resource) if plugin else None,
        allocatable=plugin.devices if plugin else None,
        dra_devices=dra.devices if dra else None,
        count=node.count,
        sources=[source.value for source in in_order(node.devices.sources)],
        plugin=node.provider,
        plugin_pods=pods,
        gaps=list(node.gaps),
        findings=findings,
        notes=[
            *([node.why_left_out] if node.why_left_out else []),
            *(note for note in _uncounted(node) if not any(note in finding.detail for finding in findings)),
        ],
        blocks_ready=node.blocks_ready,
    )


def transport_pods(analysis: PoolAnalysis, index: FactIndex) -> list[PodExplanation]:
    """The pods on the pool's target nodes that request the fabric or an accelerator (the ones
    whose logs are read), with what their logs say, by name: what status.workloads.transport
    counts, pod by pod."""
    found = []
    for node in analysis.nodes:
        for key in sorted(index.node_workload_pods.get(node.name, ())):
            explained = pod_explanation(index.workload_pods[key], analysis.profile, index)
            if explained is not None:
                found.append(explained)
    return sorted(found, key=lambda pod: pod.name)


def pod_explanation(pod: WorkloadPodFacts, profile: FabricProfile, index: FactIndex) -> PodExplanation | None:
    """A bound pod's transport verdict, if its log is one the operator reads (it requests the
    fabric or an accelerator); None for any other pod."""
    judgement = judge_pod(pod, profile, index)
    if pod.node_name is None or judgement.use.unknown or not (judgement.use.fabric or judgement.use.accelerator):
        return None
    view = judgement.transport
    return PodExplanation(
        name=f"{pod.namespace}/{pod.name}",
        node=pod.node_name,
        owner=f"{judgement.owner.kind}/{judgement.owner.name}",
        requests_fabric=judgement.use.fabric,
        transport=view.verdict if view is not None else Verdict.UNKNOWN,
        evidence=view.evidence if view is not None else "",
        read=view is not None,
        reason=view.reason if view is not None else "",
    )


def _device_classes(pool: PoolAnalysis) -> list[DeviceClassExplanation] | None:
    selection = pool.selection
    if selection is None:
        return None
    return [
        DeviceClassExplanation(
            name=effective.name,
            source=effective.source.value,
            stands_in=effective.copy_origin if effective.stands_in else None,
            error=effective.error,
            extended_resource=effective.name == selection.extended_resource_class,
        )
        for effective in selection.classes
    ]


def explain_capability(config: Config, index: FactIndex, capability: PoolCapability) -> PoolExplanation:
    """The per-node view of one evaluated FabricCapability: its analysis, in words."""
    analysis = analyse_capability(config, index, capability)
    pods = _provider_pods(index, analysis.view, analysis.profile)
    return PoolExplanation(
        name=capability.name,
        fabric=capability.fabric,
        resource_name=analysis.profile.resource,
        pool=PoolRef(key=capability.pool.key, value=capability.pool.value),
        device_classes=_device_classes(analysis),
        nodes=[_node_explanation(analysis, node, pods.get(node.name, [])) for node in analysis.nodes],
        other_nodes=list(analysis.other_nodes),
        pods=transport_pods(analysis, index) if config.transport.enabled else None,
        status=capability.status,
    )
