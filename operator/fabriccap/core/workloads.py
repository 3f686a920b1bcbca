"""Who on a pool asks for the fabric, and who does not. Pure, like the evaluation it is part of.

A pod bound to a pool's node is one of three things for a fabric: it requests the fabric (the
extended resource, or a ResourceClaim of the profile's DeviceClass); it requests an accelerator
but not the fabric while the pool advertises it, so NCCL falls back to TCP sockets; or it sets
fabric environment (FI_PROVIDER=efa, an OFI NCCL_NET) without asking for the devices. Pods are
grouped by their top-level owner (a TrainJob, not its JobSet, Jobs and pods), which is also
where the Warning Events go, because that is the object a user wrote.

Some owners can only be known from the owner objects themselves (whose is this Job? this
JobSet?), and some claims only from their template. Those are *lookups*: the evaluation says
which it is missing; the operator reads each object once and the answer lands in the index.
Until then the nearest known owner stands in, and a pod whose claims are unknown is not judged.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fabriccap.core import api
from fabriccap.core.api import (
    FabricCapabilityStatus,
    Offender,
    PoolRef,
    ReadError,
    TransportCount,
    TransportStatus,
    WorkloadCount,
    WorkloadsStatus,
)
from fabriccap.core.config import FabricProfile, Source
from fabriccap.core.facts import (
    CLAIMS_UNALLOCATABLE,
    ClaimRef,
    ObjectRef,
    WorkloadPodFacts,
    claim_request_classes,
    controller_owner,
    insufficient_resources,
    object_name,
    object_namespace,
)
from fabriccap.core.index import FactIndex
from fabriccap.core.names import MAX_SUBDOMAIN_LENGTH, is_dns_subdomain
from fabriccap.core.references import RefusalHook
from fabriccap.core.selection import implicit_resource
from fabriccap.core.text import MAX_KIND, MAX_MESSAGE, MAX_UID, clean_text, first_named
from fabriccap.core.transport import Verdict
from fabriccap.core.verdicts import likely_cause
from fabriccap.core.workload_kinds import READ_FOR_OWNER, WorkloadKind, group_kind, group_of, request_field

MAX_OFFENDERS = api.MAX_OFFENDERS  # the status model's bound (api.py: how large a status can be)
MAX_OWNER_DEPTH = 4
WITHOUT_FABRIC = "withoutFabric"
INTENT_WITHOUT_REQUEST = "intentWithoutRequest"
FABRIC_NOT_REQUESTED = "FabricNotRequested"
FABRIC_UNSCHEDULABLE = "FabricUnschedulable"
# A workload that requests the fabric while NCCL chose sockets or another network: the
# offender's problem and its Event's reason (SPEC's spelling, as the round-3 problems are).
FABRIC_NOT_USED = "FabricNotUsed"
NOT_USED_VERDICTS = frozenset({Verdict.SOCKET, Verdict.OTHER})
MAX_READ_ERRORS = api.MAX_READ_ERRORS
# Hex digits of a problem's digest (``_event_key``): 64 bits, part of the Event's name since round 2.
EVENT_KEY_LENGTH = 16

# The kinds whose own owner is worth one read (core.workload_kinds: a Job may belong to a
# CronJob or an MPIJob's launcher, a JobSet to a TrainJob, a ReplicaSet to a Deployment), by
# ``Kind.group``. Any other kind is the top.
OWNER_LOOKUP_KINDS: dict[str, WorkloadKind] = {row.group_kind: row for row in READ_FOR_OWNER}
CLAIM_LOOKUP_KINDS: dict[str, str] = {
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "ResourceClaim": "resourceclaims",
}


@dataclass(frozen=True, order=True, slots=True)
class LookupKey:
    """An object to read once: an owner (for its own owner) or a claim (for its device classes)."""

    kind: str
    namespace: str
    name: str
    api_version: str = ""
    # The owner's generation the read is for (core.index ``owner_generation``): a re-created
    # LeaderWorkerSet's is another read, and an answer for an earlier one is not kept.
    generation: str = ""

    @property
    def is_claim(self) -> bool:
        # A pod names its claims by name only (ClaimRef): their kind is always resource.k8s.io's.
        return self.kind in CLAIM_LOOKUP_KINDS

    @property
    def owner_key(self) -> tuple[str, str, str]:
        """The index's key of the owner this lookup reads (``ObjectRef.key``)."""
        return (group_kind(group_of(self.api_version), self.kind), self.namespace, self.name)


def owner_chain(
    start: ObjectRef, index: FactIndex, max_depth: int | None = MAX_OWNER_DEPTH
) -> tuple[list[ObjectRef], LookupKey | None]:
    """``start`` and the owners above it, nearest first, as far as known, and the lookup that
    would go one further.

    The walk ends at the top, at an owner not yet read, after ``max_depth`` owners above
    ``start`` (the operator's bound: it reads a pod's owners that deep and no further, whatever
    is above), or at the first owner named again: owner references can loop (Job a owned by Job
    b owned by Job a), and that owner ends the chain so ``owner_loop`` tells it. Every step
    names an owner the walk has not seen, of the finitely many the index knows, so even without
    a bound (``explain``, which must name a loop of any length) the walk ends, in time linear in
    the chain's length."""
    chain = [start]
    seen: set[tuple[str, str, str]] = set()
    missing = None
    while max_depth is None or len(chain) <= max_depth:
        current = chain[-1]
        key = current.key  # computed once a step: this walk runs for every pod of every round
        if key in seen:
            break  # named again: the chain ends with it, once round the loop
        seen.add(key)
        if key[0] not in OWNER_LOOKUP_KINDS:
            break
        if key not in index.owner_parents:
            generation = index.owner_generation(key)
            missing = LookupKey(current.kind, current.namespace, current.name, current.api_version, generation)
            break
        parent = index.owner_parents[key]
        if parent is None:
            break
        chain.append(parent)
    return chain, missing


def owner_loop(chain: Sequence[ObjectRef]) -> bool:
    """Whether an ``owner_chain`` names one owner twice: its owners go round a loop, and the
    owner it ends at is one of the loop, not a top."""
    return len({owner.key for owner in chain}) < len(chain)


def top_owner(pod: WorkloadPodFacts, index: FactIndex) -> tuple[ObjectRef, LookupKey | None]:
    """The pod's top-level owner as far as known (with the uid its read told, where the pod
    named it without one), and the lookup that would go one further."""
    chain, missing = owner_chain(pod.owner, index)
    current = chain[-1]
    uid = index.owner_uids.get(current.key) if not current.uid else None
    return (current._replace(uid=uid) if uid else current), missing


def claims_fabric(
    pod: WorkloadPodFacts, profile: FabricProfile, index: FactIndex, *, held_by_job: bool = False
) -> tuple[bool, list[LookupKey]]:
    """Whether one of the pod's claims asks for one of the fabric's DeviceClasses (the claim the
    scheduler made for an extended resource served from DRA included); the claims not yet known.

    What the scheduler must fit is every claim. With ``held_by_job``, whose fabric it is: only
    what an app container or a sidecar holds, as for a resource (``requests_fabric``). A claim,
    or the part of the scheduler's claim, that only plain init containers hold ends with them
    (``WorkloadPodFacts.init_claims``)."""
    device_classes = frozenset(profile.dra.device_class_names) if profile.uses(Source.DRA) else frozenset()
    unknown = []
    for claim in pod.claims:
        job_requests = pod.job_requests_of(claim) if held_by_job and pod.init_claims else None
        if job_requests is not None and not job_requests:
            continue  # only plain init containers hold it
        classes = index.claim_classes.get(claim)
        if classes is None:
            unknown.append(LookupKey(claim.kind, claim.namespace, claim.name, "resource.k8s.io/v1"))
            continue
        if job_requests is not None:
            classes = index.classes_of_requests(claim, job_requests)
        if classes & device_classes:
            return True, []
    return False, unknown


def fabric_request_resources(profile: FabricProfile) -> tuple[str, ...]:
    """The extended resources a request of which asks for the fabric: the profile's resource and,
    where it uses DRA, each fabric DeviceClass's implicit one (KEP-5004:
    ``deviceclass.resource.kubernetes.io/<class>``, which the scheduler serves from the class's
    devices). The admission policy's warning reads the same list (observability.admission)."""
    implicit = (implicit_resource(name) for name in profile.dra.device_class_names)
    return (profile.resource, *(implicit if profile.uses(Source.DRA) else ()))


def log_is_read(pod: WorkloadPodFacts) -> bool:
    """Whether the operator reads ``pod``'s logs (``controller.logreader``, and a live
    ``fabriccap evaluate``): it requests the fabric or an accelerator (a resource some profile
    cares about, or a claim). Only its running accelerator containers (``pod.containers``) are
    read: a pod none of whose runs yet has nothing to read."""
    return bool(pod.requests) or bool(pod.claims)


def requests_fabric(pod: WorkloadPodFacts, profile: FabricProfile) -> bool:
    """Whether the pod asks for the fabric as an extended resource (``fabric_request_resources``)
    in an app container or a sidecar. One only a plain init container asks for (a preflight
    check) is reserved by the scheduler, but the trainer holds none of it and NCCL uses sockets
    (``WorkloadPodFacts.requested_by_app``)."""
    return any(pod.requested_by_app(resource) for resource in fabric_request_resources(profile))


@dataclass(frozen=True, slots=True)
class PodUse:
    fabric: bool
    accelerator: bool
    intent: bool
    unknown: bool  # a claim not yet read: the pod is not judged


def pod_use(pod: WorkloadPodFacts, profile: FabricProfile, index: FactIndex) -> tuple[PodUse, list[LookupKey]]:
    by_claim, unknown = claims_fabric(pod, profile, index, held_by_job=True)
    fabric = requests_fabric(pod, profile) or by_claim
    # The job's own containers' accelerators, as for the fabric (``requested_by_app``): a CPU
    # service whose init container checks a GPU runs no NCCL. Fitting (FabricUnschedulable)
    # goes by the effective request, init containers included.
    accelerator = any(pod.requested_by_app(resource) for resource in profile.target_nodes.accelerator_resources)
    use = _POD_USES[(fabric, accelerator, profile.name in pod.intent, bool(unknown) and not fabric)]
    return use, unknown


# Sixteen uses in all: one object each, shared by every pod judged (20,000 at 10,000 nodes).
_POD_USES = {
    (fabric, accelerator, intent, unknown): PodUse(fabric, accelerator, intent, unknown)
    for fabric in (False, True)
    for accelerator in (False, True)
    for intent in (False, True)
    for unknown in (False, True)
}


@dataclass(frozen=True, slots=True)
class PodTransportView:
    """What NCCL chose in one pod, for one fabric, as the pool's status and Events tell it."""

    pod: str  # namespace/name
    verdict: Verdict
    evidence: str
    reason: str  # why its log could not be read, if it could not


@dataclass(frozen=True, slots=True)
class PodJudgement:
    """One pod, for one fabric: its use, its top-level owner as far as known, and the lookups
    that would tell more. It changes only with the pod's facts or a lookup's answer about it
    (the index's ``workload_versions``), which is what lets the operator keep it."""

    use: PodUse
    owner: ObjectRef
    lookups: tuple[LookupKey, ...]
    version: int = 0  # the pod's workload version in the index when it was judged
    node: str | None = None  # the node it is bound to
    # What its log says NCCL chose (config.transport); None while it has not been read.
    transport: PodTransportView | None = None


def judge_pod(pod: WorkloadPodFacts, profile: FabricProfile, index: FactIndex, version: int = 0) -> PodJudgement:
    use, unknown = pod_use(pod, profile, index)
    owner, missing = top_owner(pod, index)
    read = index.transport.get((pod.namespace, pod.name))
    chosen = read.of(profile.name) if read is not None else None
    transport = None
    if read is not None:
        verdict, evidence = (chosen.verdict, chosen.evidence) if chosen is not None else (Verdict.UNKNOWN, "")
        transport = PodTransportView(f"{pod.namespace}/{pod.name}", verdict, evidence, read.reason)
    lookups = (*unknown, missing) if missing is not None else tuple(unknown)
    return PodJudgement(use, owner, lookups, version, pod.node_name, transport)


@dataclass(frozen=True, slots=True)
class NotUsed:
    """A workload whose pods request the fabric while NCCL chose another network: its pods,
    and the first of them (by name) with its evidence, for the Event."""

    owner: ObjectRef
    pods: int
    example: PodTransportView


@dataclass(frozen=True, slots=True)
class PoolWorkloads:
    status: WorkloadsStatus
    # Every owner whose pods run without the fabric (not only the first 20), with their pods.
    without_fabric: tuple[tuple[ObjectRef, int], ...]
    lookups: frozenset[LookupKey]
    # The nodes each of those owners' pods run on.
    without_fabric_nodes: Mapping[ObjectRef, frozenset[str]] = field(default_factory=dict)
    # Every owner that requests the fabric and does not use it (config.transport).
    not_used: tuple[NotUsed, ...] = ()


def _owner_sort_key(owner: ObjectRef) -> tuple[str, str, str]:
    return (owner.namespace, owner.kind, owner.name)


@dataclass(slots=True)
class _TransportTally:
    """Pods and owners per verdict, over the pods that request the fabric or an accelerator."""

    pods: dict[Verdict, int]
    owners: dict[Verdict, set[ObjectRef]]
    fabric_pods: dict[Verdict, int]
    read_errors: dict[str, int]
    not_used: dict[ObjectRef, int]
    examples: dict[ObjectRef, PodTransportView]

    @classmethod
    def empty(cls) -> _TransportTally:
        return cls({}, {}, {}, {}, {}, {})

    def add(self, judgement: PodJudgement) -> None:
        use, view = judgement.use, judgement.transport
        verdict = view.verdict if view is not None else Verdict.UNKNOWN
        self.pods[verdict] = self.pods.get(verdict, 0) + 1
        self.owners.setdefault(verdict, set()).add(judgement.owner)
        if use.fabric:
            self.fabric_pods[verdict] = self.fabric_pods.get(verdict, 0) + 1
        if view is None:
            return
        if verdict is Verdict.UNKNOWN and view.reason:
            self.read_errors[view.reason] = self.read_errors.get(view.reason, 0) + 1
        if use.fabric and verdict in NOT_USED_VERDICTS:
            owner = judgement.owner
            self.not_used[owner] = self.not_used.get(owner, 0) + 1
            known = self.examples.get(owner)
            if known is None or view.pod < known.pod:
                self.examples[owner] = view

    def status(self) -> TransportStatus:
        def count(verdict: Verdict) -> TransportCount:
            return TransportCount(
                pods=self.pods.get(verdict, 0),
                workloads=len(self.owners.get(verdict, ())),
                requesting_fabric_pods=self.fabric_pods.get(verdict, 0),
            )

        errors = heapq.nsmallest(MAX_READ_ERRORS, self.read_errors.items(), key=lambda item: (-item[1], item[0]))
        return TransportStatus(
            fabric=count(Verdict.FABRIC),
            socket=count(Verdict.SOCKET),
            other=count(Verdict.OTHER),
            none=count(Verdict.NONE),
            unknown=count(Verdict.UNKNOWN),
            read_errors=[ReadError(reason=reason, pods=pods) for reason, pods in errors],
        )


def pool_workloads(judgements: Iterable[PodJudgement], offers: bool, transport: bool = False) -> PoolWorkloads:
    """``status.workloads`` of one (fabric, pool) from its pods' judgements (``judge_pod`` of
    each pod bound to its target nodes); with ``transport``, what their NCCL chose too.
    ``offers``: the pool offers the fabric (some node advertises it, its NodePool can launch it,
    or its nodes' types carry it), so an accelerator pod that asks for none is ``withoutFabric``."""
    requesting: dict[ObjectRef, int] = {}
    without: dict[ObjectRef, int] = {}
    without_nodes: dict[ObjectRef, set[str]] = {}
    intent: dict[ObjectRef, int] = {}
    lookups: set[LookupKey] = set()
    tally = _TransportTally.empty() if transport else None
    for judgement in judgements:
        use, owner = judgement.use, judgement.owner
        if judgement.lookups:
            lookups.update(judgement.lookups)
        if use.unknown:
            continue
        if use.fabric:
            requesting[owner] = requesting.get(owner, 0) + 1
        elif use.accelerator and offers:
            without[owner] = without.get(owner, 0) + 1
            if judgement.node is not None:
                without_nodes.setdefault(owner, set()).add(judgement.node)
        if use.intent and not use.fabric:
            intent[owner] = intent.get(owner, 0) + 1
        if tally is not None and (use.fabric or use.accelerator):
            tally.add(judgement)

    def count(group: Mapping[ObjectRef, int]) -> WorkloadCount:
        return WorkloadCount(pods=sum(group.values()), workloads=len(group))

    # Sorted as plain tuples, and only the first MAX_OFFENDERS made into models: a pool can
    # have hundreds of offenders, and this runs for every pool a pod churn touches.
    first = heapq.nsmallest(
        MAX_OFFENDERS,
        (
            (owner.namespace, owner.kind, owner.api_version, owner.name, problem, pods)
            for problem, group in (
                (WITHOUT_FABRIC, without),
                (INTENT_WITHOUT_REQUEST, intent),
                (FABRIC_NOT_USED, tally.not_used if tally is not None else {}),
            )
            for owner, pods in group.items()
        ),
    )
    offenders = [
        Offender(namespace=namespace, kind=kind, api_version=api_version, name=name, pods=pods, problem=problem)
        for namespace, kind, api_version, name, problem, pods in first
    ]
    status = WorkloadsStatus(
        requesting_fabric=count(requesting),
        without_fabric=count(without),
        intent_without_request=count(intent),
        transport=tally.status() if tally is not None else None,
        offenders=offenders,
    )
    without_fabric = tuple(sorted(without.items(), key=lambda item: _owner_sort_key(item[0])))
    not_used = (
        tuple(
            NotUsed(owner, pods, tally.examples[owner])
            for owner, pods in sorted(tally.not_used.items(), key=lambda item: _owner_sort_key(item[0]))
        )
        if tally is not None
        else ()
    )
    return PoolWorkloads(
        status=status,
        without_fabric=without_fabric,
        lookups=frozenset(lookups),
        without_fabric_nodes={owner: frozenset(nodes) for owner, nodes in without_nodes.items()},
        not_used=not_used,
    )


# -- Events on the top-level owners


@dataclass(frozen=True, slots=True)
class WorkloadEvent:
    """A Warning Event to record once on a workload's top-level owner."""

    involved: ObjectRef
    reason: str
    # The message, or the words of its pool that make it when it is sent, with this owner's
    # ``pods`` and ``launched`` nodes (``NotRequestedWording``).
    text: str | NotRequestedWording
    # Identifies the problem across restarts (a digest, ``_event_key``; it names the Event): the
    # same problem of the same object is recorded once, whatever its pod count does.
    key: str
    pods: int = 0
    launched: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        if isinstance(self.text, str):
            return self.text
        return self.text.message(self.involved, self.pods, self.launched)

    @property
    def event_name(self) -> str:
        """``<owner name>.fabriccap-<digest of the key>``, or ``fabriccap-<digest>`` where the
        owner's name would not make a valid one: an Event name must be a DNS subdomain, and an
        owner's name is whatever its creator wrote (an invalid name made every POST a 422)."""
        suffix = f"fabriccap-{self.key}"
        prefix = self.involved.name[: MAX_SUBDOMAIN_LENGTH - len(suffix) - 1].rstrip("-.")
        readable = f"{prefix}.{suffix}"
        return readable if is_dns_subdomain(readable) else suffix


def problems_present(workloads: Mapping[str, Any]) -> frozenset[str]:
    """The kinds of workload problem a pool's published ``status.workloads`` shows: pods without
    the fabric, pods that mean to use it without requesting it, pods that request it while NCCL
    chose another network. From the counts, not the offenders: that list is cut at
    MAX_OFFENDERS, in name order."""

    def pods(field: Any, key: str = "pods") -> int:
        value = field.get(key) if isinstance(field, Mapping) else None
        return value if isinstance(value, int) else 0

    transport = workloads.get("transport")
    verdicts = transport if isinstance(transport, Mapping) else {}
    present = {
        WITHOUT_FABRIC: pods(workloads.get(WITHOUT_FABRIC)) > 0,
        INTENT_WITHOUT_REQUEST: pods(workloads.get(INTENT_WITHOUT_REQUEST)) > 0,
        FABRIC_NOT_USED: any(pods(verdicts.get(verdict), "requestingFabricPods") > 0 for verdict in NOT_USED_VERDICTS),
    }
    return frozenset(problem for problem, shown in present.items() if shown)


def _event_key(reason: str, owner: ObjectRef, *parts: str) -> str:
    """The problem's digest: it names the Event, and the outbox keys the problem by it. The
    text it digests (~180 B: the reason, the owner's uid, kind, namespace and name, the pool) was
    held as the key itself, once per owner in the queue and again in the sent record, where
    16 characters do the same work."""
    problem = "/".join((reason, owner.uid or "", owner.kind, owner.namespace, owner.name, *parts))
    return hashlib.sha256(problem.encode(errors="replace")).hexdigest()[:EVENT_KEY_LENGTH]


def recommended_claim(status: FabricCapabilityStatus) -> api.ExactDeviceRequest | None:
    """The ResourceClaim a workload asks for on the pool instead of the extended resource: the
    recommendation's template where the extended resource schedules on no node of it (no
    ``resourcesPerNode``: the pool offers the fabric only through DRA). The admission policy's
    ``request`` variable is this rule in CEL."""
    recommendation = status.recommendation
    if recommendation is None or recommendation.resources_per_node or recommendation.resource_claim_template is None:
        return None
    (device_request,) = recommendation.resource_claim_template.spec.devices.requests
    return device_request.exactly


def claim_words(exactly: api.ExactDeviceRequest) -> str:
    """A recommended claim, as FabricNotRequested and the admission warning say it."""
    return f"a ResourceClaim of DeviceClass {exactly.device_class_name} for {exactly.count} devices per node"


def _per_node_request(profile: FabricProfile, status: FabricCapabilityStatus) -> str:
    """What to ask for on this pool, in words."""
    recommendation = status.recommendation
    count = status.uniform_count
    if recommendation is not None and recommendation.resources_per_node:
        ((resource, amount),) = recommendation.resources_per_node.items()
        request = f"{resource}: {amount} per node"
        if recommendation.resource_claim_template is not None:
            request += f", or a ResourceClaim of DeviceClass {profile.dra.device_class_name} for {amount} devices"
        return request
    if (claim := recommended_claim(status)) is not None:
        return claim_words(claim)
    return f"{profile.resource}{f': {count}' if count else ''} per node"


def not_requested_key(fabric: str, owner: ObjectRef, pool: PoolRef) -> str:
    """What names a FabricNotRequested problem (and its Event), without building the message."""
    return _event_key(FABRIC_NOT_REQUESTED, owner, fabric, pool.key, pool.value)


@dataclass(frozen=True, slots=True)
class NotRequestedWording:
    """What the FabricNotRequested messages of one pool share, from its status as evaluated:
    made once per pool and round, and held by each of its owners' Events, whose message is
    worded from it only when the Event is sent. A start queues one Event per owner without the
    fabric and sends 20 a second (controller.events), so at 10,000 such owners the messages
    (~260 B each) waited in the queue for minutes, 2.5 MiB of them."""

    fabric: str
    resource: str
    spoken_name: str
    capability_name: str
    pool: PoolRef
    # ``<resource>: <count>`` while the pool is Ready with a uniform count; None otherwise.
    ready_offer: str | None
    per_node_request: str
    not_ready_reason: str
    # What a node of the pool gets when a pod asks (a Karpenter pool's launches); None: unknown.
    launch_count: int | None
    # Why the pool's NodePool gives the fabric to no node however a pod asks (launch_refusal), or
    # None when asking may get it: a node it launched without the fabric is then the job's doing.
    refusal: str | None = None

    def event(self, owner: ObjectRef, pods: int, launched: Sequence[str] = ()) -> WorkloadEvent:
        key = not_requested_key(self.fabric, owner, self.pool)
        return WorkloadEvent(owner, FABRIC_NOT_REQUESTED, self, key, pods, tuple(launched))

    def message(self, owner: ObjectRef, pods: int, launched: Sequence[str]) -> str:
        where = request_field(owner.api_version, owner.kind)
        running = f"runs {pods} pod{'s' if pods != 1 else ''} on pool {self.pool.value}"
        if launched:
            shown = first_named(launched, 3)
            if self.refusal is not None:
                # Asking would not help: the node would not get the fabric, or would not launch.
                return (
                    f"Karpenter launched {shown} without {self.spoken_name}, and requesting {self.resource} would"
                    f" not change that: {self.refusal}; see kubectl describe fcap {self.capability_name}; it"
                    f" {running}, and NCCL will use TCP sockets"
                )
            request = f"{self.resource}: {self.launch_count}" if self.launch_count else self.resource
            return (
                f"Karpenter launched {shown} without {self.spoken_name} because this job requested none; "
                f"request {request} ({owner.kind}: {where}); it {running}, and NCCL will use TCP sockets"
            )
        if self.ready_offer is not None:
            return (
                f"{running} where {self.ready_offer} is Ready, but requests none: NCCL will use TCP sockets; "
                f"request {self.per_node_request} ({owner.kind}: {where})"
            )
        return (
            f"{running} where {self.resource} is advertised (the pool is not Ready: {self.not_ready_reason}), "
            f"but requests none: NCCL will use TCP sockets; once the pool is Ready (kubectl describe fcap "
            f"{self.capability_name}), request {self.resource} per node ({owner.kind}: {where})"
        )


def not_requested_wording(
    profile: FabricProfile,
    capability_name: str,
    status: FabricCapabilityStatus,
    launch_count: int | None = None,
    refusal: str | None = None,
) -> NotRequestedWording:
    """FabricNotRequested's words for the pool of ``status``: the owners' pods run on a pool
    that offers the fabric and ask for none. ``launch_count``: what a node of the pool gets when
    a pod asks, which the message names where Karpenter launched nodes without the fabric;
    ``refusal``: why its NodePool would not attach it anyway (``launch_refusal``)."""
    ready = status.is_ready and status.uniform_count is not None
    ready_condition = status.condition("Ready")
    return NotRequestedWording(
        fabric=profile.name,
        resource=profile.resource,
        spoken_name=profile.spoken_name,
        capability_name=capability_name,
        pool=status.pool,
        ready_offer=f"{profile.resource}: {status.uniform_count}" if ready else None,
        per_node_request=_per_node_request(profile, status) if ready else "",
        not_ready_reason=ready_condition.reason if ready_condition is not None else "NotReady",
        launch_count=launch_count,
        refusal=refusal,
    )


def not_used_key(profile: FabricProfile, owner: ObjectRef, pool: PoolRef, verdict: Verdict) -> str:
    """What names a FabricNotUsed problem (and its Event): a workload that goes from sockets to
    another network is a new problem, with an Event of its own."""
    return _event_key(FABRIC_NOT_USED, owner, profile.name, pool.key, pool.value, verdict.value)


CHOSE = {Verdict.SOCKET: "TCP sockets", Verdict.OTHER: "another network"}


def nccl_uses(fabric: str, verdict: Verdict, pod: str, evidence: str) -> str:
    """What NCCL chose instead of the fabric, the log line of one pod that shows it, and the
    likely cause: the FabricNotUsed Event's words, which ``explain KIND/NS/NAME`` repeats."""
    cause = likely_cause(fabric, verdict, evidence)
    return f'NCCL uses {CHOSE[verdict]} (pod {pod}: "{evidence}"); likely cause: {cause}'


def not_used_event(profile: FabricProfile, status: FabricCapabilityStatus, found: NotUsed) -> WorkloadEvent:
    """FabricNotUsed: the owner's pods request the fabric and NCCL chose sockets or another
    network. The message names one pod, the line of its log that shows it, and the likely cause."""
    example = found.example
    pods = f"{found.pods} pod on" if found.pods == 1 else f"{found.pods} pods on"
    request = "requests" if found.pods == 1 else "request"
    message = (
        f"{pods} pool {status.pool.value} {request} {profile.resource} but "
        f"{nccl_uses(profile.name, example.verdict, example.pod, example.evidence)}"
    )
    return WorkloadEvent(
        involved=found.owner,
        reason=FABRIC_NOT_USED,
        text=message,
        key=not_used_key(profile, found.owner, status.pool, example.verdict),
    )


# -- Pods no node can take


@dataclass(frozen=True, slots=True)
class UnschedulableGroup:
    """Pods of one top-level owner that request a fabric no node can give them now."""

    owner: ObjectRef
    fabric: str
    pods: int
    per_pod: int  # the extended resource each pod requests; 0 when it asks through a claim
    scheduler_message: str


def unschedulable_groups(
    profiles: Iterable[FabricProfile], index: FactIndex
) -> tuple[tuple[UnschedulableGroup, ...], frozenset[LookupKey]]:
    """Pending pods the scheduler gave up on for lack of the fabric (PodScheduled=False,
    Unschedulable, a message naming the resource, or the claims it could not allocate)."""
    found: dict[tuple[str, ObjectRef], list[WorkloadPodFacts]] = {}
    lookups: set[LookupKey] = set()
    profile_list = list(profiles)
    for key in sorted(index.unscheduled_pods):
        pod = index.workload_pods[key]
        message = pod.unschedulable or ""
        for profile in profile_list:
            by_claim, unknown = claims_fabric(pod, profile, index)
            lookups.update(unknown)
            short = profile.resource in insufficient_resources(message) and pod.request_of(profile.resource) > 0
            claimed = by_claim and CLAIMS_UNALLOCATABLE in message
            if short or claimed:
                owner, missing = top_owner(pod, index)
                if missing is not None:
                    lookups.add(missing)
                found.setdefault((profile.name, owner), []).append(pod)
    groups = tuple(
        UnschedulableGroup(
            owner=owner,
            fabric=fabric,
            pods=len(pods),
            per_pod=max(pod.request_of(next(p for p in profile_list if p.name == fabric).resource) for pod in pods),
            scheduler_message=pods[0].unschedulable or "",
        )
        for (fabric, owner), pods in sorted(found.items(), key=lambda item: (item[0][0], _owner_sort_key(item[0][1])))
    )
    return groups, frozenset(lookups)


@dataclass(frozen=True, slots=True)
class ReadyPool:
    """A pool that is Ready for a fabric, for the messages that say where a request would fit."""

    fabric: str
    pool_key: str
    pool_value: str
    uniform_count: int


def ready_count(status: Mapping[str, Any]) -> int | None:
    """What one node of a Ready pool gives a pod, for the messages that say where a request would
    fit: its nodes' one count, or on an empty NodePool pool that is Ready from its catalog, the one
    count every type it may launch gets (SPEC "Elastic pools"; its ``uniformCount`` is absent).
    Karpenter launches such a node for the pending pod, so that pool can take the request as much
    as one whose nodes are up. None: the status gives no one count."""
    count = status.get("uniformCount")
    if count is None and status.get("nodes") == 0:
        launchable = status.get("launchable")
        counts = launchable.get("counts") if isinstance(launchable, Mapping) else None
        if isinstance(counts, list) and len(counts) == 1 and isinstance(counts[0], Mapping):
            count = counts[0].get("count")
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def unschedulable_key(profile: FabricProfile, owner: ObjectRef) -> str:
    """What names a FabricUnschedulable problem (and its Event), without building the message."""
    return _event_key(FABRIC_UNSCHEDULABLE, owner, profile.name)


def unschedulable_event(profile: FabricProfile, group: UnschedulableGroup, ready: Iterable[ReadyPool]) -> WorkloadEvent:
    """FabricUnschedulable: the message names the pools that could take the request, or says none can."""
    asked = f"{profile.resource}: {group.per_pod}" if group.per_pod else f"a ResourceClaim of {profile.name} devices"
    fitting = sorted(
        (pool for pool in ready if pool.fabric == profile.name and pool.uniform_count >= group.per_pod),
        key=lambda pool: (pool.pool_value, pool.pool_key),
    )
    pods = f"{group.pods} pod{'s' if group.pods != 1 else ''}"
    if fitting:
        names = ", ".join(f"{pool.pool_value} ({pool.pool_key}={pool.pool_value})" for pool in fitting[:5])
        more = f" and {len(fitting) - 5} more" if len(fitting) > 5 else ""
        where = f"pools where {profile.resource} is Ready with enough per node: {names}{more}"
    else:
        where = f"no pool has {profile.resource} Ready with {group.per_pod or 'the claimed number'} or more per node"
    lead, tail = f"{pods} request {asked} and cannot be scheduled (", f"); {where}"
    # The scheduler's words are cut, not what fabriccap adds after them: the Event's message is
    # bounded (MAX_MESSAGE), and a long FitError pushed out the pools that could take the job.
    quote = clean_text(group.scheduler_message.strip(), max(MAX_MESSAGE - len(lead) - len(tail), 0))
    message = f"{lead}{quote}{tail}"
    return WorkloadEvent(
        involved=group.owner,
        reason=FABRIC_UNSCHEDULABLE,
        text=message,
        key=unschedulable_key(profile, group.owner),
    )


def owner_of(
    body: Mapping[str, object], kind: str, namespace: str, refused: RefusalHook | None = None
) -> ObjectRef | None:
    """An owner object's own controller owner, read from its body or its metadata alone (a
    PartialObjectMetadata, whose kind is not the object's: ``kind`` is); None: it is the top.

    ``namespace`` is where the object was read, the pod's: whatever the body says, its owner
    is looked for there and nowhere else (an owner reference cannot name another namespace)."""
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    holder = f"{clean_text(kind or 'object', MAX_KIND)} {namespace}/{object_name(metadata.get('name'))}"
    return controller_owner(metadata, namespace, holder=holder, refused=refused)


def request_classes_of(body: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """The DeviceClasses a ResourceClaimTemplate (``spec.spec``) requests, or a ResourceClaim
    (``spec``) gives its pod, each with its request: once allocated, those its devices were
    allocated for (``facts.claim_request_classes``)."""
    spec = body.get("spec")
    if body.get("kind") == "ResourceClaimTemplate":
        return claim_request_classes(spec.get("spec") if isinstance(spec, Mapping) else None, None)
    return claim_request_classes(spec, body.get("status"))


def _read_uid(body: Mapping[str, object], identity: str) -> str:
    """The uid of an owner read, kept for the kinds whose pods may name them without one."""
    row, metadata = OWNER_LOOKUP_KINDS.get(identity), body.get("metadata")
    if row is None or not row.uid_from_read or not isinstance(metadata, Mapping):
        return ""
    uid = metadata.get("uid")
    return clean_text(uid, MAX_UID) if isinstance(uid, str) else ""


def learn_from_object(index: FactIndex, body: Mapping[str, object], refused: RefusalHook | None = None) -> bool:
    """Fill a lookup from an object at hand (a snapshot's Job, JobSet, claim template...)."""
    kind = body.get("kind")
    api_version = body.get("apiVersion")
    metadata = body.get("metadata")
    if not isinstance(kind, str) or not isinstance(api_version, str) or not isinstance(metadata, Mapping):
        return False
    namespace, name = object_namespace(metadata.get("namespace")), object_name(metadata.get("name"))
    identity = group_kind(group_of(api_version), kind)
    if identity in OWNER_LOOKUP_KINDS:
        parent = owner_of(body, kind, namespace, refused)
        return index.learn_owner((identity, namespace, name), parent, _read_uid(body, identity))
    if kind in CLAIM_LOOKUP_KINDS and group_of(api_version) == "resource.k8s.io":
        return index.learn_claim(ClaimRef(kind, namespace, name), request_classes_of(body))
    return False


def learn_lookup(
    index: FactIndex, key: LookupKey, body: Mapping[str, object] | None, refused: RefusalHook | None = None
) -> bool:
    """Put a lookup's answer in the index; no body (the object is gone, or unreadable) means
    no further owner, or a claim of no known class."""
    if key.is_claim:
        classes = request_classes_of(body) if body is not None else ()
        return index.learn_claim(ClaimRef(key.kind, key.namespace, key.name), classes)
    if body is None:
        return index.learn_owner(key.owner_key, None, generation=key.generation)
    parent = owner_of(body, key.kind, key.namespace, refused)
    return index.learn_owner(key.owner_key, parent, _read_uid(body, key.owner_key[0]), key.generation)
