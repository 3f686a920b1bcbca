"""Observing Nodes, Pods and DaemonSets: paginated LIST, then WATCH, keeping only facts.

Read-only by construction: the only calls made here are GET (list) and GET ?watch. Each
page or event is turned into facts at once and dropped, so the operator's memory follows
the number of objects (tens of bytes each), not the size of their bodies (10-20 KB per
Node). Measured before this module existed, with kopf's per-object workers watching these
kinds: ~45 KB of resident memory per object and a start time quadratic in the object count.

The loop per collection: LIST in pages (one consistent snapshot), forget objects the
snapshot no longer has, then WATCH from its resourceVersion with bookmarks; a broken stream
resumes from the last version seen, an expired one (410 Gone) lists again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from fabriccap.errors import KubeError
from fabriccap.facts import FactsError, FactsExtractor
from fabriccap.kube import KubeClient
from fabriccap.metrics import OperatorMetrics
from fabriccap.store import FactStore

logger = logging.getLogger("fabriccap.watchers")

PAGE_SIZE = 250  # ~5 MB of JSON per page of realistic nodes: the transient peak at start-up
MAX_BACKOFF_SECONDS = 30.0


class _ExpiredError(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def _key(body: Mapping[str, Any]) -> str:
    metadata = body.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata.get('name')}" if namespace else str(metadata.get("name"))


@dataclass
class Informer:
    client: KubeClient
    kind: str  # "node" | "pod" | "daemonset" (metrics label, logs)
    path: str
    upsert: Callable[[Mapping[str, Any]], object]
    remove: Callable[[Mapping[str, Any]], object]
    retain: Callable[[set[str]], object]  # after a LIST: forget every key not in the set
    metrics: OperatorMetrics
    listed: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        delay = 1.0
        while True:
            try:
                version = await self._list()
            except KubeError as error:
                logger.error("listing %s failed: %s; retrying in %.0fs", self.path, error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_SECONDS)
                continue
            self.listed.set()
            delay = 1.0
            try:
                await self._watch_from(version)
            except _ExpiredError:
                logger.info("watch of %s expired; listing again", self.path)

    async def _list(self) -> str:
        keys: set[str] = set()
        version = ""
        async for page in self.client.list_pages(self.path, PAGE_SIZE):
            version = version or str((page.get("metadata") or {}).get("resourceVersion") or "")
            for item in page.get("items") or []:
                self.metrics.watch_events.labels(kind=self.kind).inc()
                keys.add(_key(item))
                self._apply("ADDED", item)
        self.retain(keys)
        return version

    async def _watch_from(self, version: str) -> None:
        delay = 1.0
        while True:
            try:
                async for event in self.client.watch(self.path, version):
                    event_type, body = event.get("type"), event.get("object") or {}
                    if event_type == "ERROR":
                        if body.get("code") == 410:
                            raise _ExpiredError
                        raise KubeError(f"watch {self.path}: {body.get('message', body)}", body.get("code"))
                    version = str((body.get("metadata") or {}).get("resourceVersion") or version)
                    if event_type != "BOOKMARK":
                        self.metrics.watch_events.labels(kind=self.kind).inc()
                        self._apply(str(event_type), body)
                delay = 1.0  # the server closed a healthy stream (timeoutSeconds): resume
            except KubeError as error:
                if error.status == 410:
                    raise _ExpiredError from None
                logger.warning("watch of %s interrupted: %s; resuming in %.0fs", self.path, error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_SECONDS)

    def _apply(self, event_type: str, body: Mapping[str, Any]) -> None:
        try:
            if event_type == "DELETED":
                self.remove(body)
            else:
                self.upsert(body)
        except FactsError as error:
            # One malformed object must not stop the watch; it is left out (fail-closed).
            logger.error("ignoring %s: %s", self.kind, error)
            self.remove(body)


def _metadata(body: Mapping[str, Any]) -> tuple[str, str]:
    metadata = body.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def build_informers(
    client: KubeClient,
    store: FactStore,
    extractor: FactsExtractor,
    metrics: OperatorMetrics,
    namespaces: list[str],
) -> list[Informer]:
    """Nodes cluster-wide; DaemonSets and Pods only in the device-plugin namespaces."""

    def upsert_pod(body: Mapping[str, Any]) -> None:
        facts = extractor.pod(body)
        if facts is None:  # not (or no longer) owned by a DaemonSet: must not linger
            store.remove_pod(*_metadata(body))
        else:
            store.put_pod(facts)

    def upsert_daemon_set(body: Mapping[str, Any]) -> None:
        facts = extractor.daemon_set(body)
        if facts is None:
            store.remove_daemon_set(*_metadata(body))
        else:
            store.put_daemon_set(facts)

    informers = [
        Informer(
            client=client,
            kind="node",
            path="/api/v1/nodes",
            upsert=lambda body: store.put_node(extractor.node(body)),
            remove=lambda body: store.remove_node(_metadata(body)[1]),
            retain=store.retain_nodes,
            metrics=metrics,
        )
    ]
    for namespace in namespaces:
        informers.append(
            Informer(
                client=client,
                kind="daemonset",
                path=f"/apis/apps/v1/namespaces/{namespace}/daemonsets",
                upsert=upsert_daemon_set,
                remove=lambda body: store.remove_daemon_set(*_metadata(body)),
                retain=partial(store.retain_daemon_sets, namespace),
                metrics=metrics,
            )
        )
        informers.append(
            Informer(
                client=client,
                kind="pod",
                path=f"/api/v1/namespaces/{namespace}/pods",
                upsert=upsert_pod,
                remove=lambda body: store.remove_pod(*_metadata(body)),
                retain=partial(store.retain_pods, namespace),
                metrics=metrics,
            )
        )
    return informers
