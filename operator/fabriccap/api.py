"""The FabricCapability resource: names and status models (SPEC.md is the contract)."""

from __future__ import annotations

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


class Recommendation(_ApiModel):
    resources_per_node: dict[str, str] = Field(alias="resourcesPerNode")
    env: list[EnvVarValue]


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
    conditions: list[Condition]

    def condition(self, condition_type: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == condition_type), None)


def condition_status(status: dict[str, Any] | None, condition_type: str) -> str | None:
    """The status string of a condition in a raw status dict, or None when absent."""
    for condition in (status or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == condition_type:
            return str(condition.get("status"))
    return None
