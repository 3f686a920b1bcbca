"""Configuration: fabric profiles, pool label keys, validation.

The file format is the one in SPEC.md (camelCase keys). Built-in profiles are data, so a
user's file only needs to say what differs: ``fabrics: [{name: efa}]`` takes the built-in
EFA profile, and any field given replaces the built-in one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DEFAULT_POOL_LABELS: tuple[str, ...] = (
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "alpha.eksctl.io/nodegroup-name",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "node.kubernetes.io/instance-type",
)

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

# EC2 MaximumEfaInterfaces per instance type (SPEC.md). Types absent here are "unknown".
EFA_INSTANCE_MAXIMA: dict[str, int] = {
    "p4d.24xlarge": 4,
    "p4de.24xlarge": 4,
    "p5.48xlarge": 32,
    "p5e.48xlarge": 32,
    "p5.4xlarge": 1,
    "p5en.48xlarge": 16,
    "p6-b200.48xlarge": 8,
    "p6-b300.48xlarge": 16,
    "p6e-gb200.36xlarge": 16,
    "trn1.32xlarge": 8,
    "trn1n.32xlarge": 16,
    "trn2.48xlarge": 16,
    **{f"g6e.{size}": 0 for size in ("xlarge", "2xlarge", "4xlarge")},
    "g6e.8xlarge": 1,
    "g6e.12xlarge": 1,
    "g6e.16xlarge": 1,
    "g6e.24xlarge": 2,
    "g6e.48xlarge": 4,
    "g7e.2xlarge": 0,
    "g7e.4xlarge": 0,
    "g7e.8xlarge": 1,
    "g7e.12xlarge": 1,
    "g7e.24xlarge": 2,
    "g7e.48xlarge": 4,
    **{
        f"{family}.{size}": maximum
        for family in ("g5", "g6")
        for size, maximum in (
            ("xlarge", 0),
            ("2xlarge", 0),
            ("4xlarge", 0),
            ("8xlarge", 1),
            ("12xlarge", 1),
            ("16xlarge", 1),
            ("24xlarge", 1),
            ("48xlarge", 1),
        )
    },
}

# EFA traffic between P4d/P4de and any other instance type is unsupported: a pool mixing
# them can never carry one job across all its nodes, whatever the counts say.
EFA_ISOLATED_INSTANCE_TYPE_GROUPS: list[list[str]] = [["p4d.24xlarge", "p4de.24xlarge"]]

EFA_RECOMMENDED_ENV: list[dict[str, str]] = [
    {"name": "FI_PROVIDER", "value": "efa"},
    {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"},
    {"name": "NCCL_SOCKET_IFNAME", "value": "^lo,docker"},
]

_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_FABRIC_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ConfigError(ValueError):
    """An invalid configuration; the message names the field and the problem."""


class _Model(BaseModel):
    # Unknown keys are typos more often than not: reject them so the error names them.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _check_label_key(value: str) -> str:
    if not _QUALIFIED_NAME.match(value) or len(value.rsplit("/", 1)[-1]) > 63:
        raise ValueError(f"{value!r} is not a valid label key")
    return value


def _parse_selector(selector: str) -> dict[str, str]:
    """Parse an equality-based label selector (``a=b,c=d``) into a dict."""
    requirements: dict[str, str] = {}
    for term in filter(None, (part.strip() for part in selector.split(","))):
        key, separator, value = term.partition("=")
        if not separator:
            raise ValueError(f"selector term {term!r} is not of the form key=value")
        key = key.rstrip("=").strip()
        requirements[_check_label_key(key)] = value.lstrip("=").strip()
    return requirements


class TargetNodes(_Model):
    gpu_resources: tuple[str, ...] = Field(default=("nvidia.com/gpu",), alias="gpuResources")
    gpu_labels: tuple[str, ...] = Field(default=("nvidia.com/gpu.present=true",), alias="gpuLabels")

    @field_validator("gpu_labels")
    @classmethod
    def _labels_are_pairs(cls, labels: tuple[str, ...]) -> tuple[str, ...]:
        for label in labels:
            _parse_selector(label)
        return labels

    @property
    def gpu_label_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple(pair for label in self.gpu_labels for pair in _parse_selector(label).items())


class DevicePlugin(_Model):
    namespace: str = "kube-system"
    daemon_set_selector: str | None = Field(default=None, alias="daemonSetSelector")
    daemon_set_names: tuple[str, ...] = Field(default=(), alias="daemonSetNames")

    @field_validator("daemon_set_selector")
    @classmethod
    def _selector_parses(cls, selector: str | None) -> str | None:
        if selector is not None:
            _parse_selector(selector)
        return selector

    @property
    def selector_labels(self) -> dict[str, str]:
        return _parse_selector(self.daemon_set_selector) if self.daemon_set_selector else {}


class EnvVar(_Model):
    name: str
    value: str


class FabricProfile(_Model):
    name: str
    enabled: bool = True
    resource: str
    target_nodes: TargetNodes = Field(default_factory=TargetNodes, alias="targetNodes")
    device_plugin: DevicePlugin = Field(default_factory=DevicePlugin, alias="devicePlugin")
    instance_types: dict[str, int] = Field(default_factory=dict, alias="instanceTypes")
    isolated_instance_type_groups: tuple[tuple[str, ...], ...] = Field(default=(), alias="isolatedInstanceTypeGroups")
    recommended_env: tuple[EnvVar, ...] = Field(default=(), alias="recommendedEnv")

    @field_validator("name")
    @classmethod
    def _name_is_dns_label(cls, name: str) -> str:
        if not _FABRIC_NAME.match(name) or len(name) > 20:
            raise ValueError(f"{name!r} must be a lowercase DNS label of at most 20 characters")
        return name

    @field_validator("resource")
    @classmethod
    def _resource_is_qualified(cls, resource: str) -> str:
        return _check_label_key(resource)

    @field_validator("instance_types")
    @classmethod
    def _maxima_not_negative(cls, maxima: dict[str, int]) -> dict[str, int]:
        for instance_type, maximum in maxima.items():
            if maximum < 0:
                raise ValueError(f"maximum for {instance_type!r} is negative ({maximum})")
        return maxima

    @model_validator(mode="after")
    def _plugin_discoverable(self) -> FabricProfile:
        if not self.device_plugin.daemon_set_selector and not self.device_plugin.daemon_set_names:
            raise ValueError("devicePlugin needs daemonSetSelector or daemonSetNames")
        return self

    def isolation_group(self, instance_type: str) -> int | None:
        for index, group in enumerate(self.isolated_instance_type_groups):
            if instance_type in group:
                return index
        return None


BUILTIN_PROFILES: dict[str, dict[str, Any]] = {
    "efa": {
        "name": "efa",
        "enabled": True,
        "resource": "vpc.amazonaws.com/efa",
        "targetNodes": {"gpuResources": ["nvidia.com/gpu"], "gpuLabels": ["nvidia.com/gpu.present=true"]},
        "devicePlugin": {
            "namespace": "kube-system",
            "daemonSetSelector": "app.kubernetes.io/name=aws-efa-k8s-device-plugin",
            "daemonSetNames": ["aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin-daemonset"],
        },
        "instanceTypes": EFA_INSTANCE_MAXIMA,
        "isolatedInstanceTypeGroups": EFA_ISOLATED_INSTANCE_TYPE_GROUPS,
        "recommendedEnv": EFA_RECOMMENDED_ENV,
    },
    "aks-rdma": {
        "name": "aks-rdma",
        "enabled": False,
        "resource": "rdma/hca_shared_devices_a",
        "targetNodes": {"gpuResources": ["nvidia.com/gpu"], "gpuLabels": ["nvidia.com/gpu.present=true"]},
        "devicePlugin": {
            "namespace": "network-operator",
            "daemonSetSelector": "app=rdma-shared-dp",
            "daemonSetNames": ["rdma-shared-dp-ds"],
        },
        "instanceTypes": {},
        "recommendedEnv": [{"name": "NCCL_IB_DISABLE", "value": "0"}],
    },
}


class Config(_Model):
    pool_labels: tuple[str, ...] = Field(default=DEFAULT_POOL_LABELS, alias="poolLabels", min_length=1)
    fabrics: tuple[FabricProfile, ...] = Field(default=())
    pool_grace_period_seconds: float = Field(default=600.0, alias="poolGracePeriodSeconds", ge=0)
    debounce_seconds: float = Field(default=0.2, alias="debounceSeconds", ge=0, le=60)
    # A full re-evaluation this often even when nothing changed: a safety net for a missed
    # watch event, and the heartbeat behind fabriccap_last_evaluation_timestamp_seconds
    # (the FabricCapabilityStale alert assumes it is at most 5 minutes).
    resync_seconds: float = Field(default=300.0, alias="resyncSeconds", gt=0)
    # How long the first evaluation may wait for the initial listing to arrive.
    startup_timeout_seconds: float = Field(default=120.0, alias="startupTimeoutSeconds", gt=0)

    @field_validator("pool_labels")
    @classmethod
    def _pool_labels_valid(cls, keys: tuple[str, ...]) -> tuple[str, ...]:
        for key in keys:
            _check_label_key(key)
        if len(set(keys)) != len(keys):
            raise ValueError("pool label keys must be unique")
        return keys

    @field_validator("fabrics")
    @classmethod
    def _fabric_names_unique(cls, fabrics: tuple[FabricProfile, ...]) -> tuple[FabricProfile, ...]:
        # A field validator, so the error's location names the field (``fabrics``).
        names = [fabric.name for fabric in fabrics]
        if len(set(names)) != len(names):
            raise ValueError(f"fabric names must be unique, got {names}")
        return fabrics

    @property
    def enabled_fabrics(self) -> tuple[FabricProfile, ...]:
        return tuple(fabric for fabric in self.fabrics if fabric.enabled)

    @property
    def plugin_namespaces(self) -> tuple[str, ...]:
        return tuple(sorted({fabric.device_plugin.namespace for fabric in self.enabled_fabrics}))


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; anything else (lists included) in ``override`` replaces."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _merge_with_builtin(raw_fabric: Any) -> Any:
    """A fabric entry named like a built-in profile starts from it; given fields replace.

    Listing a built-in profile means wanting it, so it is enabled unless the entry says
    otherwise (the built-in ``aks-rdma`` is off only while it is not listed).
    """
    if isinstance(raw_fabric, Mapping) and raw_fabric.get("name") in BUILTIN_PROFILES:
        return _deep_merge({**BUILTIN_PROFILES[str(raw_fabric["name"])], "enabled": True}, raw_fabric)
    return raw_fabric


def _format_validation_error(error: ValidationError, source: str) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "(top level)"
    message = first["msg"].removeprefix("Value error, ")
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{source}: invalid config at {location}: {message}{more}"


def build_config(raw: Any, source: str = "config") -> Config:
    """Validate a parsed config document; raise ConfigError naming the bad field."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: config must be a mapping, got {type(raw).__name__}")
    document = dict(raw)
    if "fabrics" in document:
        fabrics = document["fabrics"]
        if not isinstance(fabrics, list):
            raise ConfigError(f"{source}: invalid config at fabrics: must be a list")
        document["fabrics"] = [_merge_with_builtin(fabric) for fabric in fabrics]
    else:
        document["fabrics"] = list(BUILTIN_PROFILES.values())
    try:
        return Config.model_validate(document)
    except ValidationError as error:
        raise ConfigError(_format_validation_error(error, source)) from None


def default_config() -> Config:
    return build_config({})


def load_config(path: str | Path | None) -> Config:
    """Load and validate a config file; None means the built-in defaults."""
    if path is None:
        return default_config()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read config: {error.strerror or error}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: config is not valid YAML{where}") from None
    return build_config(raw, source=str(path))
