"""The FabricCapability resource: its names, status models and condition helpers."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

GROUP = "fabriccap.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "FabricCapability"
PLURAL = "fabriccapabilities"
FABRIC_LABEL = f"{GROUP}/fabric"
POOL_LABEL = f"{GROUP}/pool"
# "true" on FabricCapabilities whose Ready condition is True: what the admission policy selects
# its params by (a label selector cannot read a status).
READY_LABEL = f"{GROUP}/ready"
# Marks the objects this operator created; it never deletes a FabricCapability without it.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "fabriccap"
POOL_KEY_ANNOTATION = f"{GROUP}/pool-key"
POOL_VALUE_ANNOTATION = f"{GROUP}/pool-value"


class ConditionType(StrEnum):
    DEVICE_PLUGIN_READY = "DevicePluginReady"
    ADVERTISED = "Advertised"
    HOMOGENEOUS = "Homogeneous"
    MATCHES_INSTANCE_TYPE = "MatchesInstanceType"
    READY = "Ready"
    STALLED = "Stalled"


CONDITION_ORDER: tuple[ConditionType, ...] = tuple(ConditionType)


class _ApiModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Condition(_ApiModel):
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str
    last_transition_time: str | None = Field(default=None, alias="lastTransitionTime")
    observed_generation: int | None = Field(default=None, alias="observedGeneration")


class PoolRef(_ApiModel):
    key: str
    value: str


class CountBucket(_ApiModel):
    count: int
    nodes: int


class InstanceTypeCount(_ApiModel):
    name: str
    nodes: int
    max_count: int | None = Field(default=None, alias="maxCount")


class DevicePluginStatus(_ApiModel):
    daemon_sets: list[str] = Field(alias="daemonSets")
    ready_nodes: int = Field(alias="readyNodes")


class GapStatus(_ApiModel):
    plugin_ready_not_advertised: int = Field(alias="pluginReadyNotAdvertised")
    unhealthy: int
    advertised_without_plugin: int = Field(alias="advertisedWithoutPlugin")
    nodes: list[str]
    truncated: bool


class EnvVarValue(_ApiModel):
    name: str
    value: str


class ExactDeviceRequest(_ApiModel):
    """resource.k8s.io/v1 ExactDeviceRequest, the fields a recommendation sets."""

    device_class_name: str = Field(alias="deviceClassName")
    allocation_mode: str = Field(alias="allocationMode")  # "ExactCount"
    count: int


class DeviceRequest(_ApiModel):
    name: str
    exactly: ExactDeviceRequest


class DeviceClaim(_ApiModel):
    requests: list[DeviceRequest]


class ResourceClaimSpec(_ApiModel):
    devices: DeviceClaim


class ResourceClaimTemplateSpec(_ApiModel):
    """What goes under a ResourceClaimTemplate's ``spec``: the claim each pod gets."""

    spec: ResourceClaimSpec


class Recommendation(_ApiModel):
    # The extended resource, where a device plugin advertises the fabric.
    resources_per_node: dict[str, str] | None = Field(default=None, alias="resourcesPerNode")
    # A ResourceClaimTemplate's spec, where a DRA driver does.
    resource_claim_template: ResourceClaimTemplateSpec | None = Field(default=None, alias="resourceClaimTemplate")
    env: list[EnvVarValue]


class SourceCount(_ApiModel):
    """How many of the pool's nodes advertise the fabric through one source."""

    source: str  # "devicePlugin" | "dra"
    nodes: int


class WorkloadCount(_ApiModel):
    pods: int
    workloads: int  # distinct top-level owners


class Offender(_ApiModel):
    """A workload on the pool that does not ask for the fabric it could use."""

    namespace: str
    kind: str  # of the top-level owner (TrainJob, JobSet, PyTorchJob, MPIJob, Job, ...), else Pod
    name: str
    pods: int
    problem: str  # "withoutFabric" | "intentWithoutRequest"


class WorkloadsStatus(_ApiModel):
    requesting_fabric: WorkloadCount = Field(alias="requestingFabric")
    without_fabric: WorkloadCount = Field(alias="withoutFabric")
    intent_without_request: WorkloadCount = Field(alias="intentWithoutRequest")
    offenders: list[Offender]


class FabricCapabilityStatus(_ApiModel):
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    fabric: str
    resource_name: str = Field(alias="resourceName")
    pool: PoolRef
    nodes: int
    cordoned_nodes: int = Field(alias="cordonedNodes")
    advertising_nodes: int = Field(alias="advertisingNodes")
    uniform_count: int | None = Field(default=None, alias="uniformCount")
    counts: list[CountBucket]
    instance_types: list[InstanceTypeCount] = Field(alias="instanceTypes")
    device_plugin: DevicePluginStatus = Field(alias="devicePlugin")
    gap: GapStatus
    recommendation: Recommendation | None = None
    sources: list[SourceCount] = Field(default_factory=list)
    workloads: WorkloadsStatus | None = None  # absent when workload reporting is off
    conditions: list[Condition]

    def condition(self, condition_type: ConditionType | str) -> Condition | None:
        return next((c for c in self.conditions if c.type == condition_type), None)

    @property
    def is_ready(self) -> bool:
        ready = self.condition(ConditionType.READY)
        return ready is not None and ready.status == "True"


def find_condition(status: Mapping[str, Any] | None, condition_type: ConditionType | str) -> dict[str, Any] | None:
    """A condition of a raw status dict (as read from the cluster), or None when absent.

    Raw statuses come from objects anyone with RBAC can edit, so entries that are not
    mappings are skipped rather than trusted.
    """
    conditions = (status or {}).get("conditions")
    if not isinstance(conditions, list):
        return None
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == condition_type:
            return dict(condition)
    return None


def condition_status(status: Mapping[str, Any] | None, condition_type: ConditionType | str) -> str | None:
    """The status string of a condition in a raw status dict, or None when absent."""
    condition = find_condition(status, condition_type)
    return None if condition is None else str(condition.get("status"))


def condition_reason(status: Mapping[str, Any] | None, condition_type: ConditionType | str) -> str | None:
    condition = find_condition(status, condition_type)
    return None if condition is None else str(condition.get("reason", ""))


def is_ready_status(status: Mapping[str, Any] | None) -> bool:
    """Whether a raw status says Ready=True: the flip criterion as dashboards and gates read it."""
    return condition_status(status, ConditionType.READY) == "True"
