"""DRA end to end: EFA devices in resource.k8s.io/v1 ResourceSlices on a real kube-apiserver,
counted the way kube-scheduler selects them.

The DeviceClass is the aws-dranet chart's (github.com/aws/eks-charts stable/aws-dranet@c043cef,
rendered: fabriccap_devtools.upstream), the slices DRANET's EKS example's devices
(kubernetes-sigs/dranet examples/aws_eks_examples/gpu-efa@286aa7e: one node publishes that slice
as it is), and the ResourceClaims are allocated as the scheduler writes them (the same
example's claim). They are created the way the driver publishes them: one pool per node named
after it, ``nodeName`` set, owned by the Node. The API server validates every object, so a
shape it refuses fails here first. The session's control plane runs with DRAExtendedResource
(KEP-5004, alpha in v1.35: conftest.E2E_FEATURE_GATES). One operator watches all the pools
below; each ends in the outcome docs/reference/how-it-decides.md names. The operator never
writes a slice, class or claim (test_deploy proves its RBAC cannot).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabriccap.kube.paths import (
    DAEMON_SETS,
    DEVICE_CLASSES,
    EVENTS,
    FABRIC_CAPABILITIES,
    NAMESPACES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    ApiResource,
)
from fabriccap_devtools import upstream, world
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
WAIT = 60.0
# What `fabriccap evaluate` is given to compare with the operator: the DRA kinds included.
DRA_SNAPSHOT_KINDS = "nodes,pods,daemonsets,deviceclasses,resourceslices,resourceclaims"
EFA = "vpc.amazonaws.com/efa"


@dataclass
class DraWorld:
    """Nodes, their slices, the DRANET DaemonSet and its pods, all named after ``prefix``."""

    kube: SyncKube
    prefix: str = field(default_factory=lambda: f"dra-{uuid.uuid4().hex[:6]}")
    nodes: list[str] = field(default_factory=list)
    slices: list[str] = field(default_factory=list)
    pods: list[str] = field(default_factory=list)
    daemon_sets: list[str] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    node_uids: dict[str, str] = field(default_factory=dict)
    driver: dict[str, Any] | None = None

    @property
    def namespace(self) -> str:
        return self.prefix

    def pool(self, label: str) -> str:
        return f"{self.prefix}-{label}"

    def fcap_name(self, label: str) -> str:
        return f"efa-{self.pool(label)}"

    def add_node(self, label: str, index: int, *, efa: int | None = None, instance_type: str = "p5.48xlarge") -> str:
        name = f"{self.pool(label)}-{index}"
        body = node_body(name, pool=self.pool(label), efa=efa, marker=self.prefix, instance_type=instance_type)
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

    def publish_example(self, node: str) -> str:
        """DRANET's own EKS slice (a p4d.24xlarge: 4 EFA, 3 ENA), its devices as they are; only
        the node it names and the owner's uid are this node's."""
        body = upstream.example_slice()
        metadata = {
            "name": f"{node}-dra.net-example",
            "labels": {E2E_LABEL: self.prefix},
            "ownerReferences": [{**body["metadata"]["ownerReferences"][0], "name": node, "uid": self.node_uids[node]}],
        }
        body["metadata"] = metadata
        body["spec"]["nodeName"] = node
        body["spec"]["pool"]["name"] = node
        created = self.kube.create(RESOURCE_SLICES.collection(), creatable(body))
        self.slices.append(created["metadata"]["name"])
        return str(created["metadata"]["name"])

    def claim(self, node: str, devices: list[str], name: str) -> dict[str, Any]:
        """A ResourceClaim of the EFA class allocated ``devices`` on ``node``, written as the
        scheduler writes it: created, then its status (allocation, reservedFor) patched."""
        body = world.allocated_claim(node, devices, name=name, namespace=self.namespace)
        status = body.pop("status")
        self.kube.create(RESOURCE_CLAIMS.collection(self.namespace), creatable(body))
        self.claims.append(name)
        return self.kube.patch(RESOURCE_CLAIMS.item(name, self.namespace) + "/status", {"status": status})

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
        for claim in self.claims:
            self.kube.delete(RESOURCE_CLAIMS.item(claim, self.namespace))
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


def message_of(obj: dict[str, Any], condition_type: str = "Ready") -> str:
    return str(condition(obj, condition_type)["message"])


def events_of(kube: SyncKube, name: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the Events recorded on the FabricCapability ``name``."""
    return [
        (event["type"], event["reason"], event["message"])
        for event in kube.list_objects(EVENTS.collection())
        if event["involvedObject"].get("name") == name and event["involvedObject"].get("kind") == "FabricCapability"
    ]


def set_class(kube: SyncKube, expression: str | None = None, extended_resource: str | None = None) -> dict[str, Any]:
    """Edit the cluster's DeviceClass as an admin would (its selector, its extendedResourceName)."""
    spec: dict[str, Any] = {}
    if expression is not None:
        spec["selectors"] = [{"cel": {"expression": expression}}]
    if extended_resource is not None:
        spec["extendedResourceName"] = extended_resource
    return kube.patch(DEVICE_CLASSES.item(world.EFA_DEVICE_CLASS), {"spec": spec})


def test_dra_pools_reach_the_outcomes_the_spec_names(cluster: E2ECluster, kube: SyncKube, tmp_path: Path) -> None:
    dra = DraWorld(kube)
    kube.create(NAMESPACES.collection(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": dra.namespace}})
    chart_class = world.efa_device_class()
    chart_expression = chart_class["spec"]["selectors"][0]["cel"]["expression"]
    existing = kube.get(DEVICE_CLASSES.item(world.EFA_DEVICE_CLASS))
    if existing is None:
        kube.create(DEVICE_CLASSES.collection(), chart_class)
    config = write_config(
        tmp_path / "config.yaml",
        {"debounceSeconds": 0.1, "fabrics": [{"name": "efa", "devicePlugin": {"namespaces": [dra.namespace]}}]},
    )
    log_path = tmp_path / "operator.log"
    operator = OperatorProcess(kubeconfig=cluster.kubeconfig, config=config, log_path=log_path)
    try:
        dra.install_driver()
        dra.dra_pool("uniform", [32, 32])
        fewer = dra.dra_pool("fewer", [32, 32])
        dra.unpublish(next(name for name in dra.slices if name.startswith(fewer[1])))
        fewer_slice = dra.publish(fewer[1], efa=31)
        dra.dra_pool("noslice", [32, None])
        halves = dra.dra_pool("halves", [32, None])
        dra.publish(halves[1], efa=16, slice_count=2, part=0)
        bumped = dra.dra_pool("bumped", [32, None])
        old_generation = dra.publish(bumped[1], efa=16, generation=1)
        others = dra.dra_pool("otherdriver", [None, None])
        for name in others:
            dra.publish(name, driver="gpu.nvidia.com")
        # pod-id-link0 beside the EFA devices (aws-k8s-tester#791): the chart's class fails on it.
        for name in dra.dra_pool("podid", [None, None]):
            dra.publish(name, efa=32, extra_devices=[world.pod_id_link_device()])
        # Jobs run on busy-0: DRANET moved 8 interfaces into their pods and dropped them from
        # the slice; the claim the scheduler allocated still names them.
        busy = dra.dra_pool("busy", [None, 32])
        all_efa = world.resource_slice(busy[0], efa=32)["spec"]["devices"]
        shrunk = world.resource_slice(busy[0], efa=32)
        shrunk["spec"]["devices"] = all_efa[8:]
        shrunk["metadata"]["ownerReferences"][0]["uid"] = dra.node_uids[busy[0]]
        shrunk["metadata"]["labels"] = {E2E_LABEL: dra.prefix}
        dra.slices.append(kube.create(RESOURCE_SLICES.collection(), creatable(shrunk))["metadata"]["name"])
        claimed = dra.claim(busy[0], [device["name"] for device in all_efa[:8]], name="job-efa")
        assert len(claimed["status"]["allocation"]["devices"]["results"]) == 8  # the API server kept it
        # DRANET's own p4d.24xlarge slice, as it is: 4 EFA (the type's maximum), 3 ENA.
        example = dra.add_node("example", 0, instance_type="p4d.24xlarge")
        dra.add_pod(example, dra.driver or dra.install_driver())
        dra.publish_example(example)
        plugin = dra.install_device_plugin()
        dra.dra_pool("mixed", [32])
        mixed_plugin = dra.add_node("mixed", 1, efa=32)
        dra.add_pod(mixed_plugin, plugin)
        # Both a device plugin and DRANET advertise on conflict-0.
        both = dra.add_node("conflict", 0, efa=32)
        dra.add_pod(both, plugin)
        dra.add_pod(both, dra.driver or dra.install_driver())
        dra.publish(both, efa=32)

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
        assert f"not 32 on {fewer[1]}" in message_of(fewer_obj)
        noslice = wait_ready_is(kube, dra.fcap_name("noslice"), "False", "PartialRollout")
        assert noslice["status"]["gap"]["pluginReadyNotAdvertised"] == 1
        halves_obj = wait_ready_is(kube, dra.fcap_name("halves"), "False", "PartialRollout")
        assert f"pool {halves[1]} has 1 of 2 ResourceSlices of generation 1" in message_of(halves_obj)
        wait_ready_is(kube, dra.fcap_name("bumped"), "False", "MixedCounts")
        other = wait_ready_is(kube, dra.fcap_name("otherdriver"), "False", "NotAdvertised")
        assert other["status"]["advertisingNodes"] == 0

        # The class errors on pod-id-link0: not counted, said once per (class, cause), with what
        # kube-scheduler does on it; the 32 EFA devices count.
        podid = wait_ready_is(kube, dra.fcap_name("podid"), "True", "UniformCapability")
        assert podid["status"]["uniformCount"] == 32
        said = message_of(podid, "Advertised")
        assert said.count("no such key: pciDevice") == 1, said
        assert (
            "DeviceClass efa.networking.k8s.aws selector #0: no such key: pciDevice on 2 devices of 2 nodes" in said
        ), said
        assert "kube-scheduler aborts scheduling a pod whose claim of this class meets such a device" in said
        logged = [line for line in log_path.read_text().splitlines() if "no such key: pciDevice" in line]
        assert len(logged) == 1, logged

        # Devices held by the claim count for busy-0 although the slice dropped them.
        busy_obj = wait_ready_is(kube, dra.fcap_name("busy"), "True", "UniformCapability")
        assert busy_obj["status"]["uniformCount"] == 32
        assert f"{busy[0]}: 8 allocated to ResourceClaims and no longer in its ResourceSlices" in message_of(
            busy_obj, "Advertised"
        )

        example_obj = wait_ready_is(kube, dra.fcap_name("example"), "True", "UniformCapability")
        assert example_obj["status"]["uniformCount"] == 4
        assert reasons(example_obj)["MatchesInstanceType"] == ("True", "MatchesInstanceMaximum")

        # One node through a device plugin, one through DRA: no one request schedules on both.
        mixed = wait_ready_is(kube, dra.fcap_name("mixed"), "False", "MixedSources")
        assert mixed["status"]["sources"] == [{"source": "devicePlugin", "nodes": 1}, {"source": "dra", "nodes": 1}]
        assert "recommendation" not in mixed["status"]
        conflict = wait_ready_is(kube, dra.fcap_name("conflict"), "False", "AdvertiserConflict")
        assert conflict["status"]["gap"]["conflictingAdvertisers"] == 1
        assert both in message_of(conflict)

        # The second half of a pool arrives: that node advertises, the pool turns Ready.
        dra.publish(halves[1], efa=16, slice_count=2, part=1)
        wait_ready_is(kube, dra.fcap_name("halves"), "True", "UniformCapability")
        # The driver republishes the node at a newer generation; the old slice is still there.
        dra.publish(bumped[1], efa=32, generation=2, name=f"{bumped[1]}-gen2")
        bumped_obj = wait_ready_is(kube, dra.fcap_name("bumped"), "True", "UniformCapability")
        assert bumped_obj["status"]["uniformCount"] == 32
        assert old_generation in dra.slices  # ignored, not gone
        # A reason change with the same status is an Event: MixedCounts -> PartialRollout.
        dra.unpublish(fewer_slice)
        wait_ready_is(kube, dra.fcap_name("fewer"), "False", "PartialRollout")
        wait_until(
            lambda: ("Warning", "PartialRollout") in {event[:2] for event in events_of(kube, dra.fcap_name("fewer"))},
            "the Event of the reason change",
            timeout=WAIT,
        )

        published_equals_evaluate(
            cluster,
            kube,
            config,
            [dra.fcap_name(label) for label in ("uniform", "fewer", "halves", "mixed", "podid", "busy", "conflict")],
            kinds=DRA_SNAPSHOT_KINDS,
        )

        # Our count agrees with the scheduler's only because the class's CEL is what is
        # evaluated: an admin keeps EFA claims on NUMA node 0. An attribute map (pciDevice =
        # EFA, the first DRA release's form) would still count 32; the class selects 16.
        set_class(kube, expression=f'{chart_expression} && device.attributes["dra.net"].numaNode == 0')
        wait_until(
            lambda: ((kube.fcap(dra.fcap_name("uniform")) or {}).get("status") or {}).get("uniformCount") == 16,
            "uniform read with the stricter class",
            timeout=WAIT,
        )
        set_class(kube, expression=chart_expression)
        wait_until(
            lambda: ((kube.fcap(dra.fcap_name("uniform")) or {}).get("status") or {}).get("uniformCount") == 32,
            "uniform read with the chart's class again",
            timeout=WAIT,
        )

        # The class deleted mid-run: the chart's copy stands in, and the status says so.
        kube.delete(DEVICE_CLASSES.item(world.EFA_DEVICE_CLASS))
        copy_said = (
            "DeviceClass efa.networking.k8s.aws is not in the cluster: counted with the aws-dranet-1.0.0 chart's copy"
        )

        def standing_in() -> dict[str, Any] | None:
            obj = kube.fcap(dra.fcap_name("uniform"))
            return obj if obj is not None and copy_said in message_of(obj, "Advertised") else None

        stood_in = wait_until(standing_in, "the copy standing in", timeout=WAIT)
        assert stood_in["status"]["uniformCount"] == 32
        kube.create(DEVICE_CLASSES.collection(), chart_class)
        wait_until(
            lambda: copy_said not in message_of(kube.fcap(dra.fcap_name("uniform")) or {}, "Advertised"),
            "the cluster's class back",
            timeout=WAIT,
        )

        # KEP-5004: the class maps the extended resource, so `vpc.amazonaws.com/efa: N` is served
        # on both kinds of node: the mixed pool is Ready, and what to request is resourcesPerNode.
        mapped = set_class(kube, extended_resource=EFA)
        assert mapped["spec"].get("extendedResourceName") == EFA, "the API server dropped it: DRAExtendedResource off"
        mixed_mapped = wait_ready_is(kube, dra.fcap_name("mixed"), "True", "UniformCapability")
        assert mixed_mapped["status"]["recommendation"]["resourcesPerNode"] == {EFA: "32"}
        wait_until(
            lambda: ("Normal", "UniformCapability") in {event[:2] for event in events_of(kube, dra.fcap_name("mixed"))},
            "the Normal Event of the recovery",
            timeout=WAIT,
        )
        kube.patch(DEVICE_CLASSES.item(world.EFA_DEVICE_CLASS), {"spec": {"extendedResourceName": None}})
        wait_ready_is(kube, dra.fcap_name("mixed"), "False", "MixedSources")

        # The driver's DaemonSet is removed: nothing serves the DRA nodes any more.
        kube.delete(DAEMON_SETS.item(world.DRANET_DS, dra.namespace))
        dra.daemon_sets.remove(world.DRANET_DS)
        gap = wait_ready_is(kube, dra.fcap_name("uniform"), "False", "DevicePluginGap")
        assert reasons(gap)["DevicePluginReady"] == ("False", "PluginNotInstalled")
        assert "DRA-driver DaemonSet" in message_of(gap, "DevicePluginReady")
        assert "recommendation" not in gap["status"]

        assert operator.running
    finally:
        operator.stop()
        dra.cleanup()
        if existing is None:
            kube.delete(DEVICE_CLASSES.item(world.EFA_DEVICE_CLASS))
        elif kube.get(DEVICE_CLASSES.item(world.EFA_DEVICE_CLASS)) is None:
            kube.create(DEVICE_CLASSES.collection(), creatable(existing))
        else:
            kube.patch(DEVICE_CLASSES.item(world.EFA_DEVICE_CLASS), {"spec": existing["spec"]})
