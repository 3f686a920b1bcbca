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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import FactStore
from fabriccap.core.facts import FactsError, FactsExtractor
from fabriccap.kube.client import KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.kinds import WATCHED_KINDS, WatchedKind, object_key

logger = logging.getLogger(__name__)

PAGE_SIZE = 250  # ~5 MB of JSON per page of realistic nodes: the transient peak at start-up
MAX_BACKOFF_SECONDS = 30.0


class _ExpiredError(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


@dataclass
class Informer:
    """List and watch one kind in one scope (a namespace, or None: cluster-wide)."""

    client: KubeClient
    watched: WatchedKind
    scope: str | None
    path: str
    store: FactStore
    extractor: FactsExtractor
    metrics: OperatorMetrics
    listed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def kind(self) -> str:
        return self.watched.label

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
                keys.add(object_key(item))
                self._apply("ADDED", item)
        self.watched.retain(self.store, self.scope, keys)
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
                self.watched.delete(self.store, body)
            elif self.watched.kind == "Node":
                name = str((body.get("metadata") or {}).get("name"))
                before = self.store.nodes.get(name)
                self.watched.upsert(self.store, self.extractor, body)
                after = self.store.nodes.get(name)
                if after is not None and after.unusable and (before is None or before.unusable != after.unusable):
                    problems = "; ".join(entry.problem for entry in after.unusable)
                    logger.error("node %s: unusable quantity (%s); it counts as not advertising", name, problems)
            else:
                self.watched.upsert(self.store, self.extractor, body)
        except FactsError as error:
            # One malformed object must not stop the watch; it is left out (fail-closed).
            logger.error("ignoring %s: %s", self.kind, error)
            self.watched.delete(self.store, body)


def build_informers(
    client: KubeClient,
    store: FactStore,
    extractor: FactsExtractor,
    metrics: OperatorMetrics,
    namespaces: list[str],
) -> list[Informer]:
    """One informer per watched kind and scope: Nodes cluster-wide, the rest per plugin namespace."""
    return [
        Informer(
            client=client,
            watched=watched,
            scope=scope,
            path=path,
            store=store,
            extractor=extractor,
            metrics=metrics,
        )
        for watched in WATCHED_KINDS
        for scope, path in watched.paths(tuple(namespaces))
    ]
