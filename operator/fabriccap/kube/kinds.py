"""The watched kinds, one row each: where they are listed, in which scope, how they become facts.

The operator's informers, ``fabriccap evaluate`` (live and from snapshots) and the tests all
go through this table, so a kind is read the same way everywhere. Adding a kind means adding
a row here and a fact extractor in ``fabriccap.core.facts``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fabriccap.core.config import Config, Source
from fabriccap.core.facts import FactsExtractor, object_name, object_namespace
from fabriccap.core.index import FactIndex
from fabriccap.core.karpenter_facts import node_claim_facts, node_class_facts, node_pool_facts
from fabriccap.kube.paths import (
    DAEMON_SETS,
    EC2_NODE_CLASSES,
    NODE_CLAIMS,
    NODE_POOLS,
    NODES,
    PODS,
    RESOURCE_SLICES,
    ApiResource,
)


def object_key(body: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects: what a fresh LIST retains."""
    metadata = body.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = object_name(metadata.get("name"))
    return f"{object_namespace(namespace)}/{name}" if namespace else name


def _namespace_and_name(body: Mapping[str, Any]) -> tuple[str, str]:
    metadata = body.get("metadata") or {}
    return object_namespace(metadata.get("namespace")), object_name(metadata.get("name"))


# ~3-5 MB of JSON per page of realistic Nodes, the largest objects listed.
DEFAULT_PAGE_SIZE = 250


@dataclass(frozen=True)
class WatchedKind:
    label: str  # the `kind` label of fabriccap_watch_events_total, and in logs
    resource: ApiResource
    # Listed in every plugin namespace (True) or across the cluster (False).
    per_plugin_namespace: bool
    # Extract facts and store them; an object that concerns no fabric is removed instead, so
    # nothing lingers when, say, a pod loses its DaemonSet owner. Raises FactsError.
    upsert: Callable[[FactIndex, FactsExtractor, Mapping[str, Any]], object]
    delete: Callable[[FactIndex, Mapping[str, Any]], object]
    # After a fresh LIST of one scope (a namespace, or None: cluster-wide): forget the rest.
    retain: Callable[[FactIndex, str | None, set[str]], object]
    # Served only from some Kubernetes version on (resource.k8s.io/v1: 1.34): an API server
    # without it is not an error, the kind is just not there.
    optional: bool = False
    # Whether a config needs this kind at all (ResourceSlices: only when a fabric reads DRA).
    wanted_by: Callable[[Config], bool] = lambda _config: True
    # Whether a config needs it cluster-wide even so (Pods, when workloads are reported).
    cluster_wide_for: Callable[[Config], bool] = lambda _config: False
    # Objects per LIST page: the page's JSON and its decoded form are the transient peak of a
    # listing, so it follows the object's size (a Node is 10-20 KB, a Pod 2-5 KB).
    page_size: int = DEFAULT_PAGE_SIZE

    @property
    def kind(self) -> str:
        return self.resource.kind

    def paths(self, config: Config) -> list[tuple[str | None, str]]:
        """(scope, list path) pairs to list and watch."""
        if self.per_plugin_namespace and not self.cluster_wide_for(config):
            return [(namespace, self.resource.collection(namespace)) for namespace in config.plugin_namespaces]
        return [(None, self.resource.collection())]


def _upsert_node(index: FactIndex, extractor: FactsExtractor, body: Mapping[str, Any]) -> None:
    index.put_node(extractor.node(body))


def _upsert_pod(index: FactIndex, extractor: FactsExtractor, body: Mapping[str, Any]) -> None:
    facts = extractor.pod(body)
    if facts is None:
        index.remove_pod(*_namespace_and_name(body))
    else:
        index.put_pod(facts)
    workload = extractor.workload_pod(body)
    if workload is None:
        index.remove_workload_pod(*_namespace_and_name(body))
    else:
        index.put_workload_pod(workload)


def _delete_pod(index: FactIndex, body: Mapping[str, Any]) -> None:
    index.remove_pod(*_namespace_and_name(body))
    index.remove_workload_pod(*_namespace_and_name(body))


def _upsert_daemon_set(index: FactIndex, extractor: FactsExtractor, body: Mapping[str, Any]) -> None:
    facts = extractor.daemon_set(body)
    if facts is None:
        index.remove_daemon_set(*_namespace_and_name(body))
    else:
        index.put_daemon_set(facts)


NODE = WatchedKind(
    label="node",
    resource=NODES,
    per_plugin_namespace=False,
    upsert=_upsert_node,
    delete=lambda index, body: index.remove_node(_namespace_and_name(body)[1]),
    retain=lambda index, _scope, keys: index.retain_nodes(keys),
)
DAEMON_SET = WatchedKind(
    label="daemonset",
    resource=DAEMON_SETS,
    per_plugin_namespace=True,
    upsert=_upsert_daemon_set,
    delete=lambda index, body: index.remove_daemon_set(*_namespace_and_name(body)),
    retain=lambda index, scope, keys: index.retain_daemon_sets(scope, keys),
)
POD = WatchedKind(
    label="pod",
    resource=PODS,
    per_plugin_namespace=True,
    upsert=_upsert_pod,
    delete=_delete_pod,
    retain=lambda index, scope, keys: index.retain_pods(scope, keys),
    # Workloads run in any namespace; without them, only the plugins' pods matter.
    cluster_wide_for=lambda config: config.workloads.enabled,
    # 100,000 pods in pages of 250 were 400 requests, each paying the API server's per-request
    # cost on the cores that also decode them. At 10,000 nodes / 100,000 pods
    # (benchmarks/workloads_bench.py) the start took 1.64x a bare LIST in pages of 250 and
    # 1.12x in pages of 1,000, whose larger transient raised the RSS kept after the start from
    # 140 to 155 MiB (freed pages leave the allocator's arenas fragmented by the facts made
    # meanwhile). 500 is between the two.
    page_size=500,
)


def _upsert_slice(index: FactIndex, extractor: FactsExtractor, body: Mapping[str, Any]) -> None:
    facts = extractor.resource_slice(body)
    if facts is None:
        index.remove_slice(_namespace_and_name(body)[1])
    else:
        index.put_slice(facts)


RESOURCE_SLICE = WatchedKind(
    label="resourceslice",
    resource=RESOURCE_SLICES,
    per_plugin_namespace=False,
    upsert=_upsert_slice,
    delete=lambda index, body: index.remove_slice(_namespace_and_name(body)[1]),
    retain=lambda index, _scope, keys: index.retain_slices(keys),
    optional=True,
    wanted_by=lambda config: any(fabric.uses(Source.DRA) for fabric in config.enabled_fabrics),
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
    upsert=lambda index, _extractor, body: index.put_node_pool(node_pool_facts(body)),
    delete=lambda index, body: index.remove_node_pool(_namespace_and_name(body)[1]),
    retain=lambda index, _scope, keys: index.retain_node_pools(keys),
    optional=True,
    wanted_by=_reads_karpenter,
)
NODE_CLAIM = WatchedKind(
    label="nodeclaim",
    resource=NODE_CLAIMS,
    per_plugin_namespace=False,
    upsert=lambda index, extractor, body: index.put_node_claim(node_claim_facts(body, _fabric_resources(extractor))),
    delete=lambda index, body: index.remove_node_claim(_namespace_and_name(body)[1]),
    retain=lambda index, _scope, keys: index.retain_node_claims(keys),
    optional=True,
    wanted_by=_reads_karpenter,
)
EC2_NODE_CLASS = WatchedKind(
    label="ec2nodeclass",
    resource=EC2_NODE_CLASSES,
    per_plugin_namespace=False,
    upsert=lambda index, _extractor, body: index.put_node_class(node_class_facts(body)),
    delete=lambda index, body: index.remove_node_class(_namespace_and_name(body)[1]),
    retain=lambda index, _scope, keys: index.retain_node_classes(keys),
    optional=True,
    wanted_by=_reads_karpenter,
)

WATCHED_KINDS: tuple[WatchedKind, ...] = (
    NODE,
    DAEMON_SET,
    POD,
    RESOURCE_SLICE,
    NODE_POOL,
    NODE_CLAIM,
    EC2_NODE_CLASS,
)
BY_KIND: dict[str, WatchedKind] = {watched.kind: watched for watched in WATCHED_KINDS}


def kinds_for(config: Config) -> tuple[WatchedKind, ...]:
    """The kinds a config needs watched."""
    return tuple(watched for watched in WATCHED_KINDS if watched.wanted_by(config))
