"""The checked-in EFA catalog is what ``fabriccap-dev catalog`` makes from the pinned Karpenter module.

The module comes from the Go module proxy into the Go module cache (downloaded here when it is
not cached: 76 MB, about 10 s), exactly as ``fabriccap-dev catalog`` fetches it, and the catalog
is regenerated from it in memory and compared byte for byte with the package data.
"""

from __future__ import annotations

import shutil

import pytest

from fabriccap.core.catalog import name_labels
from fabriccap_devtools.catalog import CATALOG, MODULE_VERSION, download_module, generate


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
