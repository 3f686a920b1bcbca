"""Observing Nodes, Pods and DaemonSets (and the operator's own objects): paginated LIST, then WATCH.

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
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import FactStore
from fabriccap.core.facts import FactsError, FactsExtractor, IgnoredObjectError, object_name
from fabriccap.kube.client import DEFAULT_WATCH_READ_TIMEOUT, DEFAULT_WATCH_SECONDS, KubeClient
from fabriccap.kube.errors import KubeError
from fabriccap.kube.kinds import DEFAULT_PAGE_SIZE, WatchedKind, kinds_for, object_key
from fabriccap.kube.paths import CRD_NAME, FABRIC_CAPABILITIES

logger = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 30.0
# How often an optional kind the API server does not serve (ResourceSlices before 1.34) is
# looked for again: an upgrade brings it, and one quiet GET per 10 minutes costs nothing.
ABSENT_RECHECK_SECONDS = 600.0


class _ExpiredError(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


@dataclass(kw_only=True)
class ListWatch:
    """LIST one collection in pages, then WATCH it from the listing's resourceVersion.

    A broken stream resumes from the last version seen, an expired one (410 Gone) lists
    again, and a failed LIST is retried with a backoff. What an object means is the
    subclass's: ``_apply`` takes each listed item and event, ``_listed`` the keys a fresh
    LIST holds (everything else is gone).
    """

    client: KubeClient
    path: str
    metrics: OperatorMetrics
    listed: asyncio.Event = field(default_factory=asyncio.Event)
    clock: Callable[[], float] = time.monotonic
    # How long one watch request lasts (the server ends it, we resume), and how long a stream
    # may stay silent before it counts as stalled. Both follow the staleness threshold
    # (watch_timings): the defaults are the client's, 60 s and 90 s for 150 s.
    watch_seconds: int = DEFAULT_WATCH_SECONDS
    read_timeout: float = DEFAULT_WATCH_READ_TIMEOUT
    # Monotonic time of the last successful LIST or watch event (a BOOKMARK counts: the watch
    # cache sends one at least every minute), and whether the watch is up right now.
    last_success: float | None = None
    connected: bool = False
    page_size: int = DEFAULT_PAGE_SIZE

    @property
    def kind(self) -> str:
        raise NotImplementedError

    def _succeeded(self) -> None:
        self.last_success = self.clock()
        self.connected = True

    def _failed(self) -> None:
        self.connected = False

    async def _list_refused(self, error: KubeError) -> bool:
        """Handle a LIST error that is an answer rather than a failure; False: retry with a backoff."""
        return False

    def _served(self) -> None:
        """Called after every successful LIST."""

    async def run(self) -> None:
        delay = 1.0
        while True:
            try:
                version = await self._list()
            except KubeError as error:
                if await self._list_refused(error):
                    continue
                self._failed()
                logger.error("listing %s failed: %s; retrying in %.0fs", self.path, error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_SECONDS)
                continue
            self._served()
            self.listed.set()
            delay = 1.0
            try:
                await self._watch_from(version)
            except _ExpiredError:
                logger.info("watch of %s expired; listing again", self.path)

    async def _list(self) -> str:
        keys: set[str] = set()
        version = ""
        async for page in self.client.list_pages(self.path, self.page_size):
            version = version or str((page.get("metadata") or {}).get("resourceVersion") or "")
            for item in page.get("items") or []:
                self.metrics.watch_events.labels(kind=self.kind).inc()
                keys.add(object_key(item))
                self._apply("ADDED", item)
        self._listed(keys, version)
        self._succeeded()
        return version

    async def _watch_from(self, version: str) -> None:
        delay = 1.0
        while True:
            try:
                async for event in self.client.watch(
                    self.path, version, self.watch_seconds, self.read_timeout, on_open=self._succeeded
                ):
                    event_type, body = event.get("type"), event.get("object") or {}
                    if event_type == "ERROR":
                        if body.get("code") == 410:
                            raise _ExpiredError
                        raise KubeError(f"watch {self.path}: {body.get('message', body)}", body.get("code"))
                    version = str((body.get("metadata") or {}).get("resourceVersion") or version)
                    self._succeeded()
                    if event_type != "BOOKMARK":
                        self.metrics.watch_events.labels(kind=self.kind).inc()
                        self._apply(str(event_type), body)
                delay = 1.0  # the server closed a healthy stream (timeoutSeconds): resume
            except KubeError as error:
                if error.status == 410:
                    raise _ExpiredError from None
                self._failed()
                logger.warning("watch of %s interrupted: %s; resuming in %.0fs", self.path, error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_SECONDS)

    def _apply(self, event_type: str, body: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _listed(self, keys: set[str], version: str) -> None:
        raise NotImplementedError


@dataclass(kw_only=True)
class Informer(ListWatch):
    """List and watch one kind in one scope (a namespace, or None: cluster-wide) into the fact store."""

    watched: WatchedKind
    scope: str | None
    store: FactStore
    extractor: FactsExtractor
    # An optional kind this API server does not serve: nothing to watch, nothing gone stale.
    absent: bool = False
    absent_recheck_seconds: float = ABSENT_RECHECK_SECONDS
    # Objects already logged as ignored (well-formed but of no use): said once, not per event.
    ignored: set[str] = field(default_factory=set)

    @property
    def kind(self) -> str:
        return self.watched.label

    async def _list_refused(self, error: KubeError) -> bool:
        if error.status == 404 and self.watched.optional:
            await self._absent()
            return True
        return False

    def _served(self) -> None:
        if self.absent:
            self.absent = False
            logger.info("%s is served now: reading %ss", self.path, self.watched.kind)

    async def _absent(self) -> None:
        """The API server answered 404 for an optional kind: it does not serve it (one log line,
        not a retry storm). The answer is contact, so the kind counts as listed, empty."""
        if not self.absent:
            logger.info(
                "%s is not served (%s needs Kubernetes >= 1.34): carrying on without %ss, looking again every %.0fs",
                self.path,
                self.watched.resource.api_version,
                self.watched.kind,
                self.absent_recheck_seconds,
            )
        self.absent = True
        self.watched.retain(self.store, self.scope, set())
        self._succeeded()
        self.listed.set()
        await asyncio.sleep(self.absent_recheck_seconds)

    def _listed(self, keys: set[str], version: str) -> None:
        self.watched.retain(self.store, self.scope, keys)

    def _apply(self, event_type: str, body: Mapping[str, Any]) -> None:
        try:
            if event_type == "DELETED":
                self.watched.delete(self.store, body)
            elif self.watched.kind == "ResourceSlice":
                self._apply_slice(body)
            elif self.watched.kind == "Node":
                name = object_name((body.get("metadata") or {}).get("name"))
                before = self.store.nodes.get(name)
                self.watched.upsert(self.store, self.extractor, body)
                after = self.store.nodes.get(name)
                if after is not None and after.unusable and (before is None or before.unusable != after.unusable):
                    problems = "; ".join(entry.problem for entry in after.unusable)
                    logger.error("node %s: unusable quantity (%s); it counts as not advertising", name, problems)
            else:
                self.watched.upsert(self.store, self.extractor, body)
        except IgnoredObjectError as error:
            key = object_key(body)
            if key not in self.ignored:
                self.ignored.add(key)
                logger.warning("ignoring %s: %s", self.kind, error)
            self.watched.delete(self.store, body)
        except FactsError as error:
            # One malformed object must not stop the watch; it is left out (fail-closed).
            logger.error("ignoring %s: %s", self.kind, error)
            self.watched.delete(self.store, body)

    def _apply_slice(self, body: Mapping[str, Any]) -> None:
        name = object_name((body.get("metadata") or {}).get("name"))
        before = self.store.slices.get(name)
        self.watched.upsert(self.store, self.extractor, body)
        after = self.store.slices.get(name)
        if after is None:
            return
        # Logged when it changes, not on every event: a driver republishes its slices often.
        if after.problem and (before is None or before.problem != after.problem):
            logger.error("%s; node %s counts as not advertising through it", after.problem, after.node_name)
        if after.without_attributes and (before is None or before.without_attributes != after.without_attributes):
            logger.warning(
                "ResourceSlice %s: %d devices have no attributes and match no fabric", name, after.without_attributes
            )


class PublishedObserver(Protocol):
    """Where the operator's own FabricCapabilities go: the publisher."""

    def observe_published(self, obj: dict[str, Any], deleted: bool) -> None: ...

    def forget_unlisted(self, names: set[str], version: str) -> None: ...


@dataclass(kw_only=True)
class PublishedWatch(ListWatch):
    """The operator's own FabricCapabilities, through which the publisher notices an object
    deleted or edited by someone else and puts its answer back.

    Not kopf's watch: a kopf watch that answers 404 (the CRD deleted) ends the whole of kopf,
    which cancels the publisher's work on its way out (see frame.py). Here a missing CRD is
    a LIST retried with a backoff, one warning per outage, and the recreated CRD is listed
    as soon as it is served. Not part of ``Freshness`` either: these objects are the
    operator's output, not the facts its answer rests on.
    """

    observer: PublishedObserver
    path: str = FABRIC_CAPABILITIES.collection()
    missing_delay: float = 1.0

    @property
    def kind(self) -> str:
        return "fabriccapability"

    async def _list_refused(self, error: KubeError) -> bool:
        if error.status != 404:
            return False
        self._failed()
        if self.missing_delay == 1.0:
            logger.warning("%s is not served (CRD %s missing): looking again with a backoff", self.path, CRD_NAME)
        await asyncio.sleep(self.missing_delay)
        self.missing_delay = min(self.missing_delay * 2, MAX_BACKOFF_SECONDS)
        return True

    def _served(self) -> None:
        self.missing_delay = 1.0

    def _apply(self, event_type: str, body: Mapping[str, Any]) -> None:
        self.observer.observe_published(dict(body), deleted=event_type == "DELETED")

    def _listed(self, keys: set[str], version: str) -> None:
        self.observer.forget_unlisted(keys, version)


@dataclass
class Freshness:
    """How current the operator's view of the cluster is, over every informer.

    The view is fresh while every informer has listed and heard from the API server (an event
    or a bookmark) within ``stale_after`` seconds. A partition keeps the last facts in memory
    and the evaluation loop running, so without this the published answer would look current.
    """

    informers: list[Informer]
    stale_after: float
    metrics: OperatorMetrics
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time

    def ages(self) -> dict[str, float | None]:
        """Seconds since each kind last heard from the API server (its oldest informer); None: never."""
        now = self.clock()
        by_kind: dict[str, list[float | None]] = {}
        for informer in self.informers:
            if informer.absent:
                continue
            age = None if informer.last_success is None else now - informer.last_success
            by_kind.setdefault(informer.kind, []).append(age)
        return {
            kind: None if any(age is None for age in ages) else max(age for age in ages if age is not None)
            for kind, ages in by_kind.items()
        }

    def stale_kinds(self) -> dict[str, float | None]:
        return {kind: age for kind, age in self.ages().items() if age is None or age > self.stale_after}

    def fresh(self) -> bool:
        return not self.stale_kinds()

    def export(self) -> None:
        """Refresh the per-kind freshness gauges (called at scrape time and every round)."""
        now, wall = self.clock(), self.wall()
        for kind in {informer.kind for informer in self.informers}:
            own = [informer for informer in self.informers if informer.kind == kind and not informer.absent]
            if not own:
                # Not served: no series, rather than one whose age would fire the Stale alert.
                for gauge in (self.metrics.watch_last_event, self.metrics.watch_connected):
                    with contextlib.suppress(KeyError):
                        gauge.remove(kind)
                continue
            seen = [informer.last_success for informer in own]
            if all(moment is not None for moment in seen):
                oldest = min(moment for moment in seen if moment is not None)
                self.metrics.watch_last_event.labels(kind=kind).set(wall - (now - oldest))
            self.metrics.watch_connected.labels(kind=kind).set(1 if all(i.connected for i in own) else 0)

    def describe_staleness(self) -> str:
        stale = self.stale_kinds()
        parts = []
        for kind, age in sorted(stale.items()):
            connected = all(i.connected for i in self.informers if i.kind == kind)
            state = "connected" if connected else "disconnected"
            parts.append(f"{kind}s never listed" if age is None else f"{kind}s last heard {age:.0f}s ago ({state})")
        return ", ".join(parts)


def watch_timings(stale_after: float) -> tuple[int, float]:
    """(watch request seconds, read timeout) for a staleness threshold.

    On a quiet cluster a watch may carry no event at all: what proves contact is a watch being
    accepted, so watches are renewed well within the threshold (every 0.4 x) and a stream
    silent for 0.6 x is dropped as stalled. 150 s gives 60 s and 90 s.
    """
    return max(int(stale_after * 0.4), 1), max(stale_after * 0.6, 1.0)


def build_informers(
    client: KubeClient,
    store: FactStore,
    extractor: FactsExtractor,
    metrics: OperatorMetrics,
    stale_after: float = 150.0,
) -> list[Informer]:
    """One informer per watched kind and scope: Nodes (and ResourceSlices, when a fabric reads
    DRA) cluster-wide, the rest per plugin namespace."""
    watch_seconds, read_timeout = watch_timings(stale_after)
    return [
        Informer(
            client=client,
            watched=watched,
            scope=scope,
            path=path,
            store=store,
            extractor=extractor,
            metrics=metrics,
            watch_seconds=watch_seconds,
            read_timeout=read_timeout,
            page_size=watched.page_size,
        )
        for watched in kinds_for(extractor.config)
        for scope, path in watched.paths(extractor.config)
    ]
