"""kopf registrations, nothing else.

Nodes, Pods and DaemonSets are observed through ``@kopf.index`` and ``@kopf.on.event``
only: those never patch the watched object (no finalizers, no annotations, no status), and
the RBAC grants only get/list/watch on them, so a slip would fail loudly with 403.

Why both: kopf runs every index function over the initial listing of every indexed kind
before it lets any other handler run, so the first ``on.event`` call means "all kinds are
listed"; the publisher waits for that and never publishes a half-loaded picture. Index
functions are not called for DELETED events, which ``on.event`` handles. The index
functions return None: kopf keeps nothing, the facts live in the FactStore.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from fabriccap.api import GROUP, PLURAL, VERSION
from fabriccap.facts import FactsError, FactsExtractor
from fabriccap.metrics import OperatorMetrics
from fabriccap.publish import Publisher
from fabriccap.store import FactStore

logger = logging.getLogger("fabriccap.handlers")


@dataclass
class OperatorState:
    """Everything the handlers reach through kopf's ``memo``."""

    extractor: FactsExtractor
    store: FactStore
    metrics: OperatorMetrics
    publisher: Publisher | None = None


def _state(memo: Any) -> OperatorState:
    state = memo["fabriccap"]
    assert isinstance(state, OperatorState)
    return state


def _is_deleted(event: Mapping[str, Any]) -> bool:
    return event.get("type") == "DELETED"


def build_registry() -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.index("", "v1", "nodes", registry=registry)
    async def index_node(body: kopf.Body, memo: Any, **_: Any) -> None:
        state = _state(memo)
        state.metrics.watch_events.labels(kind="node").inc()
        try:
            state.store.put_node(state.extractor.node(body))
        except FactsError as error:
            logger.error("ignoring node: %s", error)

    @kopf.on.event("", "v1", "nodes", registry=registry)
    async def node_event(event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
        state = _state(memo)
        state.store.listed.set()
        if _is_deleted(event):
            state.metrics.watch_events.labels(kind="node").inc()
            state.store.remove_node(body.metadata.name or "")

    @kopf.index("", "v1", "pods", registry=registry)
    async def index_pod(body: kopf.Body, memo: Any, **_: Any) -> None:
        state = _state(memo)
        state.metrics.watch_events.labels(kind="pod").inc()
        try:
            facts = state.extractor.pod(body)
        except FactsError as error:
            logger.error("ignoring pod: %s", error)
            return
        if facts is not None:
            state.store.put_pod(facts)
        else:
            # A pod that no longer qualifies (owner reference removed) must not linger.
            state.store.remove_pod(body.metadata.namespace or "", body.metadata.name or "")

    @kopf.on.event("", "v1", "pods", registry=registry)
    async def pod_event(event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
        state = _state(memo)
        state.store.listed.set()
        if _is_deleted(event):
            state.metrics.watch_events.labels(kind="pod").inc()
            state.store.remove_pod(body.metadata.namespace or "", body.metadata.name or "")

    @kopf.index("apps", "v1", "daemonsets", registry=registry)
    async def index_daemon_set(body: kopf.Body, memo: Any, **_: Any) -> None:
        state = _state(memo)
        state.metrics.watch_events.labels(kind="daemonset").inc()
        try:
            facts = state.extractor.daemon_set(body)
        except FactsError as error:
            logger.error("ignoring DaemonSet: %s", error)
            return
        if facts is not None:
            state.store.put_daemon_set(facts)

    @kopf.on.event("apps", "v1", "daemonsets", registry=registry)
    async def daemon_set_event(event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
        state = _state(memo)
        state.store.listed.set()
        if _is_deleted(event):
            state.metrics.watch_events.labels(kind="daemonset").inc()
            state.store.remove_daemon_set(body.metadata.namespace or "", body.metadata.name or "")

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def capability_event(event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
        state = _state(memo)
        state.metrics.watch_events.labels(kind="fabriccapability").inc()
        state.store.listed.set()
        if state.publisher is not None and state.publisher.loaded:
            state.publisher.observe_published(dict(body), deleted=_is_deleted(event))

    return registry
