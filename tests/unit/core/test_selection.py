"""Which class a fabric's DRA devices are counted with, and what evaluating it costs (core.selection)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from fabriccap.core.config import build_config, default_config
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.selection import (
    ClassError,
    ClassSource,
    DeviceClassFacts,
    DeviceCount,
    DeviceSelector,
    TaintRuleFacts,
    TaintRules,
    blocking_taint,
    extended_resource_class,
    fabric_selection,
)
from support.builders import EFA, device_taint_rule, pod_id_link_device, resource_slice

EFA_CLASS = "efa.networking.k8s.aws"
AWS_EXPRESSION = (
    'device.driver == "dra.net" &&\ndevice.attributes["dra.net"].pciDevice == \'Elastic Fabric Adapter (EFA)\'\n'
)


def profile(fabric: dict[str, Any] | None = None) -> Any:
    config = build_config({"fabrics": [fabric or {"name": "efa"}]}) if fabric else default_config()
    return config.enabled_fabrics[0]


def cluster_class(expressions: tuple[str, ...] = (AWS_EXPRESSION,), **fields: Any) -> dict[str, DeviceClassFacts]:
    return {EFA_CLASS: DeviceClassFacts(EFA_CLASS, expressions, **fields)}


def test_the_clusters_class_counts_when_it_has_one() -> None:
    selection = fabric_selection(profile(), cluster_class())
    (effective,) = selection.classes
    assert (effective.name, effective.source, effective.error) == (EFA_CLASS, ClassSource.CLUSTER, None)


def test_the_built_in_copy_stands_in_for_a_missing_class_and_selects_the_same() -> None:
    copy = fabric_selection(profile(), {})
    (effective,) = copy.classes
    assert (effective.source, effective.copy_origin) == (ClassSource.COPY, "the aws-dranet-1.0.0 chart's copy")
    # The copy is the chart's class: where its expressions are the cluster's, slices read with
    # one need no reading again with the other.
    assert copy.signature == fabric_selection(profile(), cluster_class()).signature


def test_a_class_neither_the_cluster_nor_the_profile_has_selects_nothing_and_says_so() -> None:
    selection = fabric_selection(profile({"name": "efa", "dra": {"deviceClasses": []}}), {})
    (effective,) = selection.classes
    assert effective.source is ClassSource.MISSING
    assert effective.error == "it is not in the cluster, and the profile has no copy of it (dra.deviceClasses)"
    assert DeviceSelector().count(selection, "dra.net", resource_slice("n1")["spec"]["devices"]) == DeviceCount(0)


def test_the_old_attribute_form_stands_in_for_a_class_without_a_copy() -> None:
    old = {
        "name": "efa",
        "dra": {"deviceClasses": [], "attributes": {"dra.net/pciDevice": "Elastic Fabric Adapter (EFA)"}},
    }
    selection = fabric_selection(profile(old), {})
    (effective,) = selection.classes
    assert (effective.source, effective.copy_origin) == (ClassSource.ATTRIBUTES, "the dra.attributes selector")
    devices = resource_slice("n1", efa=4, ena=2, extra_devices=[pod_id_link_device()])["spec"]["devices"]
    # The attribute form did not match a device without the attribute: no error either.
    assert DeviceSelector().count(selection, "dra.net", devices) == DeviceCount(4)
    # The cluster's class, once there, is what counts (and what the scheduler allocates with).
    assert fabric_selection(profile(old), cluster_class()).classes[0].source is ClassSource.CLUSTER


def test_a_cluster_class_that_does_not_compile_selects_nothing_even_with_a_copy() -> None:
    """The scheduler allocates with the cluster's class, broken or not: the copy must not hide it."""
    selection = fabric_selection(profile(), cluster_class(('device.driver == "dra.net" &&',)))
    (effective,) = selection.classes
    assert effective.source is ClassSource.CLUSTER
    assert effective.error is not None and effective.error.startswith("selector #0: compile error: 1:30: Syntax")
    assert DeviceSelector().count(selection, "dra.net", resource_slice("n1")["spec"]["devices"]) == DeviceCount(0)


def test_a_cluster_class_with_an_unreadable_selector_selects_nothing() -> None:
    selection = fabric_selection(profile(), cluster_class((), problem="selector #0 has no cel.expression"))
    assert selection.classes[0].error == "selector #0 has no cel.expression"


def test_a_class_without_selectors_selects_every_device_as_the_scheduler_does() -> None:
    selection = fabric_selection(profile(), cluster_class(()))
    devices = resource_slice("n1", efa=2, ena=3)["spec"]["devices"]
    assert DeviceSelector().count(selection, "dra.net", devices) == DeviceCount(5)


def test_errors_are_kept_per_class_and_cause_with_a_count_and_an_example() -> None:
    selection = fabric_selection(profile(), cluster_class())
    devices = resource_slice("n1", efa=4, extra_devices=[pod_id_link_device(), pod_id_link_device()])["spec"]["devices"]
    assert DeviceSelector().count(selection, "dra.net", devices) == DeviceCount(
        4, (ClassError(EFA_CLASS, "selector #0: no such key: pciDevice", 2, "pod-id-link0"),)
    )


def test_identical_devices_are_evaluated_once_whatever_the_rest_of_their_content() -> None:
    """ENA devices differ in their MAC and address on every node; the class reads neither."""
    selection = fabric_selection(profile(), cluster_class())
    selector = DeviceSelector()
    for index in range(50):
        body = resource_slice(f"n{index}", efa=32, ena=2, extra_devices=[pod_id_link_device()])
        assert selector.count(selection, "dra.net", body["spec"]["devices"]).selected == 32
    assert selector.evaluations == 3  # EFA, ENA, pod-id-link0


def test_a_class_that_reads_everything_is_cached_by_the_whole_content() -> None:
    reads_all = ('device.attributes["dra.net"].exists(name, name == "pciDevice")',)
    selection = fabric_selection(profile(), cluster_class(reads_all))
    selector = DeviceSelector()
    for index in range(10):
        body = resource_slice(f"n{index}", efa=4, ena=2)
        assert selector.count(selection, "dra.net", body["spec"]["devices"]).selected == 6
    assert selector.evaluations == 4 + 10 * 2  # four EFA contents shared by all; each node's ENA its own


@pytest.mark.parametrize(
    ("classes", "mapped"),
    [
        pytest.param({}, None, id="none"),
        pytest.param({"a": DeviceClassFacts("a", (), EFA, "2026-01-01T00:00:00Z")}, "a", id="one"),
        pytest.param(
            {
                "a": DeviceClassFacts("a", (), EFA, "2026-01-01T00:00:00Z"),
                "b": DeviceClassFacts("b", (), EFA, "2026-02-01T00:00:00Z"),
            },
            "b",
            id="the-later-wins",
        ),
        pytest.param(
            {
                "b": DeviceClassFacts("b", (), EFA, "2026-01-01T00:00:00Z"),
                "a": DeviceClassFacts("a", (), EFA, "2026-01-01T00:00:00Z"),
            },
            "a",
            id="same-time-first-by-name",
        ),
    ],
)
def test_the_class_an_extended_resource_is_served_from_is_the_schedulers_pick(
    classes: dict[str, DeviceClassFacts], mapped: str | None
) -> None:
    assert extended_resource_class(EFA, classes) == mapped


def test_the_mapping_counts_only_when_it_is_the_fabrics_class() -> None:
    mapped_elsewhere = {"other": DeviceClassFacts("other", (), EFA, "2026-01-01T00:00:00Z")}
    assert fabric_selection(profile(), {**cluster_class(), **mapped_elsewhere}).extended_resource_class is None
    own = cluster_class(extended_resource_name=EFA, created="2026-01-01T00:00:00Z")
    assert fabric_selection(profile(), own).extended_resource_class == EFA_CLASS


# --- DeviceTaintRules: matched as kube-scheduler matches them --------------------------------
# k8s.io/dynamic-resource-allocation@v0.35.4 resourceslice/tracker/tracker.go applyPatches: each
# of driver, pool and device that is set must equal the slice's; one not set matches any.


@pytest.mark.parametrize(
    ("selector", "matched"),
    [
        ({}, True),  # the empty selector: every device
        ({"driver": "dra.net"}, True),
        ({"driver": "gpu.example.com"}, False),
        ({"pool": "n1"}, True),
        ({"pool": "n2"}, False),
        ({"device": "pci-0000-10-1b-0"}, True),
        ({"device": "pci-0000-11-1b-0"}, False),
        ({"driver": "dra.net", "pool": "n1", "device": "pci-0000-10-1b-0"}, True),
        # All set fields must match: one that does not spares the device.
        ({"driver": "dra.net", "pool": "n2", "device": "pci-0000-10-1b-0"}, False),
        ({"driver": "gpu.example.com", "pool": "n1"}, False),
    ],
)
def test_a_rule_matches_a_device_when_every_field_it_sets_is_the_devices(
    selector: dict[str, str], matched: bool
) -> None:
    fields = {field: selector.get(field) for field in ("driver", "pool", "device")}
    rule = TaintRuleFacts("r", "NoSchedule", fields["driver"], fields["pool"], fields["device"])
    assert rule.matches("dra.net", "n1", "pci-0000-10-1b-0") is matched


def rule_facts(body: dict[str, Any]) -> TaintRuleFacts | None:
    return FactsExtractor(default_config()).device_taint_rule(body)


def test_a_rule_is_read_with_its_selector_and_effect_and_one_that_does_not_block_is_not_held() -> None:
    body = device_taint_rule("drain-n1", effect="NoExecute", pool="n1")
    assert rule_facts(body) == TaintRuleFacts("drain-n1", "NoExecute", driver="dra.net", pool="n1")
    assert rule_facts(device_taint_rule("note", effect="None")) is None  # informational


def test_a_rule_without_a_selector_matches_every_device_as_the_scheduler_applies_it() -> None:
    """The API's comment says no device; the scheduler's tracker taints every one (a nil
    selector skips all its checks), so none of them is counted."""
    body = device_taint_rule("everything")
    del body["spec"]["deviceSelector"]
    facts = rule_facts(body)
    assert facts is not None and facts.matches("any.driver", "any-pool", "any-device")


def test_selector_fields_that_cannot_be_evaluated_are_taken_to_match_and_named() -> None:
    """v1alpha3 before Kubernetes 1.35 also had deviceClassName and CEL selectors: a rule that
    sets them counts as matching what its other fields match (fail closed), and says so."""
    body = device_taint_rule("by-class", pool="n1")
    body["spec"]["deviceSelector"]["deviceClassName"] = "efa.networking.k8s.aws"
    body["spec"]["deviceSelector"]["selectors"] = [{"cel": {"expression": "false"}}]
    facts = rule_facts(body)
    assert facts is not None
    assert facts.unevaluated == ("deviceClassName", "selectors")
    assert facts.matches("dra.net", "n1", "pci-0000-10-1b-0")
    assert not facts.matches("dra.net", "n2", "pci-0000-10-1b-0")
    assert facts.describe() == "DeviceTaintRule by-class (NoSchedule)"
    assert facts.caveat() == "its selector's deviceClassName, selectors not evaluated here, taken to match"


def test_a_selector_field_that_is_not_a_string_is_taken_to_match() -> None:
    body = device_taint_rule("odd", pool="n1")
    body["spec"]["deviceSelector"]["driver"] = 7
    facts = rule_facts(body)
    assert facts is not None and (facts.driver, facts.pool) == (None, "n1")


def test_an_unknown_effect_does_not_block_as_the_allocator_ignores_it() -> None:
    """KEP-5055: "Consumers must treat unknown effects like None"; the allocators (v0.35.4
    incubating, v0.36.2 stable, taintPreventsAllocation): "Only known effects prevent
    allocation". A rule of an effect a newer server stored is not held, a device's own taint of
    one does not keep it from the count."""
    body = device_taint_rule("newer")
    body["spec"]["taint"]["effect"] = "NoExecuteWithPodDisruptionBudget"
    assert rule_facts(body) is None
    selection = fabric_selection(profile(), cluster_class())
    devices = resource_slice("n1", efa=4)["spec"]["devices"]
    devices[0]["taints"] = [{"key": "example.com/unhealthy", "effect": "NoExecuteWithPodDisruptionBudget"}]
    devices[1]["taints"] = [{"key": "example.com/unhealthy", "effect": "None"}]
    assert DeviceSelector().count(selection, "dra.net", devices).selected == 4


@pytest.mark.parametrize("taint", [7, {"key": "k", "effect": 7}, {"key": "k"}, "NoSchedule"])
def test_a_taint_that_cannot_be_read_blocks(taint: object) -> None:
    """Fail closed: a taint that is not a mapping, or whose effect is not a string."""
    assert blocking_taint(taint)
    body = device_taint_rule("odd")
    body["spec"]["taint"] = taint
    facts = rule_facts(body)
    assert facts is not None and facts.effect == "an unreadable effect"


def test_the_rules_a_slice_is_matched_with_are_those_of_its_driver_and_pool_and_wildcards() -> None:
    """Rules indexed by (driver, pool), a field not set a bucket of its own: the first by name
    of those that match, as a scan of them all in name order finds it."""
    rules = TaintRules(
        (
            TaintRuleFacts("d-any", "NoSchedule"),
            TaintRuleFacts("c-driver", "NoSchedule", driver="dra.net"),
            TaintRuleFacts("b-pool", "NoSchedule", pool="n1", device="dev-1"),
            TaintRuleFacts("a-exact", "NoSchedule", driver="dra.net", pool="n1", device="dev-0"),
            TaintRuleFacts("a-gpu", "NoSchedule", driver="gpu.nvidia.com", pool="n1"),
        )
    )
    assert [rule.name for rule in rules] == ["a-exact", "a-gpu", "b-pool", "c-driver", "d-any"]
    for driver, pool, device in itertools.product(("dra.net", "gpu.nvidia.com", "other"), ("n1", "n2"), DEVICES):
        scanned = next((rule for rule in rules if rule.matches(driver, pool, device)), None)
        assert rules.first_match(driver, pool, device) == scanned, (driver, pool, device)
    assert (
        TaintRules((TaintRuleFacts("gpu", "NoSchedule", driver="gpu.nvidia.com"),)).for_slice("dra.net", "n1") is None
    )


DEVICES = ("dev-0", "dev-1", "dev-2")


@pytest.mark.parametrize(
    ("expressions", "drivers"),
    [
        pytest.param(['device.driver == "dra.net" && device.attributes["dra.net"].pciDevice == "x"'], {"dra.net"}),
        pytest.param(['"a" == device.driver || device.driver in ["b", "c"]'], {"a", "b", "c"}),
        pytest.param(['device.driver in ["a", "b"]', 'device.driver == "b" && true'], {"b"}),
        pytest.param(['device.driver == "a" || true'], None),
        pytest.param(['!(device.driver == "a")'], None),
        pytest.param(["true"], None),
    ],
)
def test_the_drivers_a_class_selects_are_those_its_selectors_pin(
    expressions: list[str], drivers: set[str] | None
) -> None:
    """Only what a selector says outright: a term of an ``&&`` is enough (CEL's ``&&`` is false
    when either side is), each side of an ``||`` must pin."""
    selection = fabric_selection(profile(), {EFA_CLASS: DeviceClassFacts(EFA_CLASS, tuple(expressions))})
    assert selection.recommended_drivers == (frozenset(drivers) if drivers is not None else None)


def test_devices_a_rule_taints_are_counted_apart_per_rule_and_own_taints_first() -> None:
    """A rule's taint has the effect of the device's own (KEP-5055): the recommended claim,
    which tolerates none, cannot get the device. A device tainted both ways counts once, as
    tainted by its own."""
    selection = fabric_selection(profile(), cluster_class())
    devices = resource_slice("n1", efa=8)["spec"]["devices"]
    devices[0]["taints"] = [{"key": "example.com/unhealthy", "effect": "NoExecute"}]
    rules = TaintRules(
        (
            TaintRuleFacts("a-first", "NoSchedule", driver="dra.net", pool="n1", device=devices[0]["name"]),
            TaintRuleFacts("b-pool", "NoSchedule", pool="n1"),
            TaintRuleFacts("c-other-pool", "NoExecute", pool="n2"),
        )
    )
    count = DeviceSelector().count(selection, "dra.net", devices, pool="n1", taint_rules=rules)
    assert (count.selected, count.tainted, count.rule_tainted) == (0, 1, (("b-pool", 7),))
    spared = DeviceSelector().count(selection, "dra.net", devices, pool="n3", taint_rules=rules)
    assert (spared.selected, spared.tainted, spared.rule_tainted) == (7, 1, ())
