"""Elastic pools end to end: Karpenter's own CRDs (github.com/aws/karpenter-provider-aws@v1.15.2
pkg/apis/crds/, from the Go module proxy) on the real API server, and NodePools, NodeClaims,
EC2NodeClasses and nodes shaped as Karpenter writes them (fabriccap_devtools.world).

No Karpenter runs here: the test creates what it would (a NodeClaim for a pod, its status once
launched, the node it registers with the NodePool's labels and the NodeClaim's providerID), the
way the other e2e tests stand in for kubelets. The API server validates every object against
Karpenter's schema and CEL rules, so a body that Karpenter could not have written is refused.
"""

from __future__ import annotations

import functools
import uuid
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from fabriccap.core.catalog import InstanceType
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import CUSTOM_RESOURCE_DEFINITIONS, ApiResource
from fabriccap_devtools import world
from fabriccap_devtools.catalog import CatalogSourceError
from fabriccap_devtools.karpenter_crds import KARPENTER_CRDS, crd_files
from fabriccap_devtools.seeding import creatable
from harness import SyncKube, node_path, wait_until
from support.configs import EFA_CATALOG

if TYPE_CHECKING:
    from harness import E2ECluster

NODEPOOLS = ApiResource("karpenter.sh", "v1", "nodepools", "NodePool", namespaced=False)
NODECLAIMS = ApiResource("karpenter.sh", "v1", "nodeclaims", "NodeClaim", namespaced=False)
EC2NODECLASSES = ApiResource("karpenter.k8s.aws", "v1", "ec2nodeclasses", "EC2NodeClass", namespaced=False)
NODES = ApiResource("", "v1", "nodes", "Node", namespaced=False)
P5: InstanceType = EFA_CATALOG.get("p5.48xlarge")  # type: ignore[assignment]


def established(kube: SyncKube, name: str) -> bool:
    crd = kube.get(CUSTOM_RESOURCE_DEFINITIONS.item(name)) or {}
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in (crd.get("status") or {}).get("conditions") or []
    )


@pytest.fixture(scope="module")
def karpenter_crds(cluster: E2ECluster) -> list[str]:
    if cluster.local is None:
        pytest.skip("installs cluster-wide CRDs: only on the local control plane")
    try:
        files = crd_files()
    except CatalogSourceError as error:
        pytest.fail(str(error))
    admin = SyncKube(cluster.kubeconfig)
    names = []
    for crd, path in zip(KARPENTER_CRDS, files, strict=True):
        assert yaml.safe_load(path.read_text())["metadata"]["name"] == crd.name
        cluster.run_kubectl("apply", "--server-side", "--field-manager=fabriccap-e2e", "-f", str(path))
        wait_until(functools.partial(established, admin, crd.name), f"CRD {crd.name} Established", timeout=60)
        names.append(crd.name)
    admin.close()
    return names


def create_with_status(kube: SyncKube, resource: ApiResource, body: dict[str, Any]) -> dict[str, Any]:
    """Create, then write the status as its controller would (the status is a subresource)."""
    status = body.get("status")
    created = kube.create(
        resource.collection(), creatable({key: value for key, value in body.items() if key != "status"})
    )
    if status:
        created = kube.patch(resource.item(body["metadata"]["name"]) + "/status", {"status": status})
    return created


def test_karpenters_objects_as_the_world_writes_them_pass_its_own_crds(
    cluster: E2ECluster, kube: SyncKube, karpenter_crds: list[str]
) -> None:
    suffix = uuid.uuid4().hex[:6]
    pool, claim, node_name = f"gpu-{suffix}", f"gpu-{suffix}-abcde", f"ip-10-0-7-{suffix}.us-west-2.compute.internal"
    requirements = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}]
    create_with_status(kube, EC2NODECLASSES, world.ec2_node_class(f"class-{suffix}", efa_only=2))
    created = create_with_status(kube, NODEPOOLS, world.node_pool(pool, requirements, node_class=f"class-{suffix}"))
    assert created["spec"]["template"]["spec"]["requirements"] == requirements
    body = world.node_claim(claim, pool, node_name=node_name, requests={"vpc.amazonaws.com/efa": "32"}, efa=32)
    claimed = create_with_status(kube, NODECLAIMS, body)
    assert (claimed["status"]["nodeName"], claimed["status"]["capacity"]["vpc.amazonaws.com/efa"]) == (node_name, "32")
    node = world.karpenter_node(node_name, pool, claim, catalog_labels=P5.labels)
    registered = create_with_status(kube, NODES, node)
    assert registered["spec"]["providerID"] == claimed["status"]["providerID"]
    for path in (NODECLAIMS.item(claim), NODEPOOLS.item(pool), EC2NODECLASSES.item(f"class-{suffix}")):
        kube.delete(path)
    kube.delete(node_path(node_name))


@pytest.mark.parametrize("bad", ["Matches", "Gt-eight"])
def test_its_crds_refuse_what_karpenter_never_writes(
    cluster: E2ECluster, kube: SyncKube, karpenter_crds: list[str], bad: str
) -> None:
    """An unknown operator, or Gt on a non-number, never reaches the operator from a real
    cluster: the CRD's own rules refuse them (snapshots may still carry them; the core says so)."""
    operator, values = ("Matches", ["p5"]) if bad == "Matches" else ("Gt", ["eight"])
    requirement = {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": operator, "values": values}
    with pytest.raises(KubeError) as refused:
        kube.create(NODEPOOLS.collection(), creatable(world.node_pool(f"bad-{uuid.uuid4().hex[:6]}", [requirement])))
    assert refused.value.status == 422


def test_the_crd_files_are_the_modules() -> None:
    assert [path.name for path in crd_files()] == [crd.file for crd in KARPENTER_CRDS]
