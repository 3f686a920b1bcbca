"""DRA on a real kubelet, with the real kube-scheduler allocating: the pool's count is the count
the scheduler's claims get, and it holds while the driver has moved allocated devices away.

One node (pool ``real-dra``, p5.48xlarge) of the local control plane (kube-apiserver,
kube-controller-manager, kube-scheduler v1.35 with DRAExtendedResource on, a real kubelet with
containerd). What stands in for DRANET is what the operator reads of it: the aws-dranet chart's
DeviceClass (fabriccap_devtools.upstream), a DaemonSet labelled as the chart labels it whose
pod the real DaemonSet controller and kubelet run (the sleeper image: no registry is reachable),
and a ResourceSlice of 4 EFA devices in DRANET's shape for the node. No DRA kubelet plugin
registers, so the kubelet cannot prepare a claim: what it says about that is part of what the
test reads, not hidden. Every allocation below is kube-scheduler's own.

Root only (``realnodes``), like tests/e2e/test_real_nodes.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fabriccap.kube.paths import (
    DAEMON_SETS,
    DEVICE_CLASSES,
    EVENTS,
    FABRIC_CAPABILITIES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from fabriccap_devtools import world
from fabriccap_devtools.controlplane.images import SLEEPER_IMAGE
from fabriccap_devtools.controlplane.nodes import NodeOptions, node_specs
from fabriccap_devtools.seeding import creatable
from fabriccap_devtools.world import EFA, KUBE_SYSTEM
from harness import E2ECluster, OperatorProcess, SyncKube, condition, wait_until, write_config
from realnodes import real_node_cluster

pytestmark = pytest.mark.realnodes

POOL = "real-dra"
FCAP = f"efa-{POOL}"
(NODE,) = (spec.name for spec in node_specs(1, pool=POOL))
NAMESPACE = "default"
DEVICES = 4
TIMEOUT = 120.0
# kube-scheduler's DRA plugin and KEP-5004's extended-resource path (alpha in v1.35).
FEATURE_GATES = ("DRAExtendedResource=true",)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, uncaptured: Any, timings: Any) -> Iterator[E2ECluster]:
    """This module's own cluster in place of the shared one (conftest's ``kube`` follows it)."""
    with real_node_cluster(
        tmp_path_factory.mktemp("realnodes-dra"),
        node_specs(1, pool=POOL),
        uncaptured=uncaptured,
        timings=timings,
        what="dra: control plane + 1 node Ready",
        node_options=NodeOptions(status_update_frequency_seconds=2),
        feature_gates=FEATURE_GATES,
    ) as (cluster, _):
        yield cluster


@pytest.fixture(scope="module")
def operator(cluster: E2ECluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    directory = tmp_path_factory.mktemp("realnodes-dra-operator")
    # The built-in efa profile as shipped: DRANET found in kube-system by the chart's label.
    process = OperatorProcess(
        kubeconfig=cluster.kubeconfig,
        config=write_config(directory / "config.yaml", {"debounceSeconds": 0.5}),
        log_path=directory / "operator.log",
    )
    process.start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def slice_name(cluster: E2ECluster, kube: SyncKube, operator: OperatorProcess) -> str:
    """The class, the driver's pod Ready on the node, its slice of 4 EFA: the pool Ready with 4.
    Returns the slice's name."""
    kube.create(DEVICE_CLASSES.collection(), world.efa_device_class())
    daemon_set = world.dranet_daemon_set(namespace=KUBE_SYSTEM)
    daemon_set.pop("status")
    (container,) = daemon_set["spec"]["template"]["spec"]["containers"]
    container.update(image=SLEEPER_IMAGE, imagePullPolicy="Never", resources=_small())
    daemon_set["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 1
    daemon_set["spec"]["template"]["spec"]["automountServiceAccountToken"] = False
    kube.create(DAEMON_SETS.collection(KUBE_SYSTEM), creatable(daemon_set))
    node = kube.get(NODES.item(NODE)) or {}
    published = world.resource_slice(NODE, efa=DEVICES)
    published["metadata"]["ownerReferences"][0]["uid"] = node["metadata"]["uid"]
    created = kube.create(RESOURCE_SLICES.collection(), creatable(published))
    status = wait_until(lambda: _ready_with(kube, DEVICES), f"{FCAP} Ready with {DEVICES}", timeout=TIMEOUT)
    assert status["sources"] == [{"source": "devicePlugin", "nodes": 0}, {"source": "dra", "nodes": 1}]
    return str(created["metadata"]["name"])


def _small() -> dict[str, Any]:
    """Requests and a memory limit: a shared machine."""
    return {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}}


def _status(kube: SyncKube) -> dict[str, Any]:
    return dict((kube.get(FABRIC_CAPABILITIES.item(FCAP)) or {}).get("status") or {})


def _ready_with(kube: SyncKube, count: int) -> dict[str, Any] | None:
    """The pool's status when it is Ready with ``count`` devices a node, else None."""
    status = _status(kube)
    if not status.get("conditions") or status.get("uniformCount") != count:
        return None
    return status if condition({"status": status}, "Ready")["status"] == "True" else None


def _claim(name: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "efa",
                        "exactly": {
                            "deviceClassName": world.EFA_DEVICE_CLASS,
                            "allocationMode": "ExactCount",
                            "count": count,
                        },
                    }
                ]
            }
        },
    }


def _pod(name: str, *, claim: str | None = None, efa: int | None = None) -> dict[str, Any]:
    """The sleeper, using ``claim`` or requesting ``efa`` devices as an extended resource."""
    resources = _small()
    container: dict[str, Any] = {"name": "train", "image": SLEEPER_IMAGE, "imagePullPolicy": "Never"}
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "containers": [container],
    }
    if claim is not None:
        resources["claims"] = [{"name": "efa"}]
        spec["resourceClaims"] = [{"name": "efa", "resourceClaimName": claim}]
    if efa is not None:
        resources["requests"][EFA] = str(efa)
        resources["limits"][EFA] = str(efa)
    container["resources"] = resources
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


def _allocation(kube: SyncKube, claim: str) -> list[dict[str, Any]] | None:
    obj = kube.get(RESOURCE_CLAIMS.item(claim, NAMESPACE)) or {}
    results = ((((obj.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")) or []
    return list(results) or None


def _bound_to(kube: SyncKube, pod: str) -> str | None:
    return ((kube.get(PODS.item(pod, NAMESPACE)) or {}).get("spec") or {}).get("nodeName")


def _events_of_pod(kube: SyncKube, pod: str) -> list[dict[str, Any]]:
    return [
        event
        for event in kube.list_objects(EVENTS.collection(NAMESPACE))
        if (event.get("involvedObject") or {}).get("name") == pod
    ]


def _requesting(kube: SyncKube) -> int:
    workloads = _status(kube).get("workloads") or {}
    return int((workloads.get("requestingFabric") or {}).get("pods") or 0)


def _wait_gone(kube: SyncKube, path: str) -> None:
    kube.delete(path)
    wait_until(lambda: kube.get(path) is None, f"{path} gone", timeout=TIMEOUT)


@pytest.fixture
def dra_pool(kube: SyncKube, slice_name: str, operator: OperatorProcess) -> Iterator[str]:
    """Each test starts from the slice of 4 and the pool Ready with 4, and ends with no pod of its own."""
    full = world.resource_slice(NODE, efa=DEVICES)["spec"]["devices"]
    kube.patch(RESOURCE_SLICES.item(slice_name), {"spec": {"devices": full}})
    wait_until(lambda: _ready_with(kube, DEVICES), f"{FCAP} Ready with {DEVICES}", timeout=TIMEOUT)
    yield slice_name
    for pod in kube.list_objects(PODS.collection(NAMESPACE)):
        _wait_gone(kube, PODS.item(pod["metadata"]["name"], NAMESPACE))
    assert operator.running, operator.log()


def test_the_scheduler_allocates_a_claim_and_the_pool_keeps_the_devices_the_driver_moved(
    kube: SyncKube, dra_pool: str
) -> None:
    kube.create(RESOURCE_CLAIMS.collection(NAMESPACE), _claim("job-efa", 2))
    kube.create(PODS.collection(NAMESPACE), _pod("job", claim="job-efa"))

    # kube-scheduler selected two devices with the class's CEL, wrote the allocation and bound the pod.
    results = wait_until(lambda: _allocation(kube, "job-efa"), "the scheduler's allocation", timeout=TIMEOUT)
    assert len(results) == 2, results
    assert {(r["driver"], r["pool"]) for r in results} == {(world.DRANET_DRIVER, NODE)}, results
    slice_devices = {d["name"] for d in (kube.get(RESOURCE_SLICES.item(dra_pool)) or {})["spec"]["devices"]}
    allocated = [str(r["device"]) for r in results]
    assert set(allocated) <= slice_devices, (allocated, slice_devices)
    node_name = wait_until(lambda: _bound_to(kube, "job"), "the pod bound", timeout=TIMEOUT)
    assert node_name == NODE
    # No DRA kubelet plugin is registered: the kubelet says so on the pod and never starts it.
    prepare = wait_until(
        lambda: [e for e in _events_of_pod(kube, "job") if e["reason"] == "FailedPrepareDynamicResources"],
        "the kubelet's FailedPrepareDynamicResources",
        timeout=TIMEOUT,
        interval=0.5,
    )
    assert world.DRANET_DRIVER in prepare[0]["message"], prepare[0]["message"]

    # The pool's count is unchanged by the allocation, and the pod asks for the fabric.
    assert _ready_with(kube, DEVICES) is not None, _status(kube)
    wait_until(lambda: _requesting(kube) == 1, "the claim's pod counted as requesting the fabric", timeout=TIMEOUT)

    # DRANET moves an allocated interface into the pod and drops it from the slice (dranet#97, #99):
    # the claim still holds the devices, and they still count for the node.
    remaining = [
        d for d in (kube.get(RESOURCE_SLICES.item(dra_pool)) or {})["spec"]["devices"] if d["name"] not in allocated
    ]
    assert len(remaining) == DEVICES - 2
    kube.patch(RESOURCE_SLICES.item(dra_pool), {"spec": {"devices": remaining}})
    said = f"{NODE}: 2 allocated to ResourceClaims and no longer in its ResourceSlices"

    def holding() -> dict[str, Any] | None:
        status = _ready_with(kube, DEVICES)
        return status if status is not None and said in condition({"status": status}, "Advertised")["message"] else None

    wait_until(holding, "the allocated devices counted while the slice lacks them", timeout=TIMEOUT)

    # Only the claim kept them: with the pod and its claim gone, the node offers what its slice says.
    _wait_gone(kube, PODS.item("job", NAMESPACE))
    _wait_gone(kube, RESOURCE_CLAIMS.item("job-efa", NAMESPACE))
    wait_until(lambda: _status(kube).get("uniformCount") == DEVICES - 2, "the count without the claim", timeout=TIMEOUT)


def test_a_pod_asking_for_the_extended_resource_is_served_by_the_class_and_requests_the_fabric(
    kube: SyncKube, dra_pool: str
) -> None:
    """KEP-5004: the class maps vpc.amazonaws.com/efa; no device plugin runs on the node, so only
    DRA can serve the pod's request, and kube-scheduler does it with a claim of its own."""
    kube.patch(DEVICE_CLASSES.item(world.EFA_DEVICE_CLASS), {"spec": {"extendedResourceName": EFA}})
    try:
        kube.create(PODS.collection(NAMESPACE), _pod("kep5004", efa=1))

        def claim_status() -> dict[str, Any] | None:
            status = (kube.get(PODS.item("kep5004", NAMESPACE)) or {}).get("status") or {}
            return status.get("extendedResourceClaimStatus")

        written = wait_until(claim_status, "the scheduler's extendedResourceClaimStatus", timeout=TIMEOUT)
        (mapping,) = written["requestMappings"]
        assert (mapping["containerName"], mapping["resourceName"]) == ("train", EFA), written
        claim = str(written["resourceClaimName"])
        obj = kube.get(RESOURCE_CLAIMS.item(claim, NAMESPACE)) or {}
        # The scheduler's own claim, owned by the pod: not one a user or a test wrote.
        assert obj["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}, obj
        assert {field["manager"] for field in obj["metadata"]["managedFields"]} == {"kube-scheduler"}, obj
        (request,) = obj["spec"]["devices"]["requests"]
        assert request["exactly"]["deviceClassName"] == world.EFA_DEVICE_CLASS, request
        results = wait_until(lambda: _allocation(kube, claim), "the scheduler's allocation", timeout=TIMEOUT)
        assert [(r["driver"], r["pool"]) for r in results] == [(world.DRANET_DRIVER, NODE)], results
        assert _bound_to(kube, "kep5004") == NODE
        # The pod's resources name no claim, yet it asks for the fabric; what to request now
        # includes the extended resource, since the class serves it.
        wait_until(lambda: _requesting(kube) == 1, "the pod counted as requesting the fabric", timeout=TIMEOUT)
        status = _status(kube)
        assert status["recommendation"]["resourcesPerNode"] == {EFA: str(DEVICES)}, status["recommendation"]
        assert "maps it with spec.extendedResourceName" in condition({"status": status}, "Ready")["message"]
    finally:
        kube.patch(DEVICE_CLASSES.item(world.EFA_DEVICE_CLASS), {"spec": {"extendedResourceName": None}})
