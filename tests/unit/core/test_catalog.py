"""The instance catalog: SPEC's figures as the oracle, Karpenter's labels, and a corrupt file refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabriccap.catalogfile import CATALOG_FILES, CatalogFileError, load_catalogs, read_catalog
from fabriccap.core.catalog import CATALOG_FORMAT, COLUMNS, CatalogError, parse_catalog
from support.configs import EFA_CATALOG, default_config

# SPEC's former hand table, "Known EFA maxima", now a test oracle: the generated catalog must agree.
SPEC_EFA_MAXIMA = {
    "p4d.24xlarge": 4,
    "p4de.24xlarge": 4,
    "p5.48xlarge": 32,
    "p5e.48xlarge": 32,
    "p5.4xlarge": 1,
    "p5en.48xlarge": 16,
    "p6-b200.48xlarge": 8,
    "p6-b300.48xlarge": 16,
    "trn1.32xlarge": 8,
    "trn1n.32xlarge": 16,
    "trn2.48xlarge": 16,
    "trn2.3xlarge": 1,
    "g6e.48xlarge": 4,
    "g7e.8xlarge": 1,
}


@pytest.mark.parametrize(("instance_type", "maximum"), sorted(SPEC_EFA_MAXIMA.items()))
def test_the_catalog_agrees_with_specs_figures(instance_type: str, maximum: int) -> None:
    known = EFA_CATALOG.get(instance_type)
    assert known is not None and known.maximum == maximum
    efa = next(fabric for fabric in default_config().fabrics if fabric.name == "efa")
    assert efa.maximum_for(instance_type) == maximum


def test_the_catalog_covers_every_efa_type_of_the_module() -> None:
    assert EFA_CATALOG.source == "github.com/aws/karpenter-provider-aws@v1.15.2"
    assert EFA_CATALOG.resource == "vpc.amazonaws.com/efa"
    # 302 types in EFAMetadataByInstanceType, plus the accelerator types Karpenter launches without EFA.
    assert sum(1 for known in EFA_CATALOG if known.maximum > 0) == 302
    assert EFA_CATALOG.get("trn1.2xlarge") is not None and EFA_CATALOG.get("trn1.2xlarge").maximum == 0  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("instance_type", "labels"),
    [
        (
            "p5.48xlarge",
            {
                "karpenter.k8s.aws/instance-family": "p5",
                "karpenter.k8s.aws/instance-category": "p",
                "karpenter.k8s.aws/instance-generation": "5",
                "karpenter.k8s.aws/instance-size": "48xlarge",
                "karpenter.k8s.aws/instance-gpu-name": "h100",
                "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
                "karpenter.k8s.aws/instance-gpu-count": "8",
                "karpenter.k8s.aws/instance-cpu": "192",
                "karpenter.k8s.aws/instance-hypervisor": "nitro",
                "kubernetes.io/arch": "amd64",
            },
        ),
        # Karpenter's name rule: the -b200 suffix is part of the family; category p, generation 6.
        (
            "p6-b200.48xlarge",
            {"karpenter.k8s.aws/instance-family": "p6-b200", "karpenter.k8s.aws/instance-generation": "6"},
        ),
        # Neuron types carry accelerator labels, not GPU ones.
        (
            "trn1.32xlarge",
            {
                "karpenter.k8s.aws/instance-accelerator-name": "trainium",
                "karpenter.k8s.aws/instance-accelerator-manufacturer": "aws",
                "karpenter.k8s.aws/instance-accelerator-count": "16",
            },
        ),
        # gr6 is category gr: `instance-category In [g]` does not admit it.
        ("gr6.8xlarge", {"karpenter.k8s.aws/instance-category": "gr"}),
        # Metal types have an empty hypervisor label, a real value.
        ("c5n.metal", {"karpenter.k8s.aws/instance-hypervisor": ""}),
    ],
)
def test_labels_are_karpenters(instance_type: str, labels: dict[str, str]) -> None:
    known = EFA_CATALOG.get(instance_type)
    assert known is not None
    for key, value in labels.items():
        assert known.value_of(key) == value, key


def test_neuron_counts_and_unknown_facts() -> None:
    trn2 = EFA_CATALOG.get("trn2.3xlarge")
    assert trn2 is not None
    assert trn2.resources == {"aws.amazon.com/neuron": 1, "aws.amazon.com/neuroncore": 8}
    # Its vCPUs are in no Karpenter source: unknown, so a requirement on them cannot exclude it.
    assert "karpenter.k8s.aws/instance-cpu" in trn2.unknown
    assert trn2.value_of("karpenter.k8s.aws/instance-cpu") is None
    assert EFA_CATALOG.get("p5.48xlarge").resources == {"nvidia.com/gpu": 8}  # type: ignore[union-attr]


def test_network_cards_come_from_the_providers_vpc_limits() -> None:
    """pkg/providers/instancetype/zz_generated.vpclimits.go of the pinned module: per card index,
    MaximumNetworkInterfaces (Karpenter's networkInterfaceCheck reads EC2's same figures)."""
    cards = {name: EFA_CATALOG.get(name).network_cards for name in ("p5.48xlarge", "p4d.24xlarge", "g5.12xlarge")}  # type: ignore[union-attr]
    assert cards == {"p5.48xlarge": (2,) * 32, "p4d.24xlarge": (15,) * 4, "g5.12xlarge": (15,)}
    # EFA types the VPC limits lack: not known, not guessed.
    assert EFA_CATALOG.get("trn2.48xlarge").network_cards is None  # type: ignore[union-attr]
    assert sum(1 for known in EFA_CATALOG if known.maximum > 0 and known.network_cards is None) == 13


def _document(**changes: Any) -> dict[str, Any]:
    row = ["p5.48xlarge", 32, "p5", "p", "5", "48xlarge", "amd64", 192, 2097152, "nitro", None, None, {}, [2, 2]]
    return {
        "format": CATALOG_FORMAT,
        "resource": "vpc.amazonaws.com/efa",
        "columns": list(COLUMNS),
        "types": [row],
    } | changes


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ([], "not a JSON object"),
        (_document(format="other/v9"), "format is 'other/v9'"),
        (_document(columns=["name"]), "columns are not"),
        (_document(types=[]), "types is not a non-empty list"),
        (
            _document(types=[["p5.48xlarge", -1, *[None] * 10, {}, None]]),
            "types[0] (p5.48xlarge) maximum: -1 is not a count",
        ),
        (_document(types=[["P5 48", 1, *[None] * 10, {}, None]]), "'P5 48' is not an instance type name"),
        (_document(types=[["p5.48xlarge", 1, *[None] * 10, [], None]]), "resources: not an object"),
        (
            _document(types=[["x.y", 1, *[None] * 10, {}, None], ["x.y", 2, *[None] * 10, {}, None]]),
            "x.y appears twice",
        ),
        # A card's position is its index: a gap or an empty list is refused, not skipped.
        (_document(types=[["x.y", 1, *[None] * 10, {}, [2, None]]]), "networkCards[1]: missing"),
        (_document(types=[["x.y", 1, *[None] * 10, {}, []]]), "networkCards: not a list of 1 to 64 counts"),
    ],
)
def test_a_corrupt_catalog_is_refused_with_one_line(document: Any, problem: str) -> None:
    with pytest.raises(CatalogError) as caught:
        parse_catalog(document, "efa-catalog.json")
    assert problem in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_loader_refuses_a_missing_or_corrupt_file(tmp_path: Path) -> None:
    assert CATALOG_FILES == ("efa-catalog.json",)
    with pytest.raises(CatalogFileError, match="cannot read"):
        load_catalogs([tmp_path / "missing.json"])
    corrupt = tmp_path / "efa-catalog.json"
    corrupt.write_text('{"format": "fabriccap.instance-catalog/v2", "types": [')
    with pytest.raises(CatalogFileError, match=r"not JSON .*reinstall fabriccap"):
        read_catalog(corrupt)
    corrupt.write_text(json.dumps(_document(types=[["x.y", "many", *[None] * 10, {}, None]])))
    with pytest.raises(CatalogFileError, match="maximum: 'many' is not a count"):
        read_catalog(corrupt)
