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
from fabriccap.core.facts import Pool
from fabriccap.core.index import FactIndex
from fabriccap.core.sources import SOURCES, FabricView, in_order, providers_phrase

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
    messages note as an unusable quantity or uncounted ResourceSlices."""
    return [f"{SOURCES[source].problem}: {problem}" for source, problem in node.devices.problems()]


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


def explain_capability(config: Config, index: FactIndex, capability: PoolCapability) -> PoolExplanation:
    """The per-node view of one evaluated FabricCapability: its analysis, in words."""
    analysis = analyse_capability(config, index, capability)
    pods = _provider_pods(index, analysis.view, analysis.profile)
    return PoolExplanation(
        name=capability.name,
        fabric=capability.fabric,
        resource_name=analysis.profile.resource,
        pool=PoolRef(key=capability.pool.key, value=capability.pool.value),
        nodes=[_node_explanation(analysis, node, pods.get(node.name, [])) for node in analysis.nodes],
        other_nodes=list(analysis.other_nodes),
        status=capability.status,
    )
