"""Profiles other than EFA, end to end: an AKS pool with NVIDIA network-operator's RDMA shared
device plugin in the namespace its Helm chart uses, found by its pod template's label."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabriccap.core.api import POOL_VALUE_ANNOTATION, status_written
from fabriccap.kube.paths import DAEMON_SETS, FABRIC_CAPABILITIES, NAMESPACES
from fabriccap_devtools import world
from fabriccap_devtools.seeding import creatable
from harness import (
    OperatorProcess,
    SyncKube,
    condition,
    node_path,
    pod_path,
    pod_status,
    wait_until,
    write_config,
)

if TYPE_CHECKING:
    from harness import E2ECluster

RDMA = "rdma/hca_shared_devices_a"
AGENTPOOL = "kubernetes.azure.com/agentpool"
NAMESPACE = "nvidia-network-operator"


def _pool_of(obj: dict[str, Any]) -> str | None:
    """The pool an object is for, from the annotation it carries from creation on (its status
    comes a moment later: the operator creates the object, then patches the status)."""
    value = obj["metadata"].get("annotations", {}).get(POOL_VALUE_ANNOTATION)
    return None if value is None else str(value)


def _ready(kube: SyncKube, name: str, status: str, reason: str) -> dict[str, Any] | None:
    obj = kube.fcap(name)
    if obj is None or not (obj.get("status") or {}).get("conditions"):
        return None
    ready = condition(obj, "Ready")
    return obj if (ready["status"], ready["reason"]) == (status, reason) else None


def test_aks_rdma_pool_in_nvidia_network_operator_turns_ready(
    cluster: E2ECluster, kube: SyncKube, tmp_path: Path
) -> None:
    prefix = f"aks-{uuid.uuid4().hex[:6]}"
    pool = f"{prefix}-ndv5"
    nodes = [f"{pool}-vmss00000{index}" for index in range(2)]
    created_namespace = kube.get(NAMESPACES.item(NAMESPACE)) is None
    if created_namespace:
        kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    # The network-operator's DaemonSet carries its own bookkeeping label; the profile's
    # selector (app=rdma-shared-dp) is a label of its pod template, and the name is not one
    # of the profile's daemonSetNames: only the template label can find it.
    daemon_set = world.daemon_set(f"{prefix}-rdma-dp", namespace=NAMESPACE, labels={"ds-owner": prefix})
    daemon_set["spec"]["selector"]["matchLabels"] = {"app": "rdma-shared-dp", "prefix": prefix}
    daemon_set["spec"]["template"]["metadata"]["labels"] = {"app": "rdma-shared-dp", "prefix": prefix}
    daemon_set["spec"]["template"]["spec"]["nodeSelector"] = {"fabriccap.dev/e2e": "never"}
    daemon_set.pop("status")
    operator = OperatorProcess(
        kubeconfig=cluster.kubeconfig,
        config=write_config(tmp_path / "config.yaml", {"debounceSeconds": 0.1, "fabrics": [{"name": "aks-rdma"}]}),
        log_path=tmp_path / "operator.log",
    )
    pods: list[str] = []
    try:
        for name in nodes:
            body = creatable(
                world.node(
                    name,
                    pool=pool,
                    pool_key=AGENTPOOL,
                    instance_type="Standard_ND96isr_H100_v5",
                    efa=None,
                    gpu=8,
                    resources={RDMA: "1k"},
                    # An AKS node's, which the aks-rdma profile's providerIDPrefixes admit.
                    provider_id=f"azure:///subscriptions/0/resourceGroups/mc/providers/Microsoft.Compute/virtualMachineScaleSets/{pool}/virtualMachines/0-{name}",
                )
            )
            status = body.pop("status")
            kube.create(node_path(), body)
            kube.patch(node_path(name) + "/status", {"status": status})
        created = kube.create(DAEMON_SETS.collection(NAMESPACE), creatable(daemon_set))
        for index, name in enumerate(nodes):
            pod = world.pod(
                name, daemon_set_name=created["metadata"]["name"], namespace=NAMESPACE, name=f"{prefix}-dp-{index}"
            )
            pod["metadata"]["ownerReferences"][0]["uid"] = created["metadata"]["uid"]
            pod.pop("status")
            kube.create(pod_path(NAMESPACE), creatable(pod))
            pods.append(pod["metadata"]["name"])
            # The second node's plugin pod is still starting.
            kube.patch(pod_path(NAMESPACE, pods[-1]) + "/status", pod_status(ready=index == 0))
        operator.start()
        listed = wait_until(
            lambda: [obj for obj in kube.fcaps() if _pool_of(obj) == pool and status_written(obj)] or None,
            f"the FabricCapability of {pool}",
            timeout=30,
        )
        (obj,) = listed
        name = obj["metadata"]["name"]
        assert name.startswith("aks-rdma-")
        obj = wait_until(lambda: _ready(kube, name, "False", "DevicePluginGap"), f"{name} DevicePluginGap", timeout=30)
        assert obj["status"]["devicePlugin"]["daemonSets"] == [f"{NAMESPACE}/{prefix}-rdma-dp"]

        kube.patch(pod_path(NAMESPACE, pods[1]) + "/status", pod_status(ready=True))  # the plugin came up

        obj = wait_until(lambda: _ready(kube, name, "True", "UniformCapability"), f"{name} Ready", timeout=30)
        status = obj["status"]
        assert (status["nodes"], status["uniformCount"]) == (2, 1000)
        assert status["recommendation"]["resourcesPerNode"] == {RDMA: "1"}
    finally:
        operator.stop()
        for pod_name in pods:
            kube.delete(pod_path(NAMESPACE, pod_name))
        kube.delete(DAEMON_SETS.item(f"{prefix}-rdma-dp", NAMESPACE))
        for name in nodes:
            kube.delete(node_path(name))
        for obj in kube.fcaps():
            if _pool_of(obj) == pool:
                kube.delete(FABRIC_CAPABILITIES.item(obj["metadata"]["name"]))
        if created_namespace:
            kube.delete(NAMESPACES.item(NAMESPACE))
