"""``fabriccap run``: wiring kopf, the fact store, the publisher and the metrics server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import kopf

from fabriccap.config import Config, ConfigError, load_config
from fabriccap.facts import FactsExtractor
from fabriccap.handlers import OperatorState, build_registry
from fabriccap.kube import KubeClient, KubeError, load_credentials
from fabriccap.metrics import OperatorMetrics, start_metrics_server
from fabriccap.publish import Publisher
from fabriccap.store import FactStore
from fabriccap.watchers import build_informers

logger = logging.getLogger("fabriccap")

# kopf only watches our own kind, with an event handler that stores nothing; still, give
# anything it might store a prefix of ours, never kopf's defaults.
ANNOTATION_PREFIX = "operator.fabriccap.dev"
FINALIZER = "operator.fabriccap.dev/finalizer"


@dataclass
class OperatorOptions:
    config: Config
    kubeconfig: str | None = None
    namespaces: Sequence[str] = ()
    metrics_port: int = 8080
    health_port: int = 8081
    bind_address: str = "0.0.0.0"  # in a pod; tests and the demo pass 127.0.0.1
    standalone: bool = True

    @property
    def watched_namespaces(self) -> list[str]:
        return sorted(set(self.namespaces) or set(self.config.plugin_namespaces))


def local_run_command(
    kubeconfig: Path, config: Path | None = None, metrics_port: int = 0, health_port: int = 0
) -> list[str]:
    """``fabriccap run`` as the demo, the tests and the benchmarks start it: this interpreter,
    one replica, servers on loopback only (port 0 turns a server off)."""
    command = [sys.executable, "-m", "fabriccap", "run", "--standalone", "--kubeconfig", str(kubeconfig)]
    if config is not None:
        command += ["--config", str(config)]
    loopback = ["--bind-address", "127.0.0.1", "--metrics-port", str(metrics_port), "--health-port", str(health_port)]
    return [*command, *loopback]


def configure_settings(settings: kopf.OperatorSettings) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX, key="last-handled-configuration"
    )
    # Handler errors are logged; posting them as Events on Nodes/Pods would be noise there.
    settings.posting.enabled = False
    settings.watching.chunk_size = 500
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.networking.request_timeout = 60


async def operate(options: OperatorOptions, stop_flag: asyncio.Event | None = None) -> None:
    """Run the operator until cancelled or ``stop_flag`` is set."""
    credentials = load_credentials(options.kubeconfig)
    client = KubeClient(credentials)
    metrics = OperatorMetrics()
    store = FactStore()
    publisher = Publisher(config=options.config, store=store, client=client, metrics=metrics)
    informers = build_informers(client, store, FactsExtractor(options.config), metrics, options.watched_namespaces)
    state = OperatorState(credentials=credentials, metrics=metrics, publisher=publisher)
    settings = kopf.OperatorSettings()
    configure_settings(settings)
    liveness = f"http://{options.bind_address}:{options.health_port}/healthz" if options.health_port else None
    metrics_runner = None
    if options.metrics_port:
        metrics_runner = await start_metrics_server(metrics, options.bind_address, options.metrics_port)
    logger.info(
        "fabriccap starting against %s: fabrics %s, plugin namespaces %s",
        credentials.server,
        ", ".join(f.name for f in options.config.enabled_fabrics),
        ", ".join(options.watched_namespaces),
    )

    async def all_listed() -> None:
        # The first evaluation waits for every collection: no half-loaded picture is published.
        await asyncio.gather(*(informer.listed.wait() for informer in informers))
        store.listed.set()
        logger.info(
            "listed %d nodes; %d plugin pods, %d DaemonSets in plugin namespaces",
            len(store.nodes),
            len(store.pods),
            len(store.daemon_sets),
        )

    tasks = [
        asyncio.create_task(
            kopf.operator(
                registry=build_registry(),
                settings=settings,
                clusterwide=True,
                standalone=options.standalone,
                liveness_endpoint=liveness,
                memo=kopf.Memo(fabriccap=state),
                stop_flag=stop_flag,
            ),
            name="kopf",
        ),
        asyncio.create_task(publisher.run(), name="publisher"),
        asyncio.create_task(all_listed(), name="listing"),
        *(asyncio.create_task(informer.run(), name=f"watch {informer.path}") for informer in informers),
    ]
    try:
        done, _ = await asyncio.wait(
            [task for task in tasks if task.get_name() != "listing"], return_when=asyncio.FIRST_COMPLETED
        )
        for task in done:
            task.result()  # surface a crash of any part
    finally:
        # Await only the tasks still running: awaiting a crashed one again re-raises its
        # exception and overwrites the traceback, hiding where the crash happened.
        pending = [task for task in tasks if not task.done()]
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if metrics_runner is not None:
            await metrics_runner.cleanup()
        await client.close()


def setup_logging(level: int = logging.INFO) -> None:
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # kopf logs every handler invocation at INFO; at 10,000 nodes that is noise, not news.
    logging.getLogger("kopf").setLevel(logging.WARNING)
    logging.getLogger("kopf.activities.probe").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def run_operator(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    setup_logging()
    options = OperatorOptions(
        config=config,
        kubeconfig=args.kubeconfig,
        namespaces=args.namespace,
        metrics_port=args.metrics_port,
        health_port=args.health_port,
        bind_address=args.bind_address,
        standalone=args.standalone,
    )
    try:
        asyncio.run(operate(options))
    except KubeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0
