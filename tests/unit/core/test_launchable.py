"""What a Karpenter NodePool may launch, judged against the instance catalog: real NodePools
published by Karpenter, AWS samples and workshops (tests/fixtures/karpenter/, each with its source),
every operator Karpenter v1.15.2's CRD allows, minValues, and the bad input a status must survive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fabriccap.core.api import ConditionStatus, Reason
from fabriccap.core.config import FabricProfile
from fabriccap.core.facts import DaemonSetFacts, FactsExtractor
from fabriccap.core.karpenter_facts import node_class_facts, node_pool_facts
from fabriccap.core.launchable import LaunchableTypes, admitted_types, judge_node_pool, launch_refusal
from fabriccap_devtools.world import daemon_set, ec2_node_class, node_pool
from support.configs import build_config, default_config

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "karpenter"
EFA_PROFILE: FabricProfile = default_config().enabled_fabrics[0]


def _judge(body: dict[str, Any], profile: FabricProfile = EFA_PROFILE, **kwargs: Any) -> LaunchableTypes:
    return judge_node_pool(profile, node_pool_facts(body), kwargs.get("node_class"), kwargs.get("providers"))


# (file, Launchable status, reason, a pool of the fabric, {count: instance types}), spec.limits
# included: a type whose node alone exceeds one is never launched (Karpenter's
# filterByRemainingResources). Accelerator types without EFA count 0: a pod that asks for an
# accelerator and no EFA may get one, so such a NodePool offers no one count.
REAL_NODEPOOLS = [
    ("ai-on-eks-trainium-trn1.yaml", "False", "MixedLaunchableCounts", True, {8: 1, 0: 1}),
    # The catalog lists the older NVIDIA types without EFA too (g3, g3s, p2, p3: Karpenter still
    # launches them), each a 0 here.
    ("aws-do-eks-default.yaml", "False", "MixedLaunchableCounts", True, {4: 2, 2: 3, 1: 22, 0: 20}),
    ("data-on-eks-gpu.yaml", "False", "MixedLaunchableCounts", True, {4: 2, 2: 2, 1: 12, 0: 11}),
    ("eks-workshop-g5-v1beta1.yaml", "False", "MixedLaunchableCounts", True, {1: 1, 0: 2}),
    ("eks-workshop-trainium-trn1.yaml", "False", "NoFabricInstanceTypes", False, {0: 1}),
    # Limits cpu 100, memory 200Gi, nvidia.com/gpu 40: of the EFA types only the 8x and 12x sizes
    # of g4dn, g5, g6 and g7 fit (1 EFA each); without the limits 32, 16, 8, 4, 2 and 1 appeared.
    ("karpenter-blueprints-gpu-slices.yaml", "False", "MixedLaunchableCounts", True, {1: 8, 0: 26}),
    # Limits cpu 100, memory 100Gi, nvidia.com/gpu 5 leave room for no EFA type: a pool of the
    # fabric by its requirements, which launches none.
    ("karpenter-blueprints-gpu.yaml", "False", "NoFabricInstanceTypes", True, {0: 19}),
    # Auto Mode's eks.amazonaws.com/instance-category is read as karpenter.k8s.aws's. Limit
    # aws.amazon.com/neuron 5: of the EFA types only trn2.3xlarge (1 device) fits.
    ("karpenter-blueprints-neuron-automode.yaml", "False", "MixedLaunchableCounts", True, {1: 1, 0: 5}),
    ("karpenter-blueprints-neuron.yaml", "False", "MixedLaunchableCounts", True, {1: 1, 0: 5}),
    # instance-family p3: p3.2xlarge, p3.8xlarge and p3.16xlarge (V100, no EFA); p3dn.24xlarge is
    # family p3dn.
    ("karpenter-docs-scheduling-gpu.yaml", "False", "NoFabricInstanceTypes", False, {0: 3}),
    # Karpenter's own EFA e2e pool is CPU-only (c/m/r): not a pool of the fabric by SPEC's rule.
    ("karpenter-e2e-efa.yaml", "False", "NoFabricInstanceTypes", False, {}),
    ("karpenter-example-general-purpose.yaml", "False", "NoFabricInstanceTypes", False, {}),
    # instance-cpu Gt 3 and instance-memory Gt 8191; trn2.3xlarge's vCPUs are unknown, so it stays.
    (
        "karpenter-example-large-instances.yaml",
        "False",
        "MixedLaunchableCounts",
        True,
        {32: 2, 16: 4, 8: 2, 4: 4, 2: 3, 1: 27, 0: 41},
    ),
    ("karpenter-example-min-values-multiple-keys.yaml", "False", "NoFabricInstanceTypes", False, {}),
]


def test_every_fixture_has_its_source_and_a_row() -> None:
    files = sorted(path.name for path in FIXTURES.glob("*.yaml"))
    assert files == sorted(row[0] for row in REAL_NODEPOOLS)
    for name in files:
        assert (FIXTURES / name).read_text().startswith("# Source: "), name


@pytest.mark.parametrize(("file", "status", "reason", "of_fabric", "counts"), REAL_NODEPOOLS)
def test_real_nodepools(file: str, status: str, reason: str, of_fabric: bool, counts: dict[int, int]) -> None:
    body = yaml.safe_load((FIXTURES / file).read_text())
    # The fixtures are the published specs; Karpenter reports such a NodePool Ready once its
    # EC2NodeClass is ready, and only then launches from it (a NodePool not Ready: below).
    body["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}
    verdict = _judge(body)
    assert (verdict.status, verdict.reason, verdict.of_fabric, verdict.counts) == (status, reason, of_fabric, counts)


def _pool(*requirements: dict[str, Any]) -> dict[str, Any]:
    return node_pool("p", list(requirements))


def _req(key: str, operator: str, *values: str, min_values: int | None = None) -> dict[str, Any]:
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    if min_values is not None:
        requirement["minValues"] = min_values
    return requirement


FAMILY = "karpenter.k8s.aws/instance-family"
GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
TYPE = "node.kubernetes.io/instance-type"


@pytest.mark.parametrize(
    ("requirements", "types"),
    [
        ([_req(TYPE, "In", "p5.48xlarge", "p5e.48xlarge")], {"p5.48xlarge", "p5e.48xlarge"}),
        ([_req(FAMILY, "In", "p5"), _req(TYPE, "NotIn", "p5.4xlarge")], {"p5.48xlarge"}),
        ([_req(FAMILY, "In", "p5"), _req(GPU_COUNT, "Gt", "1")], {"p5.48xlarge"}),
        ([_req(FAMILY, "In", "p5"), _req(GPU_COUNT, "Lt", "8")], {"p5.4xlarge"}),
        ([_req(FAMILY, "In", "p5"), _req(GPU_COUNT, "Gte", "8")], {"p5.48xlarge"}),
        ([_req(FAMILY, "In", "p5"), _req(GPU_COUNT, "Lte", "1")], {"p5.4xlarge"}),
        # A CPU type has instance-gpu-count as DoesNotExist: Exists excludes it, DoesNotExist keeps it.
        ([_req(FAMILY, "In", "c6in", "p5"), _req(GPU_NAME, "Exists")], {"p5.48xlarge", "p5.4xlarge"}),
        ([_req(FAMILY, "In", "c6in", "p5"), _req(GPU_NAME, "DoesNotExist")], {"c6in.32xlarge", "c6in.metal"}),
        ([_req(FAMILY, "In", "c6in"), _req(GPU_COUNT, "NotIn", "8")], {"c6in.32xlarge", "c6in.metal"}),
        # Custom keys, zones and capacity types restrict no instance type.
        (
            [_req(FAMILY, "In", "p5en"), _req("team", "In", "ml"), _req("karpenter.sh/capacity-type", "In", "spot")],
            {"p5en.48xlarge"},
        ),
        (
            [_req("kubernetes.io/arch", "In", "arm64"), _req(FAMILY, "In", "p5", "c7gn")],
            {"c7gn.16xlarge", "c7gn.metal"},
        ),
    ],
)
def test_every_operator_karpenter_allows(requirements: list[dict[str, Any]], types: set[str]) -> None:
    admitted = admitted_types(EFA_PROFILE.catalog, (), node_pool_facts(_pool(*requirements)).requirements)
    assert {known.name for known in admitted.types} == types
    assert admitted.problems == ()


def test_a_uniform_nodepool_and_its_listing() -> None:
    verdict = _judge(_pool(_req(TYPE, "In", "p5.48xlarge", "p5e.48xlarge")))
    assert (verdict.status, verdict.reason, verdict.uniform_count) == ("True", "UniformLaunchableCount", 32)
    assert verdict.types == (("p5.48xlarge", 32), ("p5e.48xlarge", 32))
    assert verdict.message == (
        "every one of the 2 accelerator types NodePool p may launch gets vpc.amazonaws.com/efa: 32"
        " (when a pod requests it)"
    )


@pytest.mark.parametrize(
    ("requirement", "status", "reason"),
    [
        # Confined to known types (an instance-type list). p5.48xlarge and p5e.48xlarge are of two families.
        (_req(FAMILY, "Exists", min_values=2), "True", "UniformLaunchableCount"),
        # Only p5 is left: one value where two are needed, and Karpenter launches nothing.
        (_req(FAMILY, "In", "p5", min_values=2), "False", "NoFabricInstanceTypes"),
    ],
)
def test_min_values_where_it_changes_the_answer(requirement: dict[str, Any], status: str, reason: str) -> None:
    verdict = _judge(_pool(_req(TYPE, "In", "p5.48xlarge", "p5e.48xlarge"), requirement))
    assert (verdict.status, verdict.reason) == (status, reason)
    if status == "False":
        assert (
            "minValues 2 on karpenter.k8s.aws/instance-family, but the types it admits carry 1 value" in verdict.message
        )


def test_min_values_over_types_the_catalog_does_not_hold_is_not_judged() -> None:
    """Karpenter's general-purpose pools ask for 5 families; the catalog holds EFA and accelerator
    types only, so it cannot tell how many a CPU NodePool has: minValues is not judged there."""
    body = _pool(_req(FAMILY, "In", "p5"), _req("karpenter.k8s.aws/instance-category", "Exists", min_values=5))
    assert _judge(body).reason == "MixedLaunchableCounts"  # p5.48xlarge 32, p5.4xlarge 1


@pytest.mark.parametrize(
    ("requirement", "fragment"),
    [
        (_req(FAMILY, "Matches", "p5"), "operator 'Matches' is not one Karpenter allows"),
        (_req(GPU_COUNT, "Gt", "eight"), "Gt needs one non-negative integer, got ['eight']"),
        (_req(GPU_COUNT, "Lt"), "Lt needs one non-negative integer, got []"),
        # '²'.isdigit() is True but int('²') raises: ASCII digits only, as the CRD's pattern allows.
        (_req(GPU_COUNT, "Gt", "\u00b2"), "Gt needs one non-negative integer, got ['\u00b2']"),
        (_req(GPU_COUNT, "Gte", "\u0663"), "Gte needs one non-negative integer"),  # Arabic-Indic three
        (
            _req("karpenter.k8s.aws/instance-local-nvme", "Gt", "100"),
            "the instance catalog has no values for this label",
        ),
        (_req("eks.amazonaws.com/instance-ebs-bandwidth", "Gt", "100"), "the instance catalog has no values"),
    ],
)
def test_what_cannot_be_evaluated_is_one_message_and_unknown(requirement: dict[str, Any], fragment: str) -> None:
    verdict = _judge(_pool(_req(FAMILY, "In", "p5"), requirement))
    assert (verdict.status, verdict.reason) == (ConditionStatus.UNKNOWN, Reason.REQUIREMENTS_NOT_EVALUATED)
    assert verdict.message.startswith("NodePool p: requirement 2 (")
    assert fragment in verdict.message and "\n" not in verdict.message
    assert verdict.of_fabric  # what the other requirements admit still makes it a pool: its object says why
    assert not verdict.offers_fabric


def test_types_the_catalog_does_not_list() -> None:
    verdict = _judge(_pool(_req(TYPE, "In", "p6e-gb200.36xlarge")))
    assert (verdict.status, verdict.reason, verdict.of_fabric) == ("Unknown", "InstanceTypesNotInCatalog", True)
    assert "p6e-gb200.36xlarge" in verdict.message
    # The profile's instanceTypes map extends the catalog.
    extended = build_config({"fabrics": [{"name": "efa", "instanceTypes": {"p6e-gb200.36xlarge": 18}}]})
    verdict = _judge(_pool(_req(TYPE, "In", "p6e-gb200.36xlarge")), extended.enabled_fabrics[0])
    assert (verdict.status, verdict.uniform_count) == ("True", 18)


def test_a_nodepool_matching_no_type() -> None:
    verdict = _judge(_pool(_req(FAMILY, "In", "z99")))
    assert (verdict.status, verdict.reason, verdict.of_fabric) == ("False", "NoFabricInstanceTypes", False)
    # A family the catalog does not know may be one the catalog lacks: asking is not said to be futile.
    assert launch_refusal(verdict) is None


def test_only_a_cause_no_request_changes_refuses_the_advice_to_ask() -> None:
    """launch_refusal: a False verdict whose cause holds however a pod asks; not an Unknown one
    (whether asking helps is not known), nor none, nor a mixed one (asking gets the fabric)."""
    assert launch_refusal(None) is None
    unknown = _judge(_pool(_req(TYPE, "In", "p5.48xlarge", "p6e-gb200.36xlarge")))
    assert unknown.status == "Unknown" and launch_refusal(unknown) is None
    mixed = _judge(_pool(_req(FAMILY, "In", "p5")))
    assert mixed.reason == "MixedLaunchableCounts" and launch_refusal(mixed) is None
    pinned_none = _judge(_pool(_req(FAMILY, "In", "p5")), node_class=node_class_facts(ec2_node_class(efa_only=0)))
    refusal = launch_refusal(pinned_none)
    assert refusal is not None and refusal.startswith(
        "NodePool p offers it on no node (Launchable False NoFabricInstanceTypes: "
    )


def test_an_ec2nodeclass_that_pins_efa_only_interfaces() -> None:
    body = _pool(_req(FAMILY, "In", "p5"))  # p5.48xlarge 32 and p5.4xlarge 1: mixed by the maxima
    pinned = node_class_facts(ec2_node_class(efa_only=1))
    verdict = _judge(body, node_class=pinned)
    # Every node gets exactly the pinned count: one request fits all.
    assert (verdict.status, verdict.uniform_count) == ("True", 1)
    assert "its EC2NodeClass pins 1 efa-only interfaces" in verdict.message
    none = node_class_facts(ec2_node_class(efa_only=0))
    verdict = _judge(body, node_class=none)
    assert (verdict.status, verdict.reason) == ("False", "NoFabricInstanceTypes")
    assert "sets networkInterfaces without efa-only" in verdict.message


def _pinning(*slots: tuple[int, int]) -> dict[str, Any]:
    """An EC2NodeClass pinning the primary interface and an efa-only one at each (card, device)."""
    body = ec2_node_class()
    body["spec"]["networkInterfaces"] = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}] + [
        {"networkCardIndex": card, "deviceIndex": device, "interfaceType": "efa-only"} for card, device in slots
    ]
    return body


def test_pinned_interfaces_must_fit_the_types_network_cards() -> None:
    """Karpenter's networkInterfaceCheck (v1.15.2 compatibility.go) drops a type that lacks a
    pinned interface's card or whose card allows no interface at its device index; the catalog's
    networkCards come from the provider's zz_generated.vpclimits.go (p4d.24xlarge: 4 cards of 15
    interfaces; g5.12xlarge: 1 card; g6.12xlarge: 1 card of 8)."""
    p4d = _pool(_req(TYPE, "In", "p4d.24xlarge"))
    # Cards 1..4, as the old world helper laid out 4 efa-only interfaces: p4d has no card 4.
    off = _judge(p4d, node_class=node_class_facts(_pinning((1, 0), (2, 0), (3, 0), (4, 0))))
    assert (off.status, off.reason, off.offers_fabric) == ("False", "NoFabricInstanceTypes", False)
    assert "p4d.24xlarge has 4 network cards, none of index 4" in off.message
    # Karpenter's own layout (card 0 device 1, then cards 1..3) fits.
    fits = _judge(p4d, node_class=node_class_facts(ec2_node_class(efa_only=4)))
    assert (fits.status, fits.uniform_count) == ("True", 4)
    # A device index past the card's maximum: g6.12xlarge's card 0 takes 8 interfaces (0..7).
    g6 = _pool(_req(TYPE, "In", "g6.12xlarge"))
    assert _judge(g6, node_class=node_class_facts(_pinning((0, 7)))).uniform_count == 1
    past = _judge(g6, node_class=node_class_facts(_pinning((0, 8))))
    assert past.reason == "NoFabricInstanceTypes"
    assert "g6.12xlarge's network card 0 takes 8 interfaces, none at device index 8" in past.message
    # One type left out, the other launched: the message says which.
    mixed = _judge(_pool(_req(TYPE, "In", "g5.12xlarge", "p5.48xlarge")), node_class=node_class_facts(_pinning((1, 0))))
    assert (mixed.status, mixed.types) == ("True", (("p5.48xlarge", 1),))
    assert "the network cards of g5.12xlarge cannot take its pinned interfaces" in mixed.message


def test_pinned_interfaces_on_a_type_whose_cards_are_not_known_are_unknown() -> None:
    """trn2.48xlarge is in EFAMetadataByInstanceType but not in the provider's VPC limits: whether
    its cards take the pinned interfaces is not known, so it is not assumed."""
    assert EFA_PROFILE.catalog is not None
    assert EFA_PROFILE.catalog.get("trn2.48xlarge").network_cards is None  # type: ignore[union-attr]
    body = _pool(_req(TYPE, "In", "trn2.48xlarge"))
    verdict = _judge(body, node_class=node_class_facts(ec2_node_class(efa_only=1)))
    assert (verdict.status, verdict.reason) == ("Unknown", "InstanceTypesNotInCatalog")
    assert "does not list the network cards of trn2.48xlarge" in verdict.message
    # The message says why fabriccap cannot tell and what settles it.
    assert verdict.message.endswith(
        "Karpenter reads the cards from EC2 at launch; fabriccap cannot. A NodePool that also admits a type"
        " whose cards the catalog lists gets a verdict"
    )
    assert not verdict.offers_fabric
    # Without pinned interfaces the cards do not matter (Karpenter skips the check).
    assert _judge(body).uniform_count == 16
    # An entry without integer indexes cannot be judged either.
    unreadable = _pinning((0, 1))
    unreadable["spec"]["networkInterfaces"][1]["networkCardIndex"] = "zero"
    verdict = _judge(_pool(_req(TYPE, "In", "p5.48xlarge")), node_class=node_class_facts(unreadable))
    assert verdict.reason == "InstanceTypesNotInCatalog"
    assert "entries 1 have no integer networkCardIndex or deviceIndex" in verdict.message


def test_types_whose_cards_are_not_known_leave_a_settled_count_settled() -> None:
    """With a class pinning N efa-only interfaces, every type Karpenter launches gets N, and a type
    whose cards cannot take them is not launched: trn2.48xlarge (cards not in the VPC limits)
    beside trn1 types whose cards the catalog lists changes neither the count nor whether a node
    launches, so the verdict is the known types' (it was True before the cards were judged)."""
    body = _pool(
        _req(FAMILY, "In", "trn1", "trn1n", "trn2"),
        _req("karpenter.k8s.aws/instance-size", "In", "32xlarge", "48xlarge"),
    )
    verdict = _judge(body, node_class=node_class_facts(ec2_node_class(efa_only=8)))
    assert (verdict.status, verdict.reason, verdict.uniform_count) == ("True", "UniformLaunchableCount", 8)
    assert dict(verdict.types) == {"trn1.32xlarge": 8, "trn1n.32xlarge": 8, "trn2.48xlarge": 8}
    assert "does not list the network cards of trn2.48xlarge, which Karpenter launches only if" in verdict.message
    # When the type whose cards are known cannot take them, only the unknown one is left: Unknown.
    # trn1.32xlarge has 8 network cards and trn1n.32xlarge 16 (vpclimits), none of index 16.
    cut = _judge(body, node_class=node_class_facts(_pinning((0, 1), (16, 0))))
    assert (cut.status, cut.reason) == ("Unknown", "InstanceTypesNotInCatalog")


def _reserving(*reservations: tuple[str, str, str]) -> dict[str, Any]:
    """An EC2NodeClass selecting capacity reservations, and those Karpenter resolved them to:
    (id, instanceType, reservationType) in status.capacityReservations (the pinned CRD's fields)."""
    body = ec2_node_class()
    body["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"purpose": "training"}}]
    body["status"] = {
        "capacityReservations": [
            {
                "id": identifier,
                "instanceType": instance_type,
                "reservationType": kind,
                "availabilityZone": "us-west-2a",
                "ownerID": "012345678901",
                "instanceMatchCriteria": "targeted",
                "state": "active",
            }
            for identifier, instance_type, kind in reservations
        ]
    }
    return body


CAPACITY = "karpenter.sh/capacity-type"
RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"


def test_a_reserved_only_nodepool_launches_only_the_types_its_class_reserves() -> None:
    """karpenter-provider-aws v1.15.2 reserved_capacity_resolver.go builds reserved offerings only
    from the class's status.capacityReservations, each for its instanceType: with none, a NodePool
    that allows only reserved capacity launches nothing."""
    body = _pool(_req(TYPE, "In", "p5.48xlarge", "p4d.24xlarge"), _req(CAPACITY, "In", "reserved"))
    none = _judge(body, node_class=node_class_facts(ec2_node_class()))
    assert (none.status, none.reason, none.offers_fabric) == ("False", "NoFabricInstanceTypes", False)
    assert "launches only into reserved capacity (karpenter.sh/capacity-type allows only reserved)" in none.message
    assert "selects no capacity reservations" in none.message
    # Reservations of p5.48xlarge only: p4d.24xlarge has no reserved offering, so the count is uniform.
    p5 = node_class_facts(_reserving(("cr-0a1b2c3d4e5f60001", "p5.48xlarge", "capacity-block")))
    verdict = _judge(body, node_class=p5)
    assert (verdict.status, verdict.types) == ("True", (("p5.48xlarge", 32),))
    assert "reserved capacity only, of its EC2NodeClass's reservations (none of p4d.24xlarge)" in verdict.message
    # Reservations of another type only.
    trn = node_class_facts(_reserving(("cr-0a1b2c3d4e5f60002", "trn1.32xlarge", "default")))
    assert (
        "has capacity reservations (status.capacityReservations) only of trn1.32xlarge"
        in _judge(body, node_class=trn).message
    )
    # A capacity-reservation-id requirement is reserved-only too, and picks among the reservations.
    by_id = _pool(_req(TYPE, "In", "p5.48xlarge"), _req(RESERVATION_ID, "In", "cr-0a1b2c3d4e5f60009"))
    verdict = _judge(by_id, node_class=p5)
    assert verdict.reason == "NoFabricInstanceTypes"
    assert (
        "its requirements leave out cr-0a1b2c3d4e5f60001 (p5.48xlarge in us-west-2a) by"
        " karpenter.k8s.aws/capacity-reservation-id In" in verdict.message
    )
    # A NodePool that also allows on-demand is not bound to the reservations.
    either = _pool(_req(TYPE, "In", "p5.48xlarge"), _req(CAPACITY, "In", "reserved", "on-demand"))
    assert _judge(either, node_class=node_class_facts(ec2_node_class())).uniform_count == 32


ZONE = "topology.kubernetes.io/zone"
ZONE_ID = "topology.k8s.aws/zone-id"


def test_a_reserved_only_nodepool_launches_only_into_reservations_in_a_zone_it_allows() -> None:
    """reserved_capacity_resolver.go (v1.15.2) pins a reservation's offering to its zone
    (``LabelTopologyZone In [reservation.AvailabilityZone]``) and to that zone's ID from the class's
    subnets (``LabelTopologyZoneID``): a reserved-only NodePool confined to another zone launches
    nothing. Capacity blocks are per zone, and EFA NodePools are often pinned to one."""
    body = _reserving(("cr-0123456789abcdef0", "p5.48xlarge", "capacity-block"))
    body["status"]["capacityReservations"][0]["availabilityZone"] = "us-west-2b"
    body["status"]["subnets"] = [
        {"id": "subnet-0a1b2c3d4e5f60001", "zone": "us-west-2a", "zoneID": "usw2-az1"},
        {"id": "subnet-0a1b2c3d4e5f60002", "zone": "us-west-2b", "zoneID": "usw2-az2"},
    ]
    reserved = node_class_facts(body)
    assert (reserved.reservations[0].availability_zone, reserved.reservations[0].availability_zone_id) == (
        "us-west-2b",
        "usw2-az2",
    )

    def judged(*requirements: dict[str, Any]) -> LaunchableTypes:
        pool = _pool(_req(TYPE, "In", "p5.48xlarge"), _req(CAPACITY, "In", "reserved"), *requirements)
        return _judge(pool, node_class=reserved)

    elsewhere = judged(_req(ZONE, "In", "us-west-2a"))
    assert (elsewhere.status, elsewhere.reason, elsewhere.types) == ("False", "NoFabricInstanceTypes", ())
    assert elsewhere.message.endswith(
        "its requirements leave out cr-0123456789abcdef0 (p5.48xlarge in us-west-2b) by topology.kubernetes.io/zone"
        " In (Karpenter launches into a reservation only in its own zone)"
    )
    assert judged(_req(ZONE, "In", "us-west-2a", "us-west-2b")).uniform_count == 32
    assert judged(_req(ZONE, "NotIn", "us-west-2b")).reason == "NoFabricInstanceTypes"
    # The deprecated spelling Karpenter normalises, and the zone ID the subnets give.
    assert judged(_req("failure-domain.beta.kubernetes.io/zone", "In", "us-west-2a")).reason == "NoFabricInstanceTypes"
    assert judged(_req(ZONE_ID, "In", "usw2-az1")).reason == "NoFabricInstanceTypes"
    assert judged(_req(ZONE_ID, "In", "usw2-az2")).uniform_count == 32


def test_a_class_without_reservations_gives_no_reserved_node_whatever_the_nodepool_allows() -> None:
    from fabriccap.core.launchable import offering_choices

    pool = node_pool_facts(_pool(_req(TYPE, "In", "p5.48xlarge"), _req(CAPACITY, "In", "reserved", "on-demand")))
    assert dict(offering_choices(pool, reserves=False))[CAPACITY] == ("on-demand",)
    assert dict(offering_choices(pool, reserves=True))[CAPACITY] == ("reserved", "on-demand")


def test_lists_cut_at_their_bound_leave_the_nodepool_not_evaluated() -> None:
    """The CRD sets no maxItems on a requirement's values (karpenter.sh_nodepools.yaml of
    karpenter-provider-aws v1.15.2): a NotIn whose 501st value names p4d.24xlarge, read without
    it, would hold the NodePool mixed though Karpenter launches p5 alone; so it is not judged."""
    from fabriccap.core.karpenter_facts import MAX_LABELS, MAX_REQUIREMENTS, MAX_VALUES

    excluded = [f"x{number}.large" for number in range(MAX_VALUES)] + ["p4d.24xlarge"]
    body = _pool(_req(TYPE, "In", "p5.48xlarge", "p4d.24xlarge"), _req(TYPE, "NotIn", *excluded))
    verdict = _judge(body)
    assert (verdict.status, verdict.reason) == ("Unknown", "RequirementsNotEvaluated")
    # Kubernetes field paths count from 0: the second requirement is requirements[1].
    assert "spec.template.spec.requirements[1] has 501 values; the first 500 are read" in verdict.message
    assert _judge(_pool(_req(TYPE, "In", "p5.48xlarge"), _req(TYPE, "NotIn", "p4d.24xlarge"))).status == "True"
    # Template labels past their bound, and requirements past theirs, likewise.
    labelled = node_pool(
        "p", [_req(TYPE, "In", "p5.48xlarge")], labels={f"team.example.com/l{n}": "x" for n in range(MAX_LABELS + 1)}
    )
    verdict = _judge(labelled)
    assert (verdict.status, verdict.reason) == ("Unknown", "RequirementsNotEvaluated")
    assert f"has {MAX_LABELS + 1} labels; the first {MAX_LABELS} are read" in verdict.message
    many = _pool(
        _req(TYPE, "In", "p5.48xlarge"), *[_req(f"team.example.com/r{n}", "Exists") for n in range(MAX_REQUIREMENTS)]
    )
    assert _judge(many).reason == "RequirementsNotEvaluated"


def test_a_provider_daemonset_whose_affinity_excludes_types() -> None:
    """aws-do-eks#56: the plugin's DaemonSet allowlists instance types; a NodePool launching
    others gets nodes that never advertise."""
    from fabriccap.core.facts import FactsExtractor

    extractor = FactsExtractor(default_config())
    allowlist = daemon_set()
    allowlist["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": TYPE, "operator": "In", "values": ["p5.48xlarge"]}]}
                ]
            }
        }
    }
    facts = extractor.daemon_set(allowlist)
    assert facts is not None
    body = _pool(_req(TYPE, "In", "p5.48xlarge", "p5e.48xlarge"))
    verdict = _judge(body, providers=[facts])
    assert (verdict.status, verdict.reason) == ("False", "ProviderExcludesInstanceTypes")
    assert "leave out 1 of the 2 types NodePool p may launch (p5e.48xlarge)" in verdict.message
    # Asking may still get a p5.48xlarge, which it serves: not refused. Leaving out both is.
    assert launch_refusal(verdict) is None
    only_p5e = _judge(_pool(_req(TYPE, "In", "p5e.48xlarge")), providers=[facts])
    assert only_p5e.reason == "ProviderExcludesInstanceTypes" and launch_refusal(only_p5e) is not None
    # Karpenter's own EFA e2e selects the plugin by a NodePool template label: that admits.
    by_label = daemon_set(node_selector={"aws.amazon.com/efa": "true"})
    selected = extractor.daemon_set(by_label)
    assert selected is not None
    labelled = node_pool("p", [_req(TYPE, "In", "p5.48xlarge", "p5e.48xlarge")], labels={"aws.amazon.com/efa": "true"})
    assert _judge(labelled, providers=[selected]).reason == "UniformLaunchableCount"
    assert _judge(body, providers=[selected]).reason == "ProviderExcludesInstanceTypes"


# -- taints of the nodes a NodePool launches, against the provider DaemonSet's tolerations

EXTRACTOR = FactsExtractor(default_config())


def _provider(tolerations: list[dict[str, str]] | None = None, **kwargs: Any) -> DaemonSetFacts:
    """The EFA chart's DaemonSet (world.daemon_set), with the chart's default tolerations or these."""
    body = daemon_set(**kwargs) if tolerations is None else daemon_set(tolerations=tolerations, **kwargs)
    facts = EXTRACTOR.daemon_set(body)
    assert facts is not None
    return facts


def _real_tainted(file: str) -> dict[str, Any]:
    """A real NodePool that taints its nodes, as published, confined to p5.48xlarge and p5e.48xlarge
    (32 EFA each) with its limits dropped, so that only its taints can keep it from Launchable True."""
    body: dict[str, Any] = yaml.safe_load((FIXTURES / file).read_text())
    body["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}
    body["spec"]["template"]["spec"]["requirements"] = [_req(TYPE, "In", "p5.48xlarge", "p5e.48xlarge")]
    body["spec"].pop("limits", None)
    return body


# (fixture, its taint as kubectl writes it, a toleration of it as its own project writes one).
TAINTED_NODEPOOLS = [
    # terraform-aws-eks-blueprints patterns/targeted-odcr/helm.tf gives the EFA chart this one.
    ("karpenter-blueprints-gpu.yaml", "nvidia.com/gpu:NoSchedule", "nvidia.com/gpu"),
    ("karpenter-docs-scheduling-gpu.yaml", "nvidia.com/gpu=true:NoSchedule", "nvidia.com/gpu"),
    ("karpenter-blueprints-neuron.yaml", "aws.amazon.com/neuron:NoSchedule", "aws.amazon.com/neuron"),
    # Karpenter's own EFA e2e plugin (test/pkg/environment/aws/expectations.go ExpectEFADevicePluginCreated).
    ("karpenter-e2e-efa.yaml", "aws.amazon.com/efa:NoSchedule", "aws.amazon.com/efa"),
]


@pytest.mark.parametrize(("file", "taint", "key"), TAINTED_NODEPOOLS)
def test_a_provider_daemonset_that_does_not_tolerate_the_nodepools_taint(file: str, taint: str, key: str) -> None:
    """The eks-charts chart with its default values tolerates CriticalAddonsOnly alone: the
    DaemonSet controller runs no plugin pod on the nodes such a NodePool launches, which never
    advertise EFA, and a job that requests it stays Pending."""
    body = _real_tainted(file)
    verdict = _judge(body, providers=[_provider()])
    assert (verdict.status, verdict.reason) == ("False", "ProviderExcludesInstanceTypes"), verdict.message
    name = body["metadata"]["name"]
    assert verdict.message.startswith(
        f"NodePool {name} taints its nodes (spec.template.spec.taints) and no EFA provider DaemonSet tolerates"
        f" them all (kube-system/aws-efa-k8s-device-plugin does not tolerate {taint}): "
    )
    assert verdict.uniform_count is None and verdict.offers_fabric  # the types still get EFA
    # A toleration of the key (Exists, as the projects write it), or of everything (an empty key).
    for toleration in ({"key": key, "operator": "Exists", "effect": "NoSchedule"}, {"operator": "Exists"}):
        tolerant = _provider([{"key": "CriticalAddonsOnly", "operator": "Exists"}, toleration])
        verdict = _judge(body, providers=[tolerant])
        assert (verdict.status, verdict.reason, verdict.uniform_count) == ("True", "UniformLaunchableCount", 32)
    # Another effect, or Equal on a value the taint does not carry, does not tolerate it.
    for toleration in (
        {"key": key, "operator": "Exists", "effect": "NoExecute"},
        {"key": key, "operator": "Equal", "value": "false"},
    ):
        verdict = _judge(body, providers=[_provider([toleration])])
        assert verdict.reason == "ProviderExcludesInstanceTypes"


def test_only_the_taints_that_keep_a_daemon_pod_off_count() -> None:
    """The DaemonSet controller weighs NoSchedule and NoExecute taints (daemon_controller.go
    predicates); PreferNoSchedule keeps no daemon pod off. Startup taints are removed once the
    node is initialised: not judged."""
    soft = node_pool(
        "p", [_req(TYPE, "In", "p5.48xlarge")], taints=[{"key": "nvidia.com/gpu", "effect": "PreferNoSchedule"}]
    )
    assert _judge(soft, providers=[_provider()]).reason == "UniformLaunchableCount"
    starting = node_pool("p", [_req(TYPE, "In", "p5.48xlarge")])
    starting["spec"]["template"]["spec"]["startupTaints"] = [
        {"key": "node.cilium.io/agent-not-ready", "effect": "NoExecute"}
    ]
    assert _judge(starting, providers=[_provider()]).reason == "UniformLaunchableCount"
    evicting = node_pool(
        "p", [_req(TYPE, "In", "p5.48xlarge")], taints=[{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]
    )
    verdict = _judge(evicting, providers=[_provider()])
    assert verdict.reason == "ProviderExcludesInstanceTypes"
    assert "does not tolerate dedicated=ml:NoExecute" in verdict.message
    # The taints Karpenter's own nodes carry for a while, and the node conditions the DaemonSet
    # controller tolerates for every pod, keep no provider off.
    conditions = node_pool(
        "p",
        [_req(TYPE, "In", "p5.48xlarge")],
        taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
    )
    assert _judge(conditions, providers=[_provider()]).reason == "UniformLaunchableCount"


def test_taints_are_cleaned_and_bounded() -> None:
    from fabriccap.core.karpenter_facts import MAX_TAINTS

    hostile = node_pool(
        "p",
        [_req(TYPE, "In", "p5.48xlarge")],
        taints=[{"key": "nvidia.com/gpu\u202e\x1b[2J" + "x" * 5000, "effect": "NoSchedule"}],
    )
    verdict = _judge(hostile, providers=[_provider()])
    assert verdict.reason == "ProviderExcludesInstanceTypes"
    assert "\u202e" not in verdict.message and "\x1b" not in verdict.message and len(verdict.message) < 1200
    # A taint past the bound could be the one no provider tolerates: the NodePool is not judged.
    many = node_pool(
        "p",
        [_req(TYPE, "In", "p5.48xlarge")],
        taints=[{"key": f"team.example.com/t{n}", "effect": "PreferNoSchedule"} for n in range(MAX_TAINTS + 1)],
    )
    verdict = _judge(many, providers=[_provider([{"operator": "Exists"}])])
    assert (verdict.status, verdict.reason) == ("Unknown", "RequirementsNotEvaluated")
    assert f"spec.template.spec.taints has {MAX_TAINTS + 1} taints; the first {MAX_TAINTS} are read" in verdict.message


def test_each_node_needs_one_provider_that_both_tolerates_its_taints_and_selects_it() -> None:
    """A DaemonSet that tolerates the taint but allowlists p5.48xlarge, beside one that selects
    every type but tolerates nothing: no pod on a p5e.48xlarge node."""
    body = _real_tainted("karpenter-blueprints-gpu.yaml")
    allowlist = daemon_set("efa-allowlist", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    allowlist["spec"]["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": TYPE, "operator": "In", "values": ["p5.48xlarge"]}]}
                ]
            }
        }
    }
    tolerant = EXTRACTOR.daemon_set(allowlist)
    assert tolerant is not None
    verdict = _judge(body, providers=[_provider(), tolerant])
    assert verdict.reason == "ProviderExcludesInstanceTypes"
    assert verdict.message.startswith(
        "the node selector or affinity of the EFA provider DaemonSets that tolerate its taints leave out 1 of the"
        " 2 types NodePool gpu may launch (p5e.48xlarge)"
    )
    # Auto Mode's nodes are served by the platform: no DaemonSet, no toleration to judge.
    automode = node_pool(
        "p",
        [_req(TYPE, "In", "p5.48xlarge")],
        node_class_group="eks.amazonaws.com",
        taints=[{"key": "x", "effect": "NoSchedule"}],
    )
    assert _judge(automode, providers=[_provider()]).reason == "UniformLaunchableCount"


def test_the_evaluation_of_a_nodepool_is_cached_by_its_requirements() -> None:
    body = _pool(_req(FAMILY, "In", "p5", "p5e"))
    first = admitted_types(EFA_PROFILE.catalog, (), node_pool_facts(body).requirements)
    again = admitted_types(EFA_PROFILE.catalog, (), node_pool_facts(dict(body)).requirements)
    assert again is first


def _limited(limits: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    family = {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5", "p4d"]}
    body = _pool(family)
    body["spec"]["limits"] = limits
    if status is not None:
        body["status"] = {**body["status"], **status}  # the builder's Ready condition kept
    return body


@pytest.mark.parametrize(
    ("limits", "status", "reason", "counts"),
    [
        # p5.48xlarge (192 vCPUs, 8 GPUs, 32 EFA), p5.4xlarge (16 vCPUs, 256 GiB, 1 GPU, 1 EFA),
        # p4d.24xlarge (96 vCPUs, 8 GPUs, 4 EFA).
        ({}, None, "MixedLaunchableCounts", {32: 1, 4: 1, 1: 1}),
        ({"cpu": "100"}, None, "MixedLaunchableCounts", {4: 1, 1: 1}),
        ({"nvidia.com/gpu": 1}, None, "UniformLaunchableCount", {1: 1}),
        # What the NodePool's nodes hold already counts against its limits.
        ({"cpu": "400"}, {"resources": {"cpu": "300"}}, "MixedLaunchableCounts", {4: 1, 1: 1}),
        ({"nodes": 2}, {"nodes": 2}, "NoFabricInstanceTypes", {}),
        # Memory capacity is the type's MiB less 7.5%: p5.4xlarge's 256 GiB count 237 GiB.
        ({"memory": "240Gi"}, None, "UniformLaunchableCount", {1: 1}),
        ({"memory": "236Gi"}, None, "NoFabricInstanceTypes", {}),
        # The catalog has no pods or ephemeral-storage figure, but every type has some: a limit of
        # 0, or one already used up, leaves room for none (Karpenter compares capacity > remaining).
        ({"pods": "0"}, None, "NoFabricInstanceTypes", {}),
        ({"ephemeral-storage": "0"}, None, "NoFabricInstanceTypes", {}),
        ({"pods": "110"}, {"resources": {"pods": "110"}}, "NoFabricInstanceTypes", {}),
        # A resource no type of the catalog carries has capacity 0 at least: only a limit already
        # exceeded (less than nothing left) leaves room for none.
        ({"example.com/widget": "0"}, None, "MixedLaunchableCounts", {32: 1, 4: 1, 1: 1}),
        ({"example.com/widget": "1"}, {"resources": {"example.com/widget": "2"}}, "NoFabricInstanceTypes", {}),
        # A pods limit above 0 cannot be compared with a figure the catalog lacks: it excludes nothing.
        ({"pods": "1000"}, None, "MixedLaunchableCounts", {32: 1, 4: 1, 1: 1}),
    ],
)
def test_limits_leave_out_what_would_exceed_them(
    limits: dict[str, Any], status: dict[str, Any] | None, reason: str, counts: dict[int, int]
) -> None:
    verdict = _judge(_limited(limits, status))
    assert verdict.reason == reason, verdict.message
    if counts:
        assert verdict.counts == counts
    if limits and verdict.reason == "NoFabricInstanceTypes":
        assert "its limits (" in verdict.message


P5_TYPES = [_req(TYPE, "In", "p5.48xlarge", "p5e.48xlarge")]


@pytest.mark.parametrize(
    ("requirements", "labels", "reason", "counts"),
    [
        # Karpenter reads beta.kubernetes.io/arch and -/instance-type as kubernetes.io/arch and
        # node.kubernetes.io/instance-type (sigs.k8s.io/karpenter v1.15.1 labels.go NormalizedLabels).
        ([*P5_TYPES, _req("beta.kubernetes.io/arch", "In", "arm64")], {}, "NoFabricInstanceTypes", {}),
        ([_req("beta.kubernetes.io/instance-type", "In", "p5.48xlarge")], {}, "UniformLaunchableCount", {32: 1}),
        # Template labels are requirements In [value] (nodeclaimtemplate.go NewNodeClaimTemplate); the
        # CRD's label rules let them use these well-known keys.
        (P5_TYPES, {"kubernetes.io/arch": "arm64"}, "NoFabricInstanceTypes", {}),
        ([], {TYPE: "p5.48xlarge"}, "UniformLaunchableCount", {32: 1}),
        ([], {"beta.kubernetes.io/instance-type": "p5.48xlarge"}, "UniformLaunchableCount", {32: 1}),
        ([_req(FAMILY, "In", "p5")], {"team": "ml"}, "MixedLaunchableCounts", {32: 1, 1: 1}),  # a custom label
    ],
)
def test_template_labels_and_deprecated_keys_are_requirements(
    requirements: list[dict[str, Any]], labels: dict[str, str], reason: str, counts: dict[int, int]
) -> None:
    verdict = _judge(node_pool("p", requirements, labels=labels))
    assert (verdict.reason, verdict.counts) == (reason, counts), verdict.message


@pytest.mark.parametrize(
    "requirement",
    [
        # The Capacity Blocks for ML NodePool of Karpenter's docs (capacity-type reserved).
        _req("karpenter.k8s.aws/capacity-reservation-type", "In", "capacity-block"),
        _req("karpenter.k8s.aws/capacity-reservation-id", "In", "cr-0123456789abcdef0"),
        _req("karpenter.k8s.aws/ec2nodeclass", "In", "default"),
        _req("karpenter.k8s.aws/placement-group-id", "In", "pg-0123456789abcdef0"),
        _req("karpenter.k8s.aws/placement-group-partition", "In", "1"),
    ],
)
def test_keys_that_select_offerings_not_types_are_no_obstacle(requirement: dict[str, Any]) -> None:
    """No instance type defines these (v1.15.2 types.go computeRequirements), or they pick a
    type's reserved offerings: they never make the verdict Unknown."""
    verdict = _judge(_pool(*P5_TYPES, _req("karpenter.sh/capacity-type", "In", "reserved"), requirement))
    assert (verdict.status, verdict.reason, verdict.uniform_count) == ("True", "UniformLaunchableCount", 32)
    if "capacity-reservation" in requirement["key"]:
        assert "assuming its capacity reservations are of these types" in verdict.message


@pytest.mark.parametrize(
    ("requirement", "counts"),
    [
        # V100: p3.2xlarge, p3.8xlarge, p3.16xlarge (no EFA) and p3dn.24xlarge (1). Karpenter's
        # instance-types pages of v1.12.0 (p3) and v1.0.0 (p2, g3, g3s) are their source.
        (_req(GPU_NAME, "In", "v100"), {1: 1, 0: 3}),
        (_req(FAMILY, "In", "p3", "p3dn"), {1: 1, 0: 3}),
        (_req(GPU_NAME, "In", "k80", "m60"), {0: 7}),
    ],
)
def test_older_nvidia_types_count_without_the_fabric(requirement: dict[str, Any], counts: dict[int, int]) -> None:
    verdict = _judge(_pool(requirement))
    assert verdict.counts == counts
    assert verdict.status == ConditionStatus.FALSE


def test_an_accelerator_name_no_catalog_type_carries_is_not_dropped() -> None:
    """gb200 (p6e-gb200.36xlarge, an UltraServer type the v1.15.2 module does not list): a
    NodePool that may launch it is not uniform because only p6-b200 is known. Once a profile
    names the type, its facts are unknown, so it is admitted and counted."""
    body = _pool(_req(GPU_NAME, "In", "b200", "gb200"))
    verdict = _judge(body)
    assert (verdict.status, verdict.reason) == (ConditionStatus.UNKNOWN, Reason.INSTANCE_TYPES_NOT_IN_CATALOG)
    assert "types with karpenter.k8s.aws/instance-gpu-name gb200" in verdict.message
    assert verdict.of_fabric and not verdict.offers_fabric
    assert _judge(_pool(_req("karpenter.k8s.aws/instance-gpu-manufacturer", "In", "habana"))).status == "Unknown"
    extended = build_config({"fabrics": [{"name": "efa", "instanceTypes": {"p6e-gb200.36xlarge": 18}}]})
    verdict = _judge(body, extended.enabled_fabrics[0])
    assert (verdict.reason, verdict.counts) == (Reason.MIXED_LAUNCHABLE_COUNTS, {18: 1, 8: 1})
