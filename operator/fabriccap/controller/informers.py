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
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import FactStore
from fabriccap.core.evaluate import SCHEDULER_ON_ERROR
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
# Distinct (class, cause) selector failures logged between two changes of the classes: a cause
# quotes what the device holds, so a hostile driver could make many; the status counts the rest.
MAX_SAID_FAILURES = 100


# The message of the cancellation an informer sends itself to list again.
RELIST = "the classes changed: list again"


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
    # Listed only once these are set (ResourceSlices wait for the DeviceClasses they are read
    # with, so a start does not read every slice twice).
    after: tuple[asyncio.Event, ...] = ()
    # Set when what the facts were read with changed (the DeviceClasses): LIST again. The
    # per-slice memo keeps that cheap: only the classes' verdicts on distinct devices are new.
    relist_on: asyncio.Event | None = None

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

    def _relisting(self) -> None:
        """Called before a LIST that ``relist_on`` asked for."""

    async def run(self) -> None:
        for first in self.after:
            await first.wait()
        delay = 1.0
        while True:
            if self.relist_on is not None:
                self.relist_on.clear()  # this LIST reads with what changed
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
                await self._watch_until_relist(version)
            except _ExpiredError:
                logger.info("watch of %s expired; listing again", self.path)

    async def _watch_until_relist(self, version: str) -> None:
        """Watch from ``version`` until ``relist_on`` is set and ``_relist_needed`` (then
        return: the caller lists again), or the watch expires (_ExpiredError).

        The watch runs in this task, so a cancellation from outside (kopf stops every task on
        its way out) ends it as before; a small waiter cancels it to ask for a LIST, and that
        one cancellation is taken back (``uncancel``), never one from outside."""
        if self.relist_on is None:
            await self._watch_from(version)
            return
        task = asyncio.current_task()
        assert task is not None
        asked = False

        async def wait_for_a_change(relist_on: asyncio.Event) -> None:
            nonlocal asked
            while True:
                await relist_on.wait()
                relist_on.clear()
                if self._relist_needed():
                    asked = True
                    task.cancel(RELIST)
                    return

        waiter = asyncio.ensure_future(wait_for_a_change(self.relist_on))
        try:
            await self._watch_from(version)
        except asyncio.CancelledError:
            if not asked or task.uncancel() > 0:
                raise  # stopped from outside (as well)
        finally:
            waiter.cancel()
        self._relisting()

    def _relist_needed(self) -> bool:
        """Whether what ``relist_on`` announced changes what this collection's facts say."""
        return True

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
    # What the DeviceClasses' state was last said to be (a class broken, missing, stood in for
    # by a copy): each line once while it holds, again if it comes back.
    said_classes: set[str] = field(default_factory=set)
    # Selector failures on devices already logged, per (class, cause): once each, however many
    # devices and slices share it, until the classes change.
    said_failures: set[tuple[str, str]] = field(default_factory=set)
    # The classes' signature the last LIST read the slices with (FactsExtractor.selection_signature).
    read_with: Hashable = None

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
        self._say_classes()
        self._succeeded()
        self.listed.set()
        await asyncio.sleep(self.absent_recheck_seconds)

    async def _list(self) -> str:
        if self.watched.read_with_classes:
            self.read_with = self.extractor.selection_signature(self.store.class_view())
        return await super()._list()

    def _listed(self, keys: set[str], version: str) -> None:
        self.watched.retain(self.store, self.scope, keys)
        self._say_classes()

    def _relist_needed(self) -> bool:
        # A class edited in a way that selects the same (its labels, its extendedResourceName)
        # leaves every slice's facts as they are: no LIST, no new log lines.
        return self.extractor.selection_signature(self.store.class_view()) != self.read_with

    def _relisting(self) -> None:
        logger.info("DeviceClasses changed: listing %s again to read them with the new selectors", self.path)
        self.said_failures.clear()

    def _say_classes(self) -> None:
        """Log how the DRA fabrics' classes stand, when that changed: a class that selects
        nothing (it does not compile, or there is none to be had) or one counted from the
        profile's copy because the cluster lacks it (a DeviceClass deleted mid-run)."""
        if self.watched.kind != "DeviceClass":
            return
        lines: dict[str, int] = {}
        for fabric, selection in sorted(self.extractor.selections(self.store.class_view()).items()):
            for effective in selection.classes:
                if effective.error is not None:
                    lines[f"{fabric}: {effective.describe()} selects nothing: {effective.error}"] = logging.ERROR
                elif effective.stands_in:
                    origin = effective.copy_origin
                    lines[
                        f"{fabric}: {effective.describe()} is not in the cluster: counting with {origin};"
                        " ResourceClaims of it cannot be allocated until it is installed"
                    ] = logging.WARNING
        for line, level in lines.items():
            if line not in self.said_classes:
                logger.log(level, "%s", line)
        self.said_classes = set(lines)

    def _apply(self, event_type: str, body: Mapping[str, Any]) -> None:
        try:
            if event_type == "DELETED":
                self.watched.delete(self.store, body)
                self._say_classes()
            elif self.watched.kind == "DeviceClass":
                self.watched.upsert(self.store, self.extractor, body)
                self._say_classes()
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
        for _fabric, count in after.devices:
            for error in count.errors:
                cause = (error.class_name, error.cause)
                if cause in self.said_failures or len(self.said_failures) >= MAX_SAID_FAILURES:
                    continue
                self.said_failures.add(cause)
                logger.error(
                    "DeviceClass %s %s on device %s of ResourceSlice %s (node %s): not counted; %s",
                    error.class_name,
                    error.cause,
                    error.example,
                    name,
                    after.node_name,
                    SCHEDULER_ON_ERROR,
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
    """One informer per watched kind and scope: Nodes (and, when a fabric reads DRA,
    DeviceClasses, ResourceSlices and ResourceClaims) cluster-wide, the rest per plugin
    namespace. The ResourceSlices wait for the DeviceClasses' first LIST and are listed again
    when the classes change."""
    watch_seconds, read_timeout = watch_timings(stale_after)
    informers = [
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
    classes_listed = tuple(informer.listed for informer in informers if informer.watched.kind == "DeviceClass")
    for informer in informers:
        if informer.watched.read_with_classes:
            informer.after = classes_listed
            informer.relist_on = store.classes_changed
    return informers
