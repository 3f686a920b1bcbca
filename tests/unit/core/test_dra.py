"""DRA: EFA devices read from DRANET-shaped ResourceSlices, alone and beside device plugins.

The slice and claim bodies come from ``fabriccap_devtools.world``, built from DRANET's live EKS
example (one pool per node named after it, one slice, EFA devices marked by ``dra.net/pciDevice``;
a claim allocated as the scheduler writes it); the DeviceClass is the aws-dranet chart's,
rendered from the chart. docs/dra.md says where each default comes from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fabriccap.cli import commands as cli
from fabriccap.core.config import ConfigError, Source
from fabriccap.core.evaluate import evaluate
from fabriccap.core.facts import FactsError, FactsExtractor, IgnoredObjectError, SliceFacts
from fabriccap.core.index import SLICE_FACTS, TAINT_RULE_FACTS, FactIndex
from fabriccap.core.selection import (
    NO_CLASSES,
    ClassError,
    DeviceClassView,
    DeviceCount,
    TaintRuleFacts,
    TaintRules,
)
from fabriccap.core.transport import Verdict
from fabriccap.core.verdicts import FabricVerdict, PodTransport
from fabriccap.kube.kinds import RESOURCE_SLICE
from fabriccap_devtools import upstream
from support.builders import (
    EFA,
    allocated_claim,
    daemon_set,
    device_taint_rule,
    dra_pool,
    dranet_daemon_set,
    dranet_pods,
    efa_device_class,
    evaluate_bodies,
    facts_of,
    kube_list,
    message,
    node,
    only_status,
    plugin_pods,
    pod_id_link_device,
    reason,
    resource_slice,
    workload_pod,
)
from support.configs import build_config, default_config

Bodies = list[dict[str, Any]]
EXTRACTOR = FactsExtractor(default_config())
EFA_CLASS = "efa.networking.k8s.aws"
NO_SUCH_KEY = "selector #0: no such key: pciDevice"


def read_slice(body: dict[str, Any], classes: DeviceClassView = NO_CLASSES) -> SliceFacts | None:
    """A slice as the operator reads it with the cluster's classes (none: the built-in copy)."""
    return EXTRACTOR.resource_slice(body, classes)


def claim_count(status: Any) -> int:
    """The device count the recommended ResourceClaimTemplate requests."""
    template = status.recommendation.resource_claim_template
    assert template is not None, "no resourceClaimTemplate in the recommendation"
    (request,) = template.spec.devices.requests
    assert request.exactly.device_class_name == "efa.networking.k8s.aws"
    assert request.exactly.allocation_mode == "ExactCount"
    return int(request.exactly.count)


# --- Slice facts --------------------------------------------------------------------------------


def test_a_dranet_slice_keeps_its_efa_count_and_device_names() -> None:
    body = resource_slice("n1", efa=32, ena=3)
    facts = read_slice(body)
    assert facts == SliceFacts(
        name=body["metadata"]["name"],
        driver="dra.net",
        pool="n1",
        generation=1,
        slice_count=1,
        node_name="n1",
        devices=(("efa", DeviceCount(32)),),
        device_names=tuple(device["name"] for device in body["spec"]["devices"]),
    )


def test_an_unqualified_attribute_is_in_the_drivers_domain() -> None:
    """The DRA API's rule: ``pciDevice`` published by dra.net is ``dra.net/pciDevice``."""
    body = resource_slice("n1", efa=4)
    for device in body["spec"]["devices"]:
        device["attributes"] = {key.removeprefix("dra.net/"): value for key, value in device["attributes"].items()}
    facts = read_slice(body)
    assert facts is not None and facts.devices_of("efa") == 4


def test_a_slice_of_another_driver_is_kept_and_counts_nothing() -> None:
    """The class decides (it names dra.net); the slice stays, for its pool's completeness."""
    facts = read_slice(resource_slice("n1", driver="gpu.nvidia.com"))
    assert facts is not None and facts.devices == () and facts.devices_of("efa") == 0


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
        read_slice(body)
    assert str(raised.value) == (
        f"ResourceSlice {body['metadata']['name']} of driver dra.net has no spec.nodeName ({scope}); "
        "only slices of one node's own devices are counted"
    )
    # Shared devices of no fabric are no concern at all.
    gpus = resource_slice("n1", driver="gpu.nvidia.com")
    gpus["spec"].update(spec_change)
    assert read_slice(gpus) is None


def test_a_shared_slice_of_devices_taints_keep_from_the_count_is_still_said_to_be_ignored() -> None:
    """The slice holds the fabric's devices all the same: only their count is taken away."""
    body = resource_slice("n1", efa=4)
    del body["spec"]["nodeName"]
    body["spec"]["allNodes"] = True
    index = index_of(device_taint_rule("drain"))
    with pytest.raises(IgnoredObjectError, match=r"has no spec\.nodeName"):
        EXTRACTOR.resource_slice(body, index.class_view())
    for device in body["spec"]["devices"]:
        taint(device, "NoExecute")
    with pytest.raises(IgnoredObjectError, match=r"has no spec\.nodeName"):
        read_slice(body)


def test_devices_the_class_fails_on_are_not_counted_and_kept_as_one_error() -> None:
    """The aws-dranet class reads pciDevice without a guard: a device without it is an error for
    the scheduler (aws/aws-k8s-tester#791), counted here as not selected."""
    body = resource_slice("n1", efa=3, extra_devices=[pod_id_link_device(), {"name": "bare"}])
    facts = read_slice(body)
    assert facts is not None
    assert facts.count_of("efa") == DeviceCount(3, (ClassError(EFA_CLASS, NO_SUCH_KEY, 2, "pod-id-link0"),))


def test_a_re_list_that_changes_nothing_evaluates_nothing() -> None:
    """The per-slice memo: the same resourceVersion read with the same classes is the same facts."""
    extractor = FactsExtractor(default_config())
    body = resource_slice("n1", efa=32, ena=2)
    body["metadata"]["resourceVersion"] = "41"
    first = extractor.resource_slice(body, NO_CLASSES)
    evaluations = extractor.selector.evaluations
    again = extractor.resource_slice(body, NO_CLASSES, known=first)
    assert again is first and extractor.selector.evaluations == evaluations
    # Other classes: the slice is read again (their expressions differ from the copy's).
    stricter = efa_device_class()
    stricter["spec"]["selectors"][0]["cel"]["expression"] += ' && device.attributes["dra.net"].numaNode == 0'
    stricter_facts = extractor.device_class(stricter)
    assert stricter_facts is not None
    reread = extractor.resource_slice(body, DeviceClassView(1, {EFA_CLASS: stricter_facts}), known=first)
    assert reread is not first and reread is not None and reread.devices_of("efa") == 16


def test_a_slice_of_ten_thousand_devices_from_a_snapshot_is_counted() -> None:
    """The API server caps a slice at 128 devices; a snapshot is not bound by it."""
    body = resource_slice("n1", efa=10_000)
    extractor = FactsExtractor(default_config())
    facts = extractor.resource_slice(body, NO_CLASSES)
    assert facts is not None and facts.devices_of("efa") == 10_000
    assert extractor.selector.evaluations == 1


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
    facts = read_slice(body)
    assert facts is not None
    assert facts.node_name == "n1"
    assert facts.problem == f"ResourceSlice {body['metadata']['name']}: {problem}"
    assert facts.devices == ()


def test_devices_that_are_not_a_list_are_a_problem() -> None:
    body = resource_slice("n1")
    body["spec"]["devices"] = {"pci-0": {}}
    facts = read_slice(body)
    assert facts is not None and facts.problem is not None and "spec.devices is not a list" in facts.problem


def test_a_slice_without_a_spec_is_malformed() -> None:
    with pytest.raises(FactsError, match="ResourceSlice broken: spec is not a mapping"):
        read_slice({"metadata": {"name": "broken"}, "spec": "nope"})


# --- DeviceClass and ResourceClaim facts ---------------------------------------------------------


def test_a_device_class_of_the_profile_keeps_its_selectors() -> None:
    facts = EXTRACTOR.device_class(efa_device_class())
    assert facts is not None and facts.name == EFA_CLASS
    assert facts.expressions == (efa_device_class()["spec"]["selectors"][0]["cel"]["expression"],)
    assert (facts.extended_resource_name, facts.problem) == (None, None)


def test_a_device_class_of_no_fabric_is_no_concern_unless_it_maps_the_resource() -> None:
    gpu = {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": []}}
    assert EXTRACTOR.device_class(gpu) is None
    mapping = {
        "metadata": {"name": "other", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"extendedResourceName": EFA},
    }
    facts = EXTRACTOR.device_class(mapping)
    assert facts is not None and (facts.extended_resource_name, facts.created) == (EFA, "2026-01-01T00:00:00Z")


def test_a_device_class_whose_selector_is_unreadable_keeps_the_problem() -> None:
    broken = efa_device_class()
    broken["spec"]["selectors"] = [{"cel": {}}]
    facts = EXTRACTOR.device_class(broken)
    assert facts is not None and facts.problem == "selector #0 has no cel.expression"


def test_a_claim_allocated_as_the_scheduler_writes_it() -> None:
    facts = EXTRACTOR.resource_claim(allocated_claim("n1", ["pci-0000-10-1b-0", "pci-0000-11-1b-0"], name="c"))
    assert facts is not None and facts.node_name == "n1"
    assert [(d.driver, d.pool, d.device, d.device_class) for d in facts.devices] == [
        ("dra.net", "n1", "pci-0000-10-1b-0", EFA_CLASS),
        ("dra.net", "n1", "pci-0000-11-1b-0", EFA_CLASS),
    ]


def test_dranets_own_example_claim_keeps_its_efa_and_not_its_gpu() -> None:
    facts = EXTRACTOR.resource_claim(upstream.example_claim())
    assert facts is not None and facts.node_name == "ip-192-168-153-160.ec2.internal"
    assert [(d.driver, d.device) for d in facts.devices] == [("dra.net", "pci-0000-a0-1b-0")]
    assert facts.device_classes == {"gpu.nvidia.com", EFA_CLASS}


def test_a_claim_of_other_classes_or_not_allocated_keeps_no_devices() -> None:
    gpus = allocated_claim("n1", ["gpu-0"], name="g", device_class="gpu.nvidia.com", driver="gpu.nvidia.com")
    assert EXTRACTOR.resource_claim(gpus) is None
    pending = allocated_claim("n1", ["pci-0000-10-1b-0"], name="p")
    del pending["status"]
    facts = EXTRACTOR.resource_claim(pending)
    assert facts is not None and (facts.node_name, facts.devices) == (None, ())


# --- Per-node counts from the index --------------------------------------------------------------


def index_of(*bodies: dict[str, Any]) -> FactIndex:
    return facts_of([node("n1", efa=None), *bodies])


def dra(index: FactIndex, node_name: str = "n1") -> Any:
    return index.dra_devices(node_name, "efa", (EFA_CLASS,))


def test_only_the_latest_generation_of_a_pool_counts_and_the_older_one_is_named() -> None:
    old = resource_slice("n1", efa=32, generation=1, name="n1-old")
    new = resource_slice("n1", efa=16, generation=2, name="n1-new")
    devices = dra(index_of(old, new))
    assert (devices.count, devices.problem) == (16, None)
    assert devices.notes == ("driver dra.net pool n1: slices of generation 1 ignored (latest 2)",)


def test_a_pool_published_in_two_slices_counts_once_both_are_in() -> None:
    first = resource_slice("n1", efa=16, slice_count=2, part=0)
    second = resource_slice("n1", efa=16, slice_count=2, part=1)
    partial = dra(index_of(first))
    assert (partial.count, partial.seen) == (0, 16)
    assert partial.problem == "driver dra.net pool n1 has 1 of 2 ResourceSlices of generation 1"
    complete = dra(index_of(first, second))
    assert (complete.count, complete.problem) == (32, None)


def test_two_drivers_publishing_one_pool_name_are_two_pools() -> None:
    """A pool is (driver, name): another driver's incomplete pool named after the node, like
    DRANET's, neither completes nor breaks DRANET's. kube-scheduler skips the incomplete pool
    alone and allocates DRANET's 32 (allocator_stable.go allocateOne: ``if pool.IsIncomplete
    || pool.IsInvalid { continue }``), so the node counts 32; the other pool holds none of the
    fabric's devices, so it is a note, not the node's problem."""
    dranet = resource_slice("n1", efa=32)
    other = resource_slice("n1", efa=0, driver="gpu.nvidia.com", slice_count=2, name="n1-gpu")
    devices = dra(index_of(dranet, other))
    assert (devices.count, devices.problem) == (32, None)
    assert devices.notes == (
        "driver gpu.nvidia.com pool n1 has 1 of 2 ResourceSlices of generation 1: not counted, as the"
        " scheduler skips it; it holds no efa device",
    )
    complete = resource_slice("n1", efa=0, driver="gpu.nvidia.com", slice_count=2, part=1, name="n1-gpu-2")
    assert dra(index_of(dranet, other, complete)) == replace(devices, notes=())


def test_a_generation_that_goes_back_is_counted_as_the_scheduler_does_and_said() -> None:
    index = index_of(resource_slice("n1", efa=32, generation=5, name="s"))
    # Through the kind's row, as the informers and snapshots read it: the held facts are known.
    RESOURCE_SLICE.upsert(index, EXTRACTOR, resource_slice("n1", efa=16, generation=1, name="s"))
    devices = dra(index)
    assert devices.count == 16
    assert devices.notes == ("ResourceSlice s: generation went back from 5 to 1; counted, as the scheduler counts it",)
    RESOURCE_SLICE.upsert(index, EXTRACTOR, resource_slice("n1", efa=16, generation=2, name="s"))
    assert dra(index).notes == ()


def test_a_slice_moving_to_another_node_leaves_the_first() -> None:
    index = index_of(resource_slice("n1", efa=8, name="s"))
    moved = EXTRACTOR.resource_slice(resource_slice("n2", efa=8, name="s"), NO_CLASSES)
    assert moved is not None
    index.put(SLICE_FACTS, moved)
    assert dra(index, "n1").count == 0
    assert dra(index, "n2").count == 8
    assert index.node_slices == {"n2": {"s"}}
    assert index.remove(SLICE_FACTS, "s") and index.node_slices == {}


def efa_names(count: int, first: int = 0) -> list[str]:
    return [f"pci-0000-{0x10 + index:02x}-1b-0" for index in range(first, first + count)]


def test_devices_a_claim_holds_count_after_the_driver_drops_them() -> None:
    """DRANET drops an interface it moved into a pod's namespace (google/dranet#97): the pool
    must not look shrunk because jobs run."""
    shrunk = resource_slice("n1", efa=32)
    shrunk["spec"]["devices"] = shrunk["spec"]["devices"][4:]  # four allocated and moved
    claim = allocated_claim("n1", efa_names(4), name="job-0-efa")
    devices = dra(index_of(shrunk, claim))
    assert (devices.count, devices.allocated, devices.seen) == (32, 4, 32)
    # A device still published is counted from its slice, not twice.
    both = allocated_claim("n1", efa_names(2, first=4), name="job-1-efa")
    assert dra(index_of(shrunk, claim, both)).count == 32
    # The claim released: the driver publishes the devices again, and nothing counts from it.
    assert dra(index_of(resource_slice("n1", efa=32))).count == 32


def test_only_claims_of_the_fabrics_classes_on_the_node_count() -> None:
    shrunk = resource_slice("n1", efa=28)
    gpus = allocated_claim("n1", ["gpu-0"], name="g", device_class="gpu.nvidia.com", driver="gpu.nvidia.com")
    elsewhere = allocated_claim("n2", efa_names(4, first=28), name="on-n2", pool="n1")
    shared = [allocated_claim("n1", efa_names(1, first=28), name=f"twice-{i}") for i in range(2)]
    devices = dra(index_of(shrunk, gpus, elsewhere, *shared))
    assert (devices.count, devices.allocated) == (29, 1)


def test_a_deleted_claim_stops_counting() -> None:
    index = index_of(resource_slice("n1", efa=28), allocated_claim("n1", efa_names(4, first=28), name="c"))
    assert dra(index).count == 32
    assert index.remove_claim("default", "c") and dra(index).count == 28


def test_a_node_with_only_an_incomplete_pool_counts_no_claim_either() -> None:
    partial = resource_slice("n1", efa=12, slice_count=2)
    devices = dra(index_of(partial, allocated_claim("n1", efa_names(4, first=100), name="c")))
    assert (devices.count, devices.seen) == (0, 16)


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
        f"{EFA} advertised on 0 of 2 target nodes, and no ResourceSlice device that {EFA_CLASS} selects is on them"
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


def mixed_pool(device_class: dict[str, Any] | None = None) -> Bodies:
    """Two nodes through the device plugin, two through DRANET, all at 32."""
    bodies: Bodies = [device_class or efa_device_class(), daemon_set(), dranet_daemon_set()]
    bodies += [node("p1", efa=32), node("p2", efa=32), *plugin_pods(["p1", "p2"])]
    bodies += [node("d1", efa=None), node("d2", efa=None), resource_slice("d1"), resource_slice("d2")]
    return bodies + dranet_pods(["d1", "d2"])


def test_a_pool_mixing_dra_and_device_plugin_nodes_is_mixed_sources() -> None:
    """No one request schedules on every node: the extended resource only onto the device-plugin
    nodes, the claim only onto the DRA nodes."""
    status = only_status(mixed_pool())
    assert reason(status, "Homogeneous") == ("True", "UniformCount")
    assert reason(status, "Ready") == ("False", "MixedSources")
    assert [(entry.source, entry.nodes) for entry in status.sources] == [("devicePlugin", 2), ("dra", 2)]
    assert status.device_plugin.daemon_sets == ["kube-system/aws-dranet", "kube-system/aws-efa-k8s-device-plugin"]
    assert status.recommendation is None
    assert message(status, "Ready") == (
        f"all 4 nodes advertise {EFA} or efa DRA devices: 32 (through device plugin on 2 nodes, DRA driver on 2"
        " nodes), but no one request schedules on every node: a pod asking for the extended resource schedules"
        " only onto 2 nodes (p1, p2); one with the ResourceClaim only onto 2 nodes (d1, d2); map"
        f" {EFA} to DeviceClass {EFA_CLASS} with spec.extendedResourceName (KEP-5004, feature gate"
        " DRAExtendedResource) or move the pool to one source"
    )


def test_mapping_the_resource_to_the_class_makes_a_mixed_pool_ready_with_resources_per_node() -> None:
    """KEP-5004: with the class's extendedResourceName, ``vpc.amazonaws.com/efa: 32`` is served from
    the DRA nodes' devices too (their allocatable holds none of it)."""
    status = only_status(mixed_pool(efa_device_class(extended_resource_name=EFA)))
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert status.recommendation is not None
    assert status.recommendation.resources_per_node == {EFA: "32"}
    assert status.recommendation.resource_claim_template is None  # a claim schedules on the DRA nodes only
    assert message(status, "Ready").endswith(
        f"a job may request up to 32 per node ({EFA} is served from DRA devices too: DeviceClass {EFA_CLASS} maps"
        " it with spec.extendedResourceName)"
    )


def test_a_dra_pool_whose_class_maps_the_resource_takes_either_request() -> None:
    bodies = [b for b in dra_pool(nodes=2) if b["kind"] != "DeviceClass"]
    status = only_status([efa_device_class(extended_resource_name=EFA), *bodies])
    assert status.recommendation is not None
    assert status.recommendation.resources_per_node == {EFA: "32"}
    assert claim_count(status) == 32


def test_a_node_advertising_through_both_is_an_advertiser_conflict() -> None:
    """AWS: do not run the EFA device plugin where the EFA DRA driver runs (silent oversubscription)."""
    bodies: Bodies = [efa_device_class(), daemon_set(), dranet_daemon_set()]
    bodies += [node("n1", efa=32), resource_slice("n1", efa=32), node("n2", efa=32), *plugin_pods(["n1", "n2"])]
    bodies += dranet_pods(["n1"])
    status = only_status(bodies)
    assert reason(status, "Homogeneous") == ("True", "UniformCount")
    assert reason(status, "Ready") == ("False", "AdvertiserConflict")
    assert (status.gap.conflicting_advertisers, status.gap.nodes) == (1, ["n1"])
    assert status.recommendation is None
    assert message(status, "Ready") == (
        "1 of 2 nodes advertise efa through both the device plugin and the DRA driver (n1: device plugin 32,"
        f" DRA driver 32): n1; the same devices can be handed out twice, to a pod asking for {EFA} and to a"
        " ResourceClaim; remove one of the two from these nodes (docs/runbook.md, FabricAdvertiserConflict)"
    )


def test_a_conflicting_node_counts_the_larger_of_its_two_sources() -> None:
    """A device plugin left behind after DRANET came can leave a smaller stale allocatable."""
    bodies: Bodies = [efa_device_class(), daemon_set(), dranet_daemon_set(), node("n1", efa=4)]
    bodies += [resource_slice("n1", efa=32), *plugin_pods(["n1"]), *dranet_pods(["n1"])]
    status = only_status(bodies)
    assert status.uniform_count == 32
    assert [(entry.source, entry.nodes) for entry in status.sources] == [("devicePlugin", 0), ("dra", 1)]
    assert reason(status, "Ready") == ("False", "AdvertiserConflict")


def test_the_built_in_copy_counts_when_the_cluster_lacks_the_class_and_the_status_says_so() -> None:
    status = only_status([b for b in dra_pool(nodes=2) if b["kind"] != "DeviceClass"])
    assert reason(status, "Ready") == ("True", "UniformCapability")
    note = (
        f"DeviceClass {EFA_CLASS} is not in the cluster: counted with the aws-dranet-1.0.0 chart's copy, but"
        " ResourceClaims of it cannot be allocated until it is installed"
    )
    assert message(status, "Advertised").endswith(f"; {note}")
    assert message(status, "Ready").endswith(f"; {note}")


def test_a_device_the_class_fails_on_is_not_counted_and_the_status_says_what_the_scheduler_does() -> None:
    """DRANET published pod-id-link0 next to the EFA devices (aws/aws-k8s-tester#791)."""
    bodies = [b for b in dra_pool(nodes=2) if b["kind"] != "ResourceSlice"]
    bodies += [resource_slice(name, efa=32, extra_devices=[pod_id_link_device()]) for name in ("d1", "d2")]
    status = only_status(bodies)
    assert (reason(status, "Ready"), status.uniform_count) == (("True", "UniformCapability"), 32)
    failure = (
        f"DeviceClass {EFA_CLASS} {NO_SUCH_KEY} on 2 devices of 2 nodes (e.g. d1 device pod-id-link0): not counted;"
        " kube-scheduler aborts scheduling a pod whose claim of this class meets such a device (FailedScheduling,"
        " PodScheduled=False SchedulerError), so fix the class or the devices"
    )
    assert message(status, "Advertised").endswith(f"; {failure}")
    assert message(status, "Ready").count(NO_SUCH_KEY) == 1


def test_a_cluster_class_that_does_not_compile_selects_nothing_and_says_why() -> None:
    broken = efa_device_class()
    broken["spec"]["selectors"][0]["cel"]["expression"] = 'device.driver == "dra.net" &&'
    status = only_status([broken, *[b for b in dra_pool(nodes=2) if b["kind"] != "DeviceClass"]])
    assert reason(status, "Ready") == ("False", "NotAdvertised")
    assert f"; DeviceClass {EFA_CLASS} selects nothing: selector #0: compile error: 1:30: Syntax error" in (
        message(status, "Advertised")
    )


def test_a_stricter_class_is_what_counts_not_the_attribute_map() -> None:
    """The case that agrees with the scheduler only because the class's CEL is evaluated: an admin
    keeps EFA claims on NUMA node 0. The attribute map of the first DRA release (pciDevice alone)
    would count 32 per node; the class selects 16, and the scheduler allocates no more."""
    stricter = efa_device_class()
    stricter["spec"]["selectors"][0]["cel"]["expression"] += ' && device.attributes["dra.net"].numaNode == 0'
    old_config = build_config(
        {"fabrics": [{"name": "efa", "dra": {"attributes": {"dra.net/pciDevice": "Elastic Fabric Adapter (EFA)"}}}]}
    )
    bodies = [stricter, *[b for b in dra_pool(nodes=2) if b["kind"] != "DeviceClass"]]
    status = only_status(bodies, old_config)
    assert status.uniform_count == 16 and claim_count(status) == 16


def test_devices_held_by_claims_keep_a_busy_node_uniform() -> None:
    bodies = [b for b in dra_pool(nodes=2) if b["kind"] != "ResourceSlice"]
    busy = resource_slice("d1", efa=32)
    busy["spec"]["devices"] = busy["spec"]["devices"][8:]
    bodies += [busy, resource_slice("d2", efa=32), allocated_claim("d1", efa_names(8), name="job-efa")]
    status = only_status(bodies)
    assert (reason(status, "Ready"), status.uniform_count) == (("True", "UniformCapability"), 32)
    assert "; ResourceSlices: d1: 8 allocated to ResourceClaims and no longer in its ResourceSlices" in (
        message(status, "Advertised")
    )


def test_a_stale_generation_is_named_in_the_status() -> None:
    bodies = [*dra_pool(nodes=1), resource_slice("d1", efa=16, generation=0, name="d1-stale")]
    status = only_status(bodies)
    assert status.uniform_count == 32
    assert message(status, "Advertised").endswith(
        "; ResourceSlices: d1: driver dra.net pool d1: slices of generation 0 ignored (latest 1)"
    )


def test_the_driver_daemonset_missing_is_a_device_plugin_gap() -> None:
    bodies = [b for b in dra_pool(nodes=2) if b["kind"] not in ("DaemonSet", "Pod")]
    status = only_status(bodies)
    assert reason(status, "DevicePluginReady") == ("False", "PluginNotInstalled")
    assert message(status, "DevicePluginReady") == (
        "no efa DRA-driver DaemonSet found in namespace kube-system "
        "(selector app=aws-dranet or app=dranet or names aws-dranet, dranet)"
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
        "aws-efa-k8s-device-plugin-daemonset; DRA-driver: selector app=aws-dranet or app=dranet or names aws-dranet,"
        " dranet)"
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
        f"no ResourceSlice device that {EFA_CLASS} selects is on any of 1 target nodes"
    )


# --- Configuration ------------------------------------------------------------------------------


def test_the_efa_profile_reads_both_sources_with_dranet_defaults() -> None:
    (efa, _aks) = default_config().fabrics
    assert efa.sources == (Source.DEVICE_PLUGIN, Source.DRA)
    assert efa.dra.device_class_names == (EFA_CLASS,)
    (copy,) = efa.dra.device_classes
    assert copy.model_dump(by_alias=True, exclude_defaults=False)["metadata"]["name"] == EFA_CLASS
    assert copy.expressions == tuple(s["cel"]["expression"] for s in efa_device_class()["spec"]["selectors"])
    assert efa.dra.attributes == {} and efa.dra.attribute_selector is None
    assert efa.dra.selector_label_sets == [{"app": "aws-dranet"}, {"app": "dranet"}]
    assert efa.dra.daemon_set_names == ("aws-dranet", "dranet")


def test_the_first_releases_dra_settings_are_still_read() -> None:
    config = build_config(
        {
            "fabrics": [
                {
                    "name": "efa",
                    "dra": {
                        "deviceClassName": "efa.example.com",
                        "drivers": ["dra.net"],
                        "attributes": {"dra.net/pciSubsystem": "efa1"},
                        "daemonSetSelector": "app=my-dranet",
                    },
                }
            ]
        }
    )
    dra = config.fabrics[0].dra
    assert dra.device_class_names == ("efa.example.com",)
    assert dra.selector_label_sets == [{"app": "my-dranet"}]
    assert dra.attribute_selector == (
        'device.driver in ["dra.net"] && has(device.attributes["dra.net"].pciSubsystem) && '
        'type(device.attributes["dra.net"].pciSubsystem) == string && '
        'device.attributes["dra.net"].pciSubsystem == "efa1"'
    )


@pytest.mark.parametrize(
    ("fabric", "complaint"),
    [
        pytest.param(
            {"name": "x", "resource": "x.io/x", "devicePlugin": {"daemonSetNames": ["x"]}, "sources": ["dra"]},
            "dra.deviceClassNames must name at least one DeviceClass",
            id="no-class",
        ),
        pytest.param(
            {"name": "efa", "dra": {"deviceClassName": None}},
            "dra.deviceClassNames.0: Input should be",
            id="null-class",
        ),
        pytest.param(
            {"name": "efa", "dra": {"deviceClassNames": ["a"], "deviceClassName": "b"}}, "not both", id="both-names"
        ),
        pytest.param({"name": "efa", "dra": {"attributes": {"pciDevice": "x"}}}, "is not a qualified name", id="bare"),
        pytest.param({"name": "efa", "dra": {"attributes": {"dra.net/a": [1]}}}, "attributes", id="list-value"),
        pytest.param(
            {"name": "efa", "dra": {"drivers": [], "attributes": {"dra.net/a": 1}}}, "give drivers too", id="no-drivers"
        ),
        pytest.param({"name": "efa", "dra": {"drivers": ["Not A Name"]}}, "DRA driver", id="bad-driver"),
        pytest.param({"name": "efa", "sources": ["dra", "dra"]}, "sources must be unique", id="twice"),
        pytest.param({"name": "efa", "sources": []}, "sources", id="none"),
        pytest.param({"name": "efa", "sources": ["cdi"]}, "sources", id="unknown-source"),
        pytest.param({"name": "efa", "dra": {"daemonSetSelector": "app"}}, "daemonSetSelector", id="bad-selector"),
        pytest.param(
            {"name": "efa", "dra": {"daemonSetSelector": ["app=a", "b"]}}, "daemonSetSelector", id="bad-in-list"
        ),
        pytest.param(
            {
                "name": "efa",
                "dra": {
                    "deviceClasses": [
                        {"metadata": {"name": "c.example.com"}, "spec": {"selectors": [{"cel": {"expression": "1"}}]}}
                    ]
                },
            },
            "DeviceClass c.example.com: selector #0: must evaluate to bool, not int",
            id="copy-not-bool",
        ),
        pytest.param(
            {"name": "efa", "dra": {"deviceClasses": [{"metadata": {"name": "Not_A_Name"}}]}},
            "DeviceClass name",
            id="copy-bad-name",
        ),
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


@pytest.mark.parametrize("api_version", ["resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3"])
def test_a_snapshot_holds_device_taint_rules_in_either_version_read_before_the_slices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], api_version: str
) -> None:
    """kubectl prints the rules in the version its server serves (v1beta2 from 1.36, v1alpha3
    before); listed after the slices in the file, they are still read first."""
    rule = device_taint_rule("maintenance", effect="NoExecute", api_version=api_version)
    snapshot = write_snapshot(tmp_path, [*dra_pool(count=32, nodes=2), rule])
    assert cli.main(["evaluate", "-f", snapshot, "-o", "json"]) == 0
    (published,) = json.loads(capsys.readouterr().out)["items"]
    ready = next(condition for condition in published["status"]["conditions"] if condition["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "NotAdvertised")
    unknown = device_taint_rule("other", api_version="resource.k8s.io/v1")
    assert cli.main(["evaluate", "-f", write_snapshot(tmp_path, [unknown])]) == 2
    assert (
        "DeviceTaintRule other: apiVersion 'resource.k8s.io/v1' is not"
        " resource.k8s.io/v1beta2 or resource.k8s.io/v1alpha3" in capsys.readouterr().err
    )


# --- Workloads: what counts as asking for the fabric under DRA --------------------------------


def requesting(bodies: Bodies) -> int:
    workloads = only_status(bodies).workloads
    assert workloads is not None
    return workloads.requesting_fabric.pods


def test_a_pod_asking_for_the_classs_implicit_extended_resource_asks_for_the_fabric() -> None:
    """KEP-5004: every DeviceClass can be requested as deviceclass.resource.kubernetes.io/<class>."""
    pod_body = workload_pod("d1", "trainer-0", efa=None)
    pod_body["spec"]["containers"][0]["resources"]["limits"][f"deviceclass.resource.kubernetes.io/{EFA_CLASS}"] = "8"
    assert requesting([*dra_pool(nodes=1), pod_body]) == 1


def test_the_claim_the_scheduler_made_for_an_extended_resource_counts_as_a_request() -> None:
    """A pod asking for an extended resource the cluster maps to the EFA class (here one the
    profile does not know) gets a claim made by the scheduler; its status names it."""
    mapped = efa_device_class(extended_resource_name="example.com/efa")
    pod_body = workload_pod("d1", "trainer-0", efa=None)
    pod_body["spec"]["containers"][0]["resources"]["limits"]["example.com/efa"] = "8"
    pod_body["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "trainer-0-extended-resources-abcde",
        "requestMappings": [{"containerName": "node", "resourceName": "example.com/efa", "requestName": "container-0"}],
    }
    claim = allocated_claim("d1", [], name="trainer-0-extended-resources-abcde", namespace="ml", pod_name="trainer-0")
    pool = [mapped, *[b for b in dra_pool(nodes=1) if b["kind"] != "DeviceClass"], claim]
    assert requesting([*pool, pod_body]) == 1
    del pod_body["status"]["extendedResourceClaimStatus"]
    assert requesting([*pool, pod_body]) == 0  # served by nothing the operator can see: not the fabric


def test_a_kep_5004_pod_whose_nccl_uses_sockets_does_not_use_the_fabric() -> None:
    """With transport on, a pod whose ``vpc.amazonaws.com/efa: 32`` the scheduler served from the
    DRA class (KEP-5004) requests the fabric like a device-plugin pod: its log read as sockets makes
    it FabricNotUsed, and read as the fabric it counts there."""
    config = build_config({"transport": {"enabled": True}})
    pod_body = workload_pod("d1", "trainer-0", efa=32)
    pod_body["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "trainer-0-extended-resources-abcde",
        "requestMappings": [{"containerName": "node", "resourceName": EFA, "requestName": "container-0"}],
    }
    claim = allocated_claim("d1", [], name="trainer-0-extended-resources-abcde", namespace="ml", pod_name="trainer-0")
    pool = [efa_device_class(extended_resource_name=EFA), *[b for b in dra_pool(nodes=1) if b["kind"] != "DeviceClass"]]
    uid = pod_body["metadata"]["uid"]
    for verdict, problems in ((Verdict.SOCKET, [("Pod", "trainer-0", "FabricNotUsed")]), (Verdict.FABRIC, [])):
        index = facts_of([*pool, claim, pod_body], config)
        index.put_transport(("ml", "trainer-0"), PodTransport(uid, (FabricVerdict("efa", verdict, "line", True),)))
        (found,) = evaluate(config, index).capabilities
        workloads = found.status.workloads
        assert workloads is not None and workloads.transport is not None
        assert workloads.requesting_fabric.pods == 1
        counted = workloads.transport.socket if verdict is Verdict.SOCKET else workloads.transport.fabric
        assert (counted.pods, counted.requesting_fabric_pods) == (1, 1)
        assert [(o.kind, o.name, o.problem) for o in workloads.offenders] == problems


# --- What kube-scheduler's DRA allocator refuses, which must not be counted ---------------------


def without_slices(bodies: Bodies) -> Bodies:
    return [body for body in bodies if body["kind"] != "ResourceSlice"]


def taint(device: dict[str, Any], effect: str) -> None:
    device["taints"] = [{"key": "example.com/unhealthy", "value": "true", "effect": effect}]


def test_tainted_devices_are_not_counted_and_said() -> None:
    """The allocator skips a device whose taints the request does not tolerate
    (allocator_stable.go allocateDevice: ``!allTaintsTolerated(device, request)``), and the
    recommended claim carries no tolerations."""
    body = resource_slice("n1", efa=32)
    for device in body["spec"]["devices"][:8]:
        taint(device, "NoSchedule")
    for device in body["spec"]["devices"][8:16]:
        taint(device, "NoExecute")
    for device in body["spec"]["devices"][16:20]:
        taint(device, "None")  # informational: allocatable
    facts = read_slice(body)
    assert facts is not None
    assert facts.count_of("efa") == DeviceCount(16, (), 16)
    devices = dra(index_of(body))
    assert (devices.count, devices.seen, devices.problem) == (16, 32, None)
    assert devices.notes == (
        "driver dra.net pool n1: 16 devices with a NoSchedule or NoExecute taint not counted"
        " (the recommended claim tolerates none)",
    )


def test_a_pool_whose_devices_are_all_tainted_is_not_ready() -> None:
    bodies = without_slices(dra_pool(count=32, nodes=2))
    for name in ("d1", "d2"):
        body = resource_slice(name, efa=32)
        for device in body["spec"]["devices"]:
            taint(device, "NoExecute")
        bodies.append(body)
    status = only_status(bodies)
    assert reason(status, "Ready")[0] == "False"
    assert status.recommendation is None
    assert "32 devices with a NoSchedule or NoExecute taint not counted" in message(status, "Ready")


def test_devices_a_device_taint_rule_taints_are_not_counted_and_the_rule_is_named() -> None:
    """A DeviceTaintRule "has the same effect as if the taint was specified directly in the
    ResourceSlice" (k8s.io/api@v0.35.4 resource/v1alpha3): the recommended claim cannot get
    the devices it matches, and the note says which rule took them."""
    body = resource_slice("n1", efa=32)
    first = body["spec"]["devices"][0]["name"]
    rules = [
        device_taint_rule("drain-one", device=first, pool="n1"),
        device_taint_rule("elsewhere", pool="n2", effect="NoExecute"),
        device_taint_rule("informational", effect="None"),
    ]
    devices = dra(index_of(*rules, body))
    assert (devices.count, devices.seen, devices.problem) == (31, 32, None)
    assert devices.notes == (
        "driver dra.net pool n1: 1 device tainted by DeviceTaintRule drain-one (NoSchedule) not counted"
        " (the recommended claim tolerates none)",
    )


@pytest.mark.parametrize("metadata", [{}, {"name": ""}, {"name": 7}, {"name": "\u202e"}, {"name": "\x1b[0m"}])
def test_a_rule_without_a_name_is_refused(metadata: dict[str, Any]) -> None:
    """Rules are kept by name: two nameless ones in a snapshot took each other's place, and
    which was lost (a pool Ready or not) hung on their order (hostile review 63 F3). A live API
    server names every object; only a hand-made snapshot has none. A name cleaned to nothing is
    none either (review of the fixes, L4)."""
    body = device_taint_rule("x", driver=None)
    body["metadata"] = metadata
    with pytest.raises(FactsError, match=r"^DeviceTaintRule without metadata.name$"):
        EXTRACTOR.device_taint_rule(body)


def test_a_rule_read_after_the_slices_reads_them_again() -> None:
    """The operator's order: a rule created while the slices are held changes what slices are
    read with, so each is read again (the informer lists them again on that announcement)."""
    body = resource_slice("n1", efa=32)
    index = index_of(body)
    assert dra(index).count == 32
    before = EXTRACTOR.selection_signature(index.class_view())
    rule = EXTRACTOR.device_taint_rule(device_taint_rule("drain-n1", pool="n1"))
    assert rule is not None
    index.put(TAINT_RULE_FACTS, rule)
    assert EXTRACTOR.selection_signature(index.class_view()) != before
    RESOURCE_SLICE.upsert(index, EXTRACTOR, body)
    assert dra(index).count == 0
    index.remove(TAINT_RULE_FACTS, "drain-n1")
    RESOURCE_SLICE.upsert(index, EXTRACTOR, body)
    assert dra(index).count == 32


def test_only_a_rule_that_can_change_a_count_reads_the_slices_again() -> None:
    """The aws-dranet class selects only dra.net devices (``device.driver == "dra.net" && ...``):
    a GPU driver's rule, or a rule's effect going from one that blocks to another, changes no
    count, so the slices keep the signature they were read with (each change of it lists every
    slice again). A rule of dra.net's, or of no driver, changes it."""
    index = index_of()

    def signature_with(*bodies: dict[str, Any]) -> Any:
        for body in bodies:
            rule = EXTRACTOR.device_taint_rule(body)
            assert rule is not None
            index.put(TAINT_RULE_FACTS, rule)
        return EXTRACTOR.selection_signature(index.class_view())

    before = signature_with()
    gpu = device_taint_rule("xid-79", pool="n9", effect="NoExecute")
    gpu["spec"]["deviceSelector"]["driver"] = "gpu.nvidia.com"
    assert signature_with(gpu) == before
    drain = device_taint_rule("drain-n1", pool="n1")
    with_drain = signature_with(drain)
    assert with_drain != before
    assert signature_with(device_taint_rule("drain-n1", pool="n1", effect="NoExecute")) == with_drain
    anywhere = device_taint_rule("everything")
    del anywhere["spec"]["deviceSelector"]
    assert signature_with(anywhere) != with_drain


def test_a_pool_whose_devices_a_rule_taints_is_not_ready_and_says_which_rule() -> None:
    """Before DeviceTaintRules were read, this pool was Ready while the scheduler would give
    none of its devices (fail open)."""
    bodies = [device_taint_rule("dranet-maintenance", effect="NoExecute"), *dra_pool(count=32, nodes=2)]
    status = only_status(bodies)
    assert reason(status, "Ready")[0] == "False"
    assert status.recommendation is None
    assert "32 devices tainted by DeviceTaintRule dranet-maintenance (NoExecute) not counted" in message(
        status, "Ready"
    )


def test_a_listing_of_rules_builds_the_view_once_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the view's rules on every put made a LIST of R rules quadratic (review 62 F5:
    8,000 rules took 16 s): it is built when next read."""
    built = []

    class Counted(TaintRules):
        def __init__(self, rules: Iterable[TaintRuleFacts] = ()) -> None:
            built.append(1)
            super().__init__(rules)

    monkeypatch.setattr("fabriccap.core.index.TaintRules", Counted)
    index = index_of()
    for number in range(50):
        rule = EXTRACTOR.device_taint_rule(device_taint_rule(f"drain-{number}", pool=f"n{number}"))
        assert rule is not None
        index.put(TAINT_RULE_FACTS, rule)
    view = index.class_view()
    assert index.class_view() is view and len(view.taint_rules) == 50
    assert len(built) == 1


def test_a_rule_taints_devices_allocated_and_no_longer_published_too() -> None:
    """A rule matches on (driver, pool, device), all of which an allocation result gives
    (KEP-5055: the eviction controller "needs to handle allocated devices where a
    DeviceTaintRule causes eviction when there is no ResourceSlice"): a pool under maintenance
    counts none of them whether its jobs still run or not."""
    rule = device_taint_rule("drain-n1", pool="n1")
    held = resource_slice("n1", efa=32)
    held["spec"]["devices"] = []  # a job holds all 32: DRANET moved them into its pod
    devices = dra(index_of(rule, held, allocated_claim("n1", efa_names(32), name="job-0-efa")))
    assert (devices.count, devices.allocated, devices.seen) == (0, 0, 32)
    assert devices.notes == (
        "driver dra.net pool n1: 32 devices tainted by DeviceTaintRule drain-n1 (NoSchedule) not counted"
        " (the recommended claim tolerates none)",
    )
    half = resource_slice("n1", efa=32)
    half["spec"]["devices"] = half["spec"]["devices"][16:]
    devices = dra(index_of(rule, half, allocated_claim("n1", efa_names(16), name="job-0-efa")))
    assert (devices.count, devices.allocated, devices.seen) == (0, 0, 32)
    assert devices.notes == (
        "driver dra.net pool n1: 32 devices tainted by DeviceTaintRule drain-n1 (NoSchedule) not counted"
        " (the recommended claim tolerates none)",
    )
    elsewhere = dra(
        index_of(device_taint_rule("drain-n2", pool="n2"), held, allocated_claim("n1", efa_names(32), name="job"))
    )
    assert (elsewhere.count, elsewhere.allocated, elsewhere.notes) == (32, 32, ())


def test_a_busy_pool_under_a_driver_wide_rule_is_not_ready() -> None:
    """Every node's devices are held by a running job (the normal state of a training cluster:
    google/dranet#97): the rule still keeps them from a new claim."""
    bodies = dra_pool(count=32, nodes=2)
    claims = []
    for body in bodies:
        if body["kind"] == "ResourceSlice":
            names = [device["name"] for device in body["spec"]["devices"]]
            body["spec"]["devices"] = []
            claims.append(allocated_claim(body["spec"]["nodeName"], names, name=f"job-{body['spec']['nodeName']}"))
    status = only_status([device_taint_rule("dranet-maintenance"), *bodies, *claims])
    assert reason(status, "Ready")[0] == "False"
    assert status.recommendation is None
    assert "32 devices tainted by DeviceTaintRule dranet-maintenance (NoSchedule) not counted" in message(
        status, "Ready"
    )


def test_the_rules_a_pool_note_names_are_few_and_the_rest_counted() -> None:
    """A health controller's rule per device: one note for the pool, not one per rule."""
    body = resource_slice("n1", efa=32)
    names = [device["name"] for device in body["spec"]["devices"]]
    rules = [device_taint_rule(f"health-xid-79-{name}", pool="n1", device=name) for name in names[:20]]
    # After them by name: the first rule matching the other 12.
    rules.append(device_taint_rule("node-drain-n1", pool="n1", effect="NoExecute"))
    devices = dra(index_of(*rules, body))
    assert devices.count == 0
    assert devices.notes == (
        "driver dra.net pool n1: 32 devices tainted by DeviceTaintRule node-drain-n1 (NoExecute): 12,"
        f" DeviceTaintRule health-xid-79-{names[0]} (NoSchedule): 1,"
        f" DeviceTaintRule health-xid-79-{names[1]} (NoSchedule): 1"
        " and 18 more not counted (the recommended claim tolerates none)",
    )


def test_a_rule_with_selector_fields_not_evaluated_says_so_where_it_is_counted() -> None:
    """v1alpha3 of Kubernetes 1.33-1.34 also had deviceClassName and CEL selectors: taken to
    match (fail closed), and the note says the count rests on that."""
    rule = device_taint_rule("by-class", pool="n1")
    rule["spec"]["deviceSelector"]["deviceClassName"] = EFA_CLASS
    devices = dra(index_of(rule, resource_slice("n1", efa=32)))
    assert devices.count == 0
    assert devices.notes == (
        "driver dra.net pool n1: 32 devices tainted by DeviceTaintRule by-class (NoSchedule) not counted"
        " (the recommended claim tolerates none; its selector's deviceClassName not evaluated here, taken to match)",
    )


def test_a_rule_name_reaches_messages_cleaned() -> None:
    rule = device_taint_rule("drain")
    rule["metadata"]["name"] = "drain\x1b[2J" + "x" * 400
    devices = dra(index_of(rule, resource_slice("n1", efa=2)))
    (note,) = devices.notes
    assert "\x1b" not in note and len(note) < 400


def test_a_pool_listing_one_device_name_twice_is_invalid_and_counts_nothing() -> None:
    """Two slices of one pool and generation listing the same devices (a driver bug, two driver
    instances in a rollout): the scheduler's pools_stable.go poolIsInvalid marks the pool
    invalid ("duplicate device name"), and allocateOne fails every allocation reaching it."""
    first = resource_slice("n1", efa=32, slice_count=2, part=0, name="n1-a")
    second = resource_slice("n1", efa=32, slice_count=2, part=0, name="n1-b")
    devices = dra(index_of(first, second))
    assert devices.count == 0
    assert devices.problem is not None
    assert devices.problem.startswith("driver dra.net pool n1 is invalid: duplicate device name ")


def test_a_pool_with_duplicate_device_names_is_not_ready() -> None:
    bodies = without_slices(dra_pool(count=32, nodes=2))
    for name in ("d1", "d2"):
        # 16 devices listed in both slices: 32 would pass the p5 instance maximum.
        bodies.append(resource_slice(name, efa=16, slice_count=2, part=0, name=f"{name}-a"))
        bodies.append(resource_slice(name, efa=16, slice_count=2, part=0, name=f"{name}-b"))
    status = only_status(bodies)
    assert reason(status, "Ready")[0] == "False"
    assert status.recommendation is None
    assert "driver dra.net pool d1 is invalid: duplicate device name" in message(status, "Ready")


def test_a_hostile_duplicate_device_name_reaches_the_status_cleaned_and_bounded() -> None:
    hostile = "\x1b]0;pwned\x07\x1b[2J" + "x" * 5000
    first = resource_slice("n1", efa=1, slice_count=2, part=0, name="n1-a")
    second = resource_slice("n1", efa=1, slice_count=2, part=1, name="n1-b")
    first["spec"]["devices"][0]["name"] = second["spec"]["devices"][0]["name"] = hostile
    problem = dra(index_of(first, second)).problem
    assert problem is not None and "\x1b" not in problem and len(problem) < 200


def test_a_node_with_more_than_32_devices_is_recommended_a_claim_of_32() -> None:
    """k8s.io/api resource/v1 AllocationResultsMaxSize = 32: the allocator refuses a claim for
    more ("number of requested devices 48 exceeds the claim limit of 32")."""
    names = ["d1", "d2"]
    bodies = [
        efa_device_class(),
        dranet_daemon_set(),
        *(node(name, pool="big", efa=None, instance_type=None) for name in names),
        *(resource_slice(name, efa=48) for name in names),
        *dranet_pods(names),
    ]
    status = only_status(bodies)
    assert reason(status, "Ready") == ("True", "UniformCapability")
    assert status.uniform_count == 48
    assert claim_count(status) == 32
    assert (
        "a job may claim up to 48 per node (recommendation.resourceClaimTemplate); the resourceClaimTemplate"
        " asks 32, the most one ResourceClaim can hold (AllocationResultsMaxSize): 48 per node take more than"
        " one claim" in message(status, "Ready")
    )


def numa_class(name: str, numa: int) -> dict[str, Any]:
    expression = f'device.driver == "dra.net" && device.attributes["dra.net"].numaNode == {numa}'
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def test_with_two_classes_the_count_is_what_a_claim_of_the_recommended_one_gets() -> None:
    """A claim names one class, and the allocator takes only devices that class selects
    (allocator_stable.go isSelectable → selectorsMatch): with each class selecting 16 of 32,
    ``exactCount: 32`` of the first could never be allocated."""
    config = build_config({"fabrics": [{"name": "efa", "dra": {"deviceClassNames": ["efa-numa0", "efa-numa1"]}}]})
    bodies = [numa_class("efa-numa0", 0), numa_class("efa-numa1", 1), *dra_pool(count=32, nodes=2)]
    status = only_status(bodies, config)
    assert status.uniform_count == 16
    assert status.recommendation is not None
    template = status.recommendation.resource_claim_template
    assert template is not None
    (request,) = template.spec.devices.requests
    assert (request.exactly.device_class_name, int(request.exactly.count)) == ("efa-numa0", 16)
    assert (
        "d1: driver dra.net pool d1: 16 devices only the fabric's other DeviceClasses select not counted"
        " (the recommended claim names the first)" in message(status, "Ready")
    )


def test_a_node_whose_devices_only_another_class_selects_is_a_target_node_without_devices() -> None:
    config = build_config({"fabrics": [{"name": "efa", "dra": {"deviceClassNames": ["efa-numa2", "efa-numa0"]}}]})
    bodies = [numa_class("efa-numa2", 2), numa_class("efa-numa0", 0), *dra_pool(count=32, nodes=2)]
    status = only_status(bodies, config)
    assert status.nodes == 2 and status.advertising_nodes == 0
    assert reason(status, "Ready")[0] == "False"
    assert status.recommendation is None


def test_a_snapshot_slices_hostile_driver_name_reaches_messages_cleaned_and_bounded() -> None:
    hostile = "\x1b]0;pwned\x07\x1b[2J" + "d" * 5000
    (note,) = dra(index_of(resource_slice("n1", efa=0, driver=hostile, slice_count=2, name="n1-x"))).notes
    assert "\x1b" not in note and "\x07" not in note and len(note) < 250


def test_a_selector_past_this_evaluators_iteration_budget_is_not_blamed_on_the_scheduler() -> None:
    """cel-cpp stops at 10,000 iterations; Kubernetes limits a selector's cost (1,000,000), which
    10,100 iterations of a cheap test stay far under. The devices are left out (failing closed),
    and the message said the scheduler aborts on them, which it does not: it selects them."""
    outer, inner = ",".join(str(i) for i in range(101)), ",".join(str(i) for i in range(100))
    expression = f'device.driver == "dra.net" && [{outer}].all(i, [{inner}].all(j, i >= 0))'
    looping = efa_device_class()
    looping["spec"]["selectors"] = [{"cel": {"expression": expression}}]
    bodies = [looping, *(body for body in dra_pool(count=32, nodes=2) if body["kind"] != "DeviceClass")]
    status = only_status(bodies)
    assert reason(status, "Ready")[0] == "False"
    said = message(status, "Advertised")
    assert "more than 10000 loop iterations" in said and "kube-scheduler aborts" not in said
    assert "it may select these devices" in said


# --- Partitionable devices: shared counters (KEP-4815, DRAPartitionableDevices) -------------------


def counter_slice(node_name: str, counters: dict[str, str], *, slice_count: int = 2, set_name: str = "link") -> Any:
    """A slice of ``node_name``'s pool holding only its counter set: in resource/v1 a slice
    holds devices or sharedCounters, not both (types.go ResourceSliceSpec)."""
    body = resource_slice(node_name, efa=0, slice_count=slice_count, part=1, name=f"{node_name}-counters")
    body["spec"].pop("devices")
    body["spec"]["sharedCounters"] = [
        {"name": set_name, "counters": {name: {"value": value} for name, value in counters.items()}}
    ]
    return body


def consuming(body: dict[str, Any], amount: str, *, set_name: str = "link", counter: str = "bw") -> dict[str, Any]:
    for device in body["spec"]["devices"]:
        device["consumesCounters"] = [{"counterSet": set_name, "counters": {counter: {"value": amount}}}]
    return body


def test_devices_sharing_one_counter_count_as_many_as_can_be_allocated_at_once() -> None:
    """Four devices each taking all of one counter: the scheduler admits one at a time
    (allocator_stable.go allocateDevice -> checkAvailableCounters), so the node has one."""
    devices_slice = consuming(resource_slice("n1", efa=4, slice_count=2), "1")
    devices = dra(index_of(devices_slice, counter_slice("n1", {"bw": "1"})))
    assert (devices.count, devices.seen, devices.problem) == (1, 4, None)
    assert devices.notes == (
        "driver dra.net pool n1: 4 devices draw on shared counters (sharedCounters),"
        " 1 of them can be allocated at once: 3 not counted",
    )
    roomy = consuming(resource_slice("n1", efa=32, slice_count=2), "100Gi")
    devices = dra(index_of(roomy, counter_slice("n1", {"bw": "3200Gi"})))
    assert (devices.count, devices.notes) == (32, ())  # counters with room for all take nothing


def test_the_count_at_once_is_worked_out_once_per_change_of_the_nodes_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool reads every node again whenever any of its nodes changes; the greedy pass over a
    node's counters is kept until one of that node's slices changes (review 61, F3)."""
    from fabriccap.core import counters
    from fabriccap.core import index as index_module

    passes: list[int] = []

    def counted(*arguments: Any) -> int:
        passes.append(1)
        return counters.allocatable_at_once(*arguments)

    monkeypatch.setattr(index_module, "allocatable_at_once", counted)
    devices_slice = consuming(resource_slice("n1", efa=4, slice_count=2), "1")
    index = index_of(devices_slice, counter_slice("n1", {"bw": "1"}))
    assert [dra(index).count, dra(index).count, len(passes)] == [1, 1, 1]
    more_room = read_slice(counter_slice("n1", {"bw": "2"}))
    assert more_room is not None
    index.put(SLICE_FACTS, more_room)
    assert [dra(index).count, len(passes)] == [2, 2]


def test_counters_in_the_devices_own_slice_are_read_too() -> None:
    """The first alpha (resource/v1beta1, 1.33) put sharedCounters beside the devices."""
    body = consuming(resource_slice("n1", efa=4), "1")
    body["spec"]["sharedCounters"] = [{"name": "link", "counters": {"bw": {"value": "1"}}}]
    assert dra(index_of(body)).count == 1


def test_a_device_naming_a_counter_set_its_pool_lacks_makes_the_pool_invalid() -> None:
    """pools_incubating.go validateDeviceCounterConsumption: "counter set %s not found"."""
    devices_slice = consuming(resource_slice("n1", efa=4, slice_count=2), "1", set_name="nic0")
    devices = dra(index_of(devices_slice, counter_slice("n1", {"bw": "4"})))
    assert (devices.count, devices.problem) == (0, "driver dra.net pool n1 is invalid: counter set nic0 not found")
    missing_counter = consuming(resource_slice("n1", efa=4, slice_count=2), "1", counter="lanes")
    devices = dra(index_of(missing_counter, counter_slice("n1", {"bw": "4"})))
    assert devices.problem == "driver dra.net pool n1 is invalid: counter lanes not found in counter set link"
    # Before its counter slice arrives, the pool is incomplete (that is all it is yet).
    devices = dra(index_of(devices_slice))
    assert (devices.count, devices.problem) == (0, "driver dra.net pool n1 has 1 of 2 ResourceSlices of generation 1")


def test_a_pool_naming_one_counter_set_twice_is_invalid() -> None:
    devices_slice = consuming(resource_slice("n1", efa=4, slice_count=3), "1")
    first = counter_slice("n1", {"bw": "4"}, slice_count=3)
    second = counter_slice("n1", {"bw": "4"}, slice_count=3)
    second["metadata"]["name"] = "n1-counters-again"
    devices = dra(index_of(devices_slice, first, second))
    assert (devices.count, devices.problem) == (0, "driver dra.net pool n1 is invalid: duplicate counter set name link")


@pytest.mark.parametrize(
    ("where", "value", "complaint"),
    [
        ("device", "lots", "spec.devices[0].consumesCounters[0].counters.bw.value: 'lots' is not a quantity"),
        ("device", "-1", "spec.devices[0].consumesCounters[0].counters.bw.value is negative"),
        ("counters", "1e99", "spec.sharedCounters[0].counters.bw.value: '1e99' is out of range"),
        # Past int64, as the API server keeps a DecimalSI quantity of any length (quantity.go):
        # a device taking a googol times its counter crashed the whole evaluation (a float).
        (
            "device",
            "1234567891" * 40,
            "spec.devices[0].consumesCounters[0].counters.bw.value is out of range (above 2**63-1)",
        ),
        ("counters", "9223372036854775808", "spec.sharedCounters[0].counters.bw.value is out of range (above 2**63-1)"),
        ("counters", None, "spec.sharedCounters[0].counters.bw.value is not a quantity"),
    ],
)
def test_counter_data_that_cannot_be_read_fails_the_node_closed(where: str, value: Any, complaint: str) -> None:
    """Only a snapshot can hold these (the API server parses every Quantity): the slice is
    unreadable, its node counts 0 and says why, never its devices as independent."""
    body = consuming(resource_slice("n1", efa=4), "1")
    body["spec"]["sharedCounters"] = [{"name": "link", "counters": {"bw": {"value": "4"}}}]
    if where == "device":
        body["spec"]["devices"][0]["consumesCounters"][0]["counters"]["bw"]["value"] = value
    else:
        body["spec"]["sharedCounters"][0]["counters"]["bw"]["value"] = value
    from fabriccap.offline.snapshot import add_bodies

    index = FactIndex()  # as the operator reads a cluster: the slice is kept with its problem
    add_bodies(index, EXTRACTOR, [node("n1", efa=None), body], "cluster", strict_quantities=False)
    devices = dra(index)
    assert devices.count == 0
    assert devices.problem == f"ResourceSlice {body['metadata']['name']}: {complaint}"


def test_a_pool_whose_devices_share_counters_is_not_ready_with_the_independent_count() -> None:
    """32 EFA devices per node drawing on counters with room for 16: the recommended claim
    asks 16, what the scheduler can hold at once; with an invalid pool, the pool is not Ready."""
    bodies = without_slices(dra_pool(count=32, nodes=2))
    for name in ("d1", "d2"):
        bodies.append(consuming(resource_slice(name, efa=32, slice_count=2), "1"))
        bodies.append(counter_slice(name, {"bw": "16"}))
    status = only_status(bodies)
    assert status.uniform_count == 16
    assert "16 of them can be allocated at once: 16 not counted" in message(status, "Advertised")
    broken = without_slices(dra_pool(count=32, nodes=2))
    for name in ("d1", "d2"):
        broken.append(consuming(resource_slice(name, efa=32, slice_count=2), "1", set_name="nic0"))
        broken.append(counter_slice(name, {"bw": "32"}))
    status = only_status(broken)
    assert reason(status, "Ready")[0] == "False"
    assert status.recommendation is None
    assert "driver dra.net pool d1 is invalid: counter set nic0 not found" in message(status, "Ready")
