"""API paths and the table of watched kinds."""

from __future__ import annotations

import pytest

from fabriccap.kube.kinds import BY_KIND, POD, WATCHED_KINDS, kinds_for, object_key
from fabriccap.kube.paths import DAEMON_SETS, FABRIC_CAPABILITIES, NODES, PODS
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
        "ResourceSlice": [(None, "/apis/resource.k8s.io/v1/resourceslices")],
    }
    quiet = config.model_copy(update={"workloads": build_config({"workloads": {"enabled": False}}).workloads})
    assert POD.paths(quiet) == [
        ("kube-system", "/api/v1/namespaces/kube-system/pods"),
        ("network-operator", "/api/v1/namespaces/network-operator/pods"),
    ]
    assert set(BY_KIND) == {"Node", "DaemonSet", "Pod", "ResourceSlice"}


def test_resource_slices_are_watched_only_for_a_fabric_that_reads_dra() -> None:
    assert [watched.kind for watched in kinds_for(default_config())] == ["Node", "DaemonSet", "Pod", "ResourceSlice"]
    plugin_only = build_config({"fabrics": [{"name": "efa", "sources": ["devicePlugin"]}, {"name": "aks-rdma"}]})
    assert [watched.kind for watched in kinds_for(plugin_only)] == ["Node", "DaemonSet", "Pod"]


def test_object_keys_are_what_a_list_retains() -> None:
    assert object_key({"metadata": {"name": "n1"}}) == "n1"
    assert object_key({"metadata": {"name": "p", "namespace": "kube-system"}}) == "kube-system/p"
