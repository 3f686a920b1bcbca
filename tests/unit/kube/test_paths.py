"""API paths and the table of watched kinds."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote

import pytest

from fabriccap.core.workloads import LookupKey
from fabriccap.kube.kinds import BY_KIND, DEVICE_TAINT_RULE, POD, WATCHED_KINDS, kinds_for, object_key
from fabriccap.kube.lookups import lookup_path
from fabriccap.kube.paths import DAEMON_SETS, FABRIC_CAPABILITIES, NODES, PODS, ApiResource
from support.configs import build_config, default_config


def test_core_group_paths() -> None:
    assert NODES.collection() == "/api/v1/nodes"
    assert NODES.item("ip-10-0-1-5") == "/api/v1/nodes/ip-10-0-1-5"
    assert NODES.status("ip-10-0-1-5") == "/api/v1/nodes/ip-10-0-1-5/status"
    assert PODS.collection() == "/api/v1/pods"
    assert PODS.collection("kube-system") == "/api/v1/namespaces/kube-system/pods"
    assert PODS.status("p", "kube-system") == "/api/v1/namespaces/kube-system/pods/p/status"


def test_named_group_paths() -> None:
    assert DAEMON_SETS.item("efa", "kube-system") == "/apis/apps/v1/namespaces/kube-system/daemonsets/efa"
    assert FABRIC_CAPABILITIES.status("efa-p5") == "/apis/fabriccap.dev/v1alpha1/fabriccapabilities/efa-p5/status"
    assert FABRIC_CAPABILITIES.api_version == "fabriccap.dev/v1alpha1"
    assert NODES.api_version == "v1"


def test_scope_mistakes_are_refused() -> None:
    with pytest.raises(ValueError, match="Node is cluster-scoped"):
        NODES.collection("kube-system")
    with pytest.raises(ValueError, match="Pod p needs a namespace"):
        PODS.item("p")


def test_every_watched_kind_is_listed_in_its_scope() -> None:
    config = build_config(
        {"fabrics": [{"name": "efa", "devicePlugin": {"namespaces": ["kube-system", "network-operator"]}}]}
    )
    assert {watched.kind: watched.paths(config) for watched in WATCHED_KINDS} == {
        "Node": [(None, "/api/v1/nodes")],
        "DaemonSet": [
            ("kube-system", "/apis/apps/v1/namespaces/kube-system/daemonsets"),
            ("network-operator", "/apis/apps/v1/namespaces/network-operator/daemonsets"),
        ],
        # Workloads run anywhere: with workload reporting on (the default), pods cluster-wide.
        "Pod": [(None, "/api/v1/pods")],
        "DeviceClass": [(None, "/apis/resource.k8s.io/v1/deviceclasses")],
        # The newest version first (DEVICE_TAINT_RULE.versioned_paths: then v1alpha3).
        "DeviceTaintRule": [(None, "/apis/resource.k8s.io/v1beta2/devicetaintrules")],
        "ResourceSlice": [(None, "/apis/resource.k8s.io/v1/resourceslices")],
        # Allocated devices count for their node wherever the claim is: cluster-wide, read only.
        "ResourceClaim": [(None, "/apis/resource.k8s.io/v1/resourceclaims")],
        # Karpenter's objects (SPEC "Elastic pools"), cluster-scoped.
        "NodePool": [(None, "/apis/karpenter.sh/v1/nodepools")],
        "NodeClaim": [(None, "/apis/karpenter.sh/v1/nodeclaims")],
        "EC2NodeClass": [(None, "/apis/karpenter.k8s.aws/v1/ec2nodeclasses")],
    }
    quiet = config.model_copy(update={"workloads": build_config({"workloads": {"enabled": False}}).workloads})
    assert POD.paths(quiet) == [
        ("kube-system", "/api/v1/namespaces/kube-system/pods"),
        ("network-operator", "/api/v1/namespaces/network-operator/pods"),
    ]
    assert set(BY_KIND) == {
        "Node",
        "DaemonSet",
        "Pod",
        "DeviceClass",
        "DeviceTaintRule",
        "ResourceSlice",
        "ResourceClaim",
        "NodePool",
        "NodeClaim",
        "EC2NodeClass",
    }


def test_resource_slices_are_watched_only_for_a_fabric_that_reads_dra() -> None:
    karpenter = ["NodePool", "NodeClaim", "EC2NodeClass"]
    assert [watched.kind for watched in kinds_for(default_config())] == [
        "Node",
        "DaemonSet",
        "Pod",
        "DeviceClass",
        "DeviceTaintRule",
        "ResourceSlice",
        "ResourceClaim",
        *karpenter,
    ]
    plugin_only = build_config({"fabrics": [{"name": "efa", "sources": ["devicePlugin"]}, {"name": "aks-rdma"}]})
    assert [watched.kind for watched in kinds_for(plugin_only)] == ["Node", "DaemonSet", "Pod", *karpenter]


def test_karpenters_kinds_are_optional_and_read_only_while_the_config_reads_them() -> None:
    """Most clusters do not serve karpenter.sh/v1: a 404 there is no error (optional), and a
    config that turns Karpenter off watches none of its kinds."""
    karpenter = [watched for watched in WATCHED_KINDS if watched.resource.group.startswith("karpenter.")]
    assert [watched.kind for watched in karpenter] == ["NodePool", "NodeClaim", "EC2NodeClass"]
    assert all(watched.optional for watched in karpenter)
    off = build_config({"karpenter": {"enabled": False}})
    assert [watched.kind for watched in kinds_for(off)] == [
        "Node",
        "DaemonSet",
        "Pod",
        "DeviceClass",
        "DeviceTaintRule",
        "ResourceSlice",
        "ResourceClaim",
    ]


def test_device_taint_rules_are_read_in_the_newest_version_served() -> None:
    """v1beta2 from Kubernetes 1.36, v1alpha3 in 1.33-1.35 (k8s.io/api@v0.35.4 has it in
    v1alpha3 only): the informer and ``evaluate`` try them newest first; neither served is no
    rule (optional), and a snapshot may hold either."""
    assert DEVICE_TAINT_RULE.optional and not DEVICE_TAINT_RULE.warn_when_absent
    assert DEVICE_TAINT_RULE.versioned_paths(None) == (
        "/apis/resource.k8s.io/v1beta2/devicetaintrules",
        "/apis/resource.k8s.io/v1alpha3/devicetaintrules",
    )
    assert DEVICE_TAINT_RULE.api_versions == ("resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3")


def test_object_keys_are_what_a_list_retains() -> None:
    assert object_key({"metadata": {"name": "n1"}}) == "n1"
    assert object_key({"metadata": {"name": "p", "namespace": "kube-system"}}) == "kube-system/p"


# -- hostile segments (reliability round 3, S3; issue 27 item 9)

HOSTILE_SEGMENTS = [
    "../../../../api/v1/nodes?limit=0",
    "x?watch=true",
    "../../namespaces/victim/pods/victim-pod",
    "%2e%2e",
    "a" * 600_000,
    "x\ny",
    "x#y",
    "..",
    ".",
    "",
    "a/b",
]


@pytest.mark.parametrize("segment", HOSTILE_SEGMENTS, ids=lambda segment: repr(segment[:40]))
def test_no_segment_can_change_the_path(segment: str) -> None:
    """Each segment is refused, or percent-encoded whole: the path keeps its shape."""
    builds: list[Callable[[], str]] = [
        lambda: PODS.item(segment, "ml"),
        lambda: PODS.item("p", segment),
        lambda: PODS.collection(segment),
        lambda: ApiResource(segment, "v1", "jobs", "Job", namespaced=True).collection("ml"),
    ]
    for build in builds:
        try:
            path = build()
        except ValueError as error:
            assert len(str(error)) < 200
            continue
        parts = path.split("/")
        assert "?" not in path and "#" not in path and "\n" not in path
        assert ".." not in parts and "." not in parts
        assert unquote(path).count("/") == path.count("/")


def test_ordinary_names_are_unchanged_and_odd_ones_encoded() -> None:
    assert PODS.item("bert-node-0-0", "ml") == "/api/v1/namespaces/ml/pods/bert-node-0-0"
    assert PODS.item("x y", "ml") == "/api/v1/namespaces/ml/pods/x%20y"
    assert ApiResource.of("batch/v1", "jobs", "Job", namespaced=True).item("j", "ml") == (
        "/apis/batch/v1/namespaces/ml/jobs/j"
    )
    assert ApiResource.of("v1", "pods", "Pod", namespaced=True).collection("ml") == "/api/v1/namespaces/ml/pods"


@pytest.mark.parametrize("name", HOSTILE_SEGMENTS, ids=lambda name: repr(name[:40]))
def test_a_lookup_path_is_one_object_of_its_kind_in_its_namespace(name: str) -> None:
    with pytest.raises(ValueError):
        lookup_path(LookupKey("Job", "ml", name, "batch/v1"))


@pytest.mark.parametrize("api_version", ["../../api/v1", "batch/v1/../x", "batch/v1?watch=true", "a/b/c"])
def test_a_lookup_path_refuses_an_api_version_that_is_none(api_version: str) -> None:
    with pytest.raises(ValueError):
        lookup_path(LookupKey("Job", "ml", "j", api_version))


def test_lookup_paths() -> None:
    assert lookup_path(LookupKey("Job", "ml", "j", "batch/v1")) == "/apis/batch/v1/namespaces/ml/jobs/j"
    assert lookup_path(LookupKey("JobSet", "ml", "s", "jobset.x-k8s.io/v1alpha2")) == (
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ml/jobsets/s"
    )
    assert lookup_path(LookupKey("ResourceClaim", "ml", "c", "resource.k8s.io/v1beta1")) == (
        "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/c"
    )
