"""Prometheus metrics, every family declared once, as data (docs/reference/metrics.md lists them,
generated from these declarations).

Pool families are produced at scrape time from the statuses currently published, so a
deleted FabricCapability's series vanish with it: there is no per-series state to forget.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib.metadata
import ipaddress
import logging
import math
import platform
import socket
import time
import zlib
from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.utils import floatToGoString

from fabriccap import __version__
from fabriccap.core.api import is_ready_status
from fabriccap.core.shard import UNSHARDED, Shard
from fabriccap.core.sharing import Shared, shared_text
from fabriccap.core.text import MAX_MESSAGE, clean_text
from fabriccap.kube.kinds import WATCHED_KINDS

logger = logging.getLogger("fabriccap.metrics")

# `*_created` series double every counter's cardinality and no alert or panel reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]

POOL_LABELS = ("name", "fabric", "pool")
CONDITION_STATUSES = ("true", "false", "unknown")
GAP_KINDS = {
    "plugin_ready_not_advertised": "pluginReadyNotAdvertised",
    "unhealthy": "unhealthy",
    "advertised_without_plugin": "advertisedWithoutPlugin",
    "launched_without_fabric": "launchedWithoutFabric",
    "conflicting_advertisers": "conflictingAdvertisers",
}

Sample = tuple[tuple[str, ...], float]

# What became of a nudge of a quiet watch (fabriccap_watch_nudges_total's `result`).
NUDGE_RESULTS = ("sent", "failed", "gave_up")
# What became of a listed object or a watch event (fabriccap_watch_events_total's `result`).
WATCH_RESULTS = ("applied", "ignored", "rejected", "unread", "unchanged", "own")


@dataclass(frozen=True)
class PoolFamily:
    name: str
    documentation: str
    extra_labels: tuple[str, ...]
    samples: Callable[[dict[str, Any]], Iterable[Sample]]
    # The values an extra label can take, where they are a fixed set (docs/reference/metrics.md).
    label_values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def _version_of(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _field(field: str) -> Callable[[dict[str, Any]], Iterable[Sample]]:
    return lambda status: [((), float(status.get(field) or 0))]


def _uniform_allocatable(status: dict[str, Any]) -> Iterable[Sample]:
    return [] if status.get("uniformCount") is None else [((), float(status["uniformCount"]))]


def _nodes_by_allocatable(status: dict[str, Any]) -> Iterable[Sample]:
    return [((str(bucket["count"]),), float(bucket["nodes"])) for bucket in status.get("counts") or []]


def _gap_nodes(status: dict[str, Any]) -> Iterable[Sample]:
    gap = status.get("gap") or {}
    return [((kind,), float(gap.get(field) or 0)) for kind, field in GAP_KINDS.items()]


def _launchable_max(status: dict[str, Any]) -> Iterable[Sample]:
    launchable = status.get("launchable")
    if not isinstance(launchable, dict):
        return []
    return [((str(entry["count"]),), float(entry["instanceTypes"])) for entry in launchable.get("counts") or []]


def _conditions(status: dict[str, Any]) -> Iterable[Sample]:
    # kube-state-metrics style: one series per possible status, 1 on the current one, so
    # `== 1` selects the state and a missing condition is visible as all zeros.
    for condition in status.get("conditions") or []:
        current = str(condition.get("status", "")).lower()
        for possible in CONDITION_STATUSES:
            yield (condition["type"], possible), 1.0 if possible == current else 0.0


def _ready(status: dict[str, Any]) -> Iterable[Sample]:
    return [((), 1.0 if is_ready_status(status) else 0.0)]


def _workload_pods(status: dict[str, Any]) -> Iterable[Sample]:
    workloads = status.get("workloads")
    if not isinstance(workloads, dict):
        return []
    uses = (
        ("requesting_fabric", "requestingFabric"),
        ("without_fabric", "withoutFabric"),
        ("intent_without_request", "intentWithoutRequest"),
    )
    return [((use,), float(workloads[field]["pods"])) for use, field in uses if isinstance(workloads.get(field), dict)]


def _transport_pods(status: dict[str, Any]) -> Iterable[Sample]:
    """Pods per transport verdict, split by what they request: the fabric (where socket or
    other means FabricNotUsed), or an accelerator only."""
    transport = (status.get("workloads") or {}).get("transport")
    if not isinstance(transport, dict):
        return []
    samples = []
    for verdict in TRANSPORT_VERDICTS:
        count = transport[verdict]
        fabric = float(count["requestingFabricPods"])
        samples += [((verdict, "fabric"), fabric), ((verdict, "accelerator"), float(count["pods"]) - fabric)]
    return samples


TRANSPORT_VERDICTS = ("fabric", "socket", "other", "none", "unknown")
READY_FAMILY = "fabriccap_pool_ready"

POOL_FAMILIES: tuple[PoolFamily, ...] = (
    PoolFamily("fabriccap_pool_nodes", "Schedulable target nodes of the pool (the gate set).", (), _field("nodes")),
    PoolFamily("fabriccap_pool_cordoned_nodes", "Target nodes left out because cordoned.", (), _field("cordonedNodes")),
    PoolFamily(
        "fabriccap_pool_unready_nodes",
        "Target nodes left out because their Ready condition is not True.",
        (),
        _field("unreadyNodes"),
    ),
    PoolFamily(
        "fabriccap_pool_advertising_nodes",
        "Gate-set nodes with devices of the fabric (allocatable above 0, or devices in ResourceSlices).",
        (),
        _field("advertisingNodes"),
    ),
    PoolFamily(
        # Not *_count: Prometheus reserves that suffix for histograms and summaries.
        "fabriccap_pool_uniform_allocatable",
        "The fabric resource count every gate-set node advertises; absent while counts differ.",
        (),
        _uniform_allocatable,
    ),
    PoolFamily(
        "fabriccap_pool_nodes_by_allocatable",
        "Gate-set nodes per allocatable fabric resource count.",
        ("allocatable",),
        _nodes_by_allocatable,
    ),
    PoolFamily(
        "fabriccap_pool_gap_nodes",
        "Nodes where the device plugin and the advertised resource disagree, by kind; launched_without_fabric:"
        " target nodes Karpenter launched without the fabric on purpose (not in the gate set).",
        ("kind",),
        _gap_nodes,
    ),
    PoolFamily(
        "fabriccap_pool_launchable_max",
        "Instance types the pool's Karpenter NodePool may launch, per fabric maximum (from the instance catalog).",
        ("count",),
        _launchable_max,
    ),
    PoolFamily(
        "fabriccap_pool_condition",
        "FabricCapability condition status: 1 for the current status, 0 for the others.",
        ("condition", "status"),
        _conditions,
    ),
    PoolFamily(
        "fabriccap_pool_workload_pods",
        "Pods bound to the pool's nodes by how they use the fabric: requesting_fabric, without_fabric "
        "(an accelerator but no fabric, while the pool offers it), intent_without_request.",
        ("use",),
        _workload_pods,
    ),
    PoolFamily(
        "fabriccap_pool_transport_pods",
        "Pods on the pool that request the fabric or an accelerator, by what their NCCL log shows it chose "
        "(transport: fabric, socket, other, none, unknown) and by what they request (request: fabric, "
        "accelerator); only while transport is read.",
        ("transport", "request"),
        _transport_pods,
        {"transport": TRANSPORT_VERDICTS, "request": ("fabric", "accelerator")},
    ),
    PoolFamily(
        READY_FAMILY,
        "1 when the pool's Ready condition is True and the operator's view is fresh, else 0.",
        (),
        _ready,
    ),
)


@dataclass(frozen=True, slots=True)
class SeriesLayout:
    """Which series a pool has: per family (in POOL_FAMILIES' order), the extra labels of each
    sample, and where its values start. Most pools have the same, so one copy serves them."""

    labels: tuple[tuple[tuple[str, ...], ...], ...]
    starts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PoolSeries:
    """One pool's samples as last computed: a shared layout and one float per sample."""

    fabric: str
    pool: str
    layout: SeriesLayout
    values: array[float]


# Pools whose samples of one family are rendered at once (``PoolCollector.exposition``).
EXPOSITION_CHUNK_POOLS = 250


def _label_value(text: str) -> str:
    """A label value as the text format writes it (backslash, newline and quote escaped), as
    ``generate_latest`` does."""
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _zeroed(family: PoolFamily, fresh: bool) -> bool:
    """Whether the family's samples all read 0: fabriccap_pool_ready while the view is stale."""
    return family.name == READY_FAMILY and not fresh


@dataclass(frozen=True)
class _OneFamily:
    """A collector of one family already built, for ``generate_latest``."""

    metric: Metric

    def collect(self) -> Iterator[Metric]:
        yield self.metric


class PoolCollector:
    """Yields the pool families from the statuses the operator computed last.

    Each status is turned into its samples when it is set (``set_pool``), not kept: a status
    as JSON is ~8.7 KB, its samples ~300 bytes and a layout shared with the other pools (at
    5,000 pools, ~40 MiB less). While the operator's view of the cluster is stale (``fresh()``
    is False: a partition, an apiserver outage), ``fabriccap_pool_ready`` reads 0 whatever the
    last status said: a gate must not stay open on data nobody can confirm.
    """

    def __init__(self) -> None:
        self.pools: dict[str, PoolSeries] = {}
        self.fresh: Callable[[], bool] = lambda: True
        self._layouts: Shared[SeriesLayout] = Shared()

    def set_pool(self, name: str, fabric: str, pool: str, status: dict[str, Any]) -> None:
        labels: list[tuple[tuple[str, ...], ...]] = []
        starts: list[int] = []
        values: array[float] = array("d")
        for family in POOL_FAMILIES:
            try:
                samples = list(family.samples(status))
            except (KeyError, TypeError, ValueError) as error:
                # Statuses can be read back from the cluster (the reference's examples), where
                # anyone with RBAC can edit them: one malformed field costs that pool's series
                # of one family, not the others.
                logger.warning("metrics: skipping %s for %s: malformed status (%r)", family.name, name, error)
                samples = []
            starts.append(len(values))
            labels.append(tuple(tuple(extra) for extra, _ in samples))
            values.extend(value for _, value in samples)
        layout = self._layouts(SeriesLayout(tuple(labels), tuple(starts)))
        self.pools[name] = PoolSeries(shared_text(fabric), shared_text(pool), layout, values)

    def remove_pool(self, name: str) -> None:
        self.pools.pop(name, None)

    def collect(self) -> Iterator[Metric]:
        # Read off the event loop (SharedExposition): the pools are read once, as one snapshot
        # (copying a dict's items is atomic under the GIL), and a pool's series are never
        # changed after set_pool (each call makes new ones).
        pools = sorted(self.pools.items())
        fresh = self.fresh()
        for index in range(len(POOL_FAMILIES)):
            yield self._family(index, pools, fresh)

    def exposition(self) -> Iterator[bytes]:
        """The pool families in the text format, byte for byte what ``generate_latest`` makes of
        ``collect()``, a family and ``EXPOSITION_CHUNK_POOLS`` pools at a time.

        ``generate_latest`` of them all held every line of every family (165,000 small strings
        at 5,000 pools) and each family's samples, a labels dict each, until the end. Made
        between the event loop's own allocations, they pinned Python's arenas: one scrape grew
        the operator's RSS by 52 MiB for good, and took 1.7 s of the one core
        (docs/performance.md). Here each pool's own label values are escaped once per render,
        and a line is its parts joined."""
        pools = sorted(self.pools.items())
        fresh = self.fresh()
        own = [tuple(_label_value(text) for text in (name, series.fabric, series.pool)) for name, series in pools]
        for index, family in enumerate(POOL_FAMILIES):
            # The headers as prometheus_client writes them (its escaping of the help text).
            yield generate_latest(_OneFamily(self._family(index, (), fresh)))
            names = (*POOL_LABELS, *family.extra_labels)
            order = sorted(range(len(names)), key=names.__getitem__)  # as generate_latest sorts them
            zeroed = _zeroed(family, fresh)
            for first in range(0, len(pools), EXPOSITION_CHUNK_POOLS):
                lines: list[str] = []
                last = first + EXPOSITION_CHUNK_POOLS
                for (_, series), values in zip(pools[first:last], own[first:last], strict=True):
                    start = series.layout.starts[index]
                    for offset, extra in enumerate(series.layout.labels[index]):
                        every = (*values, *(_label_value(text) for text in extra))
                        labels = ",".join(f'{names[at]}="{every[at]}"' for at in order)
                        value = 0.0 if zeroed else series.values[start + offset]
                        number = floatToGoString(value)  # type: ignore[no-untyped-call]
                        lines.append(f"{family.name}{{{labels}}} {number}\n")
                yield "".join(lines).encode()

    @staticmethod
    def _family(index: int, pools: Iterable[tuple[str, PoolSeries]], fresh: bool) -> GaugeMetricFamily:
        family = POOL_FAMILIES[index]
        metric = GaugeMetricFamily(family.name, family.documentation, labels=[*POOL_LABELS, *family.extra_labels])
        zeroed = _zeroed(family, fresh)
        for name, series in pools:
            start = series.layout.starts[index]
            for offset, extra in enumerate(series.layout.labels[index]):
                value = 0.0 if zeroed else series.values[start + offset]
                metric.add_metric([name, series.fabric, series.pool, *extra], value)
        return metric

    def describe(self) -> Iterator[Metric]:
        # Declaring the families lets the registry detect name clashes at registration.
        for family in POOL_FAMILIES:
            yield GaugeMetricFamily(family.name, family.documentation, labels=[*POOL_LABELS, *family.extra_labels])


class OperatorMetrics:
    """All of the operator's metrics, in a registry of its own (tests run several operators)."""

    def __init__(self, shard: Shard = UNSHARDED) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # The pool families have a registry of their own: the exposition renders them in
        # chunks (PoolCollector.exposition), after the rest; ``sample_value`` reads both.
        self.pools = PoolCollector()
        self.pool_registry = CollectorRegistry(auto_describe=True)
        self.pool_registry.register(self.pools)
        # The standard process_* and python_* families (the default registry's, in ours).
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        if GC_COLLECTOR is not None:
            GCCollector(registry=self.registry)
        # Exported only by the shard that counts them (shard 0; every replica unsharded): the
        # others' constant 0 made a dashboard show a confident 0 while shard 0 was down
        # (review 64d F4), where no series says that nobody counts.
        self.unpooled_nodes = Gauge(
            "fabriccap_unpooled_nodes",
            "Target nodes that carry none of the pool label keys (never published).",
            registry=self.registry if shard.keeps_unpooled else None,
        )
        self.watch_relists = Counter(
            "fabriccap_watch_relists",
            "LISTs that replaced a watch which made no progress for half of staleAfterSeconds, by object kind"
            " and what they found: changes (the watch had missed some: a fault between the operator and the"
            " API server) or nothing (a quiet collection whose bookmarks did not advance its resourceVersion).",
            ["kind", "found"],
            registry=self.registry,
        )
        self.watch_nudges = Counter(
            "fabriccap_watch_nudges",
            "Nudges of watches that made no progress for 5% of staleAfterSeconds (an empty consistent LIST that"
            " makes the API server's watch cache ask etcd for progress, so the watch's next bookmark advances"
            " instead of a LIST of the whole kind), by object kind and result: sent, failed (tried again), or"
            " gave_up (a watch request nudged in time ended with no bookmark that advanced: this server does"
            " not move its cache for them, and the kind's quiet spells are checked by a LIST from then on).",
            ["kind", "result"],
            registry=self.registry,
        )
        self.watch_expirations = Counter(
            "fabriccap_watch_expirations",
            "Watches the API server ended because it cannot serve their version, by object kind: 410 Gone (the"
            " version is older than its history, at most 102,400 events a kind kept about 75 s) or 'Too large"
            " resource version' (newer than its cache); the kind was listed again. One after an outage is the"
            " protocol at work. Several in a row mean the kind changes faster than a LIST of it is read: each"
            " listing is already too old to watch from, and the kind's view is as old as a listing takes to read.",
            ["kind"],
            registry=self.registry,
        )
        self.watch_events = Counter(
            "fabriccap_watch_events",
            "Listed objects and watch events (not bookmarks), by object kind and result: applied (to the"
            " facts), ignored (well-formed but of no use), rejected (not an event of the kind, or an object"
            " that cannot be used: left out, and logged once per cause), unread (a new object whose text names"
            " nothing the operator reads, such as a pod that asks for no accelerator, fabric or claim: not"
            " decoded), unchanged (a change that moved only what the operator never reads, such as a node's"
            " heartbeat: not decoded), own (a FabricCapability's change that is the operator's own write"
            " coming back: not decoded).",
            ["kind", "result"],
            registry=self.registry,
        )
        self.evaluations = Counter("fabriccap_evaluations", "Pool evaluations performed.", registry=self.registry)
        self.status_writes = Counter(
            "fabriccap_status_writes",
            "Writes to FabricCapability objects, by result (created, updated, deleted, error).",
            ["result"],
            registry=self.registry,
        )
        # Writes queue per lane (writes.WriteLanes): how far a lane that cannot keep up leaves
        # its pools' published statuses behind their evaluation.
        self.status_write_wait = Histogram(
            "fabriccap_status_write_wait_seconds",
            "Time a FabricCapability write waited for its lane before it was sent, by lane: conditions (a"
            " condition moved, a new object), urgent (a workload problem appeared or cleared, the nodes moved),"
            " routine (only the workload reports' counts and names moved), expiry (a deletion after the grace"
            " period).",
            ["lane"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
            registry=self.registry,
        )
        self.status_writes_waiting = Gauge(
            "fabriccap_status_writes_waiting",
            "FabricCapability writes waiting for their lane (not sent yet), by lane.",
            ["lane"],
            registry=self.registry,
        )
        self.evaluation_duration = Histogram(
            "fabriccap_evaluation_duration_seconds",
            "Time to re-evaluate the dirty pools of one debounce window.",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=self.registry,
        )
        self.last_evaluation = Gauge(
            "fabriccap_last_evaluation_timestamp_seconds",
            "Unix time of the last completed evaluation.",
            registry=self.registry,
        )
        self.build_info = Gauge(
            "fabriccap_build_info",
            "Build information: 1, labelled with the versions that matter.",
            ["version", "python_version", "kopf_version"],
            registry=self.registry,
        )
        self.build_info.labels(
            version=__version__, python_version=platform.python_version(), kopf_version=_version_of("kopf")
        ).set(1)
        self.leader = Gauge(
            "fabriccap_leader",
            "1 while this replica holds the leader Lease (and writes), else 0.",
            registry=self.registry,
        )
        # Which shard this replica is (run --shard/--shards; 0 of 1 unsharded): the alerts ask
        # for a leader per shard, joining fabriccap_leader with this on the instance.
        self.shard_info = Gauge(
            "fabriccap_shard_info",
            "1, labelled with the shard this replica is (shard, of shards; 0 of 1 unsharded): it answers for the"
            " pools whose value hashes to its shard.",
            ["shard", "shards"],
            registry=self.registry,
        )
        self.shard_info.labels(str(shard.index), str(shard.count)).set(1)
        self.publishing = Gauge(
            "fabriccap_publishing",
            "1 while this replica writes FabricCapabilities: it leads, inside its Lease's window, and has read"
            " back what is published. max() over the replicas 0: nothing is being published.",
            registry=self.registry,
        )
        self.foreign_writers = Gauge(
            "fabriccap_foreign_writers",
            "FabricCapabilities whose status another writer keeps overwriting (a second install, a --standalone"
            " replica with another config): a write war, reported and stopped.",
            registry=self.registry,
        )
        self.status_writes_refused = Gauge(
            "fabriccap_status_writes_refused",
            "FabricCapabilities whose newest status the API server refused as invalid (400, 422: an admission"
            " policy or webhook, most often): what they hold is older, or a summary with Ready=False"
            " (StatusWriteRefused). Retried about a minute later, then up to every 5 minutes. Only the leader"
            " counts them: 0 on a follower.",
            registry=self.registry,
        )
        self.name_conflicts = Gauge(
            "fabriccap_name_conflicts",
            "FabricCapability names claimed by more than one (fabric, pool): none of them is written.",
            registry=self.registry,
        )
        self.api_errors = Counter(
            "fabriccap_api_errors",
            "Failed Kubernetes API requests, by verb and HTTP code (0: no answer at all).",
            ["verb", "code"],
            registry=self.registry,
        )
        self.watch_last_event = Gauge(
            "fabriccap_watch_last_event_timestamp_seconds",
            "Unix time up to which the kind's view is known current: when its last completed LIST was"
            " requested (the LIST is a snapshot of then), or its last watch event or bookmark that advanced"
            " its resourceVersion (opening a watch does not count).",
            ["kind"],
            registry=self.registry,
        )
        self.watch_connected = Gauge(
            "fabriccap_watch_connected",
            "1 while every watch of the kind is connected, 0 after a failure until it recovers.",
            ["kind"],
            registry=self.registry,
        )
        self.unschedulable_fabric_pods = Gauge(
            "fabriccap_unschedulable_fabric_pods",
            "Pending pods that request a fabric and are unschedulable for it, per fabric.",
            ["fabric"],
            registry=self.registry,
        )
        self.workload_events_queued = Gauge(
            "fabriccap_workload_events_queued",
            "Workload Warning Events (FabricNotRequested, FabricUnschedulable) waiting to be sent: "
            "they go out a few at a time at a bounded rate.",
            registry=self.registry,
        )
        self.transport_log_reads = Counter(
            "fabriccap_transport_log_reads",
            "Reads of pods' logs for NCCL's transport, by result: decisive, undecided, forbidden (403), "
            "not_found (404), server_error (5xx), failed (no answer, another status), dropped (the pod went).",
            ["result"],
            registry=self.registry,
        )
        self.transport_log_bytes = Counter(
            "fabriccap_transport_log_bytes",
            "Bytes of pods' logs read for NCCL's transport"
            " (each read stops once the job's verdict is settled, or at maxBytes).",
            registry=self.registry,
        )
        for kind in (*(watched.label for watched in WATCHED_KINDS), "fabriccapability"):
            for result in WATCH_RESULTS:
                self.watch_events.labels(kind=kind, result=result)
        for watched in WATCHED_KINDS:
            for found in ("changes", "nothing"):
                self.watch_relists.labels(kind=watched.label, found=found)
            self.watch_expirations.labels(kind=watched.label)
            for result in NUDGE_RESULTS:
                self.watch_nudges.labels(kind=watched.label, result=result)
        for result in ("created", "updated", "deleted", "error"):
            self.status_writes.labels(result=result)

    def exposition(self) -> bytes:
        return b"".join(self._exposition_parts())

    def exposition_gzip(self) -> bytes:
        """The exposition gzipped, part by part: what /metrics holds and sends (Prometheus asks
        for gzip). At 5,000 pools the text is 17.8 MB; made whole, it was a second copy of
        itself while joined, and it was held from one scrape to the next."""
        compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, GZIP_WINDOW_BITS)
        parts = [compressor.compress(part) for part in self._exposition_parts()]
        parts.append(compressor.flush())
        return b"".join(parts)

    def _exposition_parts(self) -> Iterator[bytes]:
        yield generate_latest(self.registry)
        yield from self.pools.exposition()

    def leadership(self) -> tuple[float, ...]:
        """fabriccap_leader and fabriccap_publishing as a render now reads them (their functions
        are the elector's and the publisher's): a held render that says otherwise is not served
        (``SharedExposition``'s ``current``)."""
        return tuple(
            sample.value
            for gauge in (self.leader, self.publishing)
            for family in gauge.collect()
            for sample in family.samples
        )

    def families(self) -> Iterator[Metric]:
        """Every family: the pools' first (they were registered first), then the others."""
        yield from self.pool_registry.collect()
        yield from self.registry.collect()

    def sample_value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """A sample's value, whichever registry holds it (None: no such sample)."""
        value = self.registry.get_sample_value(name, dict(labels or {}))
        return self.pool_registry.get_sample_value(name, dict(labels or {})) if value is None else value


# How old a rendered exposition may be when it is served. Prometheus scrapes every 15 s or more,
# so one second is current, and however many scrapes come, the exposition is rendered at most
# once a second...
EXPOSITION_MAX_AGE_SECONDS = 1.0
# ... and at most once per this many times its own duration, from start to start: rendering
# takes at most a fifth of the process's time however hard /metrics is hammered (at 5,000
# pools a render takes seconds; a render started as soon as the last ended would compete
# with the event loop for the interpreter all the time).
RENDER_SPACING = 5.0
# The held exposition is gzip (zlib's fastest level: the text is repetitive, and the render
# shares the one core with the event loop); a scraper that does not accept gzip gets it
# decompressed, in a worker thread.
GZIP_LEVEL = 1
GZIP_WINDOW_BITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer, not a bare zlib stream
# /metrics requests served at once; more are answered 503 at once. Prometheus sends one scrape
# at a time per target (an HA pair of Prometheus, two). A queue would not serve a legitimate
# scraper sooner under a flood (the flood fills it first), and each waiting request holds a
# connection; a quick 503 costs nothing and shows as a failed scrape (``up`` 0) at once.
MAX_CONCURRENT_SCRAPES = 4
# A scrape whose answer is not taken in this long is cut off: a client that reads slowly (or
# never) holds its slot and a copy of the exposition in its socket's buffer until then.
SCRAPE_SEND_TIMEOUT_SECONDS = 10.0


class SharedExposition:
    """The exposition, rendered at most once per ``max_age`` (or per ``RENDER_SPACING`` times
    the last render's duration, when longer) and shared by every scrape that wants it
    meanwhile; concurrent scrapes while it renders wait for that one render.

    The render runs in a worker thread: at 1,000 pools it takes about 0.4 s, which on the event
    loop held every watch, write and /healthz answer (50 scrapers stalled the loop 29 s).
    ``before_render`` runs on the loop first (clock-derived gauges such as watch freshness).

    ``current`` is what a render must still say to be served (``OperatorMetrics.leadership``):
    a held render is reused only while it is unchanged. A render is held for 5 times its
    duration, seconds at thousands of pools, and one made inside the leader's write window
    served fabriccap_leader 1 for that long after the window closed, while another replica
    could already lead. A change of leadership (rare) makes the next scrape wait for a render."""

    def __init__(
        self,
        render: Callable[[], bytes],
        before_render: Callable[[], None] = lambda: None,
        max_age: float = EXPOSITION_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        current: Callable[[], Hashable] = lambda: None,
    ) -> None:
        self.render = render
        self.before_render = before_render
        self.max_age = max_age
        self.clock = clock
        self.current = current
        self._said: Hashable = None  # what ``current`` read when the held render began
        self.renders = 0
        self._body: bytes | None = None
        self._rendered_at = -math.inf
        self._render_seconds = 0.0
        self._rendering: asyncio.Task[bytes] | None = None

    @property
    def held(self) -> bool:
        """Whether a render is kept for the scrapes to come."""
        return self._body is not None

    def _reuse_for(self) -> float:
        return max(self.max_age, RENDER_SPACING * self._render_seconds)

    def _let_go(self, body: bytes) -> None:
        if self._body is body:
            self._body = None

    async def get(self) -> bytes:
        if (
            self._body is not None
            and self.clock() - self._rendered_at < self._reuse_for()
            and self.current() == self._said
        ):
            return self._body
        if self._rendering is None:
            self._rendering = asyncio.create_task(self._render(), name="render /metrics")
        # Shielded: a scraper that disconnects must not cancel the render the others wait for.
        return await asyncio.shield(self._rendering)

    async def _render(self) -> bytes:
        try:
            started = self.clock()
            self.before_render()
            # Read before the render: should it change while the render runs, the render may say
            # either, and the next scrape renders again.
            said = self.current()
            body = await asyncio.to_thread(self.render)
            self.renders += 1
            self._body, self._rendered_at, self._render_seconds = body, started, self.clock() - started
            self._said = said
            # Let go of once no scrape may be served it: held from one scrape to the next (15 s
            # or more), it was 18 MB at 5,000 pools before it was gzip (0.8 MB now).
            asyncio.get_running_loop().call_later(self._reuse_for(), self._let_go, body)
            return body
        finally:
            self._rendering = None


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding header (RFC 9110 12.5.3) takes gzip: gzip (or x-gzip) named
    with a weight above 0, or else ``*`` with one. An item with a malformed weight counts as
    absent."""
    weights: dict[str, float] = {}
    for item in accept_encoding.split(","):
        coding, *parameters = (part.strip() for part in item.split(";"))
        weight = 1.0
        for name, _, value in (parameter.partition("=") for parameter in parameters):
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = math.nan
        if not math.isnan(weight):
            weights[coding.lower()] = weight
    named = [weights[coding] for coding in ("gzip", "x-gzip") if coding in weights]
    if named:
        return max(named) > 0
    return weights.get("*", 0.0) > 0


# Connections waiting to be accepted on each listener: scrapers and probes, a handful at once.
LISTEN_BACKLOG = 128
# The IPv6 wildcard: with IPV6_V6ONLY off it takes IPv4 connections too (as ::ffff:a.b.c.d).
DUAL_STACK_ADDRESS = "::"


def listening_socket(address: str, port: int) -> socket.socket:
    """A TCP socket bound to ``address`` (an IP literal) and listening.

    The servers take it whole (``web.SockSite``) rather than an address: asyncio's
    ``create_server`` sets IPV6_V6ONLY on every IPv6 socket, so ``::`` through it answers IPv6
    only and refuses the kubelet's probes of an IPv4 pod IP. Here ``::`` is one dual-stack
    listener (IPv4, IPv6-only and dual-stack clusters alike); any other IPv6 address stays IPv6.
    """
    ip = ipaddress.ip_address(address)
    listener = socket.socket(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, socket.SOCK_STREAM)
    try:
        # A restarted operator rebinds its port while the old connections linger in TIME_WAIT.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if ip.version == 6:
            listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if ip.is_unspecified else 1)
        listener.bind((str(ip), port))
        listener.listen(LISTEN_BACKLOG)
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    return listener


def dual_stack_available() -> bool:
    """Whether this host can listen on the dual-stack ``::`` (no IPv6 in the kernel: it cannot)."""
    try:
        listening_socket(DUAL_STACK_ADDRESS, 0).close()
    except OSError:
        return False
    return True


async def _serve(app: web.Application, address: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.SockSite(runner, listening_socket(address, port)).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


async def start_health_server(
    report: Callable[[], Mapping[str, Any]],
    host: str,
    port: int,
    not_ready: Callable[[], str | None] = lambda: None,
) -> web.AppRunner:
    """Serve /healthz: ``{"fabriccap": report()}`` with 200, or the reason ``report`` raised with
    500 (the kubelet restarts the pod; its Event names only the status code: the body is for
    curl). Computed per request: it only reads counters, and never waits behind a /metrics
    render.

    And /readyz: /healthz's answer, but 503 with ``not_ready()``'s reason while it gives one (a
    replica that has not listed the cluster yet). The readiness probe reads it, so a rolling
    update terminates an old pod only once a new one could lead: with /healthz, both new pods
    were Ready before they had listed, and nothing was published for the listing's length."""

    def health() -> web.Response | dict[str, Any]:
        try:
            return {"fabriccap": dict(report())}
        except Exception as error:  # any failure of the report is a failed probe, with its reason
            return web.Response(status=500, text=clean_text(error, MAX_MESSAGE) + "\n")

    async def serve_health(_: web.Request) -> web.Response:
        body = health()
        return body if isinstance(body, web.Response) else web.json_response(body)

    async def serve_ready(_: web.Request) -> web.Response:
        body = health()
        if isinstance(body, web.Response):
            return body
        if (why := not_ready()) is not None:
            return web.Response(status=503, text=clean_text(why, MAX_MESSAGE) + "\n")
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/healthz", serve_health)
    app.router.add_get("/readyz", serve_ready)
    return await _serve(app, host, port)


async def start_metrics_server(
    metrics: OperatorMetrics,
    host: str,
    port: int,
    before_scrape: Callable[[], None] = lambda: None,
    *,
    exposition: SharedExposition | None = None,
    max_concurrent: int = MAX_CONCURRENT_SCRAPES,
    send_timeout: float = SCRAPE_SEND_TIMEOUT_SECONDS,
) -> web.AppRunner:
    """Serve /metrics: the shared exposition, to at most ``max_concurrent`` scrapers at once.

    /healthz is not here but on its own port (start_health_server), from its own handler, which
    never renders the exposition (and, with the render off the loop, never waits behind one)."""
    shared = exposition or SharedExposition(
        metrics.exposition_gzip, before_render=before_scrape, current=metrics.leadership
    )
    in_flight = 0

    async def serve_metrics(request: web.Request) -> web.StreamResponse:
        nonlocal in_flight
        if in_flight >= max_concurrent:
            return web.Response(status=503, text="too many concurrent scrapes\n", headers={"Retry-After": "1"})
        in_flight += 1
        try:
            body = await shared.get()
            headers = {"Content-Type": CONTENT_TYPE_LATEST}
            if accepts_gzip(request.headers.get("Accept-Encoding", "")):
                headers["Content-Encoding"] = "gzip"
            else:
                body = await asyncio.to_thread(gzip.decompress, body)
            # Streamed here rather than returned, so the slot is held until the client has the
            # answer, and a client that does not take it is cut off with its buffer.
            response = web.StreamResponse(headers=headers)
            response.content_length = len(body)
            try:
                async with asyncio.timeout(send_timeout):
                    await response.prepare(request)
                    await response.write(body)
                    await response.write_eof()
            except TimeoutError:
                if request.transport is not None:
                    request.transport.abort()  # drops what the client did not read
            return response
        finally:
            in_flight -= 1

    app = web.Application()
    app.router.add_get("/metrics", serve_metrics)
    return await _serve(app, host, port)
