"""One workload, for ``fabriccap explain KIND/NAMESPACE/NAME``: the pool it selects or runs on,
what it requests, what the pool offers, and the exact change to make for its kind. Pure.

The workload's pod templates are found with the table's paths (core.workload_kinds), the same
paths the admission policy reads, and judged the same way: a template selects a pool by a
``nodeSelector`` on the pool's key or by a required node affinity whose every term has ``key
In [value]``; it needs the fabric when it requests an accelerator and neither the fabric nor a
claim, on a pool that offers the fabric (the operator's ``withoutFabric`` rule). The change gives
each such pod the pool's count per node (``resourcesPerNode``), or its share of it when the pod
takes part of a node's accelerators, split over its accelerator containers (a shared resource's
1 to each of them); it lowers a request above the count to it. On a pool that offers the fabric
only through DRA it is the claim FabricNotRequested names (``recommended_claim``), of the
pod's share of a node's devices as above (a ResourceClaimTemplate makes a claim per pod). It is a
JSON patch (RFC 6902), or for a kind that carries per-node resources itself a merge patch of
those; for a kind whose pod template cannot change in place, the paths and values to set in the
manifest; "nothing to change" otherwise.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fabriccap.core.api import ExactDeviceRequest
from fabriccap.core.config import Config, FabricProfile
from fabriccap.core.evaluate import Evaluation, PoolCapability
from fabriccap.core.explain import PodExplanation, pod_explanation
from fabriccap.core.facts import ObjectRef, WorkloadPodFacts, controller_owner, object_name, object_namespace
from fabriccap.core.index import FactIndex, NamespacedKey
from fabriccap.core.quantity import parse_quantity
from fabriccap.core.references import is_object_name
from fabriccap.core.text import clean_text, first_named
from fabriccap.core.workload_kinds import (
    OWNER_LABELS,
    POD,
    TEMPLATE_RESOURCES,
    UNKNOWN_REQUEST_FIELD,
    WorkloadKind,
    group_kind,
    group_of,
    kind_of,
    walk,
)
from fabriccap.core.workloads import (
    MAX_OWNER_DEPTH,
    NOT_USED_VERDICTS,
    OWNER_LOOKUP_KINDS,
    LookupKey,
    claim_words,
    nccl_uses,
    owner_chain,
    owner_loop,
    recommended_claim,
    top_owner,
)

NOTHING_TO_CHANGE = "nothing to change"
# Kinds whose pod template cannot be changed once created: the patch is what to apply to the
# manifest before creating it again. A Pod's extended resources and a batch Job's template are
# immutable (Kubernetes validation); Trainer v2.3.0's CRD marks spec.trainer `self == oldSelf`
# (trainjob_types.go); JobSet's webhook refuses changes to replicatedJobs beyond what Kueue
# needs while suspended (jobset_webhook.go ValidateUpdate; not exercised here: no webhook runs
# in the tests, where the API server alone accepts the patch).
IMMUTABLE_TEMPLATES = frozenset({"Pod", "Job.batch", "TrainJob.trainer.kubeflow.org", "JobSet.jobset.x-k8s.io"})
# An owner loop is named by its first this many objects, the others counted: a loop can be as
# long as the cluster has objects, and each name up to 253 characters.
MAX_LOOP_SHOWN = 12


class WorkloadExplainError(ValueError):
    """The object is of no kind the table knows, or is not an object."""


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    def to_json(self) -> dict[str, object]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class TemplateView(_Model):
    """One pod template of the workload (a JSON pointer into the object)."""

    pointer: str
    selects: str | None = None  # "key=value" of the pool it selects, if a known one
    accelerators: dict[str, str]  # what it requests of the accelerator resources, per resource
    fabric: str | None = None  # what it requests of the fabric, if anything
    claims: bool = False  # it has resourceClaims: not judged (a claim may be the fabric's)
    needs_fabric: bool = Field(alias="needsFabric")


class WorkloadExplanation(_Model):
    api_version: str = Field(alias="apiVersion")
    kind: str
    namespace: str
    name: str
    fabric: str
    resource_name: str = Field(alias="resourceName")
    capability: str | None = None  # the FabricCapability of the pool it selects or runs on
    pool: str | None = None  # key=value
    ready: bool = False
    offers: str  # what the pool offers, in words
    runs_on: list[str] = Field(alias="runsOn")  # pools its pods are bound to now ("key=value (N pods)")
    templates: list[TemplateView]
    request_field: str = Field(alias="requestField")
    change: str  # the command to run, or "nothing to change"
    note: str | None = None
    # With transport read (config.transport): what its bound pods' NCCL chose, pod by pod.
    pods: list[PodExplanation] | None = None


def _positive(value: Any) -> bool:
    try:
        return parse_quantity(value) > 0
    except ValueError:
        return False


def _requested(container: Mapping[str, Any], resource: str) -> str | None:
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return None
    for part in ("limits", "requests"):
        values = resources.get(part)
        if isinstance(values, Mapping) and resource in values and _positive(values[resource]):
            return str(values[resource])
    return None


def _containers(spec: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    containers = spec.get("containers")
    if not isinstance(containers, list):
        return []
    return [(index, c) for index, c in enumerate(containers) if isinstance(c, Mapping)]


def selected_pool(spec: Mapping[str, Any], pools: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """The first of ``pools`` the pod spec selects, as the admission policy decides it."""
    selector = spec.get("nodeSelector")
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = (
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(node_affinity, Mapping)
        else None
    )
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    for key, value in pools:
        if isinstance(selector, Mapping) and selector.get(key) == value:
            return key, value
        if isinstance(terms, list) and terms and all(_term_selects(term, key, value) for term in terms):
            return key, value
    return None


def _term_selects(term: Any, key: str, value: str) -> bool:
    expressions = term.get("matchExpressions") if isinstance(term, Mapping) else None
    return isinstance(expressions, list) and any(
        isinstance(e, Mapping) and e.get("key") == key and e.get("operator") == "In" and e.get("values") == [value]
        for e in expressions
    )


def _count_of(capability: PoolCapability) -> int | None:
    """The extended resource's count the pool's recommendation gives (``resourcesPerNode``): a
    node's, or for a shared resource each pod's 1. None where it recommends none: not Ready, or
    the fabric is offered only through DRA (``recommended_claim``), where no node advertises the
    extended resource and a pod that asks for it stays Pending."""
    status = capability.status
    recommendation = status.recommendation
    if recommendation is not None and recommendation.resources_per_node:
        amount = recommendation.resources_per_node.get(status.resource_name)
        if amount is not None:
            return parse_quantity(amount)
    return None


def _offers(capability: PoolCapability | None, resource: str, shared: bool) -> str:
    if capability is None:
        return f"no pool of {resource} that this workload selects or runs on"
    status = capability.status
    count = _count_of(capability)
    ready = status.condition("Ready")
    if status.is_ready:
        claim = recommended_claim(status)
        if claim is not None:
            per_node = claim_words(claim)
        elif shared and count:
            per_node = (
                f"{resource}: {count} per accelerator container, shared by up to {status.uniform_count} "
                "containers per node"
            )
        else:
            per_node = f"{resource}: {count} per node" if count else resource
        return f"{per_node}, Ready ({status.nodes} nodes now)"
    reason = ready.reason if ready is not None else "NotReady"
    return f"{resource} not Ready ({reason}): kubectl describe fcap {capability.name}"


@dataclass(frozen=True, slots=True)
class _Setting:
    """One value the change gives the fabric's resource: in ``part`` (limits or requests) of the
    container whose resources are at the JSON pointer ``base`` (``resources``: what they are now)."""

    base: str
    resources: Mapping[str, Any] | None
    part: str
    value: int


def _amount(container: Mapping[str, Any], resource: str) -> int:
    """What a container requests of ``resource``, as a whole number (0: none, or not a quantity)."""
    requested = _requested(container, resource)
    try:
        return parse_quantity(requested) if requested is not None else 0
    except ValueError:
        return 0


def _split(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` in whole parts proportional to ``weights`` (all > 0), summing exactly to it:
    what rounding down leaves goes to the first."""
    whole = sum(weights)
    parts = [total * weight // whole for weight in weights]
    parts[0] += total - sum(parts)
    return parts


@dataclass(frozen=True, slots=True)
class NodeAccelerators:
    """What a node of the pool carries of each accelerator resource (``counts``: the most any
    of its accelerator nodes carries; empty when not known), and whether its nodes differ."""

    counts: Mapping[str, int]
    differ: bool = False


def node_accelerators(
    profile: FabricProfile, capability: PoolCapability, index: FactIndex, accelerators: Sequence[str]
) -> NodeAccelerators:
    """What a node of the pool carries of each accelerator resource: the most its accelerator
    nodes' allocatable holds; with no accelerator node (an empty NodePool), the most the catalog
    gives a type it may launch with the fabric. The most, not the commonest, when they differ (a
    GPU lost to an Xid: 7 of 8): a share of the most is a share of no more on every node, so the
    pods that fill any node never ask it for more of the fabric than it has. Empty when not known
    (a type the catalog lacks): a pod is then taken to take the node."""
    carried = {
        tuple(node.allocatable_of(a) for a in accelerators)
        for node in index.members(capability.pool)
        if any(node.allocatable_of(a) > 0 for a in accelerators)
    }
    if not carried:
        launchable = capability.status.launchable
        types = (
            [profile.catalog_type(t.name) for t in launchable.instance_types if t.max_count > 0]
            if launchable is not None
            else []
        )
        if types and all(t is not None for t in types):
            carried = {tuple(t.resources.get(a, 0) for a in accelerators) for t in types if t is not None}
    if not carried:
        return NodeAccelerators({})
    most = {a: n for i, a in enumerate(accelerators) if (n := max(counts[i] for counts in carried)) > 0}
    return NodeAccelerators(most, differ=len(carried) > 1)


def pod_share(count: int, asked: Mapping[str, int], carried: Mapping[str, int]) -> int:
    """What one pod that asks ``asked`` of the accelerators should request of the fabric on a
    pool whose nodes get ``count`` each (recommendation.resourcesPerNode) and carry ``carried``
    accelerators: all of it when the pod takes a node's accelerators, or their number is not
    known; else its share, ``count`` x the pod's part of the accelerators, rounded down and at
    least 1. So the pods that fill a node together never ask it for more than it has (a 1-GPU
    pod on an 8-GPU node of 32 asks 4, and eight of them fit), and a pod never asks for more
    than ``count``."""
    if not carried or any(carried.get(a, 0) <= 0 for a in asked):
        return count
    share = max(count * amount // carried[a] for a, amount in asked.items())
    return max(1, min(count, share))


def _settings_of(base: str, resources: Mapping[str, Any] | None, resource: str, value: int) -> list[_Setting]:
    """``value`` of ``resource`` for the resources at ``base``: in the limits, and in the
    requests too where they name it (an explicit ``"0"`` as well): an extended resource's request
    must equal its limit, and one left out defaults to it."""
    requests = resources.get("requests") if resources is not None else None
    named = isinstance(requests, Mapping) and resource in requests
    return [_Setting(base, resources, part, value) for part in ("limits", *(("requests",) if named else ()))]


def _settings_to_add(
    template_pointer: str,
    spec: Mapping[str, Any],
    accelerators: Sequence[str],
    resource: str,
    total: int,
    shared: bool,
) -> list[_Setting]:
    """``total`` of the fabric for the pod, on the containers that request an accelerator, in
    proportion to what they request of them. For a shared resource ``total`` is what each of
    them asks (the recommendation's 1): it counts the requests that may share a node's devices,
    not the devices, and its device plugin gives them only to a container that requests it; one
    that requests it already keeps what it asks."""
    asking = [
        (index, container, weight)
        for index, container in _containers(spec)
        if (weight := sum(_amount(container, a) for a in accelerators)) > 0
        and not (shared and _amount(container, resource) > 0)
    ]
    if not asking:
        return []
    parts = [total] * len(asking) if shared else _split(total, [weight for _, _, weight in asking])
    return [
        setting
        for (index, container, _), part in zip(asking, parts, strict=True)
        if part > 0
        for setting in _settings_of(
            f"{template_pointer}/spec/containers/{index}/resources", _resources(container), resource, part
        )
    ]


def _settings_to_lower(
    asking: Sequence[tuple[str, Mapping[str, Any] | None, int]], resource: str, total: int
) -> list[_Setting]:
    """A pod's request of ``resource`` lowered to ``total``: ``asking`` holds the resources that
    request it (their JSON pointer, what they are, how much they request), and ``total`` is split
    over them in proportion."""
    if not asking:
        return []
    parts = _split(total, [weight for _, _, weight in asking])
    return [
        setting
        for (base, resources, _), part in zip(asking, parts, strict=True)
        for setting in _settings_of(base, resources, resource, part)
    ]


def _resources(container: Mapping[str, Any]) -> Mapping[str, Any] | None:
    resources = container.get("resources")
    return resources if isinstance(resources, Mapping) else None


def _escaped(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _patch_ops(settings: Sequence[_Setting], resource: str) -> list[dict[str, Any]]:
    """The JSON patch (RFC 6902) of ``settings``, creating what is missing (an ``add`` of a
    member that exists replaces its value)."""
    ops: list[dict[str, Any]] = []
    for setting in settings:
        value = str(setting.value)
        if setting.resources is not None and isinstance(setting.resources.get(setting.part), Mapping):
            ops.append({"op": "add", "path": f"{setting.base}/{setting.part}/{_escaped(resource)}", "value": value})
        elif setting.resources is not None:
            ops.append({"op": "add", "path": f"{setting.base}/{setting.part}", "value": {resource: value}})
        else:
            ops.append({"op": "add", "path": setting.base, "value": {setting.part: {resource: value}}})
    return ops


def _manifest_path(pointer: str) -> str:
    """A JSON pointer as a path in a manifest: ``spec.replicatedJobs[0].template``; a key that is
    not a plain name is quoted (``limits["vpc.amazonaws.com/efa"]``)."""
    path = ""
    for raw in pointer.split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if key.isdigit():
            path += f"[{key}]"
        elif key.replace("_", "").replace("-", "").isalnum():
            path += f".{key}" if path else key
        else:
            path += f"[{json.dumps(key)}]"
    return path


def _manifest_edit(settings: Sequence[_Setting], resource: str) -> str:
    """``settings`` as what to set in the manifest, each path with its value."""
    shown = (
        f"{_manifest_path(f'{setting.base}/{setting.part}/{_escaped(resource)}')}: {json.dumps(str(setting.value))}"
        for setting in settings
    )
    return "in the manifest, set " + ", ".join(shown)


def _resource_of(kind: WorkloadKind) -> str:
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def explain_workload(
    config: Config,
    evaluation: Evaluation,
    index: FactIndex,
    body: Mapping[str, Any],
    held: Collection[tuple[str, str, str]] | None = None,
    unread: Mapping[tuple[str, str, str], str] | None = None,
) -> WorkloadExplanation:
    """``held``: the keys (``ObjectRef.key``) of the workload objects the snapshots hold, so that
    a change is never a command that would fail on them; None for a live read, where every owner
    named is asked for by the command that names it. ``unread``: live, the owners a read of
    ``owner_reads`` did not tell, each with why (forbidden, gone, past the bound on reads)."""
    api_version, kind, metadata, identity = _parsed(body)
    _, namespace, name = identity
    profile = config.enabled_fabrics[0]
    resource, accelerators = profile.resource, sorted(profile.target_nodes.accelerator_resources)
    capabilities = [c for c in evaluation.capabilities if c.fabric == profile.name]
    pools = [(c.pool.key, c.pool.value) for c in capabilities]

    # Where its pods run now: pools of the nodes its pods are bound to.
    owners = _owners_above(kind, identity, metadata, index)[0]
    looped = owner_loop(owners)
    top = owners[-1] if owners and not looped else None
    counted_as = top if _pods_name_only(top, api_version, kind) else None
    running: dict[tuple[str, str], int] = {}
    own: list[WorkloadPodFacts] = []
    # The pods whose owners, however far up, include the object: one walk down from it.
    under = index.pods_under(identity) if counted_as is None and not kind.is_its_own_pod else set()
    for pod in index.workload_pods.values():
        if pod.node_name is None or not _is_own(pod, kind, identity, metadata, counted_as, under, index):
            continue
        own.append(pod)
        for candidate in capabilities:
            if pod.node_name in index.pool_members.get(candidate.pool, set()):
                pool = (candidate.pool.key, candidate.pool.value)
                running[pool] = running.get(pool, 0) + 1

    templates: list[TemplateView] = []
    chosen: tuple[str, str] | None = None
    specs: list[tuple[str, Mapping[str, Any]]] = []
    # By template pointer: whether a container that requests an accelerator lacks the fabric.
    unasked: dict[str, bool] = {}
    for path in kind.pod_templates:
        for pointer, template in walk(body, path):
            spec = template.get("spec")
            if isinstance(spec, Mapping):
                specs.append((pointer, spec))
    per_node = kind.resources_per_node
    per_node_pointer = "/" + per_node.replace(".", "/") if per_node is not None else None
    per_node_resources: Mapping[str, Any] | None = None
    if per_node is not None and per_node_pointer is not None:
        found = [value for _, value in walk(body, per_node)]
        per_node_resources = found[0] if found and isinstance(found[0], Mapping) else None
        as_container = {"resources": per_node_resources or {}}
        selection_specs = [
            spec
            for path in kind.selector_templates
            for _, template in walk(body, path)
            if isinstance(spec := template.get("spec"), Mapping)
        ]
        selected = next((hit for spec in selection_specs if (hit := selected_pool(spec, pools))), None)
        asked = {a: str(n) for a in accelerators if (n := _amount(as_container, a))}
        fabric = _amount(as_container, resource)
        unasked[per_node_pointer] = not fabric
        templates.append(
            TemplateView(
                pointer=per_node_pointer,
                selects=f"{selected[0]}={selected[1]}" if selected else None,
                accelerators=asked,
                fabric=str(fabric) if fabric else None,
                needs_fabric=bool(selected and asked and unasked[per_node_pointer]),
            )
        )
        chosen = selected
    for pointer, spec in specs:
        selected = selected_pool(spec, pools)
        # The pod's totals: what its containers request together is what a node must give it.
        asked = {a: str(n) for a in accelerators if (n := sum(_amount(c, a) for _, c in _containers(spec)))}
        fabric = sum(_amount(c, resource) for _, c in _containers(spec))
        claims = bool(spec.get("resourceClaims"))
        # A shared resource's devices go only to a container that requests it: each accelerator
        # container needs its own, whatever the others ask. Any other resource is the pod's.
        if profile.shared:
            unasked[pointer] = any(
                _amount(c, resource) == 0 for _, c in _containers(spec) if any(_amount(c, a) for a in accelerators)
            )
        else:
            unasked[pointer] = not fabric
        templates.append(
            TemplateView(
                pointer=pointer,
                selects=f"{selected[0]}={selected[1]}" if selected else None,
                accelerators=asked,
                fabric=str(fabric) if fabric else None,
                claims=claims,
                needs_fabric=bool(selected and asked and unasked[pointer] and not claims),
            )
        )
        chosen = chosen or selected
    if chosen is None and running:
        chosen = max(running, key=lambda pool: running[pool])
    capability = next((c for c in capabilities if (c.pool.key, c.pool.value) == chosen), None)
    count = _count_of(capability) if capability is not None else None
    ready = capability is not None and capability.status.is_ready
    # Where the pool offers the fabric only through DRA, a claim is asked for, not the resource.
    claim = recommended_claim(capability.status) if capability is not None and ready else None
    unoffered = capability is not None and not capability.offers_fabric
    if unoffered:
        # The operator's withoutFabric rule: where the pool cannot offer the fabric, no pod needs it.
        templates = [t.model_copy(update={"needs_fabric": False}) for t in templates]

    change, note = NOTHING_TO_CHANGE, None
    needing = [t for t in templates if t.needs_fabric]
    # A template that selects no pool but whose pods run on a Ready one needs it just as much.
    if not needing and capability is not None and running:
        needing = [t for t in templates if t.accelerators and unasked[t.pointer] and not t.claims]
    # On a pool that offers it only through DRA, a request of the extended resource stays Pending.
    claimed_instead = claim is not None and bool(needing or [t for t in templates if t.fabric and not t.claims])
    # Pods that ask a node for more of the fabric than it has stay Pending for good. A shared
    # resource's count is what each pod asks, not what a node has: asking more still schedules.
    too_much = [
        t
        for t in templates
        if ready and count and not profile.shared and t.fabric and not t.claims and int(t.fabric) > count
    ]
    settings: list[_Setting] = []
    shares: list[str] = []
    if ready and count:
        carried = (
            node_accelerators(profile, capability, index, accelerators)
            if capability is not None
            else NodeAccelerators({})
        )
        by_pointer = dict(specs)
        for view in needing:
            asked_counts = {a: int(n) for a, n in view.accelerators.items()}
            share = count if profile.shared else pod_share(count, asked_counts, carried.counts)
            if (said := _share_said(view, carried, count, share, profile.shared)) is not None:
                shares.append(said)
            if view.pointer == per_node_pointer:
                settings += _settings_of(view.pointer, per_node_resources, resource, share)
            else:
                spec = by_pointer[view.pointer]
                settings += _settings_to_add(view.pointer, spec, accelerators, resource, share, profile.shared)
        for view in too_much:
            if view.pointer == per_node_pointer:
                settings += _settings_to_lower([(view.pointer, per_node_resources, 1)], resource, count)
            else:
                spec = by_pointer[view.pointer]
                asking = [
                    (f"{view.pointer}/spec/containers/{i}/resources", _resources(c), weight)
                    for i, c in _containers(spec)
                    if (weight := _amount(c, resource)) > 0
                ]
                settings += _settings_to_lower(asking, resource, count)
    advised = bool(settings) or claimed_instead
    if unoffered and capability is not None and any(t.accelerators or t.fabric for t in templates):
        # The operator's withoutFabric rule: no request of the fabric can be met here, so none is
        # advised; a request already made keeps its pods Pending.
        if any(t.fabric for t in templates):
            change = (
                f"none on this pool: its pods request {resource}, which its nodes cannot give, so they stay "
                f"Pending; run it on a pool that offers {resource}, or drop the request"
            )
        note = (
            f"no node of pool {chosen[0] if chosen else '?'}={chosen[1] if chosen else '?'} advertises {resource}, "
            f"and neither its instance types nor its NodePool can give it (kubectl describe fcap {capability.name}): "
            f"to use {resource}, run it on a pool of instance types that have it"
        )
    elif advised and looped:
        change = (
            f"none until the owner loop is fixed: {_round_once(f'{kind.kind} {namespace}/{name}', identity, owners)}"
        )
        note = (
            f"the owners of {kind.kind} {namespace}/{name} name each other as controller, so none of them is the "
            f"top one that makes it: fix their ownerReferences, then explain it again"
        )
    elif advised and top is not None:
        field = _request_field(kind, top, owners)
        if claim is not None:
            request = (claim_words(claim), "")
        elif profile.shared:
            request = (resource, f": {count} in each accelerator container (a shared resource)")
        else:
            request = (
                resource,
                f": {count} per pod that takes a node's accelerators, its share of {count} for one that takes part "
                "of them, split over its accelerator containers",
            )
        change, note = _change_on_owner(kind, namespace, name, top, field, request, held, unread or {})
    elif claimed_instead and claim is not None and capability is not None:
        pending = max((int(t.fabric) for t in templates if t.fabric and not t.claims), default=0)
        carried = node_accelerators(profile, capability, index, accelerators)
        # A ResourceClaimTemplate makes one claim per pod: a pod that takes part of a node's
        # accelerators claims its share of the node's devices, as it would request the resource.
        claim_shares: dict[str, int] = {}
        claim_said: list[str] = []
        for view in templates:
            if view.claims or not (view in needing or view.fabric):
                continue
            asked_counts = {a: int(n) for a, n in view.accelerators.items()}
            share = pod_share(claim.count, asked_counts, carried.counts) if asked_counts else claim.count
            claim_shares[view.pointer] = share
            if asked_counts and (said := _share_said(view, carried, claim.count, share, profile.shared)) is not None:
                claim_said.append(said)
        edited = "the manifest"
        if per_node is not None:
            runtime = _runtime_name(body)
            edited = f"runtime {runtime}"
            where = (
                f"name it in the node pod template of the TrainJob's runtime {runtime} (its "
                "spec.template.spec.replicatedJobs[name=node].template.spec.template.spec.resourceClaims) and in its "
                "accelerator containers' resources.claims: a TrainJob has no pod template of its own"
            )
        else:
            where = (
                "name it in the pod template's spec.resourceClaims and in its accelerator containers' resources.claims"
            )
        change, dra_only = _claim_change(claim, capability, resource, pending, claim_shares, where)
        recreate = _recreate_note(kind, identity, edited)
        note = "; ".join(
            [
                *([recreate] if recreate is not None else []),
                dra_only,
                *claim_said,
                *(
                    [_runtime_note(body, f"claims DeviceClass {claim.device_class_name}")]
                    if per_node is not None
                    else []
                ),
            ]
        )
    elif settings and count:
        target = f"{_resource_of(kind)} {shlex.quote(name)}" + (f" -n {shlex.quote(namespace)}" if namespace else "")
        notes: list[str] = []
        if (recreate := _recreate_note(kind, identity)) is not None:
            change = _manifest_edit(settings, resource)
            notes.append(recreate)
        elif per_node is not None:
            change = f"kubectl patch {target} --type merge -p {shlex.quote(_merge_patch(per_node, settings, resource))}"
        else:
            ops = _patch_ops(settings, resource)
            change = f"kubectl patch {target} --type json -p {shlex.quote(json.dumps(ops, separators=(',', ':')))}"
        if too_much:
            notes.append(
                f"its pods request {max(int(t.fabric or 0) for t in too_much)} {resource}, more than the {count} "
                f"a node of the pool has, so they stay Pending: the change lowers it to {count}"
            )
        notes += shares
        if per_node is not None and needing:
            notes.append(_runtime_note(body, f"requests {resource}"))
        note = "; ".join(notes) or None
    elif needing and capability is not None and not ready:
        note = f"the pool is not Ready: fix it first (kubectl describe fcap {capability.name}), then request {resource}"
    elif (
        capability is None
        and not profile.shared
        and (most := max((int(t.fabric) for t in templates if t.fabric), default=0))
    ):
        change, note = _beyond_every_pool(capabilities, resource, most) or (change, note)
    # The top its pods are reported under: the object itself when nothing owns it.
    named_top = top if top is not None or looped else ObjectRef(api_version, kind.kind, namespace, name)
    if named_top is not None and (below := _operator_top_below(own, named_top, index)) is not None:
        deeper = (
            f"the operator follows a pod's owners {MAX_OWNER_DEPTH} deep: its status names "
            f"{below.kind} {below.namespace}/{below.name}, not {named_top.kind} {named_top.namespace}/{named_top.name}"
        )
        note = f"{note}; {deeper}" if note else deeper
    if unread and not kind.is_its_own_pod and (uncounted := _uncounted(own, namespace, index, unread)) is not None:
        note = f"{note}; {uncounted}" if note else uncounted
    if counted_as is not None:
        counted = (
            f"its pods name only {counted_as.kind} {counted_as.namespace}/{counted_as.name}: "
            f"the pods counted are all of that {counted_as.kind}'s"
        )
        note = f"{note}; {counted}" if note else counted
    pods = None
    if config.transport.enabled:
        pods = sorted(filter(None, (pod_explanation(pod, profile, index) for pod in own)), key=lambda pod: pod.name)
        if (unused := _not_used(pods, profile.name, resource)) is not None:
            note = f"{note}; {unused}" if note else unused
    return WorkloadExplanation(
        api_version=api_version,
        kind=kind.kind,
        namespace=namespace,
        name=name,
        fabric=profile.name,
        resource_name=resource,
        capability=capability.name if capability is not None else None,
        pool=f"{chosen[0]}={chosen[1]}" if chosen else None,
        ready=ready,
        offers=_offers(capability, resource, profile.shared),
        runs_on=[
            f"{key}={value} ({pods} pod{'s' if pods != 1 else ''})" for (key, value), pods in sorted(running.items())
        ],
        templates=templates,
        request_field=_request_field(kind, top, owners),
        change=change,
        note=note,
        pods=pods,
    )


def _share_said(
    view: TemplateView,
    carried: NodeAccelerators,
    count: int,
    share: int,
    shared: bool,
) -> str | None:
    """The note on what a pod of ``view`` is told to ask (``share`` of the ``count`` per node), when
    it is not simply the count: its share, or the count because how many accelerators a node
    carries is not known; None otherwise (and for a shared resource, where every pod asks the
    count)."""
    where = view.pointer or "/"
    if shared:
        return None
    if not carried.counts:
        return (
            f"how many accelerators a node of the pool carries is not known: a pod of {where} is taken to take a "
            f"node's and requests all {count}"
        )
    if share >= count:
        return None
    parts = ", ".join(f"{n} of {carried.counts.get(a, 0)} {a}" for a, n in view.accelerators.items())
    most = " (the most one of the pool's nodes carries: they differ)" if carried.differ else ""
    return (
        f"a pod of {where} takes {parts} of a node{most}: it requests its share, {share} of the {count} per node "
        "that FabricNotRequested and the admission warning name, so the pods that fill a node fit it together"
    )


def _recreate_note(kind: WorkloadKind, identity: tuple[str, str, str], edited: str = "the manifest") -> str | None:
    """For a kind whose pod template cannot change in place (``IMMUTABLE_TEMPLATES``), that the
    change is made to ``edited`` (its manifest, or a TrainJob's runtime, whose template is read
    when the TrainJob is created) and the object created again; None for any other kind."""
    if identity[0] not in IMMUTABLE_TEMPLATES:
        return None
    return f"{kind.kind}'s pod template cannot be changed in place: make this change to {edited} and create it again"


def _runtime_name(body: Mapping[str, Any]) -> str:
    """The name of a TrainJob's runtime (``spec.runtimeRef.name``), for the words; "?" if none."""
    spec = body.get("spec")
    ref = spec.get("runtimeRef") if isinstance(spec, Mapping) else None
    return clean_text(str(ref.get("name", "?") if isinstance(ref, Mapping) else "?"), 80)


def _runtime_note(body: Mapping[str, Any], already: str) -> str:
    """For a TrainJob: that a runtime which ``already`` (``requests RESOURCE``, ``claims
    DeviceClass X``) gives its pods the fabric, and Trainer v2.3 keeps it."""
    return (
        "Trainer v2.3 and later keep the runtime's requests that resourcesPerNode does not name: if runtime "
        f"{_runtime_name(body)} already {already}, nothing needs to change"
    )


def _claim_change(
    claim: ExactDeviceRequest,
    capability: PoolCapability,
    resource: str,
    asked: int,
    shares: Mapping[str, int],
    where: str,
) -> tuple[str, str]:
    """The change on a pool that offers the fabric only through DRA (``recommended_claim``): a
    claim of its DeviceClass, as FabricNotRequested and the admission warning say, named as
    ``where`` says; ``asked``: what its pods request of the extended resource, which no node
    advertises (0: none). ``shares``: what a pod of each template (by pointer) claims, its share
    of the ``count`` per node (``pod_share``): a ResourceClaimTemplate makes a claim per pod."""
    spec = (
        f"the pool's spec (kubectl get fcap {capability.name} -o "
        "jsonpath='{.status.recommendation.resourceClaimTemplate}')"
    )
    counts = set(shares.values())
    if counts <= {claim.count}:
        change = f"request {claim_words(claim)}: create a ResourceClaimTemplate with {spec}, and {where}"
    elif len(counts) == 1:
        (share,) = counts
        change = (
            f"request a ResourceClaim of DeviceClass {claim.device_class_name} for {share} devices per pod (a "
            f"ResourceClaimTemplate makes a claim for each pod): create a "
            f"ResourceClaimTemplate with {spec} and its exactly.count set to {share}, and {where}"
        )
    else:
        each = ", ".join(f"{n} for a pod of {pointer or '/'}" for pointer, n in shares.items())
        change = (
            f"request a ResourceClaim of DeviceClass {claim.device_class_name} for each pod's share of the "
            f"{claim.count} devices per node ({each}): create a ResourceClaimTemplate for each with {spec} and its "
            f"exactly.count set to that share, and {where}"
        )
    pool = capability.pool
    note = (
        f"pool {pool.key}={pool.value} offers {resource} only through DRA: no node advertises the extended "
        f"resource {resource}, so a pod that requests it stays Pending"
    )
    if asked:
        note += f"; its pods request {asked} {resource}: drop that request"
    return change, note


def _merge_patch(per_node: str, settings: Sequence[_Setting], resource: str) -> str:
    """``settings`` of a kind's per-node resources (``per_node``, dotted) as a merge patch."""
    patch: dict[str, Any] = {}
    for setting in settings:
        patch.setdefault(setting.part, {})[resource] = str(setting.value)
    for part in reversed(per_node.split(".")):
        patch = {part: patch}
    return json.dumps(patch, separators=(",", ":"))


def _beyond_every_pool(capabilities: Sequence[PoolCapability], resource: str, asked: int) -> tuple[str, str] | None:
    """For a workload on no pool that requests ``asked`` of the fabric per pod: when no Ready pool
    has that many per node, what to do (its pods stay Pending); None when some pool has."""
    offered = [(c, n) for c in capabilities if c.is_ready and (n := _count_of(c))]
    if any(n >= asked for _, n in offered):
        return None
    change = f"none: no pool offers {resource}: {asked} per node"
    if offered:
        best, most = max(offered, key=lambda item: (item[1], item[0].name))
        change += f"; the most a Ready pool offers is {most} (FabricCapability {best.name}): request {most} there"
    return change, f"its pods request {asked} {resource}, more than any node has, so they stay Pending"


def _owners_above(
    kind: WorkloadKind, identity: tuple[str, str, str], metadata: Mapping[str, Any], index: FactIndex
) -> tuple[list[ObjectRef], list[LookupKey]]:
    """The owners above the explained object, nearest first, as far as the snapshots or the
    cluster tell (a JobSet's Job, a Job's Pod); empty when the object is its own top. A pod's are
    read as the pod's own owners are read for the pools (by the label that names its workload,
    then up the owners); any other object's from its controller reference up. An object a pod
    controls (a LeaderWorkerSet's worker StatefulSet, controlled by its leader pod:
    pod_controller.go:173) belongs to that pod's top owner, not to the pod, which makes nothing.

    With them, the owner read that would take the chain one further, if one would."""
    _, namespace, name = identity
    pod = index.workload_pods.get((namespace, name)) if kind.is_its_own_pod else None
    if pod is not None:
        if pod.owner.key == identity:
            return [], []
        chain, missing = owner_chain(pod.owner, index, None)
        return chain, _listed(missing)
    start = controller_owner(metadata, namespace)
    if start is None:
        return [], []
    chain, missing = owner_chain(start, index, None)
    controller = chain[-1]
    if controller.group_kind != "Pod" or owner_loop(chain):
        return chain, _listed(missing)
    leader = index.workload_pods.get((controller.namespace, controller.name))
    if leader is not None and leader.owner.key != controller.key:
        above, missing = owner_chain(leader.owner, index, None)
        return chain + above, _listed(missing)
    labelled = _labelled_owner(kind, metadata, namespace)
    return ([*chain, labelled] if labelled is not None else chain), []


def _listed(missing: LookupKey | None) -> list[LookupKey]:
    return [] if missing is None else [missing]


def _parsed(body: Mapping[str, Any]) -> tuple[str, WorkloadKind, Mapping[str, Any], tuple[str, str, str]]:
    """The explained object's apiVersion, row of the table, metadata and key (``ObjectRef.key``);
    WorkloadExplainError when it is not an object of a kind the table knows."""
    api_version, kind_name = body.get("apiVersion"), body.get("kind")
    metadata = body.get("metadata")
    if not isinstance(api_version, str) or not isinstance(kind_name, str) or not isinstance(metadata, Mapping):
        raise WorkloadExplainError("the object has no apiVersion, kind or metadata")
    kind = kind_of(api_version, kind_name)
    if kind is None:
        shown = clean_text(f"{kind_name} ({api_version})", 120)
        raise WorkloadExplainError(f"{shown} is not a workload kind fabriccap knows (docs/workloads.md)")
    namespace, name = object_namespace(metadata.get("namespace")), object_name(metadata.get("name"))
    return api_version, kind, metadata, (group_kind(group_of(api_version), kind.kind), namespace, name)


def owner_reads(body: Mapping[str, Any], index: FactIndex) -> tuple[list[LookupKey], list[LookupKey]]:
    """The owner reads ``explain_workload`` of ``body`` lacks, as ``owner_chain`` names them: the
    one that takes the object's own chain of owners one further, and those of the pods it may
    count (its namespace's bound pods, those named after it first: a controller names its pods
    after itself, so under a bound on reads they are the likeliest to be its own). A live explain
    reads them, then asks again, until none is lacking."""
    _, kind, metadata, identity = _parsed(body)
    _, namespace, name = identity
    own = _owners_above(kind, identity, metadata, index)[1]
    bound = [pod for pod in index.workload_pods.values() if pod.namespace == namespace and pod.node_name is not None]
    bound.sort(key=lambda pod: (not pod.name.startswith(f"{name}-"), pod.name))
    pods = [missing for pod in bound if (missing := owner_chain(pod.owner, index, None)[1]) is not None]
    return own, pods


def _labelled_owner(kind: WorkloadKind, metadata: Mapping[str, Any], namespace: str) -> ObjectRef | None:
    """The workload the object's own label names, for a kind its pods are routed through by that
    label (a LeaderWorkerSet's StatefulSet carries the LWS's name, as its pods do)."""
    route = OWNER_LABELS.get((kind.group, kind.kind))
    labels = metadata.get("labels")
    named = labels.get(route[1].name_label) if route is not None and isinstance(labels, Mapping) else None
    if route is None or not isinstance(named, str) or not is_object_name(named):
        return None
    return ObjectRef.shared(route[0].api_version, route[0].kind, namespace, named, "")


def _pods_name_only(top: ObjectRef | None, api_version: str, kind: WorkloadKind) -> bool:
    """Whether the explained object is a controller whose pods name its workload by a label (a
    JobSet's batch Job, a LeaderWorkerSet's StatefulSet): their owners are read from that label,
    so no pod's owners name this object, and its pods are known only as the workload's."""
    route = OWNER_LABELS.get((group_of(api_version), kind.kind))
    return top is not None and route is not None and top.group_kind == route[0].group_kind


def _is_own(
    pod: WorkloadPodFacts,
    kind: WorkloadKind,
    identity: tuple[str, str, str],
    metadata: Mapping[str, Any],
    counted_as: ObjectRef | None,
    under: Collection[NamespacedKey],
    index: FactIndex,
) -> bool:
    """Whether ``pod`` is the explained object's: the pod itself (by name, and uid where both
    tell one), or one whose owners, from its nearest to its top, include the object (``under``:
    ``FactIndex.pods_under`` the object, as deep as the chain goes, as ``_owners_above`` walks it)."""
    _, namespace, name = identity
    if pod.namespace != namespace:
        return False
    if kind.is_its_own_pod:
        uid = metadata.get("uid")
        return pod.name == name and not (pod.uid and isinstance(uid, str) and uid and uid != pod.uid)
    if counted_as is not None:
        return top_owner(pod, index)[0].key == counted_as.key
    return (pod.namespace, pod.name) in under


def _uncounted(
    own: Iterable[WorkloadPodFacts], namespace: str, index: FactIndex, unread: Mapping[tuple[str, str, str], str]
) -> str | None:
    """Said when pods of the namespace may be the object's but are not counted: their chain of
    owners ends at one the live read could not read (the first such owner's why is shown)."""
    counted = {(pod.namespace, pod.name) for pod in own}
    reasons = [
        unread[top.key]
        for pod in index.workload_pods.values()
        if pod.namespace == namespace and pod.node_name is not None and (pod.namespace, pod.name) not in counted
        if (top := owner_chain(pod.owner, index, None)[0][-1]).key in unread
    ]
    if not reasons:
        return None
    return f"{len(reasons)} other pods of {namespace} are not counted: their owners could not be read ({reasons[0]})"


def _round_once(explained: str, identity: tuple[str, str, str], owners: Sequence[ObjectRef]) -> str:
    """A looped chain of owners once round: from the explained object up to the first owner
    named again, its first ``MAX_LOOP_SHOWN`` objects and the others counted (names are
    cleaned where the facts are made)."""
    members, seen = [explained], {identity}
    closing = ""
    for owner in owners:
        shown = f"{owner.kind} {owner.namespace}/{owner.name}"
        if owner.key in seen:
            closing = shown
            break
        members.append(shown)
        seen.add(owner.key)
    return f"{first_named(members, MAX_LOOP_SHOWN, ' → ')} → {closing}"


def _operator_top_below(own: Iterable[WorkloadPodFacts], top: ObjectRef, index: FactIndex) -> ObjectRef | None:
    """The owner the operator names for one of the object's pods instead of ``top``, where the
    chain is deeper than it walks (``MAX_OWNER_DEPTH``): the owner it stops at has ``top`` above
    it. None when every pod's is ``top``, or differs for another reason."""
    judged: dict[tuple[str, str, str], bool] = {}  # each owner the operator stops at, walked once
    for pod in own:
        stopped = top_owner(pod, index)[0]
        if stopped.key == top.key:
            continue
        if stopped.key not in judged:
            judged[stopped.key] = any(owner.key == top.key for owner in owner_chain(stopped, index, None)[0])
        if judged[stopped.key]:
            return stopped
    return None


def _request_field(kind: WorkloadKind, top: ObjectRef | None, owners: Sequence[ObjectRef]) -> str:
    if top is None:
        return f"{kind.kind}: {kind.request_field}"
    route = OWNER_LABELS.get((kind.group, kind.kind))
    template = route[1].pod_controlled_template if route is not None else None
    if (
        route is not None
        and template
        and top.group_kind == route[0].group_kind
        and any(owner.group_kind == POD.group_kind for owner in owners)
    ):
        # Its pods are made from the one template an object a pod controls is made from.
        return f"{top.kind}: {template}.spec.{TEMPLATE_RESOURCES}"
    top_kind = kind_of(top.api_version, top.kind)
    return f"{top.kind}: {top_kind.request_field if top_kind is not None else UNKNOWN_REQUEST_FIELD}"


def _change_on_owner(
    kind: WorkloadKind,
    namespace: str,
    name: str,
    top: ObjectRef,
    field: str,
    request: tuple[str, str],
    held: Collection[tuple[str, str, str]] | None,
    unread: Mapping[tuple[str, str, str], str],
) -> tuple[str, str]:
    """The change for an object a higher workload makes (a JobSet's Job or Pod): that owner
    makes it again from its own template, so the request is set there (``field``), not on this
    object. ``request``: what to request, and how much of it (said after where). An owner the
    snapshots do not hold is said to be missing, with the read that adds it: its explain would
    fail on them; one the live read could not read, with why: what owns it, the object to
    change, is unknown."""
    what, amount = request
    top_kind = kind_of(top.api_version, top.kind)
    shown = f"{top.kind} {top.namespace}/{top.name}"
    where = field.partition(": ")[2]
    if top_kind is not None:
        command = f"fabriccap explain {shlex.quote(f'{_resource_of(top_kind)}/{top.namespace}/{top.name}')}"
        change = command
        if held is not None and top.key not in held:
            # Its own owner, if it has one, is unknown too: the walk stopped at it for want of it.
            also = " and what owns it" if top.group_kind in OWNER_LOOKUP_KINDS else ""
            plural = _resource_of(top_kind)
            read = f"kubectl get {plural} {shlex.quote(top.name)} -n {shlex.quote(top.namespace)} -o json"
            change = f"{shown} is not in the snapshots: add it{also} ({read}), then {command}"
        elif top.key in unread:
            change = f"{shown} could not be read ({unread[top.key]}), nor what owns it: once it can be, {command}"
        where = f"{where} ({command} prints the change)"
    else:
        change = f"set {what} in the pod template of {shown}, as the note says"
    note = (
        f"{kind.kind} {namespace}/{name} belongs to {shown}, which makes it from its own template: "
        f"request {what} in {shown}'s {where}{amount}"
    )
    return change, note


def _not_used(pods: Sequence[PodExplanation], fabric: str, resource: str) -> str | None:
    """What the FabricNotUsed Event says, for this workload: its pods request the fabric and NCCL
    chose another network (the first such pod by name, with its evidence and the likely cause)."""
    unused = [pod for pod in pods if pod.requests_fabric and pod.transport in NOT_USED_VERDICTS]
    if not unused:
        return None
    first = unused[0]
    instead = nccl_uses(fabric, first.transport, first.name, first.evidence)
    return f"{len(unused)} of its pods request {resource} but {instead}"
