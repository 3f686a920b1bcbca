#!/usr/bin/env python3
"""Generate examples/eks-cluster.json: a simulated EKS cluster, as kubectl prints it.

The output is what ``kubectl get nodes,pods,daemonsets,resourceslices,deviceclasses,nodepools,nodeclaims,
ec2nodeclasses -A -o json`` prints for a cluster with one node pool per outcome fabriccap distinguishes
(see cluster_nodes() below, and docs/reference/how-it-decides.md for each pool's outcome). It is
deterministic: every id, address and timestamp derives from the node or pod name, so running the
script again reproduces the committed file byte for byte (tests/repo/test_examples.py checks that).

    python examples/generate_cluster.py            # rewrites examples/eks-cluster.json
    python examples/generate_cluster.py -o -       # prints it

The body builders (``node_body``, ``daemon_set_pod_body``, ...) are also used by
benchmarks/evaluate_bench.py, with more images and managedFields, to make heavier bodies.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from fabriccap.core.upstream import AWS_DRANET_DEVICE_CLASS

REGION = "us-west-2"
ACCOUNT = "111122223333"
ECR = f"602401143452.dkr.ecr.{REGION}.amazonaws.com"  # the EKS add-on image registry
CLUSTER_CREATED = datetime(2025, 3, 14, 9, 26, 53, tzinfo=UTC)
SNAPSHOT_TIME = datetime(2025, 6, 2, 8, 0, 0, tzinfo=UTC)
# 1.34: resource.k8s.io/v1, so the DRANET pool below is a real possibility.
KUBELET_VERSION = "v1.34.2-eks-b3126f4"
EFA_PLUGIN = "aws-efa-k8s-device-plugin"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
GPU_RESOURCE = "nvidia.com/gpu"
NEURON_RESOURCE = "aws.amazon.com/neuron"
NEURONCORE_RESOURCE = "aws.amazon.com/neuroncore"
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "eks-cluster.json"


@dataclass(frozen=True)
class InstanceShape:
    """What an EC2 instance type gives a node (the figures the kubelet reports)."""

    vcpus: int
    memory_gib: int
    max_pods: int
    efa_maximum: int  # EC2 MaximumEfaInterfaces
    gpus: int = 0
    gpu_name: str = ""
    gpu_memory_mib: int = 0
    neuron_devices: int = 0
    network_gbps: int = 25
    local_nvme_gib: int = 0


INSTANCE_SHAPES: dict[str, InstanceShape] = {
    "p5.48xlarge": InstanceShape(192, 2048, 100, 32, 8, "h100", 81920, network_gbps=3200, local_nvme_gib=30400),
    "p4d.24xlarge": InstanceShape(96, 1152, 737, 4, 8, "a100", 40960, network_gbps=400, local_nvme_gib=8000),
    "g6.2xlarge": InstanceShape(8, 32, 58, 0, 1, "l4", 22888, network_gbps=10, local_nvme_gib=450),
    "trn1.32xlarge": InstanceShape(128, 512, 247, 8, neuron_devices=16, network_gbps=800, local_nvme_gib=7600),
    "m7i.4xlarge": InstanceShape(16, 64, 234, 0, network_gbps=12),
}

# Instance types the EFA device-plugin DaemonSet is scheduled on (its node affinity). The
# g6 family is listed because the GPU pools share one values file, which is exactly how a
# plugin ends up Ready on nodes that cannot have EFA.
EFA_PLUGIN_INSTANCE_TYPES = ("p4d.24xlarge", "p5.48xlarge", "trn1.32xlarge", "g6.2xlarge")


def stable_hex(*parts: object, length: int = 32) -> str:
    """Hex digits that depend only on ``parts``: ids stay the same from run to run."""
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:length]


def stable_uid(*parts: object) -> str:
    return str(uuid.UUID(hex=stable_hex(*parts), version=4))


def stable_int(*parts: object, below: int) -> int:
    return int(stable_hex(*parts, length=12), 16) % below


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_suffix(*parts: object, length: int = 5) -> str:
    # The alphabet Kubernetes uses for generateName suffixes (no vowels, no 0/1/3).
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    number = int(stable_hex(*parts, length=16), 16)
    letters = []
    for _ in range(length):
        number, index = divmod(number, len(alphabet))
        letters.append(alphabet[index])
    return "".join(letters)


@dataclass(frozen=True)
class NodeSpec:
    """One node of the simulated cluster: the facts that vary, the rest is derived."""

    pool: str
    provisioner: str  # "nodegroup" (EKS managed node group) or "karpenter"
    instance_type: str
    ip: str
    zone: str
    efa_capacity: int  # < 0: the resource is absent from the node status
    efa_allocatable: int
    cordoned: bool = False
    plugin_pod: bool = True  # an EFA device-plugin pod runs here (and is Ready)
    # DRANET runs here and publishes the node's EFA devices (its instance type's maximum) in a
    # ResourceSlice; the device plugin does not, so allocatable has no EFA.
    dranet: bool = False
    capacity_type: str = "ON_DEMAND"
    created: datetime = CLUSTER_CREATED

    @property
    def name(self) -> str:
        return f"ip-{self.ip.replace('.', '-')}.{REGION}.compute.internal"

    @property
    def shape(self) -> InstanceShape:
        return INSTANCE_SHAPES[self.instance_type]


@dataclass(frozen=True)
class BodyDetail:
    """How heavy the generated bodies are. kubectl omits managedFields unless asked."""

    images: int = 2
    # The EKS node monitoring agent's conditions (4 more per node).
    monitoring_conditions: bool = False
    managed_fields: bool = False
    extra_labels: dict[str, str] = field(default_factory=dict)


def _zone_id(zone: str) -> str:
    return {"a": "usw2-az1", "b": "usw2-az2", "c": "usw2-az3", "d": "usw2-az4"}[zone[-1]]


def node_labels(spec: NodeSpec) -> dict[str, str]:
    shape = spec.shape
    family, size = spec.instance_type.split(".", 1)
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": spec.instance_type,
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": REGION,
        "failure-domain.beta.kubernetes.io/zone": spec.zone,
        "k8s.io/cloud-provider-aws": stable_hex("cluster", length=32),
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": spec.instance_type,
        "topology.ebs.csi.aws.com/zone": spec.zone,
        "topology.k8s.aws/zone-id": _zone_id(spec.zone),
        "topology.kubernetes.io/region": REGION,
        "topology.kubernetes.io/zone": spec.zone,
        "vpc.amazonaws.com/has-trunk-attached": "false",
    }
    if shape.efa_maximum >= 4:
        # EC2 instance topology, published for the instance types that have it.
        for layer in (1, 2, 3):
            labels[f"topology.k8s.aws/network-node-layer-{layer}"] = (
                f"nn-{stable_hex(spec.zone, spec.pool, layer, length=17)}"
            )
    if shape.gpus:
        labels["nvidia.com/gpu.present"] = "true"
    if spec.provisioner == "nodegroup":
        labels.update(
            {
                "eks.amazonaws.com/capacityType": spec.capacity_type,
                "eks.amazonaws.com/nodegroup": spec.pool,
                "eks.amazonaws.com/nodegroup-image": f"ami-0{stable_hex('ami', spec.pool, length=16)}",
                "eks.amazonaws.com/sourceLaunchTemplateId": f"lt-0{stable_hex('lt', spec.pool, length=16)}",
                "eks.amazonaws.com/sourceLaunchTemplateVersion": "3",
            }
        )
    else:
        labels.update(
            {
                "karpenter.k8s.aws/ec2nodeclass": "gpu",
                "karpenter.k8s.aws/instance-category": family[0],
                "karpenter.k8s.aws/instance-cpu": str(shape.vcpus),
                "karpenter.k8s.aws/instance-encryption-in-transit-supported": "true",
                "karpenter.k8s.aws/instance-family": family,
                "karpenter.k8s.aws/instance-generation": "".join(filter(str.isdigit, family)),
                "karpenter.k8s.aws/instance-gpu-count": str(shape.gpus),
                "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia" if shape.gpus else "",
                "karpenter.k8s.aws/instance-gpu-memory": str(shape.gpu_memory_mib),
                "karpenter.k8s.aws/instance-gpu-name": shape.gpu_name,
                "karpenter.k8s.aws/instance-hypervisor": "nitro",
                "karpenter.k8s.aws/instance-local-nvme": str(shape.local_nvme_gib),
                "karpenter.k8s.aws/instance-memory": str(shape.memory_gib * 1024),
                "karpenter.k8s.aws/instance-network-bandwidth": str(shape.network_gbps * 1000),
                "karpenter.k8s.aws/instance-size": size,
                "karpenter.sh/capacity-type": spec.capacity_type.lower().replace("_", "-"),
                "karpenter.sh/initialized": "true",
                "karpenter.sh/nodepool": spec.pool,
                "karpenter.sh/registered": "true",
            }
        )
        # Karpenter leaves empty values out rather than publishing them.
        labels = {key: value for key, value in labels.items() if value}
    return dict(sorted(labels.items()))


def node_resources(spec: NodeSpec) -> tuple[dict[str, str], dict[str, str]]:
    """(capacity, allocatable) as the kubelet reports them."""
    shape = spec.shape
    memory_kib = shape.memory_gib * 1024 * 1024 - 3_967_024  # what the instance really exposes
    storage_kib = 104_845_292
    capacity = {
        "cpu": str(shape.vcpus),
        "ephemeral-storage": f"{storage_kib}Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{memory_kib}Ki",
        "pods": str(shape.max_pods),
    }
    # EKS AMI reservations: a little CPU, memory proportional to max pods, 10% of the disk.
    allocatable = {
        "cpu": f"{shape.vcpus * 1000 - 90 - shape.vcpus // 4 * 10}m",
        "ephemeral-storage": str(storage_kib * 1024 * 9 // 10),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{memory_kib - (255 + 11 * shape.max_pods) * 1024 - 100 * 1024}Ki",
        "pods": str(shape.max_pods),
    }
    if shape.gpus:
        capacity[GPU_RESOURCE] = allocatable[GPU_RESOURCE] = str(shape.gpus)
    if shape.neuron_devices:
        capacity[NEURON_RESOURCE] = allocatable[NEURON_RESOURCE] = str(shape.neuron_devices)
        capacity[NEURONCORE_RESOURCE] = allocatable[NEURONCORE_RESOURCE] = str(shape.neuron_devices * 2)
    if spec.efa_capacity >= 0:
        capacity[EFA_RESOURCE] = str(spec.efa_capacity)
        allocatable[EFA_RESOURCE] = str(spec.efa_allocatable)
    return dict(sorted(capacity.items())), dict(sorted(allocatable.items()))


# (type, reason when healthy, message): the kubelet's four, then the EKS node monitoring
# agent's, which every node of a recent EKS cluster carries.
NODE_CONDITIONS: tuple[tuple[str, str, str, str], ...] = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    (
        "AcceleratedHardwareReady",
        "True",
        "NvidiaAcceleratedHardwareIsReady",
        "Monitoring for the Nvidia system is active",
    ),
    (
        "ContainerRuntimeReady",
        "True",
        "ContainerRuntimeIsReady",
        "Monitoring for the ContainerRuntime system is active",
    ),
    ("KernelReady", "True", "KernelIsReady", "Monitoring for the Kernel system is active"),
    ("NetworkingReady", "True", "NetworkingIsReady", "Monitoring for the Networking system is active"),
)


def node_conditions(spec: NodeSpec, monitoring: bool) -> list[dict[str, str]]:
    heartbeat = rfc3339(SNAPSHOT_TIME - timedelta(seconds=stable_int(spec.name, "hb", below=40)))
    conditions = []
    for condition_type, status, reason, message in NODE_CONDITIONS if monitoring else NODE_CONDITIONS[:4]:
        if condition_type == "AcceleratedHardwareReady" and not (spec.shape.gpus or spec.shape.neuron_devices):
            continue
        if condition_type == "AcceleratedHardwareReady" and spec.shape.neuron_devices:
            reason, message = "NeuronAcceleratedHardwareIsReady", "Monitoring for the Neuron system is active"
        conditions.append(
            {
                "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": rfc3339(spec.created + timedelta(seconds=41)),
                "message": message,
                "reason": reason,
                "status": status,
                "type": condition_type,
            }
        )
    return conditions


# (repository, tag, size in bytes): what the nodes of such a cluster have pulled.
BASE_IMAGES: tuple[tuple[str, str, int], ...] = (
    (f"{ECR}/amazon-k8s-cni-init", "v1.19.2-eksbuild.1", 62_383_119),
    (f"{ECR}/amazon-k8s-cni", "v1.19.2-eksbuild.1", 46_936_541),
    (f"{ECR}/amazon/aws-network-policy-agent", "v1.1.6-eksbuild.1", 33_672_204),
    (f"{ECR}/eks/kube-proxy", "v1.31.3-minimal-eksbuild.2", 37_982_231),
    (f"{ECR}/eks/eks-node-monitoring-agent", "v1.2.0-eksbuild.1", 85_112_020),
    (f"{ECR}/eks/aws-ebs-csi-driver", "v1.41.0", 98_310_677),
    (f"{ECR}/eks/pause", "3.5", 299_010),
    (f"{ECR}/eks/{EFA_PLUGIN}", "v0.5.6", 20_134_873),
)
GPU_IMAGES: tuple[tuple[str, str, int], ...] = (
    ("nvcr.io/nvidia/k8s-device-plugin", "v0.17.1", 152_704_431),
    ("nvcr.io/nvidia/k8s/dcgm-exporter", "3.3.9-3.6.1-ubuntu22.04", 393_002_512),
    ("nvcr.io/nvidia/cloud-native/gpu-operator-validator", "v24.9.2", 321_444_803),
    ("public.ecr.aws/hpc-cloud/nccl-tests", "cuda12.4.1-efa1.38.1-ofi1.13.2-nccl2.23.4", 4_803_113_912),
)


def node_images(spec: NodeSpec, count: int) -> list[dict[str, Any]]:
    catalogue = list(BASE_IMAGES) + (list(GPU_IMAGES) if spec.shape.gpus else [])
    # Training images pile up on a node run after run: one tag per day.
    day = 0
    while len(catalogue) < count:
        day += 1
        tag = f"2025-05-{day:02d}-{stable_hex('tag', day, length=7)}"
        catalogue.append((f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/ml/llm-pretrain", tag, 9_000_000_000 + day))
    images = []
    for repository, tag, size in catalogue[:count]:
        digest = stable_hex(repository, tag, length=64)
        images.append({"names": [f"{repository}@sha256:{digest}", f"{repository}:{tag}"], "sizeBytes": size})
    # The kubelet lists the biggest first.
    return sorted(images, key=lambda image: -image["sizeBytes"])


def _fields(keys: Iterable[str]) -> dict[str, Any]:
    return {".": {}, **{f"f:{key}": {} for key in keys}}


def node_managed_fields(spec: NodeSpec, body: dict[str, Any]) -> list[dict[str, Any]]:
    """managedFields as the API server records them for an EKS node."""
    metadata, status = body["metadata"], body["status"]
    created = rfc3339(spec.created)
    updated = rfc3339(SNAPSHOT_TIME - timedelta(minutes=stable_int(spec.name, "mf", below=50)))
    kubelet_labels = [key for key in metadata["labels"] if not key.startswith(("topology.k8s.aws/", "karpenter"))]
    conditions: dict[str, Any] = {
        f'k:{{"type":"{condition["type"]}"}}': {
            ".": {},
            "f:lastHeartbeatTime": {},
            "f:lastTransitionTime": {},
            "f:message": {},
            "f:reason": {},
            "f:status": {},
            "f:type": {},
        }
        for condition in status["conditions"]
    }
    entries: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:annotations": _fields(
                        [
                            "alpha.kubernetes.io/provided-node-ip",
                            "volumes.kubernetes.io/controller-managed-attach-detach",
                        ]
                    ),
                    "f:labels": _fields(kubelet_labels),
                },
                "f:spec": {"f:providerID": {}},
            },
            "manager": "kubelet",
            "operation": "Update",
            "time": created,
        },
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}}},
            "manager": "kube-controller-manager",
            "operation": "Update",
            "time": rfc3339(spec.created + timedelta(seconds=12)),
        },
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:labels": {f"f:{key}": {} for key in metadata["labels"] if key.startswith("topology.k8s.aws/")}
                }
            },
            "manager": "aws-cloud-controller-manager",
            "operation": "Update",
            "time": rfc3339(spec.created + timedelta(seconds=30)),
        },
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {
                        key: value
                        for key, value in conditions.items()
                        if "Pressure" not in key and '"Ready"' not in key
                    }
                }
            },
            "manager": "eks-node-monitoring-agent",
            "operation": "Update",
            "subresource": "status",
            "time": updated,
        },
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:allocatable": {f"f:{key}": {} for key in status["allocatable"]},
                    "f:capacity": {f"f:{key}": {} for key in status["capacity"]},
                    "f:conditions": {
                        key: value for key, value in conditions.items() if "Pressure" in key or '"Ready"' in key
                    },
                    "f:images": {},
                    "f:nodeInfo": {"f:bootID": {}, "f:kernelVersion": {}, "f:kubeletVersion": {}},
                }
            },
            "manager": "kubelet",
            "operation": "Update",
            "subresource": "status",
            "time": updated,
        },
    ]
    if spec.cordoned:
        entries.append(
            {
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:unschedulable": {}}},
                "manager": "kubectl-cordon",
                "operation": "Update",
                "time": updated,
            }
        )
    return entries


def node_body(spec: NodeSpec, detail: BodyDetail | None = None) -> dict[str, Any]:
    detail = detail or BodyDetail()
    shape = spec.shape
    capacity, allocatable = node_resources(spec)
    instance_id = f"i-0{stable_hex('instance', spec.name, length=16)}"
    annotations = {
        "alpha.kubernetes.io/provided-node-ip": spec.ip,
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    if spec.provisioner == "karpenter":
        annotations["karpenter.k8s.aws/ec2nodeclass-hash"] = str(stable_int("nodeclass", below=10**19))
        annotations["karpenter.sh/nodepool-hash"] = str(stable_int("nodepool", spec.pool, below=10**19))
    taints: list[dict[str, str]] = []
    if shape.gpus:
        taints.append({"effect": "NoSchedule", "key": GPU_RESOURCE, "value": "true"})
    if spec.cordoned:
        taints.append(
            {
                "effect": "NoSchedule",
                "key": "node.kubernetes.io/unschedulable",
                "timeAdded": rfc3339(SNAPSHOT_TIME - timedelta(hours=5)),
            }
        )
    node_spec: dict[str, Any] = {"providerID": f"aws:///{spec.zone}/{instance_id}"}
    if taints:
        node_spec["taints"] = taints
    if spec.cordoned:
        node_spec["unschedulable"] = True
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": annotations,
            "creationTimestamp": rfc3339(spec.created),
            "labels": {**node_labels(spec), **detail.extra_labels},
            "name": spec.name,
            "resourceVersion": str(80_000_000 + stable_int(spec.name, "rv", below=9_000_000)),
            "uid": stable_uid("node", spec.name),
        },
        "spec": node_spec,
        "status": {
            "addresses": [
                {"address": spec.ip, "type": "InternalIP"},
                {"address": spec.name, "type": "InternalDNS"},
                {"address": spec.name, "type": "Hostname"},
            ],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": node_conditions(spec, detail.monitoring_conditions),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": node_images(spec, detail.images),
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": stable_uid("boot", spec.name),
                "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": "6.1.132-147.221.amzn2023.x86_64",
                "kubeProxyVersion": KUBELET_VERSION,
                "kubeletVersion": KUBELET_VERSION,
                "machineID": stable_hex("machine", spec.name),
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.7.20250512",
                "systemUUID": "ec2" + stable_hex("system", spec.name, length=29),
            },
        },
    }
    if detail.managed_fields:
        body["metadata"]["managedFields"] = node_managed_fields(spec, body)
        body["metadata"] = dict(sorted(body["metadata"].items()))
    return body


def _owner(kind: str, api_version: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "blockOwnerDeletion": True,
        "controller": True,
        "kind": kind,
        "name": name,
        "uid": stable_uid(kind, name),
    }


def _pod_status_conditions(created: datetime, ready: bool) -> list[dict[str, Any]]:
    started = rfc3339(created + timedelta(seconds=3))
    ready_at = rfc3339(created + timedelta(seconds=9))
    ready_status = "True" if ready else "False"
    return [
        {"lastProbeTime": None, "lastTransitionTime": started, "status": "True", "type": "Initialized"},
        {"lastProbeTime": None, "lastTransitionTime": ready_at, "status": ready_status, "type": "Ready"},
        {"lastProbeTime": None, "lastTransitionTime": rfc3339(created), "status": "True", "type": "PodScheduled"},
    ]


@dataclass(frozen=True)
class DaemonSetTemplate:
    namespace: str
    name: str
    labels: dict[str, str]  # on the DaemonSet object
    pod_labels: dict[str, str]  # on its pods (and its selector)
    image: str
    revision: str
    container_args: tuple[str, ...] = ()
    host_paths: tuple[tuple[str, str], ...] = ()  # (volume name, path)
    node_affinity_types: tuple[str, ...] = ()  # empty: every node
    tolerate_everything: bool = False
    node_selector: dict[str, str] = field(default_factory=dict)
    # Node groups the DaemonSet must not run on (its affinity says NotIn).
    excluded_nodegroups: tuple[str, ...] = ()
    selector_labels: dict[str, str] | None = None  # the DaemonSet's selector; None: pod_labels


EFA_DAEMON_SET = DaemonSetTemplate(
    namespace="kube-system",
    name=EFA_PLUGIN,
    labels={
        "app.kubernetes.io/instance": "efa",
        "app.kubernetes.io/managed-by": "Helm",
        "app.kubernetes.io/name": EFA_PLUGIN,
        "app.kubernetes.io/version": "v0.5.6",
        "helm.sh/chart": f"{EFA_PLUGIN}-v0.5.6",
    },
    # Like the real chart: the pods carry only `name`, not app.kubernetes.io/name.
    pod_labels={"name": EFA_PLUGIN},
    image=f"{ECR}/eks/{EFA_PLUGIN}:v0.5.6",
    revision="6b7d8c9f54",
    host_paths=(("device-plugin", "/var/lib/kubelet/device-plugins"), ("infiniband-volume", "/dev/infiniband")),
    node_affinity_types=EFA_PLUGIN_INSTANCE_TYPES,
    # The node group moved to DRANET: its EFA devices come from the DRA driver instead.
    excluded_nodegroups=("p5-dranet",),
)
# AWS's aws-dranet chart: selector app=aws-dranet, no app.kubernetes.io/name; with its EFA-only
# publish filter. Pinned here to the pool that uses DRA instead of the device plugin.
DRANET_DAEMON_SET = DaemonSetTemplate(
    namespace="kube-system",
    name="aws-dranet",
    labels={
        "app": "aws-dranet",
        "app.kubernetes.io/managed-by": "Helm",
        "app.kubernetes.io/version": "v1.2.0-eksbuild.2",
        "helm.sh/chart": "aws-dranet-1.0.0",
        "k8s-app": "aws-dranet",
        "tier": "node",
    },
    pod_labels={"app": "aws-dranet", "k8s-app": "aws-dranet", "tier": "node"},
    selector_labels={"app": "aws-dranet"},
    image=f"{ECR}/eks/dranet:v1.2.0-eksbuild.2",
    revision="7f9c5d6b48",
    container_args=(
        "--cloud-provider-hint=AWS",
        '--filter="dra.net/pciDevice" in attributes && '
        'attributes["dra.net/pciDevice"].StringValue == "Elastic Fabric Adapter (EFA)"',
        "--bind-address=:9177",
    ),
    host_paths=(("plugins-registry", "/var/lib/kubelet/plugins_registry"), ("plugins", "/var/lib/kubelet/plugins")),
    node_selector={"eks.amazonaws.com/nodegroup": "p5-dranet"},
)
AWS_NODE_DAEMON_SET = DaemonSetTemplate(
    namespace="kube-system",
    name="aws-node",
    labels={
        "app.kubernetes.io/instance": "aws-vpc-cni",
        "app.kubernetes.io/name": "aws-node",
        "app.kubernetes.io/version": "v1.19.2",
        "k8s-app": "aws-node",
    },
    pod_labels={
        "app.kubernetes.io/instance": "aws-vpc-cni",
        "app.kubernetes.io/name": "aws-node",
        "k8s-app": "aws-node",
    },
    image=f"{ECR}/amazon-k8s-cni:v1.19.2-eksbuild.1",
    revision="5c4f7b8d6",
    host_paths=(("cni-bin-dir", "/opt/cni/bin"),),
    tolerate_everything=True,
)


def _node_affinity(instance_types: Sequence[str], excluded_nodegroups: Sequence[str] = ()) -> dict[str, Any]:
    expressions: list[dict[str, Any]] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(instance_types)}
    ]
    if excluded_nodegroups:
        expressions.append(
            {"key": "eks.amazonaws.com/nodegroup", "operator": "NotIn", "values": list(excluded_nodegroups)}
        )
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}
        }
    }


def _tolerations(template: DaemonSetTemplate) -> list[dict[str, str]]:
    if template.tolerate_everything:
        return [{"operator": "Exists"}]
    return [
        {"key": "CriticalAddonsOnly", "operator": "Exists"},
        {"effect": "NoSchedule", "key": "aws.amazon.com/efa", "operator": "Exists"},
        {"effect": "NoSchedule", "key": GPU_RESOURCE, "operator": "Exists"},
    ]


def _container(template: DaemonSetTemplate) -> dict[str, Any]:
    container: dict[str, Any] = {
        "image": template.image,
        "imagePullPolicy": "IfNotPresent",
        "name": template.name,
        "volumeMounts": [{"mountPath": path, "name": volume} for volume, path in template.host_paths],
    }
    if template.container_args:
        container["args"] = list(template.container_args)
    return container


def daemon_set_body(template: DaemonSetTemplate, scheduled: int, ready: int) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "containers": [_container(template)],
        "dnsPolicy": "ClusterFirst",
        "hostNetwork": True,
        "priorityClassName": "system-node-critical",
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
        "tolerations": _tolerations(template),
        "volumes": [{"hostPath": {"path": path, "type": ""}, "name": volume} for volume, path in template.host_paths],
    }
    if template.node_affinity_types:
        pod_spec["affinity"] = _node_affinity(template.node_affinity_types, template.excluded_nodegroups)
    if template.node_selector:
        pod_spec["nodeSelector"] = dict(template.node_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "annotations": {
                "deprecated.daemonset.template.generation": "1",
                "meta.helm.sh/release-name": template.name,
            },
            "creationTimestamp": rfc3339(CLUSTER_CREATED),
            "generation": 1,
            "labels": template.labels,
            "name": template.name,
            "namespace": template.namespace,
            "resourceVersion": str(81_000_000 + stable_int(template.name, below=1_000_000)),
            "uid": stable_uid("DaemonSet", template.name),
        },
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": template.selector_labels or template.pod_labels},
            "template": {"metadata": {"creationTimestamp": None, "labels": template.pod_labels}, "spec": pod_spec},
            "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"},
        },
        "status": {
            "currentNumberScheduled": scheduled,
            "desiredNumberScheduled": scheduled,
            "numberAvailable": ready,
            "numberMisscheduled": 0,
            "numberReady": ready,
            "numberUnavailable": scheduled - ready if scheduled > ready else None,
            "observedGeneration": 1,
            "updatedNumberScheduled": scheduled,
        },
    }


def daemon_set_pod_body(template: DaemonSetTemplate, node: NodeSpec, ready: bool = True) -> dict[str, Any]:
    """The pod the DaemonSet controller creates on ``node``: owned by the DaemonSet, pinned by matchFields."""
    name = f"{template.name}-{pod_suffix(template.name, node.name)}"
    created = node.created + timedelta(seconds=20 + stable_int(name, below=20))
    labels = {**template.pod_labels, "controller-revision-hash": template.revision, "pod-template-generation": "1"}
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node.name]}]}
                    ]
                }
            }
        },
        "containers": [_container(template)],
        "hostNetwork": True,
        "nodeName": node.name,
        "priorityClassName": "system-node-critical",
        "restartPolicy": "Always",
        "tolerations": _tolerations(template),
        "volumes": [{"hostPath": {"path": path, "type": ""}, "name": volume} for volume, path in template.host_paths],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": rfc3339(created),
            "generateName": f"{template.name}-",
            "labels": labels,
            "name": name,
            "namespace": template.namespace,
            "ownerReferences": [_owner("DaemonSet", "apps/v1", template.name)],
            "resourceVersion": str(82_000_000 + stable_int(name, below=1_000_000)),
            "uid": stable_uid("Pod", name),
        },
        "spec": spec,
        "status": {
            "conditions": _pod_status_conditions(created, ready),
            "containerStatuses": [
                {
                    "image": template.image,
                    "name": template.name,
                    "ready": ready,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": rfc3339(created + timedelta(seconds=8))}},
                }
            ],
            "hostIP": node.ip,
            "phase": "Running",
            "podIP": node.ip,
            "qosClass": "BestEffort",
            "startTime": rfc3339(created),
        },
    }


def workload_pod_body(
    namespace: str,
    name: str,
    owner: dict[str, Any],
    node: NodeSpec | None,
    image: str,
    requests: dict[str, str],
    pod_ip: str,
    *,
    labels: dict[str, str] | None = None,
    env: list[dict[str, str]] | None = None,
    unschedulable: str | None = None,
) -> dict[str, Any]:
    """A pod of some workload (not a DaemonSet); ``node`` None with ``unschedulable``: a pod
    the scheduler could not place, with its message."""
    created = SNAPSHOT_TIME - timedelta(hours=2 + stable_int(name, below=20))
    container: dict[str, Any] = {
        "image": image,
        "name": "main",
        "resources": {"limits": requests, "requests": requests},
    }
    if env:
        container["env"] = env
    spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Always" if owner["kind"] == "ReplicaSet" else "Never",
    }
    if node is not None:
        spec["nodeName"] = node.name
        status: dict[str, Any] = {
            "conditions": _pod_status_conditions(created, True),
            "hostIP": node.ip,
            "phase": "Running",
            "podIP": pod_ip,
            "qosClass": "Guaranteed",
            "startTime": rfc3339(created),
        }
    else:
        status = {
            "conditions": [
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": rfc3339(created),
                    "message": unschedulable or "",
                    "reason": "Unschedulable",
                    "status": "False",
                    "type": "PodScheduled",
                }
            ],
            "phase": "Pending",
            "qosClass": "Guaranteed",
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": rfc3339(created),
            "labels": labels or {"app.kubernetes.io/name": name.rsplit("-", 2)[0]},
            "name": name,
            "namespace": namespace,
            "ownerReferences": [owner],
            "resourceVersion": str(83_000_000 + stable_int(name, below=1_000_000)),
            "uid": stable_uid("Pod", name),
        },
        "spec": spec,
        "status": status,
    }


TRAINER_IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/ml/bert-finetune:2025-06-01"


def trainjob_without_efa(nodes: Sequence[NodeSpec], trainjob: str = "bert-finetune") -> list[dict[str, Any]]:
    """A Kubeflow TrainJob's pods, as the Trainer, JobSet and Job controllers make them: the
    runtime sets the EFA environment, but the TrainJob's resourcesPerNode replaced the
    runtime's resources and asks for GPUs only. On a Ready EFA pool: NCCL runs over TCP."""
    replicated = "node"
    job = f"{trainjob}-{replicated}-0"
    jobset_uid = stable_uid("JobSet", trainjob)
    pods = []
    for index, node in enumerate(nodes):
        labels = {
            "batch.kubernetes.io/controller-uid": stable_uid("Job", job),
            "batch.kubernetes.io/job-completion-index": str(index),
            "batch.kubernetes.io/job-name": job,
            "controller-uid": stable_uid("Job", job),
            "job-name": job,
            "jobset.sigs.k8s.io/jobset-name": trainjob,
            "jobset.sigs.k8s.io/jobset-uid": jobset_uid,
            "jobset.sigs.k8s.io/replicatedjob-name": replicated,
            "jobset.sigs.k8s.io/job-index": "0",
            "jobset.sigs.k8s.io/restart-attempt": "0",
        }
        pods.append(
            workload_pod_body(
                "ml-training",
                f"{job}-{index}-{pod_suffix('trainjob', trainjob, index)}",
                _owner("Job", "batch/v1", job),
                node,
                TRAINER_IMAGE,
                {"cpu": "96", "memory": "1000Gi", GPU_RESOURCE: "8"},
                f"10.0.16.{240 + index}",
                labels=labels,
                env=[{"name": "FI_PROVIDER", "value": "efa"}, {"name": "NCCL_DEBUG", "value": "INFO"}],
            )
        )
    return pods


def unschedulable_efa_pod() -> dict[str, Any]:
    """A PyTorchJob worker that asks for more EFA than any node has: Pending for good."""
    message = (
        "0/30 nodes are available: 30 Insufficient vpc.amazonaws.com/efa. no new claims to deallocate, "
        "preemption: 0/30 nodes are available: 30 Preemption is not helpful for scheduling."
    )
    return workload_pod_body(
        "ml-research",
        "resnet-efa-64-worker-0",
        _owner("PyTorchJob", "kubeflow.org/v1", "resnet-efa-64"),
        None,
        f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/ml/resnet:2025-06-01",
        {"cpu": "8", "memory": "64Gi", GPU_RESOURCE: "8", EFA_RESOURCE: "64"},
        "",
        labels={
            "training.kubeflow.org/job-name": "resnet-efa-64",
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/replica-index": "0",
            "training.kubeflow.org/replica-type": "worker",
        },
        unschedulable=message,
    )


def _pool_nodes(
    pool: str,
    instance_types: Sequence[str],
    subnet: int,
    *,
    provisioner: str = "nodegroup",
    efa: Sequence[tuple[int, int]] | None = None,
    plugin: bool = True,
    capacity_type: str = "ON_DEMAND",
    dranet: bool = False,
) -> list[NodeSpec]:
    """Nodes of one pool; ``efa`` gives (capacity, allocatable) per node, default the type's maximum."""
    nodes = []
    for index, instance_type in enumerate(instance_types):
        maximum = INSTANCE_SHAPES[instance_type].efa_maximum
        capacity, allocatable = efa[index] if efa is not None else (maximum, maximum)
        nodes.append(
            NodeSpec(
                pool=pool,
                provisioner=provisioner,
                instance_type=instance_type,
                # 37 is coprime with 240: distinct hosts for up to 240 nodes per subnet.
                ip=f"10.0.{subnet}.{11 + (stable_int(pool, below=240) + 37 * index) % 240}",
                zone=f"{REGION}{'abcd'[subnet % 4]}",
                efa_capacity=capacity,
                efa_allocatable=allocatable,
                plugin_pod=plugin,
                dranet=dranet,
                capacity_type=capacity_type,
                created=CLUSTER_CREATED + timedelta(days=30 + subnet, minutes=index * 3),
            )
        )
    return nodes


ABSENT = (-1, -1)  # the EFA resource does not appear in the node status at all


def cluster_nodes() -> list[NodeSpec]:
    """The pools; each comment says what fabriccap must conclude (tests/repo/test_examples.py)."""
    p5 = "p5.48xlarge"
    nodes = [
        # (a) Healthy: 4 nodes advertise 32, plugin Ready everywhere -> Ready/UniformCapability.
        *_pool_nodes("p5-training", [p5] * 4, 16, capacity_type="CAPACITY_BLOCK"),
        # (b) Partial rollout: the last node's plugin is Ready but found no device -> PartialRollout.
        *_pool_nodes("p5-partial", [p5] * 4, 17, efa=[(32, 32)] * 3 + [(0, 0)]),
        # (c) Karpenter nodepool mixing p4d (4) and p5 (32) -> MixedCounts, Stalled HeterogeneousInstanceTypes.
        *_pool_nodes(
            "gpu-mixed", ["p4d.24xlarge", p5, "p4d.24xlarge", p5], 32, provisioner="karpenter", capacity_type="SPOT"
        ),
        # (d) GPU nodes of a type without EFA; plugin Ready, nothing advertised -> NotAdvertised,
        #     Stalled InstanceTypeUnsupported.
        *_pool_nodes("g6-inference", ["g6.2xlarge"] * 2, 40, efa=[ABSENT] * 2),
        # (e) Trainium pool with one node cordoned for maintenance -> Ready, cordonedNodes 1.
        *_pool_nodes("trn1-cordoned", ["trn1.32xlarge"] * 3, 48),
        # (f) CPU pool: no GPU, no EFA, no plugin pod -> no FabricCapability at all.
        *_pool_nodes("cpu-general", ["m7i.4xlarge"] * 2, 64, efa=[ABSENT] * 3, plugin=False),
        # (g) p4d pool where 2 of one node's 4 EFA devices went unhealthy -> MixedCounts, unhealthy 1.
        *_pool_nodes("p4d-unhealthy", ["p4d.24xlarge"] * 3, 24, efa=[(4, 4), (4, 2), (4, 4)]),
        # (h) A managed node group on the EFA DRA driver (DRANET), AWS's choice for new >= 1.34
        #     clusters: allocatable has no EFA, each node's ResourceSlice holds 32 EFA devices,
        #     the driver's pod is Ready -> Ready, sources dra 3, recommendation.resourceClaimTemplate.
        *_pool_nodes("p5-dranet", [p5] * 3, 20, efa=[ABSENT] * 3, plugin=False, dranet=True),
        # (i) A Karpenter NodePool that launched a p5 for a TrainJob asking for GPUs only: Karpenter
        #     attached no EFA (none was requested), the plugin's pod is Ready and finds nothing ->
        #     gap.launchedWithoutFabric 1, out of the gate set; the pool is Ready from the catalog,
        #     the TrainJob is withoutFabric and its Event names the launch.
        *_pool_nodes("p5-spot", [p5], 36, provisioner="karpenter", efa=[ABSENT], capacity_type="SPOT"),
    ]
    trn1 = [index for index, node in enumerate(nodes) if node.pool == "trn1-cordoned"]
    nodes[trn1[1]] = replace(nodes[trn1[1]], cordoned=True)
    return nodes


def cluster_snapshot() -> dict[str, Any]:
    """The v1 List kubectl prints for ``get nodes,pods,daemonsets,resourceslices,deviceclasses,nodepools,
    nodeclaims,ec2nodeclasses -A -o json``."""
    nodes = cluster_nodes()
    by_pool: dict[str, list[NodeSpec]] = {}
    for node in nodes:
        by_pool.setdefault(node.pool, []).append(node)

    pods = [daemon_set_pod_body(AWS_NODE_DAEMON_SET, node) for node in nodes]
    plugin_nodes = [node for node in nodes if node.plugin_pod]
    pods += [daemon_set_pod_body(EFA_DAEMON_SET, node) for node in plugin_nodes]
    dranet_nodes = [node for node in nodes if node.dranet]
    pods += [daemon_set_pod_body(DRANET_DAEMON_SET, node) for node in dranet_nodes]
    coredns = _owner("ReplicaSet", "apps/v1", "coredns-787cb67946")
    for index, node in enumerate(by_pool["cpu-general"][:2]):
        name = f"coredns-787cb67946-{pod_suffix('coredns', index)}"
        image = f"{ECR}/eks/coredns:v1.11.4-eksbuild.2"
        requests = {"cpu": "100m", "memory": "70Mi"}
        pods.append(workload_pod_body("kube-system", name, coredns, node, image, requests, f"10.0.64.{200 + index}"))
    trainer = by_pool["p5-training"][0]
    pods.append(
        workload_pod_body(
            "ml-training",
            "llama-pretrain-0-worker-0-" + pod_suffix("trainer"),
            _owner("Job", "batch/v1", "llama-pretrain-0-worker-0"),
            trainer,
            f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/ml/llm-pretrain:2025-05-30-{stable_hex('tag', 30, length=7)}",
            {"cpu": "180", "memory": "1800Gi", GPU_RESOURCE: "8", EFA_RESOURCE: "32"},
            "10.0.16.231",
        )
    )
    pods += trainjob_without_efa(by_pool["p5-training"][1:3])
    pods += trainjob_without_efa(by_pool["p5-spot"], trainjob="gpt-sft")
    pods.append(unschedulable_efa_pod())
    pods.sort(key=lambda pod: (pod["metadata"]["namespace"], pod["metadata"]["name"]))
    daemon_sets = [
        daemon_set_body(AWS_NODE_DAEMON_SET, len(nodes), len(nodes)),
        daemon_set_body(EFA_DAEMON_SET, len(plugin_nodes), len(plugin_nodes)),
        daemon_set_body(DRANET_DAEMON_SET, len(dranet_nodes), len(dranet_nodes)),
    ]
    daemon_sets.sort(key=lambda ds: (ds["metadata"]["namespace"], ds["metadata"]["name"]))
    for ds in daemon_sets:  # kubectl prints no null fields
        ds["status"] = {key: value for key, value in ds["status"].items() if value is not None}
    slices = [resource_slice_body(node) for node in sorted(dranet_nodes, key=lambda node: node.name)]
    items = [node_body(node) for node in sorted(nodes, key=lambda node: node.name)] + pods + daemon_sets + slices
    items.append(device_class_body())
    items += karpenter_objects(nodes)
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def _efa_device(index: int) -> dict[str, Any]:
    """An EFA as DRANET publishes it: a PCI function with an RDMA link and no network interface."""
    bus = 0x10 + 0x11 * (index // 4) + index % 4
    return {
        "attributes": {
            "dra.net/numaNode": {"int": 0 if index < 16 else 1},
            "dra.net/pciAddress": {"string": f"0000:{bus:02x}:00.0"},
            "dra.net/pciDevice": {"string": "Elastic Fabric Adapter (EFA)"},
            "dra.net/pciSubsystem": {"string": "efa1"},
            "dra.net/pciVendor": {"string": "Amazon.com, Inc."},
            "dra.net/rdma": {"bool": True},
            "dra.net/rdmaDevice": {"string": f"rdmap{bus}s0"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{bus - index % 4 - 1:02x}"},
        },
        "name": f"pci-0000-{bus:02x}-00-0",
    }


def resource_slice_body(node: NodeSpec) -> dict[str, Any]:
    """DRANET's slice for one node: one pool named after the node, one slice, owned by the Node."""
    created = node.created + timedelta(seconds=45)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "creationTimestamp": rfc3339(created),
            "generateName": f"{node.name}-dra.net-",
            "generation": 1,
            "name": f"{node.name}-dra.net-{pod_suffix('slice', node.name)}",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "controller": True,
                    "kind": "Node",
                    "name": node.name,
                    "uid": stable_uid("node", node.name),
                }
            ],
            "resourceVersion": str(82_000_000 + stable_int(node.name, "slice", below=1_000_000)),
            "uid": stable_uid("ResourceSlice", node.name),
        },
        "spec": {
            "devices": [_efa_device(index) for index in range(node.shape.efa_maximum)],
            "driver": "dra.net",
            "nodeName": node.name,
            "pool": {"generation": 1, "name": node.name, "resourceSliceCount": 1},
        },
    }


# Karpenter's NodePools (karpenter.sh/v1), their EC2NodeClass and NodeClaims, as
# `kubectl get nodepools,nodeclaims,ec2nodeclasses -o json` prints them (Karpenter v1.15 shapes).
NODEPOOL_REQUIREMENTS: dict[str, list[str]] = {
    "gpu-mixed": ["p4d.24xlarge", "p5.48xlarge"],
    "p5-spot": ["p5.48xlarge"],
    # (j) An empty NodePool, scaled to zero: its types all attach 32 -> Ready from the catalog.
    # Only types the EFA plugin's node affinity lists (EFA_PLUGIN_INSTANCE_TYPES): with
    # p5e.48xlarge too, its nodes would never run the plugin (ProviderExcludesInstanceTypes).
    "p5-elastic": ["p5.48xlarge"],
}


def _karpenter_condition(kind: str, at: datetime) -> dict[str, Any]:
    return {
        "lastTransitionTime": rfc3339(at),
        "message": "",
        "observedGeneration": 1,
        "reason": kind,
        "status": "True",
        "type": kind,
    }


def node_pool_body(name: str, instance_types: Sequence[str]) -> dict[str, Any]:
    created = CLUSTER_CREATED + timedelta(days=2)
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "creationTimestamp": rfc3339(created),
            "generation": 1,
            "name": name,
            "resourceVersion": str(70_000_000 + stable_int("nodepool", name, below=1_000_000)),
            "uid": stable_uid("NodePool", name),
        },
        "spec": {
            "disruption": {
                "budgets": [{"nodes": "10%"}],
                "consolidateAfter": "0s",
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
            },
            "template": {
                "spec": {
                    "expireAfter": "720h",
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                    "requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(instance_types)},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
                    ],
                    "taints": [{"effect": "NoSchedule", "key": GPU_RESOURCE, "value": "true"}],
                }
            },
        },
        "status": {"conditions": [_karpenter_condition("Ready", created)]},
    }


def node_claim_body(node: NodeSpec, efa_requested: bool) -> dict[str, Any]:
    """The NodeClaim Karpenter made for ``node``: the pods' merged requests, the instance it
    launched (status.providerID, the node's), EFA in status.capacity only when attached."""
    name = f"{node.pool}-{pod_suffix('nodeclaim', node.name)}"
    shape = node.shape
    requests = {"cpu": "96", "memory": "1000Gi", "pods": "5", GPU_RESOURCE: str(shape.gpus)}
    capacity = {
        "cpu": str(shape.vcpus),
        "memory": f"{shape.memory_gib}Gi",
        "pods": "100",
        GPU_RESOURCE: str(shape.gpus),
    }
    if efa_requested:
        requests[EFA_RESOURCE] = str(shape.efa_maximum)
        capacity[EFA_RESOURCE] = str(shape.efa_maximum)
    launched = node.created - timedelta(seconds=90)
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "annotations": {"karpenter.sh/nodepool-hash": str(stable_int("nodepool", node.pool, below=10**19))},
            "creationTimestamp": rfc3339(launched),
            "finalizers": ["karpenter.sh/termination"],
            "generation": 1,
            "labels": {
                "karpenter.k8s.aws/ec2nodeclass": "gpu",
                "karpenter.sh/capacity-type": node.capacity_type.lower().replace("_", "-"),
                "karpenter.sh/nodepool": node.pool,
                "node.kubernetes.io/instance-type": node.instance_type,
                "topology.kubernetes.io/zone": node.zone,
            },
            "name": name,
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "blockOwnerDeletion": True,
                    "kind": "NodePool",
                    "name": node.pool,
                    "uid": stable_uid("NodePool", node.pool),
                }
            ],
            "resourceVersion": str(71_000_000 + stable_int("nodeclaim", name, below=1_000_000)),
            "uid": stable_uid("NodeClaim", name),
        },
        "spec": {
            "expireAfter": "720h",
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": [node.pool]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [node.instance_type]},
            ],
            "resources": {"requests": requests},
        },
        "status": {
            "allocatable": capacity,
            "capacity": capacity,
            "conditions": [
                _karpenter_condition(kind, node.created) for kind in ("Launched", "Registered", "Initialized")
            ],
            "imageID": "ami-0f5a9c1a7b2d3e4f5",
            "nodeName": node.name,
            "providerID": f"aws:///{node.zone}/i-0{stable_hex('instance', node.name, length=16)}",
        },
    }


def karpenter_objects(nodes: Sequence[NodeSpec]) -> list[dict[str, Any]]:
    node_class = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {
            "creationTimestamp": rfc3339(CLUSTER_CREATED + timedelta(days=2)),
            "name": "gpu",
            "uid": stable_uid("EC2NodeClass", "gpu"),
        },
        "spec": {
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": "KarpenterNodeRole-training",
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "training"}}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "training"}}],
        },
    }
    pools = [node_pool_body(name, types) for name, types in sorted(NODEPOOL_REQUIREMENTS.items())]
    claims = [
        node_claim_body(node, efa_requested=node.efa_allocatable > 0)
        for node in sorted(nodes, key=lambda node: node.name)
        if node.provisioner == "karpenter"
    ]
    return [*pools, *claims, node_class]


def device_class_body() -> dict[str, Any]:
    """The DeviceClass the aws-dranet chart installs (rendered from the chart: fabriccap.core.upstream),
    as the API server returns it."""
    body: dict[str, Any] = yaml.safe_load(AWS_DRANET_DEVICE_CLASS)
    body["metadata"].update(
        {
            "creationTimestamp": rfc3339(CLUSTER_CREATED + timedelta(days=70)),
            "generation": 1,
            "resourceVersion": str(81_000_000 + stable_int("deviceclass", below=1_000_000)),
            "uid": stable_uid("DeviceClass", body["metadata"]["name"]),
        }
    )
    return body


def render(snapshot: dict[str, Any]) -> str:
    """kubectl's formatting: it prints through a map, so keys are sorted; 4-space indent."""
    return json.dumps(snapshot, indent=4, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=str(DEFAULT_OUTPUT), help="file to write, - for stdout")
    args = parser.parse_args(argv)
    text = render(cluster_snapshot())
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output} ({len(text.encode()) // 1024} KB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
