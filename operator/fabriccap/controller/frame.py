"""The kopf frame: every place the operator touches kopf, and nothing else.

kopf runs the operator's frame: credentials (``on.login``, fed from the project's own
credentials), the liveness endpoint and its probe (``on.probe``: fails when the evaluation
loop is stuck), signal handling, and the watch on the project's own FabricCapability objects,
through which the publisher notices an object deleted or edited by someone else and puts its
answer back.

Nodes, Pods and DaemonSets are not kopf resources here (see informers.py for why): kopf
would keep a worker and a memory per object, tens of kilobytes each. ``on.event`` never
patches the watched object, so kopf stores nothing on FabricCapabilities either: no
finalizer, no progress or diff-base annotations, hence no persistence settings. kopf's
peering stays off (``standalone``): equal peering priorities freeze every replica, and
high availability is the project's own Lease.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from fabriccap.controller.informers import Freshness
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.publisher import Publisher
from fabriccap.core.api import GROUP, PLURAL, VERSION
from fabriccap.kube.credentials import Credentials


@dataclass
class OperatorState:
    """Everything the handlers reach through kopf's ``memo``."""

    credentials: Credentials
    metrics: OperatorMetrics
    publisher: Publisher
    freshness: Freshness


def _state(memo: Any) -> OperatorState:
    state = memo["fabriccap"]
    assert isinstance(state, OperatorState)
    return state


async def connection_info(credentials: Credentials) -> kopf.ConnectionInfo:
    """kopf's credentials from the ones the rest of the operator uses (refreshed off the loop)."""
    await credentials.refresh_async()
    return kopf.ConnectionInfo(
        server=credentials.server,
        ca_data=credentials.ca_data,
        insecure=credentials.insecure or None,
        token=credentials.token,
        username=credentials.username if credentials.password is not None else None,
        password=credentials.password,
        certificate_data=credentials.client_cert_data,
        private_key_data=credentials.client_key_data,
        proxy_url=credentials.proxy,
    )


def build_registry() -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    async def login(memo: Any, **_: Any) -> kopf.ConnectionInfo:
        # Called again on 401: rotated service-account tokens and exec credentials refresh.
        return await connection_info(_state(memo).credentials)

    # A failing probe fails /healthz at once (500): retrying it, kopf's default for activities,
    # would hold the request for a minute while the kubelet's probe times out.
    @kopf.on.probe(id="fabriccap", errors=kopf.ErrorsMode.PERMANENT, registry=registry)
    async def probe(memo: Any, **_: Any) -> dict[str, Any]:
        # Part of /healthz: fails when the evaluation loop is stuck, or when the watch data is
        # stale (a partition): a replica that cannot see the cluster must not look healthy.
        state = _state(memo)
        report = state.publisher.health()
        ages = state.freshness.ages()
        report["watchAgeSeconds"] = {kind: None if age is None else round(age, 1) for kind, age in ages.items()}
        if state.publisher.store.listed.is_set() and not state.freshness.fresh():
            raise RuntimeError(f"watch data is stale: {state.freshness.describe_staleness()}")
        return report

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def capability_event(event: Mapping[str, Any], body: kopf.Body, memo: Any, **_: Any) -> None:
        state = _state(memo)
        state.metrics.watch_events.labels(kind="fabriccapability").inc()
        if state.publisher.loaded:
            state.publisher.observe_published(dict(body), deleted=event.get("type") == "DELETED")

    return registry


def settings() -> kopf.OperatorSettings:
    operator_settings = kopf.OperatorSettings()
    # Handler errors are logged; posting them as Events would be noise.
    operator_settings.posting.enabled = False
    operator_settings.watching.chunk_size = 500
    operator_settings.watching.server_timeout = 300
    operator_settings.watching.client_timeout = 330
    operator_settings.watching.connect_timeout = 30
    operator_settings.networking.request_timeout = 60
    return operator_settings


FRAME_RESTART_MAX_SECONDS = 30.0
# kopf names itself for peering, which stays off here. Without a name it asks
# getpass.getuser(), which raises when the UID has no /etc/passwd entry: the image's numeric
# 65532, an OpenShift-assigned UID. The Lease's holder identity is the project's own.
KOPF_IDENTITY = "fabriccap"
# kopf types it as peering.Identity, a NewType of str that kopf does not export.
_KOPF_IDENTITY: Any = KOPF_IDENTITY

logger = logging.getLogger(__name__)


async def _frame(state: OperatorState, liveness_endpoint: str | None, stop_flag: asyncio.Event | None) -> None:
    """kopf's main loop, started again when it fails.

    kopf does not recover a watcher that fails (kopf#1077): when the CRD is deleted, a watch
    request that reaches the API server before kopf's resource scan notices answers 404, and
    the whole of ``kopf.operator`` ends with it. The rest of the operator (informers, the
    publisher, leader election) is fine, so only the frame is started again, with a backoff;
    /healthz is down meanwhile, as it should be. A clean return (a signal, ``stop_flag``)
    ends it for good.
    """
    delay = 1.0
    while True:
        try:
            await kopf.operator(
                registry=build_registry(),
                settings=settings(),
                clusterwide=True,
                standalone=True,
                identity=_KOPF_IDENTITY,
                liveness_endpoint=liveness_endpoint,
                memo=kopf.Memo(fabriccap=state),
                stop_flag=stop_flag,
            )
            return
        except Exception as error:  # kopf's API errors are private classes
            logger.error("the kopf frame failed (%s); starting it again in %.0fs", error, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, FRAME_RESTART_MAX_SECONDS)


def run_frame(
    state: OperatorState, liveness_endpoint: str | None, stop_flag: asyncio.Event | None
) -> asyncio.Task[None]:
    """kopf's main loop as a task: login, probes, signals, the FabricCapability watch."""
    return asyncio.create_task(_frame(state, liveness_endpoint, stop_flag), name="kopf")


def quiet_kopf_logging() -> None:
    # kopf logs every handler invocation at INFO; at 10,000 nodes that is noise, not news.
    logging.getLogger("kopf").setLevel(logging.WARNING)
    logging.getLogger("kopf.activities.probe").setLevel(logging.WARNING)
