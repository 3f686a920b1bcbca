"""The FabricCapability resource: its names, status models and condition helpers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from fabriccap.core.text import MAX_API_VERSION, MAX_KIND, MAX_NAME, MAX_NAMESPACE, clean_text, cut

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
    LAUNCHABLE = "Launchable"  # Karpenter NodePool pools only
    READY = "Ready"
    STALLED = "Stalled"


CONDITION_ORDER: tuple[ConditionType, ...] = tuple(ConditionType)


class ConditionStatus(StrEnum):
    """A condition's status: Kubernetes' three words (metav1.ConditionStatus), the same for
    every kind's conditions. Spelt here only; compare raw statuses with these members."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Reason(StrEnum):
    """Every reason a FabricCapability condition can carry. The evaluation takes its reasons
    from here only, so ``REASONS`` below (and the reference generated from it) cannot miss one."""

    DATA_UNAVAILABLE = "DataUnavailable"
    NO_TARGET_NODES = "NoTargetNodes"
    PLUGIN_READY_ON_ALL_NODES = "PluginReadyOnAllNodes"
    PLUGIN_NOT_INSTALLED = "PluginNotInstalled"
    PLUGIN_NOT_SCHEDULED = "PluginNotScheduled"
    PLUGIN_NOT_READY = "PluginNotReady"
    ALL_NODES_ADVERTISE = "AllNodesAdvertise"
    NOT_ADVERTISED = "NotAdvertised"
    PARTIALLY_ADVERTISED = "PartiallyAdvertised"
    UNIFORM_COUNT = "UniformCount"
    PARTIAL_ROLLOUT = "PartialRollout"
    MIXED_COUNTS = "MixedCounts"
    MATCHES_INSTANCE_MAXIMUM = "MatchesInstanceMaximum"
    BELOW_INSTANCE_MAXIMUM = "BelowInstanceMaximum"
    ABOVE_INSTANCE_MAXIMUM = "AboveInstanceMaximum"
    UNKNOWN_INSTANCE_TYPE = "UnknownInstanceType"
    UNIFORM_CAPABILITY = "UniformCapability"
    MIXED_SOURCES = "MixedSources"
    ADVERTISER_CONFLICT = "AdvertiserConflict"
    DEVICE_PLUGIN_GAP = "DevicePluginGap"
    INSTANCE_TYPE_UNSUPPORTED = "InstanceTypeUnsupported"
    HETEROGENEOUS_INSTANCE_TYPES = "HeterogeneousInstanceTypes"
    NOT_STALLED = "NotStalled"
    NO_SCHEDULABLE_NODES = "NoSchedulableNodes"
    UNIFORM_LAUNCHABLE_COUNT = "UniformLaunchableCount"
    MIXED_LAUNCHABLE_COUNTS = "MixedLaunchableCounts"
    NO_FABRIC_INSTANCE_TYPES = "NoFabricInstanceTypes"
    PROVIDER_EXCLUDES_INSTANCE_TYPES = "ProviderExcludesInstanceTypes"
    INSTANCE_TYPES_NOT_IN_CATALOG = "InstanceTypesNotInCatalog"
    REQUIREMENTS_NOT_EVALUATED = "RequirementsNotEvaluated"
    STATUS_TOO_LARGE = "StatusTooLarge"
    STATUS_WRITE_REFUSED = "StatusWriteRefused"


@dataclass(frozen=True)
class ConditionMeaning:
    """What a condition type answers, for users (the reference under docs/reference/)."""

    type: ConditionType
    question: str
    affects_ready: bool


@dataclass(frozen=True)
class ReasonMeaning:
    """One (condition type, status, reason) the operator can write, what it means and what to do."""

    condition: ConditionType
    status: ConditionStatus
    reason: Reason
    meaning: str
    action: str


CONDITIONS: tuple[ConditionMeaning, ...] = (
    ConditionMeaning(
        ConditionType.DEVICE_PLUGIN_READY,
        "Does every node of the gate set run a Ready pod of the DaemonSet that advertises its devices"
        " (the device plugin, or the DRA driver's kubelet plugin on nodes that advertise through DRA)?",
        affects_ready=True,
    ),
    ConditionMeaning(
        ConditionType.ADVERTISED,
        "Does every node of the gate set advertise at least one device of the fabric?",
        affects_ready=True,
    ),
    ConditionMeaning(
        ConditionType.HOMOGENEOUS,
        "Does every node of the gate set advertise the same count, and can the pool's instance types share one fabric?",
        affects_ready=True,
    ),
    ConditionMeaning(
        ConditionType.MATCHES_INSTANCE_TYPE,
        "Does each node of a known instance type advertise that type's known maximum? Informational:"
        " attaching fewer interfaces than the maximum can be deliberate.",
        affects_ready=False,
    ),
    ConditionMeaning(
        ConditionType.LAUNCHABLE,
        "Karpenter NodePool pools only: does every accelerator instance type the NodePool may launch get the"
        " same count N > 0 of the fabric, from the instance catalog, on nodes its provider DaemonSet would serve?"
        " An empty NodePool is Ready by this.",
        affects_ready=True,
    ),
    ConditionMeaning(
        ConditionType.READY,
        "The flip criterion: may fabric wiring be turned on for this pool? True only when the gate set is"
        " not empty, every node advertises the same count N > 0, no more than its instance type's maximum,"
        " and every node is served by a Ready provider (or, for a Karpenter NodePool with an empty gate set,"
        " when Launchable is True and a provider DaemonSet serves its types). kstatus reads True as Current"
        " and False as InProgress.",
        affects_ready=True,
    ),
    ConditionMeaning(
        ConditionType.STALLED,
        "Abnormal-true (kstatus): is the pool unable to become Ready whatever happens to its plugins,"
        " because of its instance types? kstatus reads True as Failed.",
        affects_ready=False,
    ),
)

REASONS: tuple[ReasonMeaning, ...] = (
    # DevicePluginReady
    ReasonMeaning(
        ConditionType.DEVICE_PLUGIN_READY,
        ConditionStatus.TRUE,
        Reason.PLUGIN_READY_ON_ALL_NODES,
        "Every node of the gate set has a Ready pod of the DaemonSet that serves it.",
        "Nothing.",
    ),
    ReasonMeaning(
        ConditionType.DEVICE_PLUGIN_READY,
        ConditionStatus.FALSE,
        Reason.PLUGIN_NOT_INSTALLED,
        "No DaemonSet of the fabric was found: none in the configured namespaces matches the profile's"
        " selector or names. The message says where and how it looked.",
        "Install the device plugin (or DRA driver), or point `devicePlugin.namespaces`,"
        " `devicePlugin.daemonSetSelector` / `daemonSetNames` (or `dra.daemonSetSelector` / `dra.daemonSetNames`)"
        " at the one you run.",
    ),
    ReasonMeaning(
        ConditionType.DEVICE_PLUGIN_READY,
        ConditionStatus.FALSE,
        Reason.PLUGIN_NOT_SCHEDULED,
        "The DaemonSet exists, but some nodes of the gate set have no pod of it: its node selector,"
        " affinity or tolerations leave them out. The message names up to 5 of them.",
        "Compare the DaemonSet's nodeSelector, affinity and tolerations with the labels and taints of the nodes named.",
    ),
    ReasonMeaning(
        ConditionType.DEVICE_PLUGIN_READY,
        ConditionStatus.FALSE,
        Reason.PLUGIN_NOT_READY,
        "Every node has a plugin pod, but on some it is not Ready (not Running, not Ready, or being deleted).",
        "`kubectl describe` and `kubectl logs` the plugin pods on the nodes named.",
    ),
    ReasonMeaning(
        ConditionType.DEVICE_PLUGIN_READY,
        ConditionStatus.UNKNOWN,
        Reason.NO_TARGET_NODES,
        "The pool has no schedulable target node (all cordoned, or none left at all), so there is nothing to judge.",
        "Uncordon nodes or wait for new ones; the object is deleted after the grace period once the pool"
        " has no target node at all.",
    ),
    # Advertised
    ReasonMeaning(
        ConditionType.ADVERTISED,
        ConditionStatus.TRUE,
        Reason.ALL_NODES_ADVERTISE,
        "Every node of the gate set advertises at least one device of the fabric.",
        "Nothing.",
    ),
    ReasonMeaning(
        ConditionType.ADVERTISED,
        ConditionStatus.FALSE,
        Reason.NOT_ADVERTISED,
        "No node of the gate set advertises the fabric: allocatable is 0 or absent, and no ResourceSlice"
        " holds its devices (where the profile reads DRA).",
        "If the pool should carry the fabric: check the instance type can (`MatchesInstanceType`), that"
        " interfaces are attached in the launch template, and the plugin's logs. A pool that is a target only"
        " because of its GPUs or instance type may stay like this by design.",
    ),
    ReasonMeaning(
        ConditionType.ADVERTISED,
        ConditionStatus.FALSE,
        Reason.PARTIALLY_ADVERTISED,
        "Some nodes of the gate set advertise the fabric and some advertise 0; the message names up to 5 of"
        " the latter.",
        "Look at the plugin pod and the devices of the nodes named; a node that just joined recovers once its"
        " plugin registers. Cordon a node that cannot be fixed: cordoned nodes leave the gate set.",
    ),
    ReasonMeaning(
        ConditionType.ADVERTISED,
        ConditionStatus.UNKNOWN,
        Reason.NO_TARGET_NODES,
        "The pool has no schedulable target node.",
        "As for DevicePluginReady.",
    ),
    # Homogeneous
    ReasonMeaning(
        ConditionType.HOMOGENEOUS,
        ConditionStatus.TRUE,
        Reason.UNIFORM_COUNT,
        "Every node of the gate set advertises the same count (0 included); `status.uniformCount` holds it.",
        "Nothing.",
    ),
    ReasonMeaning(
        ConditionType.HOMOGENEOUS,
        ConditionStatus.FALSE,
        Reason.PARTIAL_ROLLOUT,
        "Counts differ and some nodes advertise 0: the fabric reached only part of the pool.",
        "Fix or cordon the nodes at 0 named in the message (see `status.gap.nodes`).",
    ),
    ReasonMeaning(
        ConditionType.HOMOGENEOUS,
        ConditionStatus.FALSE,
        Reason.MIXED_COUNTS,
        "Every node advertises some, but not the same count (different instance types, or unhealthy devices"
        " on some nodes); or the counts agree but the pool mixes instance types whose fabric traffic cannot"
        " cross (EFA between P4d/P4de and other types).",
        "Split the pool by instance type, or fix the nodes the message names (capacity above allocatable"
        " means unhealthy devices) or cordon them: cordoned nodes leave the gate set.",
    ),
    ReasonMeaning(
        ConditionType.HOMOGENEOUS,
        ConditionStatus.UNKNOWN,
        Reason.NO_TARGET_NODES,
        "The pool has no schedulable target node.",
        "As for DevicePluginReady.",
    ),
    # MatchesInstanceType
    ReasonMeaning(
        ConditionType.MATCHES_INSTANCE_TYPE,
        ConditionStatus.TRUE,
        Reason.MATCHES_INSTANCE_MAXIMUM,
        "Every node of a known instance type advertises exactly that type's maximum.",
        "Nothing.",
    ),
    ReasonMeaning(
        ConditionType.MATCHES_INSTANCE_TYPE,
        ConditionStatus.FALSE,
        Reason.BELOW_INSTANCE_MAXIMUM,
        "Some nodes advertise fewer devices than their instance type supports.",
        "Deliberate (fewer interfaces attached) needs nothing; otherwise check the launch template's"
        " network interfaces and the plugin's logs.",
    ),
    ReasonMeaning(
        ConditionType.MATCHES_INSTANCE_TYPE,
        ConditionStatus.FALSE,
        Reason.ABOVE_INSTANCE_MAXIMUM,
        "Some nodes advertise more devices than their instance type's known maximum.",
        "The profile's `instanceTypes` table is out of date for that type: correct it in your config.",
    ),
    ReasonMeaning(
        ConditionType.MATCHES_INSTANCE_TYPE,
        ConditionStatus.UNKNOWN,
        Reason.UNKNOWN_INSTANCE_TYPE,
        "No node of the gate set is of an instance type whose maximum the profile knows.",
        "Add the types to the profile's `instanceTypes` if you want them checked.",
    ),
    # Ready
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.TRUE,
        Reason.UNIFORM_CAPABILITY,
        "Every node of the gate set advertises the same count N > 0 and runs a Ready plugin pod: a job that"
        " asks for up to N per node schedules on any node of the pool. `status.recommendation` says what to"
        " request.",
        "Wire the fabric: request what `status.recommendation` says.",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.DATA_UNAVAILABLE,
        "A kind the verdict reads (Nodes, plugin Pods, DaemonSets, ResourceSlices) could not be read from the"
        " API server for `staleAfterSeconds`; the message names it. The rest of the status is the last answer"
        " the operator could compute, and may be out of date.",
        "See why the operator cannot read it: `fabriccap_watch_connected`, `fabriccap_api_errors_total`, its"
        " log, and its RBAC (docs/runbook.md, FabricCapabilityStale).",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.NO_TARGET_NODES,
        "The pool has no schedulable target node: all cordoned, none left (a node group deleted or scaled to"
        " zero; the object is deleted after the grace period, unless a Karpenter NodePool of the fabric backs"
        " the pool: its object stays, and the message says why what it could launch is not enough), or no"
        " pool of the operator's config computes this object's name (made by hand, or left over; the"
        " message says so).",
        "As for DevicePluginReady. An object no pool calls for needs nothing: it is deleted after the grace"
        " period if it is labelled as managed by fabriccap.",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.NOT_ADVERTISED,
        "No node advertises the fabric (the Advertised condition's message).",
        "As for Advertised `NotAdvertised`.",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.PARTIAL_ROLLOUT,
        "Counts differ and some nodes advertise 0 (the Homogeneous condition's message).",
        "As for Homogeneous `PartialRollout`.",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.MIXED_COUNTS,
        "Counts differ, none is 0, or the instance types cannot share one fabric (the Homogeneous"
        " condition's message).",
        "As for Homogeneous `MixedCounts`.",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.MIXED_SOURCES,
        "Every node advertises the same count, but some through a device plugin (node allocatable) and some"
        " through a DRA driver (ResourceSlices): a pod asking for the extended resource schedules only onto"
        " the former, one with a ResourceClaim only onto the latter, so no one request schedules on every"
        " node. The message names the nodes of each source.",
        "Move the pool to one source (finish the migration to DRA, or back), or map the resource to the"
        " fabric's DeviceClass with `spec.extendedResourceName` (KEP-5004, feature gate DRAExtendedResource):"
        " then `resource: N` schedules on both, and the pool is Ready with a `resourcesPerNode` recommendation.",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.ADVERTISER_CONFLICT,
        "Some nodes advertise the fabric through both a device plugin (node allocatable) and a DRA driver"
        " (ResourceSlices): the scheduler can hand the same devices to a pod asking for the extended resource"
        " and to a ResourceClaim at once (AWS: silent oversubscription). `gap.conflictingAdvertisers` counts"
        " them; the message names them.",
        "Remove one of the two from those nodes (docs/runbook.md, FabricAdvertiserConflict): the device"
        " plugin where workloads claim devices with ResourceClaims (AWS recommends DRA for EKS >= 1.34 node"
        " groups), the DRA driver where they request the extended resource.",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.STATUS_TOO_LARGE,
        "The API server refused the pool's status as too large (413, or an error naming the request's"
        " size), so the operator published this summary instead: the counts, no lists, no `uniformCount`"
        " and no `recommendation`, and Ready False whatever the pool's state. The message quotes the"
        " refusal. The full status is tried again on the write backoff (up to every 5 minutes).",
        'The status is bounded by construction (see "How large a status can be"), so report it with the'
        " operator's log line. Meanwhile `fabriccap explain` shows the pool as the operator computes it.",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.STATUS_WRITE_REFUSED,
        "The API server refused the pool's newest status as invalid (400 or 422: most often an admission "
        "policy or webhook denying updates of fabriccapabilities/status) while the object said Ready and the "
        "newest status differs from it in what gates and jobs act on: Ready, uniformCount or the "
        "recommendation (a pool that broke, lost its nodes, or now offers another count). The operator "
        "published this summary instead (as for StatusTooLarge), so no gate keeps reading the old Ready. The "
        "message quotes the refusal. The full status is tried again about a minute later, then up to every 5 "
        "minutes; fabriccap_status_writes_refused counts such objects (alert "
        "FabricCapabilityStatusWriteRefused).",
        "Find what refuses the write from the quoted refusal (`kubectl get validatingadmissionpolicies,"
        "validatingwebhookconfigurations`) and let the operator's service account update"
        " fabriccapabilities/status. Meanwhile `fabriccap explain` shows the pool as the operator computes it.",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.DEVICE_PLUGIN_GAP,
        "Every node advertises the same N > 0, but some nodes have no Ready pod of the DaemonSet that serves"
        " them: what they advertise is not backed by a running plugin and may be stale.",
        "As for DevicePluginReady's reason (`PluginNotInstalled`, `PluginNotScheduled` or `PluginNotReady`).",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.NO_SCHEDULABLE_NODES,
        "The pool has target nodes, but every one is left out of the gate set: cordoned or not Ready (a stopped"
        " kubelet's node keeps a stale allocatable). `cordonedNodes` and `unreadyNodes` count them.",
        "Bring the nodes back (uncordon, restart the kubelet) or replace them.",
    ),
    ReasonMeaning(
        ConditionType.READY,
        ConditionStatus.FALSE,
        Reason.ABOVE_INSTANCE_MAXIMUM,
        "Some node advertises more than its instance type's maximum: never on purpose (plugins before 0.5.10"
        " counted p6-b200's NVLink controllers as EFA devices), and a job requesting that many breaks NCCL.",
        "Upgrade the device plugin; if the catalog is wrong for the type, override it in the profile's"
        " `instanceTypes`.",
    ),
    # Launchable
    ReasonMeaning(
        ConditionType.LAUNCHABLE,
        ConditionStatus.TRUE,
        Reason.UNIFORM_LAUNCHABLE_COUNT,
        "Every accelerator type the NodePool may launch gets the same N > 0 (its catalog maximum, or the"
        " efa-only interfaces its EC2NodeClass pins), and a provider DaemonSet would run on them.",
        "Nothing. A pod that requests N schedules on any node the NodePool launches.",
    ),
    ReasonMeaning(
        ConditionType.LAUNCHABLE,
        ConditionStatus.FALSE,
        Reason.MIXED_LAUNCHABLE_COUNTS,
        "The NodePool may launch accelerator types with different maxima (accelerator types without the"
        " fabric count as 0): no one request fits every node it launches.",
        "Narrow the NodePool's requirements (instance family or size) to types of one maximum.",
    ),
    ReasonMeaning(
        ConditionType.LAUNCHABLE,
        ConditionStatus.FALSE,
        Reason.NO_FABRIC_INSTANCE_TYPES,
        "The NodePool's requirements admit no accelerator type that gets the fabric (or its minValues cannot"
        " be met, so Karpenter launches nothing, or its EC2NodeClass pins no efa-only interface).",
        "Nothing, if the NodePool is not meant to carry the fabric; otherwise admit types that do.",
    ),
    ReasonMeaning(
        ConditionType.LAUNCHABLE,
        ConditionStatus.FALSE,
        Reason.PROVIDER_EXCLUDES_INSTANCE_TYPES,
        "The device-plugin (or DRA-driver) DaemonSet's node selector or required affinity, evaluated against"
        " the labels a launched node would carry, leaves out types the NodePool may launch, or its tolerations"
        " miss a NoSchedule or NoExecute taint of the NodePool's template (the message names the taint and"
        " the DaemonSet): their nodes would never advertise the fabric.",
        "Widen the DaemonSet's selector (an instance-type allowlist is the usual cause), add a toleration of"
        " the NodePool's taint to the DaemonSet (the EFA chart's default tolerates only CriticalAddonsOnly),"
        " or narrow the NodePool.",
    ),
    ReasonMeaning(
        ConditionType.LAUNCHABLE,
        ConditionStatus.UNKNOWN,
        Reason.INSTANCE_TYPES_NOT_IN_CATALOG,
        "The NodePool names instance types the instance catalog does not list.",
        "Add them, with their maxima, to the profile's `instanceTypes`.",
    ),
    ReasonMeaning(
        ConditionType.LAUNCHABLE,
        ConditionStatus.UNKNOWN,
        Reason.REQUIREMENTS_NOT_EVALUATED,
        "A requirement of the NodePool cannot be evaluated against the catalog: an operator Karpenter does not"
        " know, a numeric operator without one integer, or a label of the instance type the catalog has no"
        " values for. The message names the requirement.",
        "Fix the requirement, or accept that fabriccap cannot tell what the NodePool launches.",
    ),
    # Stalled
    ReasonMeaning(
        ConditionType.STALLED,
        ConditionStatus.TRUE,
        Reason.INSTANCE_TYPE_UNSUPPORTED,
        "Every node's instance type has a known maximum of 0: the pool can never carry the fabric.",
        "Nothing, if the pool is not meant to carry it; otherwise move the workload to instance types that"
        " support the fabric.",
    ),
    ReasonMeaning(
        ConditionType.STALLED,
        ConditionStatus.TRUE,
        Reason.HETEROGENEOUS_INSTANCE_TYPES,
        "The pool mixes instance types with different known maxima whose nodes advertise different counts,"
        " or types whose fabric traffic cannot cross: it cannot become uniform as it is. Types of different"
        " maxima whose nodes all advertise one count are Ready and not Stalled (only MatchesInstanceType"
        " reports the nodes below their type's maximum), so Ready and Stalled are never True together. A"
        " node still at 0 (its device plugin starting, as at each scale-up) counts for neither: the pool is"
        " then a PartialRollout, not Stalled.",
        "Split the pool so that each has one instance type (or types of the same maximum).",
    ),
    ReasonMeaning(
        ConditionType.STALLED,
        ConditionStatus.FALSE,
        Reason.NOT_STALLED,
        "Nothing about the pool's instance types keeps it from becoming Ready.",
        "Nothing.",
    ),
)


def reason_meaning(condition: ConditionType | str, status: str, reason: str) -> ReasonMeaning | None:
    """The registered meaning of a (condition type, status, reason), or None when there is none."""
    return next(
        (
            entry
            for entry in REASONS
            if entry.condition == condition and entry.status == status and entry.reason == reason
        ),
        None,
    )


# -- How large a status can be, by construction
#
# A status repeats what others named (nodes, instance types, DaemonSets, pods and their owners),
# and a status the API server refuses as too large freezes the pool (reliability round 3, S2:
# 600 KB owner names, 413 on every write, Ready=True kept). So every list of a status has a
# maximum length, and every string a maximum length, enforced by the models below whatever the
# evaluation hands them (lists keep their first entries, in their sorted order; strings are cut
# with an ellipsis). The largest status, counting every character a pod creator or node
# labeller chooses as 12 bytes of JSON (the escaped surrogate pair of an emoji) and the config's
# own strings as given:
#
#   instanceTypes   64 x (253 chars + counts)           ~ 197 KB
#   conditions       6 x message of 2,048 chars         ~ 148 KB
#   offenders       20 x (63 + 63 + 253 chars)          ~  91 KB
#   daemonSets      20 x (63 + 1 + 253 chars)           ~  76 KB
#   gap.nodes       20 x 253 chars                      ~  61 KB
#   transport        5 x read error of 160 chars        ~  10 KB
#   pool.value, counts (64 buckets), the integers       ~   6 KB
#
# about 590 KB (tests/unit/core/test_status_size.py builds it: hostile names at every bound),
# under MAX_STATUS_BYTES, a third of the API server's 3 MiB request limit and under etcd's
# 1.5 MiB per object. On a live cluster those names are DNS names and label values (one byte a
# character), and the same status is under 60 KB.
MAX_COUNT_BUCKETS = 64  # distinct counts on one pool: more says MixedCounts as well as 64 do
MAX_INSTANCE_TYPES = 64
MAX_DAEMON_SETS = 20
MAX_GAP_NODES = 20
MAX_OFFENDERS = 20
MAX_READ_ERRORS = 5  # why logs could not be read: a few distinct API-server answers say it all
MAX_READ_ERROR_REASON = 160  # an HTTP status and the start of the API server's message
MAX_CONDITION_MESSAGE = 2048  # messages name counts and at most 5 nodes: 1.5 KB at 253-char names
MAX_POOL_KEY = 317  # a label key: a DNS-subdomain prefix (253), "/", a name (63)
MAX_QUALIFIED_NAME = MAX_NAMESPACE + 1 + MAX_NAME  # "namespace/name"
MAX_STATUS_BYTES = 1024 * 1024

_Item = TypeVar("_Item")


def _first(limit: int) -> Callable[[list[_Item]], list[_Item]]:
    def first(items: list[_Item]) -> list[_Item]:
        return items if len(items) <= limit else items[:limit]

    return first


def _cut(limit: int) -> AfterValidator:
    return AfterValidator(lambda text: cut(text, limit))


Name = Annotated[str, _cut(MAX_NAME)]


class _ApiModel(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Condition(_ApiModel):
    type: str
    status: ConditionStatus
    reason: str
    message: Annotated[str, _cut(MAX_CONDITION_MESSAGE)]
    last_transition_time: str | None = Field(default=None, alias="lastTransitionTime")
    observed_generation: int | None = Field(default=None, alias="observedGeneration")


class PoolRef(_ApiModel):
    key: Annotated[str, _cut(MAX_POOL_KEY)]
    value: Name


class CountBucket(_ApiModel):
    count: int
    nodes: int


class InstanceTypeCount(_ApiModel):
    name: Name
    nodes: int
    max_count: int | None = Field(default=None, alias="maxCount")


class DevicePluginStatus(_ApiModel):
    daemon_sets: Annotated[list[Annotated[str, _cut(MAX_QUALIFIED_NAME)]], AfterValidator(_first(MAX_DAEMON_SETS))] = (
        Field(alias="daemonSets")
    )
    ready_nodes: int = Field(alias="readyNodes")


class GapStatus(_ApiModel):
    plugin_ready_not_advertised: int = Field(alias="pluginReadyNotAdvertised")
    unhealthy: int
    advertised_without_plugin: int = Field(alias="advertisedWithoutPlugin")
    # Target nodes Karpenter launched without the fabric on purpose (not in the gate set).
    launched_without_fabric: int = Field(default=0, alias="launchedWithoutFabric")
    conflicting_advertisers: int = Field(default=0, alias="conflictingAdvertisers")
    nodes: Annotated[list[Name], AfterValidator(_first(MAX_GAP_NODES))]
    truncated: bool


class LaunchableType(_ApiModel):
    name: Name
    max_count: int = Field(alias="maxCount")


class LaunchableCount(_ApiModel):
    count: int
    instance_types: int = Field(alias="instanceTypes")


class LaunchableStatus(_ApiModel):
    """What the pool's Karpenter NodePool may launch (accelerator types, from the catalog)."""

    node_pool: Name = Field(alias="nodePool")
    instance_types: list[LaunchableType] = Field(alias="instanceTypes")  # at most 20, by name
    truncated: bool
    counts: Annotated[list[LaunchableCount], AfterValidator(_first(MAX_COUNT_BUCKETS))]  # the larger count first


class NamingStatus(_ApiModel):
    """Why the object's name is the hashed form ``<fabric>-<value>-<digest>``."""

    hashed: bool
    reason: str  # "Collision" | "NotDNSLabel" | "Reserved"
    message: Annotated[str, _cut(MAX_CONDITION_MESSAGE)]


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

    source: str  # "devicePlugin" | "dra" | "platform"
    nodes: int


class WorkloadCount(_ApiModel):
    pods: int
    workloads: int  # distinct top-level owners


class Offender(_ApiModel):
    """A workload on the pool that does not ask for the fabric it could use."""

    namespace: Annotated[str, _cut(MAX_NAMESPACE)]
    kind: Annotated[str, _cut(MAX_KIND)]  # of the top-level owner (TrainJob, JobSet, PyTorchJob, MPIJob, Job, ...)
    # Always written, yet optional in the CRD and here: a status the previous version wrote has
    # none, and it must still read back (the fail-closed rewrite before the first listing), and
    # its leader, still writing during an upgrade that applied this CRD first, not be refused.
    api_version: Annotated[str, _cut(MAX_API_VERSION)] | None = Field(default=None, alias="apiVersion")
    name: Name
    pods: int
    problem: str  # "withoutFabric" | "intentWithoutRequest" | "FabricNotUsed"


class TransportCount(_ApiModel):
    """Pods (and their workloads) whose NCCL log shows one verdict."""

    pods: int
    workloads: int  # distinct top-level owners
    # Of ``pods``, those that request the fabric: socket or other there is FabricNotUsed.
    requesting_fabric_pods: int = Field(alias="requestingFabricPods")


class ReadError(_ApiModel):
    """Why some pods' logs could not be read (their verdict is unknown): an HTTP status and
    the start of the API server's message."""

    reason: Annotated[str, _cut(MAX_READ_ERROR_REASON)]
    pods: int


class TransportStatus(_ApiModel):
    """What NCCL chose, over the pods that request the fabric or an accelerator: ``fabric``,
    ``socket`` (TCP), ``other`` (another network), ``none`` (one node) or ``unknown`` (no line
    says, or the log was not read yet or could not be)."""

    fabric: TransportCount
    socket: TransportCount
    other: TransportCount
    none: TransportCount
    unknown: TransportCount
    read_errors: Annotated[list[ReadError], AfterValidator(_first(MAX_READ_ERRORS))] = Field(
        default_factory=list, alias="readErrors"
    )


class WorkloadsStatus(_ApiModel):
    requesting_fabric: WorkloadCount = Field(alias="requestingFabric")
    without_fabric: WorkloadCount = Field(alias="withoutFabric")
    intent_without_request: WorkloadCount = Field(alias="intentWithoutRequest")
    # Absent unless transport is read (config.transport.enabled).
    transport: TransportStatus | None = None
    offenders: Annotated[list[Offender], AfterValidator(_first(MAX_OFFENDERS))]


class FabricCapabilityStatus(_ApiModel):
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    fabric: str
    resource_name: str = Field(alias="resourceName")
    pool: PoolRef
    nodes: int
    cordoned_nodes: int = Field(alias="cordonedNodes")
    unready_nodes: int = Field(default=0, alias="unreadyNodes")
    advertising_nodes: int = Field(alias="advertisingNodes")
    uniform_count: int | None = Field(default=None, alias="uniformCount")
    counts: Annotated[list[CountBucket], AfterValidator(_first(MAX_COUNT_BUCKETS))]
    instance_types: Annotated[list[InstanceTypeCount], AfterValidator(_first(MAX_INSTANCE_TYPES))] = Field(
        alias="instanceTypes"
    )
    device_plugin: DevicePluginStatus = Field(alias="devicePlugin")
    gap: GapStatus
    launchable: LaunchableStatus | None = None  # Karpenter NodePool pools only
    recommendation: Recommendation | None = None
    sources: list[SourceCount] = Field(default_factory=list)
    naming: NamingStatus | None = None  # only when the name is hashed
    workloads: WorkloadsStatus | None = None  # absent when workload reporting is off
    conditions: list[Condition]

    def condition(self, condition_type: ConditionType | str) -> Condition | None:
        return next((c for c in self.conditions if c.type == condition_type), None)

    @property
    def is_ready(self) -> bool:
        ready = self.condition(ConditionType.READY)
        return ready is not None and ready.status == ConditionStatus.TRUE


# The status's keys in the order the API (and ``to_json``) gives them.
STATUS_KEYS = tuple(field.alias or name for name, field in FabricCapabilityStatus.model_fields.items())


def status_with(status: Mapping[str, Any], **parts: Any) -> dict[str, Any]:
    """``status`` (a status as JSON) with ``parts`` put in by their JSON names (a None part
    taken out), in the API's key order: a new dict whose other values are ``status``'s own.

    The operator builds each round's statuses this way from the node-side status its memo
    keeps as JSON, rather than as models (15 KB against 6 KB a pool: docs/performance.md,
    "Memory and start grow with the pools"). So a status as JSON is shared, never changed."""
    merged = {**status, **parts}
    return {key: merged[key] for key in STATUS_KEYS if merged.get(key) is not None}


MAX_REFUSAL_SHOWN = 300  # how much of the API server's refusal the summary's message quotes


def too_large_status(status: FabricCapabilityStatus, refusal: str) -> FabricCapabilityStatus:
    """What is published when the API server refuses ``status`` as too large (``fail_closed_summary``)."""
    return fail_closed_summary(
        status,
        Reason.STATUS_TOO_LARGE,
        f"the API server refused this pool's full status as too large ({clean_text(refusal, MAX_REFUSAL_SHOWN)});"
        " this summary stands in for it, and the full status is written again as soon as it is accepted",
    )


def write_refused_status(status: FabricCapabilityStatus, refusal: str) -> FabricCapabilityStatus:
    """What is published when the API server refuses ``status`` as invalid (400, 422: an admission
    policy or webhook, most often) while what it holds says Ready and ``status`` says otherwise in
    what users act on (``fail_closed_summary``): a Ready=True left in place would let gates wire a
    pool that broke, or a job request a count its nodes no longer offer."""
    return fail_closed_summary(
        status,
        Reason.STATUS_WRITE_REFUSED,
        f"the API server refused this pool's newest status ({clean_text(refusal, MAX_REFUSAL_SHOWN)}), so the"
        " Ready it held no longer holds; this summary stands in for it, and the full status is tried again"
        " until it is accepted",
    )


def fail_closed_summary(status: FabricCapabilityStatus, reason: Reason, message: str) -> FabricCapabilityStatus:
    """A summary of ``status`` published in its place when the full one cannot be written: the
    pool's counts, none of its lists, no ``uniformCount`` or ``recommendation``, and a Ready
    condition that is False (``reason``) whatever the pool's state. Small whatever ``status``
    holds, and failing closed: a gate reading it never wires the fabric."""
    gap = status.gap
    workloads = status.workloads
    return FabricCapabilityStatus(
        fabric=status.fabric,
        resource_name=status.resource_name,
        pool=status.pool,
        nodes=status.nodes,
        cordoned_nodes=status.cordoned_nodes,
        advertising_nodes=status.advertising_nodes,
        counts=[],
        instance_types=[],
        device_plugin=DevicePluginStatus(daemon_sets=[], ready_nodes=status.device_plugin.ready_nodes),
        gap=GapStatus(
            plugin_ready_not_advertised=gap.plugin_ready_not_advertised,
            unhealthy=gap.unhealthy,
            advertised_without_plugin=gap.advertised_without_plugin,
            nodes=[],
            truncated=bool(gap.nodes) or gap.truncated,
        ),
        workloads=None if workloads is None else workloads.model_copy(update={"offenders": []}),
        conditions=[Condition(type=ConditionType.READY, status=ConditionStatus.FALSE, reason=reason, message=message)],
    )


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


def status_written(obj: Mapping[str, Any]) -> bool:
    """Whether a FabricCapability's status has been written: until then the API server serves
    the CRD's default, {observedGeneration: 0}, which holds no condition (every status written
    holds all six)."""
    status = obj.get("status")
    return isinstance(status, Mapping) and bool(status.get("conditions"))


def is_ready_status(status: Mapping[str, Any] | None) -> bool:
    """Whether a raw status says Ready=True: the flip criterion as dashboards and gates read it."""
    return condition_status(status, ConditionType.READY) == ConditionStatus.TRUE
