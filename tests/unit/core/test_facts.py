"""Object bodies -> facts: pools, cordons, resources of interest, plugin pods, DaemonSets."""

from __future__ import annotations

from typing import Any

import pytest

from fabriccap.core.facts import (
    MAX_TOLERATIONS,
    DaemonSetFacts,
    FactsError,
    FactsExtractor,
    NodeFacts,
    Pool,
    Taint,
    Toleration,
)
from support.builders import EFA, GPU, GPU_PRESENT, INSTANCE_TYPE, KARPENTER, NODEGROUP, daemon_set, node, pod
from support.configs import build_config, default_config

EXTRACTOR = FactsExtractor(default_config())


def test_node_facts_keep_only_what_matters() -> None:
    body = node("ip-10-0-1-5", pool="p5-training", efa=32, gpu=8)
    facts = EXTRACTOR.node(body)
    assert facts == NodeFacts(
        name="ip-10-0-1-5",
        pool=Pool(NODEGROUP, "p5-training"),
        instance_type="p5.48xlarge",
        cordoned=False,
        capacity=((GPU, 8), (EFA, 32)),
        allocatable=((GPU, 8), (EFA, 32)),
        labels=(),
        ready=True,
        provider_id=body["spec"]["providerID"],
    )
    assert EXTRACTOR.node(node("n2", ready=False, provider_id=None)).ready is False
    # cpu, memory, pods ... are not resources of interest.
    assert facts.allocatable_of("cpu") == 0
    assert facts.allocatable_of(EFA) == 32
    assert facts.capacity_of("memory") == 0


def test_node_facts_parse_quantities() -> None:
    facts = EXTRACTOR.node(node("n1", efa="1k", efa_capacity="1Ki", gpu=None))
    assert facts.allocatable_of(EFA) == 1000
    assert facts.capacity_of(EFA) == 1024
    assert facts.allocatable_of(GPU) == 0


def test_node_absent_resource_is_zero() -> None:
    facts = EXTRACTOR.node(node("n1", efa=None, gpu=None))
    assert facts.allocatable == ()
    assert facts.capacity == ()
    assert facts.allocatable_of(EFA) == 0


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({NODEGROUP: "ng", KARPENTER: "kp", INSTANCE_TYPE: "p5.48xlarge"}, Pool(NODEGROUP, "ng")),
        ({KARPENTER: "kp", INSTANCE_TYPE: "p5.48xlarge"}, Pool(KARPENTER, "kp")),
        ({"alpha.eksctl.io/nodegroup-name": "ek", INSTANCE_TYPE: "t"}, Pool("alpha.eksctl.io/nodegroup-name", "ek")),
        (
            {"cloud.google.com/gke-nodepool": "gk", "kubernetes.azure.com/agentpool": "az"},
            Pool("cloud.google.com/gke-nodepool", "gk"),
        ),
        ({"kubernetes.azure.com/agentpool": "az"}, Pool("kubernetes.azure.com/agentpool", "az")),
        ({INSTANCE_TYPE: "p5.48xlarge"}, Pool(INSTANCE_TYPE, "p5.48xlarge")),
        # An empty value carries no pool identity: the next key decides.
        ({NODEGROUP: "", KARPENTER: "kp"}, Pool(KARPENTER, "kp")),
        ({NODEGROUP: ""}, None),
        ({}, None),
        ({"team": "ml"}, None),
    ],
)
def test_pool_is_first_pool_key_present(labels: dict[str, str], expected: Pool | None) -> None:
    body = node("n1", pool=None, instance_type=None, labels=labels)
    assert EXTRACTOR.node(body).pool == expected


def test_pool_label_order_is_configurable() -> None:
    config = build_config({"poolLabels": [KARPENTER, NODEGROUP]})
    body = node("n1", pool="ng", labels={KARPENTER: "kp"})
    assert FactsExtractor(config).node(body).pool == Pool(KARPENTER, "kp")
    assert EXTRACTOR.node(body).pool == Pool(NODEGROUP, "ng")


def test_instance_type_missing_or_empty() -> None:
    assert EXTRACTOR.node(node("n1", instance_type=None)).instance_type is None
    assert EXTRACTOR.node(node("n1", instance_type="")).instance_type is None


@pytest.mark.parametrize(("unschedulable", "cordoned"), [(True, True), (False, False), (None, False)])
def test_cordon(unschedulable: bool | None, cordoned: bool) -> None:
    body = node("n1")
    if unschedulable is not None:
        body["spec"]["unschedulable"] = unschedulable
    assert EXTRACTOR.node(body).cordoned is cordoned


def test_gpu_label_kept_only_for_profile_keys() -> None:
    facts = EXTRACTOR.node(node("n1", gpu_present_label="true", labels={"team": "ml"}))
    assert facts.labels == ((GPU_PRESENT, "true"),)
    assert facts.has_label(GPU_PRESENT, "true")
    assert not facts.has_label("team", "ml")


def test_node_without_status_or_spec() -> None:
    body = {"kind": "Node", "metadata": {"name": "bare"}}
    facts = EXTRACTOR.node(body)
    assert (facts.pool, facts.cordoned, facts.allocatable, facts.instance_type) == (None, False, (), None)


def _set(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    *parents, last = path.split(".")
    target = body
    for part in parents:
        target = target[part]
    target[last] = value
    return body


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda b: _set(b, "metadata.name", None), "Node without metadata.name"),
        (lambda b: _set(b, "metadata.name", ""), "Node without metadata.name"),
        (lambda b: _set(b, "metadata.name", 7), "Node without metadata.name"),
        (lambda b: _set(b, "metadata", "n1"), "Node without metadata"),
        (lambda b: _set(b, "metadata.labels", ["a"]), "Node bad: metadata.labels is not a mapping"),
        (lambda b: _set(b, "status", [1]), "Node bad: spec/status is not a mapping"),
        (lambda b: _set(b, "spec", "x"), "Node bad: spec/status is not a mapping"),
        (lambda b: _set(b, "status.allocatable", ["32"]), "Node bad: status.allocatable is not a mapping"),
        (lambda b: _set(b, "status.capacity", "32"), "Node bad: status.capacity is not a mapping"),
    ],
)
def test_malformed_node_names_the_object(mutate: Any, expected: str) -> None:
    with pytest.raises(FactsError) as caught:
        EXTRACTOR.node(mutate(node("bad")))
    assert str(caught.value) == expected


@pytest.mark.parametrize(
    ("mutate", "resource", "problem", "malformed"),
    [
        (
            lambda b: _set(b, "status.allocatable", {EFA: "lots"}),
            EFA,
            "status.allocatable[vpc.amazonaws.com/efa]: 'lots' is not a quantity",
            True,
        ),
        (
            lambda b: _set(b, "status.capacity", {GPU: "8 GPUs"}),
            GPU,
            "status.capacity[nvidia.com/gpu]: '8 GPUs' is not a quantity",
            True,
        ),
        (
            lambda b: _set(b, "status.allocatable", {EFA: float("inf")}),
            EFA,
            "status.allocatable[vpc.amazonaws.com/efa]: inf is not a quantity",
            True,
        ),
        # Quantities the API server accepts, far beyond any device count.
        (
            lambda b: _set(b, "status.allocatable", {EFA: "1e40"}),
            EFA,
            "status.allocatable[vpc.amazonaws.com/efa]: '1e40' is out of range",
            False,
        ),
        (
            lambda b: _set(b, "status.allocatable", {EFA: "1e30"}),
            EFA,
            "status.allocatable[vpc.amazonaws.com/efa]: '1e30' is out of range (above 2147483647)",
            False,
        ),
        (
            lambda b: _set(b, "status.allocatable", {EFA: 10**40}),
            EFA,
            "status.allocatable[vpc.amazonaws.com/efa]: 1000000000000000000000000000000000000... is out of range",
            False,
        ),
    ],
)
def test_an_unusable_quantity_counts_as_zero_and_is_named(
    mutate: Any, resource: str, problem: str, malformed: bool
) -> None:
    facts = EXTRACTOR.node(mutate(node("bad")))
    assert facts.allocatable_of(resource) == 0 or facts.capacity_of(resource) == 0
    assert facts.problem_with(resource) is not None
    assert facts.problem_with(resource).startswith(problem)  # type: ignore[union-attr]
    assert [entry.malformed for entry in facts.unusable] == [malformed]


def test_the_largest_believable_count_is_kept() -> None:
    facts = EXTRACTOR.node(_set(node("n1"), "status.allocatable", {EFA: str(2**31 - 1)}))
    assert (facts.allocatable_of(EFA), facts.unusable) == (2**31 - 1, ())


def test_invalid_quantity_of_uninteresting_resource_is_ignored() -> None:
    body = _set(node("n1"), "status.allocatable.cpu", "garbage")
    assert EXTRACTOR.node(body).allocatable_of(EFA) == 32


def test_node_body_not_a_mapping() -> None:
    with pytest.raises(FactsError, match=r"^Node is not an object$"):
        EXTRACTOR.node(["not", "a", "node"])  # type: ignore[arg-type]


# --- pods -------------------------------------------------------------------------------


def test_plugin_pod_facts() -> None:
    facts = EXTRACTOR.pod(pod("n1", name="efa-abcde"))
    assert facts is not None
    assert (facts.namespace, facts.name, facts.node_name, facts.daemon_set, facts.ready) == (
        "kube-system",
        "efa-abcde",
        "n1",
        "aws-efa-k8s-device-plugin",
        True,
    )


@pytest.mark.parametrize(
    ("kwargs", "ready"),
    [
        ({}, True),
        ({"phase": "Pending"}, False),
        ({"phase": "Succeeded"}, False),
        ({"phase": "Failed"}, False),
        ({"ready": False}, False),
        ({"deleting": True}, False),
        ({"node_name": None}, False),
    ],
)
def test_plugin_pod_readiness(kwargs: dict[str, Any], ready: bool) -> None:
    arguments: dict[str, Any] = {"node_name": "n1", **kwargs}
    facts = EXTRACTOR.pod(pod(**arguments))
    assert facts is not None
    assert facts.ready is ready


def test_pod_without_ready_condition_is_not_ready() -> None:
    body = pod("n1")
    body["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    facts = EXTRACTOR.pod(body)
    assert facts is not None and facts.ready is False
    del body["status"]["conditions"]
    facts = EXTRACTOR.pod(body)
    assert facts is not None and facts.ready is False


def test_unbound_pod_has_no_node() -> None:
    facts = EXTRACTOR.pod(pod(None, phase="Pending", ready=False))
    assert facts is not None
    assert facts.node_name is None


def test_pod_with_plugin_label_but_no_daemonset_owner_is_not_a_plugin_pod() -> None:
    body = pod("n1", daemon_set_name=None, labels={"app.kubernetes.io/name": "aws-efa-k8s-device-plugin"})
    assert EXTRACTOR.pod(body) is None


@pytest.mark.parametrize(
    "owner",
    [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x"},
        {"apiVersion": "v1", "kind": "Node", "name": "n1"},
        {"apiVersion": "apps/v1", "kind": "DaemonSet"},  # no name
        {"apiVersion": "example.com/v1", "kind": "DaemonSet", "name": "lookalike"},
        "not-a-mapping",
    ],
)
def test_pod_owned_by_something_else_is_not_a_plugin_pod(owner: Any) -> None:
    body = pod("n1")
    body["metadata"]["ownerReferences"] = [owner]
    assert EXTRACTOR.pod(body) is None


def test_pod_owner_found_among_several_references() -> None:
    body = pod("n1", daemon_set_name="my-ds")
    body["metadata"]["ownerReferences"].insert(0, {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"})
    facts = EXTRACTOR.pod(body)
    assert facts is not None and facts.daemon_set == "my-ds"


def test_pod_outside_plugin_namespaces_is_ignored() -> None:
    assert EXTRACTOR.pod(pod("n1", namespace="default")) is None
    rdma = FactsExtractor(build_config({"fabrics": [{"name": "aks-rdma"}]}))
    assert rdma.pod(pod("n1", namespace="default")) is None
    for namespace in ("nvidia-network-operator", "network-operator", "kube-system"):
        facts = rdma.pod(pod("n1", namespace=namespace, daemon_set_name="rdma-shared-dp-ds"))
        assert facts is not None and facts.daemon_set == "rdma-shared-dp-ds"


def test_malformed_plugin_pod_names_the_object() -> None:
    body = pod("n1", name="efa-x")
    body["status"] = "Running"
    with pytest.raises(FactsError, match=r"^Pod kube-system/efa-x: spec/status is not a mapping$"):
        EXTRACTOR.pod(body)
    with pytest.raises(FactsError, match=r"^Pod without metadata$"):
        EXTRACTOR.pod({"kind": "Pod"})


# --- DaemonSets ---------------------------------------------------------------------------


def test_daemon_set_facts() -> None:
    facts = EXTRACTOR.daemon_set(daemon_set())
    assert facts == DaemonSetFacts(
        namespace="kube-system",
        name="aws-efa-k8s-device-plugin",
        labels=(("app.kubernetes.io/instance", "efa"), ("app.kubernetes.io/name", "aws-efa-k8s-device-plugin")),
        template_labels=(("name", "aws-efa-k8s-device-plugin"),),
        tolerations=(Toleration("CriticalAddonsOnly", "Exists", "", ""),),  # the eks-charts chart's default
    )
    assert facts.qualified_name == "kube-system/aws-efa-k8s-device-plugin"


GPU_TAINT = Taint("nvidia.com/gpu", "", "NoSchedule")  # karpenter-blueprints-gpu.yaml's
GPU_TAINT_TRUE = Taint("nvidia.com/gpu", "true", "NoSchedule")  # karpenter-docs-scheduling-gpu.yaml's


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        # k8s.io/api v0.35.4 core/v1/toleration.go ToleratesTaint, case by case.
        (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"), GPU_TAINT_TRUE, True),  # Exists: any value
        (Toleration("nvidia.com/gpu", "Exists", "", ""), Taint("nvidia.com/gpu", "", "NoExecute"), True),  # any effect
        (Toleration("nvidia.com/gpu", "Exists", "", "NoExecute"), GPU_TAINT, False),  # another effect
        (Toleration("nvidia.com/gpu", "Equal", "true", "NoSchedule"), GPU_TAINT_TRUE, True),
        (Toleration("nvidia.com/gpu", "", "true", ""), GPU_TAINT_TRUE, True),  # no operator is Equal
        (Toleration("nvidia.com/gpu", "Equal", "true", ""), GPU_TAINT, False),  # Equal needs the same value
        (Toleration("nvidia.com/gpu", "Equal", "", ""), GPU_TAINT, True),
        (Toleration("", "Exists", "", ""), Taint("aws.amazon.com/neuron", "true", "NoExecute"), True),  # everything
        (Toleration("", "Exists", "", "NoExecute"), GPU_TAINT, False),
        (Toleration("CriticalAddonsOnly", "Exists", "", ""), GPU_TAINT, False),  # the eks-charts default
        (Toleration("nvidia.com/gpu", "Gt", "0", ""), Taint("nvidia.com/gpu", "1", "NoSchedule"), False),  # alpha gate
        (Toleration("nvidia.com/gpu", "Maybe", "", ""), GPU_TAINT, False),
    ],
)
def test_a_toleration_tolerates_a_taint_as_kubernetes_matches_them(
    toleration: Toleration, taint: Taint, tolerated: bool
) -> None:
    assert toleration.tolerates(taint) is tolerated


def test_daemon_set_tolerations_are_read_bounded_and_cleaned() -> None:
    body = daemon_set()
    template_spec = body["spec"]["template"]["spec"]
    template_spec["tolerations"] = [
        {"key": "nvidia.com/gpu\x1b[31m", "operator": "Exists", "effect": "NoSchedule"},
        "not a toleration",
        {"key": "x" * 5000, "operator": "Equal", "value": "v"},
    ]
    template_spec["hostNetwork"] = True
    facts = EXTRACTOR.daemon_set(body)
    assert facts is not None and facts.host_network
    assert facts.tolerations[0] == Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule")
    assert len(facts.tolerations) == 2 and len(facts.tolerations[1].key) <= 316
    template_spec["tolerations"] = [{"key": f"k{n}", "operator": "Exists"} for n in range(MAX_TOLERATIONS + 5)]
    many = EXTRACTOR.daemon_set(body)
    assert many is not None and len(many.tolerations) == MAX_TOLERATIONS  # a cut list tolerates less: errs closed


def test_a_daemon_set_tolerates_node_conditions_and_not_a_users_taint() -> None:
    """The DaemonSet controller adds its own tolerations to every pod it makes (k8s.io/kubernetes
    v1.35.4 daemon/util AddOrUpdateDaemonPodTolerations): node conditions, never a user's taint."""
    facts = EXTRACTOR.daemon_set(daemon_set())
    assert facts is not None
    assert facts.untolerated([Taint("node.kubernetes.io/not-ready", "", "NoExecute")]) is None
    assert facts.untolerated([Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")]) is None
    network = Taint("node.kubernetes.io/network-unavailable", "", "NoSchedule")
    assert facts.untolerated([network]) == network  # only for a pod on the host network
    on_host = EXTRACTOR.daemon_set({**daemon_set(), "spec": {"template": {"spec": {"hostNetwork": True}}}})
    assert on_host is not None and on_host.untolerated([network]) is None
    assert facts.untolerated([Taint("node.kubernetes.io/not-ready", "", "NoSchedule"), GPU_TAINT]) == Taint(
        "node.kubernetes.io/not-ready", "", "NoSchedule"
    )
    assert facts.untolerated([GPU_TAINT]) == GPU_TAINT


def test_daemon_set_outside_plugin_namespaces_is_ignored() -> None:
    assert EXTRACTOR.daemon_set(daemon_set(namespace="default")) is None
    assert EXTRACTOR.daemon_set(daemon_set(namespace="network-operator")) is None


def test_daemon_set_without_labels() -> None:
    body = daemon_set("aws-efa-k8s-device-plugin-daemonset")
    del body["metadata"]["labels"]
    facts = EXTRACTOR.daemon_set(body)
    assert facts is not None and facts.labels == ()


def test_malformed_daemon_set_names_the_object() -> None:
    body = daemon_set("efa-ds")
    body["metadata"]["labels"] = "app=efa"
    with pytest.raises(FactsError, match=r"^DaemonSet kube-system/efa-ds: labels is not a mapping$"):
        EXTRACTOR.daemon_set(body)


def test_extractor_resources_of_interest_follow_enabled_fabrics() -> None:
    neuron = {"aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "aws.amazon.com/neurondevice"}
    # The EFA class's implicit extended resource (KEP-5004) is a request for EFA too.
    implicit = "deviceclass.resource.kubernetes.io/efa.networking.k8s.aws"
    assert EXTRACTOR.resources == frozenset({EFA, GPU, *neuron, implicit})
    # The accelerator labels, and the platform's (EKS Auto Mode) that say who advertises.
    assert EXTRACTOR.label_keys == frozenset({GPU_PRESENT, "eks.amazonaws.com/compute-type"})
    both = FactsExtractor(build_config({"fabrics": [{"name": "efa"}, {"name": "aks-rdma"}]}))
    assert both.resources == frozenset({EFA, GPU, *neuron, implicit, "rdma/hca_shared_devices_a"})
    assert both.plugin_namespaces == frozenset({"kube-system", "network-operator", "nvidia-network-operator"})
