"""``fabriccap explain``'s core: which node is the odd one out and why, and which pool a query names.

The per-node view must never disagree with the status the evaluation publishes: the property
test at the end rebuilds every status field the view can speak to from the view alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabriccap.core.analysis import READY_INPUTS, Cause, Gap, PluginState, PoolAnalysis
from fabriccap.core.api import ConditionStatus, ConditionType, FabricCapabilityStatus
from fabriccap.core.config import Config, Source
from fabriccap.core.evaluate import analyse_capability, evaluate
from fabriccap.core.explain import (
    DETAILS,
    ExplainError,
    NodeExplanation,
    PoolExplanation,
    explain_capability,
    find_capability,
)
from support.builders import (
    EFA_DS,
    KARPENTER,
    allocated_claim,
    daemon_set,
    dra_pool,
    dranet_daemon_set,
    dranet_pods,
    efa_device_class,
    facts_of,
    healthy_pool,
    node,
    plugin_pods,
    pod,
    pod_id_link_device,
    resource_slice,
)
from support.configs import build_config, default_config
from support.scenarios import Scenario, scenarios

Bodies = list[dict[str, Any]]


def explained(bodies: Bodies, query: str = "p5", config: Config | None = None) -> PoolExplanation:
    config = config or default_config()
    facts = facts_of(bodies, config)
    evaluation = evaluate(config, facts)
    return explain_capability(config, facts, find_capability(evaluation, facts, query))


def reasons_of(row: NodeExplanation) -> set[tuple[str, str]]:
    return {(finding.condition.value, finding.reason) for finding in row.findings}


def _pool(counts: list[int | None], **node_kwargs: Any) -> Bodies:
    names = [f"n{index}" for index in range(1, len(counts) + 1)]
    return [
        daemon_set(),
        *(node(name, efa=count, **node_kwargs) for name, count in zip(names, counts, strict=True)),
        *plugin_pods(names),
    ]


# --- one row per case: the odd node, what it counts, and the conditions it breaks ------------------


@dataclass(frozen=True)
class OddOne:
    node: str
    count: int
    plugin: PluginState
    gaps: tuple[Gap, ...]
    reasons: frozenset[tuple[str, str]]
    detail: str  # a fragment of one of its findings' details
    blocks_ready: bool = True
    alone: bool = True  # the only node blamed for Ready (False: every node shares its fault)


ADV, HOM, DPR, MIT, STL = (
    ConditionType.ADVERTISED.value,
    ConditionType.HOMOGENEOUS.value,
    ConditionType.DEVICE_PLUGIN_READY.value,
    ConditionType.MATCHES_INSTANCE_TYPE.value,
    ConditionType.STALLED.value,
)

CASES = [
    pytest.param(
        _pool([32, 32, 0]),
        OddOne(
            "n3",
            0,
            PluginState.READY,
            (Gap.PLUGIN_READY_NOT_ADVERTISED,),
            frozenset({(ADV, "NotAdvertised"), (HOM, "PartialRollout"), (MIT, "BelowInstanceMaximum")}),
            "device-plugin pod is Ready, yet the node advertises nothing",
        ),
        id="partial-rollout-plugin-ready",
    ),
    pytest.param(
        _pool([32, 32, 16]),
        OddOne(
            "n3",
            16,
            PluginState.READY,
            (),
            frozenset({(HOM, "MixedCounts"), (MIT, "BelowInstanceMaximum")}),
            "16, not the most common count 32 (2 nodes)",
        ),
        id="mixed-counts",
    ),
    pytest.param(
        [daemon_set(), node("n1"), node("n2"), node("n3", efa=16, efa_capacity=32), *plugin_pods(["n1", "n2", "n3"])],
        OddOne(
            "n3",
            16,
            PluginState.READY,
            (Gap.UNHEALTHY,),
            frozenset({(HOM, "MixedCounts"), (MIT, "BelowInstanceMaximum")}),
            "capacity 32 but allocatable 16: 16 unhealthy",
        ),
        id="unhealthy-devices",
    ),
    pytest.param(
        [daemon_set(), node("n1"), node("n2"), pod("n1"), pod("n2", ready=False)],
        OddOne(
            "n2",
            32,
            PluginState.NOT_READY,
            (Gap.ADVERTISED_WITHOUT_PLUGIN,),
            frozenset({(DPR, "PluginNotReady")}),
            "device-plugin pod not Ready: kube-system/aws-efa-k8s-device-plugin-",
        ),
        id="plugin-not-ready",
    ),
    pytest.param(
        [daemon_set(), node("n1"), node("n2"), pod("n1")],
        OddOne(
            "n2",
            32,
            PluginState.NO_POD,
            (Gap.ADVERTISED_WITHOUT_PLUGIN,),
            frozenset({(DPR, "PluginNotScheduled")}),
            "no device-plugin pod on the node",
        ),
        id="no-plugin-pod",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        OddOne(
            "n2",
            32,
            PluginState.NOT_INSTALLED,
            (Gap.ADVERTISED_WITHOUT_PLUGIN,),
            frozenset({(DPR, "PluginNotInstalled")}),
            "no device-plugin DaemonSet found",
            alone=False,
        ),
        id="no-daemonset",
    ),
    pytest.param(
        [daemon_set(), node("n1"), node("n2"), node("n3", efa="1e40"), *plugin_pods(["n1", "n2", "n3"])],
        OddOne(
            "n3",
            0,
            PluginState.READY,
            (Gap.PLUGIN_READY_NOT_ADVERTISED,),
            frozenset({(ADV, "NotAdvertised"), (HOM, "PartialRollout"), (MIT, "BelowInstanceMaximum")}),
            "unusable quantity: status.allocatable[vpc.amazonaws.com/efa]: '1e40' is out of range",
        ),
        id="unusable-quantity",
    ),
    pytest.param(
        [
            *dra_pool(nodes=2, prefix="n"),
            node("n3", efa=None),
            resource_slice("n3", efa=32, slice_count=2),
            *dranet_pods(["n3"]),
        ],
        OddOne(
            "n3",
            0,
            PluginState.READY,
            (Gap.PLUGIN_READY_NOT_ADVERTISED,),
            frozenset({(ADV, "NotAdvertised"), (HOM, "PartialRollout"), (MIT, "BelowInstanceMaximum")}),
            "ResourceSlices not counted: driver dra.net pool n3 has 1 of 2 ResourceSlices of generation 1",
        ),
        id="incomplete-resource-slices",
    ),
    pytest.param(
        [*dra_pool(nodes=3, prefix="n")[:-1]],  # the last driver pod missing
        OddOne(
            "n3",
            32,
            PluginState.NO_POD,
            (Gap.ADVERTISED_WITHOUT_PLUGIN,),
            frozenset({(DPR, "PluginNotScheduled")}),
            "no DRA-driver pod on the node",
        ),
        id="dra-driver-pod-missing",
    ),
    pytest.param(
        [
            daemon_set(),
            *(node(f"n{i}", efa=4, instance_type="p5.48xlarge") for i in (1, 2)),
            node("n3", efa=4, instance_type="p4d.24xlarge"),
            *plugin_pods(["n1", "n2", "n3"]),
        ],
        OddOne(
            "n3",
            4,
            PluginState.READY,
            (),
            frozenset({(HOM, "MixedCounts"), (STL, "HeterogeneousInstanceTypes")}),
            "EFA traffic between p4d.24xlarge and the pool's other instance types is unsupported",
        ),
        id="isolated-instance-types",
    ),
]


@pytest.mark.parametrize(("bodies", "odd"), CASES)
def test_the_odd_node_out_and_why(bodies: Bodies, odd: OddOne) -> None:
    explanation = explained(bodies)
    row = explanation.node(odd.node)
    assert (row.count, row.plugin, tuple(row.gaps)) == (odd.count, odd.plugin, odd.gaps)
    assert reasons_of(row) == odd.reasons
    assert any(odd.detail in finding.detail for finding in row.findings), row.findings
    assert row.blocks_ready is odd.blocks_ready
    # Every other node of these pools is fine: the odd one is the only one blamed for Ready.
    others = [other for other in explanation.nodes if other.name != odd.node]
    assert all(other.blocks_ready is not odd.alone for other in others), [(o.name, o.findings) for o in others]


def test_a_healthy_pool_blames_no_node() -> None:
    explanation = explained(healthy_pool(nodes=3))
    assert explanation.status.is_ready
    assert [(row.name, row.count, row.sources, row.plugin) for row in explanation.nodes] == [
        (f"n{index}", 32, ["devicePlugin"], PluginState.READY) for index in (1, 2, 3)
    ]
    assert all(not row.findings and not row.gaps and not row.blocks_ready for row in explanation.nodes)


def test_each_node_says_where_its_count_comes_from() -> None:
    bodies = [
        daemon_set(),
        dranet_daemon_set(),
        node("plugin", efa=32),
        node("dra", efa=None),
        resource_slice("dra", efa=32),
        node("both", efa=32),
        resource_slice("both", efa=32),
        node("larger-dra", efa=16),
        resource_slice("larger-dra", efa=32),
        *plugin_pods(["plugin", "both", "larger-dra"]),
        *dranet_pods(["dra", "both", "larger-dra"]),
    ]
    rows = {row.name: row for row in explained(bodies).nodes}
    assert {name: (row.allocatable, row.dra_devices, row.count, row.sources) for name, row in rows.items()} == {
        "plugin": (32, 0, 32, ["devicePlugin"]),
        "dra": (0, 32, 32, ["dra"]),
        "both": (32, 32, 32, ["devicePlugin", "dra"]),
        "larger-dra": (16, 32, 32, ["dra"]),
    }
    # The pod that must serve "larger-dra" is the DRA driver's: its count comes from DRA.
    assert sorted(pod.source for pod in rows["larger-dra"].plugin_pods) == ["devicePlugin", "dra"]
    assert rows["larger-dra"].plugin is PluginState.READY


def test_a_profile_without_a_source_shows_no_column_for_it() -> None:
    config = build_config({"fabrics": [{"name": "efa", "sources": ["devicePlugin"]}]})
    row = explained(healthy_pool(), config=config).nodes[0]
    assert (row.capacity, row.allocatable, row.dra_devices) == (32, 32, None)


def test_cordoned_nodes_are_shown_not_judged() -> None:
    bodies = [*healthy_pool(nodes=2), node("n3", efa=0, cordoned=True)]
    explanation = explained(bodies)
    row = explanation.node("n3")
    assert row.cordoned and row.findings == [] and row.gaps == [] and not row.blocks_ready
    assert explanation.status.cordoned_nodes == 1 and explanation.status.is_ready


def test_pool_members_that_are_not_target_nodes_are_listed_apart() -> None:
    bodies = [*healthy_pool(nodes=2), node("cpu", efa=None, gpu=None, instance_type="m7i.large")]
    explanation = explained(bodies)
    assert [row.name for row in explanation.nodes] == ["n1", "n2"]
    assert explanation.other_nodes == ["cpu"]


def test_an_instance_type_without_fabric_stalls_every_node() -> None:
    bodies = _pool([0, 0], instance_type="g6e.xlarge")
    explanation = explained(bodies)
    assert all((STL, "InstanceTypeUnsupported") in reasons_of(row) for row in explanation.nodes)
    assert "g6e.xlarge supports no vpc.amazonaws.com/efa (maximum 0)" in explanation.nodes[0].findings[-1].detail


def test_a_minority_maximum_is_the_odd_one_of_heterogeneous_types() -> None:
    bodies = [
        daemon_set(),
        *(node(f"n{i}", efa=32) for i in (1, 2)),
        node("n3", efa=16, instance_type="p5en.48xlarge"),
        *plugin_pods(["n1", "n2", "n3"]),
    ]
    explanation = explained(bodies)
    assert (STL, "HeterogeneousInstanceTypes") in reasons_of(explanation.node("n3"))
    assert not any(finding.condition is ConditionType.STALLED for finding in explanation.node("n1").findings)


def test_an_incomplete_dra_pool_beside_a_plugin_count_is_a_note() -> None:
    bodies = [
        daemon_set(),
        node("n1"),
        node("n2"),
        resource_slice("n2", efa=32, slice_count=2),
        *plugin_pods(["n1", "n2"]),
    ]
    row = explained(bodies).node("n2")
    assert row.count == 32 and row.findings == []
    assert row.notes == ["ResourceSlices not counted: driver dra.net pool n2 has 1 of 2 ResourceSlices of generation 1"]


# --- which FabricCapability a query names ----------------------------------------------------------

NODEGROUP_KEY = "eks.amazonaws.com/nodegroup"
TWO_KEYS: Bodies = [
    *healthy_pool(pool="p5", prefix="a"),
    node("k1", pool="p5", pool_key=KARPENTER),
    node("k2", pool="spot", pool_key=KARPENTER),
]


@pytest.mark.parametrize(
    ("bodies", "query", "name"),
    [
        pytest.param(healthy_pool(pool="train"), "efa-train", "efa-train", id="by-name"),
        pytest.param(healthy_pool(pool="train"), "train", "efa-train", id="by-pool-value"),
        pytest.param(healthy_pool(pool="train"), "fcap/efa-train", "efa-train", id="kubectl-short-form"),
        pytest.param(
            healthy_pool(pool="train"),
            "fabriccapability.fabriccap.dev/efa-train",
            "efa-train",
            id="evaluate-o-name-form",
        ),
        # Two keys with the value p5: both names are hashed (round 3); key=value still names one.
        pytest.param(TWO_KEYS, "eks.amazonaws.com/nodegroup=p5", None, id="key-value-in-a-collision"),
        pytest.param(TWO_KEYS, "spot", "efa-spot", id="secondary-key-readable-name"),
    ],
)
def test_a_query_names_one_capability(bodies: Bodies, query: str, name: str | None) -> None:
    config = default_config()
    facts = facts_of(bodies, config)
    evaluation = evaluate(config, facts)
    found = find_capability(evaluation, facts, query)
    if name is None:  # the hashed name is not spelled out here: its pool is what the query named
        assert (found.pool.key, found.pool.value, found.name.startswith("efa-p5-")) == (NODEGROUP_KEY, "p5", True)
        assert found.status.naming is not None and found.status.naming.reason == "Collision"
    else:
        assert found.name == name


@pytest.mark.parametrize(
    ("bodies", "query", "fragments"),
    [
        pytest.param(
            TWO_KEYS,
            "p5",
            ["'p5' matches 2 FabricCapabilities", "(efa, pool eks.amazonaws.com/nodegroup=p5)"],
            id="ambiguous",
        ),
        pytest.param(
            [*healthy_pool(pool="p5", prefix="a"), *healthy_pool(pool="efa-p5", prefix="b")],
            "efa-p5",
            ["matches 2 FabricCapabilities", "efa-efa-p5", "fcap/NAME names it alone"],
            id="a-name-and-a-pool-value",
        ),
        pytest.param(TWO_KEYS, "nope", ["no FabricCapability or pool 'nope'", "efa-p5"], id="nothing"),
        pytest.param(TWO_KEYS, "fcap/p5", ["no FabricCapability 'p5'"], id="name-only"),
        pytest.param(TWO_KEYS, "karpenter.sh/nodepool=train", ["no pool 'karpenter.sh/nodepool=train'"], id="key"),
        pytest.param([], "p5", ["the input has no pool with a target node"], id="empty-input"),
        pytest.param(
            [node("c1", pool="cpu", efa=None, gpu=None, instance_type="m7i.large")],
            "cpu",
            ["pool eks.amazonaws.com/nodegroup=cpu (1 nodes) has no target node"],
            id="pool-without-target-nodes",
        ),
        pytest.param(TWO_KEYS, "  ", ["give NAME or POOL"], id="blank"),
    ],
)
def test_a_query_that_names_nothing_or_many_says_so(bodies: Bodies, query: str, fragments: list[str]) -> None:
    config = default_config()
    facts = facts_of(bodies, config)
    with pytest.raises(ExplainError) as raised:
        find_capability(evaluate(config, facts), facts, query)
    message = str(raised.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


# --- the per-node view agrees with the status, whatever the cluster --------------------------------


@st.composite
def dra_scenarios(draw: st.DrawFn) -> tuple[Scenario, Bodies]:
    """The property tests' clusters, some nodes also publishing DRANET slices (complete or not)."""
    scenario = draw(scenarios(max_nodes=10, pools=[("a", "eks.amazonaws.com/nodegroup"), ("b", KARPENTER)]))
    extra: Bodies = []
    if draw(st.booleans()):
        extra.append(dranet_daemon_set())
    for spec in scenario.nodes:
        choice = draw(st.sampled_from(["none", "complete", "incomplete"]))
        if choice == "none":
            continue
        extra.append(
            resource_slice(
                spec.name, efa=draw(st.sampled_from([0, 16, 32])), slice_count=1 if choice == "complete" else 2
            )
        )
        if draw(st.booleans()):
            extra.append(dranet_pods([spec.name], ready=draw(st.booleans()))[0])
    return scenario, extra


def _rebuilt_status(explanation: PoolExplanation) -> dict[str, Any]:
    """The status fields the per-node view speaks to, rebuilt from the view alone."""
    gate = [row for row in explanation.nodes if not row.cordoned]
    gap_names = sorted(row.name for row in gate if row.gaps)
    return {
        "nodes": len(gate),
        "cordonedNodes": len(explanation.nodes) - len(gate),
        "advertisingNodes": sum(1 for row in gate if row.count > 0),
        "counts": sorted(Counter(row.count for row in gate).items(), reverse=True),
        "instanceTypes": sorted(Counter(row.instance_type for row in gate if row.instance_type).items()),
        "readyNodes": sum(1 for row in gate if row.plugin is PluginState.READY),
        "gap": {gap.value: sum(1 for row in gate if gap in row.gaps) for gap in Gap},
        "gapNodes": gap_names[:20],
        "sources": {
            source: sum(1 for row in gate if row.count > 0 and source in row.sources)
            for source in ("devicePlugin", "dra")
        },
    }


def _status_fields(explanation: PoolExplanation) -> dict[str, Any]:
    return _published(explanation.status)


def _published(capability_status: FabricCapabilityStatus) -> dict[str, Any]:
    status = capability_status.to_json()
    return {
        "nodes": status["nodes"],
        "cordonedNodes": status["cordonedNodes"],
        "advertisingNodes": status["advertisingNodes"],
        "counts": [(bucket["count"], bucket["nodes"]) for bucket in status["counts"]],
        "instanceTypes": [(entry["name"], entry["nodes"]) for entry in status["instanceTypes"]],
        "readyNodes": status["devicePlugin"]["readyNodes"],
        "gap": {gap.value: status["gap"][gap.value] for gap in Gap},
        "gapNodes": status["gap"]["nodes"],
        "sources": {entry["source"]: entry["nodes"] for entry in status["sources"]},
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dra_scenarios())
def test_the_per_node_view_never_disagrees_with_the_status(drawn: tuple[Scenario, Bodies]) -> None:
    scenario, extra = drawn
    config = default_config()
    facts = facts_of([*scenario.bodies(), *extra], config)
    evaluation = evaluate(config, facts)
    for capability in evaluation.capabilities:
        explanation = explain_capability(config, facts, capability)
        assert _rebuilt_status(explanation) == _status_fields(explanation), capability.name
        gate = [row for row in explanation.nodes if not row.cordoned]
        for condition in explanation.status.conditions:
            if condition.type == ConditionType.READY or not gate:
                continue
            blamed = [row.name for row in gate if any(f.condition == condition.type for f in row.findings)]
            # A node is blamed for a condition exactly when the condition is not met.
            not_met = condition.status == ("True" if condition.type == ConditionType.STALLED else "False")
            assert bool(blamed) == not_met, (condition, blamed)
        ready = explanation.status.is_ready
        blocking = [row.name for row in gate if row.blocks_ready]
        assert bool(blocking) == (bool(gate) and not ready), (blocking, explanation.status.conditions)
        for row in gate:
            # A count above the type's maximum keeps the pool from Ready too (round 3).
            breaks_ready = any(f.condition in READY_INPUTS or f.reason == "AboveInstanceMaximum" for f in row.findings)
            assert row.blocks_ready == (not ready and breaks_ready)


def test_the_plugin_pod_of_another_daemon_set_is_not_the_plugins() -> None:
    bodies = [daemon_set(), node("n1"), pod("n1", daemon_set_name="something-else"), pod("n1", name=f"{EFA_DS}-x")]
    row = explained(bodies).node("n1")
    assert [pod.name for pod in row.plugin_pods] == [f"kube-system/{EFA_DS}-x"]


# --- one analysis: the status and the per-node view are both read off it ---------------------------


def _status_of_analysis(analysis: PoolAnalysis) -> dict[str, Any]:
    """The status fields the analysis decides, summed from its nodes alone."""
    gate = analysis.gate
    gap_names = [judged.name for judged in gate if judged.gaps]
    return {
        "nodes": len(gate),
        "cordonedNodes": len(analysis.nodes) - len(gate),
        "advertisingNodes": sum(1 for judged in gate if judged.count > 0),
        "uniformCount": analysis.uniform_count,
        "counts": sorted(Counter(judged.count for judged in gate).items(), reverse=True),
        "instanceTypes": sorted(
            Counter(judged.facts.instance_type for judged in gate if judged.facts.instance_type).items()
        ),
        "readyNodes": sum(1 for judged in gate if judged.provider is PluginState.READY),
        "gap": {gap.value: sum(1 for judged in gate if gap in judged.gaps) for gap in Gap},
        "gapNodes": gap_names[:20],
        "sources": {
            source.value: sum(1 for judged in gate if judged.count > 0 and source in judged.devices.sources)
            for source in analysis.profile.sources
        },
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dra_scenarios())
def test_the_status_is_its_analysis_summed(drawn: tuple[Scenario, Bodies]) -> None:
    scenario, extra = drawn
    config = default_config()
    facts = facts_of([*scenario.bodies(), *extra], config)
    for capability in evaluate(config, facts).capabilities:
        analysis = analyse_capability(config, facts, capability)
        status = capability.status
        published = {**_published(status), "uniformCount": status.uniform_count}
        assert _status_of_analysis(analysis) == published, capability.name
        gate = analysis.gate
        for condition in status.conditions:
            breaking = [judged for judged in gate if judged.breach(ConditionType(condition.type)) is not None]
            if condition.type == ConditionType.READY:
                blocked = not gate or any(judged.blocks_ready for judged in gate)
                assert (condition.status == ConditionStatus.TRUE) is not blocked, condition
                continue
            # A condition is not met exactly when some node breaks it, and then for its reason.
            unmet = ConditionStatus.TRUE if condition.type == ConditionType.STALLED else ConditionStatus.FALSE
            assert bool(breaking) == (condition.status == unmet), (condition, [judged.name for judged in breaking])
            reasons = {breach.reason for judged in breaking if (breach := judged.breach(ConditionType(condition.type)))}
            if breaking and condition.type in (
                ConditionType.HOMOGENEOUS,
                ConditionType.MATCHES_INSTANCE_TYPE,
                ConditionType.STALLED,
            ):
                assert condition.reason in reasons, (condition, reasons)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dra_scenarios())
def test_the_per_node_view_is_the_analysis_in_words(drawn: tuple[Scenario, Bodies]) -> None:
    scenario, extra = drawn
    config = default_config()
    facts = facts_of([*scenario.bodies(), *extra], config)
    for capability in evaluate(config, facts).capabilities:
        analysis = analyse_capability(config, facts, capability)
        explanation = explain_capability(config, facts, capability)
        assert [row.name for row in explanation.nodes] == [judged.name for judged in analysis.nodes]
        assert explanation.other_nodes == list(analysis.other_nodes)
        for row, judged in zip(explanation.nodes, analysis.nodes, strict=True):
            assert (row.count, row.max_count, row.plugin, row.gaps, row.blocks_ready) == (
                judged.count,
                judged.maximum,
                judged.provider,
                list(judged.gaps),
                judged.blocks_ready,
            )
            assert row.sources == [source.value for source in Source if source in judged.devices.sources]
            assert [(f.condition, f.reason) for f in row.findings] == [
                (breach.condition, breach.reason.value) for breach in judged.breaches
            ]


def test_every_cause_of_a_breach_is_told() -> None:
    assert set(DETAILS) == set(Cause)


def test_the_fabric_is_named_as_its_profile_names_it() -> None:
    config = build_config(
        {
            "fabrics": [
                {
                    "name": "ib",
                    "displayName": "InfiniBand",
                    "resource": "example.com/ib",
                    "devicePlugin": {"daemonSetNames": ["ib-dp"]},
                    "instanceTypes": {"a.large": 4, "b.large": 4},
                    "isolatedInstanceTypeGroups": [["a.large"]],
                }
            ]
        }
    )
    bodies = [daemon_set("ib-dp", labels={})]
    for name, instance_type in (("n1", "a.large"), ("n2", "a.large"), ("n3", "b.large")):
        body = node(name, efa=None, gpu=None, instance_type=instance_type, resources={"example.com/ib": "4"})
        bodies += [body, pod(name, daemon_set_name="ib-dp")]
    explanation = explained(bodies, "ib-p5", config)
    homogeneous = explanation.status.condition(ConditionType.HOMOGENEOUS)
    assert homogeneous is not None
    assert "InfiniBand traffic between a.large and b.large is unsupported" in homogeneous.message
    (finding,) = [f for f in explanation.node("n3").findings if f.condition is ConditionType.HOMOGENEOUS]
    assert finding.detail == "InfiniBand traffic between b.large and the pool's other instance types is unsupported"


def test_a_dra_pool_says_which_device_classes_counted_and_how() -> None:
    # The cluster's class, mapped to the extended resource (KEP-5004); one node's slice carries
    # pod-id-link0, which the class fails on; another's devices are partly held by a claim.
    busy = resource_slice("d2", efa=32)
    busy["spec"]["devices"] = busy["spec"]["devices"][4:]
    bodies = [
        efa_device_class(extended_resource_name="vpc.amazonaws.com/efa"),
        *[b for b in dra_pool(nodes=2) if b["kind"] not in ("DeviceClass", "ResourceSlice")],
        resource_slice("d1", efa=32, extra_devices=[pod_id_link_device()]),
        busy,
        allocated_claim("d2", [device["name"] for device in resource_slice("d2")["spec"]["devices"][:4]], name="job"),
    ]
    explanation = explained(bodies)
    assert [item.describe() for item in explanation.device_classes or []] == [
        "efa.networking.k8s.aws (from the cluster; serves the extended resource, KEP-5004)"
    ]
    notes = {row.name: row.notes for row in explanation.nodes}
    assert notes["d1"] == [
        "efa.networking.k8s.aws selector #0: no such key: pciDevice on 1 device(s), e.g. pod-id-link0: not counted"
    ]
    assert notes["d2"] == ["4 allocated to ResourceClaims and no longer in its ResourceSlices"]
    assert [row.dra_devices for row in explanation.nodes] == [32, 32]


def test_a_dra_pool_without_the_class_in_the_cluster_says_the_copy_counted() -> None:
    explanation = explained([b for b in dra_pool(nodes=1) if b["kind"] != "DeviceClass"])
    assert explanation.to_json()["deviceClasses"] == [
        {
            "name": "efa.networking.k8s.aws",
            "source": "copy",
            "standsIn": "the aws-dranet-1.0.0 chart's copy",
            "extendedResource": False,
        }
    ]


def test_a_broken_class_is_shown_selecting_nothing() -> None:
    broken = efa_device_class()
    broken["spec"]["selectors"][0]["cel"]["expression"] = "device.driver =="
    explanation = explained([broken, *[b for b in dra_pool(nodes=1) if b["kind"] != "DeviceClass"]])
    (item,) = explanation.device_classes or []
    assert item.describe().startswith("efa.networking.k8s.aws (selects nothing: selector #0: ")
    assert [row.dra_devices for row in explanation.nodes] == [0]


def test_a_device_plugin_only_pool_shows_no_device_classes() -> None:
    config = build_config({"fabrics": [{"name": "efa", "sources": ["devicePlugin"]}]})
    assert explained(healthy_pool(), config=config).device_classes is None
