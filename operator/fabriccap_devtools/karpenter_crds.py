"""Karpenter's CRDs, as github.com/aws/karpenter-provider-aws@v1.15.2 releases them: never hand-written.

NodePool and NodeClaim (karpenter.sh/v1) and EC2NodeClass (karpenter.k8s.aws/v1) from the
module's ``pkg/apis/crds/``, taken from the Go module cache (downloaded through the Go module
proxy when missing, as ``fabriccap-dev catalog`` does: the same module and version the instance
catalog is generated from), each checked against the sha256 pinned here. The end-to-end tests
and the demo install them on the local API server and create Karpenter's objects as Karpenter
writes them (``fabriccap_devtools.world``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from fabriccap.kube.paths import EC2_NODE_CLASSES, NODE_CLAIMS, NODE_POOLS, ApiResource
from fabriccap_devtools.catalog import CRDS, MODULE_PATH, MODULE_VERSION, CatalogSourceError, download_module

# In the order they are created: a NodeClaim's owner (its NodePool) first.
RESOURCES: tuple[ApiResource, ...] = (EC2_NODE_CLASSES, NODE_POOLS, NODE_CLAIMS)


@dataclass(frozen=True)
class KarpenterCrd:
    name: str  # metadata.name
    file: str  # under pkg/apis/crds/
    sha256: str


NODEPOOLS = KarpenterCrd(
    "nodepools.karpenter.sh",
    "karpenter.sh_nodepools.yaml",
    "f93038f695635eeaca2106906dad09a16283664ae54596756580721d29b566ac",
)
NODECLAIMS = KarpenterCrd(
    "nodeclaims.karpenter.sh",
    "karpenter.sh_nodeclaims.yaml",
    "d1409d900c6250b77f8f6c105f6431c8eced9cece204d153b9822982d5373f3b",
)
EC2NODECLASSES = KarpenterCrd(
    "ec2nodeclasses.karpenter.k8s.aws",
    "karpenter.k8s.aws_ec2nodeclasses.yaml",
    "6c7e7c1785149a3c512d625d2f99375e2731a2c8d80f88fe708464257a62e935",
)
KARPENTER_CRDS: tuple[KarpenterCrd, ...] = (NODEPOOLS, NODECLAIMS, EC2NODECLASSES)


def crd_files() -> list[Path]:
    """The three CRD files in the Go module cache, each checked against its pinned sha256."""
    module = download_module(MODULE_VERSION)
    files = []
    for crd in KARPENTER_CRDS:
        path = module / CRDS / crd.file
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != crd.sha256:
            raise CatalogSourceError(
                f"{MODULE_PATH}@{MODULE_VERSION} {CRDS}/{crd.file}: sha256 {actual}, pinned {crd.sha256}"
            )
        files.append(path)
    return files
