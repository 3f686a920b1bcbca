"""DRA end to end: EFA devices in resource.k8s.io/v1 ResourceSlices on a real kube-apiserver.

The DeviceClass and the slices are shaped like DRANET's on EKS (fabriccap_devtools.world), created
the way the driver publishes them: one pool per node named after it, ``nodeName`` set, owned
by the Node. The API server validates every slice, so a shape it refuses fails here first.
One operator watches all the pools below; each ends in the outcome docs/reference/how-it-decides.md names.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabriccap.kube.paths import (
    DAEMON_SETS,
    DEVICE_CLASSES,
    FABRIC_CAPABILITIES,
    NAMESPACES,
    RESOURCE_SLICES,
    ApiResource,
)
from fabriccap_devtools import world
from fabriccap_devtools.seeding import creatable
from harness import (
    E2E_LABEL,
    OperatorProcess,
    SyncKube,
    condition,
    node_body,
    node_path,
    pod_path,
    pod_status,
    published_equals_evaluate,
    reasons,
    wait_until,
    write_config,
)

if TYPE_CHECKING:
    from harness import E2ECluster

RESOURCE_CLAIM_TEMPLATES = ApiResource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", namespaced=True
)
WAIT = 30.0


@dataclass
class DraWorld:
    """Nodes, their slices, the DRANET DaemonSet and its pods, all named after ``prefix``."""

    kube: SyncKube
    prefix: str = field(default_factory=lambda: f"dra-{uuid.uuid4().hex[:6]}")
    nodes: list[str] = field(default_factory=list)
    slices: list[str] = field(default_factory=list)
    pods: list[str] = field(default_factory=list)
    daemon_sets: list[str] = field(default_factory=list)
    node_uids: dict[str, str] = field(default_factory=dict)
    driver: dict[str, Any] | None = None

    @property
    def namespace(self) -> str:
        return self.prefix

    def pool(self, label: str) -> str:
        return f"{self.prefix}-{label}"

    def fcap_name(self, label: str) -> str:
        return f"efa-{self.pool(label)}"

    def add_node(self, label: str, index: int, *, efa: int | None = None) -> str:
        name = f"{self.pool(label)}-{index}"
        body = node_body(name, pool=self.pool(label), efa=efa, marker=self.prefix)
        status = body.pop("status")
        created = self.kube.create(node_path(), body)
        self.node_uids[name] = created["metadata"]["uid"]
        self.nodes.append(name)
        self.kube.patch(node_path(name) + "/status", {"status": status})
        return name

    def publish(self, node: str, **kwargs: Any) -> str:
        """What DRANET writes for ``node`` (``world.resource_slice`` arguments)."""
        body = world.resource_slice(node, **kwargs)
        body["metadata"]["ownerReferences"][0]["uid"] = self.node_uids[node]
        body["metadata"]["labels"] = {E2E_LABEL: self.prefix}
        created = self.kube.create(RESOURCE_SLICES.collection(), creatable(body))
        self.slices.append(created["metadata"]["name"])
        return str(created["metadata"]["name"])

    def unpublish(self, name: str) -> None:
        self.kube.delete(RESOURCE_SLICES.item(name))
        self.slices.remove(name)

    def install_driver(self) -> dict[str, Any]:
        # A real DaemonSet controller must place no pod: the test binds its own.
        body = world.dranet_daemon_set(namespace=self.namespace, node_selector={E2E_LABEL: "never"})
        body.pop("status")
        self.driver = self.kube.create(DAEMON_SETS.collection(self.namespace), creatable(body))
        self.daemon_sets.append(body["metadata"]["name"])
        return self.driver

    def install_device_plugin(self) -> dict[str, Any]:
        body = world.daemon_set(namespace=self.namespace, node_selector={E2E_LABEL: "never"})
        body.pop("status")
        self.daemon_sets.append(body["metadata"]["name"])
        return self.kube.create(DAEMON_SETS.collection(self.namespace), creatable(body))

    def add_pod(self, node: str, owner: dict[str, Any], *, ready: bool = True) -> None:
        owner_name = owner["metadata"]["name"]
        body = world.pod(node, daemon_set_name=owner_name, namespace=self.namespace, name=f"{owner_name}-{node}")
        body.pop("status")
        body["metadata"]["ownerReferences"][0]["uid"] = owner["metadata"]["uid"]
        self.kube.create(pod_path(self.namespace), creatable(body))
        self.pods.append(body["metadata"]["name"])
        self.kube.patch(pod_path(self.namespace, body["metadata"]["name"]) + "/status", pod_status(ready=ready))

    def dra_pool(self, label: str, counts: list[int | None]) -> list[str]:
        """Nodes with a Ready DRANET pod each, and a slice of ``count`` EFA devices (None: no slice)."""
        driver = self.driver or self.install_driver()
        names = []
        for index, count in enumerate(counts):
            name = self.add_node(label, index)
            self.add_pod(name, driver)
            if count is not None:
                self.publish(name, efa=count)
            names.append(name)
        return names

    def cleanup(self) -> None:
        for name in list(self.slices):
            self.unpublish(name)
        for pod in self.pods:
            self.kube.delete(pod_path(self.namespace, pod))
        for daemon_set in self.daemon_sets:
            self.kube.delete(DAEMON_SETS.item(daemon_set, self.namespace))
        for name in self.nodes:
            self.kube.delete(node_path(name))
        for obj in self.kube.fcaps():
            if obj["metadata"]["name"].startswith(f"efa-{self.prefix}-"):
                self.kube.delete(FABRIC_CAPABILITIES.item(obj["metadata"]["name"]))
        self.kube.delete(NAMESPACES.item(self.namespace))


def ready_is(kube: SyncKube, name: str, status: str, reason: str) -> dict[str, Any] | None:
    obj = kube.fcap(name)
    if obj is None or not (obj.get("status") or {}).get("conditions"):
        return None
    ready = condition(obj, "Ready")
    return obj if (ready["status"], ready["reason"]) == (status, reason) else None


def wait_ready_is(kube: SyncKube, name: str, status: str, reason: str) -> dict[str, Any]:
    return wait_until(lambda: ready_is(kube, name, status, reason), f"{name} Ready={status} {reason}", timeout=WAIT)


def test_dra_pools_reach_the_outcomes_the_spec_names(cluster: E2ECluster, kube: SyncKube, tmp_path: Path) -> None:
    dra = DraWorld(kube)
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": dra.namespace}})
    created_class = kube.get(DEVICE_CLASSES.item(world.EFA_DEVICE_CLASS)) is None
    if created_class:
        kube.create(DEVICE_CLASSES.collection(), world.efa_device_class())
    config = write_config(
        tmp_path / "config.yaml",
        {"debounceSeconds": 0.1, "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [dra.namespace]}}]},
    )
    operator = OperatorProcess(kubeconfig=cluster.kubeconfig, config=config, log_path=tmp_path / "operator.log")
    try:
        dra.install_driver()
        dra.dra_pool("uniform", [32, 32])
        fewer = dra.dra_pool("fewer", [32, 32])
        dra.unpublish(next(name for name in dra.slices if name.startswith(fewer[1])))
        dra.publish(fewer[1], efa=31)
        dra.dra_pool("noslice", [32, None])
        halves = dra.dra_pool("halves", [32, None])
        dra.publish(halves[1], efa=16, slice_count=2, part=0)
        bumped = dra.dra_pool("bumped", [32, None])
        old_generation = dra.publish(bumped[1], efa=16, generation=1)
        others = dra.dra_pool("otherdriver", [None, None])
        for name in others:
            dra.publish(name, driver="gpu.nvidia.com")
        plugin = dra.install_device_plugin()
        dra.dra_pool("mixed", [32])
        mixed_plugin = dra.add_node("mixed", 1, efa=32)
        dra.add_pod(mixed_plugin, plugin)

        operator.start()
        uniform = wait_ready_is(kube, dra.fcap_name("uniform"), "True", "UniformCapability")
        status = uniform["status"]
        assert (status["nodes"], status["advertisingNodes"], status["uniformCount"]) == (2, 2, 32)
        assert status["sources"] == [{"source": "devicePlugin", "nodes": 0}, {"source": "dra", "nodes": 2}]
        assert status["devicePlugin"]["daemonSets"] == [f"{dra.namespace}/{world.DRANET_DS}"]
        assert "resourcesPerNode" not in status["recommendation"]
        # The recommendation is a ResourceClaimTemplate spec the API server accepts as it is.
        template = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "efa-per-node"},
            "spec": status["recommendation"]["resourceClaimTemplate"],
        }
        accepted = kube.create(RESOURCE_CLAIM_TEMPLATES.collection(dra.namespace), template)
        (request,) = accepted["spec"]["spec"]["devices"]["requests"]
        assert request["exactly"] == {
            "deviceClassName": world.EFA_DEVICE_CLASS,
            "allocationMode": "ExactCount",
            "count": 32,
        }

        fewer_obj = wait_ready_is(kube, dra.fcap_name("fewer"), "False", "MixedCounts")
        assert f"not 32 on {fewer[1]}" in condition(fewer_obj, "Ready")["message"]
        noslice = wait_ready_is(kube, dra.fcap_name("noslice"), "False", "PartialRollout")
        assert noslice["status"]["gap"]["pluginReadyNotAdvertised"] == 1
        halves_obj = wait_ready_is(kube, dra.fcap_name("halves"), "False", "PartialRollout")
        assert (
            f"pool {halves[1]} has 1 of 2 ResourceSlices of generation 1" in condition(halves_obj, "Ready")["message"]
        )
        wait_ready_is(kube, dra.fcap_name("bumped"), "False", "MixedCounts")
        other = wait_ready_is(kube, dra.fcap_name("otherdriver"), "False", "NotAdvertised")
        assert other["status"]["advertisingNodes"] == 0
        mixed = wait_ready_is(kube, dra.fcap_name("mixed"), "True", "UniformCapability")
        assert mixed["status"]["sources"] == [{"source": "devicePlugin", "nodes": 1}, {"source": "dra", "nodes": 1}]
        assert set(mixed["status"]["recommendation"]) == {"resourcesPerNode", "resourceClaimTemplate", "env"}

        # The second half of a pool arrives: that node advertises, the pool turns Ready.
        dra.publish(halves[1], efa=16, slice_count=2, part=1)
        wait_ready_is(kube, dra.fcap_name("halves"), "True", "UniformCapability")
        # The driver republishes the node at a newer generation; the old slice is still there.
        dra.publish(bumped[1], efa=32, generation=2, name=f"{bumped[1]}-gen2")
        bumped_obj = wait_ready_is(kube, dra.fcap_name("bumped"), "True", "UniformCapability")
        assert bumped_obj["status"]["uniformCount"] == 32
        assert old_generation in dra.slices  # ignored, not gone

        published_equals_evaluate(
            cluster, kube, config, [dra.fcap_name(label) for label in ("uniform", "fewer", "halves", "mixed")]
        )

        # The driver's DaemonSet is removed: nothing serves the DRA nodes any more.
        kube.delete(DAEMON_SETS.item(world.DRANET_DS, dra.namespace))
        dra.daemon_sets.remove(world.DRANET_DS)
        gap = wait_ready_is(kube, dra.fcap_name("uniform"), "False", "DevicePluginGap")
        assert reasons(gap)["DevicePluginReady"] == ("False", "PluginNotInstalled")
        assert "DRA-driver DaemonSet" in condition(gap, "DevicePluginReady")["message"]
        assert "recommendation" not in gap["status"]
        assert operator.running
    finally:
        operator.stop()
        dra.cleanup()
        if created_class:
            kube.delete(DEVICE_CLASSES.item(world.EFA_DEVICE_CLASS))
