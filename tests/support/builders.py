"""Evaluating bodies from the test world (``fabriccap_devtools.world``) in unit tests.

The body builders themselves live in the world module, shared with the end-to-end tests and
the benchmarks; they are re-exported here so unit tests import one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fabriccap.core.api import FabricCapabilityStatus
from fabriccap.core.config import Config
from fabriccap.core.evaluate import Evaluation, PoolCapability, evaluate
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.index import FactIndex
from fabriccap.offline.snapshot import add_bodies
from fabriccap_devtools.world import (
    EFA,
    EFA_DS,
    EFA_DS_SELECTOR,
    GPU,
    GPU_PRESENT,
    INSTANCE_TYPE,
    KARPENTER,
    KUBE_SYSTEM,
    NODEGROUP,
    allocated_claim,
    daemon_set,
    device_taint_rule,
    dranet_daemon_set,
    dranet_pods,
    efa_device_class,
    kube_list,
    node,
    plugin_pods,
    pod,
    pod_id_link_device,
    resource_slice,
    workload_pod,
)
from support.configs import default_config

__all__ = [
    "EFA",
    "EFA_DS",
    "EFA_DS_SELECTOR",
    "GPU",
    "GPU_PRESENT",
    "INSTANCE_TYPE",
    "KARPENTER",
    "KUBE_SYSTEM",
    "NODEGROUP",
    "allocated_claim",
    "capability",
    "daemon_set",
    "device_taint_rule",
    "dra_pool",
    "dranet_daemon_set",
    "dranet_pods",
    "efa_device_class",
    "evaluate_bodies",
    "facts_of",
    "healthy_pool",
    "kube_list",
    "message",
    "node",
    "only_status",
    "plugin_pods",
    "pod",
    "pod_id_link_device",
    "reason",
    "resource_slice",
    "workload_pod",
]


def facts_of(bodies: Iterable[Mapping[str, Any]], config: Config | None = None) -> FactIndex:
    config = config or default_config()
    bodies = list(bodies)
    facts = FactIndex()
    facts.configure(config)
    # Karpenter's objects too, through their watched kinds' rows, as the operator reads them.
    add_bodies(facts, FactsExtractor(config), bodies, "test")
    return facts


def evaluate_bodies(bodies: Iterable[Mapping[str, Any]], config: Config | None = None) -> Evaluation:
    config = config or default_config()
    return evaluate(config, facts_of(bodies, config))


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


def dra_pool(count: int = 32, nodes: int = 2, pool: str = "p5", prefix: str = "d") -> list[dict[str, Any]]:
    """Nodes advertising ``count`` EFA devices only in DRANET slices (allocatable has no EFA),
    each with a Ready driver pod, plus the driver's DaemonSet and the DeviceClass its chart
    installs."""
    names = [f"{prefix}{index}" for index in range(1, nodes + 1)]
    return [
        efa_device_class(),
        dranet_daemon_set(),
        *(node(name, pool=pool, efa=None) for name in names),
        *(resource_slice(name, efa=count) for name in names),
        *dranet_pods(names),
    ]
