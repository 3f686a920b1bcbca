"""kopf registrations, nothing else.

kopf runs the operator's frame: credentials (``on.login``), the liveness endpoint and its
probe (``on.probe``: fails when the evaluation loop is stuck), signal
handling, and the watch on the project's own FabricCapability objects, through which the
publisher notices an object deleted or edited by someone else and puts its answer back.

Nodes, Pods and DaemonSets are not kopf resources here (see watchers.py for why): kopf
would keep a worker and a memory per object, tens of kilobytes each. ``on.event`` never
patches the watched object, so kopf stores nothing on FabricCapabilities either.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from fabriccap.api import GROUP, PLURAL, VERSION
from fabriccap.kube import Credentials
from fabriccap.metrics import OperatorMetrics
from fabriccap.publish import Publisher

logger = logging.getLogger("fabriccap.handlers")


@dataclass
class OperatorState:
    """Everything the handlers reach through kopf's ``memo``."""

    credentials: Credentials
    metrics: OperatorMetrics
    publisher: Publisher


def _state(memo: Any) -> OperatorState:
    state = memo["fabriccap"]
    assert isinstance(state, OperatorState)
    return state


def connection_info(credentials: Credentials) -> kopf.ConnectionInfo:
    """kopf's credentials from the ones the rest of the operator uses."""
    credentials.refresh()
    return kopf.ConnectionInfo(
        server=credentials.server,
        ca_data=credentials.ca_data,
        insecure=credentials.insecure or None,
        token=credentials.token,
        username=credentials.username if credentials.password is not None else None,
        password=credentials.password,
        certificate_data=credentials.client_cert_data,
        private_key_data=credentials.client_key_data,
    )


def build_registry() -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    async def login(memo: Any, **_: Any) -> kopf.ConnectionInfo:
        # Called again on 401: rotated service-account tokens and exec credentials refresh.
        return connection_info(_state(memo).credentials)

    @kopf.on.probe(id="fabriccap", registry=registry)
    async def probe(memo: Any, **_: Any) -> dict[str, Any]:
        # Part of /healthz (the liveness probe): fails when the evaluation loop is stuck.
        return _state(memo).publisher.health()

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def capability_event(event: Mapping[str, Any], body: kopf.Body, memo: Any, **_: Any) -> None:
        state = _state(memo)
        state.metrics.watch_events.labels(kind="fabriccapability").inc()
        if state.publisher.loaded:
            state.publisher.observe_published(dict(body), deleted=event.get("type") == "DELETED")

    return registry
