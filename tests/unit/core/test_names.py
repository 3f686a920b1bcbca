"""FabricCapability names: DNS-1123, deterministic, unique per (fabric, key, value), readable."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabriccap.core.names import capability_name, hashed_name, is_dns_label, is_label_value, pool_names
from support.builders import INSTANCE_TYPE, KARPENTER, NODEGROUP

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
HASHED = re.compile(r"^(?P<fabric>[a-z0-9-]+?)-(?:(?P<stem>[a-z0-9-]+)-)?(?P<digest>[a-z2-7]{26})$")


def _name(value: str, key: str = NODEGROUP, fabric: str = "efa") -> str:
    """The name of a pool alone (no other present pool shares its value)."""
    return capability_name(fabric, key, value)


def _names(fabric: str, *pools: tuple[str, str], fabrics: tuple[str, ...] = ()) -> dict[tuple[str, str], str]:
    return {pool: naming.name for pool, naming in pool_names(fabric, pools, fabrics).items()}


def _assert_dns_label(name: str) -> None:
    assert len(name) <= 63, name
    assert DNS_LABEL.match(name), name


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("p5-training", "efa-p5-training"),
        ("a", "efa-a"),
        ("0", "efa-0"),
        ("gpu-2026", "efa-gpu-2026"),
        ("x" * 59, "efa-" + "x" * 59),  # exactly 63 characters
    ],
)
def test_readable_name_for_dns_safe_value_under_any_pool_key(value: str, expected: str) -> None:
    assert _name(value) == expected
    assert _name(value, KARPENTER) == expected  # a Karpenter NodePool's too (round 3)
    assert _name(value, "sagemaker.amazonaws.com/instance-group-name") == expected


@pytest.mark.parametrize(
    ("value", "stem"),
    [
        ("P5-Training", "p5-training"),
        ("p5_training", "p5-training"),
        ("p5.48xlarge", "p5-48xlarge"),
        ("team.ml_gpu-A", "team-ml-gpu-a"),
        ("_leading", "leading"),
        ("trailing-", "trailing"),
        ("a__b..c", "a-b-c"),
        ("x" * 60, "x" * 32),  # 60 + "efa-" is 64: too long to be readable
        ("___", None),
        ("...", None),
    ],
)
def test_sanitized_hashed_name(value: str, stem: str | None) -> None:
    name = _name(value)
    _assert_dns_label(name)
    match = HASHED.match(name)
    assert match is not None, name
    assert match["fabric"] == "efa"
    assert match["stem"] == stem


@pytest.mark.parametrize(
    "value",
    ["A" * 63, "a" * 63, "a." * 31 + "a", "Z_" * 31 + "z", "x-" * 31 + "x", "9" * 63, "a" + "-" * 61 + "b"],
)
@pytest.mark.parametrize("key", [NODEGROUP, KARPENTER, INSTANCE_TYPE])
@pytest.mark.parametrize("fabric", ["efa", "aks-rdma", "f" * 20])
def test_names_are_dns_labels_at_most_63(value: str, key: str, fabric: str) -> None:
    name = capability_name(fabric, key, value)
    _assert_dns_label(name)
    assert name.startswith(f"{fabric}-")
    assert is_dns_label(name)


def test_names_are_deterministic() -> None:
    for value in ("p5-training", "P5_Training", "p5.48xlarge", "x" * 63):
        assert _name(value) == _name(value)
        assert _name(value, KARPENTER) == _name(value, KARPENTER)
    # Pinned: a name must survive operator restarts and upgrades.
    assert _name("p5.48xlarge", INSTANCE_TYPE) == "efa-p5-48xlarge-2k55sxqw5mzhlqiatw3o2h5nu4"
    assert hashed_name("efa", KARPENTER, "gpu-mixed") == "efa-gpu-mixed-p4tqsoj6fw2bn3seuhpnv5tb44"
    assert _name("gpu-mixed", KARPENTER) == "efa-gpu-mixed"


def test_two_pool_keys_with_the_same_value_get_different_names() -> None:
    keys = (NODEGROUP, KARPENTER, INSTANCE_TYPE, "alpha.eksctl.io/nodegroup-name")
    names = _names("efa", *((key, "training") for key in keys))
    assert len(set(names.values())) == 4
    # In a collision every pool of it is hashed, whichever came first, and the status says why.
    assert all(HASHED.match(name) for name in names.values())
    naming = pool_names("efa", [(NODEGROUP, "training"), (KARPENTER, "training")])[(KARPENTER, "training")]
    assert (naming.hashed, naming.reason) == (True, "Collision")
    assert naming.message == (
        "pools eks.amazonaws.com/nodegroup=training, karpenter.sh/nodepool=training would all be named"
        " efa-training: each gets the hashed form"
    )
    # Alone, each is readable.
    assert all(_name("training", key) == "efa-training" for key in keys if key != INSTANCE_TYPE)
    for name in names.values():
        _assert_dns_label(name)


def test_names_depend_on_the_set_of_pools_not_their_order() -> None:
    pools = [(NODEGROUP, "gpu"), (KARPENTER, "gpu"), (KARPENTER, "cpu"), (INSTANCE_TYPE, "p5.48xlarge")]
    first = _names("efa", *pools)
    assert _names("efa", *reversed(pools)) == first
    assert first[(KARPENTER, "cpu")] == "efa-cpu"
    # The collision ends with the other pool: the name is readable again, for any key.
    assert _names("efa", (KARPENTER, "gpu"))[(KARPENTER, "gpu")] == "efa-gpu"


@pytest.mark.parametrize(
    "values",
    [
        ("P5_Training", "p5-training", "p5.training", "P5-TRAINING", "p5__training"),
        ("x" * 70, "x" * 71, "x" * 60 + "y"),  # same truncated stem
        ("___", "...", "_._"),  # empty stem
    ],
)
@pytest.mark.parametrize("key", [NODEGROUP, KARPENTER])
def test_values_that_sanitize_the_same_get_different_names(values: tuple[str, ...], key: str) -> None:
    names = [_name(value, key) for value in values]
    assert len(set(names)) == len(values), names
    together = _names("efa", *((key, value) for value in values))
    assert len(set(together.values())) == len(values), together


def test_same_pool_for_two_fabrics_gets_different_names() -> None:
    assert _name("training", fabric="efa") != _name("training", fabric="aks-rdma")
    assert _name("Training", fabric="efa") != _name("Training", fabric="aks-rdma")


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        ("p5-training", True),
        ("P5_Training.v2", True),
        ("", True),  # the empty label value is valid in Kubernetes
        ("a" * 63, True),
        ("a" * 64, False),
        ("-a", False),
        ("a-", False),
        ("_a", False),
        ("a b", False),
        ("a/b", False),
    ],
)
def test_is_label_value(text: str, valid: bool) -> None:
    assert is_label_value(text) is valid


@pytest.mark.parametrize(
    ("text", "valid"),
    [("efa-p5", True), ("a" * 63, True), ("a" * 64, False), ("Efa", False), ("efa_p5", False), ("-efa", False)],
)
def test_is_dns_label(text: str, valid: bool) -> None:
    assert is_dns_label(text) is valid


def test_a_readable_name_can_never_be_another_pools_hashed_name() -> None:
    """The defect behind 188 writes in 40 s: Karpenter pool `foo` was efa-foo-<8 hex>, and a
    node group named exactly that got the same name. A value shaped like a hashed name is
    hashed itself now, and hashed names carry 130 bits of the whole triple."""
    karpenter = _names("efa", (KARPENTER, "foo"), (NODEGROUP, "foo"))[(KARPENTER, "foo")]
    assert HASHED.match(karpenter)
    lookalike = karpenter.removeprefix("efa-")  # a node group named after the other's suffix
    names = _names("efa", (KARPENTER, "foo"), (NODEGROUP, "foo"), (NODEGROUP, lookalike))
    assert names[(NODEGROUP, lookalike)] != karpenter
    assert HASHED.match(names[(NODEGROUP, lookalike)])  # it is hashed too, with its own digest
    assert pool_names("efa", [(NODEGROUP, lookalike)])[(NODEGROUP, lookalike)].reason == "Reserved"
    # A value ending in any 26-character base32 segment is never readable.
    assert _name("team-" + "a" * 26) != "efa-team-" + "a" * 26
    assert _name("a" * 26) != "efa-" + "a" * 26
    # One character short of a digest stays readable.
    assert _name("team-" + "a" * 25) == "efa-team-" + "a" * 25


def test_a_fabric_named_like_another_fabrics_prefix_cannot_take_its_names() -> None:
    fabrics = ["aks", "aks-rdma"]
    short = capability_name("aks", NODEGROUP, "rdma-x", fabrics)
    long = capability_name("aks-rdma", NODEGROUP, "x", fabrics)
    assert long == "aks-rdma-x"
    assert short != long and HASHED.match(short)
    # Without the longer fabric configured, the readable form is free to use.
    assert capability_name("aks", NODEGROUP, "rdma-x", ["aks"]) == "aks-rdma-x"


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["efa", "aks", "aks-rdma", "e"]),
            st.sampled_from([NODEGROUP, KARPENTER, INSTANCE_TYPE]),
            st.text(alphabet="ab-_.Z2", min_size=1, max_size=70),
        ),
        min_size=2,
        max_size=40,
        unique=True,
    )
)
def test_distinct_triples_never_share_a_name(triples: list[tuple[str, str, str]]) -> None:
    fabrics = ("efa", "aks", "aks-rdma", "e")
    names = []
    for fabric in fabrics:
        pools = [(key, value) for of, key, value in triples if of == fabric]
        names += list(_names(fabric, *pools, fabrics=fabrics).values())
    assert len(set(names)) == len(triples), sorted(names)
    for name in names:
        _assert_dns_label(name)
