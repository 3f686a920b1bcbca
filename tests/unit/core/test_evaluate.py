"""The pure evaluation: every condition and reason of docs/reference/fabriccapability.md, target
nodes, counts, gaps (docs/reference/how-it-decides.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from fabriccap.core.api import CONDITION_ORDER
from fabriccap.core.config import Source
from fabriccap.core.sources import SOURCES
from support.builders import (
    EFA,
    KARPENTER,
    capability,
    daemon_set,
    evaluate_bodies,
    healthy_pool,
    message,
    node,
    only_status,
    plugin_pods,
    pod,
    reason,
)
from support.configs import build_config

Bodies = list[dict[str, Any]]
DS = daemon_set()


def _pool(counts: Sequence[int | None], *, ready_pods: bool = True, with_ds: bool = True, **node_kwargs: Any) -> Bodies:
    """A pool whose nodes n1..nk advertise ``counts``, each with a plugin pod (Ready or not)."""
    names = [f"n{index}" for index in range(1, len(counts) + 1)]
    bodies: Bodies = [node(name, efa=count, **node_kwargs) for name, count in zip(names, counts, strict=True)]
    bodies += plugin_pods(names, ready=ready_pods)
    if with_ds:
        bodies.append(daemon_set())
    return bodies


# --- DevicePluginReady --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bodies", "expected"),
    [
        pytest.param(healthy_pool(), ("True", "PluginReadyOnAllNodes"), id="ready-on-all"),
        pytest.param([node("n1"), node("n2")], ("False", "PluginNotInstalled"), id="no-daemonset"),
        pytest.param(
            [node("n1"), node("n2"), *plugin_pods(["n1", "n2"])], ("False", "PluginNotInstalled"), id="pods-without-ds"
        ),
        pytest.param([DS, node("n1"), node("n2"), pod("n1")], ("False", "PluginNotScheduled"), id="one-node-no-pod"),
        pytest.param([DS, node("n1"), node("n2")], ("False", "PluginNotScheduled"), id="ds-but-no-pods"),
        pytest.param(
            [DS, node("n1"), node("n2"), pod("n1"), pod("n2", ready=False)], ("False", "PluginNotReady"), id="not-ready"
        ),
        pytest.param(
            [DS, node("n1"), node("n2"), pod("n1"), pod("n2", phase="Pending", ready=False)],
            ("False", "PluginNotReady"),
            id="pending",
        ),
        pytest.param(
            [DS, node("n1"), node("n2"), pod("n1"), pod("n2", deleting=True)],
            ("False", "PluginNotReady"),
            id="terminating",
        ),
        pytest.param(
            # Not scheduled on n3 wins over not Ready on n2.
            [DS, node("n1"), node("n2"), node("n3"), pod("n1"), pod("n2", ready=False)],
            ("False", "PluginNotScheduled"),
            id="not-scheduled-before-not-ready",
        ),
        pytest.param(
            [DS, node("n1", cordoned=True), pod("n1")], ("Unknown", "NoTargetNodes"), id="all-target-nodes-cordoned"
        ),
    ],
)
def test_device_plugin_ready(bodies: Bodies, expected: tuple[str, str]) -> None:
    assert reason(only_status(bodies), "DevicePluginReady") == expected


def test_device_plugin_messages_name_counts_and_nodes() -> None:
    status = only_status([DS, node("n1"), node("n2"), node("n3"), pod("n1")])
    assert message(status, "DevicePluginReady") == "no device-plugin pod on 2 of 3 nodes: n2, n3"
    status = only_status([node("n1")])
    assert message(status, "DevicePluginReady").startswith(
        "no efa device-plugin DaemonSet found in namespace kube-system (selector app.kubernetes.io/name="
    )
    status = only_status([DS, node("n1"), node("n2"), pod("n1", ready=False), pod("n2")])
    assert message(status, "DevicePluginReady") == "device-plugin pod not Ready on 1 of 2 nodes: n1"
    assert message(only_status(healthy_pool(nodes=3)), "DevicePluginReady") == "device-plugin pod Ready on all 3 nodes"


# --- Advertised -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ([32, 32, 32], ("True", "AllNodesAdvertise")),
        ([0, 0], ("False", "NotAdvertised")),
        ([None, None], ("False", "NotAdvertised")),
        ([32, 0, 32], ("False", "PartiallyAdvertised")),
        ([32, None], ("False", "PartiallyAdvertised")),
        ([16, 32], ("True", "AllNodesAdvertise")),
    ],
)
def test_advertised(counts: list[int | None], expected: tuple[str, str]) -> None:
    assert reason(only_status(_pool(counts)), "Advertised") == expected


def test_advertised_no_target_nodes() -> None:
    status = only_status([node("n1", cordoned=True), node("n2", cordoned=True)])
    assert reason(status, "Advertised") == ("Unknown", "NoTargetNodes")


def test_advertised_message_spec_example() -> None:
    names = [f"ip-10-0-1-{index}" for index in range(1, 13)]
    bodies = [node(name, efa=0 if name in ("ip-10-0-1-5", "ip-10-0-1-9") else 32) for name in names]
    status = only_status(bodies)
    assert message(status, "Advertised") == (
        "vpc.amazonaws.com/efa advertised on 10 of 12 target nodes; 0 on ip-10-0-1-5, ip-10-0-1-9"
    )


def test_messages_name_at_most_five_nodes() -> None:
    counts = [32, 32] + [0] * 8
    status = only_status(_pool(counts))
    # Nodes are named in name order (n10 sorts before n3).
    assert message(status, "Advertised") == (
        "vpc.amazonaws.com/efa advertised on 2 of 10 target nodes; 0 on n10, n3, n4, n5, n6 (+3 more)"
    )
    assert message(status, "Homogeneous").endswith("; 0 on n10, n3, n4, n5, n6 (+3 more)")
    assert "n7" not in message(status, "Ready")


# --- Homogeneous ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ([32, 32], ("True", "UniformCount")),
        ([32], ("True", "UniformCount")),
        ([0, 0], ("True", "UniformCount")),
        ([32, 0], ("False", "PartialRollout")),
        ([32, None], ("False", "PartialRollout")),
        ([32, 16, 0], ("False", "PartialRollout")),
        ([32, 16], ("False", "MixedCounts")),
        ([4, 8, 16], ("False", "MixedCounts")),
    ],
)
def test_homogeneous(counts: list[int | None], expected: tuple[str, str]) -> None:
    assert reason(only_status(_pool(counts, instance_type=None)), "Homogeneous") == expected


def test_homogeneous_no_target_nodes() -> None:
    assert reason(only_status([node("n1", cordoned=True)]), "Homogeneous") == ("Unknown", "NoTargetNodes")


def test_homogeneous_messages() -> None:
    status = only_status(_pool([32, 32, 16]))
    assert message(status, "Homogeneous") == (
        "vpc.amazonaws.com/efa differs across 3 nodes (32 on 2 nodes, 16 on 1 node); not 32 on n3"
    )
    status = only_status(_pool([32, 0, 0]))
    assert message(status, "Homogeneous") == (
        "vpc.amazonaws.com/efa differs across 3 nodes (32 on 1 node, 0 on 2 nodes); 0 on n2, n3"
    )
    assert message(only_status(_pool([32, 32])), "Homogeneous") == "all 2 nodes advertise vpc.amazonaws.com/efa: 32"


# --- MatchesInstanceType -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        ([("p5.48xlarge", 32), ("p5.48xlarge", 32)], ("True", "MatchesInstanceMaximum")),
        ([("p4d.24xlarge", 4)], ("True", "MatchesInstanceMaximum")),
        ([("g6e.xlarge", 0)], ("True", "MatchesInstanceMaximum")),
        ([("p5.48xlarge", 32), ("m7i.large", 0)], ("True", "MatchesInstanceMaximum")),  # unknown types ignored
        ([("p5.48xlarge", 16)], ("False", "BelowInstanceMaximum")),
        ([("p5.48xlarge", 32), ("p5.48xlarge", 0)], ("False", "BelowInstanceMaximum")),
        ([("g6e.48xlarge", 8)], ("False", "AboveInstanceMaximum")),
        ([("p5.4xlarge", 2)], ("False", "AboveInstanceMaximum")),
        ([("g6e.xlarge", 1)], ("False", "AboveInstanceMaximum")),
        # Both above and below: above is reported (it contradicts the table, below may be on purpose).
        ([("p5.48xlarge", 16), ("p4d.24xlarge", 8)], ("False", "AboveInstanceMaximum")),
        ([("m7i.large", 32)], ("Unknown", "UnknownInstanceType")),  # not in the catalog
        ([(None, 32)], ("Unknown", "UnknownInstanceType")),
    ],
)
def test_matches_instance_type(nodes: list[tuple[str | None, int]], expected: tuple[str, str]) -> None:
    bodies = [node(f"n{index}", instance_type=kind, efa=count) for index, (kind, count) in enumerate(nodes)]
    assert reason(only_status(bodies), "MatchesInstanceType") == expected


def test_matches_instance_type_never_affects_ready() -> None:
    status = only_status(healthy_pool(count=16))  # p5.48xlarge, maximum 32
    assert reason(status, "MatchesInstanceType") == ("False", "BelowInstanceMaximum")
    assert message(status, "MatchesInstanceType") == (
        "2 of 2 nodes of known types advertise fewer than their instance type's maximum: n1 (16 < 32), n2 (16 < 32)"
    )
    assert reason(status, "Ready") == ("True", "UniformCapability")


def test_matches_instance_type_unknown_when_only_cordoned_nodes_are_known() -> None:
    bodies = [node("n1", instance_type="m7i.large"), node("n2", instance_type="p5.48xlarge", cordoned=True)]
    assert reason(only_status(bodies), "MatchesInstanceType") == ("Unknown", "UnknownInstanceType")


# --- Ready -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bodies", "expected"),
    [
        pytest.param(healthy_pool(), ("True", "UniformCapability"), id="uniform"),
        pytest.param(healthy_pool(count=1, nodes=1), ("True", "UniformCapability"), id="single-node-count-1"),
        pytest.param([node("n1", cordoned=True)], ("False", "NoSchedulableNodes"), id="all-cordoned"),
        pytest.param(
            [node("n1", ready=False), node("n2", cordoned=True)], ("False", "NoSchedulableNodes"), id="unready"
        ),
        pytest.param(_pool([0, 0]), ("False", "NotAdvertised"), id="not-advertised"),
        pytest.param(
            # NotAdvertised comes before DevicePluginGap.
            _pool([0, 0], with_ds=False),
            ("False", "NotAdvertised"),
            id="not-advertised-before-gap",
        ),
        pytest.param(_pool([32, 0]), ("False", "PartialRollout"), id="partial-rollout"),
        pytest.param(
            # PartialRollout comes before MixedCounts (0, 16 and 32 present).
            _pool([32, 16, 0]),
            ("False", "PartialRollout"),
            id="partial-before-mixed",
        ),
        pytest.param(
            # PartialRollout comes before DevicePluginGap.
            _pool([32, 0], with_ds=False),
            ("False", "PartialRollout"),
            id="partial-before-gap",
        ),
        pytest.param(_pool([32, 16]), ("False", "MixedCounts"), id="mixed-counts"),
        pytest.param(_pool([32, 16], ready_pods=False), ("False", "MixedCounts"), id="mixed-before-gap"),
        pytest.param(_pool([32, 32], with_ds=False), ("False", "DevicePluginGap"), id="gap-not-installed"),
        pytest.param(_pool([32, 32], ready_pods=False), ("False", "DevicePluginGap"), id="gap-not-ready"),
        pytest.param([DS, node("n1"), node("n2"), pod("n1")], ("False", "DevicePluginGap"), id="gap-not-scheduled"),
    ],
)
def test_ready_first_reason_that_applies(bodies: Bodies, expected: tuple[str, str]) -> None:
    assert reason(only_status(bodies), "Ready") == expected


def test_ready_never_unknown_and_messages() -> None:
    status = only_status([node("n1", cordoned=True)])
    assert reason(status, "Ready") == ("False", "NoSchedulableNodes")
    assert (
        message(status, "Ready")
        == "every one of the 1 target nodes is left out of the gate set (1 cordoned, 0 not Ready)"
    )
    status = only_status(_pool([32, 32], ready_pods=False))
    assert message(status, "Ready") == (
        "all 2 nodes advertise vpc.amazonaws.com/efa: 32, but device-plugin pod not Ready on 2 of 2 nodes: n1, n2"
    )
    status = only_status(healthy_pool())
    assert message(status, "Ready") == (
        "all 2 nodes advertise vpc.amazonaws.com/efa: 32 with a Ready device plugin; "
        "a job may request up to 32 per node"
    )


def test_ready_reason_mirrors_homogeneous() -> None:
    status = only_status(_pool([32, 16]))
    assert message(status, "Ready") == message(status, "Homogeneous")


# --- Stalled ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        ([("p5.48xlarge", 32), ("p5.48xlarge", 32)], ("False", "NotStalled")),
        ([("m7i.large", 0)], ("False", "NotStalled")),
        ([(None, 32)], ("False", "NotStalled")),
        ([("p4d.24xlarge", 4), ("p4de.24xlarge", 4)], ("False", "NotStalled")),  # one isolation group
        ([("g6e.xlarge", 0), ("m7i.large", 0)], ("False", "NotStalled")),  # not every type known 0
        ([("g6e.xlarge", 0), (None, 0)], ("False", "NotStalled")),
        ([("g6e.xlarge", 0), ("g6e.4xlarge", 0)], ("True", "InstanceTypeUnsupported")),
        ([("g5.2xlarge", 0), ("g6.xlarge", 0), ("g7e.4xlarge", 0)], ("True", "InstanceTypeUnsupported")),
        ([("p5.48xlarge", 32), ("p5en.48xlarge", 16)], ("True", "HeterogeneousInstanceTypes")),
        ([("g6e.24xlarge", 2), ("g6e.48xlarge", 4)], ("True", "HeterogeneousInstanceTypes")),
        ([("g6e.xlarge", 0), ("g6e.8xlarge", 1)], ("True", "HeterogeneousInstanceTypes")),
        ([("g6e.8xlarge", 1), ("g6e.16xlarge", 1), ("m7i.large", 0)], ("False", "NotStalled")),  # equal maxima
        # p4d/p4de with anything else: EFA traffic cannot cross, even at equal maxima.
        ([("p4d.24xlarge", 4), ("g7e.48xlarge", 4)], ("True", "HeterogeneousInstanceTypes")),
        ([("p4d.24xlarge", 4), ("m7i.48xlarge", 4)], ("True", "HeterogeneousInstanceTypes")),
        # Different maxima at one count: Ready, so not Stalled (review 64-observe F2); only
        # MatchesInstanceType says p5.48xlarge is below its maximum.
        ([("p5.48xlarge", 16), ("p5en.48xlarge", 16)], ("False", "NotStalled")),
        ([("g6e.24xlarge", 2), ("g6e.48xlarge", 2)], ("False", "NotStalled")),
        # A node at 0 whose type may advertise more has no count yet (its plugin starts): a
        # partial rollout, not Stalled (review 64-fixc F3). A type of maximum 0 has settled at 0.
        ([("p5.48xlarge", 16), ("p5en.48xlarge", 16), ("p5.48xlarge", 0)], ("False", "NotStalled")),
        ([("p5.48xlarge", 16), ("p5en.48xlarge", 0)], ("False", "NotStalled")),
        ([("p5.48xlarge", 32), ("p5en.48xlarge", 16), ("p5en.48xlarge", 0)], ("True", "HeterogeneousInstanceTypes")),
        # ... but a node at 0 whose type's maximum is below a count already advertised can never
        # reach it: the stall is certain, whether or not its plugin starts (review 64e F2).
        ([("p5.48xlarge", 32), ("p5en.48xlarge", 0)], ("True", "HeterogeneousInstanceTypes")),
        ([("p5.48xlarge", 32), ("p5.48xlarge", 32), ("p5en.48xlarge", 0)], ("True", "HeterogeneousInstanceTypes")),
        ([("p5en.48xlarge", 16), ("p5en.48xlarge", 16), ("p5.48xlarge", 0)], ("False", "NotStalled")),
    ],
)
def test_stalled(nodes: list[tuple[str | None, int]], expected: tuple[str, str]) -> None:
    bodies = [node(f"n{index}", instance_type=kind, efa=count) for index, (kind, count) in enumerate(nodes)]
    assert reason(only_status(bodies), "Stalled") == expected


def test_a_ready_pool_of_different_maxima_is_not_stalled() -> None:
    # p5.48xlarge (32) and p5en.48xlarge (16) both at 16: Ready with Stalled=True made kstatus
    # and Flux say Failed and Argo CD Degraded while kubectl wait and the ready label said go
    # (review 64-observe F2).
    nodes = [node("n1", instance_type="p5.48xlarge", efa=16), node("n2", instance_type="p5en.48xlarge", efa=16)]
    status = only_status([DS, *nodes, *plugin_pods(["n1", "n2"])])
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert reason(status, "Stalled") == ("False", "NotStalled")
    assert reason(status, "MatchesInstanceType") == ("False", "BelowInstanceMaximum")


def test_a_ready_pool_of_different_maxima_scaling_up_is_a_partial_rollout_not_stalled() -> None:
    # The pool above gains a node whose plugin has not started (it advertises 0): a minute of
    # Stalled=True at every scale-up made kstatus say Failed and Argo CD Degraded (review 64-fixc F3).
    nodes = [
        node("n1", instance_type="p5.48xlarge", efa=16),
        node("n2", instance_type="p5en.48xlarge", efa=16),
        node("n3", instance_type="p5.48xlarge", efa=0),
    ]
    status = only_status([DS, *nodes, *plugin_pods(["n1", "n2"])])
    assert reason(status, "Ready") == ("False", "PartialRollout")
    assert reason(status, "Stalled") == ("False", "NotStalled")


def test_a_node_at_zero_whose_type_cannot_reach_the_settled_count_stalls_the_pool() -> None:
    # p5en.48xlarge (maximum 16) at 0, its plugin never started, beside p5.48xlarge at 32: it can
    # never advertise 32, so waiting cannot make the pool Ready; InProgress hid that from every
    # GitOps gate until its timeout (review 64e F2).
    nodes = [node("n1", instance_type="p5.48xlarge", efa=32), node("n2", instance_type="p5en.48xlarge", efa=0)]
    status = only_status([DS, *nodes, *plugin_pods(["n1"])])
    assert reason(status, "Stalled") == ("True", "HeterogeneousInstanceTypes")


def test_stalled_no_target_nodes_is_not_stalled() -> None:
    status = only_status([node("n1", cordoned=True, instance_type="g6e.xlarge", efa=0)])
    assert reason(status, "Stalled") == ("False", "NotStalled")


def test_stalled_messages() -> None:
    status = only_status([node("n1", instance_type="g6e.xlarge", efa=0)])
    assert message(status, "Stalled").startswith("every node's instance type supports no vpc.amazonaws.com/efa")
    assert "g6e.xlarge" in message(status, "Stalled")
    status = only_status([node("n1", instance_type="p5.48xlarge"), node("n2", instance_type="p5en.48xlarge", efa=16)])
    assert message(status, "Stalled") == (
        "the pool mixes instance types with different vpc.amazonaws.com/efa maxima: "
        "p5.48xlarge (32), p5en.48xlarge (16)"
    )


def test_p4d_mixed_with_other_type_is_never_uniform() -> None:
    bodies = [
        DS,
        node("n1", instance_type="p4d.24xlarge", efa=4),
        node("n2", instance_type="g7e.48xlarge", efa=4),
        *plugin_pods(["n1", "n2"]),
    ]
    status = only_status(bodies)
    assert status.counts[0].count == 4 and status.counts[0].nodes == 2
    assert status.uniform_count is None
    assert reason(status, "Homogeneous") == ("False", "MixedCounts")
    assert "g7e.48xlarge" in message(status, "Homogeneous") and "p4d.24xlarge" in message(status, "Homogeneous")
    assert reason(status, "Ready") == ("False", "MixedCounts")
    assert reason(status, "Stalled") == ("True", "HeterogeneousInstanceTypes")
    assert status.recommendation is None


def test_p4d_with_p4de_is_uniform() -> None:
    bodies = [
        DS,
        node("n1", instance_type="p4d.24xlarge", efa=4),
        node("n2", instance_type="p4de.24xlarge", efa=4),
        *plugin_pods(["n1", "n2"]),
    ]
    status = only_status(bodies)
    assert status.uniform_count == 4
    assert reason(status, "Ready") == ("True", "UniformCapability")


def test_isolation_ignores_cordoned_nodes() -> None:
    bodies = [
        DS,
        node("n1", instance_type="p4d.24xlarge", efa=4),
        node("n2", instance_type="g7e.48xlarge", efa=4, cordoned=True),
        pod("n1"),
    ]
    status = only_status(bodies)
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert status.cordoned_nodes == 1


def test_conditions_in_contract_order() -> None:
    status = only_status(healthy_pool())
    # Launchable is a NodePool pool's only.
    assert [condition.type for condition in status.conditions] == [
        kind.value for kind in CONDITION_ORDER if kind != "Launchable"
    ]
    assert [condition.type for condition in status.conditions] == [
        "DevicePluginReady",
        "Advertised",
        "Homogeneous",
        "MatchesInstanceType",
        "Ready",
        "Stalled",
    ]
    for condition in status.conditions:
        assert condition.status in ("True", "False", "Unknown")
        assert condition.reason.isalnum() and condition.reason[0].isupper()
        assert condition.message


# --- target nodes ------------------------------------------------------------------------------------

CPU_TYPE = "m7i.4xlarge"  # no known EFA maximum: only rules (a)-(c) can make it a target
AKS_TYPE = "Standard_ND96isr_H100_v5"


@pytest.mark.parametrize(
    ("bodies", "targets"),
    [
        pytest.param([node("n1", efa=32, gpu=None)], 1, id="a-allocatable"),
        pytest.param([node("n1", efa=0, efa_capacity=32, gpu=None)], 1, id="a-capacity-only"),
        pytest.param([node("n1", efa=None, efa_capacity=4, gpu=None)], 1, id="a-capacity-no-allocatable"),
        pytest.param([node("n1", efa=0, gpu=None, instance_type=CPU_TYPE)], 0, id="a-zero-is-not-target"),
        pytest.param([node("n1", efa="1e40", gpu=None, instance_type=CPU_TYPE)], 1, id="a-unusable-quantity"),
        pytest.param([DS, node("n1", efa=None, gpu=None), pod("n1", ready=False)], 1, id="b-plugin-pod-bound"),
        pytest.param(
            [DS, node("n1", efa=None, gpu=None, instance_type=CPU_TYPE), pod(None, ready=False)],
            0,
            id="b-plugin-pod-unbound",
        ),
        pytest.param(
            [node("n1", efa=None, gpu=None, instance_type=CPU_TYPE), pod("n1")], 0, id="b-pod-of-undiscovered-daemonset"
        ),
        pytest.param(
            [DS, node("n1", efa=None, gpu=None, instance_type=CPU_TYPE), pod("n1", daemon_set_name="aws-node")],
            0,
            id="b-pod-of-other-ds",
        ),
        pytest.param([node("n1", efa=None, gpu=8)], 1, id="c-gpu-allocatable"),
        pytest.param([node("n1", efa=None, gpu=0, instance_type=CPU_TYPE)], 0, id="c-gpu-zero"),
        pytest.param([node("n1", efa=None, gpu=None, gpu_present_label="true")], 1, id="c-gpu-label"),
        pytest.param(
            [node("n1", efa=None, gpu=None, gpu_present_label="false", instance_type=CPU_TYPE)],
            0,
            id="c-gpu-label-false",
        ),
        pytest.param(
            [node("n1", efa=None, gpu=None, instance_type="inf2.xlarge", resources={"aws.amazon.com/neuron": "1"})],
            1,
            id="c-neuron-device",
        ),
        pytest.param(
            [node("n1", efa=None, gpu=None, instance_type=CPU_TYPE, resources={"aws.amazon.com/neuroncore": "2"})],
            1,
            id="c-neuron-core",
        ),
        pytest.param([node("n1", efa=None, gpu=None, instance_type="trn1.32xlarge")], 1, id="d-known-maximum"),
        pytest.param([node("n1", efa=None, gpu=None, instance_type="ml.p5.48xlarge")], 1, id="d-hyperpod-prefix"),
        pytest.param([node("n1", efa=None, gpu=None, instance_type="c5n.18xlarge")], 1, id="d-cpu-type-with-efa"),
        pytest.param([node("n1", efa=None, gpu=None, instance_type="g6.2xlarge")], 0, id="d-maximum-zero"),
        pytest.param([node("n1", efa=None, gpu=None, instance_type=CPU_TYPE)], 0, id="cpu-node"),
        pytest.param([node("n1", efa=None, gpu=None, instance_type=None)], 0, id="no-instance-type"),
    ],
)
def test_target_node_rules(bodies: Bodies, targets: int) -> None:
    evaluation = evaluate_bodies(bodies)
    total = sum(cap.status.nodes + cap.status.cordoned_nodes for cap in evaluation.capabilities)
    assert total == targets
    assert len(evaluation.capabilities) == targets  # one pool, published only with a target node


def test_gpu_target_rules_follow_profile_settings() -> None:
    config = build_config({"fabrics": [{"name": "efa", "targetNodes": {"gpuResources": [], "gpuLabels": []}}]})
    bodies = [node("n1", efa=None, gpu=8, gpu_present_label="true", instance_type=CPU_TYPE)]
    assert evaluate_bodies(bodies, config).capabilities == ()
    config = build_config(
        {"fabrics": [{"name": "efa", "targetNodes": {"gpuResources": ["amd.com/gpu"], "gpuLabels": []}}]}
    )
    amd = node("n1", efa=None, gpu=None, instance_type=CPU_TYPE)
    amd["status"]["allocatable"]["amd.com/gpu"] = "8"
    assert len(evaluate_bodies([amd], config).capabilities) == 1


def test_non_target_nodes_of_the_pool_are_not_counted() -> None:
    bodies = [*healthy_pool(), node("cpu-1", efa=None, gpu=None, instance_type=CPU_TYPE)]
    status = only_status(bodies)
    assert status.nodes == 2
    assert reason(status, "Ready") == ("True", "UniformCapability")


# --- gate set, counts, uniformCount ---------------------------------------------------------------------


def test_cordoned_nodes_are_reported_not_judged() -> None:
    bodies = [*healthy_pool(), node("n3", efa=0, cordoned=True), node("n4", efa=16, cordoned=True)]
    status = only_status(bodies)
    assert (status.nodes, status.cordoned_nodes, status.advertising_nodes) == (2, 2, 2)
    assert status.uniform_count == 32
    assert [(bucket.count, bucket.nodes) for bucket in status.counts] == [(32, 2)]
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert status.gap.nodes == []


def test_counts_distribution_count_descending() -> None:
    status = only_status(_pool([16, 32, 0, 32, 4, None]))
    assert [(bucket.count, bucket.nodes) for bucket in status.counts] == [(32, 2), (16, 1), (4, 1), (0, 2)]
    assert status.advertising_nodes == 4
    assert status.nodes == 6


@pytest.mark.parametrize(
    ("counts", "uniform"),
    [
        ([32, 32, 32], 32),
        ([1], 1),
        ([0, 0], 0),  # 0 allowed: uniform, but nothing to request
        ([None, 0], 0),
        ([32, 16], None),
        ([32, 0], None),
    ],
)
def test_uniform_count_fails_closed(counts: list[int | None], uniform: int | None) -> None:
    status = only_status(_pool(counts, instance_type=None))
    assert status.uniform_count == uniform
    serialized = status.to_json()
    assert ("uniformCount" in serialized) is (uniform is not None)


def test_uniform_count_absent_with_no_gate_nodes() -> None:
    status = only_status([node("n1", cordoned=True), node("n2", cordoned=True)])
    assert status.nodes == 0
    assert status.uniform_count is None
    assert "uniformCount" not in status.to_json()
    assert status.counts == []


# --- gap -----------------------------------------------------------------------------------------------------


def test_gap_classes() -> None:
    bodies = [
        DS,
        node("ok", efa=32),
        node("ready-not-advertised", efa=0),
        node("unhealthy", efa=30, efa_capacity=32),
        node("no-plugin", efa=32),
        node("not-ready-plugin", efa=32),
        node("zero-no-plugin", efa=0),  # target through its GPU; in no gap class
        *plugin_pods(["ok", "ready-not-advertised", "unhealthy"]),
        pod("not-ready-plugin", ready=False),
    ]
    status = only_status(bodies)
    assert status.gap.plugin_ready_not_advertised == 1
    assert status.gap.unhealthy == 1
    assert status.gap.advertised_without_plugin == 2
    assert status.gap.nodes == ["no-plugin", "not-ready-plugin", "ready-not-advertised", "unhealthy"]
    assert status.gap.truncated is False
    assert status.device_plugin.ready_nodes == 3


def test_unhealthy_all_devices_gone() -> None:
    status = only_status([DS, node("n1", efa=0, efa_capacity=32), pod("n1")])
    assert status.gap.unhealthy == 1
    assert status.gap.plugin_ready_not_advertised == 1
    assert status.gap.nodes == ["n1"]


def test_gap_nodes_truncated_at_twenty() -> None:
    names = [f"node-{index:02d}" for index in range(25)]
    status = only_status([DS, *(node(name, efa=0) for name in names), *plugin_pods(names)])
    assert status.gap.plugin_ready_not_advertised == 25
    assert status.gap.nodes == sorted(names)[:20]
    assert status.gap.truncated is True


def test_gap_nodes_exactly_twenty_not_truncated() -> None:
    names = [f"node-{index:02d}" for index in range(20)]
    status = only_status([DS, *(node(name, efa=0) for name in names), *plugin_pods(names)])
    assert len(status.gap.nodes) == 20
    assert status.gap.truncated is False


def test_cordoned_nodes_are_not_in_gap() -> None:
    status = only_status([*healthy_pool(), node("n9", efa=0, cordoned=True), pod("n9")])
    assert status.gap.plugin_ready_not_advertised == 0
    assert status.gap.nodes == []
    assert status.device_plugin.ready_nodes == 2


# --- recommendation ---------------------------------------------------------------------------------


def test_recommendation_only_when_ready() -> None:
    status = only_status(healthy_pool(count=16))
    assert status.recommendation is not None
    serialized = status.to_json()["recommendation"]
    assert serialized["resourcesPerNode"] == {EFA: "16"}
    assert serialized["env"][0] == {"name": "FI_PROVIDER", "value": "efa"}
    assert [env["name"] for env in serialized["env"]] == ["FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_SOCKET_IFNAME"]


@pytest.mark.parametrize(
    "bodies",
    [
        pytest.param(_pool([32, 32], with_ds=False), id="gap"),
        pytest.param(_pool([32, 16]), id="mixed"),
        pytest.param(_pool([0, 0]), id="not-advertised"),
        pytest.param([node("n1", cordoned=True)], id="no-target-nodes"),
    ],
)
def test_no_recommendation_unless_ready(bodies: Bodies) -> None:
    status = only_status(bodies)
    assert status.recommendation is None
    assert "recommendation" not in status.to_json()


# --- pools, unpooled nodes, object identity -------------------------------------------------------------


def test_unpooled_nodes_counted_not_published() -> None:
    bodies = [
        *healthy_pool(),
        node("loose-1", pool=None, instance_type=None),
        node("loose-2", pool=None, instance_type=None, efa=None, gpu=None),  # not a target: not counted
        node("loose-3", pool=None, instance_type=None, efa=0, gpu=None, gpu_present_label="true"),
    ]
    evaluation = evaluate_bodies(bodies)
    assert [cap.name for cap in evaluation.capabilities] == ["efa-p5"]
    assert evaluation.unpooled_nodes == 2


def test_instance_type_is_last_resort_pool() -> None:
    evaluation = evaluate_bodies([node("n1", pool=None, instance_type="p5.48xlarge")])
    (only,) = evaluation.capabilities
    assert (only.pool.key, only.pool.value) == ("node.kubernetes.io/instance-type", "p5.48xlarge")
    assert only.name.startswith("efa-p5-48xlarge-")
    assert evaluation.unpooled_nodes == 0


def test_pools_are_separate_objects_sorted_by_name() -> None:
    bodies = [
        *healthy_pool(pool="train", prefix="t"),
        node("i1", pool="infer", efa=0),
        node("k1", pool="spot", pool_key=KARPENTER, efa=16),
    ]
    evaluation = evaluate_bodies(bodies)
    names = [cap.name for cap in evaluation.capabilities]
    assert names == sorted(names)
    assert names[:2] == ["efa-infer", "efa-spot"]  # readable for every pool key (round 3)
    assert names[2] == "efa-train"
    assert reason(capability(evaluation, "efa-train").status, "Ready") == ("True", "UniformCapability")
    assert reason(capability(evaluation, "efa-infer").status, "Ready") == ("False", "NotAdvertised")


def test_object_shape() -> None:
    evaluation = evaluate_bodies(healthy_pool(pool="p5-training"))
    obj = capability(evaluation, "efa-p5-training").to_object()
    assert obj["apiVersion"] == "fabriccap.dev/v1alpha1"
    assert obj["kind"] == "FabricCapability"
    assert obj["metadata"]["labels"] == {
        "fabriccap.dev/fabric": "efa",
        "fabriccap.dev/pool": "p5-training",
        "app.kubernetes.io/managed-by": "fabriccap",
        "fabriccap.dev/ready": "true",  # what the admission policy selects its params by
    }
    assert obj["metadata"]["annotations"] == {
        "fabriccap.dev/pool-key": "eks.amazonaws.com/nodegroup",
        "fabriccap.dev/pool-value": "p5-training",
    }
    status = obj["status"]
    assert status["fabric"] == "efa"
    assert status["resourceName"] == EFA
    assert status["pool"] == {"key": "eks.amazonaws.com/nodegroup", "value": "p5-training"}
    assert status["instanceTypes"] == [{"name": "p5.48xlarge", "nodes": 2, "maxCount": 32}]
    assert status["devicePlugin"] == {"daemonSets": ["kube-system/aws-efa-k8s-device-plugin"], "readyNodes": 2}
    assert status["gap"] == {
        "pluginReadyNotAdvertised": 0,
        "unhealthy": 0,
        "advertisedWithoutPlugin": 0,
        "launchedWithoutFabric": 0,
        "conflictingAdvertisers": 0,
        "nodes": [],
        "truncated": False,
    }
    assert (status["cordonedNodes"], status["unreadyNodes"]) == (0, 0)
    assert "launchable" not in status  # not a Karpenter NodePool's pool


def test_instance_types_without_known_maximum_omit_max_count() -> None:
    status = only_status([node("n1", instance_type="m7i.large"), node("n2", instance_type="p5.48xlarge")])
    assert status.to_json()["instanceTypes"] == [
        {"name": "m7i.large", "nodes": 1},
        {"name": "p5.48xlarge", "nodes": 1, "maxCount": 32},
    ]


def test_pool_label_only_when_valid_label_value() -> None:
    long_value = "x" * 70
    evaluation = evaluate_bodies([node("n1", pool=long_value)])
    (only,) = evaluation.capabilities
    assert "fabriccap.dev/pool" not in only.labels()
    assert only.annotations()["fabriccap.dev/pool-value"] == long_value
    assert len(only.name) <= 63


# --- device-plugin discovery ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ds", "found"),
    [
        pytest.param(daemon_set(), ["kube-system/aws-efa-k8s-device-plugin"], id="chart-name-and-label"),
        pytest.param(daemon_set("efa-custom"), ["kube-system/efa-custom"], id="by-selector"),
        pytest.param(
            daemon_set("aws-efa-k8s-device-plugin-daemonset", labels={}),
            ["kube-system/aws-efa-k8s-device-plugin-daemonset"],
            id="by-name",
        ),
        pytest.param(daemon_set("efa-custom", labels={}), [], id="neither-label-nor-name"),
        pytest.param(
            daemon_set("efa-custom", labels={"app.kubernetes.io/name": "something-else"}), [], id="other-label"
        ),
        pytest.param(daemon_set(namespace="default"), [], id="wrong-namespace"),
    ],
)
def test_daemon_set_discovery(ds: dict[str, Any], found: list[str]) -> None:
    ds_name = ds["metadata"]["name"]
    namespace = ds["metadata"]["namespace"]
    bodies = [ds, node("n1"), pod("n1", daemon_set_name=ds_name, namespace=namespace)]
    status = only_status(bodies)
    assert status.device_plugin.daemon_sets == found
    if found:
        assert reason(status, "DevicePluginReady") == ("True", "PluginReadyOnAllNodes")
        assert reason(status, "Ready") == ("True", "UniformCapability")
    else:
        assert reason(status, "DevicePluginReady") == ("False", "PluginNotInstalled")
        assert reason(status, "Ready") == ("False", "DevicePluginGap")


def test_discovery_by_configured_namespace_and_names() -> None:
    config = build_config(
        {"fabrics": [{"name": "efa", "devicePlugin": {"namespace": "efa", "daemonSetNames": ["efa-dp"]}}]}
    )
    bodies = [
        daemon_set("efa-dp", namespace="efa", labels={}),
        daemon_set(),  # the chart's, but in kube-system: not this profile's namespace
        node("n1"),
        node("n2"),
        pod("n1", daemon_set_name="efa-dp", namespace="efa"),
        pod("n2", daemon_set_name="aws-efa-k8s-device-plugin", namespace="kube-system"),
    ]
    status = only_status(bodies, config)
    assert status.device_plugin.daemon_sets == ["efa/efa-dp"]
    assert status.device_plugin.ready_nodes == 1
    assert reason(status, "DevicePluginReady") == ("False", "PluginNotScheduled")


def test_two_daemon_sets_share_the_work() -> None:
    bodies = [
        daemon_set(),
        daemon_set("aws-efa-k8s-device-plugin-daemonset", labels={}),
        node("n1"),
        node("n2"),
        pod("n1"),
        pod("n2", daemon_set_name="aws-efa-k8s-device-plugin-daemonset"),
    ]
    status = only_status(bodies)
    assert status.device_plugin.daemon_sets == [
        "kube-system/aws-efa-k8s-device-plugin",
        "kube-system/aws-efa-k8s-device-plugin-daemonset",
    ]
    assert reason(status, "Ready") == ("True", "UniformCapability")


def test_ready_pod_wins_over_a_terminating_one_on_the_same_node() -> None:
    bodies = [DS, node("n1"), pod("n1", name="old", deleting=True), pod("n1", name="new")]
    status = only_status(bodies)
    assert reason(status, "DevicePluginReady") == ("True", "PluginReadyOnAllNodes")


# --- fabrics -------------------------------------------------------------------------------------------------


def test_disabled_fabric_publishes_nothing() -> None:
    rdma_node = node(
        "a1", pool="gpu", pool_key="kubernetes.azure.com/agentpool", efa=None, gpu=None, instance_type=AKS_TYPE
    )
    rdma_node["status"]["allocatable"]["rdma/hca_shared_devices_a"] = "1"
    assert evaluate_bodies([rdma_node]).capabilities == ()


def test_aks_rdma_profile_when_enabled() -> None:
    config = build_config({"fabrics": [{"name": "efa"}, {"name": "aks-rdma"}]})
    azure = "azure:///subscriptions/0000/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/gpu/0"
    rdma_node = node("a1", pool="gpu", pool_key="kubernetes.azure.com/agentpool", efa=None, gpu=8, provider_id=azure)
    rdma_node["status"]["allocatable"]["rdma/hca_shared_devices_a"] = "1"
    rdma_node["status"]["capacity"]["rdma/hca_shared_devices_a"] = "1"
    bodies = [
        rdma_node,
        daemon_set("rdma-shared-dp-ds", namespace="network-operator", labels={"app": "rdma-shared-dp"}),
        pod("a1", daemon_set_name="rdma-shared-dp-ds", namespace="network-operator"),
    ]
    evaluation = evaluate_bodies(bodies, config)
    # An Azure GPU node is no EFA target (providerIDPrefixes: aws://): only the RDMA pool exists.
    (rdma,) = evaluation.capabilities
    assert rdma.name.startswith("aks-rdma-gpu")
    assert rdma.status.resource_name == "rdma/hca_shared_devices_a"
    assert reason(rdma.status, "Ready") == ("True", "UniformCapability")
    # Without a providerID (a bare kubelet) the GPU node is judged by the target rules alone:
    # a target of both fabrics (rule c).
    del rdma_node["spec"]["providerID"]
    evaluation = evaluate_bodies(bodies, config)
    rdma, efa = evaluation.capabilities
    assert (rdma.fabric, efa.fabric) == ("aks-rdma", "efa")
    assert reason(efa.status, "Ready") == ("False", "NotAdvertised")


def test_gpu_nodes_of_another_cloud_are_no_efa_pool() -> None:
    """A GKE cluster's GPU pools were NotAdvertised EFA pools: every accelerator node was a target."""
    gke = "gce://my-project/us-central1-a/gke-gpu-pool-1234"
    bodies = [node("g1", pool="gpu", pool_key="cloud.google.com/gke-nodepool", efa=None, provider_id=gke)]
    assert evaluate_bodies(bodies).capabilities == ()


# --- sources ---------------------------------------------------------------------------------------------


def test_every_source_is_one_row() -> None:
    """What the evaluation reads, finds and says about a source is its row: a source without
    one could not be read, and a row keyed by the wrong source would speak for another."""
    assert list(SOURCES) == list(Source)
    assert all(row.source is source for source, row in SOURCES.items())
    assert len({row.provider for row in SOURCES.values()}) == len(SOURCES)
