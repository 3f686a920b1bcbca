"""The watched kinds, one row each: where they are listed, in which scope, how they become facts.

The operator's informers, ``fabriccap evaluate`` (live and from snapshots) and the tests all
go through this table, so a kind is read the same way everywhere, and none of them names a
kind: what differs between kinds is in the row. Adding a kind means adding a row here, a fact
extractor in ``fabriccap.core.facts`` and a ``Table`` in ``fabriccap.core.index`` (what a
change to its facts touches).

A row's facets say what an object of the kind becomes: a Node is one node fact; a Pod may be
a plugin pod, a workload pod, both or neither. Each facet extracts its facts from the body
(None: the object concerns no fabric, and whatever the facet held for it is removed, so
nothing lingers when, say, a pod loses its DaemonSet owner) and holds them in its table.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fabriccap.core.config import Config, Source
from fabriccap.core.facts import (
    ClaimFacts,
    FactsExtractor,
    NodeFacts,
    SliceFacts,
    object_name,
    object_namespace,
)
from fabriccap.core.index import (
    CLAIM_FACTS,
    DAEMON_SET_FACTS,
    DEVICE_CLASS_FACTS,
    NODE_CLAIM_FACTS,
    NODE_CLASS_FACTS,
    NODE_FACTS,
    NODE_POOL_FACTS,
    PLUGIN_POD_FACTS,
    SLICE_FACTS,
    TAINT_RULE_FACTS,
    WORKLOAD_POD_FACTS,
    FactIndex,
    Table,
)
from fabriccap.core.karpenter_facts import node_claim_facts, node_class_facts, node_pool_facts
from fabriccap.core.unlisted import UnlistedKeys
from fabriccap.kube.paths import (
    DAEMON_SETS,
    DEFAULT_PAGE_SIZE,
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    EC2_NODE_CLASSES,
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    ApiResource,
)
from fabriccap.kube.unread import LineRule, UnchangedRule, UnreadRule

FactsT = TypeVar("FactsT")

__all__ = [
    "BY_KIND",
    "BY_LABEL",
    "DEFAULT_PAGE_SIZE",
    "WATCHED_KINDS",
    "Facet",
    "Problem",
    "WatchedKind",
    "kinds_for",
    "listed_first",
]


def namespace_and_name(body: Mapping[str, Any]) -> tuple[str, str]:
    """An object's (namespace, name), cleaned and bounded as the facts keep them (so a deletion
    or a fresh LIST finds what was stored); "" for what it does not have."""
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        return "", ""
    namespace, name = metadata.get("namespace"), metadata.get("name")
    return (
        object_namespace(namespace) if isinstance(namespace, str) else "",
        object_name(name) if isinstance(name, str) else "",
    )


def object_key(body: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects: what a fresh LIST retains."""
    namespace, name = namespace_and_name(body)
    return f"{namespace}/{name}" if namespace else name


@dataclass(frozen=True, slots=True)
class Problem:
    """Something wrong in an object that the operator works around (failing its node closed),
    said once when it appears rather than at every event of the object."""

    level: int  # logging.ERROR or logging.WARNING
    message: str
    # A fault no API server lets through (a value that is not a quantity at all): a snapshot
    # that holds it is refused with this text instead (``fabriccap evaluate``).
    input_error: str | None = None


@dataclass(frozen=True)
class Facet(Generic[FactsT]):
    """One kind of fact an object becomes, and where it is held."""

    table: Table[Any, FactsT]
    # The facts of a body, or None: it concerns no fabric. Raises FactsError when the body is
    # unusable, IgnoredObjectError when it is well-formed but of no use.
    extract: Callable[[FactsExtractor, Mapping[str, Any]], FactsT | None]
    # What is wrong in facts that were kept anyway (logged when it changes).
    problems: Callable[[FactsT], tuple[Problem, ...]] = lambda _facts: ()
    # In place of ``extract``, for facts that depend on what the index holds (a slice is read
    # with the DeviceClasses as they stand, and its held facts are its memo).
    extract_in: Callable[[FactsExtractor, FactIndex, Mapping[str, Any]], FactsT | None] | None = None

    def upsert(self, index: FactIndex, extractor: FactsExtractor, body: Mapping[str, Any], key: Any) -> FactsT | None:
        """Hold the facts of ``body``, whose key in the table is ``key``."""
        facts = self.extract(extractor, body) if self.extract_in is None else self.extract_in(extractor, index, body)
        if facts is None:
            index.remove(self.table, key)
        else:
            index.put(self.table, facts)
        return facts


@dataclass(frozen=True)
class WatchedKind:
    label: str  # the `kind` label of the fabriccap_watch_* metrics, and in logs
    resource: ApiResource
    # Listed in every plugin namespace (True) or across the cluster (False).
    per_plugin_namespace: bool
    facets: tuple[Facet[Any], ...]
    # Served only from some Kubernetes version on (resource.k8s.io/v1: 1.34): an API server
    # without it is not an error, the kind is just not there.
    optional: bool = False
    # Why an optional kind may not be served, for the line that says so; and whether the
    # one-shot commands warn about it (a missing DRA API is news to a config that reads DRA;
    # a cluster without Karpenter is the common case, not a problem).
    absent_because: str = "resource.k8s.io/v1 needs Kubernetes >= 1.34"
    warn_when_absent: bool = True
    # Older API versions it is served in, newest first, after ``resource.version``: what is
    # read is the newest the API server serves (DeviceTaintRules: v1beta2, else v1alpha3).
    older_versions: tuple[str, ...] = ()
    # Whether a config needs this kind at all (ResourceSlices: only when a fabric reads DRA).
    wanted_by: Callable[[Config], bool] = lambda _config: True
    # Whether a config needs it cluster-wide even so (Pods, when workloads are reported).
    cluster_wide_for: Callable[[Config], bool] = lambda _config: False
    # Objects per LIST page: the page's JSON and its decoded form are the transient peak of a
    # listing, so it follows the object's size (a Node is 10-20 KB, a Pod 2-5 KB).
    page_size: int = DEFAULT_PAGE_SIZE
    # Two objects of this name in one offline input are an error: an API server holds one,
    # so two snapshots of different clusters were mixed (Nodes: their pools would merge).
    unique_in_snapshots: bool = False
    # Its facts are read with the DeviceClasses as they stand (ResourceSlices: which devices are
    # a fabric's): the classes are listed first, and a change to what they select lists this
    # kind again (controller.informers).
    read_with_classes: bool = False
    # Its objects decide what a ``read_with_classes`` kind's devices count as (DeviceClasses:
    # which are a fabric's; DeviceTaintRules: which are tainted): that kind is first listed
    # only once this one has been (``listed_first``).
    decides_devices: bool = False
    # Its objects decide which devices are a fabric's (DeviceClasses): after a change, the
    # informer says how the fabrics' classes stand (a class broken, or a copy standing in).
    says_selection: bool = False
    # Its objects belong to the pool of the node they are bound to (Pods): a shard of the
    # operator holds those of its own pools' nodes, and lists them again when a node's pool
    # moves into its share (core.shard).
    bound_to_nodes: bool = False
    # The text every object this kind keeps facts of holds (Pods: FactsExtractor.pod_marks):
    # an ADDED line with none of it is not decoded (kube.unread). None: every line is.
    unread_marks: Callable[[FactsExtractor], frozenset[str]] | None = None
    # Keys whose string values its facts never read, and which changes that move nothing else
    # move (Nodes: FactsExtractor.node_unread_keys, a heartbeat's): a MODIFIED line that differs
    # from the last one applied only there is not decoded (kube.unread).
    unchanged_keys: Callable[[FactsExtractor], frozenset[str]] | None = None

    def unread_rule(self, extractor: FactsExtractor) -> LineRule | None:
        """A new rule for one informer (``UnchangedRule`` keeps what it applied), or None."""
        if self.unread_marks is not None:
            return UnreadRule.holding_none_of(self.unread_marks(extractor))
        if self.unchanged_keys is not None and (keys := self.unchanged_keys(extractor)):
            return UnchangedRule.blanking_values_of(keys)
        return None

    @property
    def kind(self) -> str:
        return self.resource.kind

    def paths(self, config: Config) -> list[tuple[str | None, str]]:
        """(scope, list path) pairs to list and watch, in the newest version."""
        if self.per_plugin_namespace and not self.cluster_wide_for(config):
            return [(namespace, self.resource.collection(namespace)) for namespace in config.plugin_namespaces]
        return [(None, self.resource.collection())]

    @property
    def versions(self) -> tuple[str, ...]:
        """Every API version the kind is read in, newest first."""
        return (self.resource.version, *self.older_versions)

    @property
    def api_versions(self) -> tuple[str, ...]:
        """Every apiVersion the kind is read in, newest first."""
        return tuple(self._in_version(version).api_version for version in self.versions)

    def versioned_paths(self, scope: str | None) -> tuple[str, ...]:
        """The list path of ``scope`` in each version the kind is served in, newest first: the
        first the API server does not answer 404 for is the one read."""
        return tuple(self._in_version(version).collection(scope) for version in self.versions)

    def _in_version(self, version: str) -> ApiResource:
        return dataclasses.replace(self.resource, version=version)

    def keys(self, body: Mapping[str, Any]) -> tuple[Any, ...]:
        """The object's key in each facet's table (its namespace and name read once: an object
        listed is crossed off, looked up and held by them)."""
        namespace, name = namespace_and_name(body)
        return tuple(facet.table.key_of(namespace, name) for facet in self.facets)

    def held(self, index: FactIndex, keys: Sequence[Any]) -> list[Any]:
        """What the index holds now under the object's ``keys``, facet by facet (None: nothing)."""
        return [index.held(facet.table).get(key) for facet, key in zip(self.facets, keys, strict=True)]

    def upsert(
        self, index: FactIndex, extractor: FactsExtractor, body: Mapping[str, Any], keys: Sequence[Any] | None = None
    ) -> list[Any]:
        """Extract the object's facts and hold them, facet by facet; raises FactsError (the
        caller removes the object: fail closed). Returns what each facet holds now."""
        keys = self.keys(body) if keys is None else keys
        return [facet.upsert(index, extractor, body, key) for facet, key in zip(self.facets, keys, strict=True)]

    def delete(self, index: FactIndex, body: Mapping[str, Any]) -> None:
        namespace, name = namespace_and_name(body)
        for facet in self.facets:
            index.remove(facet.table, facet.table.key_of(namespace, name))

    def unlisted(self, index: FactIndex, scope: str | None) -> tuple[UnlistedKeys[Any], ...]:
        """As a fresh LIST of one scope (a namespace, or None: cluster-wide) begins: per facet,
        the keys it has yet to name (``FactIndex.unlisted``)."""
        return tuple(index.unlisted(facet.table, scope) for facet in self.facets)

    def cross_off(self, unlisted: tuple[UnlistedKeys[Any], ...], keys: Sequence[Any]) -> None:
        """The LIST named the object of ``keys``, whatever its facts now."""
        for left, key in zip(unlisted, keys, strict=True):
            left.discard(key)

    def forget(self, index: FactIndex, unlisted: tuple[UnlistedKeys[Any], ...]) -> None:
        """The LIST is done: what it did not name is gone."""
        for facet, keys in zip(self.facets, unlisted, strict=True):
            index.forget(facet.table, keys)

    def problems(self, held: Sequence[Any]) -> tuple[Problem, ...]:
        """The problems of what the facets hold (``held`` or ``upsert``'s answer)."""
        return tuple(
            problem
            for facet, facts in zip(self.facets, held, strict=True)
            if facts is not None
            for problem in facet.problems(facts)
        )

    def new_problems(self, before: Sequence[Any], after: Sequence[Any]) -> tuple[Problem, ...]:
        """The problems ``after`` has that ``before`` had not: what to say about a change."""
        found = self.problems(after)
        if not found:
            return found  # nearly every object: nothing to compare
        known = set(self.problems(before))
        return tuple(problem for problem in found if problem not in known)


def _node_problems(facts: NodeFacts) -> tuple[Problem, ...]:
    if not facts.unusable:
        return ()
    problems = "; ".join(entry.problem for entry in facts.unusable)
    malformed = [entry.problem for entry in facts.unusable if entry.malformed]
    return (
        Problem(
            logging.ERROR,
            f"node {facts.name}: unusable quantity ({problems}); it counts as not advertising",
            input_error=f"Node {facts.name}: {malformed[0]}" if malformed else None,
        ),
    )


def _slice_problems(facts: SliceFacts) -> tuple[Problem, ...]:
    problems = []
    if facts.problem:
        problems.append(
            Problem(
                logging.ERROR,
                f"{facts.problem}; its pool is not counted on node {facts.node_name}",
                input_error=facts.problem,
            )
        )
    return tuple(problems)


def _read_slice(extractor: FactsExtractor, index: FactIndex, body: Mapping[str, Any]) -> SliceFacts | None:
    """A slice read with the DeviceClasses as they stand; what the index holds for it is the
    per-slice memo (the same resourceVersion and classes: nothing evaluated again)."""
    known = index.slices.get(namespace_and_name(body)[1])
    facts = extractor.resource_slice(body, index.class_view(), known)
    if facts is None or known is None:
        return facts
    if facts.generation < known.generation and facts.problem is None:
        # Counted as the scheduler counts it (the latest generation present wins), and said.
        facts = dataclasses.replace(facts, went_back_from=known.generation)
    if facts == known and facts.resource_version != known.resource_version:
        index.slices[facts.name] = facts  # the memo's key moves on; nothing else did
    return facts


def _read_claim(extractor: FactsExtractor, _index: FactIndex, body: Mapping[str, Any]) -> ClaimFacts:
    """Every claim is held, with the classes of its requests: a pod may name it after it was
    read (the listing of claims ends long before that of 100,000 pods; the resourceclaim
    controller makes a template's claim before the pod's status names it), and the index
    learns it then without reading it again (``FactIndex.learn_claim``). The watch keeps the
    table as the claims are: a claim deleted, or missing from a new LIST, goes with its classes."""
    return extractor.watched_claim(body)


def _reads_dra(config: Config) -> bool:
    return any(fabric.uses(Source.DRA) for fabric in config.enabled_fabrics)


NODE = WatchedKind(
    label="node",
    resource=NODES,
    per_plugin_namespace=False,
    facets=(Facet(NODE_FACTS, FactsExtractor.node, _node_problems),),
    unique_in_snapshots=True,
    unchanged_keys=FactsExtractor.node_unread_keys,
)
DAEMON_SET = WatchedKind(
    label="daemonset",
    resource=DAEMON_SETS,
    per_plugin_namespace=True,
    facets=(Facet(DAEMON_SET_FACTS, FactsExtractor.daemon_set),),
)
POD = WatchedKind(
    label="pod",
    resource=PODS,
    per_plugin_namespace=True,
    # A plugin's pod (owned by a plugin DaemonSet), a workload's (asks for an accelerator or
    # a fabric), both, or neither.
    facets=(Facet(PLUGIN_POD_FACTS, FactsExtractor.pod), Facet(WORKLOAD_POD_FACTS, FactsExtractor.workload_pod)),
    # Workloads run in any namespace; without them, only the plugins' pods matter.
    cluster_wide_for=lambda config: config.workloads.enabled,
    # 100,000 pods in pages of 250 were 400 requests, each paying the API server's per-request
    # cost on the cores that also decode them. At 10,000 nodes / 100,000 pods
    # (benchmarks/workloads_bench.py) the start took 1.64x a bare LIST in pages of 250 and
    # 1.12x in pages of 1,000, whose larger transient raised the RSS kept after the start from
    # 140 to 155 MiB (freed pages leave the allocator's arenas fragmented by the facts made
    # meanwhile). 500 is between the two.
    page_size=500,
    bound_to_nodes=True,
    unread_marks=FactsExtractor.pod_marks,
)
# Listed before the slices (snapshots are read in this order, the operator waits for them):
# slices are read with them.
DEVICE_CLASS = WatchedKind(
    label="deviceclass",
    resource=DEVICE_CLASSES,
    per_plugin_namespace=False,
    facets=(Facet(DEVICE_CLASS_FACTS, FactsExtractor.device_class),),
    optional=True,
    wanted_by=_reads_dra,
    says_selection=True,
    decides_devices=True,
)
# Read only (the operator never writes them): a rule's taint counts as the devices' own.
# Listed before the slices, which are read with them.
DEVICE_TAINT_RULE = WatchedKind(
    label="devicetaintrule",
    resource=DEVICE_TAINT_RULES,
    older_versions=("v1alpha3",),
    per_plugin_namespace=False,
    facets=(Facet(TAINT_RULE_FACTS, FactsExtractor.device_taint_rule),),
    optional=True,
    # Not served: no rules, nothing to warn about (1.33-1.35 serve them only when asked to).
    absent_because="served from Kubernetes 1.36; in 1.33-1.35 only with resource.k8s.io/v1alpha3 turned on",
    warn_when_absent=False,
    wanted_by=_reads_dra,
    decides_devices=True,
)
RESOURCE_SLICE = WatchedKind(
    label="resourceslice",
    resource=RESOURCE_SLICES,
    per_plugin_namespace=False,
    facets=(Facet(SLICE_FACTS, lambda _extractor, _body: None, _slice_problems, extract_in=_read_slice),),
    optional=True,
    wanted_by=_reads_dra,
    read_with_classes=True,
)
# Read only (the operator never writes claims): the devices allocated to them count for their
# node even after the driver drops them from its slice.
RESOURCE_CLAIM = WatchedKind(
    label="resourceclaim",
    resource=RESOURCE_CLAIMS,
    per_plugin_namespace=False,
    facets=(Facet(CLAIM_FACTS, lambda _extractor, _body: None, extract_in=_read_claim),),
    optional=True,
    wanted_by=_reads_dra,
)


# Karpenter's objects (SPEC "Elastic pools"): optional like ResourceSlices, since most clusters
# do not serve karpenter.sh/v1 or karpenter.k8s.aws/v1; read only while the config reads them.
def _reads_karpenter(config: Config) -> bool:
    return config.karpenter.enabled


def _fabric_resources(extractor: FactsExtractor) -> frozenset[str]:
    """The resources whose NodeClaim capacity says a node was launched with the fabric."""
    return frozenset(fabric.resource for fabric in extractor.config.enabled_fabrics)


NODE_POOL = WatchedKind(
    label="nodepool",
    resource=NODE_POOLS,
    per_plugin_namespace=False,
    facets=(Facet(NODE_POOL_FACTS, lambda _extractor, body: node_pool_facts(body)),),
    optional=True,
    absent_because="Karpenter is not installed",
    warn_when_absent=False,
    wanted_by=_reads_karpenter,
)
NODE_CLAIM = WatchedKind(
    label="nodeclaim",
    resource=NODE_CLAIMS,
    per_plugin_namespace=False,
    facets=(Facet(NODE_CLAIM_FACTS, lambda extractor, body: node_claim_facts(body, _fabric_resources(extractor))),),
    optional=True,
    absent_because="Karpenter is not installed",
    warn_when_absent=False,
    wanted_by=_reads_karpenter,
)
EC2_NODE_CLASS = WatchedKind(
    label="ec2nodeclass",
    resource=EC2_NODE_CLASSES,
    per_plugin_namespace=False,
    facets=(Facet(NODE_CLASS_FACTS, lambda _extractor, body: node_class_facts(body)),),
    optional=True,
    absent_because="Karpenter is not installed",
    warn_when_absent=False,
    wanted_by=_reads_karpenter,
)

WATCHED_KINDS: tuple[WatchedKind, ...] = (
    NODE,
    DAEMON_SET,
    POD,
    DEVICE_CLASS,
    DEVICE_TAINT_RULE,
    RESOURCE_SLICE,
    RESOURCE_CLAIM,
    NODE_POOL,
    NODE_CLAIM,
    EC2_NODE_CLASS,
)
BY_KIND: dict[str, WatchedKind] = {watched.kind: watched for watched in WATCHED_KINDS}
# By the label the metrics, /healthz and ``FactStore.stale_kinds`` name a kind with.
BY_LABEL: dict[str, WatchedKind] = {watched.label: watched for watched in WATCHED_KINDS}


# The API groups kubectl knows by the plural alone; a CRD's plural is qualified by its group, since
# two installed CRDs may share one (NodePools: Karpenter's and, say, a cloud provider's).
_BUILT_IN_GROUPS = frozenset({"", "apps", "resource.k8s.io"})


def snapshot_kubectl(rows: Sequence[WatchedKind] = WATCHED_KINDS) -> str:
    """The command that prints a snapshot holding every kind ``evaluate`` and ``explain`` read.

    kubectl stops at a kind the API server does not serve, so the optional kinds' lines say
    which to leave out (``snapshot_leave_out``).
    """
    names = [
        watched.resource.plural
        if watched.resource.group in _BUILT_IN_GROUPS
        else f"{watched.resource.plural}.{watched.resource.group}"
        for watched in rows
    ]
    return f"kubectl get {','.join(names)} -A -o json"


def snapshot_leave_out(rows: Sequence[WatchedKind] = WATCHED_KINDS) -> str:
    """Which kinds of ``snapshot_kubectl`` to leave out, and why: one clause per reason they may be missing."""
    by_reason: dict[str, list[str]] = {}
    for watched in rows:
        if watched.optional:
            by_reason.setdefault(watched.absent_because, []).append(watched.resource.plural)
    clauses = [f"{','.join(plurals)} ({reason})" for reason, plurals in by_reason.items()]
    return "kubectl stops at a kind the server does not serve: leave out " + " and ".join(clauses)


def kinds_for(config: Config, rows: Sequence[WatchedKind] = WATCHED_KINDS) -> tuple[WatchedKind, ...]:
    """The kinds a config needs watched."""
    return tuple(watched for watched in rows if watched.wanted_by(config))


def listed_first(watched: WatchedKind, rows: Sequence[WatchedKind]) -> tuple[WatchedKind, ...]:
    """The kinds of ``rows`` that must have been listed before ``watched`` is first listed: a
    kind read with the classes is read with what the DeviceClasses and DeviceTaintRules say.
    Read with the profile's copy and no rules, a ResourceSlice LIST would be read again once
    they came (a LIST of every slice more at each start), and until then counted the devices
    a rule takes out."""
    return tuple(row for row in rows if row.decides_devices) if watched.read_with_classes else ()
