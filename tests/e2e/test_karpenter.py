"""Elastic pools end to end: Karpenter's own CRDs (github.com/aws/karpenter-provider-aws@v1.15.2
pkg/apis/crds/, from the Go module proxy) on the real API server, and NodePools, NodeClaims,
EC2NodeClasses and nodes shaped as Karpenter writes them (fabriccap_devtools.world).

No Karpenter runs here: the test creates what it would (a NodeClaim for a pod, its status once
launched, the node it registers with the NodePool's labels and the NodeClaim's providerID), the
way the other e2e tests stand in for kubelets. The API server validates every object against
Karpenter's schema and CEL rules, so a body that Karpenter could not have written is refused.
"""

from __future__ import annotations

import contextlib
import functools
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from fabriccap.core.api import status_written
from fabriccap.core.catalog import InstanceType
from fabriccap.kube.errors import KubeError
from fabriccap.kube.paths import CUSTOM_RESOURCE_DEFINITIONS, EVENTS, ApiResource
from fabriccap_devtools import world
from fabriccap_devtools.catalog import CatalogSourceError
from fabriccap_devtools.karpenter_crds import KARPENTER_CRDS, crd_files
from fabriccap_devtools.seeding import creatable
from harness import (
    OperatorProcess,
    SyncKube,
    daemon_set_path,
    node_path,
    plugin_pod_body,
    pod_path,
    pod_status,
    reasons,
    wait_until,
    write_config,
)
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


def remove(kube: SyncKube, path: str) -> None:
    """Delete as Karpenter's termination controller ends it: its finalizer
    (karpenter.sh/termination, on NodeClaims and nodes) taken off once the instance is gone,
    or the object would stay Terminating for good with no Karpenter here."""
    with contextlib.suppress(KubeError):
        kube.patch(path, {"metadata": {"finalizers": []}})
    kube.delete(path)


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
    for path in (
        node_path(node_name),
        NODECLAIMS.item(claim),
        NODEPOOLS.item(pool),
        EC2NODECLASSES.item(f"class-{suffix}"),
    ):
        remove(kube, path)


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


# ---------------------------------------------------------------------------------------------
# The operator through a NodePool's cycle, on Karpenter's real CRDs

# The provider DaemonSet selects nodes by a NodePool template label, as Karpenter's own EFA e2e
# suite does (test/pkg/environment/aws/expectations.go): every node the NodePool launches gets it.
EFA_NODES = "fabriccap.dev/e2e-efa-node"
STATUS_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def operator(
    cluster: E2ECluster, karpenter_crds: list[str], plugin_namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    """The operator, started once Karpenter's APIs are served (it reads them as optional kinds)."""
    config = {
        "poolGracePeriodSeconds": 3,
        "debounceSeconds": 0.1,
        "fabrics": [{"name": "efa", "devicePlugin": {"namespace": plugin_namespace}}],
    }
    folder = tmp_path_factory.mktemp("karpenter-operator")
    process = OperatorProcess(
        kubeconfig=cluster.kubeconfig,
        config=write_config(folder / "config.yaml", config),
        log_path=folder / "operator.log",
    )
    process.start()
    yield process
    process.stop()


def _status_when(
    kube: SyncKube, name: str, predicate: Callable[[dict[str, Any]], bool], description: str
) -> dict[str, Any]:
    last: list[dict[str, Any] | None] = [None]

    def probe() -> dict[str, Any] | None:
        obj = last[0] = kube.fcap(name)
        return obj if obj is not None and status_written(obj) and predicate(obj) else None

    try:
        return wait_until(probe, f"{name}: {description}", timeout=STATUS_TIMEOUT)
    except AssertionError as error:
        shown = json.dumps((last[0] or {}).get("status"), indent=1)
        raise AssertionError(f"{error}\nlast seen status: {shown}") from None


def _ready(obj: dict[str, Any]) -> tuple[str, str]:
    return reasons(obj).get("Ready", ("", ""))


@dataclass
class Launches:
    """What Karpenter would do for one NodePool: launch a node for pods (a NodeClaim, its status
    once launched, the node it registers) and take it away again."""

    kube: SyncKube
    pool: str
    namespace: str
    daemon_set: dict[str, Any]
    made: list[str] = field(default_factory=list)  # paths, to delete in reverse

    def launch(self, claim: str, node_name: str, *, efa_requested: bool) -> None:
        requests = {"vpc.amazonaws.com/efa": "32"} if efa_requested else {}
        body = world.node_claim(
            claim, self.pool, node_name=node_name, requests=requests, efa=32 if efa_requested else 0
        )
        created = create_with_status(self.kube, NODECLAIMS, body)
        self.made.append(NODECLAIMS.item(claim))
        node = world.karpenter_node(
            node_name, self.pool, claim, efa=32 if efa_requested else None, catalog_labels=P5.labels
        )
        node["metadata"]["labels"][EFA_NODES] = "true"  # the NodePool's template label
        node["metadata"]["ownerReferences"][0]["uid"] = created["metadata"]["uid"]
        create_with_status(self.kube, NODES, node)
        self.made.append(node_path(node_name))
        # The provider's pod on it, Ready (the DaemonSet admits every node the NodePool launches).
        plugin = plugin_pod_body(self.namespace, f"plugin-{claim}", daemon_set=self.daemon_set, node=node_name)
        self.kube.create(pod_path(self.namespace), plugin)
        self.made.append(pod_path(self.namespace, f"plugin-{claim}"))
        self.kube.patch(pod_path(self.namespace, f"plugin-{claim}") + "/status", pod_status())

    def run_job_pod(self, name: str, node_name: str, *, efa: int | None) -> None:
        body = world.workload_pod(node_name, name, namespace=self.namespace, efa=efa)
        status = body.pop("status")
        self.kube.create(pod_path(self.namespace), creatable(body))
        self.made.append(pod_path(self.namespace, name))
        self.kube.patch(pod_path(self.namespace, name) + "/status", {"status": status})

    def scale_to_zero(self) -> None:
        for path in reversed(self.made):
            remove(self.kube, path)
        self.made.clear()


def test_a_nodepool_through_its_cycle(
    cluster: E2ECluster, kube: SyncKube, operator: OperatorProcess, plugin_namespace: str
) -> None:
    """Empty and Ready from the catalog; a pod without EFA gets a node launched without it,
    reported as launched-without and withoutFabric and kept out of the gate set, its launch named
    in the pod's Event; a pod with EFA gets a node with 32 and the pool is Ready over it; back to
    zero, Ready from the catalog again; the NodePool deleted, its object goes."""
    suffix = uuid.uuid4().hex[:6]
    pool, node_class = f"p5-{suffix}", f"class-{suffix}"
    name = f"efa-{pool}"
    daemon_set = world.daemon_set(f"efa-plugin-{suffix}", namespace=plugin_namespace, node_selector={EFA_NODES: "true"})
    daemon_set.pop("status")
    daemon_set = kube.create(daemon_set_path(plugin_namespace), creatable(daemon_set))
    create_with_status(kube, EC2NODECLASSES, world.ec2_node_class(node_class))
    requirements = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}]
    body = world.node_pool(pool, requirements, node_class=node_class, labels={EFA_NODES: "true"})
    create_with_status(kube, NODEPOOLS, body)
    karpenter = Launches(kube, pool, plugin_namespace, daemon_set)
    try:
        # 1. Empty: a pool all the same, Ready from the catalog.
        # The ready label is raised by its own patch after the status says Ready (writes.py): wait for both.
        empty = _status_when(
            kube,
            name,
            lambda obj: (
                _ready(obj) == ("True", "UniformCapability")
                and obj["metadata"].get("labels", {}).get("fabriccap.dev/ready") == "true"
            ),
            "Ready, empty, and labelled so",
        )
        status = empty["status"]
        assert (status["nodes"], status["pool"]) == (0, {"key": "karpenter.sh/nodepool", "value": pool})
        assert reasons(empty)["Launchable"] == ("True", "UniformLaunchableCount")
        assert status["recommendation"]["resourcesPerNode"] == {"vpc.amazonaws.com/efa": "32"}
        assert status["launchable"]["instanceTypes"] == [{"name": "p5.48xlarge", "maxCount": 32}]
        assert empty["metadata"]["labels"]["fabriccap.dev/ready"] == "true"

        # 2. A job pod asking for GPUs only: Karpenter launches a node without EFA for it.
        without = f"ip-10-0-8-{suffix}.us-west-2.compute.internal"
        karpenter.launch(f"{pool}-aaaaa", without, efa_requested=False)
        karpenter.run_job_pod(f"forgot-{suffix}", without, efa=None)

        def launched_without(obj: dict[str, Any]) -> bool:
            workloads = obj["status"].get("workloads") or {}
            return (
                obj["status"]["gap"].get("launchedWithoutFabric") == 1
                and (workloads.get("withoutFabric") or {}).get("pods") == 1
            )

        seen = _status_when(kube, name, launched_without, "a node launched without EFA, its pod withoutFabric")
        status = seen["status"]
        assert (status["nodes"], status["gap"]["nodes"]) == (0, [without])
        assert _ready(seen) == ("True", "UniformCapability")  # not PartialRollout, not the plugin's fault
        assert (status["workloads"]["offenders"][0]["name"], status["workloads"]["offenders"][0]["problem"]) == (
            f"forgot-{suffix}",
            "withoutFabric",  # the offender problem as the CRD spells it (SPEC writes FabricNotRequested)
        )

        def named_launch() -> list[dict[str, Any]]:
            return [
                event
                for event in kube.list_objects(EVENTS.collection(plugin_namespace))
                if event.get("reason") == "FabricNotRequested"
                and event["involvedObject"].get("name") == f"forgot-{suffix}"
            ]

        (event,) = wait_until(named_launch, "the pod's FabricNotRequested Event", timeout=STATUS_TIMEOUT)
        assert event["message"].startswith(
            f"Karpenter launched {without} without EFA because this job requested none;"
            " request vpc.amazonaws.com/efa: 32"
        )

        # 3. A job pod asking for EFA: a node with 32, and the pool is Ready over its nodes.
        karpenter.scale_to_zero()
        with_efa = f"ip-10-0-9-{suffix}.us-west-2.compute.internal"
        karpenter.launch(f"{pool}-bbbbb", with_efa, efa_requested=True)
        karpenter.run_job_pod(f"asked-{suffix}", with_efa, efa=32)
        over_nodes = _status_when(
            kube,
            name,
            lambda obj: (
                obj["status"]["nodes"] == 1
                and _ready(obj) == ("True", "UniformCapability")
                # The pod comes after its node: wait until it is seen too.
                and ((obj["status"].get("workloads") or {}).get("requestingFabric") or {}).get("pods") == 1
            ),
            "Ready over its one node, its pod requesting EFA",
        )
        status = over_nodes["status"]
        assert (status["uniformCount"], status["advertisingNodes"], status["gap"]["launchedWithoutFabric"]) == (
            32,
            1,
            0,
        )
        assert status["workloads"]["requestingFabric"]["pods"] == 1

        # 4. Back to zero: Ready from the catalog again, nothing left out.
        karpenter.scale_to_zero()
        zero = _status_when(
            kube,
            name,
            lambda obj: obj["status"]["nodes"] == 0 and not obj["status"]["gap"].get("launchedWithoutFabric"),
            "scaled back to zero",
        )
        assert _ready(zero) == ("True", "UniformCapability")
        assert zero["status"].get("uniformCount") is None
    finally:
        karpenter.scale_to_zero()
        kube.delete(NODEPOOLS.item(pool))
        kube.delete(EC2NODECLASSES.item(node_class))
        kube.delete(daemon_set_path(plugin_namespace, daemon_set["metadata"]["name"]))
    # 5. The NodePool gone: no pool, and the object goes after the grace period.
    wait_until(lambda: kube.fcap(name) is None, f"{name} deleted", timeout=STATUS_TIMEOUT)
