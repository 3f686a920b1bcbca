"""DRA: EFA devices read from DRANET-shaped ResourceSlices, alone and beside device plugins.

The slice bodies come from ``fabriccap_devtools.world.resource_slice``, shaped like the slices
DRANET publishes on EKS (one pool per node named after it, one slice, EFA devices marked by
``dra.net/pciDevice``); see docs/dra.md for where each default comes from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabriccap.cli import commands as cli
from fabriccap.core.config import ConfigError, Source
from fabriccap.core.facts import FactsError, FactsExtractor, IgnoredObjectError, SliceFacts
from fabriccap.core.index import SLICE_FACTS, FactIndex
from support.builders import (
    EFA,
    daemon_set,
    dra_pool,
    dranet_daemon_set,
    dranet_pods,
    evaluate_bodies,
    facts_of,
    kube_list,
    message,
    node,
    only_status,
    plugin_pods,
    reason,
    resource_slice,
)
from support.configs import build_config, default_config

Bodies = list[dict[str, Any]]
EXTRACTOR = FactsExtractor(default_config())


def claim_count(status: Any) -> int:
    """The device count the recommended ResourceClaimTemplate requests."""
    template = status.recommendation.resource_claim_template
    assert template is not None, "no resourceClaimTemplate in the recommendation"
    (request,) = template.spec.devices.requests
    assert request.exactly.device_class_name == "efa.networking.k8s.aws"
    assert request.exactly.allocation_mode == "ExactCount"
    return int(request.exactly.count)


# --- Slice facts --------------------------------------------------------------------------------


def test_a_dranet_slice_keeps_only_its_efa_count() -> None:
    body = resource_slice("n1", efa=32, ena=3)
    facts = EXTRACTOR.resource_slice(body)
    assert facts == SliceFacts(
        name=body["metadata"]["name"],
        driver="dra.net",
        pool="n1",
        generation=1,
        slice_count=1,
        node_name="n1",
        devices=(("efa", 32),),
    )


def test_an_unqualified_attribute_is_in_the_drivers_domain() -> None:
    """The DRA API's rule: ``pciDevice`` published by dra.net is ``dra.net/pciDevice``."""
    body = resource_slice("n1", efa=4)
    for device in body["spec"]["devices"]:
        device["attributes"] = {key.removeprefix("dra.net/"): value for key, value in device["attributes"].items()}
    facts = EXTRACTOR.resource_slice(body)
    assert facts is not None and facts.devices_of("efa") == 4


def test_a_slice_of_another_driver_is_no_concern() -> None:
    assert EXTRACTOR.resource_slice(resource_slice("n1", driver="gpu.nvidia.com")) is None


@pytest.mark.parametrize(
    ("spec_change", "scope"),
    [
        pytest.param({"nodeName": None, "allNodes": True}, "allNodes", id="allNodes"),
        pytest.param(
            {"nodeName": None, "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": []}]}},
            "nodeSelector",
            id="nodeSelector",
        ),
        pytest.param({"nodeName": None}, "no node", id="no-nodeName"),
    ],
)
def test_a_slice_of_no_single_node_is_ignored_with_a_reason(spec_change: dict[str, Any], scope: str) -> None:
    body = resource_slice("n1")
    body["spec"].update(spec_change)
    if body["spec"]["nodeName"] is None:
        del body["spec"]["nodeName"]
    with pytest.raises(IgnoredObjectError) as raised:
        EXTRACTOR.resource_slice(body)
    assert str(raised.value) == (
        f"ResourceSlice {body['metadata']['name']} of driver dra.net has no spec.nodeName ({scope}); "
        "only slices of one node's own devices are counted"
    )


def test_devices_without_attributes_match_nothing_and_are_counted_for_the_log() -> None:
    body = resource_slice("n1", efa=3)
    body["spec"]["devices"].append({"name": "bare"})
    body["spec"]["devices"].append({"name": "empty", "attributes": {}})
    facts = EXTRACTOR.resource_slice(body)
    assert facts is not None
    assert (facts.devices_of("efa"), facts.without_attributes) == (3, 2)


@pytest.mark.parametrize(
    ("pool_change", "problem"),
    [
        pytest.param({"generation": "2"}, "spec.pool.generation '2' is not a count", id="string-generation"),
        pytest.param({"generation": 1.5}, "spec.pool.generation 1.5 is not a count", id="float-generation"),
        pytest.param({"generation": True}, "spec.pool.generation True is not a count", id="bool-generation"),
        pytest.param({"generation": -1}, "spec.pool.generation -1 is not a count", id="negative-generation"),
        pytest.param(
            {"resourceSliceCount": "two"}, "spec.pool.resourceSliceCount 'two' is not a count", id="string-count"
        ),
        pytest.param({"name": ""}, "spec.pool.name is missing", id="no-pool-name"),
    ],
)
def test_an_unreadable_slice_keeps_its_node_and_says_why(pool_change: dict[str, Any], problem: str) -> None:
    body = resource_slice("n1")
    body["spec"]["pool"].update(pool_change)
    facts = EXTRACTOR.resource_slice(body)
    assert facts is not None
    assert facts.node_name == "n1"
    assert facts.problem == f"ResourceSlice {body['metadata']['name']}: {problem}"
    assert facts.devices == ()


def test_devices_that_are_not_a_list_are_a_problem() -> None:
    body = resource_slice("n1")
    body["spec"]["devices"] = {"pci-0": {}}
    facts = EXTRACTOR.resource_slice(body)
    assert facts is not None and facts.problem is not None and "spec.devices is not a list" in facts.problem


def test_a_slice_without_a_spec_is_malformed() -> None:
    with pytest.raises(FactsError, match="ResourceSlice broken: spec is not a mapping"):
        EXTRACTOR.resource_slice({"metadata": {"name": "broken"}, "spec": "nope"})


@pytest.mark.parametrize(
    ("wanted", "raw", "matches"),
    [
        pytest.param("Elastic Fabric Adapter (EFA)", {"string": "Elastic Fabric Adapter (EFA)"}, True, id="string"),
        pytest.param("Elastic Fabric Adapter (EFA)", {"string": "Elastic Network Adapter (ENA)"}, False, id="ena"),
        pytest.param(True, {"bool": True}, True, id="bool"),
        pytest.param(1, {"bool": True}, False, id="int-is-not-bool"),
        pytest.param(True, {"int": 1}, False, id="bool-is-not-int"),
        pytest.param(4, {"int": 4}, True, id="int"),
        pytest.param("x", {"string": "x", "int": 1}, False, id="two-kinds"),
        pytest.param("x", "x", False, id="not-a-value-map"),
        pytest.param("x", {"strings": ["x"]}, False, id="list-kind"),
    ],
)
def test_attribute_matching_is_typed(wanted: Any, raw: Any, matches: bool) -> None:
    config = build_config({"fabrics": [{"name": "efa", "dra": {"attributes": {"dra.net/marker": wanted}}}]})
    (profile,) = config.enabled_fabrics
    assert profile.dra.matches("dra.net", {"dra.net/marker": raw}) is matches


# --- Per-node counts from the index --------------------------------------------------------------


def index_of(*bodies: dict[str, Any]) -> FactIndex:
    return facts_of([node("n1", efa=None), *bodies])


def test_only_the_latest_generation_of_a_pool_counts() -> None:
    old = resource_slice("n1", efa=32, generation=1, name="n1-old")
    new = resource_slice("n1", efa=16, generation=2, name="n1-new")
    devices = index_of(old, new).dra_devices("n1", "efa", ("dra.net",))
    assert (devices.count, devices.problem) == (16, None)


def test_a_pool_published_in_two_slices_counts_once_both_are_in() -> None:
    first = resource_slice("n1", efa=16, slice_count=2, part=0)
    second = resource_slice("n1", efa=16, slice_count=2, part=1)
    partial = index_of(first).dra_devices("n1", "efa", ("dra.net",))
    assert (partial.count, partial.seen) == (0, 16)
    assert partial.problem == "driver dra.net pool n1 has 1 of 2 ResourceSlices of generation 1"
    complete = index_of(first, second).dra_devices("n1", "efa", ("dra.net",))
    assert (complete.count, complete.problem) == (32, None)


def test_pools_of_two_drivers_add_up() -> None:
    dranet = resource_slice("n1", efa=16)
    aws = resource_slice("n1", efa=16, driver="dra.networking.k8s.aws")
    assert index_of(dranet, aws).dra_devices("n1", "efa", ("dra.net", "dra.networking.k8s.aws")).count == 32


def test_a_slice_moving_to_another_node_leaves_the_first() -> None:
    index = index_of(resource_slice("n1", efa=8, name="s"))
    moved = EXTRACTOR.resource_slice(resource_slice("n2", efa=8, name="s"))
    assert moved is not None
    index.put(SLICE_FACTS, moved)
    assert index.dra_devices("n1", "efa", ("dra.net",)).count == 0
    assert index.dra_devices("n2", "efa", ("dra.net",)).count == 8
    assert index.node_slices == {"n2": {"s"}}
    assert index.remove(SLICE_FACTS, "s") and index.node_slices == {}


# --- Evaluation ---------------------------------------------------------------------------------


def test_a_uniform_dra_pool_is_ready_with_a_resource_claim_template() -> None:
    status = only_status(dra_pool(count=32, nodes=3))
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert (status.nodes, status.advertising_nodes, status.uniform_count) == (3, 3, 32)
    assert [(entry.source, entry.nodes) for entry in status.sources] == [("devicePlugin", 0), ("dra", 3)]
    assert status.device_plugin.daemon_sets == ["kube-system/aws-dranet"]
    assert status.device_plugin.ready_nodes == 3
    assert status.recommendation is not None and status.recommendation.resources_per_node is None
    assert claim_count(status) == 32
    assert message(status, "Ready") == (
        "all 3 nodes advertise efa DRA devices: 32 with a Ready DRA driver; "
        "a job may claim up to 32 per node (recommendation.resourceClaimTemplate)"
    )


def test_one_node_with_fewer_devices_is_mixed_counts() -> None:
    bodies = dra_pool(count=32, nodes=3)
    bodies = [b for b in bodies if not (b["kind"] == "ResourceSlice" and b["spec"]["nodeName"] == "d3")]
    bodies.append(resource_slice("d3", efa=31))
    status = only_status(bodies)
    assert reason(status, "Homogeneous") == ("False", "MixedCounts")
    assert reason(status, "Ready") == ("False", "MixedCounts")
    assert "not 32 on d3" in message(status, "Ready")
    assert status.recommendation is None


def test_a_node_without_its_slice_is_a_partial_rollout() -> None:
    bodies = [b for b in dra_pool(nodes=3) if not (b["kind"] == "ResourceSlice" and b["spec"]["nodeName"] == "d2")]
    status = only_status(bodies)
    assert reason(status, "Advertised") == ("False", "PartiallyAdvertised")
    assert reason(status, "Ready") == ("False", "PartialRollout")
    assert status.gap.plugin_ready_not_advertised == 1 and status.gap.nodes == ["d2"]


def test_an_incomplete_pool_is_not_advertising_until_its_second_slice_arrives() -> None:
    bodies = dra_pool(nodes=2)
    bodies = [b for b in bodies if not (b["kind"] == "ResourceSlice" and b["spec"]["nodeName"] == "d2")]
    first = resource_slice("d2", efa=16, slice_count=2, part=0)
    status = only_status([*bodies, first])
    assert reason(status, "Ready") == ("False", "PartialRollout")
    assert "ResourceSlices not counted on d2 (driver dra.net pool d2 has 1 of 2 ResourceSlices of generation 1)" in (
        message(status, "Ready")
    )
    status = only_status([*bodies, first, resource_slice("d2", efa=16, slice_count=2, part=1)])
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert claim_count(status) == 32


def test_a_generation_bump_retires_the_old_slices() -> None:
    bodies = [b for b in dra_pool(nodes=2) if b["kind"] != "ResourceSlice"]
    bodies += [resource_slice("d1", efa=32), resource_slice("d2", efa=32)]
    # d2's driver republished: the old generation (16 devices) is still there, not yet deleted.
    bodies.append(resource_slice("d2", efa=16, generation=0, name="d2-stale"))
    assert reason(only_status(bodies), "Ready") == ("True", "UniformCapability")
    bodies.append(resource_slice("d2", efa=16, generation=2, name="d2-newest"))
    status = only_status(bodies)
    assert reason(status, "Ready") == ("False", "MixedCounts")
    assert [(bucket.count, bucket.nodes) for bucket in status.counts] == [(32, 1), (16, 1)]


def test_slices_of_another_driver_are_ignored() -> None:
    bodies = [b for b in dra_pool(nodes=2) if b["kind"] != "ResourceSlice"]
    bodies += [resource_slice(name, driver="gpu.nvidia.com") for name in ("d1", "d2")]
    status = only_status(bodies)
    assert reason(status, "Ready") == ("False", "NotAdvertised")
    assert message(status, "Advertised") == (
        f"{EFA} advertised on 0 of 2 target nodes, and no ResourceSlice of dra.net, "
        "dra.networking.k8s.aws holds efa devices on them"
    )


def test_ena_devices_of_upstream_dranet_are_not_efa() -> None:
    """Upstream DRANET (no EKS publish filter) also publishes ENA interfaces."""
    bodies = [b for b in dra_pool(nodes=2) if b["kind"] != "ResourceSlice"]
    bodies += [resource_slice(name, efa=32, ena=7) for name in ("d1", "d2")]
    assert only_status(bodies).uniform_count == 32


def test_a_cpu_node_with_dranet_is_no_target() -> None:
    """DRANET runs on CPU nodes too: its pod and an ENA-only slice make nothing an EFA node."""
    cpu = node("c1", pool="general", instance_type="m7i.4xlarge", efa=None, gpu=None)
    evaluation = evaluate_bodies([dranet_daemon_set(), cpu, resource_slice("c1", efa=0, ena=2), *dranet_pods(["c1"])])
    assert evaluation.capabilities == ()


def test_a_pool_mixing_dra_and_device_plugin_nodes_at_one_count_is_ready() -> None:
    bodies: Bodies = [daemon_set(), dranet_daemon_set()]
    bodies += [node("p1", efa=32), node("p2", efa=32), *plugin_pods(["p1", "p2"])]
    bodies += [node("d1", efa=None), node("d2", efa=None), resource_slice("d1"), resource_slice("d2")]
    bodies += dranet_pods(["d1", "d2"])
    status = only_status(bodies)
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert [(entry.source, entry.nodes) for entry in status.sources] == [("devicePlugin", 2), ("dra", 2)]
    assert status.device_plugin.daemon_sets == ["kube-system/aws-dranet", "kube-system/aws-efa-k8s-device-plugin"]
    assert status.device_plugin.ready_nodes == 4
    # Either form schedules only onto the nodes of its own source: both are given, and said.
    assert status.recommendation is not None
    assert status.recommendation.resources_per_node == {EFA: "32"}
    assert claim_count(status) == 32
    ready = message(status, "Ready")
    assert "(advertised through device plugin on 2 nodes, DRA driver on 2 nodes)" in ready
    assert "schedules only onto device-plugin nodes, one with the ResourceClaim only onto DRA nodes" in ready


def test_a_node_advertising_through_both_counts_the_larger() -> None:
    """A device plugin removed after DRANET came can leave a smaller stale allocatable."""
    bodies: Bodies = [daemon_set(), dranet_daemon_set(), node("n1", efa=4), resource_slice("n1", efa=32)]
    bodies += [*plugin_pods(["n1"]), *dranet_pods(["n1"])]
    status = only_status(bodies)
    assert status.uniform_count == 32
    assert [(entry.source, entry.nodes) for entry in status.sources] == [("devicePlugin", 0), ("dra", 1)]
    same: Bodies = [daemon_set(), dranet_daemon_set(), node("n1", efa=32), resource_slice("n1", efa=32)]
    same += plugin_pods(["n1"])  # the device plugin's pod serves it: either provider will do
    status = only_status(same)
    assert [(entry.source, entry.nodes) for entry in status.sources] == [("devicePlugin", 1), ("dra", 1)]
    assert reason(status, "Ready") == ("True", "UniformCapability")


def test_the_driver_daemonset_missing_is_a_device_plugin_gap() -> None:
    bodies = [b for b in dra_pool(nodes=2) if b["kind"] not in ("DaemonSet", "Pod")]
    status = only_status(bodies)
    assert reason(status, "DevicePluginReady") == ("False", "PluginNotInstalled")
    assert message(status, "DevicePluginReady") == (
        "no efa DRA-driver DaemonSet found in namespace kube-system "
        "(selector app=aws-dranet or names aws-dranet, dranet)"
    )
    assert reason(status, "Ready") == ("False", "DevicePluginGap")
    assert status.gap.advertised_without_plugin == 2
    assert status.recommendation is None


def test_a_driver_pod_not_ready_is_named() -> None:
    bodies = [b for b in dra_pool(nodes=2) if b["kind"] != "Pod"]
    bodies += [*dranet_pods(["d1"]), *dranet_pods(["d2"], ready=False)]
    status = only_status(bodies)
    assert reason(status, "DevicePluginReady") == ("False", "PluginNotReady")
    assert message(status, "DevicePluginReady") == "DRA-driver pod not Ready on 1 of 2 nodes: d2"
    assert status.gap.advertised_without_plugin == 1


def test_the_device_plugin_does_not_stand_in_for_the_dra_driver() -> None:
    """On a DRA node it is the driver's pod that must be Ready."""
    bodies = [b for b in dra_pool(nodes=1) if b["kind"] != "Pod"]
    bodies += [daemon_set(), *plugin_pods(["d1"])]
    status = only_status(bodies)
    assert reason(status, "DevicePluginReady") == ("False", "PluginNotScheduled")
    assert message(status, "DevicePluginReady") == "no DRA-driver pod on 1 of 1 nodes: d1"


def test_nothing_installed_names_both_sources() -> None:
    status = only_status([node("n1", efa=None), node("n2", efa=None)])
    assert message(status, "DevicePluginReady") == (
        "no efa device-plugin or DRA-driver DaemonSet found in namespace kube-system (device-plugin: "
        "selector app.kubernetes.io/name=aws-efa-k8s-device-plugin or names aws-efa-k8s-device-plugin, "
        "aws-efa-k8s-device-plugin-daemonset; DRA-driver: selector app=aws-dranet or names aws-dranet, dranet)"
    )


def test_an_unreadable_slice_fails_its_node_closed_and_says_why() -> None:
    bodies = [b for b in dra_pool(nodes=2) if not (b["kind"] == "ResourceSlice" and b["spec"]["nodeName"] == "d2")]
    broken = resource_slice("d2")
    broken["spec"]["pool"]["generation"] = "latest"
    status = evaluate_bodies_lenient([*bodies, broken])
    assert reason(status, "Ready") == ("False", "PartialRollout")
    assert f"ResourceSlices not counted on d2 (ResourceSlice {broken['metadata']['name']}: spec.pool.generation " in (
        message(status, "Ready")
    )


def evaluate_bodies_lenient(bodies: Bodies) -> Any:
    """As the operator reads a cluster: an unreadable slice is kept with its problem."""
    from fabriccap.core.evaluate import evaluate
    from fabriccap.offline.snapshot import add_bodies

    index = FactIndex()
    config = default_config()
    add_bodies(index, FactsExtractor(config), bodies, "cluster", strict_quantities=False)
    (capability,) = evaluate(config, index).capabilities
    return capability.status


def test_a_device_plugin_only_profile_ignores_slices() -> None:
    config = build_config({"fabrics": [{"name": "efa", "sources": ["devicePlugin"]}]})
    evaluation = evaluate_bodies(dra_pool(nodes=2), config)
    (capability,) = evaluation.capabilities
    assert reason(capability.status, "Ready") == ("False", "NotAdvertised")
    assert [(entry.source, entry.nodes) for entry in capability.status.sources] == [("devicePlugin", 0)]


def test_a_dra_only_profile_ignores_allocatable() -> None:
    config = build_config({"fabrics": [{"name": "efa", "sources": ["dra"]}]})
    bodies: Bodies = [daemon_set(), node("n1", efa=32), *plugin_pods(["n1"])]
    (capability,) = evaluate_bodies(bodies, config).capabilities
    assert reason(capability.status, "Advertised") == ("False", "NotAdvertised")
    assert message(capability.status, "Advertised") == (
        "no ResourceSlice of dra.net, dra.networking.k8s.aws holds efa devices on any of 1 target nodes"
    )


# --- Configuration ------------------------------------------------------------------------------


def test_the_efa_profile_reads_both_sources_with_dranet_defaults() -> None:
    (efa, _aks) = default_config().fabrics
    assert efa.sources == (Source.DEVICE_PLUGIN, Source.DRA)
    assert efa.dra.drivers == ("dra.net", "dra.networking.k8s.aws")
    assert efa.dra.attributes == {"dra.net/pciDevice": "Elastic Fabric Adapter (EFA)"}
    assert efa.dra.device_class_name == "efa.networking.k8s.aws"
    assert efa.dra.selector_labels == {"app": "aws-dranet"}
    assert efa.dra.daemon_set_names == ("aws-dranet", "dranet")


def test_a_users_attributes_replace_the_built_in_ones() -> None:
    config = build_config({"fabrics": [{"name": "efa", "dra": {"attributes": {"dra.net/pciSubsystem": "efa1"}}}]})
    assert config.fabrics[0].dra.attributes == {"dra.net/pciSubsystem": "efa1"}
    assert config.fabrics[0].dra.drivers == ("dra.net", "dra.networking.k8s.aws")  # the rest still merges


@pytest.mark.parametrize(
    ("fabric", "complaint"),
    [
        pytest.param(
            {"name": "x", "resource": "x.io/x", "devicePlugin": {"daemonSetNames": ["x"]}, "sources": ["dra"]},
            "dra.drivers must name at least one driver",
            id="no-drivers",
        ),
        pytest.param({"name": "efa", "dra": {"deviceClassName": None}}, "dra.deviceClassName is needed", id="no-class"),
        pytest.param({"name": "efa", "dra": {"attributes": {"pciDevice": "x"}}}, "is not a qualified name", id="bare"),
        pytest.param({"name": "efa", "dra": {"attributes": {"dra.net/a": [1]}}}, "attributes", id="list-value"),
        pytest.param({"name": "efa", "dra": {"drivers": ["Not A Name"]}}, "DRA driver", id="bad-driver"),
        pytest.param({"name": "efa", "sources": ["dra", "dra"]}, "sources must be unique", id="twice"),
        pytest.param({"name": "efa", "sources": []}, "sources", id="none"),
        pytest.param({"name": "efa", "sources": ["cdi"]}, "sources", id="unknown-source"),
        pytest.param({"name": "efa", "dra": {"daemonSetSelector": "app"}}, "daemonSetSelector", id="bad-selector"),
    ],
)
def test_bad_dra_settings_are_refused_in_one_line(fabric: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigError) as raised:
        build_config({"fabrics": [fabric]})
    text = str(raised.value)
    assert complaint in text
    assert "\n" not in text


# --- fabriccap evaluate -------------------------------------------------------------------------


def write_snapshot(tmp_path: Path, bodies: Bodies) -> str:
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(kube_list(bodies)))
    return str(path)


def test_evaluate_reads_resource_slices_from_a_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["evaluate", "-f", write_snapshot(tmp_path, dra_pool(nodes=2)), "--require-ready"]) == 0
    assert "efa-p5" in capsys.readouterr().out


def test_evaluate_warns_about_a_slice_of_no_single_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = resource_slice("d1", name="fabric-wide")
    del shared["spec"]["nodeName"]
    shared["spec"]["allNodes"] = True
    assert cli.main(["evaluate", "-f", write_snapshot(tmp_path, [*dra_pool(nodes=2), shared])]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"warning: {tmp_path / 'snapshot.json'}: ignoring ResourceSlice fabric-wide of driver dra.net has no "
        "spec.nodeName (allNodes); only slices of one node's own devices are counted"
    ]
    assert "True" in captured.out


def test_evaluate_refuses_an_unreadable_slice_in_a_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = resource_slice("d1", name="broken")
    broken["spec"]["pool"]["generation"] = "one"
    assert cli.main(["evaluate", "-f", write_snapshot(tmp_path, [*dra_pool(nodes=1)[:2], broken])]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'snapshot.json'}: ResourceSlice broken: spec.pool.generation 'one' is not a count\n"
    )


def test_evaluate_refuses_a_beta_slice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """v1beta1 nests attributes under ``basic``: read as v1 it would count nothing, silently."""
    beta = resource_slice("d1", name="beta")
    beta["apiVersion"] = "resource.k8s.io/v1beta1"
    assert cli.main(["evaluate", "-f", write_snapshot(tmp_path, [beta])]) == 2
    assert "ResourceSlice beta: apiVersion 'resource.k8s.io/v1beta1' is not resource.k8s.io/v1" in (
        capsys.readouterr().err
    )
