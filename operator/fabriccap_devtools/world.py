"""The test world: bodies of Nodes, DaemonSets, Pods and ResourceSlices as a real EKS cluster serves them.

One set of builders for the unit tests, the end-to-end tests and the benchmarks. Bodies carry
the noise a real cluster has (cpu, memory, conditions, nodeInfo, other labels, owner UIDs;
optionally dozens of images and managedFields, as benchmarks want) so every user of them also
proves the code ignores it. Everything is deterministic in the names given.

The example cluster (``examples/eks-cluster.json``) has a richer generator of its own, with
per-instance-type shapes: ``examples/generate_cluster.py``.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from fabriccap.core.upstream import AWS_DRANET_DEVICE_CLASS
from fabriccap_devtools import upstream

EFA = "vpc.amazonaws.com/efa"
GPU = "nvidia.com/gpu"
NODEGROUP = "eks.amazonaws.com/nodegroup"
KARPENTER = "karpenter.sh/nodepool"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
GPU_PRESENT = "nvidia.com/gpu.present"
EFA_DS = "aws-efa-k8s-device-plugin"
EFA_DS_SELECTOR = {"app.kubernetes.io/name": "aws-efa-k8s-device-plugin"}
KUBE_SYSTEM = "kube-system"

# Never pulled: no test pod of these bodies runs on a real kubelet.
PLUGIN_IMAGE = "registry.invalid/aws-efa-k8s-device-plugin:v0.5.6"
# The pod tolerations of aws/eks-charts stable/aws-efa-k8s-device-plugin: templates/daemonset.yaml
# writes this one, then the `tolerations` value, which values.yaml leaves empty (`tolerations: []`).
# So the chart installed with its defaults runs no pod on a node tainted nvidia.com/gpu:NoSchedule.
EFA_CHART_TOLERATIONS: tuple[Mapping[str, str], ...] = ({"key": "CriticalAddonsOnly", "operator": "Exists"},)

Quantity = int | str | None


def _uid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _quantity(value: Quantity) -> str | None:
    return None if value is None else str(value)


def node(
    name: str,
    *,
    pool: str | None = "p5",
    pool_key: str = NODEGROUP,
    instance_type: str | None = "p5.48xlarge",
    efa: Quantity = 32,
    efa_capacity: Quantity | str = "same",
    gpu: Quantity = 8,
    gpu_present_label: str | None = None,
    cordoned: bool = False,
    labels: Mapping[str, str] | None = None,
    resources: Mapping[str, str] | None = None,
    images: int = 1,
    heavy: bool = False,
    provider_id: str | None = "aws",
    ready: bool = True,
) -> dict[str, Any]:
    """A Node. ``efa``/``gpu`` are allocatable (None: resource absent); capacity follows
    allocatable unless ``efa_capacity`` says otherwise. ``provider_id``: "aws" gives an EC2 one
    (aws:///<zone>/i-...), None none, anything else is taken as it is; ``ready`` is its Ready
    condition.

    ``resources`` adds other extended resources (capacity = allocatable). ``images`` and
    ``heavy`` (the EKS node monitoring agent's conditions with heartbeats, a full nodeInfo,
    managedFields) make the body as large as a busy node's: 10-20 KB.
    """
    node_labels: dict[str, str] = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "topology.kubernetes.io/region": "us-west-2",
        "topology.kubernetes.io/zone": "us-west-2a",
    }
    if pool is not None:
        node_labels[pool_key] = pool
    if instance_type is not None:
        node_labels[INSTANCE_TYPE] = instance_type
        node_labels["beta.kubernetes.io/instance-type"] = instance_type
    if gpu_present_label is not None:
        node_labels[GPU_PRESENT] = gpu_present_label
    node_labels.update(labels or {})

    base = {"cpu": "192", "memory": "2097152000Ki", "pods": "100", "ephemeral-storage": "3758010880Ki"}
    capacity: dict[str, str] = dict(base)
    allocatable: dict[str, str] = {**base, "cpu": "191450m", "memory": "2080000000Ki"}
    efa_allocatable = _quantity(efa)
    efa_cap = efa_allocatable if efa_capacity == "same" else _quantity(efa_capacity)
    if efa_allocatable is not None:
        allocatable[EFA] = efa_allocatable
    if efa_cap is not None:
        capacity[EFA] = efa_cap
    if gpu is not None:
        allocatable[GPU] = str(gpu)
        capacity[GPU] = str(gpu)
    for resource, quantity in (resources or {}).items():  # others: Neuron devices, RDMA
        allocatable[resource] = capacity[resource] = quantity

    spec: dict[str, Any] = {}
    if provider_id == "aws":
        spec["providerID"] = f"aws:///us-west-2a/i-{_uid(name)[:17].replace('-', '')}"
    elif provider_id is not None:
        spec["providerID"] = provider_id
    if cordoned:
        spec["unschedulable"] = True
        spec["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": _uid("node", name),
            "resourceVersion": "12345",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": node_labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady"}
                if ready
                else {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.1.5"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.31.2-eks-7f9249a", "containerRuntimeVersion": "containerd://1.7.22"},
            "images": node_images(name, images),
        },
    }
    if heavy:
        _add_weight(body)
    return body


def node_images(name: str, count: int) -> list[dict[str, Any]]:
    """``count`` image entries, as the kubelet lists what it has pulled (the pause image first)."""
    rng = random.Random(f"images/{name}")
    images: list[dict[str, Any]] = [
        {"names": ["602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.5"], "sizeBytes": 299}
    ]
    for index in range(1, count):
        repository = f"123456789012.dkr.ecr.us-west-2.amazonaws.com/team-{index}/training-image"
        images.append(
            {
                "names": [
                    f"{repository}@sha256:{rng.getrandbits(256):064x}",
                    f"{repository}:v{index}.{rng.randint(0, 99)}",
                ],
                "sizeBytes": rng.randint(10**7, 10**10),
            }
        )
    return images[:count]


# The kubelet's conditions, then the EKS node monitoring agent's, every node of a recent cluster.
_HEAVY_CONDITIONS: tuple[tuple[str, str, str, str], ...] = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ("KernelReady", "True", "KernelIsReady", "Monitoring for the Kernel system is active"),
    ("NetworkingReady", "True", "NetworkingIsReady", "Monitoring for the Networking system is active"),
    ("StorageReady", "True", "DiskIsReady", "Monitoring for the Disk system is active"),
    (
        "ContainerRuntimeReady",
        "True",
        "ContainerRuntimeIsReady",
        "Monitoring for the ContainerRuntime system is active",
    ),
)


def _add_weight(body: dict[str, Any]) -> None:
    name = body["metadata"]["name"]
    rng = random.Random(f"weight/{name}")
    now = "2026-11-30T10:00:00Z"
    status = body["status"]
    status["conditions"] = [
        {
            "type": kind,
            "status": value,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": "2026-11-01T00:00:00Z",
        }
        for kind, value, reason, message in _HEAVY_CONDITIONS
    ]
    status["nodeInfo"] = {
        "machineID": f"{rng.getrandbits(128):032x}",
        "systemUUID": f"ec2{rng.getrandbits(116):029x}",
        "bootID": f"{rng.getrandbits(128):032x}",
        "kernelVersion": "6.1.132-147.221.amzn2023.x86_64",
        "osImage": "Amazon Linux 2023.7.20250512",
        "containerRuntimeVersion": "containerd://1.7.27",
        "kubeletVersion": "v1.31.7-eks-473151a",
        "kubeProxyVersion": "v1.31.7-eks-473151a",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
    body["metadata"]["labels"].update(
        {
            "eks.amazonaws.com/capacityType": "ON_DEMAND",
            "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
            "k8s.io/cloud-provider-aws": f"{rng.getrandbits(128):032x}",
        }
    )
    body["metadata"]["annotations"]["volumes.kubernetes.io/controller-managed-attach-detach"] = "true"
    body["metadata"]["managedFields"] = [
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:conditions": {
                        f'k:{{"type":"{kind}"}}': {".": {}, "f:lastHeartbeatTime": {}} for kind, *_ in _HEAVY_CONDITIONS
                    }
                }
            },
            "manager": "kubelet",
            "operation": "Update",
            "subresource": "status",
            "time": now,
        }
    ]


def daemon_set(
    name: str = EFA_DS,
    *,
    namespace: str = KUBE_SYSTEM,
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = EFA_CHART_TOLERATIONS,
) -> dict[str, Any]:
    """A DaemonSet; by default the EFA chart's, labelled like the chart labels it, with the
    chart's default tolerations (EFA_CHART_TOLERATIONS).

    ``node_selector`` keeps a real DaemonSet controller from placing pods where a test binds
    its own.
    """
    ds_labels = dict(EFA_DS_SELECTOR) if labels is None else dict(labels)
    template_spec: dict[str, Any] = {
        "containers": [{"name": name, "image": PLUGIN_IMAGE}],
        "tolerations": [dict(toleration) for toleration in tolerations],
    }
    if node_selector:
        template_spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": _uid("ds", namespace, name),
            "labels": {**ds_labels, "app.kubernetes.io/instance": "efa"},
            "annotations": {"deprecated.daemonset.template.generation": "1"},
        },
        "spec": {
            "selector": {"matchLabels": {"name": name}},
            "template": {"metadata": {"labels": {"name": name}}, "spec": template_spec},
        },
        "status": {"desiredNumberScheduled": 1, "numberReady": 1},
    }


def pod(
    node_name: str | None,
    *,
    daemon_set_name: str | None = EFA_DS,
    namespace: str = KUBE_SYSTEM,
    name: str | None = None,
    phase: str = "Running",
    ready: bool = True,
    deleting: bool = False,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod, owned by ``daemon_set_name`` (None: no owner) and bound to ``node_name``.

    Like the EFA chart's pods it carries ``name: <ds>`` and not ``app.kubernetes.io/name``.
    """
    pod_name = name or f"{daemon_set_name or 'pod'}-{hashlib.sha256(str(node_name).encode()).hexdigest()[:5]}"
    metadata: dict[str, Any] = {
        "name": pod_name,
        "namespace": namespace,
        "uid": _uid("pod", namespace, pod_name),
        "labels": dict(labels) if labels is not None else {"name": daemon_set_name or "standalone"},
    }
    if daemon_set_name is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": daemon_set_name,
                "uid": _uid("ds", namespace, daemon_set_name),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:05:00Z"
    spec: dict[str, Any] = {
        "containers": [{"name": "plugin", "image": PLUGIN_IMAGE}],
        "tolerations": [{"operator": "Exists"}],
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": {
            "phase": phase,
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True" if ready else "False"},
                {"type": "ContainersReady", "status": "True" if ready else "False"},
                {"type": "PodScheduled", "status": "True" if node_name else "False"},
            ],
        },
    }


DRANET_DS = "aws-dranet"
DRANET_DRIVER = "dra.net"
EFA_DEVICE_CLASS = "efa.networking.k8s.aws"
EFA_PCI_DEVICE = "Elastic Fabric Adapter (EFA)"
ENA_PCI_DEVICE = "Elastic Network Adapter (ENA)"
DRANET_IMAGE = "registry.invalid/eks/dranet:v1.2.0-eksbuild.2"


def dranet_daemon_set(
    name: str = DRANET_DS,
    *,
    namespace: str = KUBE_SYSTEM,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, str]] = EFA_CHART_TOLERATIONS,
) -> dict[str, Any]:
    """The DRA driver's kubelet-plugin DaemonSet as AWS's aws-dranet chart labels it
    (selector ``app: aws-dranet``, no ``app.kubernetes.io/name``), with the chart's default
    tolerations: its templates/daemonset.yaml (fabriccap_devtools/upstream/aws-dranet-chart) writes
    the same CriticalAddonsOnly one as the EFA chart, then an empty ``tolerations`` value."""
    labels = {"app": DRANET_DS, "k8s-app": DRANET_DS, "tier": "node"}
    template_spec: dict[str, Any] = {
        "containers": [{"name": "dranet", "image": DRANET_IMAGE}],
        "tolerations": [dict(toleration) for toleration in tolerations],
    }
    if node_selector:
        template_spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": _uid("ds", namespace, name),
            "labels": {**labels, "app.kubernetes.io/managed-by": "Helm"},
        },
        "spec": {
            "selector": {"matchLabels": {"app": DRANET_DS}},
            "template": {"metadata": {"labels": labels}, "spec": template_spec},
        },
        "status": {"desiredNumberScheduled": 1, "numberReady": 1},
    }


def dranet_pods(node_names: Iterable[str], **kwargs: Any) -> list[dict[str, Any]]:
    return [pod(name, daemon_set_name=DRANET_DS, labels={"app": DRANET_DS}, **kwargs) for name in node_names]


@functools.cache
def _example_devices() -> tuple[Mapping[str, Any], ...]:
    return tuple(upstream.example_slice()["spec"]["devices"])


def _example_device(pci_device: str) -> dict[str, Any]:
    """A device of DRANET's live EKS slice (fabriccap_devtools.upstream), copied."""
    devices = _example_devices()
    return copy.deepcopy(dict(next(d for d in devices if d["attributes"]["dra.net/pciDevice"]["string"] == pci_device)))


def _efa_device(index: int) -> dict[str, Any]:
    """An EFA as DRANET publishes it (its EKS example's, renumbered): a PCI function with an
    RDMA link and no netdev. The same index gives the same device on every node, as on a
    fleet of one instance type."""
    bus = 0x10 + index
    device = _example_device(EFA_PCI_DEVICE)
    attributes = device["attributes"]
    device["name"] = f"pci-0000-{bus:02x}-1b-0"
    attributes["dra.net/pciAddress"] = {"string": f"0000:{bus:02x}:1b.0"}
    attributes["dra.net/rdmaDevice"] = {"string": f"rdmap{bus}s27"}
    attributes["dra.net/numaNode"] = {"int": 0 if index < 16 else 1}
    attributes["resource.kubernetes.io/pcieRoot"] = {"string": f"pci0000:{bus:02x}"}
    return device


def _ena_device(node_name: str, index: int) -> dict[str, Any]:
    """An ENA interface (the example's, renumbered), which upstream DRANET publishes too (the EKS
    chart's filter keeps EFA only). Its MAC and address are the node's own, as on EC2."""
    bus = 0x80 + index
    digest = hashlib.sha256(f"{node_name}/{index}".encode()).digest()
    device = _example_device(ENA_PCI_DEVICE)
    attributes = device["attributes"]
    device["name"] = f"pci-0000-{bus:02x}-01-0"
    attributes["dra.net/ifName"] = {"string": f"ens{bus}"}
    attributes["dra.net/pciAddress"] = {"string": f"0000:{bus:02x}:01.0"}
    attributes["dra.net/mac"] = {"string": "0e:" + ":".join(f"{byte:02x}" for byte in digest[:5])}
    attributes["dra.net/ipv4"] = {"string": f"192.168.{digest[5]}.{digest[6] % 254 + 1}/19"}
    attributes["resource.kubernetes.io/pcieRoot"] = {"string": f"pci0000:{bus:02x}"}
    return device


def pod_id_link_device() -> dict[str, Any]:
    """An interface without PCI attributes, as DRANET published ``pod-id-link0`` (EKS Pod Identity's
    link) until AWS filtered it out: the aws-dranet class fails on it with ``no such key:
    pciDevice`` (aws/aws-k8s-tester#791). Built from the example's ENA device, PCI attributes
    removed."""
    device = _example_device(ENA_PCI_DEVICE)
    device["name"] = "pod-id-link0"
    attributes = device["attributes"]
    for name in ("dra.net/pciDevice", "dra.net/pciAddress", "dra.net/pciSubsystem", "dra.net/pciVendor"):
        del attributes[name]
    del attributes["resource.kubernetes.io/pcieRoot"]
    attributes["dra.net/ifName"] = {"string": "pod-id-link0"}
    attributes["dra.net/virtual"] = {"bool": True}
    attributes["dra.net/ipv4"] = {"string": "169.254.170.23/32"}
    return device


def resource_slice(
    node_name: str,
    *,
    efa: int = 32,
    ena: int = 0,
    driver: str = DRANET_DRIVER,
    pool: str | None = None,
    generation: int = 1,
    slice_count: int = 1,
    part: int = 0,
    name: str | None = None,
    extra_devices: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A ResourceSlice as DRANET publishes one (its EKS example's shape): one pool per node named
    after it, one slice, ``efa`` EFA devices (and ``ena`` ENA ones), owned by the Node. ``part``
    numbers the slices of a pool published in several (``slice_count``); device names stay
    unique across them."""
    pool_name = pool or node_name
    devices = [_efa_device(part * efa + index) for index in range(efa)]
    devices += [_ena_device(node_name, part * ena + index) for index in range(ena)]
    devices += [copy.deepcopy(dict(device)) for device in extra_devices]
    slice_name = name or f"{node_name}-{driver}-{hashlib.sha256(f'{pool_name}/{part}'.encode()).hexdigest()[:5]}"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": slice_name,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node_name,
                    "uid": _uid("node", node_name),
                    "controller": True,
                }
            ],
        },
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": pool_name, "generation": generation, "resourceSliceCount": slice_count},
            "devices": devices,
        },
    }


def device_taint_rule(
    name: str,
    *,
    effect: str = "NoSchedule",
    driver: str | None = DRANET_DRIVER,
    pool: str | None = None,
    device: str | None = None,
    api_version: str = "resource.k8s.io/v1alpha3",
) -> dict[str, Any]:
    """A DeviceTaintRule as an admin writes one to take devices out of service (the shape of the
    Kubernetes docs' example, concepts/scheduling-eviction/dynamic-resource-allocation "Device
    taints and tolerations"; fields of k8s.io/api@v0.35.4 resource/v1alpha3 DeviceTaintRule):
    a selector of the ``driver``, ``pool`` and ``device`` given (none given: the empty selector),
    one taint."""
    selector = {
        field: value for field, value in (("driver", driver), ("pool", pool), ("device", device)) if value is not None
    }
    return {
        "apiVersion": api_version,
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": selector,
            "taint": {"key": "example.com/unhealthy", "value": "power-failure", "effect": effect},
        },
    }


def efa_device_class(*, extended_resource_name: str | None = None) -> dict[str, Any]:
    """The DeviceClass the aws-dranet chart installs, as the chart renders it (the operator's
    built-in copy, fabriccap.core.upstream); with ``extended_resource_name``, mapped to that
    extended resource (KEP-5004), as a cluster admin may patch it."""
    device_class: dict[str, Any] = yaml.safe_load(AWS_DRANET_DEVICE_CLASS)
    if extended_resource_name is not None:
        device_class["spec"]["extendedResourceName"] = extended_resource_name
    return device_class


def allocated_claim(
    node_name: str,
    devices: Sequence[str],
    *,
    name: str,
    namespace: str = "default",
    pod_name: str | None = None,
    device_class: str = EFA_DEVICE_CLASS,
    driver: str = DRANET_DRIVER,
    pool: str | None = None,
) -> dict[str, Any]:
    """A ResourceClaim for ``len(devices)`` devices of ``device_class``, allocated on ``node_name``
    as the scheduler writes it (DRANET's EKS example claim's shape: results naming driver, pool
    and device, a node selector on the node's name, reserved for its pod)."""
    claim = upstream.example_claim()
    claim["metadata"] = {
        "name": name,
        "namespace": namespace,
        "annotations": claim["metadata"]["annotations"],
        "uid": _uid("claim", namespace, name),
    }
    if pod_name is not None:
        claim["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod_name,
                "uid": _uid("pod", namespace, pod_name),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    claim["spec"] = {
        "devices": {
            "requests": [
                {
                    "name": "efa",
                    "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": len(devices)},
                }
            ]
        }
    }
    pool_name = pool or node_name
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"device": device, "driver": driver, "pool": pool_name, "request": "efa"} for device in devices
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                ]
            },
        },
        "reservedFor": [
            {"name": pod_name or name, "resource": "pods", "uid": _uid("pod", namespace, pod_name or name)}
        ],
    }
    return claim


def plugin_pods(node_names: Iterable[str], **kwargs: Any) -> list[dict[str, Any]]:
    return [pod(name, **kwargs) for name in node_names]


def kube_list(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A ``v1 List`` as ``fabriccap.kube.kinds.snapshot_kubectl()`` prints it."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(items)}


# -- workloads: pods of training jobs, as their controllers make them

WORKLOAD_IMAGE = "registry.invalid/ml/trainer:2026-11"
SCHEDULER_EFA_MESSAGE = (
    "0/{nodes} nodes are available: {nodes} Insufficient vpc.amazonaws.com/efa. no new claims to deallocate, "
    "preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling."
)


def owner_reference(kind: str, api_version: str, name: str, namespace: str = "ml") -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": _uid(kind.lower(), namespace, name),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def workload_pod(
    node_name: str | None,
    name: str,
    *,
    namespace: str = "ml",
    gpu: Quantity = 8,
    efa: Quantity = None,
    owner: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    claims: Sequence[Mapping[str, str]] = (),
    phase: str = "Running",
    unschedulable: str | None = None,
    started_at: str = "2026-01-01T00:00:00Z",
    restarts: int = 0,
) -> dict[str, Any]:
    """A training pod bound to ``node_name`` (None: pending), requesting ``gpu`` and ``efa``
    (limits, as the extended-resource rule allows), owned by ``owner`` (None: a bare pod).
    Running, its container ``node`` has run since ``started_at`` after ``restarts`` restarts."""
    limits = {key: str(value) for key, value in ((GPU, gpu), (EFA, efa)) if value is not None}
    container: dict[str, Any] = {
        "name": "node",
        "image": WORKLOAD_IMAGE,
        "resources": {"limits": {"cpu": "8", "memory": "64Gi", **limits}, "requests": {"cpu": "8", "memory": "64Gi"}},
    }
    if env:
        container["env"] = [{"name": key, "value": value} for key, value in env.items()]
    if claims:
        container["resources"]["claims"] = [{"name": claim["name"]} for claim in claims]
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": _uid("pod", namespace, name),
        "labels": dict(labels or {}),
    }
    if owner is not None:
        metadata["ownerReferences"] = [dict(owner)]
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Never"}
    if claims:
        spec["resourceClaims"] = [dict(claim) for claim in claims]
    conditions = [{"type": "PodScheduled", "status": "True"}]
    if node_name is not None:
        spec["nodeName"] = node_name
    elif unschedulable is not None:
        conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable}]
    status: dict[str, Any] = {"phase": phase if node_name is not None else "Pending", "conditions": conditions}
    if node_name is not None and phase == "Running":
        status["containerStatuses"] = [
            {
                "name": "node",
                "ready": True,
                "restartCount": restarts,
                "image": WORKLOAD_IMAGE,
                "state": {"running": {"startedAt": started_at}},
            }
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


# The labels the API server gives a Job it creates, and its pod template, from the Job's uid.
JOB_CONTROLLER_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")


def job(
    pod_body: Mapping[str, Any],
    name: str,
    *,
    uid: str,
    pods: int,
    started_at: str,
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The batch/v1 Job that made ``pods`` pods like ``pod_body``, as the API server serves it
    while they run: the pod template with the defaults the API server gives a template, the
    selector and labels it adds (``batch.kubernetes.io/controller-uid``), and the Job
    controller's status; owned by ``owner`` (a CronJob's, a JobSet's), or by nothing."""
    metadata = pod_body["metadata"]
    template_spec = {key: copy.deepcopy(value) for key, value in pod_body["spec"].items() if key != "nodeName"}
    template_spec.setdefault("restartPolicy", "Never")
    template_spec |= {
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
    }
    for container in template_spec["containers"]:
        container |= {
            "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }
    controller = dict.fromkeys(JOB_CONTROLLER_LABELS, uid)
    labels = {**metadata.get("labels", {}), **controller, "batch.kubernetes.io/job-name": name, "job-name": name}
    job_metadata: dict[str, Any] = {"name": name, "namespace": metadata.get("namespace", "ml"), "uid": uid}
    job_metadata["labels"] = labels
    if owner is not None:
        job_metadata["ownerReferences"] = [dict(owner)]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": job_metadata,
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "manualSelector": False,
            "podReplacementPolicy": "TerminatingOrFailed",
            "suspend": False,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
            "template": {
                "metadata": {"labels": labels, "annotations": dict(metadata.get("annotations", {}))},
                "spec": template_spec,
            },
        },
        "status": {
            "active": pods,
            "ready": pods,
            "terminating": 0,
            "startTime": started_at,
            "uncountedTerminatedPods": {},
        },
    }


def trainjob_pods(
    trainjob: str, node_names: Sequence[str | None], *, namespace: str = "ml", **kwargs: Any
) -> list[dict[str, Any]]:
    """The pods of a Kubeflow TrainJob: Trainer makes a JobSet of the same name, the JobSet a
    Job per replicated job, the Job the pods. Each pod is owned by its Job and carries the
    JobSet controller's labels and the batch labels the API server adds."""
    job = f"{trainjob}-node-0"
    labels = {
        "batch.kubernetes.io/job-name": job,
        "job-name": job,
        "jobset.sigs.k8s.io/jobset-name": trainjob,
        "jobset.sigs.k8s.io/jobset-uid": _uid("jobset", namespace, trainjob),
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/job-index": "0",
    }
    return [
        workload_pod(
            node,
            f"{job}-{index}",
            namespace=namespace,
            owner=owner_reference("Job", "batch/v1", job, namespace),
            labels=labels,
            **kwargs,
        )
        for index, node in enumerate(node_names)
    ]


# -- Karpenter: NodePools, NodeClaims, EC2NodeClasses and the nodes it launches, as it writes them
# (karpenter.sh/v1 and karpenter.k8s.aws/v1 of github.com/aws/karpenter-provider-aws@v1.15.2).

KARPENTER_GROUP = "karpenter.sh"
NODE_CLASS_GROUP = "karpenter.k8s.aws"
REQUESTED_DRA_DRIVERS = "karpenter.sh/requested-dra-drivers"


def node_pool(
    name: str,
    requirements: Sequence[Mapping[str, Any]] = (),
    *,
    labels: Mapping[str, str] | None = None,
    node_class: str = "default",
    node_class_group: str = NODE_CLASS_GROUP,
    generation: int = 1,
    taints: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """A NodePool (``spec.template.spec.requirements``, template labels and taints, nodeClassRef)."""
    kind = "EC2NodeClass" if node_class_group == NODE_CLASS_GROUP else "NodeClass"
    template: dict[str, Any] = {
        "spec": {
            "nodeClassRef": {"group": node_class_group, "kind": kind, "name": node_class},
            "requirements": [dict(requirement) for requirement in requirements],
            "expireAfter": "720h",
        }
    }
    if taints:
        template["spec"]["taints"] = [dict(taint) for taint in taints]
    if labels:
        template["metadata"] = {"labels": dict(labels)}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "uid": _uid("nodepool", name), "generation": generation},
        "spec": {"template": template, "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized"}},
        "status": {"conditions": [_karpenter_condition("Ready")]},
    }


def _karpenter_condition(kind: str) -> dict[str, Any]:
    """A status condition as Karpenter writes it (metav1.Condition: every field the CRD requires)."""
    return {
        "type": kind,
        "status": "True",
        "reason": kind,
        "message": "",
        "lastTransitionTime": "2026-11-30T10:00:00Z",
        "observedGeneration": 1,
    }


def ec2_node_class(name: str = "default", *, efa_only: int | None = None) -> dict[str, Any]:
    """An EC2NodeClass; ``efa_only`` pins that many efa-only interfaces beside the primary interface
    (card 0, device 0), as Karpenter's own tests lay them out (karpenter-provider-aws v1.15.2): the
    first on card 0 at device 1 (test/suites/integration/extended_resources_test.go, the EFA e2e),
    then one per card from card 1 at device 0 (pkg/providers/instancetype/suite_test.go, "Network
    Interfaces"); None sets no networkInterfaces. N efa-only interfaces so need N network cards."""
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "role": "KarpenterNodeRole-demo",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
    }
    if efa_only is not None:
        spec["networkInterfaces"] = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}] + [
            {"networkCardIndex": card, "deviceIndex": 0 if card else 1, "interfaceType": "efa-only"}
            for card in range(efa_only)
        ]
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name, "uid": _uid("ec2nodeclass", name)},
        "spec": spec,
    }


def karpenter_instance_id(node_name: str) -> str:
    return f"i-{hashlib.sha256(node_name.encode()).hexdigest()[:17]}"


def node_claim(
    name: str,
    pool: str,
    *,
    node_name: str | None,
    instance_type: str = "p5.48xlarge",
    requests: Mapping[str, str] | None = None,
    efa: int = 0,
    dra_drivers: Sequence[str] = (),
    node_class: str = "default",
    zone: str = "us-west-2a",
) -> dict[str, Any]:
    """A NodeClaim as Karpenter writes it: labelled with its NodePool, the merged requests of the
    pods it was launched for (plus daemon overhead), and once launched ``status.providerID``,
    ``status.capacity`` (``vpc.amazonaws.com/efa`` only when EFA was attached) and, once its node
    registered, ``status.nodeName``."""
    provider_node = node_name or name
    capacity: dict[str, str] = {"cpu": "192", "memory": "2003Gi", "pods": "100", GPU: "8"}
    if efa:
        capacity[EFA] = str(efa)
    annotations = {"karpenter.sh/nodepool-hash": "1234567890", "karpenter.sh/nodepool-hash-version": "v3"}
    if dra_drivers:
        annotations[REQUESTED_DRA_DRIVERS] = ",".join(dra_drivers)
    status: dict[str, Any] = {
        "providerID": f"aws:///{zone}/{karpenter_instance_id(provider_node)}",
        "imageID": "ami-0123456789abcdef0",
        "capacity": capacity,
        "allocatable": {**capacity, "cpu": "191450m"},
        "conditions": [_karpenter_condition("Launched")],
    }
    if node_name is not None:
        status["nodeName"] = node_name
        status["conditions"].append(_karpenter_condition("Registered"))
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "uid": _uid("nodeclaim", name),
            "labels": {
                "karpenter.sh/nodepool": pool,
                "karpenter.k8s.aws/ec2nodeclass": node_class,
                INSTANCE_TYPE: instance_type,
                "karpenter.sh/capacity-type": "on-demand",
                "topology.kubernetes.io/zone": zone,
            },
            "annotations": annotations,
            "finalizers": ["karpenter.sh/termination"],
            "ownerReferences": [
                {
                    "apiVersion": "karpenter.sh/v1",
                    "kind": "NodePool",
                    "name": pool,
                    "uid": _uid("nodepool", pool),
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeClassRef": {"group": NODE_CLASS_GROUP, "kind": "EC2NodeClass", "name": node_class},
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]},
                {"key": INSTANCE_TYPE, "operator": "In", "values": [instance_type]},
            ],
            "resources": {"requests": {"cpu": "8", "memory": "64Gi", "pods": "5", **(requests or {})}},
        },
        "status": status,
    }


def karpenter_labels(instance_type: str, pool: str, catalog_labels: Mapping[str, str]) -> dict[str, str]:
    """The labels Karpenter puts on a node it launches: the type's well-known labels, the
    NodePool's name and node class, capacity type and zone, registered and initialized."""
    return {
        **catalog_labels,
        "karpenter.sh/nodepool": pool,
        "karpenter.k8s.aws/ec2nodeclass": "default",
        "karpenter.sh/capacity-type": "on-demand",
        "karpenter.sh/registered": "true",
        "karpenter.sh/initialized": "true",
        INSTANCE_TYPE: instance_type,
    }


def karpenter_node(
    name: str,
    pool: str,
    claim: str,
    *,
    instance_type: str = "p5.48xlarge",
    efa: Quantity = 32,
    gpu: Quantity = 8,
    catalog_labels: Mapping[str, str] | None = None,
    ready: bool = True,
    zone: str = "us-west-2a",
) -> dict[str, Any]:
    """A node Karpenter launched for NodeClaim ``claim`` of NodePool ``pool``: its pool key is
    karpenter.sh/nodepool, its providerID the NodeClaim's, and it is owned by the NodeClaim."""
    body = node(
        name,
        pool=pool,
        pool_key=KARPENTER,
        instance_type=instance_type,
        efa=efa,
        gpu=gpu,
        labels=karpenter_labels(instance_type, pool, catalog_labels or {}),
        provider_id=f"aws:///{zone}/{karpenter_instance_id(name)}",
        ready=ready,
    )
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "name": claim,
            "uid": _uid("nodeclaim", claim),
            "blockOwnerDeletion": True,
        }
    ]
    body["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    return body
