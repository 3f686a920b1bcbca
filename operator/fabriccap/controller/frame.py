"""The kopf frame: every place the operator touches kopf, and nothing else.

kopf runs the operator's frame: credentials (``on.login``, fed from the project's own
credentials) and signal handling. /healthz is the operator's own (metrics.start_health_server):
kopf's liveness server binds through asyncio, which makes ``::`` IPv6-only, so it could not
answer the kubelet's probes on IPv4 and IPv6 pod IPs alike.

kopf watches nothing. Nodes, Pods and DaemonSets are not kopf resources (see informers.py
for why: kopf would keep a worker and a memory per object, tens of kilobytes each), and
neither are the project's own FabricCapabilities any more (``informers.PublishedWatch``):
when the CRD is deleted, a kopf watch request that reaches the API server before kopf's
resource scan notices answers 404, and that ends the whole of ``kopf.operator`` (kopf#1077).
Ending, kopf cancels every task on the event loop that it did not find at its start: the
publisher's writes in flight among them, so the process died (seen in CI,
``test_crd_deleted_and_recreated``). With no resource handler kopf has no watcher to fail,
and resource scanning is switched off, so it does not watch CRDs either. kopf stores nothing
on any object: no finalizer, no progress or diff-base annotations, hence no persistence
settings. kopf's peering stays off (``standalone``): equal peering priorities freeze every
replica, and high availability is the project's own Lease.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import kopf

from fabriccap.controller.freshness import Freshness
from fabriccap.controller.publisher import Publisher
from fabriccap.kube.credentials import Credentials


@dataclass
class OperatorState:
    """Everything the handlers reach through kopf's ``memo``."""

    credentials: Credentials
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

    return registry


def settings() -> kopf.OperatorSettings:
    operator_settings = kopf.OperatorSettings()
    # Handler errors are logged; posting them as Events would be noise.
    operator_settings.posting.enabled = False
    # No resource handlers: a CRD watch would serve nothing (and be one more thing to fail).
    operator_settings.scanning.disabled = True
    operator_settings.watching.chunk_size = 500
    operator_settings.watching.server_timeout = 300
    operator_settings.watching.client_timeout = 330
    operator_settings.watching.connect_timeout = 30
    operator_settings.networking.request_timeout = 60
    return operator_settings


# kopf names itself for peering, which stays off here. Without a name it asks
# getpass.getuser(), which raises when the UID has no /etc/passwd entry: the image's numeric
# 65532, an OpenShift-assigned UID. The Lease's holder identity is the project's own.
KOPF_IDENTITY = "fabriccap"
# kopf types it as peering.Identity, a NewType of str that kopf does not export.
_KOPF_IDENTITY: Any = KOPF_IDENTITY

logger = logging.getLogger(__name__)


class FrameFailedError(RuntimeError):
    """kopf's main loop ended with an error: the operator stops, and its restart is the recovery."""


async def _frame(state: OperatorState, stop_flag: asyncio.Event | None) -> None:
    """kopf's main loop; a clean return (a signal, ``stop_flag``) ends the operator.

    A failure is not retried in place: before re-raising, kopf has cancelled every task it
    did not find at its start, which includes work of the publisher, the informers and the
    lookups, so the process is no longer whole. It ends with one clear line instead (the
    Lease released on the way out), and the kubelet's restart is the recovery. With kopf
    watching nothing, what is left to fail is credentials that stay unusable.
    """
    try:
        await kopf.operator(
            registry=build_registry(),
            settings=settings(),
            clusterwide=True,
            standalone=True,
            identity=_KOPF_IDENTITY,
            memo=kopf.Memo(fabriccap=state),
            stop_flag=stop_flag,
        )
    except Exception as error:  # kopf's API errors are private classes
        raise FrameFailedError(f"the kopf frame failed ({error}); stopping the operator") from error


def run_frame(state: OperatorState, stop_flag: asyncio.Event | None) -> asyncio.Task[None]:
    """kopf's main loop as a task: login, signals."""
    return asyncio.create_task(_frame(state, stop_flag), name="kopf")


def quiet_kopf_logging() -> None:
    # kopf logs every handler invocation at INFO; at 10,000 nodes that is noise, not news.
    logging.getLogger("kopf").setLevel(logging.WARNING)
