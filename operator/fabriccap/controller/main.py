"""``fabriccap run``: wiring the informers, the fact store, the publisher, metrics and the kopf frame."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pythonjsonlogger.json import JsonFormatter

from fabriccap.configfile import load_config
from fabriccap.controller.events import EventRecorder
from fabriccap.controller.frame import FrameFailedError, OperatorState, quiet_kopf_logging, run_frame
from fabriccap.controller.freshness import Freshness
from fabriccap.controller.informers import PublishedWatch, build_informers
from fabriccap.controller.leader import (
    AlwaysLeader,
    LeaderElector,
    holder_identity,
    lease_name,
    operator_namespace,
)
from fabriccap.controller.logreader import LogReader
from fabriccap.controller.lookups import LookupResolver
from fabriccap.controller.memory import give_back_free_memory
from fabriccap.controller.metrics import (
    DUAL_STACK_ADDRESS,
    OperatorMetrics,
    dual_stack_available,
    start_health_server,
    start_metrics_server,
)
from fabriccap.controller.publisher import WRITES_STOP_SECONDS, Publisher
from fabriccap.controller.store import FactStore
from fabriccap.controller.writes import config_digest, field_manager
from fabriccap.core.config import Config, ConfigError
from fabriccap.core.facts import FactsExtractor
from fabriccap.core.references import OncePerCause
from fabriccap.core.shard import UNSHARDED, Shard
from fabriccap.core.text import escape_controls
from fabriccap.inputfile import bounded_line
from fabriccap.kube.client import KubeClient, bound_tls_receive_buffers
from fabriccap.kube.credentials import load_credentials_async
from fabriccap.kube.errors import KubeError
from fabriccap.kube.unread import OwnWritesRule

logger = logging.getLogger("fabriccap")

# The cyclic garbage collector runs a young collection every 700 net container allocations by
# default, and a full one each time the heap has grown by a quarter. Decoding a LIST page is
# millions of dicts and lists that refcounting alone frees, so at start-up the collector
# scanned an ever larger heap over and over (benchmarks/decode_bench.py, docs/performance.md).
# Cycles are still found, only in larger batches.
GC_THRESHOLDS = (50_000, 20, 20)

# kopf gives the tasks it cancels 5 s to end after its main loop has failed, then raises.
KOPF_STOP_SECONDS = 10.0


def in_a_pod() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def default_bind_address() -> str:
    """All interfaces in a pod (Prometheus and the kubelet's probes reach the pod IP), else
    loopback only: a laptop or CI machine must not expose /metrics to its network. All
    interfaces is the dual-stack ``::`` (IPv4 and IPv6 pod IPs alike), or 0.0.0.0 on a host
    without IPv6."""
    if not in_a_pod():
        return "127.0.0.1"
    return DUAL_STACK_ADDRESS if dual_stack_available() else "0.0.0.0"


def health_report(publisher: Publisher, freshness: Freshness) -> dict[str, Any]:
    """What /healthz answers; raises when the evaluation loop is stuck, or when the watch data
    is stale (a partition): a replica that cannot see the cluster must not look healthy."""
    report = publisher.health()
    ages = freshness.ages()
    report["watchAgeSeconds"] = {kind: None if age is None else round(age, 1) for kind, age in ages.items()}
    if publisher.store.listed.is_set() and not freshness.fresh():
        raise RuntimeError(f"watch data is stale: {freshness.describe_staleness()}")
    return report


def not_ready(publisher: Publisher) -> str | None:
    """Why this replica could not take over yet (/readyz answers 503 with it), or None. It
    campaigns once it has listed the cluster (or, past ``staleAfterSeconds`` without a listing,
    only to fail the published objects closed): until then it cannot publish in the place of
    a replica a rolling update would terminate."""
    if publisher.store.listed.is_set():
        return None
    return f"the first listing of the cluster is under way ({publisher.clock() - publisher.launched:.0f}s)"


@dataclass
class OperatorOptions:
    config: Config
    kubeconfig: str | None = None
    context: str | None = None
    metrics_port: int = 8080
    health_port: int = 8081
    metrics_bind_address: str = field(default_factory=default_bind_address)
    health_bind_address: str = field(default_factory=default_bind_address)
    # The operator's own namespace (its Lease); None: the service account's, else POD_NAMESPACE.
    namespace: str | None = None
    # The command line's --standalone: one replica that writes without electing a leader.
    standalone: bool = False
    # The command line's --shard/--shards: the pools this replica answers for.
    shard: Shard = UNSHARDED

    @property
    def watched_namespaces(self) -> list[str]:
        return sorted(self.config.plugin_namespaces)


def tune_garbage_collection() -> None:
    """Fewer collections, and none that scan what was loaded before the operator began."""
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()  # the modules, kopf and pydantic included, stay for the life of the process


def settle_heap() -> None:
    """After the first listing: its facts live until their objects go, so later collections
    need not walk them. One collection first, so that no garbage is kept forever; then the
    memory the listing's bodies took goes back to the system (controller.memory)."""
    gc.collect()
    gc.freeze()
    give_back_free_memory()


async def operate(options: OperatorOptions, stop_flag: asyncio.Event | None = None) -> None:
    """Run the operator until cancelled or ``stop_flag`` is set."""
    tune_garbage_collection()
    bound_tls_receive_buffers()
    credentials = await load_credentials_async(options.kubeconfig, options.context)
    metrics = OperatorMetrics(options.shard)
    client = KubeClient(credentials, on_error=lambda verb, code: metrics.api_errors.labels(verb, str(code)).inc())
    store = FactStore(options.shard)
    # Owner references that name no possible object (a pod's creator wrote them): never
    # followed, and each cause said once, from the pods and from the owners read.
    refused_references = OncePerCause(logging.getLogger("fabriccap.references").warning)
    informers = build_informers(
        client,
        store,
        FactsExtractor(options.config, on_refused=refused_references),
        metrics,
        stale_after=options.config.stale_after_seconds,
    )
    freshness = Freshness(informers, stale_after=options.config.stale_after_seconds, metrics=metrics)
    store.freshness = freshness
    identity = holder_identity()
    namespace = operator_namespace(options.namespace)
    lease = lease_name(options.shard)
    leader: LeaderElector | AlwaysLeader
    if options.standalone:
        leader = AlwaysLeader()
        metrics.leader.set(1)
    else:
        leader = LeaderElector(client, namespace, identity, metrics, name=lease)
    publisher = Publisher(
        config=options.config,
        store=store,
        client=client,
        metrics=metrics,
        leader=leader,
        events=EventRecorder(client, identity, window=leader.write_window),
        fresh=store.fresh,
        freshness=freshness,
        field_manager=field_manager(namespace, config_digest(options.config)),
        lookups=(
            LookupResolver(client, store, refused=refused_references) if options.config.workloads.enabled else None
        ),
    )
    if isinstance(leader, LeaderElector):
        leader.on_change = publisher.became_leader
        leader.campaign_after = publisher.may_lead
        publisher.election_attempted = leader.attempted
    # Every replica reads the logs it is told of, as every replica watches (logreader.py).
    reader = LogReader(options.config, store, client, metrics) if options.config.transport.enabled else None
    state = OperatorState(credentials=credentials, publisher=publisher, freshness=freshness)
    # Port 0 turns a server off (--metrics-port, --health-port).
    servers = (
        [
            await start_metrics_server(
                metrics, options.metrics_bind_address, options.metrics_port, before_scrape=freshness.export
            )
        ]
        if options.metrics_port
        else []
    )
    if options.health_port:
        servers.append(
            await start_health_server(
                lambda: health_report(publisher, freshness),
                options.health_bind_address,
                options.health_port,
                not_ready=lambda: not_ready(publisher),
            )
        )
    logger.info(
        "fabriccap starting against %s as %s (writing as %s): fabrics %s, plugin namespaces %s, %s, %s",
        credentials.server,
        identity,
        publisher.field_manager,
        ", ".join(f.name for f in options.config.enabled_fabrics),
        ", ".join(options.watched_namespaces),
        "standalone" if options.standalone else f"leader election on Lease {namespace}/{lease}",
        options.shard,
    )

    async def all_listed() -> None:
        # The first evaluation waits for every collection: no half-loaded picture is published.
        await asyncio.gather(*(informer.listed.wait() for informer in informers))
        store.listed.set()
        settle_heap()
        logger.info(
            "listed %d nodes; %d plugin pods, %d DaemonSets in plugin namespaces",
            len(store.nodes),
            len(store.pods),
            len(store.daemon_sets),
        )

    # The echoes of the publisher's own writes are not decoded (kube.unread.OwnWritesRule).
    own_writes = OwnWritesRule()
    publisher.requests.answered = own_writes.remember
    published_watch = PublishedWatch(client=client, metrics=metrics, observer=publisher, unread=own_writes)
    frame = run_frame(state, stop_flag)
    tasks = [
        frame,
        asyncio.create_task(publisher.run(), name="publisher"),
        asyncio.create_task(all_listed(), name="listing"),
        *(asyncio.create_task(informer.run(), name=f"watch {informer.path}") for informer in informers),
        *(asyncio.create_task(informer.nudge_while_quiet(), name=f"nudge {informer.path}") for informer in informers),
        asyncio.create_task(published_watch.run(), name="watch fabriccapabilities"),
    ]
    if isinstance(leader, LeaderElector):
        tasks.append(asyncio.create_task(leader.run(), name="leader election"))
    if reader is not None:
        tasks.append(asyncio.create_task(reader.run(), name="log reads"))
    try:
        done, _ = await asyncio.wait(
            [task for task in tasks if task.get_name() != "listing"], return_when=asyncio.FIRST_COMPLETED
        )
        if any(task.cancelled() for task in done) and not frame.done():
            # Nothing here cancels its own parts: kopf does, when its main loop fails, to every
            # task it did not start. Its own error is the one that says why.
            await asyncio.wait([frame], timeout=KOPF_STOP_SECONDS)
        for task in sorted(done | ({frame} if frame.done() else set()), key=lambda task: task is not frame):
            task.result()  # surface a crash of any part, kopf's first
    finally:
        # Await only the tasks still running: awaiting a crashed one again re-raises its
        # exception and overwrites the traceback, hiding where the crash happened. The
        # leader election goes last: it releases the Lease once nothing writes any more.
        pending = [task for task in tasks if not task.done()]
        electing = [task for task in pending if task.get_name() == "leader election"]
        for task in pending:
            if task not in electing:
                task.cancel()
        for task in pending:
            if task not in electing:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        # Before the Lease is released: only a leader writes or sends.
        await publisher.finish_writes(timeout=WRITES_STOP_SECONDS)
        if publisher.outbox is not None:
            await publisher.outbox.close()
        for task in electing:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if publisher.lookups is not None:
            await publisher.lookups.close()
        if reader is not None:
            await reader.close()
        for server in servers:
            await server.cleanup()
        await client.close()


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class OneLineFormatter(logging.Formatter):
    """Text records of one line each. A record carries text others wrote (owner names, messages
    of the API server, exceptions about both), and a newline in it would start what reads as
    a record of its own: every control character is escaped (``\\n``), tracebacks included."""

    def format(self, record: logging.LogRecord) -> str:
        return escape_controls(super().format(record))


def setup_logging(level: str = "info", log_format: str = "text") -> None:
    """stderr, as text lines or one JSON object per record (``--log-level``, ``--log-format``)."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        # Log collectors (Loki, CloudWatch, Elasticsearch) then index level and logger
        # without parsing text: {"time": ..., "level": ..., "logger": ..., "message": ...}.
        handler.setFormatter(
            JsonFormatter(
                "%(levelname)s %(name)s %(message)s",
                rename_fields={"levelname": "level", "name": "logger"},
                timestamp="time",  # ISO 8601, UTC
            )
        )
    else:
        handler.setFormatter(OneLineFormatter(LOG_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    if level != "debug":  # debugging wants kopf's own account of its handlers too
        quiet_kopf_logging()
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def run_operator(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"error: {bounded_line(escape_controls(str(error)))}", file=sys.stderr)
        return 2
    try:
        shard = Shard(index=args.shard, count=args.shards)
    except ValidationError as error:
        problem = "; ".join(str(entry["msg"]).removeprefix("Value error, ") for entry in error.errors())
        print(f"error: --shard {args.shard} --shards {args.shards}: {problem}", file=sys.stderr)
        return 2
    setup_logging(args.log_level, args.log_format)
    options = OperatorOptions(
        config=config,
        kubeconfig=args.kubeconfig,
        context=args.context,
        metrics_port=args.metrics_port,
        health_port=args.health_port,
        metrics_bind_address=args.metrics_bind_address or default_bind_address(),
        health_bind_address=args.health_bind_address or default_bind_address(),
        namespace=args.namespace,
        standalone=args.standalone,
        shard=shard,
    )
    try:
        asyncio.run(operate(options))
    except KubeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except FrameFailedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0
