"""examples/: the simulated EKS cluster gives each pool the outcome its comment promises.

The expected values are written out by hand from the rules of docs/reference/how-it-decides.md, not computed by the code
under test, so a change in the evaluation that alters any published outcome fails here.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fabriccap.cli import commands as cli
from fabriccap.configfile import load_config
from support.configs import default_config

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
SNAPSHOT = EXAMPLES / "eks-cluster.json"
CONFIG = EXAMPLES / "config.yaml"
GENERATOR = EXAMPLES / "generate_cluster.py"
# Three DRANET slices of 32 devices are ~60 KB each as kubectl prints them.
MAX_SNAPSHOT_BYTES = 700 * 1024  # with Karpenter's NodePools, NodeClaims and EC2NodeClass

EFA = "vpc.amazonaws.com/efa"
NODEGROUP = "eks.amazonaws.com/nodegroup"
NODEPOOL = "karpenter.sh/nodepool"
PLUGIN_DAEMON_SET = "kube-system/aws-efa-k8s-device-plugin"
DRANET_DAEMON_SET = "kube-system/aws-dranet"
EFA_ENV = [
    {"name": "FI_PROVIDER", "value": "efa"},
    {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"},
    {"name": "NCCL_SOCKET_IFNAME", "value": "^lo,docker"},
]
NO_GAP = {
    "pluginReadyNotAdvertised": 0,
    "unhealthy": 0,
    "advertisedWithoutPlugin": 0,
    "launchedWithoutFabric": 0,
    "conflictingAdvertisers": 0,
    "nodes": [],
    "truncated": False,
}


@cache
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_cluster", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolves the module's annotations through sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@cache
def snapshot_items() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(SNAPSHOT.read_text(encoding="utf-8"))["items"]
    return items


def pool_nodes(pool_value: str) -> list[dict[str, Any]]:
    return [
        item
        for item in snapshot_items()
        if item["kind"] == "Node"
        and pool_value in (item["metadata"]["labels"].get(NODEGROUP), item["metadata"]["labels"].get(NODEPOOL))
    ]


def node_names(pool_value: str, where: Any = lambda node: True) -> list[str]:
    return sorted(node["metadata"]["name"] for node in pool_nodes(pool_value) if where(node))


def efa_allocatable(node: dict[str, Any]) -> str | None:
    value: str | None = node["status"]["allocatable"].get(EFA)
    return value


def run_evaluate(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, dict[str, Any]]:
    """The published objects, keyed by pool value."""
    assert cli.main(["evaluate", "-f", str(SNAPSHOT), "-o", "json", *extra]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    by_pool = {item["status"]["pool"]["value"]: item for item in items}
    assert len(by_pool) == len(items), "two objects for one pool value"
    return by_pool


@pytest.fixture(params=["built-in config", "examples/config.yaml"])
def published(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    extra = () if request.param == "built-in config" else ("--config", str(CONFIG))
    return run_evaluate(capsys, *extra)


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {condition["type"]: (condition["status"], condition["reason"]) for condition in obj["status"]["conditions"]}


# ---------------------------------------------------------------------------------------
# The example files themselves


def test_committed_snapshot_is_what_the_generator_writes() -> None:
    module = generator()
    assert SNAPSHOT.read_text(encoding="utf-8") == module.render(module.cluster_snapshot()), (
        "examples/eks-cluster.json is stale: run python examples/generate_cluster.py"
    )


def test_snapshot_stays_small() -> None:
    assert SNAPSHOT.stat().st_size < MAX_SNAPSHOT_BYTES


def test_snapshot_looks_like_kubectl_output() -> None:
    document = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert (document["apiVersion"], document["kind"]) == ("v1", "List")
    kinds = [item["kind"] for item in document["items"]]
    # kubectl prints the resources in the order asked: nodes, pods, daemonsets, resourceslices,
    # deviceclasses, nodepools, nodeclaims, ec2nodeclasses.
    order = ["Node", "Pod", "DaemonSet", "ResourceSlice", "DeviceClass", "NodePool", "NodeClaim", "EC2NodeClass"]
    assert kinds == sorted(kinds, key=order.index)
    names = [item["metadata"]["name"] for item in document["items"] if item["kind"] == "Node"]
    assert len(names) == len(set(names))


def test_plugin_pods_are_found_only_through_their_owner() -> None:
    """Like the real chart: the DaemonSet has app.kubernetes.io/name, its pods only `name`."""
    daemon_set = next(item for item in snapshot_items() if item["metadata"]["name"] == "aws-efa-k8s-device-plugin")
    assert daemon_set["metadata"]["labels"]["app.kubernetes.io/name"] == "aws-efa-k8s-device-plugin"
    plugin_pods = [
        item
        for item in snapshot_items()
        if item["kind"] == "Pod" and item["metadata"]["name"].startswith("aws-efa-k8s-device-plugin-")
    ]
    assert len(plugin_pods) == 21
    for pod in plugin_pods:
        assert pod["metadata"]["labels"]["name"] == "aws-efa-k8s-device-plugin"
        assert "app.kubernetes.io/name" not in pod["metadata"]["labels"]
        (owner,) = pod["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "DaemonSet",
            "aws-efa-k8s-device-plugin",
            daemon_set["metadata"]["uid"],
        )


def test_example_config_spells_out_the_defaults() -> None:
    """examples/config.yaml documents the built-in settings; update it when they change."""
    assert load_config(CONFIG) == default_config()


# ---------------------------------------------------------------------------------------
# One expected outcome per pool


def test_exactly_the_fabric_pools_are_published(published: dict[str, dict[str, Any]]) -> None:
    assert sorted(published) == [
        "g6-inference",
        "gpu-mixed",
        "p4d-unhealthy",
        "p5-dranet",
        "p5-elastic",
        "p5-partial",
        "p5-spot",
        "p5-training",
        "trn1-cordoned",
    ]
    # cpu-general: no GPU, no EFA and no plugin pod, so not a target pool of any fabric.
    assert "cpu-general" not in published
    for pool, obj in published.items():
        # The DaemonSets that serve the pool: the device plugin where it advertises, DRANET
        # where DRA does, both where nothing is advertised yet (either could be missing).
        expected = {
            "p5-dranet": [DRANET_DAEMON_SET],
            "g6-inference": [DRANET_DAEMON_SET, PLUGIN_DAEMON_SET],
            "p5-partial": [DRANET_DAEMON_SET, PLUGIN_DAEMON_SET],
            # Its one node was launched without EFA: the pool is judged by what it launches,
            # which either provider could serve.
            "p5-spot": [DRANET_DAEMON_SET, PLUGIN_DAEMON_SET],
            # No node at all: likewise.
            "p5-elastic": [DRANET_DAEMON_SET, PLUGIN_DAEMON_SET],
        }.get(pool, [PLUGIN_DAEMON_SET])
        assert obj["status"]["devicePlugin"]["daemonSets"] == expected, pool
        assert obj["status"]["fabric"] == "efa"
        assert obj["status"]["resourceName"] == EFA


def test_healthy_p5_pool_is_ready(published: dict[str, dict[str, Any]]) -> None:
    obj = published["p5-training"]
    status = obj["status"]
    assert obj["metadata"]["name"] == "efa-p5-training"
    assert status["pool"] == {"key": NODEGROUP, "value": "p5-training"}
    assert (status["nodes"], status["cordonedNodes"], status["advertisingNodes"]) == (4, 0, 4)
    assert status["uniformCount"] == 32
    assert status["counts"] == [{"count": 32, "nodes": 4}]
    assert status["instanceTypes"] == [{"name": "p5.48xlarge", "nodes": 4, "maxCount": 32}]
    assert status["devicePlugin"]["readyNodes"] == 4
    assert status["gap"] == NO_GAP
    assert status["recommendation"] == {"resourcesPerNode": {EFA: "32"}, "env": EFA_ENV}
    assert conditions(obj) == {
        "DevicePluginReady": ("True", "PluginReadyOnAllNodes"),
        "Advertised": ("True", "AllNodesAdvertise"),
        "Homogeneous": ("True", "UniformCount"),
        "MatchesInstanceType": ("True", "MatchesInstanceMaximum"),
        "Ready": ("True", "UniformCapability"),
        "Stalled": ("False", "NotStalled"),
    }


def test_partial_rollout_names_the_node_that_advertises_nothing(published: dict[str, dict[str, Any]]) -> None:
    obj = published["p5-partial"]
    status = obj["status"]
    silent = node_names("p5-partial", lambda node: efa_allocatable(node) == "0")
    assert len(silent) == 1
    assert (status["nodes"], status["advertisingNodes"]) == (4, 3)
    assert "uniformCount" not in status
    assert "recommendation" not in status
    assert status["counts"] == [{"count": 32, "nodes": 3}, {"count": 0, "nodes": 1}]
    assert status["devicePlugin"]["readyNodes"] == 4
    assert status["gap"] == {**NO_GAP, "pluginReadyNotAdvertised": 1, "nodes": silent}
    assert conditions(obj) == {
        "DevicePluginReady": ("True", "PluginReadyOnAllNodes"),
        "Advertised": ("False", "PartiallyAdvertised"),
        "Homogeneous": ("False", "PartialRollout"),
        "MatchesInstanceType": ("False", "BelowInstanceMaximum"),
        "Ready": ("False", "PartialRollout"),
        "Stalled": ("False", "NotStalled"),
    }
    ready = next(condition for condition in status["conditions"] if condition["type"] == "Ready")
    assert silent[0] in ready["message"]


def test_karpenter_pool_mixing_p4d_and_p5_is_stalled(published: dict[str, dict[str, Any]]) -> None:
    obj = published["gpu-mixed"]
    status = obj["status"]
    # Another pool key than the first, and the name is readable all the same (round 3).
    assert obj["metadata"]["name"] == "efa-gpu-mixed"
    assert obj["metadata"]["labels"]["fabriccap.dev/pool"] == "gpu-mixed"
    assert status["pool"] == {"key": NODEPOOL, "value": "gpu-mixed"}
    assert (status["nodes"], status["advertisingNodes"]) == (4, 4)
    assert "uniformCount" not in status
    assert status["counts"] == [{"count": 32, "nodes": 2}, {"count": 4, "nodes": 2}]
    assert status["instanceTypes"] == [
        {"name": "p4d.24xlarge", "nodes": 2, "maxCount": 4},
        {"name": "p5.48xlarge", "nodes": 2, "maxCount": 32},
    ]
    assert status["gap"] == NO_GAP
    assert conditions(obj) == {
        "DevicePluginReady": ("True", "PluginReadyOnAllNodes"),
        "Advertised": ("True", "AllNodesAdvertise"),
        "Homogeneous": ("False", "MixedCounts"),
        "MatchesInstanceType": ("True", "MatchesInstanceMaximum"),
        # Its NodePool (p4d.24xlarge and p5.48xlarge) could not launch one count either.
        "Launchable": ("False", "MixedLaunchableCounts"),
        "Ready": ("False", "MixedCounts"),
        "Stalled": ("True", "HeterogeneousInstanceTypes"),
    }


def test_gpu_pool_without_efa_capable_instances_is_stalled(published: dict[str, dict[str, Any]]) -> None:
    obj = published["g6-inference"]
    status = obj["status"]
    nodes = node_names("g6-inference")
    assert all(efa_allocatable(node) is None for node in pool_nodes("g6-inference"))
    assert (status["nodes"], status["advertisingNodes"]) == (2, 0)
    # Every node advertises the same count, 0: uniform, and uniformly useless.
    assert status["uniformCount"] == 0
    assert status["counts"] == [{"count": 0, "nodes": 2}]
    assert status["instanceTypes"] == [{"name": "g6.2xlarge", "nodes": 2, "maxCount": 0}]
    assert status["devicePlugin"]["readyNodes"] == 2
    assert status["gap"] == {**NO_GAP, "pluginReadyNotAdvertised": 2, "nodes": nodes}
    assert "recommendation" not in status
    assert conditions(obj)["Advertised"] == ("False", "NotAdvertised")
    assert conditions(obj)["Ready"] == ("False", "NotAdvertised")
    assert conditions(obj)["Stalled"] == ("True", "InstanceTypeUnsupported")


def test_cordoned_node_is_reported_not_judged(published: dict[str, dict[str, Any]]) -> None:
    obj = published["trn1-cordoned"]
    status = obj["status"]
    assert len(node_names("trn1-cordoned", lambda node: node["spec"].get("unschedulable"))) == 1
    assert (status["nodes"], status["cordonedNodes"], status["advertisingNodes"]) == (2, 1, 2)
    assert status["uniformCount"] == 8
    assert status["counts"] == [{"count": 8, "nodes": 2}]
    assert status["instanceTypes"] == [{"name": "trn1.32xlarge", "nodes": 2, "maxCount": 8}]
    assert status["devicePlugin"]["readyNodes"] == 2
    assert status["gap"] == NO_GAP
    assert status["recommendation"]["resourcesPerNode"] == {EFA: "8"}
    assert conditions(obj)["Ready"] == ("True", "UniformCapability")
    assert conditions(obj)["Stalled"] == ("False", "NotStalled")


def test_unhealthy_devices_show_as_mixed_counts(published: dict[str, dict[str, Any]]) -> None:
    obj = published["p4d-unhealthy"]
    status = obj["status"]
    degraded = node_names("p4d-unhealthy", lambda node: efa_allocatable(node) == "2")
    assert len(degraded) == 1
    assert (status["nodes"], status["advertisingNodes"]) == (3, 3)
    assert "uniformCount" not in status
    assert status["counts"] == [{"count": 4, "nodes": 2}, {"count": 2, "nodes": 1}]
    assert status["gap"] == {**NO_GAP, "unhealthy": 1, "nodes": degraded}
    assert conditions(obj) == {
        "DevicePluginReady": ("True", "PluginReadyOnAllNodes"),
        "Advertised": ("True", "AllNodesAdvertise"),
        "Homogeneous": ("False", "MixedCounts"),
        "MatchesInstanceType": ("False", "BelowInstanceMaximum"),
        "Ready": ("False", "MixedCounts"),
        "Stalled": ("False", "NotStalled"),
    }


def test_dranet_pool_is_ready_from_its_resource_slices(published: dict[str, dict[str, Any]]) -> None:
    obj = published["p5-dranet"]
    status = obj["status"]
    assert all(efa_allocatable(node) is None for node in pool_nodes("p5-dranet")), "DRA nodes have no EFA allocatable"
    slices = [item for item in snapshot_items() if item["kind"] == "ResourceSlice"]
    assert sorted(item["spec"]["nodeName"] for item in slices) == node_names("p5-dranet")
    assert (status["nodes"], status["advertisingNodes"], status["uniformCount"]) == (3, 3, 32)
    assert status["sources"] == [{"source": "devicePlugin", "nodes": 0}, {"source": "dra", "nodes": 3}]
    assert status["devicePlugin"]["readyNodes"] == 3
    assert status["gap"] == NO_GAP
    assert status["recommendation"] == {
        "resourceClaimTemplate": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "efa",
                            "exactly": {
                                "deviceClassName": "efa.networking.k8s.aws",
                                "allocationMode": "ExactCount",
                                "count": 32,
                            },
                        }
                    ]
                }
            }
        },
        "env": EFA_ENV,
    }
    assert conditions(obj) == {
        "DevicePluginReady": ("True", "PluginReadyOnAllNodes"),
        "Advertised": ("True", "AllNodesAdvertise"),
        "Homogeneous": ("True", "UniformCount"),
        "MatchesInstanceType": ("True", "MatchesInstanceMaximum"),
        "Ready": ("True", "UniformCapability"),
        "Stalled": ("False", "NotStalled"),
    }


def test_device_plugin_pools_list_their_source(published: dict[str, dict[str, Any]]) -> None:
    status = published["p5-training"]["status"]
    assert status["sources"] == [{"source": "devicePlugin", "nodes": 4}, {"source": "dra", "nodes": 0}]


def test_require_ready_fails_on_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["evaluate", "-f", str(SNAPSHOT), "--require-ready"]) == cli.EXIT_NOT_READY
    table = capsys.readouterr().out
    assert "efa-p5-training" in table


def test_the_empty_nodepool_is_ready_from_the_catalog(published: dict[str, dict[str, Any]]) -> None:
    """p5-elastic has no node (scaled to zero): a pool all the same, Ready from what it launches."""
    status = published["p5-elastic"]["status"]
    assert (status["nodes"], status["pool"]) == (0, {"key": NODEPOOL, "value": "p5-elastic"})
    assert conditions(published["p5-elastic"])["Launchable"] == ("True", "UniformLaunchableCount")
    assert conditions(published["p5-elastic"])["Ready"] == ("True", "UniformCapability")
    assert status["launchable"]["instanceTypes"] == [{"name": "p5.48xlarge", "maxCount": 32}]
    assert status["recommendation"]["resourcesPerNode"] == {"vpc.amazonaws.com/efa": "32"}
