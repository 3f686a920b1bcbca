"""The demo ships copies of the CRD and the example cluster inside the package (a wheel has no
repo around it); these tests fail when a copy drifts from its source."""

from pathlib import Path

from fabriccap.dev.demo import data_path

REPO = Path(__file__).resolve().parents[2]


def test_packaged_crd_is_the_crd() -> None:
    assert data_path("fabriccapabilities.yaml").read_bytes() == (REPO / "crds" / "fabriccapabilities.yaml").read_bytes()


def test_packaged_demo_cluster_is_the_example() -> None:
    assert data_path("demo-cluster.json").read_bytes() == (REPO / "examples" / "eks-cluster.json").read_bytes()
