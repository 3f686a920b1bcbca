"""Elastic pools (SPEC "Elastic pools", round 3): Karpenter NodePools with and without nodes, nodes
launched without the fabric on purpose, unready nodes, platform-managed nodes, HyperPod instance
groups, and counts above an instance type's maximum."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.core import evaluate as evaluation_module
from fabriccap.core.config import Config
from fabriccap.core.evaluate import Evaluation, EvaluationMemo, evaluate
from fabriccap.core.explain import explain_capability
from fabriccap.core.facts import FactsExtractor, Pool
from fabriccap.core.index import MAX_NAMED_RULES, NODE_FACTS
from fabriccap.core.karpenter_facts import node_pool_facts
from fabriccap.core.launchable import judge_node_pool
from fabriccap_devtools.world import (
    daemon_set,
    device_taint_rule,
    dranet_daemon_set,
    ec2_node_class,
    efa_device_class,
    karpenter_node,
    node,
    node_claim,
    node_pool,
    plugin_pods,
    trainjob_pods,
)
from support.builders import capability, evaluate_bodies, facts_of, healthy_pool, message, only_status, reason
from support.configs import EFA_CATALOG, default_config

Bodies = list[dict[str, Any]]
TYPE = "node.kubernetes.io/instance-type"
P5 = [{"key": TYPE, "operator": "In", "values": ["p5.48xlarge", "p5e.48xlarge"]}]
P5_LABELS = dict(EFA_CATALOG.get("p5.48xlarge").labels)  # type: ignore[union-attr]


def _gpu_pool(*extra: dict[str, Any], requirements: list[dict[str, Any]] | None = None) -> Bodies:
    return [node_pool("gpu", P5 if requirements is None else requirements), ec2_node_class(), *extra]


def test_an_empty_nodepool_is_a_pool_ready_from_the_catalog() -> None:
    evaluation = evaluate_bodies([daemon_set(), *_gpu_pool()])
    status = capability(evaluation, "efa-gpu").status
    assert (status.pool.key, status.pool.value, status.nodes) == ("karpenter.sh/nodepool", "gpu", 0)
    assert reason(status, "Launchable") == ("True", "UniformLaunchableCount")
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert message(status, "Ready") == (
        "no nodes now; every type NodePool gpu launches attaches 32 when a pod requests it"
    )
    assert status.uniform_count is None  # the count of current nodes: there are none
    assert status.to_json()["launchable"] == {
        "nodePool": "gpu",
        "instanceTypes": [{"name": "p5.48xlarge", "maxCount": 32}, {"name": "p5e.48xlarge", "maxCount": 32}],
        "truncated": False,
        "counts": [{"count": 32, "instanceTypes": 2}],
    }
    assert status.recommendation is not None
    assert status.recommendation.resources_per_node == {"vpc.amazonaws.com/efa": "32"}
    assert reason(status, "Stalled") == ("False", "NotStalled")
    assert capability(evaluation, "efa-gpu").labels()["fabriccap.dev/ready"] == "true"


def test_an_empty_nodepool_without_a_provider_or_with_mixed_types() -> None:
    status = only_status(_gpu_pool())
    assert reason(status, "DevicePluginReady") == ("False", "PluginNotInstalled")
    assert reason(status, "Ready") == ("False", "DevicePluginGap")
    assert status.recommendation is None
    family = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5"]}]
    status = only_status([daemon_set(), *_gpu_pool(requirements=family)])
    assert reason(status, "Launchable") == ("False", "MixedLaunchableCounts")
    assert reason(status, "Ready") == ("False", "NoTargetNodes")
    assert message(status, "Ready").startswith("no nodes now, and NodePool gpu may launch 2 accelerator types")


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "karpenter"


def test_an_empty_trainium_nodepool_whose_class_pins_interfaces_is_ready() -> None:
    """Every node of a class pinning 8 efa-only interfaces gets 8: trn2.48xlarge, whose network
    cards the catalog lacks, cannot change that (Ready before its cards were judged, and after)."""
    requirements = [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["trn1", "trn1n", "trn2"]},
        {"key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": ["32xlarge", "48xlarge"]},
    ]
    status = only_status([daemon_set(), node_pool("trn", requirements), ec2_node_class(efa_only=8)])
    assert reason(status, "Launchable") == ("True", "UniformLaunchableCount")
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert status.recommendation is not None
    assert status.recommendation.resources_per_node == {"vpc.amazonaws.com/efa": "8"}


def _fixture_taints(file: str) -> list[dict[str, str]]:
    """spec.template.spec.taints of a real NodePool (tests/fixtures/karpenter/, each with its source)."""
    taints: list[dict[str, str]] = yaml.safe_load((FIXTURES / file).read_text())["spec"]["template"]["spec"]["taints"]
    return taints


GPU_TAINTED = _fixture_taints("karpenter-docs-scheduling-gpu.yaml")  # nvidia.com/gpu=true:NoSchedule


def test_an_empty_nodepool_whose_taint_the_plugin_does_not_tolerate_is_not_ready() -> None:
    """The Karpenter docs' GPU NodePool taint, and the eks-charts EFA chart with its default
    values (it tolerates CriticalAddonsOnly alone): no plugin pod would run on a node it launches,
    which would never advertise EFA, so a job requesting it would stay Pending. Not Ready, no
    recommendation, not labelled ready for admission."""
    evaluation = evaluate_bodies([daemon_set(), node_pool("gpu", P5, taints=GPU_TAINTED), ec2_node_class()])
    published = capability(evaluation, "efa-gpu")
    status = published.status
    assert reason(status, "Launchable") == ("False", "ProviderExcludesInstanceTypes")
    assert reason(status, "Ready") == ("False", "NoTargetNodes")
    assert message(status, "Ready").startswith(
        "no nodes now, and NodePool gpu taints its nodes (spec.template.spec.taints) and no EFA provider DaemonSet"
        " tolerates them all (kube-system/aws-efa-k8s-device-plugin does not tolerate nvidia.com/gpu=true:NoSchedule)"
    )
    assert status.recommendation is None
    assert published.labels()["fabriccap.dev/ready"] == "false"
    # The toleration terraform-aws-eks-blueprints gives the chart (patterns/targeted-odcr/helm.tf).
    tolerant = daemon_set(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    status = only_status([tolerant, node_pool("gpu", P5, taints=GPU_TAINTED), ec2_node_class()])
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert status.recommendation is not None
    assert status.recommendation.resources_per_node == {"vpc.amazonaws.com/efa": "32"}


def test_the_dra_drivers_daemonset_must_tolerate_the_taint_too() -> None:
    """The aws-dranet chart's defaults tolerate CriticalAddonsOnly alone, as the EFA chart's do:
    its kubelet plugin would publish no ResourceSlice on the nodes the tainted NodePool launches."""
    status = only_status([dranet_daemon_set(), node_pool("gpu", P5, taints=GPU_TAINTED), ec2_node_class()])
    assert reason(status, "Launchable") == ("False", "ProviderExcludesInstanceTypes")
    assert "kube-system/aws-dranet does not tolerate nvidia.com/gpu=true:NoSchedule" in message(status, "Launchable")
    tolerant = dranet_daemon_set(tolerations=[{"operator": "Exists"}])
    status = only_status([tolerant, node_pool("gpu", P5, taints=GPU_TAINTED), ec2_node_class()])
    assert reason(status, "Ready") == ("True", "UniformCapability")


def test_a_node_of_a_tainted_nodepool_without_its_plugin_pod_is_judged_as_any_node() -> None:
    """With nodes, Ready is judged over them (SPEC): the node the plugin pod never reached is
    PluginNotScheduled, as for any node without its pod, whatever kept the pod off."""
    # EFA attached (requested), never advertised: the DaemonSet controller placed no plugin pod.
    bodies = [
        body
        for body in _launched(efa_requested=True)
        if not any(owner["kind"] == "DaemonSet" for owner in body["metadata"].get("ownerReferences", ()))
    ]
    bodies[1] = node_pool("gpu", P5, taints=GPU_TAINTED)
    status = only_status(bodies)
    assert status.nodes == 1
    assert reason(status, "DevicePluginReady") == ("False", "PluginNotScheduled")
    assert message(status, "DevicePluginReady") == (
        "no device-plugin or DRA-driver pod on 1 of 1 nodes: ip-10-0-7-21.us-west-2.compute.internal"
    )
    assert reason(status, "Ready") == ("False", "NotAdvertised")
    assert reason(status, "Launchable") == ("False", "ProviderExcludesInstanceTypes")


def test_a_cpu_nodepool_is_no_pool_of_the_fabric() -> None:
    cpu = [{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]}]
    assert evaluate_bodies([daemon_set(), *_gpu_pool(requirements=cpu)]).capabilities == ()


def _launched(efa_requested: bool, *, dra: bool = False, efa: int = 0, class_efa_only: int | None = None) -> Bodies:
    """One node Karpenter launched for NodePool gpu, with its NodeClaim, and a TrainJob's pod on it."""
    requests = {"vpc.amazonaws.com/efa": "32"} if efa_requested else {}
    claim = node_claim(
        "gpu-abcde",
        "gpu",
        node_name="ip-10-0-7-21.us-west-2.compute.internal",
        requests=requests,
        efa=efa,
        dra_drivers=("dra.net",) if dra else (),
    )
    launched = karpenter_node(
        "ip-10-0-7-21.us-west-2.compute.internal", "gpu", "gpu-abcde", efa=efa or None, catalog_labels=P5_LABELS
    )
    return [
        daemon_set(),
        node_pool("gpu", P5),
        ec2_node_class(efa_only=class_efa_only),
        claim,
        launched,
        *plugin_pods([launched["metadata"]["name"]]),
        *trainjob_pods("bert", [launched["metadata"]["name"]], efa=32 if efa_requested else None),
    ]


def test_a_node_launched_without_the_fabric_is_out_of_the_gate_set_and_its_job_is_named() -> None:
    evaluation: Evaluation = evaluate_bodies(_launched(efa_requested=False))
    status = capability(evaluation, "efa-gpu").status
    assert (status.nodes, status.gap.launched_without_fabric) == (0, 1)
    assert status.gap.nodes == ["ip-10-0-7-21.us-west-2.compute.internal"]
    # Not PartialRollout, not a plugin gap: the pool is judged from what it launches.
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert message(status, "Ready").startswith("no node in the gate set (1 launched without EFA); every type")
    workloads = status.workloads
    assert workloads is not None and (workloads.without_fabric.pods, workloads.without_fabric.workloads) == (1, 1)
    (event,) = evaluation.workload_events
    assert event.reason == "FabricNotRequested"
    assert event.message.startswith(
        "Karpenter launched ip-10-0-7-21.us-west-2.compute.internal without EFA because this job requested none;"
        " request vpc.amazonaws.com/efa: 32 (JobSet: "
    )


def _launched_static() -> Bodies:
    bodies = _launched(efa_requested=False)
    bodies[1] = _static(1)
    return bodies


def _launched_tainted() -> Bodies:
    bodies = _launched(efa_requested=False)
    bodies[1] = node_pool("gpu", P5, taints=GPU_TAINTED)
    return bodies


@pytest.mark.parametrize(
    ("bodies", "launchable", "cause"),
    [
        # A class that sets networkInterfaces without efa-only: types.go efas() gives every type 0.
        pytest.param(
            lambda: _launched(efa_requested=False, class_efa_only=0),
            "NoFabricInstanceTypes",
            "its EC2NodeClass default sets networkInterfaces without efa-only",
            id="class-pins-none",
        ),
        # A static NodePool is never provisioned for pods, so no request reaches it.
        pytest.param(
            lambda: _launched_static(),
            "NoFabricInstanceTypes",
            "it is a static NodePool (spec.replicas 1)",
            id="static",
        ),
        # No provider DaemonSet tolerates its taint: no node it launches would advertise EFA.
        pytest.param(
            lambda: _launched_tainted(),
            "ProviderExcludesInstanceTypes",
            "does not tolerate nvidia.com/gpu=true:NoSchedule",
            id="provider-runs-on-none",
        ),
    ],
)
def test_a_job_is_not_told_to_request_the_fabric_its_nodepool_would_not_attach(
    bodies: Callable[[], Bodies], launchable: str, cause: str
) -> None:
    """Asking would leave the job Pending: the Event names the NodePool's cause and the pool."""
    evaluation = evaluate_bodies(bodies())
    status = capability(evaluation, "efa-gpu").status
    assert reason(status, "Launchable") == ("False", launchable)
    (event,) = evaluation.workload_events
    assert event.reason == "FabricNotRequested"
    assert "because this job requested none" not in event.message
    assert event.message.startswith(
        "Karpenter launched ip-10-0-7-21.us-west-2.compute.internal without EFA, and requesting"
        f" vpc.amazonaws.com/efa would not change that: NodePool gpu offers it on no node (Launchable False"
        f" {launchable}: "
    )
    assert cause in event.message and "kubectl describe fcap efa-gpu" in event.message
    assert "it runs 1 pod on pool gpu" in event.message


def _launched_with(requirements: list[dict[str, Any]]) -> Bodies:
    bodies = _launched(efa_requested=False)
    bodies[1] = node_pool("gpu", requirements)
    return bodies


@pytest.mark.parametrize(
    ("bodies", "config", "launchable"),
    [
        # The v1.15.2 catalog lacks p6e-gb200.36xlarge: Launchable Unknown, yet the node is a
        # p5.48xlarge, which Karpenter gives EFA when a pod asks.
        pytest.param(
            lambda: _launched_with([{"key": TYPE, "operator": "In", "values": ["p5.48xlarge", "p6e-gb200.36xlarge"]}]),
            default_config(),
            ("Unknown", "InstanceTypesNotInCatalog"),
            id="unknown",
        ),
        # p5.48xlarge 32 and p5.4xlarge 1: asking gets EFA, only the count differs.
        pytest.param(
            lambda: _launched_with([{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5"]}]),
            default_config(),
            ("False", "MixedLaunchableCounts"),
            id="mixed",
        ),
        # Pools by instance type: no NodePool verdict at all.
        pytest.param(
            lambda: _launched(efa_requested=False),
            default_config().model_copy(update={"pool_labels": (TYPE,)}),
            None,
            id="no-verdict",
        ),
    ],
)
def test_a_job_is_told_to_request_the_fabric_unless_asking_is_known_not_to_help(
    bodies: Callable[[], Bodies], config: Config, launchable: tuple[str, str] | None
) -> None:
    """An Unknown verdict, a mixed one, or none does not know that asking would not help: the
    Event keeps the advice to request it, as it gave before it could refuse."""
    evaluation = evaluate_bodies(bodies(), config)
    if launchable is not None:
        assert reason(capability(evaluation, "efa-gpu").status, "Launchable") == launchable
    else:
        assert [published.status.pool.key for published in evaluation.capabilities] == [TYPE]
    (event,) = evaluation.workload_events
    assert event.reason == "FabricNotRequested"
    assert "would not change that" not in event.message
    assert event.message.startswith(
        "Karpenter launched ip-10-0-7-21.us-west-2.compute.internal without EFA because this job requested none;"
        " request vpc.amazonaws.com/efa ("
    )


def test_a_node_of_a_static_nodepool_is_said_to_be_launched_for_no_pod() -> None:
    config = default_config()
    facts = facts_of(_launched_static(), config)
    (capability,) = evaluate(config, facts).capabilities
    (row,) = explain_capability(config, facts, capability).nodes
    assert row.left_out == "launchedWithoutFabric"
    assert row.notes == [
        "Karpenter launched it without EFA: NodePool gpu is static (spec.replicas 1), whose nodes it launches"
        " for no pod, and its EC2NodeClass pins no efa-only interface"
    ]


@pytest.mark.parametrize(
    ("annotation", "requested"),
    [
        ("dra.net", True),
        ("gpu.nvidia.com, dra.net ", True),
        # Another driver of the profile: Karpenter v1.15.2 attaches EFA for dra.net alone.
        ("dra.networking.k8s.aws", False),
        # Not efadra.Requested's comma-separated form: no part is dra.net.
        ('["dra.net"]', False),
        ("dra.net gpu.nvidia.com", False),
    ],
)
def test_the_dra_drivers_annotation_is_read_as_karpenters_efadra_requested(annotation: str, requested: bool) -> None:
    """karpenter-provider-aws v1.15.2 pkg/providers/efadra/efadra.go Requested: the annotation split
    on ",", each part trimmed, equal to DriverName "dra.net"."""
    bodies = _launched(efa_requested=False, dra=True)
    (claim,) = [body for body in bodies if body["kind"] == "NodeClaim"]
    claim["metadata"]["annotations"]["karpenter.sh/requested-dra-drivers"] = annotation
    status = only_status(bodies)
    assert status.gap.launched_without_fabric == (0 if requested else 1)


def test_a_node_launched_with_the_fabric_is_judged() -> None:
    status = only_status(_launched(efa_requested=True, efa=32))
    assert (status.nodes, status.gap.launched_without_fabric, status.uniform_count) == (1, 0, 32)
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert message(status, "Ready").startswith("all 1 nodes advertise vpc.amazonaws.com/efa: 32")
    assert status.workloads is not None and status.workloads.requesting_fabric.pods == 1


@pytest.mark.parametrize(
    "bodies",
    [
        # The fabric was asked for (by a DRA claim of dra.net devices, v1.15.2 attaches EFA for it)...
        pytest.param(_launched(efa_requested=False, dra=True), id="dra-claim"),
        pytest.param(_launched(efa_requested=True), id="requested"),
        # ... or the EC2NodeClass pins efa-only interfaces: a node at 0 then is a real gap.
        pytest.param(_launched(efa_requested=False, class_efa_only=2), id="pinned"),
    ],
)
def test_a_node_that_should_have_the_fabric_is_judged_at_zero(bodies: Bodies) -> None:
    status = only_status(bodies)
    assert (status.nodes, status.gap.launched_without_fabric) == (1, 0)
    assert reason(status, "Ready") == ("False", "NotAdvertised")


def test_nodeclaim_problems_are_reported_never_fatal() -> None:
    bodies = _launched(efa_requested=False)
    second = node_claim("gpu-fghij", "gpu", node_name="ip-10-0-7-21.us-west-2.compute.internal")
    missing = node_claim("gpu-klmno", "gpu", node_name="ip-10-0-9-9.us-west-2.compute.internal")
    status = only_status([*bodies, second, missing])
    launchable = message(status, "Launchable")
    assert "node ip-10-0-7-21.us-west-2.compute.internal is named by 2 NodeClaims (gpu-abcde, gpu-fghij)" in launchable
    assert "NodeClaim gpu-klmno names node ip-10-0-9-9.us-west-2.compute.internal, which does not exist" in launchable
    # A node two NodeClaims name is judged like any node (it advertises 0 here).
    assert (status.nodes, status.gap.launched_without_fabric) == (1, 0)


def test_an_unready_node_leaves_the_gate_set() -> None:
    """A stopped kubelet's node keeps its stale allocatable and loses its plugin pod's readiness:
    judged, it made the pool DevicePluginGap."""
    bodies = [daemon_set(), node("n1", ready=False), *plugin_pods(["n1"], ready=False)]
    status = only_status(bodies)
    assert (status.nodes, status.unready_nodes) == (0, 1)
    assert reason(status, "Ready") == ("False", "NoSchedulableNodes")
    bodies = [*healthy_pool(nodes=2), node("n3", ready=False)]
    status = only_status(bodies)
    assert (status.nodes, status.unready_nodes) == (2, 1)
    assert reason(status, "Ready") == ("True", "UniformCapability")


def test_a_launchable_nodepool_stays_ready_while_its_first_node_registers() -> None:
    """Karpenter's node registers NotReady for a minute: an empty launchable NodePool must not
    flip to NoSchedulableNodes at every scale-up from zero. A pool Karpenter does not own does."""
    bodies = _launched(efa_requested=True, efa=32)
    registering = [
        {**body, "status": {**body["status"], "conditions": [{"type": "Ready", "status": "False"}]}}
        if body["kind"] == "Node"
        else body
        for body in bodies
    ]
    status = only_status(registering)
    assert (status.nodes, status.unready_nodes) == (0, 1)
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert message(status, "Ready").startswith("no node in the gate set (1 not Ready); every type NodePool gpu")
    assert status.recommendation is not None
    # The same node without its NodePool object: nothing launches, so nothing is schedulable.
    status = only_status([body for body in registering if body["kind"] not in ("NodePool", "NodeClaim")])
    assert reason(status, "Ready") == ("False", "NoSchedulableNodes")


AUTO = {"eks.amazonaws.com/compute-type": "auto"}


def test_platform_managed_nodes_need_no_daemonset() -> None:
    """EKS Auto Mode advertises EFA itself: no DaemonSet to find (eks-charts#1358)."""
    bodies = [node("a1", labels=AUTO), node("a2", labels=AUTO)]
    status = only_status(bodies)
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert message(status, "Ready").startswith("all 2 nodes advertise vpc.amazonaws.com/efa: 32 served by the platform")
    assert reason(status, "DevicePluginReady") == ("True", "PluginReadyOnAllNodes")
    assert [(entry.source, entry.nodes) for entry in status.sources] == [
        ("devicePlugin", 0),
        ("dra", 0),
        ("platform", 2),
    ]
    status = only_status([node("a1", labels=AUTO, efa=0)])
    assert reason(status, "Ready") == ("False", "NotAdvertised")
    assert "the platform manages them (eks.amazonaws.com/compute-type=auto)" in message(status, "Advertised")


def test_an_empty_auto_mode_nodepool_is_served_by_the_platform() -> None:
    pool = node_pool("neuron", P5, node_class="default", node_class_group="eks.amazonaws.com")
    status = only_status([pool])
    assert reason(status, "Ready") == ("True", "UniformCapability")


def test_an_empty_dra_nodepool_is_not_ready_while_a_rule_taints_its_drivers_every_device() -> None:
    """kube-scheduler's tracker applies a rule that names only the driver to every slice of it,
    those a node launched later publishes too (KEP-5055: "Driver name only ... maintenance on
    that driver across the cluster"): the recommended claim, which tolerates none, would get no
    device on any node the NodePool launches. A rule of one pool or device spares new nodes."""
    driver_wide = device_taint_rule("driver-wide")
    status = capability(evaluate_bodies([driver_wide, dranet_daemon_set(), *_gpu_pool()]), "efa-gpu").status
    assert reason(status, "Ready") == ("False", "NotAdvertised")
    assert message(status, "Ready") == (
        "no nodes now; every type NodePool gpu launches attaches 32 when a pod requests it, but DeviceTaintRule"
        " driver-wide (NoSchedule) taints every device of driver dra.net a node it launches would publish,"
        " and the recommended claim tolerates none"
    )
    assert status.recommendation is None
    for spared in (device_taint_rule("one-pool", pool="p1"), device_taint_rule("gpus", driver="gpu.nvidia.com")):
        status = capability(evaluate_bodies([spared, dranet_daemon_set(), *_gpu_pool()]), "efa-gpu").status
        assert reason(status, "Ready") == ("True", "UniformCapability")
        assert status.recommendation is not None and status.recommendation.resource_claim_template is not None
    # With the device plugin there too, the resource is still to be had: asked for that way.
    both = [driver_wide, daemon_set(), dranet_daemon_set(), *_gpu_pool()]
    status = capability(evaluate_bodies(both), "efa-gpu").status
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert "not as DRA devices: DeviceTaintRule driver-wide (NoSchedule) taints" in message(status, "Ready")
    assert status.recommendation is not None
    assert status.recommendation.resource_claim_template is None
    assert status.recommendation.resources_per_node == {"vpc.amazonaws.com/efa": "32"}


def test_the_drivers_and_rules_that_taint_an_empty_pool_are_named_cleaned_and_bounded() -> None:
    """The drivers are a DeviceClass's CEL string constants, which take ``\\n``, ``\\xHH`` and
    ``\\u`` escapes (cel-go accepts them; the API server stores the class): any text its author
    wrote. Each is cleaned and cut as a slice's driver is, and a few drivers and rules (one per
    driver here) are named, the others counted, so the message keeps its end (hostile review 63 F1)."""
    forged = "\n2026-12-07 INFO forged\x1b]0;pwned\x07\u202e" + "d" * 200
    drivers = ["dra.net", *(f"evil{number}.example{forged}" for number in range(30))]
    # Written as CEL escapes, which CEL reads back to these strings.
    as_cel = ", ".join(f'"{driver.encode("unicode_escape").decode("ascii")}"' for driver in drivers)
    device_class = efa_device_class()
    device_class["spec"]["selectors"] = [{"cel": {"expression": f"device.driver in [{as_cel}]"}}]
    rules = [device_taint_rule(f"of-{number:02}", driver=driver) for number, driver in enumerate(drivers)]
    status = capability(evaluate_bodies([device_class, *rules, dranet_daemon_set(), *_gpu_pool()]), "efa-gpu").status
    assert reason(status, "Ready") == ("False", "NotAdvertised")
    ready = message(status, "Ready")
    assert not any(character in ready for character in "\n\x1b\x07\u202e"), ready
    named_rules = ", ".join(f"DeviceTaintRule of-{number:02} (NoSchedule)" for number in range(MAX_NAMED_RULES))
    assert f"{named_rules} (+{31 - MAX_NAMED_RULES} more) taint every device of driver dra.net, evil0.example " in ready
    assert ready.endswith(
        f"... (+{31 - MAX_NAMED_RULES} more) a node it launches would publish, and the recommended claim tolerates none"
    )
    assert len(ready) < 1_000


def test_a_rule_that_does_not_provably_cover_every_device_leaves_an_empty_pool_ready() -> None:
    """Part of its selector not evaluated here (v1alpha3's deviceClassName) may spare devices."""
    rule = device_taint_rule("by-class")
    rule["spec"]["deviceSelector"]["deviceClassName"] = "efa.networking.k8s.aws"
    status = capability(evaluate_bodies([rule, dranet_daemon_set(), *_gpu_pool()]), "efa-gpu").status
    assert reason(status, "Ready") == ("True", "UniformCapability")


def test_hyperpod_instance_groups_are_pools() -> None:
    group = "sagemaker.amazonaws.com/instance-group-name"
    bodies = [
        dranet_daemon_set(),
        daemon_set(),
        node("h1", pool="train-a", pool_key=group, instance_type="ml.p5.48xlarge"),
        node("h2", pool="train-b", pool_key=group, instance_type="ml.p5.48xlarge"),
        *plugin_pods(["h1", "h2"]),
    ]
    evaluation = evaluate_bodies(bodies)
    assert sorted(cap.name for cap in evaluation.capabilities) == ["efa-train-a", "efa-train-b"]
    assert capability(evaluation, "efa-train-a").status.instance_types[0].max_count == 32  # ml. stripped


def test_above_the_instance_maximum_is_never_ready() -> None:
    """aws-efa-k8s-device-plugin before 0.5.10 counted 10 EFA on the 8-EFA p6-b200
    (sagemaker-hyperpod-cli#282): a job requesting 10 breaks NCCL."""
    status = only_status(_b200(10))
    assert reason(status, "Ready") == ("False", "AboveInstanceMaximum")
    assert message(status, "Ready") == (
        "2 of 2 nodes of known types advertise more than their instance type's maximum: n1 (10 > 8), n2 (10 > 8)"
    )
    assert status.recommendation is None


def _b200(count: int) -> Bodies:
    names = ["n1", "n2"]
    return [
        daemon_set(),
        *(node(name, instance_type="p6-b200.48xlarge", efa=count) for name in names),
        *plugin_pods(names),
    ]


def test_explain_says_which_nodes_are_left_out_and_why() -> None:
    config = default_config()
    facts = facts_of(_launched(efa_requested=False), config)
    (capability,) = evaluate(config, facts).capabilities
    (row,) = explain_capability(config, facts, capability).nodes
    assert (row.left_out, row.findings, row.blocks_ready) == ("launchedWithoutFabric", [], False)
    assert row.notes == [
        "Karpenter launched it without EFA (NodeClaim gpu-abcde requested no vpc.amazonaws.com/efa);"
        " Karpenter attaches EFA only when a pod requests vpc.amazonaws.com/efa"
    ]


def test_a_nodepool_is_judged_again_only_when_what_it_is_judged_from_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's memo keeps each NodePool's verdict by its facts, its EC2NodeClass's and the
    provider DaemonSets': a round that changed none of them judges no NodePool."""
    calls: list[str] = []
    judge = judge_node_pool

    def counting(*args: Any) -> Any:
        calls.append(args[1].name)
        return judge(*args)

    monkeypatch.setattr(evaluation_module, "judge_node_pool", counting)
    config = default_config()
    facts = facts_of([daemon_set(), *_gpu_pool()], config)
    memo = EvaluationMemo()
    pool = Pool("karpenter.sh/nodepool", "gpu")
    first = evaluate(config, facts, [pool], memo=memo)
    # An unrelated node comes: the NodePool is evaluated again, not judged again.
    facts.put(
        NODE_FACTS, FactsExtractor(config).node(node("cpu1", pool="gpu", pool_key="karpenter.sh/nodepool", gpu=None))
    )
    evaluate(config, facts, [pool], memo=memo)
    assert calls == ["gpu"]
    narrower = node_pool("gpu", [{"key": TYPE, "operator": "In", "values": ["p5.48xlarge"]}], generation=2)
    facts.put_node_pool(node_pool_facts(narrower))
    second = evaluate(config, facts, [pool], memo=memo)
    assert calls == ["gpu", "gpu"]
    launchable = [capability.status.launchable for capability in (*first.capabilities, *second.capabilities)]
    assert [[t.name for t in entry.instance_types] for entry in launchable if entry] == [
        ["p5.48xlarge", "p5e.48xlarge"],
        ["p5.48xlarge"],
    ]


# -- NodePools Karpenter launches nothing from (sigs.k8s.io/karpenter v1.15.1 provisioner.go
# NewScheduler skips a NodePool being deleted and one whose Ready condition is not True)


def _conditions(ready: str, reason: str) -> list[dict[str, Any]]:
    """A NodePool's status.conditions as Karpenter writes them when its EC2NodeClass is not
    ready (karpenter.sh_nodepools.yaml of karpenter-provider-aws v1.15.2: metav1.Condition)."""
    return [
        {
            "type": kind,
            "status": status,
            "reason": reason if status != "True" else kind,
            "message": "",
            "lastTransitionTime": "2026-11-30T10:00:00Z",
            "observedGeneration": 1,
        }
        for kind, status in (("Ready", ready), ("NodeClassReady", ready), ("ValidationSucceeded", "True"))
    ]


@pytest.mark.parametrize(
    ("ready", "said"), [("False", "Ready False (NodeClassNotReady)"), ("Unknown", "Ready Unknown")]
)
def test_a_nodepool_karpenter_reports_not_ready_launches_nothing(ready: str, said: str) -> None:
    pool = node_pool("gpu", P5)
    pool["status"]["conditions"] = _conditions(ready, "NodeClassNotReady")
    status = only_status([daemon_set(), pool, ec2_node_class()])
    assert reason(status, "Launchable") == ("False", "NoFabricInstanceTypes")
    assert said in message(status, "Launchable")
    assert reason(status, "Ready") == ("False", "NoTargetNodes")
    assert status.recommendation is None
    assert status.to_json()["launchable"]["instanceTypes"] == []


def test_a_nodepool_whose_ec2nodeclass_is_missing_launches_nothing() -> None:
    # Karpenter sets NodeClassReady and Ready False for it; checked apart from them as well.
    status = only_status([daemon_set(), node_pool("gpu", P5, node_class="does-not-exist")])
    assert reason(status, "Launchable") == ("False", "NoFabricInstanceTypes")
    assert "EC2NodeClass does-not-exist, which does not exist" in message(status, "Launchable")
    assert reason(status, "Ready") == ("False", "NoTargetNodes")
    assert status.recommendation is None


def test_a_nodepool_being_deleted_launches_nothing() -> None:
    pool = node_pool("gpu", P5)
    pool["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z"
    pool["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    status = only_status([daemon_set(), pool, ec2_node_class()])
    assert reason(status, "Launchable") == ("False", "NoFabricInstanceTypes")
    assert "being deleted" in message(status, "Launchable")
    assert reason(status, "Ready") == ("False", "NoTargetNodes")


def test_a_nodepool_without_a_ready_condition_yet_launches_nothing() -> None:
    """Just created: Karpenter has set no condition, and IsTrue(Ready) is false until it does."""
    pool = node_pool("gpu", P5)
    del pool["status"]
    status = only_status([daemon_set(), pool, ec2_node_class()])
    assert reason(status, "Launchable") == ("False", "NoFabricInstanceTypes")
    assert "has not reported it Ready yet" in message(status, "Launchable")
    assert reason(status, "Ready")[0] == "False"


def _static(replicas: int) -> dict[str, Any]:
    """A static NodePool: spec.replicas (karpenter.sh_nodepools.yaml of karpenter-provider-aws
    v1.15.2: "maintain this fixed number of replicas rather than scaling based on pod demand";
    only limits.nodes is supported with it)."""
    pool = node_pool("gpu", P5)
    pool["spec"]["replicas"] = replicas
    pool["spec"]["limits"] = {"nodes": replicas}
    return pool


def test_a_static_nodepool_launches_without_the_fabric_unless_its_class_pins_it() -> None:
    """Karpenter's provisioner does not launch for pods from a static NodePool: its nodes request
    no EFA, so they get none (v1.15.2 types.go efas()) unless the EC2NodeClass pins efa-only."""
    status = only_status([daemon_set(), _static(4), ec2_node_class()])
    assert reason(status, "Launchable") == ("False", "NoFabricInstanceTypes")
    assert "static NodePool (spec.replicas 4)" in message(status, "Launchable")
    assert "when a pod requests it" not in message(status, "Ready")
    assert reason(status, "Ready") == ("False", "NoTargetNodes")
    assert status.recommendation is None
    status = only_status([daemon_set(), _static(4), ec2_node_class(efa_only=2)])
    assert reason(status, "Launchable") == ("True", "UniformLaunchableCount")
    assert message(status, "Ready") == (
        "no nodes now; every type NodePool gpu launches attaches 2 on every node"
        " (its EC2NodeClass pins 2 efa-only interfaces)"
    )


# -- the labels of the node a provider DaemonSet is judged against


def _provider_with(expressions: list[dict[str, Any]]) -> dict[str, Any]:
    provider = daemon_set()
    provider["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        }
    }
    return provider


ON_DEMAND_OR_SPOT = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]}


@pytest.mark.parametrize(
    ("provider", "requirements", "launchable"),
    [
        # Every Karpenter node is labelled kubernetes.io/os (and beta.kubernetes.io/os) by the kubelet.
        (daemon_set(node_selector={"kubernetes.io/os": "linux"}), P5, "UniformLaunchableCount"),
        (daemon_set(node_selector={"beta.kubernetes.io/os": "linux"}), P5, "UniformLaunchableCount"),
        (daemon_set(node_selector={"kubernetes.io/os": "windows"}), P5, "ProviderExcludesInstanceTypes"),
        # Capacity type and zone: one of what the NodePool allows (all three capacity types and any
        # zone when it says nothing), and the DaemonSet must admit each.
        (_provider_with([{"key": "topology.kubernetes.io/zone", "operator": "Exists"}]), P5, "UniformLaunchableCount"),
        (_provider_with([ON_DEMAND_OR_SPOT]), [*P5, ON_DEMAND_OR_SPOT], "UniformLaunchableCount"),
        # Reserved capacity only where the EC2NodeClass selects reservations (below).
        (_provider_with([ON_DEMAND_OR_SPOT]), P5, "UniformLaunchableCount"),
        (
            _provider_with([{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]}]),
            P5,
            "ProviderExcludesInstanceTypes",
        ),
        (
            _provider_with([{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]}]),
            [*P5, {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]}],
            "UniformLaunchableCount",
        ),
        (
            _provider_with([{"key": "kubernetes.io/hostname", "operator": "DoesNotExist"}]),
            P5,
            "ProviderExcludesInstanceTypes",
        ),
    ],
)
def test_the_provider_is_judged_against_every_label_a_karpenter_node_carries(
    provider: dict[str, Any], requirements: list[dict[str, Any]], launchable: str
) -> None:
    status = only_status([provider, node_pool("gpu", requirements), ec2_node_class()])
    assert reason(status, "Launchable")[1] == launchable, message(status, "Launchable")


def test_a_nodepool_with_a_non_ascii_digit_is_unknown_and_the_others_are_judged() -> None:
    """'²' passes str.isdigit() but not int(): the NodePool is unreadable, and the round goes on."""
    odd = node_pool("odd", [{"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["\u00b2"]}])
    evaluation = evaluate_bodies([daemon_set(), odd, *_gpu_pool()])
    assert reason(capability(evaluation, "efa-odd").status, "Launchable") == ("Unknown", "RequirementsNotEvaluated")
    assert reason(capability(evaluation, "efa-gpu").status, "Ready") == ("True", "UniformCapability")


def test_reserved_capacity_is_judged_only_where_the_ec2nodeclass_selects_reservations() -> None:
    """v1.15.2 builds reserved offerings from the class's capacity reservations alone: a provider
    that admits on-demand and spot leaves out the reserved nodes of a class that selects some."""
    reserving = ec2_node_class()
    reserving["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"karpenter.sh/discovery": "demo"}}]
    status = only_status([_provider_with([ON_DEMAND_OR_SPOT]), node_pool("gpu", P5), reserving])
    assert reason(status, "Launchable") == ("False", "ProviderExcludesInstanceTypes")


def test_a_nodepool_allowing_too_many_offering_combinations_is_not_judged() -> None:
    """The provider is judged in every combination of the offering labels the NodePool allows:
    sixteen each of zones, zone IDs, regions and hostnames made 196,608 label sets per type, and
    a round of minutes. Past the bound the NodePool is Unknown, not judged in part."""
    many = [
        {"key": key, "operator": "In", "values": [f"v{index}" for index in range(16)]}
        for key in ("topology.kubernetes.io/zone", "topology.k8s.aws/zone-id", "topology.kubernetes.io/region")
    ]
    provider = _provider_with([{"key": "topology.kubernetes.io/zone", "operator": "Exists"}])
    status = only_status([provider, node_pool("gpu", [*P5, *many]), ec2_node_class()])
    assert reason(status, "Launchable") == ("Unknown", "RequirementsNotEvaluated"), message(status, "Launchable")
    assert "combinations" in message(status, "Launchable")
