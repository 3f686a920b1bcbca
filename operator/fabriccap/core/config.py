"""Configuration: fabric profiles, pool label keys, validation.

The file format is the one documented in docs/reference/configuration.md (camelCase keys).
Built-in profiles are data, so a user's file only needs to say what differs:
``fabrics: [{name: efa}]`` takes the built-in EFA profile, and any field given replaces the
built-in one (mappings merge key by key).

Everything the operator cannot use is refused here, with the field named: a selector value
that is not a label value, a namespace that is not a DNS label, a DaemonSet name that is not
a DNS subdomain, a config that enables no fabric, duplicate YAML keys. Accepting such a file
would start an operator that silently watches nothing.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from itertools import pairwise
from typing import Any, Literal, NamedTuple

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from fabriccap.core.catalog import InstanceCatalog, InstanceType
from fabriccap.core.cel import DEVICE_SELECTORS_MAX_SIZE, CompileError, compile_selector
from fabriccap.core.documents import RefusedDocumentError, UniqueKeyLoader, load_yaml_document
from fabriccap.core.quantity import QUANTITY_PATTERN, parse_quantity, shown_value
from fabriccap.core.text import clean_text
from fabriccap.core.upstream import AWS_DRANET_DEVICE_CLASS

DEFAULT_POOL_LABELS: tuple[str, ...] = (
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "alpha.eksctl.io/nodegroup-name",
    # SageMaker HyperPod: one pool per instance group (its nodes carry no other key of this list).
    "sagemaker.amazonaws.com/instance-group-name",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "karpenter.sh/provisioner-name",  # Karpenter before v1 (Provisioner objects)
    "node.kubernetes.io/instance-type",
)

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# SageMaker HyperPod names its EKS nodes' instance types with this prefix (ml.p5.48xlarge).
HYPERPOD_INSTANCE_PREFIX = "ml."


# EFA traffic between P4d/P4de and any other instance type is unsupported: a pool mixing
# them can never carry one job across all its nodes, whatever the counts say.
EFA_ISOLATED_INSTANCE_TYPE_GROUPS: list[list[str]] = [["p4d.24xlarge", "p4de.24xlarge"]]

EFA_RECOMMENDED_ENV: list[dict[str, str]] = [
    {"name": "FI_PROVIDER", "value": "efa"},
    {"name": "FI_EFA_USE_DEVICE_RDMA", "value": "1"},
    {"name": "NCCL_SOCKET_IFNAME", "value": "^lo,docker"},
]

# Accelerators whose nodes are a fabric's targets: NVIDIA GPUs, and AWS Trainium/Inferentia
# (the Neuron device plugin advertises one of the three neuron resources).
DEFAULT_ACCELERATOR_RESOURCES: tuple[str, ...] = (
    "nvidia.com/gpu",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "aws.amazon.com/neurondevice",
)
DEFAULT_ACCELERATOR_LABELS: tuple[str, ...] = ("nvidia.com/gpu.present=true",)

# A label key's name (and a label value): at most 63 characters, bounded in the pattern itself
# so the JSON Schema (config_input_schema) refuses a longer one as the models do.
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
# A label key's optional prefix, a DNS subdomain; its length (253) no regex without lookahead
# can bound, so _check_label_key and the schema's allOf (_LABEL_KEY_LENGTHS) check it apart.
_LABEL_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL_KEY = rf"({_LABEL_PREFIX}/)?{_LABEL_NAME}"
_LABEL_KEY_LENGTHS = r"^([^/]{1,253}/)?[^/]{1,63}$"
_QUALIFIED_NAME = re.compile(rf"^{_LABEL_KEY}$")
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
# An equality selector as _parse_selector reads it: comma-separated key=value (or key==value)
# terms, blank terms skipped. ASCII whitespace only (JSON Schema's \s), where str.strip takes
# any: the schema is the stricter of the two.
_SELECTOR_PART = rf"\s*({_LABEL_KEY}\s*==?\s*({_LABEL_NAME})?)?\s*"
_SELECTOR = rf"^{_SELECTOR_PART}(,{_SELECTOR_PART})*$"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_FABRIC_NAME = _DNS_LABEL


class ConfigError(ValueError):
    """An invalid configuration; the message names the field and the problem."""


class _Model(BaseModel):
    # Unknown keys are typos more often than not: reject them so the error names them.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _read_old_names(cls, document: Any) -> Any:
        """Old field names (OLD_FIELD_NAMES) are read as the new ones; both at once is a
        contradiction, so an error."""
        renames = [rename for rename in OLD_FIELD_NAMES if rename.model is cls]
        if not renames or not isinstance(document, Mapping):
            return document
        result = dict(document)
        for rename in renames:
            if rename.old in result:
                if rename.new in result:
                    raise ValueError(f"give {rename.new} or its old name {rename.old}, not both")
                value = result.pop(rename.old)
                if rename.single_item and isinstance(value, list | tuple | Mapping):
                    # Wrapped as one item, a list was reported at ``{new}.0``, a field the user
                    # did not write, for an item that was valid (review 66d F7).
                    raise ValueError(
                        f"{rename.old} takes one value (the old form of {rename.new}); for several, give {rename.new}"
                    )
                result[rename.new] = [value] if rename.single_item else value
        return result


def _check_label_key(value: str) -> str:
    prefix, _, name = value.rpartition("/")
    if not _QUALIFIED_NAME.match(value) or len(name) > 63 or len(prefix) > 253:
        raise ValueError(f"{value!r} is not a valid label key")
    return value


def _check_label_value(key: str, value: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ValueError(f"{value!r} (for {key}) is not a valid label value")
    return value


def _check_dns_label(value: str, what: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(f"{what} {value!r} is not a DNS label (lowercase letters, digits, '-'; at most 63)")
    return value


def _check_dns_subdomain(value: str, what: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(f"{what} {value!r} is not a valid object name (a lowercase DNS subdomain)")
    return value


def _parse_selector(selector: str) -> dict[str, str]:
    """Parse an equality-based label selector (``a=b,c=d``, ``==`` allowed) into a dict."""
    requirements: dict[str, str] = {}
    for term in filter(None, (part.strip() for part in selector.split(","))):
        key, separator, value = term.partition("=")
        if not separator:
            raise ValueError(f"selector term {term!r} is not of the form key=value")
        key, value = key.strip(), value.removeprefix("=").strip()
        requirements[_check_label_key(key)] = _check_label_value(key, value)
    return requirements


class TargetNodes(_Model):
    """Which nodes are the fabric's targets besides those that advertise it, run its device
    plugin, or are of an instance type that can carry it: accelerator nodes."""

    accelerator_resources: tuple[str, ...] = Field(
        default=DEFAULT_ACCELERATOR_RESOURCES,
        alias="acceleratorResources",
        description="Extended resources that make a node an accelerator node, and so a target, when its"
        " allocatable of one is above 0.",
    )
    accelerator_labels: tuple[str, ...] = Field(
        default=DEFAULT_ACCELERATOR_LABELS,
        alias="acceleratorLabels",
        description="Node labels (key=value) that make a node an accelerator node, and so a target.",
    )
    provider_id_prefixes: tuple[str, ...] = Field(
        default=(),
        alias="providerIDPrefixes",
        description="A node whose spec.providerID is set and starts with none of these is never a target"
        " (the GPU pools of a GKE cluster are not EFA pools); empty: any provider. Nodes without a"
        " providerID are judged by the other rules alone.",
    )

    @field_validator("accelerator_resources")
    @classmethod
    def _resources_are_names(cls, resources: tuple[str, ...]) -> tuple[str, ...]:
        for resource in resources:
            _check_label_key(resource)
        return resources

    @field_validator("provider_id_prefixes")
    @classmethod
    def _prefixes_name_a_scheme(cls, prefixes: tuple[str, ...]) -> tuple[str, ...]:
        for prefix in prefixes:
            if not re.fullmatch(r"[a-z][a-z0-9+.-]{0,30}://", prefix):
                raise ValueError(f"provider ID prefix {prefix!r} is not of the form <scheme>:// (aws://, azure://)")
        return prefixes

    def provider_matches(self, provider_id: str | None) -> bool:
        """Whether a node with this providerID may be a target (no providerID: it may)."""
        return not provider_id or not self.provider_id_prefixes or provider_id.startswith(self.provider_id_prefixes)

    @field_validator("accelerator_labels")
    @classmethod
    def _labels_are_pairs(cls, labels: tuple[str, ...]) -> tuple[str, ...]:
        for label in labels:
            _parse_selector(label)
        return labels

    @property
    def accelerator_label_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple(pair for label in self.accelerator_labels for pair in _parse_selector(label).items())


class _DaemonSetFinder(_Model):
    """How the DaemonSets that advertise a fabric are recognised: by label selectors (matched
    against the DaemonSet's labels or its pod template's) or by name."""

    daemon_set_selector: str | tuple[str, ...] | None = Field(
        default=None,
        alias="daemonSetSelector",
        description="An equality label selector (a=b,c=d), or a list of them (any one), matched against each"
        " DaemonSet's own labels and against its pod template's labels.",
    )
    daemon_set_names: tuple[str, ...] = Field(
        default=(),
        alias="daemonSetNames",
        description="DaemonSet names that are taken whatever their labels.",
    )

    @field_validator("daemon_set_selector")
    @classmethod
    def _selector_parses(cls, selector: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        for text in (selector,) if isinstance(selector, str) else selector or ():
            _parse_selector(text)
        return selector

    @field_validator("daemon_set_names")
    @classmethod
    def _names_are_object_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            _check_dns_subdomain(name, "DaemonSet name")
        return names

    @property
    def selectors(self) -> tuple[str, ...]:
        """The selectors given, one or several (any one matches)."""
        selector = self.daemon_set_selector
        return (selector,) if isinstance(selector, str) else selector or ()

    @property
    def selector_label_sets(self) -> list[dict[str, str]]:
        """Each selector as the labels it requires; empty selectors (which would match every
        DaemonSet) are left out."""
        return [labels for labels in map(_parse_selector, self.selectors) if labels]

    def describe(self) -> str:
        """How the DaemonSets are looked for, for messages: ``selector a=b or names x, y``."""
        parts = []
        if self.selectors:
            parts.append(f"selector {' or '.join(self.selectors)}")
        if self.daemon_set_names:
            parts.append(f"names {', '.join(self.daemon_set_names)}")
        return " or ".join(parts)


class DevicePlugin(_DaemonSetFinder):
    """The fabric's device-plugin DaemonSets; their namespaces are searched for the DRA driver's too."""

    platform_managed_node_labels: tuple[str, ...] = Field(
        default=(),
        alias="platformManagedNodeLabels",
        description="Node labels (key=value) of nodes whose devices the platform itself advertises, with no"
        " DaemonSet a user can see (EKS Auto Mode: eks.amazonaws.com/compute-type=auto). Such a node needs no"
        " plugin pod; status.sources counts it under `platform`.",
    )

    @field_validator("platform_managed_node_labels")
    @classmethod
    def _platform_labels_are_pairs(cls, labels: tuple[str, ...]) -> tuple[str, ...]:
        for label in labels:
            _parse_selector(label)
        return labels

    @functools.cached_property
    def platform_label_pairs(self) -> tuple[tuple[str, str], ...]:
        # Asked for every node of every pool a round evaluates: parsed once per config.
        return tuple(pair for label in self.platform_managed_node_labels for pair in _parse_selector(label).items())

    namespaces: tuple[str, ...] = Field(
        default=("kube-system",),
        min_length=1,
        description="Namespaces searched for the device plugin's and the DRA driver's DaemonSets and their"
        " pods. `namespace: X` is read as `[X]`.",
    )

    @field_validator("namespaces")
    @classmethod
    def _namespaces_are_dns_labels(cls, namespaces: tuple[str, ...]) -> tuple[str, ...]:
        for namespace in namespaces:
            _check_dns_label(namespace, "namespace")
        if len(set(namespaces)) != len(namespaces):
            raise ValueError(f"namespaces must be unique, got {list(namespaces)}")
        return namespaces


class OldFieldName(NamedTuple):
    """A field name the config still reads, of a field a later release renamed."""

    model: type[_Model]
    old: str
    new: str
    # The old field held one item of the new one's list (`namespace: X` is `namespaces: [X]`).
    single_item: bool = False


class Source(StrEnum):
    """Where a fabric's devices are advertised."""

    DEVICE_PLUGIN = "devicePlugin"  # node status.allocatable / capacity, from a device plugin
    DRA = "dra"  # resource.k8s.io/v1 ResourceSlices, from a DRA driver (Kubernetes >= 1.34)
    # Node allocatable on nodes the platform manages (EKS Auto Mode): no DaemonSet to find.
    # Never configured in `sources`: devicePlugin.platformManagedNodeLabels says which nodes.
    PLATFORM = "platform"


AttributeValue = StrictBool | StrictInt | StrictStr


class _KubernetesModel(_Model):
    """Part of a Kubernetes object pasted into the config: fields fabriccap does not read
    (labels, managedFields, a class's config) are allowed and ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class CelSelector(_KubernetesModel):
    expression: str = Field(description="A CEL expression over `device`, as in a DeviceClass.")


class DeviceSelector(_KubernetesModel):
    cel: CelSelector = Field(
        description="The selector's CEL expression (the only kind of selector in resource.k8s.io/v1)."
    )


class DeviceClassSpec(_KubernetesModel):
    selectors: tuple[DeviceSelector, ...] = Field(
        default=(),
        max_length=DEVICE_SELECTORS_MAX_SIZE,
        description="Every selector must hold for a device to be the class's (none: every device).",
    )
    extended_resource_name: str | None = Field(
        default=None,
        alias="extendedResourceName",
        description="KEP-5004: the extended resource the class serves. Read from the cluster's class only (the"
        " scheduler maps nothing from a copy).",
    )


class ObjectMeta(_KubernetesModel):
    name: str = Field(description="The class's name, as in dra.deviceClassNames.")
    labels: dict[str, str] = Field(default_factory=dict, description="Kept as given; not read.")


class DeviceClassCopy(_KubernetesModel):
    """A DeviceClass as the API serves it (``kubectl get deviceclass NAME -o yaml``): the copy a
    profile uses while the cluster lacks a class it names."""

    api_version: Literal["resource.k8s.io/v1"] = Field(
        default="resource.k8s.io/v1", alias="apiVersion", description="resource.k8s.io/v1, as the API serves it."
    )
    kind: Literal["DeviceClass"] = Field(default="DeviceClass", description="DeviceClass.")
    metadata: ObjectMeta = Field(description="The class's name (and labels, not read).")
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec, description="The class's selectors.")

    @field_validator("metadata")
    @classmethod
    def _named_like_an_object(cls, metadata: ObjectMeta) -> ObjectMeta:
        _check_dns_subdomain(metadata.name, "DeviceClass name")
        return metadata

    @model_validator(mode="after")
    def _selectors_compile(self) -> DeviceClassCopy:
        # A copy that could not select anything would fail closed on every node of the fabric,
        # silently: refuse the file instead, naming the class and the selector.
        for position, selector in enumerate(self.spec.selectors):
            try:
                compile_selector(selector.cel.expression)
            except CompileError as error:
                raise ValueError(f"DeviceClass {self.metadata.name}: selector #{position}: {error}") from None
        return self

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def expressions(self) -> tuple[str, ...]:
        return tuple(selector.cel.expression for selector in self.spec.selectors)

    @property
    def origin(self) -> str:
        """Where the copy comes from, for messages: the chart that installs it, if it says."""
        chart = self.metadata.labels.get("helm.sh/chart")
        return f"the {chart} chart's" if chart else "the configured"


def _cel_literal(value: AttributeValue) -> str:
    """``value`` as a CEL literal: JSON's string escapes are CEL's, and so are its numbers."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


class DraSettings(_DaemonSetFinder):
    """How a fabric's devices are selected from ResourceSlices, and how its DRA driver is deployed."""

    device_class_names: tuple[str, ...] = Field(
        default=(),
        alias="deviceClassNames",
        description="The DeviceClasses whose CEL selectors pick the fabric's devices from ResourceSlices. The first"
        " is the one status.recommendation.resourceClaimTemplate names, and a device counts when it selects it"
        " (what a claim of that class can be allocated); a node whose devices only the others select is a target"
        " node without devices. `deviceClassName: X` is read as `[X]`.",
    )
    device_classes: tuple[DeviceClassCopy, ...] = Field(
        default=(),
        alias="deviceClasses",
        description="Copies of DeviceClasses, as the API serves them, used while the cluster lacks a class of"
        " deviceClassNames (the status then says so). Built in for efa: the aws-dranet chart's"
        " efa.networking.k8s.aws.",
    )
    drivers: tuple[str, ...] = Field(
        default=(),
        description="The old form, with attributes: DRA driver names (spec.driver) whose devices the attributes"
        " select.",
    )
    # Qualified attribute name -> the value a device of the fabric has; every entry must match.
    attributes: dict[str, AttributeValue] = Field(
        default_factory=dict,
        description="The old form: device attributes (qualified name: value) a device of one of `drivers` must"
        " have, every one, to count; a name without a domain is in the driver's. Read as a selector that stands"
        " in for a class of deviceClassNames that neither the cluster nor deviceClasses has. Replaces the"
        " built-in mapping instead of merging with it.",
    )

    @field_validator("drivers")
    @classmethod
    def _drivers_are_names(cls, drivers: tuple[str, ...]) -> tuple[str, ...]:
        for driver in drivers:
            _check_dns_subdomain(driver, "DRA driver")
        return drivers

    @field_validator("attributes")
    @classmethod
    def _attributes_are_qualified(cls, attributes: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
        for name in attributes:
            domain, slash, identifier = name.partition("/")
            if not slash or not _DNS_SUBDOMAIN.match(domain) or not re.fullmatch(r"[A-Za-z0-9_]{1,32}", identifier):
                raise ValueError(f"attribute {name!r} is not a qualified name (domain/identifier)")
        return attributes

    @field_validator("device_class_names")
    @classmethod
    def _classes_are_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            _check_dns_subdomain(name, "DeviceClass name")
        if len(set(names)) != len(names):
            raise ValueError(f"deviceClassNames must be unique, got {list(names)}")
        return names

    @field_validator("device_classes")
    @classmethod
    def _copies_are_unique(cls, copies: tuple[DeviceClassCopy, ...]) -> tuple[DeviceClassCopy, ...]:
        names = [copy.name for copy in copies]
        if len(set(names)) != len(names):
            raise ValueError(f"deviceClasses names a class twice: {names}")
        return copies

    @model_validator(mode="after")
    def _attributes_need_drivers(self) -> DraSettings:
        if self.attributes and not self.drivers:
            raise ValueError("attributes select devices of drivers: give drivers too")
        return self

    @property
    def device_class_name(self) -> str | None:
        """The class a workload's ResourceClaim should name: the first of deviceClassNames."""
        return self.device_class_names[0] if self.device_class_names else None

    def copy_of(self, name: str) -> DeviceClassCopy | None:
        return next((copy for copy in self.device_classes if copy.name == name), None)

    @property
    def attribute_selector(self) -> str | None:
        """The old form as a CEL selector (None when no attributes are given): a device of one
        of the drivers that has every attribute, of the value's type, with that value. ``has()``
        keeps a device without the attribute from erroring: the old form did not match it."""
        if not self.attributes:
            return None
        drivers = ", ".join(_cel_literal(driver) for driver in self.drivers)
        terms = [f"device.driver in [{drivers}]"]
        for name, value in sorted(self.attributes.items()):
            domain, _, identifier = name.partition("/")
            read = f"device.attributes[{_cel_literal(domain)}].{identifier}"
            kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
            terms.append(f"has({read}) && type({read}) == {kind} && {read} == {_cel_literal(value)}")
        return " && ".join(terms)


# Kubernetes' rule for a container's environment variable name (apimachinery's
# IsRelaxedEnvVarName, the only rule since RelaxedEnvironmentVariableValidation went GA):
# not empty, printable ASCII (the space included) other than "=".
_ENV_VAR_NAME = re.compile(r"[ -<>-~]+")


class EnvVar(_Model):
    name: str = Field(
        json_schema_extra={"pattern": f"^{_ENV_VAR_NAME.pattern}$", "minLength": 1},
        description="The environment variable's name, as Kubernetes allows one in a container: printable"
        ' ASCII other than "=".',
    )
    value: str = Field(description="Its value.")

    @field_validator("name")
    @classmethod
    def _a_name_a_container_can_have(cls, name: str) -> str:
        # A name no container can have is a recommendation nobody can follow; an empty one was
        # also a mark every pod's text holds, so no pod was left undecoded (kube.unread).
        if not _ENV_VAR_NAME.fullmatch(name):  # not match and $: "$" also matches before a final newline
            raise ValueError(
                f"{shown_value(name)} is not an environment variable name: it must be printable ASCII other"
                ' than "=", and not empty'
            )
        return name


# Every old field name the config reads, in one place: the models' validator
# (``_Model._read_old_names``), the merge onto a built-in profile (``_merge_renames``), the
# JSON Schema (``config_input_schema``: the chart's values.schema.json too) and the reference
# (docs/reference/configuration.md) all read this table.
OLD_FIELD_NAMES: tuple[OldFieldName, ...] = (
    OldFieldName(TargetNodes, "gpuResources", "acceleratorResources"),
    OldFieldName(TargetNodes, "gpuLabels", "acceleratorLabels"),
    OldFieldName(DevicePlugin, "namespace", "namespaces", single_item=True),
    OldFieldName(DraSettings, "deviceClassName", "deviceClassNames", single_item=True),
)


class FabricProfile(_Model):
    """One fabric: its resource, where its devices are advertised, which nodes are its targets."""

    name: str = Field(
        description="The fabric's name (a DNS label of at most 20 characters): the first part of each"
        " FabricCapability's name and the value of its fabriccap.dev/fabric label."
    )
    enabled: StrictBool = Field(default=True, description="Whether the fabric is evaluated and published.")
    display_name: str | None = Field(
        default=None,
        alias="displayName",
        min_length=1,
        max_length=40,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description='How messages name the fabric, as in "EFA traffic between p4d.24xlarge and p5.48xlarge is'
        " unsupported\"; the fabric's name when unset.",
    )
    resource: str = Field(
        description="The extended resource the device plugin advertises in node allocatable, e.g."
        " vpc.amazonaws.com/efa."
    )
    target_nodes: TargetNodes = Field(default_factory=TargetNodes, alias="targetNodes")
    device_plugin: DevicePlugin = Field(default_factory=DevicePlugin, alias="devicePlugin")
    instance_types: dict[str, int] = Field(
        default_factory=dict,
        alias="instanceTypes",
        description="Maximum count per instance type (node.kubernetes.io/instance-type, a leading ml."
        " stripped), overriding or extending the generated instance catalog: a type above 0 makes its nodes"
        " targets, every node at 0 stalls the pool, MatchesInstanceType compares against it, and a NodePool"
        " that may launch the type is judged with it.",
    )
    isolated_instance_type_groups: tuple[tuple[str, ...], ...] = Field(
        default=(),
        alias="isolatedInstanceTypeGroups",
        description="Groups of instance types whose fabric traffic cannot cross to types outside the group:"
        " a pool mixing a group's type with another type is never uniform.",
    )
    recommended_env: tuple[EnvVar, ...] = Field(
        default=(),
        alias="recommendedEnv",
        description="Environment variables status.recommendation.env tells workloads to set.",
    )
    # The resource counts how many pods may share the node's devices (the RDMA shared device
    # plugin's rdmaHcaMax), not devices: uniformity is judged the same, a workload asks for 1.
    shared: StrictBool = Field(
        default=False,
        description="The resource counts pods that may share the node's devices, not devices: the"
        " recommendation asks for 1.",
    )
    sources: tuple[Source, ...] = Field(
        default=(Source.DEVICE_PLUGIN,),
        min_length=1,
        description="Where the fabric's devices are advertised: devicePlugin (node allocatable), dra"
        " (resource.k8s.io/v1 ResourceSlices), or both; a node advertising through both counts the larger and"
        " is an advertiser conflict (Ready False AdvertiserConflict).",
    )
    dra: DraSettings = Field(default_factory=DraSettings)
    # The catalog of ``resource``, attached after validation by ``Config.with_catalogs``: data
    # read from a file, never a field of the config a user writes.
    _catalog: InstanceCatalog | None = PrivateAttr(default=None)

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

    @field_validator("sources")
    @classmethod
    def _sources_unique(cls, sources: tuple[Source, ...]) -> tuple[Source, ...]:
        if len(set(sources)) != len(sources):
            raise ValueError(f"sources must be unique, got {[source.value for source in sources]}")
        if Source.PLATFORM in sources:
            raise ValueError("platform is not a source to list: devicePlugin.platformManagedNodeLabels names its nodes")
        return sources

    @model_validator(mode="after")
    def _plugin_discoverable(self) -> FabricProfile:
        if not self.device_plugin.daemon_set_selector and not self.device_plugin.daemon_set_names:
            raise ValueError("devicePlugin needs daemonSetSelector or daemonSetNames")
        if Source.DRA in self.sources and not self.dra.device_class_names:
            raise ValueError(
                "sources includes dra: dra.deviceClassNames must name at least one DeviceClass (its selectors"
                " pick the devices, and workloads claim it)"
            )
        return self

    def uses(self, source: Source) -> bool:
        return source in self.sources

    @property
    def spoken_name(self) -> str:
        """The fabric as messages name it: ``EFA``."""
        return self.display_name or self.name

    @staticmethod
    def table_name(instance_type: str) -> str:
        """The name the maxima table knows an instance type by (HyperPod's ``ml.`` stripped)."""
        return instance_type.removeprefix(HYPERPOD_INSTANCE_PREFIX)

    @property
    def catalog(self) -> InstanceCatalog | None:
        """The instance catalog of the profile's resource, when one was loaded (``with_catalogs``)."""
        return self._catalog

    def catalog_type(self, instance_type: str | None) -> InstanceType | None:
        """What the catalog knows of an instance type (HyperPod's ``ml.`` stripped)."""
        if instance_type is None or self._catalog is None:
            return None
        return self._catalog.get(self.table_name(instance_type))

    def maximum_for(self, instance_type: str | None) -> int | None:
        """The known maximum count for an instance type: the profile's ``instanceTypes`` entry, else
        the catalog's; None when neither knows it."""
        if instance_type is None:
            return None
        name = self.table_name(instance_type)
        override = self.instance_types.get(name)
        if override is not None:
            return override
        known = self._catalog.get(name) if self._catalog is not None else None
        return known.maximum if known is not None else None

    def isolation_group(self, instance_type: str) -> int | None:
        name = self.table_name(instance_type)
        for index, group in enumerate(self.isolated_instance_type_groups):
            if name in group:
                return index
        return None


BUILTIN_PROFILES: dict[str, dict[str, Any]] = {
    "efa": {
        "name": "efa",
        "enabled": True,
        "displayName": "EFA",
        "resource": "vpc.amazonaws.com/efa",
        "targetNodes": {
            "acceleratorResources": list(DEFAULT_ACCELERATOR_RESOURCES),
            "acceleratorLabels": list(DEFAULT_ACCELERATOR_LABELS),
            "providerIDPrefixes": ["aws://"],
        },
        "devicePlugin": {
            "namespaces": ["kube-system"],
            "daemonSetSelector": "app.kubernetes.io/name=aws-efa-k8s-device-plugin",
            "daemonSetNames": ["aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin-daemonset"],
            # EKS Auto Mode advertises EFA itself (eks-charts#1358: there is no DaemonSet to find).
            "platformManagedNodeLabels": ["eks.amazonaws.com/compute-type=auto"],
        },
        # The maxima come from the generated catalog (fabriccap.catalogfile); this map only overrides.
        "instanceTypes": {},
        "isolatedInstanceTypeGroups": EFA_ISOLATED_INSTANCE_TYPE_GROUPS,
        "recommendedEnv": EFA_RECOMMENDED_ENV,
        "sources": ["devicePlugin", "dra"],
        # DRANET, as AWS's EKS chart (aws-dranet) installs it, and upstream DRANET; where each
        # value comes from: docs/dra.md.
        "dra": {
            "deviceClassNames": ["efa.networking.k8s.aws"],
            # The chart's DeviceClass, rendered from a verbatim copy of the chart (core.upstream).
            "deviceClasses": [yaml.safe_load(AWS_DRANET_DEVICE_CLASS)],
            # The old form's drivers, used only with attributes (none by default).
            "drivers": ["dra.net", "dra.networking.k8s.aws"],
            "daemonSetSelector": ["app=aws-dranet", "app=dranet"],
            "daemonSetNames": ["aws-dranet", "dranet"],
        },
    },
    "aks-rdma": {
        "name": "aks-rdma",
        "enabled": False,
        "displayName": "RDMA",
        "resource": "rdma/hca_shared_devices_a",
        "targetNodes": {
            "acceleratorResources": ["nvidia.com/gpu"],
            "acceleratorLabels": ["nvidia.com/gpu.present=true"],
            "providerIDPrefixes": ["azure://"],
        },
        "devicePlugin": {
            # NVIDIA network-operator's Helm chart, older installs, the standalone manifests.
            "namespaces": ["nvidia-network-operator", "network-operator", "kube-system"],
            # A label of the DaemonSet's pod template (the DaemonSet itself carries ds-owner).
            "daemonSetSelector": "app=rdma-shared-dp",
            "daemonSetNames": ["rdma-shared-dp-ds"],
        },
        "instanceTypes": {},
        "recommendedEnv": [{"name": "NCCL_IB_DISABLE", "value": "0"}],
        "shared": True,
    },
}

_REPLACED_MAPPINGS = frozenset({"attributes"})


class WorkloadSettings(_Model):
    """Whether the pods that run on the pools are read (cluster-wide) and reported."""

    enabled: StrictBool = Field(
        default=True,
        description="Read Pods cluster-wide and report who on each pool asks for the fabric (status.workloads,"
        " Events, alerts). Off: Pods are read only in the plugin namespaces.",
    )


class KarpenterSettings(_Model):
    """Whether Karpenter's NodePools, NodeClaims and EC2NodeClasses are read (when the API serves them)."""

    enabled: StrictBool = Field(
        default=True,
        description="Read karpenter.sh/v1 NodePools and NodeClaims and karpenter.k8s.aws/v1 EC2NodeClasses when"
        " the API server serves them: an empty NodePool is a pool, status.launchable says what it may launch,"
        " and nodes launched without the fabric on purpose leave the gate set.",
    )


KiB, MiB = 2**10, 2**20
DEFAULT_TRANSPORT_MAX_BYTES = 4 * MiB
# When a container's log is read again while no line decides NCCL's transport, in seconds
# after the container started: NCCL logs its choice when a job creates its first communicator,
# seconds after start for a small job, minutes for one that loads a large model or waits for
# all its workers first. Then it stops: a job that has not logged its choice after an hour
# does not log it at NCCL_DEBUG=INFO (or not in the first maxBytes).
DEFAULT_READ_AFTER_SECONDS: tuple[float, ...] = (60.0, 300.0, 900.0, 3600.0)
MAX_READ_STEPS = 10
# What recommendedEnv gains while transport is read: NCCL logs its choice at INFO, and these
# two subsystems hold every line the rules read (docs/transport.md) and little else.
TRANSPORT_ENV: tuple[tuple[str, str], ...] = (("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET"))


class TransportSettings(_Model):
    """Reading NCCL's choice of network from the logs of the pods that run on the pools
    (docs/transport.md). Off by default: it needs `get` on `pods/log`, and reads what pods print."""

    enabled: StrictBool = Field(
        default=False,
        description="Read the beginning of each accelerator container's log on the pools and publish what NCCL"
        " chose (status.workloads.transport, FabricNotUsed). Needs RBAC get on pods/log (the chart's"
        " transport.enabled, the kustomize component transport-logs).",
    )
    max_bytes: int = Field(
        default=DEFAULT_TRANSPORT_MAX_BYTES,
        alias="maxBytes",
        ge=256 * KiB,
        le=64 * MiB,
        description="How much of a container's log is read, from its beginning (limitBytes): an integer or a"
        " quantity such as 4Mi. Also the most memory one read may hold.",
    )
    max_concurrent_reads: StrictInt = Field(
        default=4, alias="maxConcurrentReads", ge=1, le=64, description="Log reads in flight at once."
    )
    reads_per_second: float = Field(
        default=10.0,
        alias="readsPerSecond",
        gt=0,
        le=1000,
        description="Log reads started per second at most, after a burst of as many (a token bucket).",
    )
    read_after_seconds: tuple[float, ...] = Field(
        default=DEFAULT_READ_AFTER_SECONDS,
        alias="readAfterSeconds",
        min_length=1,
        max_length=MAX_READ_STEPS,
        description="When a container's log is read, in seconds after the container started, ascending: the"
        " first read, then again while no line decides the transport; then it is read no more. Steps"
        " already past when a container is first seen are one read.",
    )

    @field_validator("max_bytes", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return parse_quantity(value)
            except ValueError as error:
                raise ValueError(f"{value!r} is not a size (use e.g. 4Mi): {error}") from None
        return value

    @field_validator("read_after_seconds")
    @classmethod
    def _ascending(cls, steps: tuple[float, ...]) -> tuple[float, ...]:
        if any(step < 0 for step in steps):
            raise ValueError("read steps are seconds after the container started: none may be negative")
        if any(later <= earlier for earlier, later in pairwise(steps)):
            raise ValueError(f"read steps must be ascending, got {list(steps)}")
        return steps


class Config(_Model):
    """The operator's configuration: one YAML file, `--config`, or the Helm chart's `config` value."""

    pool_labels: tuple[str, ...] = Field(
        default=DEFAULT_POOL_LABELS,
        alias="poolLabels",
        min_length=1,
        description="Node label keys that name a node's pool, in order: a node's pool is the first it carries;"
        " a node with none is unpooled (counted in fabriccap_unpooled_nodes, never published).",
    )
    fabrics: tuple[FabricProfile, ...] = Field(default=(), description="The fabric profiles.")
    pool_grace_period_seconds: float = Field(
        default=600.0,
        alias="poolGracePeriodSeconds",
        ge=0,
        description="How long a pool may have no target node before its FabricCapability is deleted.",
    )
    debounce_seconds: float = Field(
        default=0.2,
        alias="debounceSeconds",
        ge=0,
        le=60,
        description="How long changes are gathered before the pools they touch are evaluated.",
    )
    # A full re-evaluation this often even when nothing changed: a safety net for a missed
    # watch event, and the heartbeat behind fabriccap_last_evaluation_timestamp_seconds
    # (the FabricCapabilityStale alert assumes it is at most 5 minutes).
    resync_seconds: float = Field(
        default=300.0,
        alias="resyncSeconds",
        gt=0,
        description="Every pool is evaluated again this often even when nothing changed: a safety net for a"
        " missed watch event (the FabricCapabilityStale alert assumes at most 300).",
    )
    # How long the first listing may take before /healthz fails (and the pod is restarted).
    startup_timeout_seconds: float = Field(
        default=120.0,
        alias="startupTimeoutSeconds",
        gt=0,
        description="How long the first listing of the watched kinds may take before /healthz fails.",
    )
    # The view of the cluster is stale when a watched kind has made no progress (a completed
    # LIST, or an event or bookmark that advanced its resourceVersion; a watch merely accepted
    # does not count) for this long: /healthz fails and fabriccap_pool_ready reads 0. A watch
    # lasts 0.4x this and is bookmarked before its end, and one without progress for 0.5x is
    # replaced by a LIST (controller/informers.py watch_timings), so the view goes stale only
    # when that LIST fails too, or takes so long to read that its snapshot is this old already.
    stale_after_seconds: float = Field(
        default=150.0,
        alias="staleAfterSeconds",
        gt=0,
        description="A watched kind whose view has made no progress for this long (no completed LIST requested"
        " since, no event or bookmark that advanced its resourceVersion) makes the view stale: /healthz fails,"
        " fabriccap_pool_ready reads 0, and every FabricCapability says Ready False (DataUnavailable,"
        " naming the kind).",
    )
    workloads: WorkloadSettings = Field(
        default_factory=WorkloadSettings, description="Workload reporting: who on each pool asks for the fabric."
    )
    karpenter: KarpenterSettings = Field(
        default_factory=KarpenterSettings, description="Elastic pools: Karpenter's NodePools and what they launch."
    )
    transport: TransportSettings = Field(
        default_factory=TransportSettings,
        description="Transport: what NCCL chose, read from the pods' logs (needs workload reporting).",
    )

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
        if not any(fabric.enabled for fabric in fabrics):
            raise ValueError("no fabric is enabled: the operator would publish nothing")
        return fabrics

    @model_validator(mode="after")
    def _transport_reads_workloads(self) -> Config:
        if self.transport.enabled and not self.workloads.enabled:
            raise ValueError("transport.enabled needs workloads.enabled: the pods whose logs are read are workloads")
        return self

    @property
    def enabled_fabrics(self) -> tuple[FabricProfile, ...]:
        return tuple(fabric for fabric in self.fabrics if fabric.enabled)

    def with_catalogs(self, catalogs: Iterable[InstanceCatalog]) -> Config:
        """This config with each profile given the catalog of its resource (``fabriccap.catalogfile``
        reads them); a profile's ``instanceTypes`` still overrides and extends its catalog."""
        by_resource = {catalog.resource: catalog for catalog in catalogs}
        fabrics = []
        for fabric in self.fabrics:
            copy = fabric.model_copy()
            copy._catalog = by_resource.get(fabric.resource)
            fabrics.append(copy)
        return self.model_copy(update={"fabrics": tuple(fabrics)})

    def recommended_env(self, profile: FabricProfile) -> tuple[EnvVar, ...]:
        """What status.recommendation.env tells workloads to set: the profile's variables, and
        while transport is read NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET (a profile that
        names either keeps its own value)."""
        if not self.transport.enabled:
            return profile.recommended_env
        named = {env.name for env in profile.recommended_env}
        extra = tuple(EnvVar(name=name, value=value) for name, value in TRANSPORT_ENV if name not in named)
        return (*profile.recommended_env, *extra)

    @property
    def plugin_namespaces(self) -> tuple[str, ...]:
        return tuple(
            sorted({namespace for fabric in self.enabled_fabrics for namespace in fabric.device_plugin.namespaces})
        )


def _merge_renames() -> dict[str, dict[str, str]]:
    """Per profile field holding a model with old field names (``devicePlugin``): old -> new.
    A user's old name must replace the built-in's new one when a profile is merged."""
    renames: dict[str, dict[str, str]] = {}
    for name, info in FabricProfile.model_fields.items():
        for rename in OLD_FIELD_NAMES:
            if info.annotation is rename.model:
                renames.setdefault(info.alias or name, {})[rename.old] = rename.new
    return renames


_MERGE_RENAMES = _merge_renames()


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any], path: str = "") -> dict[str, Any]:
    """Mappings merge key by key; anything else (lists included) in ``override`` replaces."""
    merged = dict(base)
    for old, new in _MERGE_RENAMES.get(path, {}).items():
        if old in override:
            merged.pop(new, None)  # the user's old name replaces the built-in's new one
    for key, value in override.items():
        # What a device must match is one criterion, not a table: a user's list of attributes
        # replaces the built-in one instead of adding to it.
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping) and key not in _REPLACED_MAPPINGS:
            merged[key] = _deep_merge(merged[key], value, key)
        else:
            merged[key] = value
    return merged


def _merge_with_builtin(raw_fabric: Any) -> Any:
    """A fabric entry named like a built-in profile starts from it; given fields replace.

    Listing a built-in profile means wanting it, so it is enabled unless the entry says
    otherwise (the built-in ``aks-rdma`` is off only while it is not listed).
    """
    name = raw_fabric.get("name") if isinstance(raw_fabric, Mapping) else None
    # A name that is not a string (a list, a mapping) names no profile: the model says so.
    if isinstance(name, str) and name in BUILTIN_PROFILES:
        return _deep_merge({**BUILTIN_PROFILES[name], "enabled": True}, raw_fabric)
    return raw_fabric


def _format_validation_error(error: ValidationError, source: str, document: Mapping[str, Any]) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "(top level)"
    message = first["msg"].removeprefix("Value error, ")
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{source}: invalid config at {location}: {message}{_not_a_builtin(first, document)}{more}"


def _not_a_builtin(first: Any, document: Mapping[str, Any]) -> str:
    """Why a fabric lacks a field it must give: its name is no built-in profile's (``efaa``
    for ``efa``), so nothing filled it in. Before, "fabrics.0.resource: Field required" named a
    field the user had not written and left the typo unsaid (review 66d F7)."""
    loc = first["loc"]
    if first["type"] != "missing" or len(loc) != 3 or loc[0] != "fabrics" or not isinstance(loc[1], int):
        return ""
    fabric = document["fabrics"][loc[1]]
    name = fabric.get("name") if isinstance(fabric, Mapping) else None
    if not isinstance(name, str) or name in BUILTIN_PROFILES:
        return ""
    builtins = ", ".join(BUILTIN_PROFILES)
    return f" ({clean_text(name, 40)!r} is not a built-in profile ({builtins}), so it gives every field itself)"


def build_config(raw: Any, source: str = "config", catalogs: Iterable[InstanceCatalog] = ()) -> Config:
    """Validate a parsed config document and attach ``catalogs``; raise ConfigError naming the bad field."""
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
        config = Config.model_validate(document)
    except ValidationError as error:
        raise ConfigError(_format_validation_error(error, source, document)) from None
    return config.with_catalogs(catalogs)


def default_config(catalogs: Iterable[InstanceCatalog] = ()) -> Config:
    return build_config({}, catalogs=catalogs)


def parse_config_text(text: str, source: str) -> Any:
    """The YAML document of a config file; syntax errors and what the loader refuses are
    ConfigErrors naming the line."""
    try:
        return load_yaml_document(text, UniqueKeyLoader)  # safe construction: no arbitrary objects
    except RecursionError:
        raise ConfigError(f"{source}: config is nested too deeply") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None)
        detail = f": {problem}" if problem and isinstance(error, RefusedDocumentError) else ""
        raise ConfigError(f"{source}: config is not valid YAML{where}{detail}") from None
    except ValueError as error:  # a decimal integer past Python's digit limit
        raise ConfigError(f"{source}: config is not valid YAML: {str(error).splitlines()[0][:160]}") from None


def parse_config(text: str, source: str, catalogs: Iterable[InstanceCatalog] = ()) -> Config:
    """A config file's text, validated; ``source`` names it in errors (``fabriccap.configfile``
    reads the file and the catalogs)."""
    return build_config(parse_config_text(text, source), source=source, catalogs=catalogs)


# ---------------------------------------------------------------------------------------------
# The JSON Schema of a config file


CONFIG_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _without_titles(node: Any) -> Any:
    """pydantic's generated ``title`` keys repeat the field names; they only add noise."""
    if isinstance(node, dict):
        return {key: _without_titles(value) for key, value in node.items() if key != "title"}
    if isinstance(node, list):
        return [_without_titles(value) for value in node]
    return node


def label_key_schema() -> dict[str, Any]:
    """A Kubernetes label key as JSON Schema: what _check_label_key accepts, lengths included."""
    return {
        "type": "string",
        "pattern": _QUALIFIED_NAME.pattern,
        "maxLength": 253 + 1 + 63,
        "allOf": [{"pattern": _LABEL_KEY_LENGTHS}],
    }


def label_value_schema() -> dict[str, Any]:
    """A Kubernetes label value as JSON Schema: what _check_label_value accepts (63 at most)."""
    return {"type": "string", "pattern": _LABEL_VALUE.pattern}


def config_input_schema() -> dict[str, Any]:
    """The JSON Schema of what a user writes in a config file (``fabriccap config-schema``).

    Generated from the models, then adjusted where the file is not the model:

    - entries of ``fabrics`` are partial: one named like a built-in profile is merged onto it
      before validation (``_merge_with_builtin``), so ``{name: efa}`` alone is complete, while
      any other entry needs ``resource`` and a ``devicePlugin`` that can find its DaemonSets;
    - old field names (``gpuResources``, ``gpuLabels``, ``devicePlugin.namespace``) are still
      read, but not together with their new names;
    - what the field validators check in code is spelt out as patterns and bounds where JSON
      Schema can say it (label keys and their lengths, label selectors, DNS names, non-negative
      maxima), so a chart or an editor refuses it before the operator would.

    The operator still validates every file itself: the schema refuses less than the models
    (unique fabric names, at least one enabled fabric, ascending read steps, a quantity's
    size, transport without workloads, a selector term's prefix length). The Helm chart's
    checks (charts/fabriccap/templates/_helpers.tpl) refuse the first five;
    tests/repo/test_chart.py keeps the chart refusing whatever the loader refuses.
    """
    schema: dict[str, Any] = _without_titles(Config.model_json_schema(by_alias=True, mode="validation"))
    definitions = schema["$defs"]

    label_key = label_key_schema()
    selector = {"type": "string", "pattern": _SELECTOR}
    dns_label = {"type": "string", "pattern": _DNS_LABEL.pattern, "maxLength": 63}
    dns_subdomain = {"type": "string", "pattern": _DNS_SUBDOMAIN.pattern, "maxLength": 253}
    schema["properties"]["poolLabels"].update(items=label_key, uniqueItems=True)
    fabrics = schema["properties"]["fabrics"]
    fabrics.pop("default", None)  # absent is not [] but the built-in profiles
    fabrics["description"] = (
        "Replaces the built-in list (efa on, aks-rdma off); an entry named like a built-in profile starts from it."
    )

    target_nodes = definitions[TargetNodes.__name__]["properties"]
    target_nodes["acceleratorResources"]["items"] = label_key
    target_nodes["acceleratorLabels"]["items"] = selector

    device_plugin = definitions[DevicePlugin.__name__]["properties"]
    device_plugin["namespaces"].update(items=dns_label, uniqueItems=True)
    device_plugin["daemonSetNames"]["items"] = dns_subdomain
    for choice in device_plugin["daemonSetSelector"]["anyOf"]:  # a selector, or a list of them
        if choice["type"] == "string":
            choice.update(selector)
        elif choice["type"] == "array":
            choice["items"] = selector
    dra = definitions[DraSettings.__name__]["properties"]
    dra["daemonSetNames"]["items"] = dns_subdomain
    dra["deviceClassNames"].update(items=dns_subdomain, uniqueItems=True)

    transport = definitions[TransportSettings.__name__]["properties"]
    transport["readAfterSeconds"]["items"]["minimum"] = 0
    # An integer, or a quantity string (4Mi) that the model parses; the bounds stay the model's.
    max_bytes = transport["maxBytes"]
    bounds = {key: max_bytes.pop(key) for key in ("minimum", "maximum", "type")}
    max_bytes["default"] = "4Mi"
    max_bytes["anyOf"] = [bounds, {"type": "string", "pattern": QUANTITY_PATTERN}]

    # Old names last: each is its new field as patterned above (one item of it, for a shorthand).
    for rename in OLD_FIELD_NAMES:
        definition = definitions[rename.model.__name__]
        new_field = definition["properties"][rename.new]
        old_field = dict(new_field["items"] if rename.single_item else new_field)
        old_field.pop("default", None)
        definition["properties"][rename.old] = {
            **old_field,
            "deprecated": True,
            "description": f"old name of {rename.new}",
        }
        definition.setdefault("allOf", []).append({"not": {"required": [rename.old, rename.new]}})

    profile = definitions[FabricProfile.__name__]
    profile_properties = profile["properties"]
    profile_properties["name"].update(pattern=_FABRIC_NAME.pattern, maxLength=20)
    profile_properties["resource"].update(label_key)
    profile_properties["instanceTypes"]["additionalProperties"]["minimum"] = 0
    # `platform` is a source the status shows, never one a profile lists (platformManagedNodeLabels).
    definitions[Source.__name__]["enum"] = [source.value for source in Source if source is not Source.PLATFORM]
    label_pair = {"type": "string", "pattern": rf"^{_LABEL_KEY}=({_LABEL_NAME})?$"}
    device_plugin["platformManagedNodeLabels"]["items"] = label_pair
    target_nodes["providerIDPrefixes"]["items"] = {"type": "string", "pattern": r"^[a-z][a-z0-9+.-]{0,30}://$"}
    profile["required"] = ["name"]
    # A built-in profile's name: the entry is merged onto the built-in, every field optional.
    # Any other name: a whole profile, with a way to find its device plugin.
    profile["if"] = {"properties": {"name": {"enum": sorted(BUILTIN_PROFILES)}}, "required": ["name"]}
    profile["else"] = {
        "required": ["resource", "devicePlugin"],
        "properties": {
            "devicePlugin": {
                "anyOf": [
                    {
                        "required": ["daemonSetSelector"],
                        "properties": {"daemonSetSelector": {"type": ["string", "array"], "minItems": 1}},
                    },
                    {"required": ["daemonSetNames"], "properties": {"daemonSetNames": {"minItems": 1}}},
                ]
            }
        },
    }
    return {
        "$schema": CONFIG_SCHEMA_DIALECT,
        "title": "fabriccap configuration",
        "description": "The file `fabriccap run --config` and `fabriccap evaluate --config` read; the Helm chart's"
        " `config` value. Fabric entries named like a built-in profile (efa, aks-rdma) start from it.",
        **schema,
    }
