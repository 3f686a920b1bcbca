"""The checked-in EFA catalog is what ``fabriccap-dev catalog`` makes from the pinned Karpenter module.

The module comes from the Go module proxy into the Go module cache (downloaded here when it is
not cached: 76 MB, about 10 s), exactly as ``fabriccap-dev catalog`` fetches it, and the catalog
is regenerated from it in memory and compared byte for byte with the package data.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fabriccap.core.catalog import name_labels
from fabriccap_devtools.catalog import (
    CATALOG,
    INSTANCETYPE,
    MODULE_VERSION,
    VPC_LIMITS_FILE,
    CatalogSourceError,
    download_module,
    generate,
    read_network_cards,
)


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the go command (scripts/bootstrap.sh --test)")
def test_the_catalog_matches_a_regeneration_from_the_module() -> None:
    module = download_module(MODULE_VERSION)
    assert generate(module) == CATALOG.read_text(encoding="utf-8"), (
        "operator/fabriccap/data/efa-catalog.json is stale: run `fabriccap-dev catalog`"
    )


@pytest.mark.parametrize(
    ("name", "labels"),
    [
        ("p5.48xlarge", ("p5", "p", "5", "48xlarge")),
        ("p6-b200.48xlarge", ("p6-b200", "p", "6", "48xlarge")),
        ("trn2u.48xlarge", ("trn2u", "trn", "2", "48xlarge")),
        ("u7in-16tb.224xlarge", ("u7in-16tb", "u", "7", "224xlarge")),
        ("u-6tb1.56xlarge", ("u-6tb1", "u", "1", "56xlarge")),
        ("c7a.metal-48xl", ("c7a", "c", "7", "metal-48xl")),
        ("gr6.8xlarge", ("gr6", "gr", "6", "8xlarge")),
        ("weird", (None, None, None, None)),
    ],
)
def test_karpenters_name_rule(name: str, labels: tuple[str | None, ...]) -> None:
    """computeRequirements in the provider's pkg/providers/instancetype/types.go, as its generated
    instance-types reference page shows it for every type."""
    assert name_labels(name) == labels


_LIMITS = """package instancetype

type NetworkCard struct {
	MaximumNetworkInterfaces int64
	NetworkCardIndex   int64
	NetworkPerformance string
}

type VPCLimits struct {
	NetworkCards            []NetworkCard
}

var Limits = map[string]*VPCLimits{
	"p4d.24xlarge": {
		Interface:               60,
		DefaultNetworkCardIndex: 0,
		NetworkCards: []NetworkCard{
			{
				MaximumNetworkInterfaces: 15,
				NetworkCardIndex:         0,
			},

			{
				MaximumNetworkInterfaces: 15,
				NetworkCardIndex:         1,
			},
		},
		Hypervisor:  "nitro",
		IsBareMetal: false,
	},
}
"""


def test_network_cards_are_read_as_the_provider_writes_them(tmp_path: Path) -> None:
    """The shape of pkg/providers/instancetype/zz_generated.vpclimits.go (v1.15.2); a changed
    shape or cards out of index order stop the generator instead of shifting a card."""
    source = tmp_path / "zz_generated.vpclimits.go"
    source.write_text(_LIMITS, encoding="utf-8")
    assert read_network_cards(source) == {"p4d.24xlarge": (15, 15)}
    source.write_text(_LIMITS.replace("NetworkCardIndex:         1", "NetworkCardIndex:         2"), encoding="utf-8")
    with pytest.raises(CatalogSourceError, match=r"not indexes 0\.\.1 in order: \[0, 2\]"):
        read_network_cards(source)
    source.write_text(_LIMITS.replace("IsBareMetal: false", "EfaSupported: true"), encoding="utf-8")
    with pytest.raises(CatalogSourceError, match="unexpected line 'EfaSupported: true,'"):
        read_network_cards(source)


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the go command (scripts/bootstrap.sh --test)")
def test_the_pinned_modules_network_cards() -> None:
    cards = read_network_cards(download_module(MODULE_VERSION) / INSTANCETYPE / VPC_LIMITS_FILE)
    assert cards["p5.48xlarge"] == (2,) * 32 and cards["p4d.24xlarge"] == (15,) * 4 and cards["g5.12xlarge"] == (15,)
