"""Where the dev tools find the repository: around them, always.

The dev tools are never in the wheel or the image (the build backend leaves them out, see
build_backend.py); the checkout's editable install provides them, so they run from a checkout
and read its files where they are (the CRD, the example cluster, the docs) instead of carrying
copies that could drift.
"""

from __future__ import annotations

from pathlib import Path

# operator/fabriccap_devtools/checkout.py -> the repository root.
REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "crds" / "fabriccapabilities.yaml"
EXAMPLE_CLUSTER = REPO / "examples" / "eks-cluster.json"
