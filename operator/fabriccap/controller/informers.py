"""Observing the watched kinds (and the operator's own objects): paginated LIST, then WATCH.

Read-only by construction: the only calls made here are GET (list) and GET ?watch. Each
page or event is turned into facts at once and dropped, so the operator's memory follows
the number of objects (tens of bytes each), not the size of their bodies (10-20 KB per
Node). Measured before this module existed, with kopf's per-object workers watching these
kinds: ~45 KB of resident memory per object and a start time quadratic in the object count.

The loop per collection: a streaming list where the API server offers one (a WATCH with
sendInitialEvents=true: the objects one event at a time, then a bookmark with the snapshot's
resourceVersion), else LIST in pages (one consistent snapshot); forget objects the snapshot no
longer has, then WATCH from its resourceVersion with bookmarks; a broken stream
resumes from the last good version, an expired one (410 Gone) lists again, a quiet one is
nudged (``NUDGE_SELECTOR``) so that its next bookmark advances, and a watch that has made no
progress for half the staleness threshold lists again (``freshness.py``).

Why streaming first: on scalesim at 10,000 nodes / 100,000 pods a plain client read every
collection in 90 s as a streaming list and in 282 s in pages (a shared 2-core machine; the
pages pay a snapshot, gzip and a request each), and the operator's start, paged, was 208 s.

Nothing here names a kind: what a kind's objects become is its row (``kube.kinds``).

A watch line is trusted only once it reads as an event of the watched kind
(``read_event``). One that does not (not JSON, not an object, an ``object`` or ``metadata``
that is not a map, another kind, no resourceVersion, or a resourceVersion no API server could
have reached yet) is rejected: logged once per cause, counted in
``fabriccap_watch_events_total{result="rejected"}``, and the stream is ended and resumed from
the last good version, so the server sends again whatever the bad line stood for. An event
that reads well but whose object cannot be used (``FactsError``) is a real event of a bad
object: the object is left out (its node fails closed), the event is counted as rejected, and
the watch goes on from it (resuming before it would only get it again).

Two kinds of line are not decoded at all (``kube.unread``): a new pod whose text names no
resource, claim, variable or owner the facts are read by (four pods in five at 100,000 nodes),
counted as ``result="unread"``; and a change to a Node that moved only what its facts never
read (a heartbeat), counted as ``result="unchanged"``. Their versions count as an event's would
(progress, plausibility); the first holds no facts, the second the ones already held, so
nothing is lost by not reading them. Every listing starts the second over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import Counter

from fabriccap.controller.memory import (
    MIN_LINES_BETWEEN_TRIMS,
    MIN_LISTED_BETWEEN_TRIMS,
    MIN_SECONDS_BETWEEN_TRIMS,
    MemoryTrimmer,
)
from fabriccap.controller.metrics import OperatorMetrics
from fabriccap.controller.store import Announcement, FactStore
from fabriccap.core.evaluate import on_selector_failure
from fabriccap.core.facts import MAPPINGS, FactsError, FactsExtractor, IgnoredObjectError
from fabriccap.core.unlisted import UnlistedKeys
from fabriccap.kube.client import DEFAULT_WATCH_READ_TIMEOUT, DEFAULT_WATCH_SECONDS, KubeClient
from fabriccap.kube.errors import KubeError, WatchLineError
from fabriccap.kube.kinds import DEFAULT_PAGE_SIZE, WATCHED_KINDS, WatchedKind, kinds_for, listed_first, object_key
from fabriccap.kube.paths import CRD_NAME, FABRIC_CAPABILITIES
from fabriccap.kube.unread import LineRule, UnreadEvent
from fabriccap.kube.versions import version_number

logger = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 30.0
# How far the progress deadline must move before it is moved, as a share of the progress
# timeout (``_progressed``): 0.75 s of 75 s.
DEADLINE_STEP = 0.01
# How often an optional kind the API server does not serve (ResourceSlices before 1.34) is
# looked for again: an upgrade brings it, and one quiet GET per 10 minutes costs nothing.
ABSENT_RECHECK_SECONDS = 600.0

# The plausibility of a resourceVersion. Kubernetes calls them opaque, but every API server
# backed by etcd (or kine) hands out its store's revision: one counter for the whole cluster
# that grows by one per write. So a version can be at most as far beyond one the server gave
# us as the writes it could have committed since. etcd commits a few thousand writes a second
# on good disks and has never been measured near 100,000; with a million of slack for bursts,
# a version beyond that bound came from something other than this server (a broken proxy, a
# corrupted bookmark; round 3's L11 sent 99999999999). Resuming from it would leave the watch
# blind for good: the server answers a watch from a future version with silence. A version
# that is not a number is not judged at all.
MAX_WRITES_PER_SECOND = 100_000
RESOURCE_VERSION_SLACK = 1_000_000
# Each distinct problem is said once; this bounds how many are remembered (the oldest are
# forgotten first, and could be said again).
MAX_REMEMBERED_MESSAGES = 1024

# What an API server says (HTTP 504, or an ERROR event) when a watch or LIST asks for a version
# it has not reached: client-go's reflector lists again, and so does this.
TOO_LARGE_RESOURCE_VERSION = "Too large resource version"

# How long a streaming list may take before the server ends it (its timeoutSeconds): the
# initial events of a large collection take minutes on a busy server, and a stream ended
# before its initial-events-end bookmark is a broken one (read in pages that once).
STREAMING_LIST_SECONDS = 1800
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# What an API server without streaming lists answers: 422 (the WatchList gate off, as 1.33 by
# default), 400 (a server that rejects resourceVersionMatch on a watch).
NO_STREAMING_LIST = frozenset({400, 422})
# How long an API server that showed it has no streaming lists is listed in pages before one is
# asked for again: a control plane upgraded to 1.34 (WatchList on) streams from then on without
# the operator restarting, and a server that ignores sendInitialEvents costs one listing read
# in full before its first change shows it, once an hour at most.
STREAMING_RETRY_SECONDS = 3600.0
# What a streaming list may take on this side past its timeoutSeconds before it is given up: a
# server (or a front end) that keeps the stream open with whitespace would otherwise hold the
# listing forever, since a line of whitespace resets the read timeout and is not an event.
STREAMING_LIST_GRACE_SECONDS = 60.0
# The LIST that checks a watch without progress streams where lists stream. A quiet kind's
# watch hears nothing at all (the API server sends no bookmark that would not advance the
# watch's version), just as a silent one does, and pages of 500 quiet nodes decoded at once
# took the RSS at 10,000 nodes from 133 to 171-174 MiB, most of it kept (docs/performance.md,
# "A quiet watch checked by a streaming list"). A check whose stream is silent this long, or
# fails in any way, means the watch path is failing: pages then, well before the view is stale.
CHECK_STREAM_READ_TIMEOUT = 10.0
# The nudge: a consistent LIST whose field selector no object can match (":" is in no object's
# name), so the answer holds no object. The API server answers it from its watch cache, which
# first asks etcd for progress (ConsistentListFromCache, on by default since Kubernetes 1.31),
# so the cache's version moves and the watch's next bookmark advances: the quiet watch proves
# itself without a LIST of every object. Measured on kube-apiserver v1.35.4
# (benchmarks/bookmark_probe.py): a quiet ResourceSlice watch heard no bookmark in 130 s while
# other kinds were written; nudged every 10 s, one a minute, each advancing. The first nudge
# must come before the request's first bookmark is due: a cache that has seen no event and no
# progress by then drops the request's bookmarks altogether (k8s.io/apiserver cacher.go,
# dispatchEvents, "pop expired watchers in case there has been no update"); the first nudge
# comes after 0.05x of staleAfterSeconds, the bookmark after 0.4x less 2 s.
NUDGE_SELECTOR = "metadata.name=fabriccap:progress"
# How long before a watch request's end the API server sends its last bookmark
# (k8s.io/apiserver pkg/storage/cacher/cache_watcher.go, nextBookmarkTime: the deadline less 2 s).
BOOKMARK_LEAD = 2.0

# Distinct (class, cause) selector failures logged between two changes of the classes: a cause
# quotes what the device holds, so a hostile driver could make many; the status counts the rest.
MAX_SAID_FAILURES = 100
# How long the watch of the operator's own FabricCapabilities may go without progress before
# they are listed again (PublishedWatch).
PUBLISHED_PROGRESS_TIMEOUT = 1800.0
# A watch the server ends sooner than this, having moved nothing, is a failure (backed off).
SHORT_WATCH_SECONDS = 1.0
# The message of the cancellation an informer sends itself to list again.
RELIST = "what the facts are read with changed: list again"

EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})
# A listing counts its objects into fabriccap_watch_events_total, and tells the trimmer of them,
# this many at a time and when it stops (``_tally``): one by one, the labelled counter's inc
# (its lock) and the trimmer's two calls took 1.8 s of the 1.1 million lines of a 100,000-node
# start (py-spy, stop 58). A batch is a few milliseconds of a listing: the counter lags by that.
LISTED_PER_TALLY = 1024


class _ExpiredError(Exception):
    """The watch's resourceVersion is too old (410 Gone), or newer than the server's: list again."""


class _NoStreamingListError(Exception):
    """The API server does not stream lists: list in pages."""


class _NoProgressError(Exception):
    """The watch made no progress for ``progress_timeout``: list again."""


class RejectedEventError(KubeError):
    """A watch line that cannot be an event of the watched kind from this server.

    ``cause`` is short and stable (it keys the once-only log line), ``detail`` says more,
    ``name`` is the object's name when the line has one.
    """

    def __init__(self, cause: str, detail: str = "", name: str = "") -> None:
        super().__init__(f"{cause}{f' ({detail})' if detail else ''}")
        self.cause = cause
        self.detail = detail
        self.name = name


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK or ERROR
    body: Mapping[str, Any]
    resource_version: str  # "" for ERROR


def _shown(value: Any, limit: int = 80) -> str:
    """Text from the stream, quoted, with control characters escaped and a bounded length."""
    text = value if isinstance(value, str) else type(value).__name__
    return repr(text if len(text) <= limit else text[:limit] + "...")


def read_event(line: Any, kind: str) -> WatchEvent:
    """One decoded watch line as an event of ``kind``, or RejectedEventError saying why not.

    What is checked is what every event an API server sends has: an object with a type and an
    ``object`` map; for an ERROR, nothing more (its ``object`` is a Status); for the others a
    ``metadata`` map with a resourceVersion, and (but for BOOKMARK, which carries only its
    version) the watched kind. What the object holds beyond that is the extractor's to judge.
    """
    # MAPPINGS, not Mapping: a decoded line is a dict, which the tuple's first type answers
    # without the ABC's instance check (three per event, at a million events a start).
    if not isinstance(line, MAPPINGS):
        raise RejectedEventError("not an object", f"a JSON {type(line).__name__}")
    event_type = line.get("type")
    if event_type not in EVENT_TYPES:
        raise RejectedEventError("unknown event type", _shown(event_type))
    body = line.get("object")
    if not isinstance(body, MAPPINGS):
        raise RejectedEventError("object is not an object", f"a JSON {type(body).__name__}")
    if event_type == "ERROR":
        return WatchEvent("ERROR", body, "")
    metadata = body.get("metadata")
    if not isinstance(metadata, MAPPINGS):
        raise RejectedEventError("metadata is not a map", f"a JSON {type(metadata).__name__}")
    object_kind = body.get("kind")
    if object_kind != kind and not (event_type == "BOOKMARK" and object_kind is None):
        raise RejectedEventError("wrong kind", f"{_shown(object_kind)} in a watch of {kind}", _shown_name(metadata))
    version = metadata.get("resourceVersion")
    if not isinstance(version, str) or not version:
        raise RejectedEventError("no resourceVersion", "", _shown_name(metadata))
    return WatchEvent(str(event_type), body, version)


def _shown_name(metadata: Mapping[str, Any]) -> str:
    """The object's name as a rejection shows it ("" when it has none)."""
    name = metadata.get("name")
    return _shown(name) if isinstance(name, str) and name else ""


def _ends_initial_events(body: Mapping[str, Any]) -> bool:
    annotations = (body.get("metadata") or {}).get("annotations")
    return isinstance(annotations, Mapping) and annotations.get(INITIAL_EVENTS_END) == "true"


class SaidOnce:
    """Messages already logged, so each is said once; bounded (the oldest go first)."""

    def __init__(self, limit: int = MAX_REMEMBERED_MESSAGES) -> None:
        self.limit = limit
        self._said: dict[str, None] = {}

    def first_time(self, message: str) -> bool:
        if message in self._said:
            return False
        if len(self._said) >= self.limit:
            del self._said[next(iter(self._said))]
        self._said[message] = None
        return True


@dataclass(kw_only=True)
class ListWatch:
    """LIST one collection in pages, then WATCH it from the listing's resourceVersion.

    A broken stream resumes from the last good version, an expired one (410 Gone) lists
    again, a failed LIST is retried with a backoff, and a watch that made no progress for
    ``progress_timeout`` lists again. What an object means is the subclass's: ``_apply`` takes
    each event, ``_apply_listed`` each listed item, and ``_listed`` says a fresh LIST is done
    (what it did not name is gone; ``_begin_listing`` sets up what it names).
    """

    client: KubeClient
    path: str
    metrics: OperatorMetrics
    listed: asyncio.Event = field(default_factory=asyncio.Event)
    clock: Callable[[], float] = time.monotonic
    # How long one watch request lasts (the server ends it, we resume, and sends a bookmark
    # just before), and how long a stream may stay silent before it counts as stalled. Both
    # follow the staleness threshold (watch_timings): the defaults are the client's.
    watch_seconds: int = DEFAULT_WATCH_SECONDS
    read_timeout: float = DEFAULT_WATCH_READ_TIMEOUT
    # No progress for this long: the watch is given up and the collection listed again
    # (None: never). Half the staleness threshold, so a watch that delivers nothing usable
    # is replaced by a LIST before the view it keeps would count as stale.
    progress_timeout: float | None = None
    # The LIST under way replaces a watch without progress: ``missed`` counts the changes it
    # brings that the watch had not delivered (the subclass counts them in ``_apply``/``_listed``).
    checking: bool = False
    missed: int = 0
    # A watch without progress for this long is nudged (NUDGE_SELECTOR), once per quiet spell
    # (None: never). Stopped for good once a watch request nudged in time ends without a
    # bookmark that advanced (``_nudge_answered``): this server does not move its cache for a
    # nudge (a consistent read from etcd, of every object, would cost it as much as the check).
    nudge_after: float | None = None
    # When the watch was nudged, if it was since the last progress.
    nudged_at: float | None = None
    # Monotonic time of the last progress: a completed LIST, or a watch event or bookmark that
    # advanced the resourceVersion (never the opening of a watch); and whether the watch is up.
    last_progress: float | None = None
    connected: bool = False
    page_size: int = DEFAULT_PAGE_SIZE
    # Pages, not a streaming list, until this (monotonic) time: set when the API server showed
    # it has none, STREAMING_RETRY_SECONDS on (``streaming``).
    _pages_until: float | None = field(default=None, init=False)
    # What was logged already: shared by the informers of one kind, so a cause is said once per kind.
    said: SaidOnce = field(default_factory=SaidOnce)
    # Set when what the facts were read with changed (the DeviceClasses): LIST again. The
    # per-slice memo keeps that cheap: only the classes' verdicts on distinct devices are new.
    relist_on: Announcement | None = None
    # Told of each object a listing reads, decoded or not (shared by the informers): a large
    # listing leaves the allocators holding the memory its bodies took, which the trimmer gives
    # back every MIN_LISTED_BETWEEN_TRIMS objects, as the listing goes (``_tally``).
    trimmer: MemoryTrimmer | None = None
    # Told of each watch line (shared too): a watch never falls idle, so this one trims after
    # MIN_LINES_BETWEEN_TRIMS, at most once in MIN_SECONDS_BETWEEN_TRIMS; a listing's trim waits
    # for no clock.
    watch_trimmer: MemoryTrimmer | None = None
    # Which lines need not be decoded (kube.unread): new objects of no concern (counted as
    # unread) and changes that move nothing read (unchanged); neither is applied.
    unread: LineRule | None = None
    _event_counters: dict[str, Counter] = field(default_factory=dict, init=False)
    # What the listing under way has read since its last tally, by result (``_tally``).
    _untallied: dict[str, int] = field(default_factory=dict, init=False)
    _untallied_count: int = field(default=0, init=False)
    # The version to resume from, and the last one this server gave us with when it came:
    # the anchor of the plausibility rule (MAX_WRITES_PER_SECOND).
    version: str = field(default="", init=False)
    _anchor: tuple[int, float] | None = field(default=None, init=False)
    _deadline: asyncio.Timeout | None = field(default=None, init=False)

    @property
    def streaming(self) -> bool:
        """Whether the next listing asks for a streaming list first."""
        return self._pages_until is None or self.clock() >= self._pages_until

    @property
    def kind(self) -> str:
        """The kind's label (metrics, logs)."""
        raise NotImplementedError

    @property
    def object_kind(self) -> str:
        """The Kubernetes kind the watched objects have."""
        raise NotImplementedError

    def _progressed(self, version: str, as_of: float | None = None, *, newest: bool = True) -> None:
        """The view is current at ``version``. ``newest``: it was the server's newest version at
        ``as_of`` (default: now), as a listing's and a bookmark's are, and the plausibility
        rule is anchored at it. An event's is not: a burst read from a backlog (a watch
        resumed, or read late) holds versions far older than the server's, and anchoring at
        one rejected the next event of the same burst (a quiet kind's, a million writes on)."""
        now = self.clock() if as_of is None else as_of
        self.last_progress = now
        self.version = version
        self.nudged_at = None
        number = version_number(version)
        if number is not None and (newest or self._anchor is None):
            self._anchor = (number, now)
        if self._deadline is not None and self.progress_timeout is not None:
            # Moved in steps, not by every event: under churn a watch brings thousands a second,
            # and each move is a timer cancelled and another scheduled (2% of a core). The
            # deadline is then up to a step early.
            deadline = asyncio.get_running_loop().time() + self.progress_timeout
            current = self._deadline.when()
            if current is None or deadline - current >= self.progress_timeout * DEADLINE_STEP:
                self._deadline.reschedule(deadline)

    def _advances(self, version: str) -> bool:
        """Whether ``version`` is past the one the view is at (numbers compare as numbers)."""
        new, old = version_number(version), version_number(self.version)
        if new is not None and old is not None:
            return new > old
        return version != self.version

    def _check_plausible(self, version: str) -> None:
        number = version_number(version)
        if number is None or self._anchor is None:
            return
        anchor, since = self._anchor
        ceiling = anchor + RESOURCE_VERSION_SLACK + int(MAX_WRITES_PER_SECOND * max(self.clock() - since, 0.0))
        if number > ceiling:
            raise RejectedEventError(
                "implausible resourceVersion",
                f"{version} is beyond {ceiling}, the most this API server could have reached since it said {anchor}",
            )

    def _failed(self) -> None:
        self.connected = False

    def _opened(self) -> None:
        self.connected = True  # contact, not progress: nothing has been received yet

    def _count(self, result: str, times: int = 1) -> None:
        # Once per event, and per tally of a listing: the labelled child is looked up once per
        # result (``labels`` checks and joins its arguments on every call, 2% of a 100,000-node start).
        counter = self._event_counters.get(result)
        if counter is None:
            counter = self._event_counters[result] = self.metrics.watch_events.labels(kind=self.kind, result=result)
        counter.inc(times)

    async def _list_refused(self, error: KubeError) -> bool:
        """Handle a LIST error that is an answer rather than a failure; False: retry with a backoff."""
        return False

    def _served(self) -> None:
        """Called after every successful LIST."""

    def _checked(self) -> None:
        """The LIST after a watch without progress is done: say whether the watch had missed
        anything. Only that is a fault: the API server's bookmarks on a quiet collection do not
        always advance its resourceVersion (measured: a minute and more without), so a healthy
        watch of DeviceClasses or NodePools comes here too where nudges do not help."""
        found = "changes" if self.missed else "nothing"
        self.metrics.watch_relists.labels(kind=self.kind, found=found).inc()
        if self.missed:
            logger.warning(
                "the LIST of %s that replaced a watch without progress found %d change(s) the watch had not"
                " delivered; watching again from it",
                self.path,
                self.missed,
            )
        else:
            logger.info("the LIST of %s found nothing its watch had missed; watching again", self.path)
        self.checking, self.missed = False, 0

    async def run(self) -> None:
        delay = 1.0
        # Before a LIST again for a watch that expired without having moved: a server that
        # answers every watch from a listing's version with 410 (its watch cache has moved on
        # while a large collection was listed) would otherwise be listed back to back.
        expired_delay = 1.0
        while True:
            if self.relist_on is not None:
                self.relist_on.clear()  # this LIST reads with what changed
            try:
                version = await self._initial_state()
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
            if self.checking:
                self._checked()
            delay = 1.0
            listed_progress = self.last_progress
            try:
                await self._watch_until_relist(version)
            except _ExpiredError:
                self.metrics.watch_expirations.labels(kind=self.kind).inc()
                self._failed()  # no watch is up while the collection is listed again
                if self.last_progress != listed_progress:
                    expired_delay = 1.0
                    logger.info("watch of %s expired; listing again", self.path)
                else:
                    logger.warning(
                        "watch of %s expired before it moved past its listing; listing again in %.0fs",
                        self.path,
                        expired_delay,
                    )
                    await asyncio.sleep(expired_delay)
                    expired_delay = min(expired_delay * 2, MAX_BACKOFF_SECONDS)
            except _NoProgressError:
                self._failed()
                self.checking, self.missed = True, 0
                logger.info(
                    "watch of %s made no progress for %.0fs (no event or bookmark advanced its resourceVersion);"
                    " listing again",
                    self.path,
                    self.progress_timeout,
                )

    async def _initial_state(self) -> str:
        """The collection's objects and the version to watch from: a streaming list, or pages.

        Pages when the server has no streaming lists (from then on), and this once when the
        streaming list broke without an HTTP answer (cut, silent, a bad line), or in any way
        while it checks a watch without progress (``checking``): watches may be what is
        failing, and a LIST is another way in. What was read is tallied when it stops, however."""
        try:
            if self._pages_until is not None and self.streaming:
                self._pages_until = None
                logger.info("%s: asking for a streaming list again (the API server may have been upgraded)", self.path)
            if self.streaming:
                try:
                    return await self._stream_list()
                except _NoStreamingListError as reason:
                    self._pages_until = self.clock() + STREAMING_RETRY_SECONDS
                    logger.info(
                        "%s: no streaming list (%s); listing in pages, and asking again in %.0fs",
                        self.path,
                        reason,
                        STREAMING_RETRY_SECONDS,
                    )
                except KubeError as error:
                    if error.status is not None and not self.checking:
                        raise  # an HTTP answer (403, 429, 5xx...): a LIST would get the same
                    logger.warning("streaming list of %s broken (%s); listing in pages this time", self.path, error)
            return await self._list()
        finally:
            self._tally()

    async def _stream_list(self) -> str:
        """A WATCH with sendInitialEvents=true, up to its initial-events-end bookmark (the
        stream is then closed: the watch proper resumes from the bookmark's version). Each
        line is checked as a watch line is (``read_event``); a bad one fails the listing, which
        is retried with a backoff."""
        # The snapshot is taken when the request is served: the view is current as of then, not
        # as of the last object read (a million pods under churn take two minutes to read).
        requested = self.clock()
        self._listing_began()
        stream = self.client.watch(
            self.path,
            "",
            STREAMING_LIST_SECONDS,
            min(self.read_timeout, CHECK_STREAM_READ_TIMEOUT) if self.checking else self.read_timeout,
            on_open=self._opened,
            send_initial_events=True,
            unread=self.unread,
        )
        try:
            # Closed here, not by the loop's finalizer whenever that runs: the listing returns
            # with its stream still open (after the bookmark), or raises out of it.
            async with (
                contextlib.aclosing(stream),
                asyncio.timeout(STREAMING_LIST_SECONDS + STREAMING_LIST_GRACE_SECONDS),
            ):
                async for line in stream:
                    if isinstance(line, UnreadEvent):
                        self._listed_one(line.result)  # not in the keys: the retain drops what it stood for
                        continue
                    event = read_event(line, self.object_kind)
                    if event.type == "ADDED":
                        result = self._apply_listed(event.body)
                        self._listed_one(result)
                        if self.unread is not None:
                            self.unread.settled("ADDED", event.body, result == "applied")
                    elif event.type == "BOOKMARK" and _ends_initial_events(event.body):
                        # Judged as an event's version is: it becomes what the watch resumes from.
                        self._check_plausible(event.resource_version)
                        self._listing_ended(event.resource_version)
                        self.connected = True
                        self._progressed(event.resource_version, as_of=requested)
                        return event.resource_version
                    elif event.type == "ERROR":
                        code = event.body.get("code")
                        raise KubeError(
                            f"watch {self.path}: {_shown(event.body.get('message'), 200)}",
                            code if isinstance(code, int) else None,
                        )
                    else:
                        # A change or a plain bookmark before the end of the initial events: a server
                        # that ignored sendInitialEvents (its watch from "now" sends synthetic ADDs).
                        raise _NoStreamingListError(f"a {event.type} event before the initial-events-end bookmark")
        except TimeoutError:
            raise KubeError(
                f"streaming list of {self.path}: no initial-events-end bookmark within"
                f" {STREAMING_LIST_SECONDS + STREAMING_LIST_GRACE_SECONDS:.0f}s"
            ) from None
        except KubeError as error:
            if error.status in NO_STREAMING_LIST:
                raise _NoStreamingListError(str(error)) from None
            if isinstance(error, RejectedEventError | WatchLineError):
                # Counted and said as on the watch: a check of a watch without progress streams
                # too, and a bad line is as much the fault there (it is read in pages this time).
                self._rejected(error, "listing in pages this time")
            raise
        raise KubeError(f"streaming list of {self.path}: the stream ended before the initial-events-end bookmark")

    async def _watch_until_relist(self, version: str) -> None:
        """Watch from ``version`` until ``relist_on`` is set and ``_relist_needed`` (then
        return: the caller lists again), or the watch ends as it would without (expired, no
        progress, a crash).

        The watch runs in this task, so a cancellation from outside (kopf stops every task on
        its way out) ends it as before; a change announced meanwhile cancels it to ask for a
        LIST, and that one cancellation is taken back (``uncancel``), never one from outside.
        The change is heard by a callback, not by a waiting task: kopf gives every task started
        after it 5 s to end by itself before cancelling it, and a waiter would hold each
        shutdown that long."""
        relist_on = self.relist_on
        if relist_on is None:
            await self._watch_from(version)
            return
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        asked = False
        watching = True

        def check() -> None:
            # Run from the loop, after the change that announced it has been stored whole.
            nonlocal asked
            if not watching or asked or not relist_on.is_set():
                return
            relist_on.clear()
            if self._relist_needed():
                asked = True
                task.cancel(RELIST)

        def announced() -> None:
            loop.call_soon(check)

        stop_listening = relist_on.listen(announced)
        if relist_on.is_set():
            announced()  # a change announced while this collection was being listed
        try:
            await self._watch_from(version)
        except asyncio.CancelledError:
            if not asked or task.uncancel() > 0:
                raise  # stopped from outside (as well)
        finally:
            watching = False
            stop_listening()
        self._relisting()

    def _relist_needed(self) -> bool:
        """Whether what ``relist_on`` announced changes what this collection's facts say."""
        return True

    def _relisting(self) -> None:
        """Called before a LIST that ``relist_on`` asked for."""

    async def _list(self) -> str:
        version = ""
        requested = self.clock()  # the first page's snapshot is the version (as in _stream_list)
        self._listing_began()
        async for page in self.client.list_pages(self.path, self.page_size):
            metadata = page.get("metadata")
            if not version and isinstance(metadata, Mapping):
                version = str(metadata.get("resourceVersion") or "")
                self._check_plausible(version)  # before anything it lists is applied
            for item in page.get("items") or []:
                self._check_item(item)
                self._listed_one(self._apply_listed(item))
        self._listing_ended(version)
        self.connected = True
        self._progressed(version, as_of=requested)
        return version

    def _listed_one(self, result: str) -> None:
        """One more object read by the listing under way, counted as ``result``: tallied every
        LISTED_PER_TALLY objects and when the listing stops (``_tally``)."""
        self._untallied[result] = self._untallied.get(result, 0) + 1
        self._untallied_count += 1
        if self._untallied_count >= LISTED_PER_TALLY:
            self._tally()

    def _tally(self) -> None:
        """Count what the listing read since the last tally, and tell the trimmer. The trim comes
        as the listing goes, not at its end: on the real API server at 10,000 nodes, a relist of
        100,000 pods (bodies equal to what was held, so nothing kept) took the RSS up 8 MiB over
        its 8 s, and the trim at its end gave 6 MiB of that back (docs/performance.md, "A quiet
        watch checked by a streaming list, the relist trimmed as it goes")."""
        read, self._untallied_count = self._untallied_count, 0
        if not read:
            return
        for result, times in self._untallied.items():
            self._count(result, times)
        self._untallied.clear()
        if self.trimmer is not None:
            self.trimmer.done(read)
            self.trimmer.idle()

    def _check_item(self, item: Any) -> None:
        """A listed item that is not an object of the kind fails the LIST (retried), rather
        than the LIST's retain dropping what the item stood for."""
        if not isinstance(item, Mapping) or not isinstance(item.get("metadata"), Mapping):
            self._count("rejected")
            raise KubeError(f"LIST {self.path}: an item that is not an object with metadata")
        if item.get("kind") != self.object_kind:
            self._count("rejected")
            raise KubeError(f"LIST {self.path}: an item of kind {_shown(item.get('kind'))}, not {self.object_kind}")

    async def _watch_from(self, version: str) -> None:
        """Watch from ``version``, resuming from the last good version, until the version
        expires (_ExpiredError) or no progress comes for ``progress_timeout`` (_NoProgressError)."""
        try:
            async with asyncio.timeout(self.progress_timeout) as deadline:
                self._deadline = deadline
                await self._resume_from(version)
        except TimeoutError:
            if self._deadline is not None and self._deadline.expired():
                raise _NoProgressError from None
            raise
        finally:
            self._deadline = None

    async def nudge_while_quiet(self) -> None:
        """Nudge the watch (NUDGE_SELECTOR) once it has been up and without progress for
        ``nudge_after``: once per quiet spell, as the bookmark at the end of the watch request
        then advances; again only if the nudge failed. A nudge is not progress: only the
        bookmark it brings is. A task of its own for the informer's whole life, started with
        the informers' (kopf waits for, then cancels, every task started after it), and never
        ending by itself: without nudges it waits to be cancelled."""
        while (after := self.nudge_after) is not None:
            due = after if self.last_progress is None else self.last_progress + after - self.clock()
            if due > 0:
                await asyncio.sleep(due)
                continue
            # Only a watch that is up (the progress deadline is set only while watching): an
            # absent kind, or one being listed, is not nudged.
            if self.nudged_at is not None or self._deadline is None or not self.connected:
                await asyncio.sleep(after)  # for the progress, or a watch to be up (again)
                continue
            try:
                await self.client.get(self.path, {"fieldSelector": NUDGE_SELECTOR})
            except KubeError as error:
                logger.debug("nudging the watch of %s failed: %s", self.path, error)
                self.metrics.watch_nudges.labels(kind=self.kind, result="failed").inc()
                await asyncio.sleep(after)
                continue
            self.nudged_at = self.clock()
            self.metrics.watch_nudges.labels(kind=self.kind, result="sent").inc()
            logger.debug("nudged the watch of %s, quiet for %.0fs", self.path, after - due)
        await asyncio.get_running_loop().create_future()

    def _nudge_answered(self, opened: float) -> None:
        """A watch request opened at ``opened`` was ended by the server (its timeoutSeconds).
        Its last bookmark comes BOOKMARK_LEAD before its end, if the server's version for the
        kind moved: a nudge during the request, before that, with no progress since, says this
        server's cache does not move for nudges. The quiet spells are then left to the check."""
        at = self.nudged_at
        if self.nudge_after is None or at is None or not opened <= at <= self.clock() - BOOKMARK_LEAD:
            return
        self.nudge_after = None
        self.metrics.watch_nudges.labels(kind=self.kind, result="gave_up").inc()
        logger.info(
            "the watch of %s was nudged, and its request ended with no bookmark that advanced: its quiet spells"
            " are checked by a LIST from now on",
            self.path,
        )

    async def _resume_from(self, version: str) -> None:
        delay = 1.0
        self.version = version
        while True:
            opened = self.clock()
            progress = self.last_progress
            stream = self.client.watch(
                self.path,
                self.version,
                self.watch_seconds,
                self.read_timeout,
                on_open=self._opened,
                unread=self.unread,
            )
            try:
                # Closed as the loop is left, however: a rejected line or an expiry leaves the
                # stream open, and its connection held until the finalizer would run.
                async with contextlib.aclosing(stream):
                    async for line in stream:
                        if isinstance(line, UnreadEvent):
                            self._take_unread(line)
                        else:
                            event = read_event(line, self.object_kind)
                            result = self._take(event)
                            if self.unread is not None:
                                self.unread.settled(event.type, event.body, result == "applied")
                        if self.watch_trimmer is not None:
                            self.watch_trimmer.done()
                            self.watch_trimmer.idle()
                if self.clock() - opened < SHORT_WATCH_SECONDS and self.last_progress == progress:
                    # Ended at once having moved nothing (a front end that does not stream, a
                    # server shutting down): as client-go does with a "very short watch", a
                    # failure to back off from, not a healthy end to resume from at once.
                    raise KubeError(f"watch {self.path}: the stream ended at once, with nothing in it")
                delay = 1.0  # the server closed a healthy stream (timeoutSeconds): resume
                self._nudge_answered(opened)
            except (RejectedEventError, WatchLineError) as rejected:
                self._rejected(rejected, f"resuming from resourceVersion {self.version}")
                self._failed()
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_SECONDS)
            except KubeError as error:
                if error.status == 410 or TOO_LARGE_RESOURCE_VERSION in str(error):
                    raise _ExpiredError from None
                self._failed()
                logger.warning("watch of %s interrupted: %s; resuming in %.0fs", self.path, error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_SECONDS)

    def _take(self, event: WatchEvent) -> str | None:
        """Apply one event; what it counted as (None: a bookmark)."""
        if event.type == "ERROR":
            code = event.body.get("code")
            if code == 410:
                raise _ExpiredError
            raise KubeError(
                f"watch {self.path}: {_shown(event.body.get('message', ''), 200)}",
                code if isinstance(code, int) else None,
            )
        self._check_plausible(event.resource_version)
        result = None
        if event.type != "BOOKMARK":
            result = self._apply(event.type, event.body)
            self._count(result)
        if self._advances(event.resource_version):
            self._progressed(event.resource_version, newest=event.type == "BOOKMARK")
        return result

    def _take_unread(self, event: UnreadEvent) -> None:
        """A new object that concerns nothing read here, or a change that moved nothing read
        here: only its version counts."""
        self._check_plausible(event.resource_version)
        self._count(event.result)
        if self._advances(event.resource_version):
            self._progressed(event.resource_version, newest=False)

    def _rejected(self, rejected: RejectedEventError | WatchLineError, next_step: str) -> None:
        self._count("rejected")
        name = rejected.name if isinstance(rejected, RejectedEventError) else ""
        if self.said.first_time(f"stream: {rejected.cause}"):
            detail = rejected.detail if isinstance(rejected, RejectedEventError) else str(rejected)
            logger.error(
                "watch of %s: rejected a line (%s%s%s); %s"
                ' (said once per cause; fabriccap_watch_events_total{kind="%s",result="rejected"} counts them)',
                self.path,
                rejected.cause,
                f": {detail}" if detail else "",
                f", object {name}" if name else "",
                next_step,
                self.kind,
            )

    def _apply(self, event_type: str, body: Mapping[str, Any]) -> str:
        """Apply one listed item or event; the result it counts as (applied, ignored, rejected)."""
        raise NotImplementedError

    def _listing_began(self) -> None:
        """A LIST (streamed or in pages) begins, for the line rule and the subclass."""
        if self.unread is not None:
            self.unread.listing_began()
        self._begin_listing()

    def _listing_ended(self, version: str) -> None:
        """The LIST is done, for the line rule (a paged LIST settles nothing in it, so the rule
        starts afresh) and the subclass."""
        if self.unread is not None:
            self.unread.listing_ended()
        self._listed(version)

    def _begin_listing(self) -> None:
        """A LIST begins: what it names is crossed off in ``_apply_listed``."""
        raise NotImplementedError

    def _apply_listed(self, body: Mapping[str, Any]) -> str:
        """Apply one listed item; the result it counts as."""
        raise NotImplementedError

    def _listed(self, version: str) -> None:
        """The LIST is done: what it did not name is gone."""
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
    # ``path`` in each API version the kind may be served in, newest first
    # (``WatchedKind.versioned_paths``: one for most kinds; empty: only ``path``). A 404 moves
    # the informer to the next; past the last the kind is absent, and it looks again from the
    # newest.
    versioned_paths: tuple[str, ...] = ()
    # What the DeviceClasses' state was last said to be (a class broken, missing, stood in for
    # by a copy): each line once while it holds, again if it comes back.
    said_classes: set[str] = field(default_factory=set)
    # Selector failures on devices already logged, per (class, cause): once each, however many
    # devices and slices share it, until what the classes select changes.
    said_failures: set[tuple[str, str]] = field(default_factory=set)
    # The classes' signature the last LIST read the slices with (FactsExtractor.selection_signature).
    read_with: Hashable = None
    # Set once the kinds this one is read with have been listed (``kinds.listed_first``): the
    # first LIST waits for them (build_informers).
    listed_after: tuple[asyncio.Event, ...] = ()
    # The path whose 404 began the refusals under way (None: the last LIST was answered): the
    # kind is absent only once every version from the newest on has answered 404.
    _refused_from: str | None = field(default=None, init=False)
    # Per facet, the keys held when the LIST under way began that it has not named yet
    # (``WatchedKind.unlisted``): forgotten when it ends.
    _unlisted: tuple[UnlistedKeys[Any], ...] = field(default=(), init=False)

    @property
    def kind(self) -> str:
        return self.watched.label

    @property
    def object_kind(self) -> str:
        return self.watched.kind

    async def run(self) -> None:
        # The slices wait for the DeviceClasses and DeviceTaintRules, small collections listed
        # in a request or two: read before them, with the profile's copy of the classes and no
        # rule, the first round would count the devices a rule takes out, and every slice would
        # be listed again once they came. Later changes to them list the slices again (relist_on).
        for listed in self.listed_after:
            await listed.wait()
        await super().run()

    async def _list_refused(self, error: KubeError) -> bool:
        if error.status == 404 and self.watched.optional:
            if self._refused_from is None:
                self._refused_from = self.path
            older = self._older_path()
            if older is not None:
                # Said once per outage, not at every look again.
                level = logging.DEBUG if self.absent else logging.INFO
                logger.log(level, "%s is not served: trying %s", self.path, older)
                self.path = older
                return True
            if self.versioned_paths and self._refused_from != self.versioned_paths[0]:
                # The version read went away (a control plane upgraded past it): the rules may be
                # served in a newer one, looked for at once. Absent, they would be forgotten for
                # absent_recheck_seconds, and an absent kind is never stale (fail open).
                logger.info("%s is not served any more: trying %s", self.path, self.versioned_paths[0])
                self.path, self._refused_from = self.versioned_paths[0], None
                return True
            self._refused_from = None
            await self._absent()
            if self.versioned_paths:
                self.path = self.versioned_paths[0]  # the next look starts from the newest
            return True
        return False

    def _older_path(self) -> str | None:
        """The collection in the next older version after ``path``, if there is one."""
        if self.path not in self.versioned_paths:
            return None
        position = self.versioned_paths.index(self.path) + 1
        return self.versioned_paths[position] if position < len(self.versioned_paths) else None

    def _served(self) -> None:
        self._refused_from = None
        if self.absent:
            self.absent = False
            logger.info("%s is served now: reading %s", self.path, _plural(self.watched.kind))

    async def _absent(self) -> None:
        """The API server answered 404 for an optional kind: it does not serve it (one log line,
        not a retry storm). The answer is contact, so the kind counts as listed, empty."""
        if not self.absent:
            logger.info(
                "%s is not served (%s): carrying on without %s, looking again every %.0fs",
                self.path,
                self.watched.absent_because,
                _plural(self.watched.kind),
                self.absent_recheck_seconds,
            )
        self.absent = True
        self.watched.forget(self.store, self.watched.unlisted(self.store, self.scope))
        self._say_classes()
        self.last_progress = self.clock()
        self.connected = True
        self.listed.set()
        await asyncio.sleep(self.absent_recheck_seconds)

    async def _initial_state(self) -> str:
        # Streamed or paged, the facts are read with the classes as they are now.
        if self.watched.read_with_classes:
            self.read_with = self.extractor.selection_signature(self.store.class_view())
        return await super()._initial_state()

    def _begin_listing(self) -> None:
        self._unlisted = self.watched.unlisted(self.store, self.scope)

    def _apply_listed(self, body: Mapping[str, Any]) -> str:
        keys = self.watched.keys(body)
        self.watched.cross_off(self._unlisted, keys)
        return self._upsert(body, keys)[0]

    def _listed(self, version: str) -> None:
        held = self._held_count() if self.checking else 0
        unlisted, self._unlisted = self._unlisted, ()
        self.watched.forget(self.store, unlisted)
        if self.checking:
            self.missed += held - self._held_count()  # deletions the watch had not delivered
        self._say_classes()

    def _held_count(self) -> int:
        return sum(len(self.store.held(facet.table)) for facet in self.watched.facets)

    def _relist_needed(self) -> bool:
        if not self.watched.read_with_classes:
            return True  # nodes joined this shard's pools: their pods were not held
        # A class edited in a way that selects the same (its labels, its extendedResourceName)
        # leaves every slice's facts as they are: no LIST, no new log lines.
        return self.extractor.selection_signature(self.store.class_view()) != self.read_with

    def _relisting(self) -> None:
        if not self.watched.read_with_classes:
            logger.info(
                "nodes moved into the pools of %s: listing %s again for the pods bound to them",
                self.store.shard,
                self.path,
            )
            return
        logger.info(
            "DeviceClasses or DeviceTaintRules changed: listing %s again to read them with what they say now",
            self.path,
        )
        self.said_failures.clear()

    def _say_classes(self) -> None:
        """Log how the DRA fabrics' classes stand, when that changed: a class that selects
        nothing (it does not compile, or there is none to be had) or one counted from the
        profile's copy because the cluster lacks it (a DeviceClass deleted mid-run)."""
        if not self.watched.says_selection:
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
                    ] = logging.INFO  # a cluster without DRANET has none: nothing wrong yet
        for line, level in lines.items():
            if line not in self.said_classes:
                logger.log(level, "%s", line)
        self.said_classes = set(lines)

    def _say_failures(self, held: list[Any]) -> None:
        """Selector failures on a slice's devices: one line per (class, cause), however many
        devices and slices share it, with one example."""
        for facts in held:
            for _fabric, count in getattr(facts, "devices", ()):
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
                        facts.name,
                        facts.node_name,
                        on_selector_failure(error.cause),
                    )

    def _apply(self, event_type: str, body: Mapping[str, Any]) -> str:
        if event_type == "DELETED":
            self.watched.delete(self.store, body)
            self._say_classes()
            return "applied"
        return self._upsert(body)[0]

    def _upsert(self, body: Mapping[str, Any], keys: tuple[Any, ...] | None = None) -> tuple[str, list[Any]]:
        """Hold the object's facts: the result it counts as, and what each facet holds now
        (empty when it is left out). ``keys``: the object's (``WatchedKind.keys``), if known."""
        keys = self.watched.keys(body) if keys is None else keys
        before = self.watched.held(self.store, keys)
        try:
            after = self.watched.upsert(self.store, self.extractor, body, keys)
        except IgnoredObjectError as error:
            # Well-formed but of no use (a slice of every node): said once, left out.
            if self.said.first_time(str(error)):
                logger.warning("ignoring %s: %s", self.kind, error)
            self.watched.delete(self.store, body)
            return "ignored", []
        except FactsError as error:
            # One malformed object must not stop the watch; it is left out (fail-closed).
            if self.said.first_time(str(error)):
                logger.error("ignoring %s: %s", self.kind, error)
            self.watched.delete(self.store, body)
            return "rejected", []
        if self.checking and after != before:
            self.missed += 1  # compared only in the LIST that replaced a watch without progress
        # What is wrong in an object kept anyway is said when it changes, not on every event:
        # a driver republishes its slices often, a node heartbeats.
        for problem in self.watched.new_problems(before, after):
            logger.log(problem.level, "%s", problem.message)
        self._say_classes()
        if self.watched.read_with_classes:
            self._say_failures(after)
        return "applied", after


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
    # A backstop, not the facts' freshness: a watch that fails the same way on every resume (a
    # 500 each time, a version it rejects each time) would otherwise never list again, and an
    # object deleted meanwhile would stay unnoticed. On a quiet cluster nothing moves these
    # objects' version, so this is also how often they are listed again then.
    progress_timeout: float | None = field(default_factory=lambda: PUBLISHED_PROGRESS_TIMEOUT)
    missing_delay: float = 1.0
    # The names the LIST under way has named (a few thousand at most: one object per pool).
    _names: set[str] = field(default_factory=set, init=False)

    @property
    def kind(self) -> str:
        return "fabriccapability"

    @property
    def object_kind(self) -> str:
        return FABRIC_CAPABILITIES.kind

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

    def _apply(self, event_type: str, body: Mapping[str, Any]) -> str:
        self.observer.observe_published(dict(body), deleted=event_type == "DELETED")
        return "applied"

    def _begin_listing(self) -> None:
        self._names = set()

    def _apply_listed(self, body: Mapping[str, Any]) -> str:
        self._names.add(object_key(body))
        return self._apply("ADDED", body)

    def _listed(self, version: str) -> None:
        names, self._names = self._names, set()
        self.observer.forget_unlisted(names, version)


def watch_timings(stale_after: float) -> tuple[int, float, float, float]:
    """(watch request seconds, read timeout, progress timeout, quiet time before a nudge) for a
    staleness threshold.

    A watch request lasts 0.4 x the threshold, and the API server sends a bookmark 2 s before
    its end once its own resourceVersion for the kind has moved, so a watch of a kind that is
    written proves itself within each request. One that nothing writes hears nothing until etcd
    reports progress (not within 75 s on the benchmarks' control plane). A watch with no
    progress for 0.5 x is replaced by a LIST (CHECK_STREAM_READ_TIMEOUT), which leaves time for
    the LIST before the view counts as stale; a stream silent for 0.6 x is dropped as stalled
    by the client itself.
    A watch without progress for 0.05 x is nudged: the bookmark at the end of the watch request
    under way, at most 0.4 x later, then advances, before the 0.5 x that would list again.
    150 s gives 60 s, 90 s, 75 s and 7.5 s.
    """
    return (
        max(int(stale_after * 0.4), 1),
        max(stale_after * 0.6, 1.0),
        max(stale_after * 0.5, 1.0),
        max(stale_after * 0.05, 0.1),
    )


def build_informers(
    client: KubeClient,
    store: FactStore,
    extractor: FactsExtractor,
    metrics: OperatorMetrics,
    stale_after: float = 150.0,
    rows: tuple[WatchedKind, ...] = WATCHED_KINDS,
) -> list[Informer]:
    """One informer per watched kind and scope: each row says in which scopes it is listed."""
    watch_seconds, read_timeout, progress_timeout, nudge_after = watch_timings(stale_after)
    wanted = kinds_for(extractor.config, rows)
    said = {watched.label: SaidOnce() for watched in wanted}
    trimmer = MemoryTrimmer(min_work=MIN_LISTED_BETWEEN_TRIMS)
    watch_trimmer = MemoryTrimmer(min_work=MIN_LINES_BETWEEN_TRIMS, min_seconds=MIN_SECONDS_BETWEEN_TRIMS)
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
            progress_timeout=progress_timeout,
            nudge_after=nudge_after,
            page_size=watched.page_size,
            said=said[watched.label],
            trimmer=trimmer,
            watch_trimmer=watch_trimmer,
            unread=watched.unread_rule(extractor),
            versioned_paths=watched.versioned_paths(scope),
        )
        for watched in wanted
        for scope, path in watched.paths(extractor.config)
    ]
    # The slices are first listed once the classes and rules have been (kinds.listed_first),
    # and listed again when what they select or taint changes.
    # A shard lists the pods again when nodes move into its pools (controller.store).
    for informer in informers:
        first = listed_first(informer.watched, wanted)
        informer.listed_after = tuple(other.listed for other in informers if other.watched in first)
        if informer.watched.read_with_classes:
            informer.relist_on = store.classes_changed
        elif informer.watched.bound_to_nodes and store.shard.sharded:
            # One announcement each: an informer clears its own when it lists (plugin pods
            # are listed per namespace, and each must list again).
            joined = informer.relist_on = Announcement()
            store.nodes_joined.listen(joined.set)
    return informers


def _plural(kind: str) -> str:
    """A kind's English plural for log lines (EC2NodeClasses, not EC2NodeClasss)."""
    return f"{kind}es" if kind.endswith("s") else f"{kind}s"
