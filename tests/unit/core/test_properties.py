"""Property tests: order independence, the flip criterion, fail-closed counts, gap bounds."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabriccap.core.api import reason_meaning
from fabriccap.core.evaluate import Evaluation
from support.builders import EFA, INSTANCE_TYPE, NODEGROUP, evaluate_bodies
from support.configs import EFA_CATALOG
from support.scenarios import INSTANCE_TYPES, PLUGIN_STATES, NodeSpec, Scenario, scenarios

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
P4 = frozenset({"p4d.24xlarge", "p4de.24xlarge"})


def _objects(evaluation: Evaluation) -> list[dict[str, Any]]:
    return [capability.to_object() for capability in evaluation.capabilities]


# Known EFA maxima above 0 of the instance types drawn (docs/reference/how-it-decides.md, target rule d).
CARRIES_EFA = {"p5.48xlarge", "ml.p5.48xlarge", "p4d.24xlarge", "p4de.24xlarge"}


def _is_target(spec: NodeSpec, scenario: Scenario) -> bool:
    """The target rules (a), (b), (c), (d) of docs/reference/how-it-decides.md, restated independently
    of the code."""
    advertised = (spec.count or 0) > 0 or spec.unhealthy
    has_plugin_pod = scenario.daemon_set and spec.plugin != "none"
    can_carry_efa = spec.instance_type in CARRIES_EFA
    return advertised or has_plugin_pod or (spec.gpu or 0) > 0 or can_carry_efa


def _gate_sets(scenario: Scenario) -> dict[tuple[str, str], list[NodeSpec]]:
    """Per pool with a target node: its gate set (target nodes not cordoned)."""
    pools: dict[tuple[str, str], list[NodeSpec]] = {}
    for spec in scenario.nodes:
        pool = spec.effective_pool
        if pool is not None and _is_target(spec, scenario):
            pools.setdefault(pool, [])
            if not spec.cordoned:
                pools[pool].append(spec)
    return pools


def _above_maximum(gate: list[NodeSpec]) -> bool:
    """A node above its instance type's catalog maximum: never on purpose, never Ready (round 3)."""
    for spec in gate:
        known = EFA_CATALOG.get(spec.instance_type.removeprefix("ml.")) if spec.instance_type else None
        if known is not None and (spec.count or 0) > known.maximum:
            return True
    return False


def _isolation_conflict(gate: list[NodeSpec]) -> bool:
    types = {spec.instance_type for spec in gate if spec.instance_type}
    return bool(types & P4) and bool(types - P4)


def _by_pool(evaluation: Evaluation) -> dict[tuple[str, str], Any]:
    return {(cap.pool.value, cap.pool.key): cap.status for cap in evaluation.capabilities}


@SETTINGS
@given(scenarios(), st.data())
def test_permuting_input_objects_never_changes_the_output(scenario: Scenario, data: st.DataObject) -> None:
    bodies = scenario.bodies()
    shuffled = data.draw(st.permutations(bodies))
    first, second = evaluate_bodies(bodies), evaluate_bodies(shuffled)
    assert _objects(first) == _objects(second)
    assert first.unpooled_nodes == second.unpooled_nodes


@SETTINGS
@given(scenarios())
def test_ready_is_the_flip_criterion(scenario: Scenario) -> None:
    gates = _gate_sets(scenario)
    statuses = _by_pool(evaluate_bodies(scenario.bodies()))
    assert set(statuses) == set(gates)
    for pool, gate in gates.items():
        counts = {spec.count or 0 for spec in gate}
        all_plugins_ready = scenario.daemon_set and all(spec.plugin == "ready" for spec in gate)
        expected = (
            bool(gate)
            and len(counts) == 1
            and min(counts) > 0
            and all_plugins_ready
            and not _isolation_conflict(gate)
            and not _above_maximum(gate)
        )
        ready = statuses[pool].condition("Ready")
        assert ready is not None
        assert (ready.status == "True") is expected, (pool, ready)
        assert ready.status in ("True", "False")
        assert (statuses[pool].recommendation is not None) is expected
        if expected:
            assert statuses[pool].recommendation.resources_per_node == {EFA: str(min(counts))}


@SETTINGS
@given(scenarios(), st.data())
def test_adding_a_node_whose_count_differs_never_leaves_a_pool_ready(scenario: Scenario, data: st.DataObject) -> None:
    gates = {pool: gate for pool, gate in _gate_sets(scenario).items() if gate}
    if not gates:
        scenario = Scenario(
            nodes=(*scenario.nodes, NodeSpec("seed", ("a", NODEGROUP), 32, False, "p5.48xlarge", False, 8, "ready")),
            daemon_set=True,
        )
        gates = {pool: gate for pool, gate in _gate_sets(scenario).items() if gate}
    pool = data.draw(st.sampled_from(sorted(gates)))
    existing = {spec.count or 0 for spec in gates[pool]}
    count = data.draw(st.sampled_from([value for value in (0, 1, 2, 4, 8, 16, 32, 64) if value not in existing]))
    plugin = data.draw(st.sampled_from(PLUGIN_STATES))
    # In an instance-type pool the newcomer must have that type, else it lands in another pool.
    instance_type = pool[0] if pool[1] == INSTANCE_TYPE else data.draw(st.sampled_from(INSTANCE_TYPES))
    newcomer = NodeSpec("zz-newcomer", pool, count, False, instance_type, False, 8, plugin)
    grown = Scenario(nodes=(*scenario.nodes, newcomer), daemon_set=scenario.daemon_set)
    status = _by_pool(evaluate_bodies(grown.bodies()))[pool]
    ready = status.condition("Ready")
    assert ready is not None and ready.status == "False"
    assert ready.reason in ("NotAdvertised", "PartialRollout", "MixedCounts")
    assert status.uniform_count is None
    assert status.recommendation is None


@SETTINGS
@given(scenarios())
def test_uniform_count_fails_closed(scenario: Scenario) -> None:
    statuses = _by_pool(evaluate_bodies(scenario.bodies()))
    for pool, gate in _gate_sets(scenario).items():
        counts = {spec.count or 0 for spec in gate}
        status = statuses[pool]
        if gate and len(counts) == 1 and not _isolation_conflict(gate):
            assert status.uniform_count == counts.pop()
        else:
            assert status.uniform_count is None
            assert "uniformCount" not in status.to_json()


@SETTINGS
@given(scenarios(max_nodes=30))
def test_status_invariants(scenario: Scenario) -> None:
    evaluation = evaluate_bodies(scenario.bodies())
    for capability in evaluation.capabilities:
        status = capability.status
        assert sum(bucket.nodes for bucket in status.counts) == status.nodes
        assert [bucket.count for bucket in status.counts] == sorted({b.count for b in status.counts}, reverse=True)
        assert all(bucket.nodes > 0 for bucket in status.counts)
        assert status.advertising_nodes == sum(bucket.nodes for bucket in status.counts if bucket.count > 0)
        assert status.advertising_nodes <= status.nodes
        assert status.device_plugin.ready_nodes <= status.nodes
        assert status.gap.plugin_ready_not_advertised <= status.device_plugin.ready_nodes
        assert status.gap.advertised_without_plugin <= status.advertising_nodes
        assert status.gap.nodes == sorted(status.gap.nodes)
        assert len(status.gap.nodes) <= 20
        assert sum(item.nodes for item in status.instance_types) <= status.nodes
        assert status.nodes + status.cordoned_nodes >= 1
        stalled = status.condition("Stalled")
        assert stalled is not None and stalled.status in ("True", "False")
        for condition in status.conditions:  # every outcome is one the reference documents
            assert reason_meaning(condition.type, condition.status, condition.reason) is not None, condition
        if status.nodes == 0:
            assert all(
                condition.reason in ("NoTargetNodes", "NoSchedulableNodes")
                for condition in status.conditions
                if condition.type not in ("MatchesInstanceType", "Stalled")
            )
    names = [capability.name for capability in evaluation.capabilities]
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    unpooled = {spec.name for spec in scenario.nodes if spec.effective_pool is None and _is_target(spec, scenario)}
    assert evaluation.unpooled_nodes == len(unpooled)


@SETTINGS
@given(st.one_of(scenarios(max_nodes=40), scenarios(min_nodes=30, max_nodes=60, pools=[("a", NODEGROUP)])))
def test_gap_classes_match_their_definitions(scenario: Scenario) -> None:
    statuses = _by_pool(evaluate_bodies(scenario.bodies()))
    for pool, gate in _gate_sets(scenario).items():
        ready_plugin = {spec.name for spec in gate if scenario.daemon_set and spec.plugin == "ready"}
        allocatable = {spec.name: spec.count or 0 for spec in gate}
        not_advertised = {name for name, count in allocatable.items() if count == 0} & ready_plugin
        unhealthy = {spec.name for spec in gate if spec.unhealthy}
        without_plugin = {name for name, count in allocatable.items() if count > 0} - ready_plugin
        union = sorted(not_advertised | unhealthy | without_plugin)
        gap = statuses[pool].gap
        assert gap.plugin_ready_not_advertised == len(not_advertised)
        assert gap.unhealthy == len(unhealthy)
        assert gap.advertised_without_plugin == len(without_plugin)
        assert gap.nodes == union[:20]
        assert gap.truncated is (len(union) > 20)
        assert statuses[pool].device_plugin.ready_nodes == len(ready_plugin)
