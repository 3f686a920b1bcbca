"""Small builders for realistic Kubernetes bodies (what ``kubectl get -o json`` prints).

Bodies carry the noise a real cluster has (cpu, memory, conditions, nodeInfo, other
labels, owner UIDs) so the tests also prove the code ignores it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fabriccap.api import FabricCapabilityStatus
from fabriccap.config import Config, default_config
from fabriccap.evaluate import Evaluation, PoolCapability, evaluate
from fabriccap.facts import FactsExtractor
from fabriccap.snapshot import FactSet, add_bodies

EFA = "vpc.amazonaws.com/efa"
GPU = "nvidia.com/gpu"
NODEGROUP = "eks.amazonaws.com/nodegroup"
KARPENTER = "karpenter.sh/nodepool"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
GPU_PRESENT = "nvidia.com/gpu.present"
EFA_DS = "aws-efa-k8s-device-plugin"
EFA_DS_SELECTOR = {"app.kubernetes.io/name": "aws-efa-k8s-device-plugin"}
KUBE_SYSTEM = "kube-system"

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
) -> dict[str, Any]:
    """A Node. ``efa``/``gpu`` are allocatable (None: resource absent); capacity follows
    allocatable unless ``efa_capacity`` says otherwise."""
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

    spec: dict[str, Any] = {"providerID": f"aws:///us-west-2a/i-{_uid(name)[:17].replace('-', '')}"}
    if cordoned:
        spec["unschedulable"] = True
        spec["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    return {
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
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.1.5"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.31.2-eks-7f9249a", "containerRuntimeVersion": "containerd://1.7.22"},
            "images": [{"names": ["602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.5"], "sizeBytes": 299}],
        },
    }


def daemon_set(
    name: str = EFA_DS,
    *,
    namespace: str = KUBE_SYSTEM,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A DaemonSet; by default the EFA chart's, labelled like the chart labels it."""
    ds_labels = dict(EFA_DS_SELECTOR) if labels is None else dict(labels)
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
            "template": {"metadata": {"labels": {"name": name}}, "spec": {"containers": [{"name": name}]}},
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
    spec: dict[str, Any] = {"containers": [{"name": "plugin", "image": "efa-k8s-device-plugin:v0.5.6"}]}
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


def plugin_pods(node_names: Iterable[str], **kwargs: Any) -> list[dict[str, Any]]:
    return [pod(name, **kwargs) for name in node_names]


def kube_list(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A ``v1 List`` as ``kubectl get nodes,pods,daemonsets -A -o json`` prints it."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(items)}


def facts_of(bodies: Iterable[Mapping[str, Any]], config: Config | None = None) -> FactSet:
    facts = FactSet()
    add_bodies(facts, FactsExtractor(config or default_config()), bodies, "test")
    return facts


def evaluate_bodies(bodies: Iterable[Mapping[str, Any]], config: Config | None = None) -> Evaluation:
    config = config or default_config()
    facts = facts_of(bodies, config)
    return evaluate(config, facts.nodes.values(), facts.pods.values(), facts.daemon_sets.values())


def capability(evaluation: Evaluation, name: str) -> PoolCapability:
    matches = [cap for cap in evaluation.capabilities if cap.name == name]
    assert len(matches) == 1, f"expected one {name}, got {[cap.name for cap in evaluation.capabilities]}"
    return matches[0]


def only_status(bodies: Iterable[Mapping[str, Any]], config: Config | None = None) -> FabricCapabilityStatus:
    """The status of the single FabricCapability the bodies produce."""
    evaluation = evaluate_bodies(bodies, config)
    assert len(evaluation.capabilities) == 1, [cap.name for cap in evaluation.capabilities]
    return evaluation.capabilities[0].status


def reason(status: FabricCapabilityStatus, condition_type: str) -> tuple[str, str]:
    """(status, reason) of a condition."""
    condition = status.condition(condition_type)
    assert condition is not None, f"no {condition_type} condition"
    return condition.status, condition.reason


def message(status: FabricCapabilityStatus, condition_type: str) -> str:
    condition = status.condition(condition_type)
    assert condition is not None, f"no {condition_type} condition"
    return condition.message


def healthy_pool(count: int = 32, nodes: int = 2, pool: str = "p5", prefix: str = "n") -> list[dict[str, Any]]:
    """Nodes all advertising ``count``, each with a Ready plugin pod, plus the DaemonSet."""
    names = [f"{prefix}{index}" for index in range(1, nodes + 1)]
    return [daemon_set(), *(node(name, pool=pool, efa=count) for name in names), *plugin_pods(names)]
