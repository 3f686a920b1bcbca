"""``fabriccap run``: wiring kopf, the fact store, the publisher and the metrics server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import kopf
from kubernetes_asyncio import client as k8s_client

from fabriccap.config import Config, ConfigError, load_config
from fabriccap.facts import FactsExtractor
from fabriccap.handlers import OperatorState, build_registry
from fabriccap.kube import KubeClient, KubeError, load_configuration
from fabriccap.metrics import OperatorMetrics, start_metrics_server
from fabriccap.publish import Publisher
from fabriccap.store import FactStore

logger = logging.getLogger("fabriccap")

# kopf stores nothing on Nodes/Pods/DaemonSets (only index and event handlers there), but
# give anything it might store on our own kind a prefix of ours, never kopf's defaults.
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
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def watched_namespaces(self) -> list[str]:
        return sorted(set(self.namespaces) or set(self.config.plugin_namespaces))


def configure_settings(settings: kopf.OperatorSettings) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATION_PREFIX, key="last-handled-configuration"
    )
    # Handler errors are logged; posting them as Events on Nodes/Pods would be noise there.
    settings.posting.enabled = False
    # kopf lists in pages when asked: a 10,000-node LIST is ~180 MB of JSON in one piece
    # otherwise, and the operator's peak memory would be set by that one response.
    settings.watching.chunk_size = 500
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.networking.request_timeout = 60


def _connection_info(configuration: Any) -> kopf.ConnectionInfo:
    """kopf's credentials from the same kubernetes_asyncio configuration the publisher uses."""
    token = (configuration.api_key or {}).get("BearerToken") or (configuration.api_key or {}).get("authorization")
    if token:
        token = str(token).removeprefix("Bearer ").strip()
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        token=token or None,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
    )


async def operate(options: OperatorOptions, stop_flag: asyncio.Event | None = None) -> None:
    """Run the operator until cancelled or ``stop_flag`` is set."""
    configuration = await load_configuration(options.kubeconfig)
    client = KubeClient(k8s_client.ApiClient(configuration=configuration))
    metrics = OperatorMetrics()
    store = FactStore()
    state = OperatorState(extractor=FactsExtractor(options.config), store=store, metrics=metrics)
    publisher = Publisher(config=options.config, store=store, client=client, metrics=metrics)
    state.publisher = publisher
    registry = build_registry()

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        # Re-read on every login so rotated tokens and exec credentials stay fresh.
        return _connection_info(await load_configuration(options.kubeconfig))

    settings = kopf.OperatorSettings()
    configure_settings(settings)
    liveness = f"http://{options.bind_address}:{options.health_port}/healthz" if options.health_port else None
    metrics_runner = None
    if options.metrics_port:
        metrics_runner = await start_metrics_server(metrics, options.bind_address, options.metrics_port)
    logger.info(
        "fabriccap starting: fabrics %s, plugin namespaces %s",
        ", ".join(f.name for f in options.config.enabled_fabrics),
        ", ".join(options.watched_namespaces),
    )
    kopf_task = asyncio.create_task(
        kopf.operator(
            registry=registry,
            settings=settings,
            namespaces=options.watched_namespaces,
            standalone=options.standalone,
            liveness_endpoint=liveness,
            memo=kopf.Memo(fabriccap=state),
            stop_flag=stop_flag,
        ),
        name="kopf",
    )
    publisher_task = asyncio.create_task(publisher.run(), name="publisher")
    try:
        done, _ = await asyncio.wait({kopf_task, publisher_task}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # surface a crash of either half
    finally:
        for task in (kopf_task, publisher_task):
            task.cancel()
        for task in (kopf_task, publisher_task):
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
